"""The compiled maximal-coordinate step (``_kernels.c``); every array argument is a
C-contiguous float64 buffer, packed and sized by ``multibody.compiled``."""

import numpy as np
from numpy.typing import NDArray

Buffer = NDArray[np.float64]

def workspace_size(model: Buffer) -> int: ...
def step(model: Buffer, work: Buffer, positions: Buffer, quaternions: Buffer, momenta: Buffer,
         multipliers: Buffer, torques: Buffer, commands: Buffer, duals: Buffer, slacks: Buffer,
         flags: int, out_positions: Buffer, out_quaternions: Buffer, out_multipliers: Buffer,
         out_momenta: Buffer, out_torques: Buffer, out_impulses: Buffer, out_duals: Buffer,
         out_slacks: Buffer) -> tuple[int, int, int]: ...
def contact_gaps(model: Buffer, positions: Buffer, quaternions: Buffer, out: Buffer) -> None: ...
def joint_angle(parent: Buffer, child: Buffer, orientation: Buffer, axis: Buffer) -> float: ...
