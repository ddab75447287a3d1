"""Midpoint quaternion variational integrator (QVI paper Sec. 3.2, corrected Eqs. 30-31).

Theory, corrections and erratum numbers: ``docs/theory/qvi.md`` (§5, errata §9).

Midpoint velocities ``(v, w)`` (body frame at the midpoint attitude
``qm = q_k exp(h w / 4)``), coefficients at ``t_k + h/2``::

    R(qm) D1 = p_x + h F_k
    R(qm) (D2 + c h v x D1) = p_w + h tau_k          (world frame, c = 1/2)

The printed Eq. 30 has ``h`` instead of ``h/2`` on the coupling terms (erratum 1);
``coupling_factor=1.0`` reproduces that wrong form for negative tests only. Torque
enters as the world-frame impulse ``h tau`` (erratum 2); ``q_{k+1} = q_k exp(h w / 2)``
(erratum 4: the printed form lacks ``h``); ``x_{k+1} = x_k + h R(qm) v``. The momenta
passed on are ``R(qm) D1`` and ``R(qm) (D2 - c h v x D1)``. Second order with the
Legendre initialisation; without forces ``p_x`` and the discrete angular momentum
``R(qm) D2 + (x_k + x_{k+1})/2 x p_x`` are conserved exactly, also under morphing.
The Jacobian is analytic (through the SO(3) right Jacobian of the midpoint attitude).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.groups import SO3
from variational_sim.integrators.qvi_common import (
    QuaternionVariationalIntegrator,
    StepEquations,
    node_impulse_wrench,
)
from variational_sim.models.coupled_body import CoupledBodyState, CoupledModel
from variational_sim.models.rigid_body import skew


class MidpointQVI(QuaternionVariationalIntegrator):
    """Midpoint QVI stepping ``CoupledBodyState``; inputs: held body wrench (tau_B, F_B)."""

    name = "midpoint QVI"
    scheme = 1

    def __init__(self, model: CoupledModel, step_size: float, tolerance: float = 1e-14,
                 max_iterations: int = 30, coupling_factor: float = 0.5) -> None:
        super().__init__(model, step_size, tolerance, max_iterations)
        self.coupling_factor = coupling_factor

    def residual_and_jacobian(self, state: CoupledBodyState,
                              inputs: ArrayLike | None = None) -> StepEquations:
        """``(R(z), J(z))`` callables of the step at ``state`` (exposed for checks)."""
        h = self.step_size
        k = self.coupling_factor
        c = self.model.coefficients(state.time + 0.5 * h)
        base = Q.to_matrix(state.attitude)
        target = state.momentum + h * node_impulse_wrench(state.attitude, inputs)

        def parts(z: FloatArray) -> tuple[FloatArray, ...]:
            v, w = z[:3], z[3:]
            d1 = c.d1(v, w)
            return v, w, d1, c.d2(v, w) + k * h * np.cross(v, d1), base @ SO3.exp(0.5 * h * w)

        def residual(z: FloatArray) -> FloatArray:
            _, _, d1, u2, rotation = parts(z)
            return np.concatenate([rotation @ u2 - target[:3], rotation @ d1 - target[3:]])

        def jacobian(z: FloatArray) -> FloatArray:
            v, w, d1, u2, rotation = parts(z)
            turn = 0.5 * h * SO3.right_jacobian(0.5 * h * w)
            linear_v = 2.0 * c.a_xx * np.eye(3)
            angular_v = c.A_xw.T + k * h * (2.0 * c.a_xx * skew(v) - skew(d1))
            angular_w = 2.0 * c.A_ww + k * h * skew(v) @ c.A_xw
            return np.block([
                [rotation @ angular_v, rotation @ (angular_w - skew(u2) @ turn)],
                [rotation @ linear_v, rotation @ (c.A_xw - skew(d1) @ turn)],
            ])

        return residual, jacobian

    def step(self, state: CoupledBodyState, inputs: ArrayLike | None = None) -> CoupledBodyState:
        """One step of ``step_size`` seconds."""
        if self.kernels is not None:
            midpoint_time = state.time + 0.5 * self.step_size
            return self._compiled_step(self.kernels, state, inputs,
                                       self.model.coefficients(midpoint_time), self.coupling_factor)
        h = self.step_size
        v, w = self._solve(state, inputs)
        c = self.model.coefficients(state.time + 0.5 * h)
        d1 = c.d1(v, w)
        midpoint = Q.multiply(state.attitude, Q.from_rotation_vector(0.5 * h * w))
        angular = c.d2(v, w) - self.coupling_factor * h * np.cross(v, d1)
        momentum = np.concatenate([Q.rotate(midpoint, angular), Q.rotate(midpoint, d1)])
        return CoupledBodyState(
            state.time + h, Q.multiply(state.attitude, Q.from_rotation_vector(h * w)),
            state.position + h * Q.rotate(midpoint, v), v, w, midpoint, momentum)
