"""Adaptive scipy ``solve_ivp`` (DOP853 by default) over each step, as a reference baseline.

Each ``step`` integrates the continuous equations over ``step_size`` seconds with
error control (``rtol``, ``atol``); the pose is renormalised onto the unit dual
quaternions at the end of the step (the solver itself does not keep it there).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import numpy as np

from mav_geometry.arrays import FloatVector
from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.base import NoSolutionError, check_step_size
from variational_sim.integrators.rigid_body_ode import RigidBodyEquations
from variational_sim.models.rigid_body import RigidBody, RigidBodyState

IvpMethod: TypeAlias = Literal["RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"]
"""The ``solve_ivp`` methods."""


class ScipyAdaptive:
    """``solve_ivp`` with method ``method`` between output times ``step_size`` apart."""

    def __init__(self, body: RigidBody, step_size: float, method: IvpMethod = "DOP853",
                 rtol: float = 1e-10, atol: float = 1e-12, renormalize: bool = True) -> None:
        if method not in ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"):
            raise ValueError(f"method must be a scipy solve_ivp method, got {method!r}")
        self.body = body
        self.step_size = check_step_size(step_size)
        self.method = method
        self.rtol = rtol
        self.atol = atol
        self.renormalize = renormalize
        self._equations = RigidBodyEquations(body)
        # scipy.integrate (~0.4 s to import with scipy's base) is loaded by this reference
        # integrator only, not by every simulator that imports the module (start-up time).
        from scipy.integrate import solve_ivp

        self._solve_ivp = solve_ivp

    def step(self, state: RigidBodyState, inputs: FloatVector | None = None) -> RigidBodyState:
        """Integrate one output interval of ``step_size`` seconds."""
        held = [0.0] * 6 if inputs is None else list(map(float, inputs))
        solution = self._solve_ivp(
            lambda _t, y: self._equations.derivative(y, held),
            (state.time, state.time + self.step_size),
            np.concatenate([state.pose, state.momentum]),
            method=self.method, rtol=self.rtol, atol=self.atol,
        )
        if not solution.success:
            raise NoSolutionError(f"solve_ivp ({self.method}) failed: {solution.message}")
        y = solution.y[:, -1]
        pose = DUAL.normalize(y[:8]) if self.renormalize else y[:8]
        return RigidBodyState(state.time + self.step_size, pose, y[8:])
