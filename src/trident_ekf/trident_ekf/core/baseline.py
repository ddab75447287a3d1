"""Conventional multiplicative ESKF: quaternion attitude, ECEF velocity and position.

Same inputs, interface, noise model and update machinery as the trident filter, so the
two can be cross-checked and benchmarked. Error state (docs/theory/trident-ekf.md §5.6,
reordered to match the trident filter): dx = [phi^b, v_hat - v, p_hat - p, db_g, db_a]
with q = q_hat exp(phi/2), then the GNSS position bias error with the bias states of the
shared base.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.scalar import Quaternion, Vector3, exp_with_jacobian, multiply, to_matrix
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.earth import OMEGA_ECEF, gravity_gradient
from trident_ekf.core.filter import (
    ATT,
    BG,
    POS,
    VEL,
    ErrorStateFilter,
)
from trident_ekf.core.measurements.base import AidingSource
from trident_ekf.core.mechanization import ConventionalIntegrator
from trident_ekf.core.skew import (
    block_flat_indices,
    skew,
    skew_flat_indices,
    skew_flat_values,
)

_kernels = load_kernels("trident_ekf.core._kernels")  # used when ErrorStateFilter.compiled


class BaselineESKF(ErrorStateFilter):
    """The textbook ECEF error-state filter the trident EKF is compared against."""

    _NOMINAL_FIELDS = ("_q", "_v", "_p")

    def __init__(self, config: FilterConfig | None = None,
                 sources: Sequence[AidingSource] = ()) -> None:
        super().__init__(config, sources)
        self._integrator = ConventionalIntegrator()
        self._q: Quaternion = (0.0, 0.0, 0.0, 1.0)
        self._v: Vector3 = (0.0, 0.0, 0.0)
        self._p: Vector3 = (0.0, 0.0, 0.0)
        self._F[ATT, BG] = -np.eye(3)
        self._F[POS, VEL] = np.eye(3)
        self._F[VEL, VEL] = -2.0 * skew(OMEGA_ECEF)
        dim = self.state_dim
        self._fill_index = np.array(
            skew_flat_indices(0, 0, dim) + block_flat_indices(3, 0, dim)
            + block_flat_indices(3, 6, dim) + block_flat_indices(3, 12, dim)
        )

    def _set_nominal(self, q: FloatArray, v: FloatArray, p: FloatArray) -> None:
        self._q = (float(q[0]), float(q[1]), float(q[2]), float(q[3]))
        self._v = (float(v[0]), float(v[1]), float(v[2]))
        self._p = (float(p[0]), float(p[1]), float(p[2]))

    def nominal(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        return np.array(self._q), np.array(self._v), np.array(self._p)

    def _step(self, omega: Vector3, force: Vector3, dt: float) -> None:
        self._q, self._v, self._p = self._integrator.step(
            self._q, self._v, self._p, omega, force, dt
        )

    def _advance(self, omega: Vector3, force: Vector3, dt: float) -> None:
        self._q, self._v, self._p = _kernels.conventional_propagate(  # type: ignore[union-attr]
            self._q, self._v, self._p, omega, force, dt, self._sampling_rates, self._acc)

    def _flush_compiled(self, position_limit: float) -> bool:
        return bool(_kernels.conventional_flush(  # type: ignore[union-attr]
            self.covariance, self._F, self._q_error, self._acc, self._q, self._p,
            position_limit))

    def _fill_error_dynamics(self, F: FloatArray, omega: Vector3, force: Vector3) -> None:
        """F of §5.6: phi' = -[w x]phi - db_g; dv' = C[f x]phi - 2[W x]dv + G dp + C db_a.

        Written through flat indices in one numpy call, like the trident filter's F_L.
        """
        C = to_matrix(self._q)
        f0, f1, f2 = force
        c_skew_f = []
        for row in C:
            c_skew_f += [row[1] * f2 - row[2] * f1, row[2] * f0 - row[0] * f2,
                         row[0] * f1 - row[1] * f0]
        F.flat[self._fill_index] = [
            *skew_flat_values(-omega[0], -omega[1], -omega[2]),
            *c_skew_f,
            *gravity_gradient(self._p).ravel().tolist(),
            *C[0], *C[1], *C[2],
        ]

    def navigation_error_block(self, rotation: FloatArray) -> FloatArray:
        return np.eye(3)

    def _attitude_key(self) -> tuple[float, ...]:
        return self._q

    def _inject(self, dx: Sequence[float]) -> None:
        """q <- q exp(phi/2), v <- v - dv, p <- p - dp."""
        dx = [float(c) for c in dx]
        if self.compiled:
            self._q, self._v, self._p = _kernels.conventional_inject(  # type: ignore[union-attr]
                self._q, self._v, self._p, dx)
            return
        dq, _, _ = exp_with_jacobian((dx[0], dx[1], dx[2]))
        q = multiply(self._q, dq)
        n = sum(c * c for c in q) ** -0.5
        self._q = (q[0] * n, q[1] * n, q[2] * n, q[3] * n)
        v, p = self._v, self._p
        self._v = (v[0] - dx[3], v[1] - dx[4], v[2] - dx[5])
        self._p = (p[0] - dx[6], p[1] - dx[7], p[2] - dx[8])

    def _navigation_error(self, q: ArrayLike, v: ArrayLike, p: ArrayLike) -> FloatArray:
        q_hat, v_hat, p_hat = self.nominal()
        attitude = quaternion.to_rotation_vector(
            quaternion.multiply(quaternion.conjugate(q_hat), np.asarray(q, dtype=float))
        )
        return np.concatenate([
            attitude,
            v_hat - np.asarray(v, dtype=float),
            p_hat - np.asarray(p, dtype=float),
        ])

    def conventional_jacobian(self) -> FloatArray:
        return np.eye(self.state_dim)
