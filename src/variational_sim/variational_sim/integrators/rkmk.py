"""Runge-Kutta-Munthe-Kaas (RKMK4): an explicit Lie-group method on SE(3) x R^6.

The pose evolves as ``pose(t) = pose_k exp(u(t))`` (body-frame increment, tangent
``u = (phi, rho)`` of ``mav_geometry.groups.SE3``) with
``du/dt = J_r(u)^-1 xi`` (right Jacobian inverse, exact ``dexp`` inverse), and the
momentum in the vector space R^6; the classical RK4 tableau is applied to
``(u, pi)``. The pose stays on the unit dual quaternions to round-off; energy and
momentum are not conserved (fourth-order error, secular drift).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.groups import SE3
from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.base import check_step_size
from variational_sim.integrators.rigid_body_ode import RigidBodyEquations
from variational_sim.models.rigid_body import RigidBody, RigidBodyState


class RKMK4:
    """RKMK with the RK4 tableau, stepping ``RigidBodyState`` under a held body wrench."""

    def __init__(self, body: RigidBody, step_size: float) -> None:
        self.body = body
        self.step_size = check_step_size(step_size)
        self._equations = RigidBodyEquations(body)

    def _stage(self, pose: np.ndarray, u: np.ndarray, momentum: np.ndarray,
               held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(du/dt, dpi/dt)`` at increment ``u`` and momentum ``momentum``."""
        equations = self._equations
        twist = equations.twist(momentum)
        stage_pose = DUAL.multiply(pose, DUAL.exp(u)) if u.any() else pose
        wrench = equations.wrench(stage_pose[:4], held)
        u_rate = SE3.right_jacobian_inverse(u) @ twist
        return u_rate, equations.momentum_rate(momentum, twist, wrench)

    def step(self, state: RigidBodyState, inputs: ArrayLike | None = None) -> RigidBodyState:
        """One RKMK4 step of ``step_size`` seconds."""
        h = self.step_size
        held = np.zeros(6) if inputs is None else np.asarray(inputs, dtype=float)
        pose, momentum = state.pose, state.momentum
        zero = np.zeros(6)
        u1, p1 = self._stage(pose, zero, momentum, held)
        u2, p2 = self._stage(pose, 0.5 * h * u1, momentum + 0.5 * h * p1, held)
        u3, p3 = self._stage(pose, 0.5 * h * u2, momentum + 0.5 * h * p2, held)
        u4, p4 = self._stage(pose, h * u3, momentum + h * p3, held)
        u = (h / 6.0) * (u1 + 2.0 * u2 + 2.0 * u3 + u4)
        new_momentum = momentum + (h / 6.0) * (p1 + 2.0 * p2 + 2.0 * p3 + p4)
        return RigidBodyState(state.time + h, DUAL.multiply(pose, DUAL.exp(u)), new_momentum)
