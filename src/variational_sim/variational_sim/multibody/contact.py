"""Sphere-ground contact with Coulomb friction, solved by a primal-dual interior point.

Per contact (sphere of radius ``r`` at body point ``p``, ground z = 0), over the step:
normal impulse ``gamma`` (N s), friction impulses ``beta_j >= 0`` along the four
ground directions ``d_j = (+-x, +-y)`` (a pyramidal cone), and the sliding-speed
multiplier ``psi`` (m/s). With ``phi(q)`` the gap of the sphere centre minus ``r`` (m)
and ``v_t`` the tangential velocity of the centre over the step,
``(c(q_{k+1}) - c(q_k))/h`` (m/s):

    phi(q_{k+1}) = s_phi >= 0,          gamma s_phi = 0       (no penetration, inelastic)
    d_j . v_t + psi = eta_j >= 0,       beta_j eta_j = 0      (maximum dissipation)
    mu gamma - sum beta_j = s_f >= 0,   psi s_f = 0           (friction cone)

The impulses enter the forced discrete Euler-Lagrange equation through the centre's
Jacobian at ``q_k``, like the joint constraint forces. Complementarity is relaxed to
``w s = kappa`` and ``kappa`` is driven to ``KAPPA_FINAL`` (a Dojo-style primal-dual
interior point with a fraction-to-boundary rule). Contacts farther than ``MARGIN`` (m)
from the ground, accounting for the step's motion, take the contact-free Newton step.
"""

from __future__ import annotations

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.integrators.base import NoSolutionError
from variational_sim.multibody.discrete import momenta, start_momentum_jacobian
from variational_sim.multibody.integrator import MultibodyState, VariationalMultibody
from variational_sim.multibody.mechanism import Mechanism

DIRECTIONS = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
PAIRS = 6  # (gamma, beta_1..4, psi) against (s_phi, eta_1..4, s_f)
KAPPA_START = 1e-6
KAPPA_FINAL = 1e-13
MARGIN = 0.01
KAPPA_REDUCTION = 0.01  # per central-path stage; superlinear enough near the solution


