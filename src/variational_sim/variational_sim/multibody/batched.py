"""Row-wise small-matrix kernels on stacks of 3-vectors and quaternions.

The multibody step works on a few bodies, joint rows and contacts at a time; there
numpy's per-call overhead (about 1 us) is the whole cost, so every kernel here is one
or two numpy calls on the whole stack and does no input validation. Quaternions are
scalar-last unit quaternions as in ``mav_geometry.quaternion`` (the reference these
are tested against): the rotation matrix and the Hamilton product are written as
constant bilinear forms applied to the outer product of the inputs.
"""

from __future__ import annotations

import numpy as np

from mav_geometry.arrays import FloatArray


def _rotation_form() -> FloatArray:
    """(16, 9): ``vec(R) = vec(q q^T) @ form`` for a unit quaternion ``q = (x, y, z, w)``."""
    x, y, z, w = range(4)
    entries = {  # (row, column) of R: [(coefficient, i, j)] of q_i q_j
        (0, 0): [(1, w, w), (1, x, x), (-1, y, y), (-1, z, z)],
        (0, 1): [(2, x, y), (-2, z, w)], (0, 2): [(2, x, z), (2, y, w)],
        (1, 0): [(2, x, y), (2, z, w)],
        (1, 1): [(1, w, w), (-1, x, x), (1, y, y), (-1, z, z)],
        (1, 2): [(2, y, z), (-2, x, w)], (2, 0): [(2, x, z), (-2, y, w)],
        (2, 1): [(2, y, z), (2, x, w)],
        (2, 2): [(1, w, w), (-1, x, x), (-1, y, y), (1, z, z)],
    }
    form = np.zeros((16, 9))
    for (row, column), terms in entries.items():
        for coefficient, i, j in terms:
            form[4 * i + j, 3 * row + column] += coefficient
    return form


def _product_form() -> FloatArray:
    """(16, 4): ``p q = vec(p q^T) @ form`` (Hamilton product, scalar last)."""
    x, y, z, w = range(4)
    entries = [  # per component of p q: [(sign, i of p, j of q)]
        [(1, w, x), (1, x, w), (1, y, z), (-1, z, y)],
        [(1, w, y), (-1, x, z), (1, y, w), (1, z, x)],
        [(1, w, z), (1, x, y), (-1, y, x), (1, z, w)],
        [(1, w, w), (-1, x, x), (-1, y, y), (-1, z, z)],
    ]
    form = np.zeros((16, 4))
    for component, terms in enumerate(entries):
        for sign, i, j in terms:
            form[4 * i + j, component] = sign
    return form


_ROTATION_FORM = _rotation_form()
_PRODUCT_FORM = _product_form()
_SKEW_PLUS = np.array([7, 2, 3])  # flat (3x3) positions of +x, +y, +z in [v]x
_SKEW_MINUS = np.array([5, 6, 1])  # and of -x, -y, -z
_CONJUGATE = np.array([-1.0, -1.0, -1.0, 1.0])
SMALL_ANGLE = 1e-3
"""Rotation angle (rad) below which ``from_rotation_vectors`` uses its series."""


def rotation_matrices(quaternions: FloatArray) -> FloatArray:
    """Rotation matrices (m, 3, 3) of unit quaternions (m, 4)."""
    outer = quaternions[:, :, None] * quaternions[:, None, :]
    return (outer.reshape(-1, 16) @ _ROTATION_FORM).reshape(-1, 3, 3)


def multiply(p: FloatArray, q: FloatArray) -> FloatArray:
    """Row-wise Hamilton products ``p q`` of (m, 4) quaternions."""
    result: FloatArray = (p[:, :, None] * q[:, None, :]).reshape(-1, 16) @ _PRODUCT_FORM
    return result


def conjugate(q: FloatArray) -> FloatArray:
    """Row-wise conjugates of (m, 4) quaternions."""
    result: FloatArray = q * _CONJUGATE
    return result


def from_rotation_vectors(vectors: FloatArray) -> FloatArray:
    """Unit quaternions ``exp(phi/2)`` (m, 4) of rotation vectors (m, 3, rad), exact at 0."""
    angles = np.sqrt(np.einsum("mi,mi->m", vectors, vectors))
    # sin(angle/2)/angle, by its series below SMALL_ANGLE (truncation below 1e-16)
    factors = np.where(angles < SMALL_ANGLE, 0.5 - angles * angles / 48.0,
                       np.sin(0.5 * angles) / np.maximum(angles, SMALL_ANGLE))
    result = np.empty((len(vectors), 4))
    result[:, :3] = vectors * factors[:, None]
    result[:, 3] = np.cos(0.5 * angles)
    return result


def skew(vectors: FloatArray) -> FloatArray:
    """Cross-product matrices (m, 3, 3) of (m, 3) vectors: ``skew(a) b = a x b``."""
    result = np.zeros((len(vectors), 9))
    result[:, _SKEW_PLUS] = vectors
    result[:, _SKEW_MINUS] = -vectors
    return result.reshape(-1, 3, 3)


def apply(matrices: FloatArray, vectors: FloatArray) -> FloatArray:
    """Row-wise ``M v`` of (m, 3, 3) and (m, 3) arrays."""
    result: FloatArray = np.einsum("mij,mj->mi", matrices, vectors)
    return result


def apply_transposed(matrices: FloatArray, vectors: FloatArray) -> FloatArray:
    """Row-wise ``M^T v`` of (m, 3, 3) and (m, 3) arrays."""
    result: FloatArray = np.einsum("mji,mj->mi", matrices, vectors)
    return result
