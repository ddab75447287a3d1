"""Primal-dual interior-point steps for complementarity pairs ``w s = 0``, ``w, s >= 0``.

Mehrotra's predictor-corrector: the Newton matrix of an iteration is factorised once.
The predictor (affine) direction aims at ``w s = 0``; how far it can go before a pair
leaves the positive orthant sets the centring target ``sigma mu`` with
``sigma = (mu_aff / mu)^3``; the corrector aims at that target and adds the
predictor's second-order term ``dw_aff ds_aff``. Near a solution ``sigma`` vanishes and
the iteration is Newton's on the complementarity conditions (fast local convergence);
far from one it re-centres (robust start).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dgetrf, dgetrs

from mav_geometry.arrays import FloatArray

FRACTION_TO_BOUNDARY = 0.995
"""Least fraction of the distance to the boundary that a step may cover."""


def max_step(values: FloatArray, steps: FloatArray, fraction: float = 1.0) -> float:
    """Largest ``alpha`` in (0, 1] keeping ``values + alpha steps >= (1 - fraction) values``.

    ``values`` must be positive; ``fraction = 1`` gives the distance to the boundary.
    """
    limits = np.divide(-fraction * values, steps, out=np.ones_like(values), where=steps < 0.0)
    return float(min(1.0, limits.min()))


def boundary_fraction(mu: float) -> float:
    """Fraction-to-boundary for a step from mean complementarity ``mu``.

    Tends to 1 as ``mu`` does (as in IPOPT), so that pairs at a solution can shrink by
    many orders of magnitude in one step and the local convergence stays superlinear.
    """
    return max(FRACTION_TO_BOUNDARY, 1.0 - mu)


def centring_target(duals: FloatArray, slacks: FloatArray, affine_duals: FloatArray,
                    affine_slacks: FloatArray, floor: float) -> float:
    """Mehrotra's centring target ``sigma mu`` (at least ``floor``) from the predictor."""
    mu = float((duals * slacks).sum()) / duals.size
    alpha = min(max_step(duals, affine_duals), max_step(slacks, affine_slacks))
    affine_mu = (float(((duals + alpha * affine_duals) * (slacks + alpha * affine_slacks)).sum())
                 / duals.size)
    return max(floor, mu * (affine_mu / mu) ** 3)


class ReducedNewtonSystem:
    """One iteration's Newton system with every block's local unknowns eliminated.

    Unknowns: smooth ``y = (dq, dlambda)`` (the first ``t`` entries of ``y`` are ``dq``)
    and per block ``du`` (``k`` entries, the first ``p`` of them the duals ``dw`` of the
    pairs) with the pairs' slacks ``ds``. Rows:

        K y - G du = -r_y                 (smooth rows; G is zero below row t)
        E dq + F du - (ds, 0) = -r_e      (block equalities)
        s dw + w ds = -r_w                (complementarity)

    Eliminating ``ds = -(r_w + s dw)/w`` and then ``du = H^-1 (-r_e - (r_w/w, 0) - E dq)``
    with ``H = F + diag(s/w, 0)`` leaves ``K + G H^-1 E`` (in the ``dq`` block), of the
    smooth system's size. It is factorised once; ``direction`` solves for any ``r_w``.
    """

    def __init__(self, matrix: FloatArray, impulse_map: FloatArray, local_jacobian: FloatArray,
                 equality_jacobian: FloatArray, residual_smooth: FloatArray,
                 residual_equalities: FloatArray, duals: FloatArray, slacks: FloatArray) -> None:
        """``matrix`` K (overwritten), ``impulse_map`` G (t, b k), ``local_jacobian`` F
        (b, k, k), ``equality_jacobian`` E (b, k, t), residuals r_y and r_e (b, k), the
        pairs' ``duals`` w and ``slacks`` s (b, p)."""
        pairs = duals.shape[1]
        local = local_jacobian.copy()
        local[:, np.arange(pairs), np.arange(pairs)] += slacks / duals
        self._eliminated = np.linalg.inv(local)
        self._coupling = self._eliminated @ equality_jacobian  # H^-1 E
        self._tangent = tangent = impulse_map.shape[0]
        matrix[:tangent, :tangent] += impulse_map @ self._coupling.reshape(-1, tangent)
        self._lu, self._pivots, info = dgetrf(matrix, overwrite_a=True)
        if info != 0:
            raise np.linalg.LinAlgError("singular interior-point Newton matrix")
        self._impulse_map = impulse_map
        self._residual_smooth = residual_smooth
        self._residual_equalities = residual_equalities
        self._duals, self._slacks = duals, slacks

    def direction(self, residual_w: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``y``, ``du`` (b, k) and ``ds`` (b, p) for the complementarity residual ``r_w``."""
        pairs = self._duals.shape[1]
        right = -self._residual_equalities
        right[:, :pairs] -= residual_w / self._duals
        free = (self._eliminated @ right[:, :, None])[:, :, 0]
        rhs = -self._residual_smooth
        rhs[:self._tangent] += self._impulse_map @ free.reshape(-1)
        smooth = dgetrs(self._lu, self._pivots, rhs)[0]
        step_u = free - self._coupling @ smooth[:self._tangent]
        step_s = -(residual_w + self._slacks * step_u[:, :pairs]) / self._duals
        return smooth, step_u, step_s


def mehrotra_direction(system: ReducedNewtonSystem, duals: FloatArray, slacks: FloatArray,
                       floor: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Predictor-corrector direction ``(y, du, ds)``; the centring target is >= ``floor``."""
    products = duals * slacks
    pairs = duals.shape[1]
    _, affine_u, affine_s = system.direction(products)
    centre = centring_target(duals, slacks, affine_u[:, :pairs], affine_s, floor)
    return system.direction(products + affine_u[:, :pairs] * affine_s - centre)
