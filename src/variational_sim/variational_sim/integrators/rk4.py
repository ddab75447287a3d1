"""Classical fourth-order Runge-Kutta on the flat (pose, momentum) rigid-body state.

The unit-dual-quaternion constraint is not enforced (a drift baseline): the pose
leaves the group at O(h^4) per step, and energy and momentum drift secularly.
"""

from __future__ import annotations

import numpy as np

from mav_geometry.arrays import FloatVector
from variational_sim.integrators.base import check_step_size
from variational_sim.integrators.rigid_body_ode import RigidBodyEquations
from variational_sim.models.rigid_body import RigidBody, RigidBodyState


class RK4:
    """RK4 stepping ``RigidBodyState`` under a held body wrench ``(tau_B, f_B)`` about O."""

    def __init__(self, body: RigidBody, step_size: float) -> None:
        self.body = body
        self.step_size = check_step_size(step_size)
        self._equations = RigidBodyEquations(body)

    def step(self, state: RigidBodyState, inputs: FloatVector | None = None) -> RigidBodyState:
        """One RK4 step of ``step_size`` seconds."""
        h = self.step_size
        held = [0.0] * 6 if inputs is None else list(map(float, inputs))
        rate = self._equations.derivative
        y = [*state.pose.tolist(), *state.momentum.tolist()]
        k1 = rate(y, held)
        k2 = rate([a + 0.5 * h * b for a, b in zip(y, k1, strict=True)], held)
        k3 = rate([a + 0.5 * h * b for a, b in zip(y, k2, strict=True)], held)
        k4 = rate([a + h * b for a, b in zip(y, k3, strict=True)], held)
        sixth = h / 6.0
        y = [a + sixth * (b1 + 2.0 * (b2 + b3) + b4)
             for a, b1, b2, b3, b4 in zip(y, k1, k2, k3, k4, strict=True)]
        return RigidBodyState(state.time + h, np.array(y[:8]), np.array(y[8:]))
