"""Compiled kernels of mav_dynamics (``_kernels.c``): C-contiguous float64 buffers of fixed
sizes in, outputs written in place; each is one call of the numpy code it replaces."""

import numpy as np
from numpy.typing import NDArray

Buffer = NDArray[np.float64]

MAX_BODIES: int

def tracking_wrench(
    rotation: Buffer, position: Buffer, twist: Buffer, reference_position: Buffer,
    reference_velocity: Buffer, reference_acceleration: Buffer, reference_jerk: Buffer,
    reference_attitude: Buffer, reference_angular_velocity: Buffer,
    reference_angular_acceleration: Buffer, gain_position: Buffer, gain_velocity: Buffer,
    gain_attitude: Buffer, gain_angular_rate: Buffer, locked_inertia: Buffer, gravity: Buffer,
    align: Buffer, out: Buffer, fully_actuated: bool, /,
) -> None: ...
def tree_evaluate(
    bodies: Buffer, wings: Buffer, drag: Buffer, rotation: Buffer, twist: Buffer, q: Buffer,
    dq: Buffer, ddq: Buffer, wind: Buffer, gravity: Buffer, acceleration: Buffer,
    locked: Buffer, rotor_wrench: Buffer, twists: Buffer, adjoints: Buffer,
    body_accelerations: Buffer, torques: Buffer, residual: Buffer, torques_wanted: bool, /,
) -> None: ...
def allocate_exact(
    pseudo_inverse: Buffer, matrix: Buffer, projector: Buffer, slots: Buffer, u_min: Buffer,
    u_max: Buffer, tilt_min: Buffer, tilt_max: Buffer, low: Buffer, high: Buffer,
    wrench: Buffer, speeds: Buffer, tilts: Buffer, achieved: Buffer, unallocated: Buffer,
    saturated_rotors: Buffer, saturated_tilts: Buffer, tolerance: float, /,
) -> int: ...
def wing_link_wrench(wing: Buffer, air_twist: Buffer, out: Buffer, /) -> None: ...
