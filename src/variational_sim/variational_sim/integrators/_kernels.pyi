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
def plant_wrench(allocation: Buffer, rotor_speeds: Numbers, twist: Numbers,
                 drag: Numbers | None, rows: Sequence[Numbers], wind: Numbers | None
                 ) -> list[float]:
    """Rotor and drag body wrench ``(m, f)`` of ``MultirotorPlant.applied_wrench``."""
def plant_advance(constants: Numbers, h: float, held: Numbers, twist: Numbers,
                  rows: Sequence[Numbers], position: Numbers, pose: Numbers,
                  momentum: Numbers, work: float, impulse: Numbers
                  ) -> tuple[list[float], tuple[tuple[tuple[float, float, float],
                                                      tuple[float, float, float],
                                                      tuple[float, float, float]],
                                                tuple[float, float, float]],
                             float, list[float]]:
    """``MultirotorPlant.step``'s bookkeeping after the integrator: ``(twist, (rows,
    position), work, impulse)`` at the new node."""
def lag_step(values: Numbers, targets: Numbers, decay: Numbers) -> list[float]:
    """``c + (s - c) a`` per element: one ``RotorMotors.step``."""
def plant_accelerations(constants: Numbers, rows: Sequence[Numbers], held: Numbers,
                        twist: Numbers, momentum: Numbers
                        ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """``MultirotorPlant.accelerations`` in flight: body angular and ENU accelerations."""
def enu_to_geodetic(east: float, north: float, up: float, latitude0: float,
                    longitude0: float, height0: float, a: float, b: float
                    ) -> tuple[float, float, float]:
    """``pymap3d.enu2geodetic`` of one point on the ellipsoid of axes ``a >= b`` (m)."""
def imu_reading(constants: Numbers, rotation: Sequence[Numbers], angular_velocity_body: Numbers,
                angular_acceleration_body: Numbers, acceleration_enu: Numbers,
                gravity_enu: Numbers, velocity_enu: Numbers | None, normals: Numbers,
                gyro_bias: Numbers, accel_bias: Numbers, spike: Numbers | None,
                gyro_range: float, accel_range: float
                ) -> tuple[tuple[float, float, float], tuple[float, float, float], bool]:
    """``ImuModel.sample``'s reading from the drawn biases and white normals."""
def adjoints_apply(adjoints: Buffer, twist: Numbers, out: Buffer) -> None:
    """``out[k] = adjoints[k] @ twist`` for ``(count, 6, 6)`` adjoints into ``(count, 6)``."""
def adjoints_transpose_sum(adjoints: Buffer, wrenches: Buffer) -> list[float]:
    """The sum over ``k`` of ``adjoints[k].T @ wrenches[k]``."""