def _skew(v: FloatArray) -> FloatArray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class ContactVariationalMultibody(VariationalMultibody):
    """``VariationalMultibody`` with the mechanism's sphere-ground contacts."""

    def __init__(self, mechanism: Mechanism, step_size: float, tolerance: float = 1e-10,
                 max_iterations: int = 100, motor_commands: bool = False,
                 speed_feedback: float = 0.0) -> None:
        super().__init__(mechanism, step_size, tolerance, max_iterations, motor_commands,
                         speed_feedback)
        self._contacts = [(mechanism.index(c.body), c.point, c.radius, c.friction)
                          for c in mechanism.contacts]

    # -- contact kinematics ------------------------------------------------------------

    def centres(self, positions: FloatArray, quaternions: FloatArray
                 ) -> tuple[FloatArray, FloatArray]:
        """Sphere centres (c, 3) and their Jacobians (c, 3, 6 n) on the tangent space."""
        n = len(self._masses)
        centres = np.zeros((len(self._contacts), 3))
        jacobians = np.zeros((len(self._contacts), 3, 6 * n))
        for i, (body, point, _, _) in enumerate(self._contacts):
            rotation = Q.to_matrix(quaternions[body])
            centres[i] = positions[body] + rotation @ point
            jacobians[i, :, 6 * body:6 * body + 3] = -rotation @ _skew(point)
            jacobians[i, :, 6 * body + 3:6 * body + 6] = np.eye(3)
        return centres, jacobians

    def gaps(self, state: MultibodyState) -> FloatArray:
        """Signed distance (m) of each contact sphere to the ground, negative inside."""
        points, _ = self.centres(state.positions, state.quaternions)
        return points[:, 2] - np.array([c[2] for c in self._contacts])

    def _near_ground(self, state: MultibodyState) -> bool:
        if not self._contacts:
            return False
        points, _ = self.centres(state.positions, state.quaternions)
        speed = np.max(np.abs(state.momenta[:, 3:] / self._masses[:, None]))
        # body CoM speeds miss the rotation of the foot about its CoM: allow 10 m/s more
        reach = self.step_size * (speed + 10.0) + MARGIN
        radii = np.array([c[2] for c in self._contacts])
        return bool(np.any(points[:, 2] - radii < reach))

    # -- step --------------------------------------------------------------------------

    def _solve(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        if not self._near_ground(state):
            x1, q1, multipliers = self._newton(state, target, jacobian_k, commands)
            return x1, q1, multipliers, np.zeros((len(self._contacts), 3))
        return self._interior_point(state, target, jacobian_k, commands)

    def _interior_point(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        h = self.step_size
        x0, q0 = state.positions, state.quaternions
        tangent, rows, count = 6 * len(self._masses), self.constraints.rows, len(self._contacts)
        size = tangent + rows + 2 * PAIRS * count
        centres0, forces_k = self.centres(x0, q0)
        # generalized impulse of (gamma, beta, psi): G_k^T E w per contact
        maps = np.zeros((3, PAIRS))
        maps[2, 0] = 1.0
        maps[:2, 1:5] = DIRECTIONS.T
        impulse_maps = [forces_k[i].T @ maps for i in range(count)]
        friction = np.array([c[3] for c in self._contacts])
        radii = np.array([c[2] for c in self._contacts])

        x1, q1 = self._guess(state)
        multipliers = state.multipliers.copy()
        duals = np.full((count, PAIRS), np.sqrt(KAPPA_START))
        slacks = np.full((count, PAIRS), np.sqrt(KAPPA_START))
        kappa = KAPPA_START
        matrix = np.zeros((size, size))
        matrix[:tangent, tangent:tangent + rows] = -h * jacobian_k.T
        for iteration in range(self.max_iterations):
            start, _ = momenta(x0, q0, x1, q1, self._masses, self._inertias, h)
            centres1, jacobians1 = self.centres(x1, q1)
            actuation, actuation_jacobian, _ = self._actuation(q0, q1, commands)
            residual_dyn = (start.reshape(-1) - target - actuation
                            - h * jacobian_k.T @ multipliers)
            residual_c, jacobian1 = self.constraints.evaluate(x1, q1)
            residual_contact = np.zeros((count, PAIRS))
            for i in range(count):
                residual_dyn -= impulse_maps[i] @ duals[i]
                velocity = (centres1[i, :2] - centres0[i, :2]) / h
                residual_contact[i, 0] = centres1[i, 2] - radii[i] - slacks[i, 0]
                residual_contact[i, 1:5] = DIRECTIONS @ velocity + duals[i, 5] - slacks[i, 1:5]
                residual_contact[i, 5] = (friction[i] * duals[i, 0] - np.sum(duals[i, 1:5])
                                          - slacks[i, 5])
            equality = max(np.max(np.abs(residual_dyn)), np.max(np.abs(residual_c), initial=0.0),
                           np.max(np.abs(residual_contact)))
            complementarity = np.max(np.abs(duals * slacks - kappa))
            if equality <= self.tolerance and complementarity <= 10.0 * kappa:
                if kappa <= KAPPA_FINAL:
                    self._record(iteration)
                    impulses = np.array([maps @ duals[i] for i in range(count)])
                    return x1, q1, multipliers, impulses
                kappa = max(KAPPA_FINAL, KAPPA_REDUCTION * kappa)
                continue
            # assemble [dyn; c; contact equalities; complementarity] in
            # unknowns [dq (tangent), dlambda (rows), dw (PAIRS c), ds (PAIRS c)]
            blocks = start_momentum_jacobian(q0, q1, self._masses, self._inertias, h)
            matrix[:tangent, :tangent] = -actuation_jacobian
            for body, block in enumerate(blocks):
                matrix[6 * body:6 * body + 6, 6 * body:6 * body + 6] += block
            matrix[tangent:tangent + rows, :tangent] = jacobian1
            rhs = -np.concatenate([residual_dyn, residual_c,
                                   residual_contact.reshape(-1), np.zeros(PAIRS * count)])
            base_w = tangent + rows
            base_s = base_w + PAIRS * count
            matrix[tangent + rows:, tangent:] = 0.0
            matrix[tangent + rows:, :tangent] = 0.0
            for i in range(count):
                w = slice(base_w + PAIRS * i, base_w + PAIRS * (i + 1))
                s = slice(base_s + PAIRS * i, base_s + PAIRS * (i + 1))
                matrix[:tangent, w] = -impulse_maps[i]
                eq = base_w + PAIRS * i  # equality rows of contact i
                matrix[eq, :tangent] = jacobians1[i, 2]
                matrix[eq + 1:eq + 5, :tangent] = DIRECTIONS @ jacobians1[i, :2] / h
                matrix[eq + 1:eq + 5, base_w + PAIRS * i + 5] = 1.0
                matrix[eq + 5, base_w + PAIRS * i] = friction[i]
                matrix[eq + 5, base_w + PAIRS * i + 1:base_w + PAIRS * i + 5] = -1.0
                matrix[eq:eq + PAIRS, s] = -np.eye(PAIRS)
                comp = base_s + PAIRS * i  # complementarity rows of contact i
                matrix[comp:comp + PAIRS, w] = np.diag(slacks[i])
                matrix[comp:comp + PAIRS, s] = np.diag(duals[i])
                rhs[comp:comp + PAIRS] = kappa - duals[i] * slacks[i]
            delta = np.linalg.solve(matrix, rhs)
            step_w = delta[base_w:base_s].reshape(count, PAIRS)
            step_s = delta[base_s:].reshape(count, PAIRS)
            alpha = min(1.0, _boundary(duals, step_w), _boundary(slacks, step_s))
            increments = alpha * delta[:tangent].reshape(-1, 6)
            q1 = Q.multiply(q1, Q.from_rotation_vector(increments[:, :3]))
            x1 = x1 + increments[:, 3:]
            multipliers = multipliers + alpha * delta[tangent:tangent + rows]
            duals = duals + alpha * step_w
            slacks = slacks + alpha * step_s
        raise NoSolutionError(
            f"contact interior point did not converge in {self.max_iterations} iterations at "
            f"t = {state.time:.6g} s with step {h} s"
        )


def _boundary(values: FloatArray, steps: FloatArray, fraction: float = 0.995) -> float:
    """Largest step (up to 1) keeping ``values + alpha steps`` above ``(1-fraction) values``."""
    shrinking = steps < 0.0
    if not np.any(shrinking):
        return 1.0
    return float(np.min(-fraction * values[shrinking] / steps[shrinking]))
