"""The trident-quaternion left-error EKF (paper sections III-IV, corrected as described in
docs/theory/trident-ekf.md, whose section numbers (§) are cited below).

Error state dx_L = [dsigma, dsigma', dsigma'', db_g, db_a]: body-frame attitude error
(q = q_hat exp(dsigma/2)), body-frame velocity and position errors truth - estimate
(dsigma' = C_hat^T (v - v_hat)), and bias errors estimate - truth (then the GNSS
position bias error, with the bias states of the shared base).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.nilpotent import TRIDENT
from mav_geometry.scalar import (
    Vector3,
    exp_with_jacobian,
    multiply,
    pure_multiply,
    rotate,
    to_matrix,
    unpack_translation,
)
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.earth import EARTH_RATE, GM
from trident_ekf.core.filter import (
    ATT,
    BA,
    BG,
    POS,
    VEL,
    ErrorStateFilter,
)
from trident_ekf.core.measurements.base import AidingSource
from trident_ekf.core.mechanization import Trident, TridentIntegrator, normalize_trident
from trident_ekf.core.skew import (
    block_flat_indices,
    skew_flat_indices,
    skew_flat_values,
)

_kernels = load_kernels("trident_ekf.core._kernels")  # used when ErrorStateFilter.compiled


class TridentEKF(ErrorStateFilter):
    """15-state (18 with the GNSS bias) EKF whose nominal state is one unit trident
    quaternion (12 floats)."""

    _NOMINAL_FIELDS = ("_x",)
    body_axis_errors = True

    def __init__(self, config: FilterConfig | None = None,
                 sources: Sequence[AidingSource] = ()) -> None:
        super().__init__(config, sources)
        self._integrator = TridentIntegrator()
        self._x: Trident = tuple(TRIDENT.identity())
        # Constant blocks of F_L: -I on the bias errors, I from velocity to position.
        self._F[ATT, BG] = -np.eye(3)
        self._F[VEL, BA] = -np.eye(3)
        self._F[POS, VEL] = np.eye(3)
        dim = self.state_dim
        self._fill_index = np.array(
            skew_flat_indices(0, 0, dim) + skew_flat_indices(3, 0, dim)
            + skew_flat_indices(3, 3, dim) + skew_flat_indices(6, 6, dim)
            + block_flat_indices(3, 6, dim)
        )

    @property
    def trident(self) -> NDArray[np.float64]:
        """The unit trident quaternion [P, D1, D2] (12 floats, scalar-last parts)."""
        return np.array(self._x)

    def _set_nominal(self, q: FloatArray, v: FloatArray, p: FloatArray) -> None:
        self._x = tuple(float(c) for c in TRIDENT.pack(q, v, p))

    def nominal(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Unpack (17): q = P, v = 2 vec(D1 P*), p = 2 vec(D2 P*)."""
        x = self._x
        P = (x[0], x[1], x[2], x[3])
        v = unpack_translation((x[4], x[5], x[6], x[7]), P)
        p = unpack_translation((x[8], x[9], x[10], x[11]), P)
        return np.array(P), np.array(v), np.array(p)

    def _step(self, omega: Vector3, force: Vector3, dt: float) -> None:
        self._x = self._integrator.step(self._x, omega, force, dt)

    def _advance(self, omega: Vector3, force: Vector3, dt: float) -> None:
        self._x = _kernels.trident_propagate(  # type: ignore[union-attr]
            self._x, omega, force, dt, self._sampling_rates, self._acc)

    def _flush_compiled(self, position_limit: float) -> bool:
        return bool(_kernels.trident_flush(  # type: ignore[union-attr]
            self.covariance, self._F, self._q_error, self._acc, self._x, position_limit))

    def _fill_error_dynamics(self, F: FloatArray, omega: Vector3, force: Vector3) -> None:
        """Corrected F_L (§5.3): block (2,1) -[f x], block (2,3) C^T Gamma C.

        Written entry by entry through flat indices (one numpy call): 15x15 blocks
        assigned one by one cost more than the arithmetic.
        """
        x = self._x
        P = (x[0], x[1], x[2], x[3])
        C = to_matrix(P)
        w0, w1, w2 = omega
        e0, e1, e2 = (c * EARTH_RATE for c in C[2])  # C^T Omega, Omega along ECEF z
        # C^T Gamma C = (k + W^2) I - 3k u u^T - W^2 e e^T in body axes (u: unit position).
        px, py, pz = unpack_translation((x[8], x[9], x[10], x[11]), P)
        r2 = px * px + py * py + pz * pz
        k = -GM / (r2 * math.sqrt(r2))
        scale = 1.0 / math.sqrt(r2)
        u = rotate((-P[0], -P[1], -P[2], P[3]), (px * scale, py * scale, pz * scale))
        c = C[2]
        w2e = EARTH_RATE * EARTH_RATE
        gradient = [(k + w2e) * (i == j) - 3.0 * k * u[i] * u[j] - w2e * c[i] * c[j]
                    for i in range(3) for j in range(3)]
        F.flat[self._fill_index] = [
            *skew_flat_values(-w0, -w1, -w2),
            *skew_flat_values(-force[0], -force[1], -force[2]),
            *skew_flat_values(-w0 - e0, -w1 - e1, -w2 - e2),
            *skew_flat_values(e0 - w0, e1 - w1, e2 - w2),
            *gradient,
        ]

    def navigation_error_block(self, rotation: FloatArray) -> FloatArray:
        return -rotation

    def _attitude_key(self) -> tuple[float, ...]:
        return self._x

    def _inject(self, dx: Sequence[float]) -> None:
        """x <- x make(exp(dsigma/2), dsigma', dsigma''): right multiplication (§5.7)."""
        dx = [float(c) for c in dx]
        if self.compiled:
            self._x = _kernels.trident_inject(self._x, dx)  # type: ignore[union-attr]
            return
        theta = (dx[0], dx[1], dx[2])
        dq, _, _ = exp_with_jacobian(theta)
        d1 = pure_multiply((0.5 * dx[3], 0.5 * dx[4], 0.5 * dx[5]), dq)
        d2 = pure_multiply((0.5 * dx[6], 0.5 * dx[7], 0.5 * dx[8]), dq)
        x = self._x
        P = (x[0], x[1], x[2], x[3])
        a1, b1 = multiply(P, d1), multiply(x[4:8], dq)
        a2, b2 = multiply(P, d2), multiply(x[8:12], dq)
        self._x = normalize_trident(
            multiply(P, dq),
            (a1[0] + b1[0], a1[1] + b1[1], a1[2] + b1[2], a1[3] + b1[3]),
            (a2[0] + b2[0], a2[1] + b2[1], a2[2] + b2[2], a2[3] + b2[3]),
        )

    def _navigation_error(self, q: ArrayLike, v: ArrayLike, p: ArrayLike) -> FloatArray:
        """[dsigma, dsigma', dsigma''] of this estimate relative to the truth (q, v, p)."""
        q_hat, v_hat, p_hat = self.nominal()
        C = quaternion.to_matrix(q_hat)
        attitude = quaternion.to_rotation_vector(
            quaternion.multiply(quaternion.conjugate(q_hat), np.asarray(q, dtype=float))
        )
        return np.concatenate([
            attitude,
            C.T @ (np.asarray(v, dtype=float) - v_hat),
            C.T @ (np.asarray(p, dtype=float) - p_hat),
        ])

    def conventional_jacobian(self) -> FloatArray:
        """Corrected J_L^T of §5.6 in this filter's ordering: blkdiag(I, -C, -C, I, I
        (, I))."""
        C = self.attitude_matrix()
        J = self._eye.copy()
        J[VEL, VEL] = -C
        J[POS, POS] = -C
        return J
