"""Continuous rigid-body equations (Kirchhoff / Euler-Poincare form) for the baselines.

With ``pi = M6 xi = (pi_a, pi_l)``, ``xi = (omega, v)`` and body wrench ``W = (tau, f)``
about O (all body frame)::

    d pi_a / dt = pi_a x omega + pi_l x v + tau
    d pi_l / dt = pi_l x omega + f
    d pose / dt = 1/2 pose (omega + eps v)      (dual quaternion, scalar-last parts)

``W`` is gravity at the current pose plus a held body wrench.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.scalar import cross, multiply_pure, rotate_inverse
from variational_sim.models.rigid_body import RigidBody


class RigidBodyEquations:
    """Right-hand sides of the continuous equations of ``body``."""

    def __init__(self, body: RigidBody) -> None:
        self.body = body
        self._inverse = np.linalg.inv(body.inertia)
        self._weight = body.mass * body.gravity
        self._weight_floats = tuple(self._weight.tolist())
        self._com = tuple(body.com_offset.tolist())
        self._inverse_rows = [tuple(row) for row in self._inverse.tolist()]

    def twist(self, momentum: FloatArray) -> FloatArray:
        """``xi = M6^-1 pi``."""
        result: FloatArray = self._inverse @ momentum
        return result

    def wrench(self, q: FloatArray, held: FloatArray) -> FloatArray:
        """Gravity (evaluated at attitude ``q``, normalised) plus the held body wrench."""
        force = Q.rotate(Q.conjugate(q), self._weight) / float(q @ q)
        result: FloatArray = held + np.concatenate([np.cross(self.body.com_offset, force), force])
        return result

    def momentum_rate(self, momentum: FloatArray, twist: FloatArray,
                      wrench: FloatArray) -> FloatArray:
        """``d pi / dt`` (Euler-Poincare with the body wrench)."""
        omega, velocity = twist[:3], twist[3:]
        angular, linear = momentum[:3], momentum[3:]
        result: FloatArray = wrench + np.concatenate([
            np.cross(angular, omega) + np.cross(linear, velocity), np.cross(linear, omega)
        ])
        return result

    def derivative(self, y: Sequence[float], held: Sequence[float]) -> list[float]:
        """``d/dt`` of the flat state ``y = (pose (8), pi (6))``, on Python floats.

        Gravity uses the attitude normalised, since the baselines let ``|q|`` drift.
        """
        qx, qy, qz, qw, dx, dy, dz, dw, p0, p1, p2, p3, p4, p5 = y
        w0, w1, w2, v0, v1, v2 = (
            m0 * p0 + m1 * p1 + m2 * p2 + m3 * p3 + m4 * p4 + m5 * p5
            for m0, m1, m2, m3, m4, m5 in self._inverse_rows
        )
        q = (qx, qy, qz, qw)
        omega, velocity = (w0, w1, w2), (v0, v1, v2)
        q_rate = multiply_pure(q, omega)
        d_omega = multiply_pure((dx, dy, dz, dw), omega)
        q_velocity = multiply_pure(q, velocity)
        scale = 1.0 / (qx * qx + qy * qy + qz * qz + qw * qw)
        force = [scale * f for f in rotate_inverse(q, self._weight_floats)]
        torque = cross(self._com, force)
        angular = (p0, p1, p2)
        linear = (p3, p4, p5)
        a1, a2 = cross(angular, omega), cross(linear, velocity)
        l1 = cross(linear, omega)
        return [
            0.5 * q_rate[0], 0.5 * q_rate[1], 0.5 * q_rate[2], 0.5 * q_rate[3],
            0.5 * (q_velocity[0] + d_omega[0]), 0.5 * (q_velocity[1] + d_omega[1]),
            0.5 * (q_velocity[2] + d_omega[2]), 0.5 * (q_velocity[3] + d_omega[3]),
            a1[0] + a2[0] + torque[0] + held[0], a1[1] + a2[1] + torque[1] + held[1],
            a1[2] + a2[2] + torque[2] + held[2], l1[0] + force[0] + held[3],
            l1[1] + force[1] + held[4], l1[2] + force[2] + held[5],
        ]
