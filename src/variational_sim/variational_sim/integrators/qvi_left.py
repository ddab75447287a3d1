"""Left-rectangle quaternion variational integrator (QVI paper Sec. 3.1, Eqs. 16-19).

Theory, corrections and erratum numbers: ``docs/theory/qvi.md`` (§4, errata §9).

Interval velocities ``(v_k, w_k)`` (body frame) solve, with coefficients at ``t_k``::

    R(q_k) D1_k = p_x + h F_k                                   (world frame)
    D2_k + h/2 w_k x D2_k + h v_k x D1_k = p_w + h tau_k       (body frame of node k)

(torque as an impulse ``h tau``: erratum 3), Newton with the analytic
Jacobian of Eq. 19 on the unknowns ``(v, w)`` with ``z <- z - J^-1 R`` (erratum 5),
then ``x_{k+1} = x_k + h R(q_k) v_k`` and ``q_{k+1} = q_k exp(h w_k / 2)`` (Eq. 8).
The momenta passed on are ``p_x = R(q_k) D1_k`` and ``D2_k - h/2 w_k x D2_k``. First
order; ``p_x`` is conserved exactly without forces.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.integrators.qvi_common import (
    QuaternionVariationalIntegrator,
    StepEquations,
    node_impulse_wrench,
)
from variational_sim.models.coupled_body import CoupledBodyState
from variational_sim.models.rigid_body import skew


class LeftRectangleQVI(QuaternionVariationalIntegrator):
    """Left-rectangle QVI stepping ``CoupledBodyState``; inputs: held body wrench (tau_B, F_B)."""

    name = "left-rectangle QVI"
    scheme = 0

    def residual_and_jacobian(self, state: CoupledBodyState,
                              inputs: ArrayLike | None = None) -> StepEquations:
        """``(R(z), J(z))`` callables of the step at ``state`` (exposed for checks)."""
        h = self.step_size
        c = self.model.coefficients(state.time)
        rotation = Q.to_matrix(state.attitude)
        impulse = h * node_impulse_wrench(state.attitude, inputs)
        target_x = state.momentum[3:] + impulse[3:]
        target_w = rotation.T @ (state.momentum[:3] + impulse[:3])

        def residual(z: FloatArray) -> FloatArray:
            v, w = z[:3], z[3:]
            d1, d2 = c.d1(v, w), c.d2(v, w)
            return np.concatenate([
                rotation @ d1 - target_x,
                d2 + 0.5 * h * np.cross(w, d2) + h * np.cross(v, d1) - target_w,
            ])

        def jacobian(z: FloatArray) -> FloatArray:
            v, w = z[:3], z[3:]
            d2 = c.d2(v, w)
            eye = np.eye(3)
            return np.block([
                [2.0 * c.a_xx * rotation, rotation @ c.A_xw],
                [(eye + 0.5 * h * skew(w)) @ c.A_xw.T - h * skew(c.A_xw @ w + c.a_x),
                 (2.0 * eye + h * skew(w)) @ c.A_ww + h * skew(v) @ c.A_xw - 0.5 * h * skew(d2)],
            ])

        return residual, jacobian

    def step(self, state: CoupledBodyState, inputs: ArrayLike | None = None) -> CoupledBodyState:
        """One step of ``step_size`` seconds."""
        if self.kernels is not None:
            return self._compiled_step(self.kernels, state, inputs,
                                       self.model.coefficients(state.time), 0.0)
        h = self.step_size
        v, w = self._solve(state, inputs)
        c = self.model.coefficients(state.time)
        d1, d2 = c.d1(v, w), c.d2(v, w)
        attitude = Q.multiply(state.attitude, Q.from_rotation_vector(h * w))
        momentum = np.concatenate([
            Q.rotate(attitude, d2 - 0.5 * h * np.cross(w, d2)), Q.rotate(state.attitude, d1)
        ])
        return CoupledBodyState(
            state.time + h, attitude, state.position + h * Q.rotate(state.attitude, v),
            v, w, state.attitude, momentum)
