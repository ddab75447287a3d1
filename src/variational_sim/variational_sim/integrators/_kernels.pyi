"""Compiled DQVI and QVI steps (``_kernels.c``); the Python integrators are the reference."""

from collections.abc import Sequence

from typing_extensions import Buffer

Numbers = Buffer | Sequence[float]
"""A C-contiguous float64 buffer, or any sequence of numbers (converted)."""

SolveReport = tuple[int, int, int, float, float, float, int, float]
"""``(code, iterations, jacobians, residual, target_norm, rate_step, lapack_info,
rho_squared)``; code 0 solved, 1 iteration limit, 2 singular Jacobian, 3 no descent."""

def dqvi_step(body: Numbers, h: float, tolerance: float, max_iterations: int,
              reuse_below: float, chord_contraction: float, pose: Numbers, momentum: Numbers,
              inputs: Numbers | None, pose_out: Buffer, momentum_out: Buffer) -> SolveReport: ...
def dqvi_solve(body: Numbers, tolerance: float, max_iterations: int, reuse_below: float,
               chord_contraction: float, target: Numbers, out: Buffer) -> SolveReport: ...
def qvi_step(scheme: int, coefficients: Numbers, h: float, coupling_factor: float,
             tolerance: float, max_iterations: int, attitude: Numbers, position: Numbers,
             velocity: Numbers, rate: Numbers, momentum: Numbers, inputs: Numbers | None,
             out: Buffer) -> tuple[int, int]:
    """One QVI step (scheme 0 left rectangle, 1 midpoint) into ``out`` (23: attitude,
    position, velocity, rate, interval attitude, momentum); ``(code, iterations)``, code
    0 solved, 1 no convergence, 2 singular Jacobian."""
