"""Dual and trident quaternions: ``P + sum_i eps_i D_i`` with ``eps_i eps_j = 0``.

``DUAL`` (one imaginary part) represents poses: ``q + eps 1/2 t q`` with ``t``
the world-frame position. ``TRIDENT`` (two imaginary parts) represents the
navigation state ``q + eps1 1/2 v q + eps2 1/2 p q`` (attitude body to world,
world-frame velocity m/s and position m), as in the trident-quaternion EKF.

Storage is ``[P, D_1, .., D_K]``, each part a scalar-last quaternion, so a dual
quaternion is an 8-vector and a trident quaternion a 12-vector; leading axes
are batches. Unit elements form a double cover of SE(3) (dual) and SE2(3)
(trident): ``x`` and ``-x`` are the same pose, and products compose exactly
like ``groups.SE3`` / ``groups.SE23``. Tangent vectors ``xi`` follow those
groups: ``(phi, tau_1, .., tau_K)``, rotation first, and ``exp(xi)`` is the
unit element ``exp(xi_breve / 2)`` whose pose is ``SE_K(3).exp(xi)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import _rotation, quaternion
from mav_geometry.arrays import FloatArray, as_float_array, dot_last
from mav_geometry.groups import SE3, SE23, ExtendedPoseGroup


def _pure(vector: FloatArray) -> FloatArray:
    result = np.zeros((*vector.shape[:-1], 4))
    result[..., :3] = vector
    return result


class NilpotentQuaternions:
    """Quaternions with K nilpotent imaginary units; K=1 dual, K=2 trident."""

    def __init__(self, name: str, group: ExtendedPoseGroup) -> None:
        self.name = name
        self.group = group
        self.imaginary_parts = group.translations
        self.width = 4 * (1 + group.translations)

    def _element(self, x: ArrayLike, name: str = "x") -> FloatArray:
        return as_float_array(x, (self.width,), name)

    def _parts(self, x: FloatArray) -> list[FloatArray]:
        return [x[..., 4 * i : 4 * i + 4] for i in range(1 + self.imaginary_parts)]

    def identity(self, batch_shape: tuple[int, ...] = ()) -> FloatArray:
        """``1 + 0 eps_i`` with the given batch shape."""
        result = np.zeros((*batch_shape, self.width))
        result[..., 3] = 1.0
        return result

    def multiply(self, a: ArrayLike, b: ArrayLike) -> FloatArray:
        """Product: ``(P_a P_b, P_a D_bi + D_ai P_b)``."""
        a_parts = self._parts(self._element(a, "a"))
        b_parts = self._parts(self._element(b, "b"))
        principal = quaternion.multiply(a_parts[0], b_parts[0])
        imaginary = [
            quaternion.multiply(a_parts[0], b_d) + quaternion.multiply(a_d, b_parts[0])
            for a_d, b_d in zip(a_parts[1:], b_parts[1:], strict=True)
        ]
        return np.concatenate([principal, *imaginary], axis=-1)

    def conjugate(self, x: ArrayLike) -> FloatArray:
        """Quaternion conjugate of every part; the group inverse of a unit element."""
        x = self._element(x)
        return np.concatenate([quaternion.conjugate(part) for part in self._parts(x)], axis=-1)

    def norm(self, x: ArrayLike) -> FloatArray:
        """The multi-number ``sqrt(x conj(x))`` as ``[|P|, P.D_1/|P|, ..]``.

        A unit element has norm ``[1, 0, .., 0]``.
        """
        parts = self._parts(self._element(x))
        size = quaternion.norm(parts[0])
        return np.stack([size, *(dot_last(parts[0], d) / size for d in parts[1:])], axis=-1)

    def normalize(self, x: ArrayLike) -> FloatArray:
        """Nearest unit element: ``P/|P|`` and ``D_i/|P| - P (P.D_i)/|P|^3``."""
        parts = self._parts(self._element(x))
        principal = parts[0]
        size = quaternion.norm(principal)
        if not np.all(np.isfinite(size)) or np.any(size == 0.0):
            raise ValueError(
                f"cannot normalize a {self.name} whose principal part is zero or non-finite"
            )
        scale = (1.0 / size)[..., None]
        imaginary = [
            d * scale - principal * (dot_last(principal, d) / size**3)[..., None]
            for d in parts[1:]
        ]
        return np.concatenate([principal * scale, *imaginary], axis=-1)

    def pack(self, q: ArrayLike, *translations: ArrayLike) -> FloatArray:
        """Unit element ``q + sum eps_i 1/2 t_i q`` from a unit quaternion and K 3-vectors."""
        if len(translations) != self.imaginary_parts:
            raise ValueError(
                f"a {self.name} packs {self.imaginary_parts} vectors, got {len(translations)}"
            )
        q = as_float_array(q, (4,), "q")
        imaginary = [
            0.5 * quaternion.multiply(_pure(as_float_array(t, (3,), f"translation {i}")), q)
            for i, t in enumerate(translations)
        ]
        batch = np.broadcast_shapes(q.shape, *(d.shape for d in imaginary))
        return np.concatenate(
            [np.broadcast_to(q, batch), *(np.broadcast_to(d, batch) for d in imaginary)], axis=-1
        )

    def unpack(self, x: ArrayLike) -> tuple[FloatArray, ...]:
        """``(q, t_1, .., t_K)`` with ``t_i = 2 vec(D_i P^-1)``; q is returned as stored."""
        parts = self._parts(self._element(x))
        principal_inverse = quaternion.inverse(parts[0])
        return (
            parts[0].copy(),
            *(2.0 * quaternion.multiply(d, principal_inverse)[..., :3] for d in parts[1:]),
        )

    def exp(self, xi: ArrayLike) -> FloatArray:
        """Unit element of tangent vector ``xi = (phi, tau_1, ..)``: pose ``SE_K(3).exp(xi)``."""
        xi = as_float_array(xi, (self.group.dof,), "xi")
        phi = xi[..., :3]
        jacobian = _rotation.left_jacobian(phi)
        translations = [
            np.einsum("...ij,...j->...i", jacobian, xi[..., 3 * i : 3 * i + 3])
            for i in range(1, 1 + self.imaginary_parts)
        ]
        return self.pack(quaternion.from_rotation_vector(phi), *translations)

    def log(self, x: ArrayLike) -> FloatArray:
        """Tangent vector of a unit element (rotation angle in [0, pi]; ``x``, ``-x`` agree)."""
        q, *translations = self.unpack(x)
        phi = quaternion.to_rotation_vector(q)
        inverse_jacobian = _rotation.left_jacobian_inverse(phi)
        return np.concatenate(
            [phi, *(np.einsum("...ij,...j->...i", inverse_jacobian, t) for t in translations)],
            axis=-1,
        )

    def act(self, x: ArrayLike, point: ArrayLike) -> FloatArray:
        """Transform a point like ``SE_K(3).act``: ``R point`` plus the last translation."""
        q, *translations = self.unpack(x)
        return quaternion.rotate(q, point) + translations[-1]

    def to_matrix(self, x: ArrayLike) -> FloatArray:
        """The SE(3) / SE2(3) matrix of a unit element."""
        q, *translations = self.unpack(x)
        return self.group.from_components(quaternion.to_matrix(q), *translations)

    def from_matrix(self, matrix: ArrayLike) -> FloatArray:
        """Unit element (scalar part of P >= 0) of an SE(3) / SE2(3) matrix."""
        rotation, *translations = self.group.components(matrix)
        return self.pack(quaternion.from_matrix(rotation), *translations)


DUAL = NilpotentQuaternions("dual quaternion", SE3)
TRIDENT = NilpotentQuaternions("trident quaternion", SE23)
