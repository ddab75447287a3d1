"""Per-body discrete Lagrangian of a rigid body in maximal coordinates and its momenta.

For one step of ``h`` seconds from ``(r_k, Q_k)`` to ``(r_{k+1}, Q_{k+1})``, with
``f = conj(Q_k) Q_{k+1} = (v, w)`` (scalar-last) the relative rotation,

    L_d = m |r_{k+1} - r_k|^2 / (2 h) + (2/h) v^T J v - (h/2)(U_k + U_{k+1}).

Its kinetic part's derivatives with respect to the body rotation angles at the two
ends give the discrete Legendre transforms (momentum at the start and the end of the
step, body-frame angular momentum about the CoM in N m s, world linear momentum N s):

    p_k^+     = -D1 L_d = ((2/h)(w J v + v x J v),  m (r_{k+1} - r_k)/h)
    p_{k+1}^- =  D2 L_d = ((2/h)(w J v - v x J v),  m (r_{k+1} - r_k)/h)

(``v ~ (h/2) omega``, so both tend to ``(J omega, m v)``). The potential and the other
forces enter the step as impulses ``(h/2) F`` at each end.
"""

from __future__ import annotations

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray


def _relative(quaternions: FloatArray, next_quaternions: FloatArray) -> FloatArray:
    return Q.multiply(Q.conjugate(quaternions), next_quaternions)


def momenta(
    positions: FloatArray, quaternions: FloatArray,
    next_positions: FloatArray, next_quaternions: FloatArray,
    masses: FloatArray, inertias: FloatArray, step_size: float,
) -> tuple[FloatArray, FloatArray]:
    """``(p_k^+, p_{k+1}^-)`` per body, each (n, 6) in ``(angular, linear)`` order."""
    h = step_size
    f = _relative(quaternions, next_quaternions)
    v, w = f[:, :3], f[:, 3:]
    jv = np.einsum("nij,nj->ni", inertias, v)
    spin = _cross(v, jv)
    linear = masses[:, None] * (next_positions - positions) / h
    start = np.concatenate([(2.0 / h) * (w * jv + spin), linear], axis=1)
    end = np.concatenate([(2.0 / h) * (w * jv - spin), linear], axis=1)
    return start, end


def start_momentum_jacobian(
    quaternions: FloatArray, next_quaternions: FloatArray,
    masses: FloatArray, inertias: FloatArray, step_size: float,
) -> FloatArray:
    """Blocks (n, 6, 6) of ``d p_k^+ / d(dtheta_{k+1}, dr_{k+1})``.

    With ``B = w I + [v]x``: ``(1/h)(B J B - J v v^T - [J v]x B)`` and ``(m/h) I``.
    """
    h = step_size
    f = _relative(quaternions, next_quaternions)
    v, w = f[:, :3], f[:, 3]
    jv = np.einsum("nij,nj->ni", inertias, v)
    n = len(masses)
    eye = np.eye(3)
    b = w[:, None, None] * eye + _skew(v)
    result = np.zeros((n, 6, 6))
    result[:, :3, :3] = (b @ inertias @ b - jv[:, :, None] * v[:, None, :]
                         - _skew(jv) @ b) / h
    result[:, 3:, 3:] = (masses / h)[:, None, None] * eye
    return result


def body_rates(
    quaternions: FloatArray, next_quaternions: FloatArray, step_size: float,
) -> tuple[FloatArray, FloatArray]:
    """Mean body-frame angular velocities over the step (n, 3, rad/s) and their Jacobians.

    ``omega = 2 v / h`` (``v`` the vector part of the relative rotation, ``2 v`` the
    rotation vector to third order). The Jacobians (n, 3, 3) are with respect to the
    rotation increments ``dtheta_{k+1}`` of the end attitudes: ``(w I + [v]x) / h``.
    """
    f = _relative(quaternions, next_quaternions)
    v, w = f[:, :3], f[:, 3]
    jacobians = (w[:, None, None] * np.eye(3) + _skew(v)) / step_size
    return 2.0 * v / step_size, jacobians


def _cross(a: FloatArray, b: FloatArray) -> FloatArray:
    """Row-wise ``a x b`` of (n, 3) arrays (``np.cross`` costs more at this size)."""
    return np.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                     a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                     a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], axis=1)


def _skew(v: FloatArray) -> FloatArray:
    result = np.zeros((*v.shape[:-1], 3, 3))
    result[..., 0, 1], result[..., 0, 2] = -v[..., 2], v[..., 1]
    result[..., 1, 0], result[..., 1, 2] = v[..., 2], -v[..., 0]
    result[..., 2, 0], result[..., 2, 1] = -v[..., 1], v[..., 0]
    return result
