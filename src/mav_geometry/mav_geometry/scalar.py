"""Single-element kernels on plain float tuples, for per-step inner loops.

On 3- and 4-vectors numpy's per-call overhead (about 1 us per operation)
exceeds the arithmetic many times over, so integrators and filters that take
one small step at a time use these instead of the batched modules. Same
conventions as ``quaternion``: scalar-last ``(x, y, z, w)`` Hamilton
quaternions, rotation vectors map to ``exp(phi/2)``. The batched functions
are the reference these are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]

# Below this angle (rad) (t - sin t)/t^3 is summed as a series: its closed form
# cancels, losing about eps/t^2 relative; at 0.1 rad that is 1e-13 and the
# truncated series is exact to round-off.
_SERIES_BELOW_RAD = 0.1


def cross(a: Sequence[float], b: Sequence[float]) -> Vector3:
    """``a x b``."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def multiply(p: Sequence[float], q: Sequence[float]) -> Quaternion:
    """Hamilton product ``p q``."""
    px, py, pz, pw = p
    qx, qy, qz, qw = q
    return (
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
        pw * qw - px * qx - py * qy - pz * qz,
    )


def multiply_pure(q: Sequence[float], u: Sequence[float]) -> Quaternion:
    """``q (u, 0)``: product with a pure quaternion given as a 3-vector."""
    qx, qy, qz, qw = q
    ux, uy, uz = u
    return (
        qw * ux + qy * uz - qz * uy,
        qw * uy + qz * ux - qx * uz,
        qw * uz + qx * uy - qy * ux,
        -(qx * ux + qy * uy + qz * uz),
    )


def pure_multiply(u: Sequence[float], q: Sequence[float]) -> Quaternion:
    """``(u, 0) q``: a pure quaternion given as a 3-vector times a quaternion."""
    ux, uy, uz = u
    qx, qy, qz, qw = q
    return (
        ux * qw + uy * qz - uz * qy,
        -ux * qz + uy * qw + uz * qx,
        ux * qy - uy * qx + uz * qw,
        -(ux * qx + uy * qy + uz * qz),
    )


def rotate(q: Sequence[float], v: Sequence[float]) -> Vector3:
    """``R(q) v`` for a unit quaternion (``v + w t + u x t`` with ``t = 2 u x v``)."""
    ux, uy, uz, w = q
    vx, vy, vz = v
    tx = 2.0 * (uy * vz - uz * vy)
    ty = 2.0 * (uz * vx - ux * vz)
    tz = 2.0 * (ux * vy - uy * vx)
    return (
        vx + w * tx + uy * tz - uz * ty,
        vy + w * ty + uz * tx - ux * tz,
        vz + w * tz + ux * ty - uy * tx,
    )


def rotate_inverse(q: Sequence[float], v: Sequence[float]) -> Vector3:
    """``R(q)^T v`` for a unit quaternion."""
    x, y, z, w = q
    return rotate((-x, -y, -z, w), v)


def to_matrix(q: Sequence[float]) -> tuple[Vector3, Vector3, Vector3]:
    """Rows of the rotation matrix of a unit quaternion."""
    x, y, z, w = q
    return (
        (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w)),
        (2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w)),
        (2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)),
    )


def unpack_translation(d: Sequence[float], q: Sequence[float]) -> Vector3:
    """``2 vec(d conj(q))``: the vector ``t`` of an imaginary part ``d = 1/2 (t, 0) q``."""
    dx, dy, dz, dw = d
    qx, qy, qz, qw = q
    return (
        2.0 * (-dw * qx + dx * qw - dy * qz + dz * qy),
        2.0 * (-dw * qy + dx * qz + dy * qw - dz * qx),
        2.0 * (-dw * qz - dx * qy + dy * qx + dz * qw),
    )


def exp_with_jacobian(phi: Sequence[float]) -> tuple[Quaternion, float, float]:
    """``exp(phi/2)`` of a rotation vector (rad) and the left-Jacobian coefficients ``(a, b)``.

    ``J_l(phi) = I + a hat(phi) + b hat(phi)^2`` with ``a = (1 - cos t)/t^2`` and
    ``b = (t - sin t)/t^3``, ``t = |phi|``; both are accurate to round-off at every angle.
    """
    px, py, pz = phi
    angle_sq = px * px + py * py + pz * pz
    angle = math.sqrt(angle_sq)
    half = 0.5 * angle
    sin_half = math.sin(half)
    # sin(t/2)/(t/2) has no cancellation; only t = 0 needs its limit.
    half_sinc = sin_half / half if half > 0.0 else 1.0
    scale = 0.5 * half_sinc
    a = 0.5 * half_sinc * half_sinc
    if angle < _SERIES_BELOW_RAD:
        nested = 1.0 - angle_sq / 110.0
        nested = 1.0 - angle_sq / 72.0 * nested
        nested = 1.0 - angle_sq / 42.0 * nested
        b = (1.0 - angle_sq / 20.0 * nested) / 6.0  # 1/6 - t^2/120 + t^4/5040 - ...
    else:
        b = (angle - math.sin(angle)) / (angle_sq * angle)
    return (scale * px, scale * py, scale * pz, math.cos(half)), a, b


def left_jacobian_apply(phi: Sequence[float], a: float, b: float, x: Sequence[float]) -> Vector3:
    """``J_l(phi) x`` with the coefficients returned by ``exp_with_jacobian``."""
    c0, c1, c2 = cross(phi, x)
    d0, d1, d2 = cross(phi, (c0, c1, c2))
    return (x[0] + a * c0 + b * d0, x[1] + a * c1 + b * d1, x[2] + a * c2 + b * d2)
