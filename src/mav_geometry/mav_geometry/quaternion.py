"""Hamilton quaternions stored scalar-last ``[x, y, z, w]``.

Every function accepts batches: arrays whose last axis has length 4 (or 3 for
vectors) and arbitrary leading axes, broadcast against each other.

Rotation convention: a unit quaternion ``q`` rotates a vector by
``q * (v, 0) * conj(q)``; it maps body-frame coordinates to world-frame
coordinates when it is the body attitude. A rotation vector ``phi`` (axis times
angle, rad) maps to the unit quaternion ``exp(phi / 2)`` (half angle).

The element-wise operations (multiply, rotation vectors, rotate, matrices) run in
``mav_geometry._kernels`` when it is built and the inputs are C-contiguous with one batch
shape; otherwise (or with ``MAV_KERNELS=reference``) the numpy code below runs: it stays
the reference the kernels are tested against.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.arrays import FloatArray, as_float_array, dot_last
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("mav_geometry._kernels")


def _contiguous(first: FloatArray, second: FloatArray | None = None) -> bool:
    """Whether the kernels can take these element arrays (one trailing axis each):
    C-contiguous, and one batch shape (the kernels do not broadcast)."""
    if not first.flags.c_contiguous:
        return False
    return second is None or (second.flags.c_contiguous
                              and first.shape[:-1] == second.shape[:-1])


def identity(batch_shape: tuple[int, ...] = ()) -> FloatArray:
    """The identity quaternion [0, 0, 0, 1] with the given batch shape."""
    result = np.zeros((*batch_shape, 4))
    result[..., 3] = 1.0
    return result


def multiply(p: ArrayLike, q: ArrayLike) -> FloatArray:
    """Hamilton product ``p * q``."""
    p = as_float_array(p, (4,), "p")
    q = as_float_array(q, (4,), "q")
    if _kernels is not None and _contiguous(p, q):
        product = np.empty(p.shape)
        _kernels.multiply(p, q, product)
        return product
    px, py, pz, pw = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    qx, qy, qz, qw = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    result = np.empty(np.broadcast_shapes(p.shape, q.shape))
    result[..., 0] = pw * qx + px * qw + py * qz - pz * qy
    result[..., 1] = pw * qy - px * qz + py * qw + pz * qx
    result[..., 2] = pw * qz + px * qy - py * qx + pz * qw
    result[..., 3] = pw * qw - px * qx - py * qy - pz * qz
    return result


def conjugate(q: ArrayLike) -> FloatArray:
    """Quaternion conjugate: the vector part negated."""
    result = as_float_array(q, (4,), "q").copy()
    result[..., :3] *= -1.0
    return result


def norm(q: ArrayLike) -> FloatArray:
    """Euclidean norm ``sqrt(q * conj(q))``."""
    result: FloatArray = np.linalg.norm(as_float_array(q, (4,), "q"), axis=-1)
    return result


def normalize(q: ArrayLike) -> FloatArray:
    """``q / |q|``; raises ValueError for a zero or non-finite quaternion."""
    q = as_float_array(q, (4,), "q")
    size = norm(q)
    if not np.all(np.isfinite(size)) or np.any(size == 0.0):
        raise ValueError("cannot normalize a zero or non-finite quaternion")
    result: FloatArray = q / size[..., None]
    return result


def inverse(q: ArrayLike) -> FloatArray:
    """Multiplicative inverse ``conj(q) / |q|^2`` (the conjugate for unit q)."""
    q = as_float_array(q, (4,), "q")
    result: FloatArray = conjugate(q) / dot_last(q, q)[..., None]
    return result


def canonical(q: ArrayLike) -> FloatArray:
    """The representative of ``+-q`` with a non-negative scalar part (for output)."""
    q = as_float_array(q, (4,), "q")
    result: FloatArray = np.where(q[..., 3:4] < 0.0, -q, q)
    return result


def _unit_exp(vector: FloatArray) -> FloatArray:
    """exp of the pure quaternion (vector, 0): (sin|u|/|u| u, cos|u|), exact at u = 0."""
    x, y, z = vector[..., 0], vector[..., 1], vector[..., 2]
    angle = np.sqrt(x * x + y * y + z * z)
    factor = np.divide(np.sin(angle), angle, out=np.ones_like(angle), where=angle > 0.0)
    result = np.empty((*vector.shape[:-1], 4))
    result[..., :3] = vector * factor[..., None]
    result[..., 3] = np.cos(angle)
    return result


def exp(q: ArrayLike) -> FloatArray:
    """Exponential of a full quaternion ``(u, s)``: ``e^s (sin|u|/|u| u, cos|u|)``.

    A pure quaternion with vector part ``phi / 2`` gives the unit quaternion of
    rotation vector ``phi``: see ``from_rotation_vector``.
    """
    q = as_float_array(q, (4,), "q")
    result: FloatArray = _unit_exp(q[..., :3]) * np.exp(q[..., 3:4])
    return result


def log(q: ArrayLike) -> FloatArray:
    """Logarithm ``(atan2(|u|, s)/|u| u, ln|q|)``, the inverse of ``exp``.

    The vector part of the result has norm in [0, pi]. For a unit quaternion it
    is the half-angle rotation vector. At a negative real quaternion the axis is
    undefined; the x axis is returned.
    """
    q = as_float_array(q, (4,), "q")
    vector = q[..., :3]
    scalar = q[..., 3]
    vector_norm = np.linalg.norm(vector, axis=-1)
    angle = np.arctan2(vector_norm, scalar)
    size = np.sqrt(vector_norm * vector_norm + scalar * scalar)
    degenerate = vector_norm == 0.0
    safe_norm = np.where(degenerate, 1.0, vector_norm)
    # Near u = 0 with s > 0 the factor atan2(|u|, s)/|u| tends to 1/s; the quotient
    # itself stays accurate, only the exact zero needs the limit.
    # The limit 1/s only where it is used: elsewhere s may be subnormal (1/s overflows).
    limit = np.divide(1.0, scalar, out=np.ones_like(scalar), where=degenerate & (scalar != 0.0))
    factor = np.where(degenerate, limit, angle / safe_norm)
    result = np.empty(q.shape)
    result[..., :3] = factor[..., None] * vector
    result[..., 3] = np.log(size)
    on_negative_axis = degenerate & (scalar < 0.0)
    if np.any(on_negative_axis):
        result[on_negative_axis, 0] = np.pi
    return result


def from_rotation_vector(phi: ArrayLike) -> FloatArray:
    """Unit quaternion ``exp(phi/2)`` of a rotation vector ``phi`` (rad, axis times angle)."""
    phi = as_float_array(phi, (3,), "phi")
    if _kernels is not None and _contiguous(phi):
        result = np.empty((*phi.shape[:-1], 4))
        _kernels.from_rotation_vector(phi, result)
        return result
    return _unit_exp(0.5 * phi)


def to_rotation_vector(q: ArrayLike) -> FloatArray:
    """Rotation vector (rad) of a unit quaternion, angle in [0, pi] (``q`` and ``-q`` agree)."""
    q = as_float_array(q, (4,), "q")
    if _kernels is not None and _contiguous(q):
        vector = np.empty((*q.shape[:-1], 3))
        _kernels.to_rotation_vector(q, vector)
        return vector
    result: FloatArray = 2.0 * log(canonical(q))[..., :3]
    return result


def rotate(q: ArrayLike, v: ArrayLike) -> FloatArray:
    """Rotate vectors: the vector part of ``q * (v, 0) * conj(q)`` for unit ``q``.

    Evaluated as ``v + w t + u x t`` with ``t = 2 u x v`` (no matrix is formed).
    """
    q = as_float_array(q, (4,), "q")
    v = as_float_array(v, (3,), "v")
    if _kernels is not None and _contiguous(q, v):
        rotated = np.empty(v.shape)
        _kernels.rotate(q, v, rotated)
        return rotated
    ux, uy, uz, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
    tx = 2.0 * (uy * vz - uz * vy)
    ty = 2.0 * (uz * vx - ux * vz)
    tz = 2.0 * (ux * vy - uy * vx)
    result = np.empty((*np.broadcast_shapes(q.shape[:-1], v.shape[:-1]), 3))
    result[..., 0] = vx + w * tx + uy * tz - uz * ty
    result[..., 1] = vy + w * ty + uz * tx - ux * tz
    result[..., 2] = vz + w * tz + ux * ty - uy * tx
    return result


def to_matrix(q: ArrayLike) -> FloatArray:
    """Rotation matrix of a unit quaternion (shape ``(..., 3, 3)``)."""
    q = as_float_array(q, (4,), "q")
    if _kernels is not None and _contiguous(q):
        matrix = np.empty((*q.shape[:-1], 3, 3))
        _kernels.to_matrix(q, matrix)
        return matrix
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    # Entry by entry, so each temporary is freed at once: many large live
    # temporaries make the allocator return memory to the OS and fault it back.
    result = np.empty((*q.shape[:-1], 3, 3))
    result[..., 0, 0] = 1.0 - 2.0 * (y * y + z * z)
    result[..., 0, 1] = 2.0 * (x * y - z * w)
    result[..., 0, 2] = 2.0 * (x * z + y * w)
    result[..., 1, 0] = 2.0 * (x * y + z * w)
    result[..., 1, 1] = 1.0 - 2.0 * (x * x + z * z)
    result[..., 1, 2] = 2.0 * (y * z - x * w)
    result[..., 2, 0] = 2.0 * (x * z - y * w)
    result[..., 2, 1] = 2.0 * (y * z + x * w)
    result[..., 2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return result


def from_matrix(matrix: ArrayLike) -> FloatArray:
    """Unit quaternion (scalar part >= 0) of a rotation matrix.

    Pivots on the largest of the four diagonal combinations (Shepperd's method),
    so the result is accurate for every rotation, angles near pi included.
    """
    m = as_float_array(matrix, (3, 3), "matrix")
    if _kernels is not None and m.flags.c_contiguous:
        unit = np.empty((*m.shape[:-2], 4))
        _kernels.from_matrix(m, unit)
        return unit
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    xy = m[..., 0, 1] + m[..., 1, 0]
    xz = m[..., 0, 2] + m[..., 2, 0]
    yz = m[..., 1, 2] + m[..., 2, 1]
    wx = m[..., 2, 1] - m[..., 1, 2]
    wy = m[..., 0, 2] - m[..., 2, 0]
    wz = m[..., 1, 0] - m[..., 0, 1]
    # Row k is q scaled by 4 q_k; the row with the largest diagonal term is well conditioned.
    rows = np.stack(
        [
            np.stack([1.0 + 2.0 * m[..., 0, 0] - trace, xy, xz, wx], axis=-1),
            np.stack([xy, 1.0 + 2.0 * m[..., 1, 1] - trace, yz, wy], axis=-1),
            np.stack([xz, yz, 1.0 + 2.0 * m[..., 2, 2] - trace, wz], axis=-1),
            np.stack([wx, wy, wz, 1.0 + trace], axis=-1),
        ],
        axis=-2,
    )
    pivots = np.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1)
    choice = np.argmax(pivots, axis=-1)[..., None, None]
    chosen = np.take_along_axis(rows, choice, axis=-2)[..., 0, :]
    return canonical(normalize(chosen))


def left_matrix(q: ArrayLike) -> FloatArray:
    """4x4 matrix ``L(q)`` with ``multiply(q, p) == L(q) @ p`` (scalar-last storage)."""
    q = as_float_array(q, (4,), "q")
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([w, -z, y, x], axis=-1),
            np.stack([z, w, -x, y], axis=-1),
            np.stack([-y, x, w, z], axis=-1),
            np.stack([-x, -y, -z, w], axis=-1),
        ],
        axis=-2,
    )


def right_matrix(q: ArrayLike) -> FloatArray:
    """4x4 matrix ``R(q)`` with ``multiply(p, q) == R(q) @ p`` (scalar-last storage)."""
    q = as_float_array(q, (4,), "q")
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([w, z, -y, x], axis=-1),
            np.stack([-z, w, x, y], axis=-1),
            np.stack([y, -x, w, z], axis=-1),
            np.stack([-x, -y, -z, w], axis=-1),
        ],
        axis=-2,
    )
