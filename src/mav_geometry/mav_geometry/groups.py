"""The matrix Lie groups SO(3), SE(3) and SE2(3) behind one interface.

Each is SE_K(3), a rotation with K translation-like columns: elements are
(3+K)x(3+K) matrices ``[[R, t_1 .. t_K], [0, I_K]]`` and tangent vectors are
``(phi, tau_1, .., tau_K)``, rotation first (the screw order ``(omega, v)`` of
docs/conventions.md).

- ``SO3`` (K=0): rotation matrices, tangent ``phi`` (rad).
- ``SE3`` (K=1): poses ``[[R, t], [0, 1]]``, tangent twists ``(omega, v)``
  (rad, m); ``exp`` of a body twist held for unit time is the displacement.
- ``SE23`` (K=2): navigation states ``[[R, v, p], [0, I2]]`` (attitude body to
  world, velocity m/s and position m in the world frame), tangent
  ``(phi, nu, rho)``. Composes like unit trident quaternions.

Every verb accepts leading batch axes. Jacobians follow
``exp(x + d) ~ exp(J_l(x) d) exp(x) ~ exp(x) exp(J_r(x) d)`` to first order in d.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import _rotation, _series
from mav_geometry.arrays import FloatArray, as_float_array


def _apply(matrix: FloatArray, vectors: FloatArray) -> FloatArray:
    result: FloatArray = np.einsum("...ij,...j->...i", matrix, vectors)
    return result


def _coupling(phi: FloatArray, tau: FloatArray) -> FloatArray:
    """The off-diagonal block Q(phi, tau) of the left Jacobian (tau one translation)."""
    angle = np.linalg.norm(phi, axis=-1)[..., None, None]
    p = _rotation.hat(phi)
    t = _rotation.hat(tau)
    pt = p @ t
    tp = t @ p
    ptp = pt @ p
    pp = p @ p
    result: FloatArray = (
        0.5 * t
        + _series.theta_minus_sin_over_cube(angle) * (pt + tp + ptp)
        + _series.cos_remainder_over_fourth(angle) * (pp @ t + tp @ p - 3.0 * ptp)
        + _series.se3_q_third(angle) * (ptp @ p + pp @ t @ p)
    )
    return result


class ExtendedPoseGroup:
    """The group SE_K(3) with ``translations`` = K translation-like columns."""

    def __init__(self, name: str, translations: int) -> None:
        self.name = name
        self.translations = translations
        self.size = 3 + translations
        self.dof = 3 + 3 * translations

    def _tangent(self, xi: ArrayLike) -> FloatArray:
        return as_float_array(xi, (self.dof,), "xi")

    def _element(self, x: ArrayLike) -> FloatArray:
        return as_float_array(x, (self.size, self.size), "element")

    def _split(self, xi: FloatArray) -> tuple[FloatArray, list[FloatArray]]:
        blocks = [xi[..., 3 * (k + 1) : 3 * (k + 2)] for k in range(self.translations)]
        return xi[..., :3], blocks

    def _assemble(self, rotation: FloatArray, columns: list[FloatArray]) -> FloatArray:
        result = np.zeros((*rotation.shape[:-2], self.size, self.size))
        result[..., :3, :3] = rotation
        for k, column in enumerate(columns):
            result[..., :3, 3 + k] = column
        result[..., range(3, self.size), range(3, self.size)] = 1.0
        return result

    def _columns(self, x: FloatArray) -> list[FloatArray]:
        return [x[..., :3, 3 + k] for k in range(self.translations)]

    def _lower_block(self, diagonal: FloatArray, below: list[FloatArray]) -> FloatArray:
        """Block matrix with ``diagonal`` on every 3x3 diagonal block, ``below`` in column 0."""
        batch = np.broadcast_shapes(diagonal.shape[:-2], *(b.shape[:-2] for b in below))
        result = np.zeros((*batch, self.dof, self.dof))
        for k in range(self.translations + 1):
            result[..., 3 * k : 3 * k + 3, 3 * k : 3 * k + 3] = diagonal
        for k, block in enumerate(below):
            result[..., 3 * (k + 1) : 3 * (k + 2), :3] = block
        return result

    def from_components(self, rotation: ArrayLike, *columns: ArrayLike) -> FloatArray:
        """Element from a rotation matrix and the K translation-like 3-vectors, in order."""
        if len(columns) != self.translations:
            raise ValueError(
                f"{self.name} takes {self.translations} translation columns, got {len(columns)}"
            )
        rotation = as_float_array(rotation, (3, 3), "rotation")
        vectors = [as_float_array(c, (3,), f"column {k}") for k, c in enumerate(columns)]
        batch = np.broadcast_shapes(rotation.shape[:-2], *(v.shape[:-1] for v in vectors))
        return self._assemble(
            np.broadcast_to(rotation, (*batch, 3, 3)),
            [np.broadcast_to(v, (*batch, 3)) for v in vectors],
        )

    def components(self, x: ArrayLike) -> tuple[FloatArray, ...]:
        """``(R, t_1, .., t_K)`` of an element (copies)."""
        x = self._element(x)
        return (x[..., :3, :3].copy(), *(c.copy() for c in self._columns(x)))

    def identity(self, batch_shape: tuple[int, ...] = ()) -> FloatArray:
        """The identity element with the given batch shape."""
        return np.broadcast_to(np.eye(self.size), (*batch_shape, self.size, self.size)).copy()

    def hat(self, xi: ArrayLike) -> FloatArray:
        """Lie-algebra matrix of a tangent vector."""
        phi, taus = self._split(self._tangent(xi))
        result = np.zeros((*phi.shape[:-1], self.size, self.size))
        result[..., :3, :3] = _rotation.hat(phi)
        for k, tau in enumerate(taus):
            result[..., :3, 3 + k] = tau
        return result

    def vee(self, matrix: ArrayLike) -> FloatArray:
        """Tangent vector of a Lie-algebra matrix (inverse of ``hat``)."""
        m = self._element(matrix)
        return np.concatenate([_rotation.vee(m[..., :3, :3]), *self._columns(m)], axis=-1)

    def exp(self, xi: ArrayLike) -> FloatArray:
        """Group exponential: ``(exp(phi), J_l(phi) tau_k)``."""
        phi, taus = self._split(self._tangent(xi))
        if not taus:
            return _rotation.exp(phi)
        jacobian = _rotation.left_jacobian(phi)
        return self._assemble(_rotation.exp(phi), [_apply(jacobian, tau) for tau in taus])

    def log(self, x: ArrayLike) -> FloatArray:
        """Group logarithm, rotation angle in [0, pi]."""
        x = self._element(x)
        phi = _rotation.log(x[..., :3, :3])
        if self.translations == 0:
            return phi
        inverse_jacobian = _rotation.left_jacobian_inverse(phi)
        return np.concatenate(
            [phi, *(_apply(inverse_jacobian, column) for column in self._columns(x))], axis=-1
        )

    def inverse(self, x: ArrayLike) -> FloatArray:
        """Group inverse ``(R^T, -R^T t_k)``."""
        x = self._element(x)
        rotation_t = np.swapaxes(x[..., :3, :3], -1, -2)
        return self._assemble(rotation_t, [-_apply(rotation_t, c) for c in self._columns(x)])

    def compose(self, a: ArrayLike, b: ArrayLike) -> FloatArray:
        """Group product ``a b`` (matrix product)."""
        result: FloatArray = self._element(a) @ self._element(b)
        return result

    def act(self, x: ArrayLike, point: ArrayLike) -> FloatArray:
        """Transform a point: ``R p`` plus the last column (t for SE(3), position for SE2(3))."""
        x = self._element(x)
        rotated = _apply(x[..., :3, :3], as_float_array(point, (3,), "point"))
        if self.translations == 0:
            return rotated
        return rotated + x[..., :3, self.size - 1]

    def adjoint(self, x: ArrayLike) -> FloatArray:
        """Adjoint matrix: ``x hat(xi) x^-1 == hat(adjoint(x) @ xi)``."""
        x = self._element(x)
        rotation = x[..., :3, :3]
        return self._lower_block(rotation, [_rotation.hat(c) @ rotation for c in self._columns(x)])

    def ad(self, xi: ArrayLike) -> FloatArray:
        """Lie-algebra adjoint: ``ad(a) @ b`` is the bracket ``[a, b]``."""
        phi, taus = self._split(self._tangent(xi))
        return self._lower_block(_rotation.hat(phi), [_rotation.hat(tau) for tau in taus])

    def left_jacobian(self, xi: ArrayLike) -> FloatArray:
        """Left Jacobian: ``[[J, 0], [Q(phi, tau_k), J]]`` with J of SO(3)."""
        phi, taus = self._split(self._tangent(xi))
        couplings = [_coupling(phi, tau) for tau in taus]
        return self._lower_block(_rotation.left_jacobian(phi), couplings)

    def right_jacobian(self, xi: ArrayLike) -> FloatArray:
        """Right Jacobian, ``left_jacobian(-xi)``."""
        return self.left_jacobian(-self._tangent(xi))

    def left_jacobian_inverse(self, xi: ArrayLike) -> FloatArray:
        """Inverse of ``left_jacobian`` (block form, exact); |phi| < 2 pi."""
        phi, taus = self._split(self._tangent(xi))
        inverse = _rotation.left_jacobian_inverse(phi)
        return self._lower_block(
            inverse, [-inverse @ _coupling(phi, tau) @ inverse for tau in taus]
        )

    def right_jacobian_inverse(self, xi: ArrayLike) -> FloatArray:
        """Inverse of ``right_jacobian``, ``left_jacobian_inverse(-xi)``."""
        return self.left_jacobian_inverse(-self._tangent(xi))


SO3 = ExtendedPoseGroup("SO(3)", translations=0)
SE3 = ExtendedPoseGroup("SE(3)", translations=1)
SE23 = ExtendedPoseGroup("SE2(3)", translations=2)
