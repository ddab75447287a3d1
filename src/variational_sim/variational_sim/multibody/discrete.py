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
forces enter the step as impulses ``(h/2) F`` at each end. The relative rotation is
computed once per configuration (``relative_rotation``) and shared by the momenta,
their Jacobian and the body rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mav_geometry.arrays import FloatArray
from variational_sim.multibody.batched import apply, conjugate, multiply, skew

_EYE = np.eye(3)


@dataclass(frozen=True)
class RelativeRotation:
    """``f = conj(Q_k) Q_{k+1} = (v, w)`` per body: ``vector`` v (n, 3), ``scalar`` w
    (n,) and ``cross`` the matrices [v]x (n, 3, 3)."""

    vector: FloatArray
    scalar: FloatArray
    cross: FloatArray


def relative_rotation(quaternions: FloatArray, next_quaternions: FloatArray
                      ) -> RelativeRotation:
    """The relative rotation of each body over the step, attitudes (n, 4) at both ends."""
    f = multiply(conjugate(quaternions), next_quaternions)
    return RelativeRotation(f[:, :3], f[:, 3], skew(f[:, :3]))


def momenta(
    positions: FloatArray, next_positions: FloatArray, rotation: RelativeRotation,
    masses: FloatArray, inertias: FloatArray, step_size: float,
) -> tuple[FloatArray, FloatArray]:
    """``(p_k^+, p_{k+1}^-)`` per body, each (n, 6) in ``(angular, linear)`` order."""
    h = step_size
    v, w = rotation.vector, rotation.scalar[:, None]
    jv = apply(inertias, v)
    spin = apply(rotation.cross, jv)
    linear = masses[:, None] * (next_positions - positions) / h
    start = np.concatenate([(2.0 / h) * (w * jv + spin), linear], axis=1)
    end = np.concatenate([(2.0 / h) * (w * jv - spin), linear], axis=1)
    return start, end


def start_momentum_jacobian(
    rotation: RelativeRotation, masses: FloatArray, inertias: FloatArray, step_size: float,
) -> FloatArray:
    """Blocks (n, 6, 6) of ``d p_k^+ / d(dtheta_{k+1}, dr_{k+1})``.

    With ``B = w I + [v]x``: ``(1/h)(B J B - J v v^T - [J v]x B)`` and ``(m/h) I``.
    """
    h = step_size
    v = rotation.vector
    jv = apply(inertias, v)
    b = rotation.scalar[:, None, None] * _EYE + rotation.cross
    result = np.zeros((len(masses), 6, 6))
    result[:, :3, :3] = (b @ inertias @ b - jv[:, :, None] * v[:, None, :]
                         - skew(jv) @ b) / h
    result[:, 3:, 3:] = (masses / h)[:, None, None] * _EYE
    return result


def body_rates(rotation: RelativeRotation, step_size: float) -> tuple[FloatArray, FloatArray]:
    """Mean body-frame angular velocities over the step (n, 3, rad/s) and their Jacobians.

    ``omega = 2 v / h`` (``v`` the vector part of the relative rotation, ``2 v`` the
    rotation vector to third order). The Jacobians (n, 3, 3) are with respect to the
    rotation increments ``dtheta_{k+1}`` of the end attitudes: ``(w I + [v]x) / h``.
    """
    jacobians = (rotation.scalar[:, None, None] * _EYE + rotation.cross) / step_size
    return 2.0 * rotation.vector / step_size, jacobians
