"""Sphere-ground contact with Coulomb friction, solved by a primal-dual interior point.

Per contact (sphere of radius ``r`` at body point ``p``, ground z = 0), over the step:
normal impulse ``gamma`` (N s) and friction impulse ``b`` (N s, in the ground plane)
inside the pyramidal cone ``|b_x| + |b_y| <= mu gamma`` (facets ``a_j . b <= mu gamma``,
``a_j = (+-1, +-1)``), with facet multipliers ``nu_j`` (m/s). With ``phi(q)`` the gap
of the sphere centre minus ``r`` (m) and ``v_t`` the tangential velocity of the centre
over the step, ``(c(q_{k+1}) - c(q_k))/h`` (m/s):

    phi(q_{k+1}) = s_phi >= 0,           gamma s_phi = 0    (no penetration, inelastic)
    mu gamma - a_j . b = s_j >= 0,       nu_j s_j = 0       (friction cone)
    v_t + sum_j nu_j a_j = 0                                (maximum dissipation)

The last line is the optimality condition of ``b = argmin b . v_t`` over the cone: a
sliding contact's friction opposes the sliding on the cone's boundary. When sticking
(``v_t = 0``, ``b`` inside the cone) every ``nu_j`` is zero and ``b`` is the unique
impulse that keeps the contact point still, so the problem stays well posed (a
direction-wise cone with ``beta_j >= 0`` along ``+-x``, ``+-y`` would leave
``beta_+x + beta_-x`` free). The impulses enter the forced discrete Euler-Lagrange
equation through the centre's Jacobian at ``q_k``, like the joint constraint forces.

The five pairs ``(w, s) = ((gamma, nu), (s_phi, s_j))`` and ``b`` of every contact are
solved with the smooth unknowns by Mehrotra's predictor-corrector (``interior_point``):
complementarity relaxed to ``w s = target``, one factorisation per iteration, the
central path followed down to ``KAPPA_FINAL``. The contact unknowns are eliminated per
contact (Schur complement), so the linear system keeps the size of the contact-free
KKT system, and they are warm-started from the previous step's solution.

Broad phase, exact: a step that starts without an active contact first takes the
contact-free Newton step. If that step ends with every sphere clear of the ground it
solves the contact conditions exactly (``gamma = b = 0``, every gap a valid slack, every
facet slack zero and ``nu >= 0`` the combination of the facet normals that matches
``-v_t``), so it is the contact step; otherwise the interior point solves the step. No
distance margin or speed bound is involved, so no contact can be missed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mav_geometry.arrays import FloatArray
from variational_sim.integrators.base import NoSolutionError
from variational_sim.multibody.batched import (
    from_rotation_vectors,
    multiply,
    rotation_matrices,
    skew,
)
from variational_sim.multibody.compiled import (
    FREE_STEP_FIRST,
    INTERIOR_POINT_FAILED,
    PREDICTOR_CORRECTOR,
    WARM_START,
)
from variational_sim.multibody.discrete import start_momentum_jacobian
from variational_sim.multibody.integrator import (
    MultibodyState,
    StepSolution,
    VariationalMultibody,
)
from variational_sim.multibody.interior_point import (
    ReducedNewtonSystem,
    boundary_fraction,
    max_step,
    mehrotra_direction,
)
from variational_sim.multibody.mechanism import Contact, Mechanism

FACETS = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
"""Outward normals ``a_j`` of the friction pyramid's facets (ground x, y)."""
PAIRS = 5  # (gamma, nu_1..4) against (s_phi, s_1..4)
UNKNOWNS = PAIRS + 2  # per contact: the duals and the friction impulse b
IMPULSE_MAP = np.zeros((3, UNKNOWNS))
"""World impulse (N s) of the unknowns ``(gamma, nu_1..4, b_x, b_y)`` of one contact."""
IMPULSE_MAP[2, 0] = 1.0
IMPULSE_MAP[:2, PAIRS:] = np.eye(2)
KAPPA_START = 1e-6
"""Complementarity ``w s`` of the cold start (every pair at ``sqrt(KAPPA_START)``)."""
KAPPA_FINAL = 1e-13
"""Least centring target: the pairs end with ``w s`` about this (N s m, N s m/s)."""
COMPLEMENTARITY_TOLERANCE = 10.0 * KAPPA_FINAL
"""Stop when every ``w s`` is below this and the equalities are at ``tolerance``."""
WARM_START_FLOOR = 1e-7
"""Least value of a warm-started pair member: room for the first step to move it."""
RECENTRE_FLOOR = 1e-4
"""Least pair member after a blocked step: room to change the active set. The rest of
the step then takes path-following directions (``PATH_REDUCTION``)."""
BLOCKED_STEP = 0.1
"""Step length below which a step counts as blocked by the positivity of the pairs."""
PATH_REDUCTION = 0.1
"""Centring ``sigma`` of path-following directions (the plain variant, and the
predictor-corrector's fallback after a blocked step)."""


@dataclass(frozen=True)
class InteriorPointOptions:
    """Switches of the contact solver (all on by default; off for cross-checks).

    ``predictor_corrector``: Mehrotra's centring, else a fixed reduction of the central
    path parameter by ``PATH_REDUCTION`` per iteration; ``warm_start``: start from the
    previous step's pairs; ``free_step_first``: the exact broad phase.
    """

    predictor_corrector: bool = True
    warm_start: bool = True
    free_step_first: bool = True


DEFAULT_OPTIONS = InteriorPointOptions()
"""Every speed-up of the contact solver on."""


class ContactVariationalMultibody(VariationalMultibody):
    """``VariationalMultibody`` with the mechanism's sphere-ground contacts."""

    def __init__(self, mechanism: Mechanism, step_size: float, tolerance: float = 1e-10,
                 max_iterations: int = 100, motor_commands: bool = False,
                 speed_feedback: float = 0.0,
                 options: InteriorPointOptions = DEFAULT_OPTIONS, compiled: bool = True) -> None:
        self.options = options
        super().__init__(mechanism, step_size, tolerance, max_iterations, motor_commands,
                         speed_feedback, compiled)
        contacts = mechanism.contacts
        count = len(contacts)
        self._contact_bodies = np.array([mechanism.index(c.body) for c in contacts], dtype=int)
        self._contact_points = np.array([c.point for c in contacts]).reshape(-1, 3)
        self._radii = np.array([c.radius for c in contacts])
        # d(equalities)/d(gamma, nu, b): mu and -a_j in the facet rows, a_j in the sliding rows
        self._unknown_jacobian = np.zeros((count, UNKNOWNS, UNKNOWNS))
        self._unknown_jacobian[:, 1:PAIRS, 0] = np.array([c.friction for c in contacts])[:, None]
        self._unknown_jacobian[:, 1:PAIRS, PAIRS:] = -FACETS
        self._unknown_jacobian[:, PAIRS:, 1:PAIRS] = FACETS.T
        rows = np.arange(3)[None, :, None]
        columns = 6 * self._contact_bodies[:, None, None] + np.arange(3)[None, None, :]
        self._angular_entries = (np.arange(count)[:, None, None], rows, columns)
        self._linear_entries = (np.arange(count)[:, None, None], rows, columns + 3)
        self._point_skews = skew(self._contact_points)
        self._last_centres: tuple[bytes, FloatArray, FloatArray] | None = None

    def _stepped_contacts(self) -> tuple[Contact, ...]:
        return self.mechanism.contacts

    def _solver_flags(self) -> int:
        return ((PREDICTOR_CORRECTOR if self.options.predictor_corrector else 0)
                | (WARM_START if self.options.warm_start else 0)
                | (FREE_STEP_FIRST if self.options.free_step_first else 0))

    def _step_error(self, status: int, state: MultibodyState) -> Exception:
        if status == INTERIOR_POINT_FAILED:
            return NoSolutionError(self._interior_point_failure(state))
        return super()._step_error(status, state)

    def _interior_point_failure(self, state: MultibodyState) -> str:
        """Message of an interior point that did not converge."""
        return (f"contact interior point did not converge in {self.max_iterations} "
                f"iterations at t = {state.time:.6g} s with step {self.step_size} s")

    # -- contact kinematics ------------------------------------------------------------

    def centres(self, positions: FloatArray, quaternions: FloatArray
                 ) -> tuple[FloatArray, FloatArray]:
        """Sphere centres (c, 3) and their Jacobians (c, 3, 6 n) on the tangent space.

        The last evaluation is remembered (read-only arrays), as ``ConstraintSet``'s.
        """
        key = positions.tobytes() + quaternions.tobytes()
        if self._last_centres is not None and self._last_centres[0] == key:
            return self._last_centres[1], self._last_centres[2]
        rotations = rotation_matrices(quaternions[self._contact_bodies])
        centres = (positions[self._contact_bodies]
                   + np.einsum("cij,cj->ci", rotations, self._contact_points))
        jacobians = np.zeros((len(self._radii), 3, 6 * len(self._masses)))
        jacobians[self._angular_entries] = -rotations @ self._point_skews
        jacobians[self._linear_entries] = np.eye(3)
        centres.flags.writeable = jacobians.flags.writeable = False
        self._last_centres = (key, centres, jacobians)
        return centres, jacobians

    def gaps(self, state: MultibodyState) -> FloatArray:
        """Signed distance (m) of each contact sphere to the ground, negative inside."""
        if self._compiled is not None:
            return self._compiled.gaps(state.positions, state.quaternions)
        points, _ = self.centres(state.positions, state.quaternions)
        result: FloatArray = points[:, 2] - self._radii
        return result

    # -- step --------------------------------------------------------------------------

    def _solve(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> StepSolution:
        count = len(self._radii)
        if count == 0 or (self.options.free_step_first and not self._in_contact(state)):
            x1, q1, multipliers = self._newton(state, target, jacobian_k, commands)
            if count == 0 or np.all(self.centres(x1, q1)[0][:, 2] >= self._radii):
                return StepSolution(x1, q1, multipliers, np.zeros((count, 3)))
        return self._interior_point(state, target, jacobian_k, commands)

    @staticmethod
    def _in_contact(state: MultibodyState) -> bool:
        """Whether the last step ended with a contact pushing: its normal impulse (N s)
        above its gap (m). A cost choice only (which solve to try first): either way the
        step's result is exact."""
        return state.contact_duals.size > 0 and bool(
            np.any(state.contact_duals[:, 0] > state.contact_slacks[:, 0]))

    def _starting_point(self, state: MultibodyState, gaps: FloatArray
                        ) -> tuple[FloatArray, FloatArray]:
        """Unknowns ``(gamma, nu, b)`` (c, 7) and slacks (c, 5) to start from: the last
        step's (pairs lifted to ``WARM_START_FLOOR``), or a cold start on the central
        path ``w s = KAPPA_START`` with the gap slack at the guess's ``gaps`` (m)."""
        count = len(self._radii)
        if self.options.warm_start and state.contact_duals.shape == (count, UNKNOWNS):
            unknowns = state.contact_duals.copy()
            unknowns[:, :PAIRS] = np.maximum(unknowns[:, :PAIRS], WARM_START_FLOOR)
            return unknowns, np.maximum(state.contact_slacks, WARM_START_FLOOR)
        slacks = np.full((count, PAIRS), np.sqrt(KAPPA_START))
        slacks[:, 0] = np.maximum(gaps, np.sqrt(KAPPA_START))
        unknowns = np.zeros((count, UNKNOWNS))
        unknowns[:, :PAIRS] = KAPPA_START / slacks
        return unknowns, slacks

    def _equalities(self, centres0: FloatArray, centres1: FloatArray, unknowns: FloatArray,
                    slacks: FloatArray) -> FloatArray:
        """Residuals (c, 7) of ``phi = s_phi``, ``mu gamma - a_j . b = s_j`` and
        ``v_t + sum_j nu_j a_j = 0``."""
        result: FloatArray = np.einsum("cij,cj->ci", self._unknown_jacobian, unknowns)
        result[:, 0] += centres1[:, 2] - self._radii
        result[:, PAIRS:] += (centres1[:, :2] - centres0[:, :2]) / self.step_size
        result[:, :PAIRS] -= slacks
        return result

    def _equality_jacobian(self, jacobians1: FloatArray) -> FloatArray:
        """Derivative (c, 7, 6 n) of the equalities with respect to ``(dtheta, dr)_{k+1}``."""
        result = np.zeros((len(self._radii), UNKNOWNS, jacobians1.shape[2]))
        result[:, 0] = jacobians1[:, 2]
        result[:, PAIRS:] = jacobians1[:, :2] / self.step_size
        return result

    def _interior_point(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> StepSolution:
        """Newton on the forced DEL equation, the joint constraints and the relaxed
        contact conditions, the contact unknowns eliminated (``ReducedNewtonSystem``)."""
        h = self.step_size
        x0, q0 = state.positions, state.quaternions
        tangent, rows = 6 * len(self._masses), self.constraints.rows
        centres0, jacobians0 = self.centres(x0, q0)
        impulse_map = np.einsum("cin,ij->ncj", jacobians0, IMPULSE_MAP).reshape(tangent, -1)
        multipliers = state.multipliers.copy()
        x1, q1 = self._guess(state)
        unknowns, slacks = self._starting_point(state, self.centres(x1, q1)[0][:, 2] - self._radii)
        matrix = np.zeros((tangent + rows, tangent + rows))
        matrix[:tangent, tangent:] = -h * jacobian_k.T
        blocked = False
        for iteration in range(self.max_iterations):
            terms = self._terms(state, x1, q1, commands)
            residual_dyn = (terms.start.reshape(-1) - target - terms.actuation
                            + matrix[:tangent, tangent:] @ multipliers
                            - impulse_map @ unknowns.reshape(-1))
            residual_c, jacobian1 = self.constraints.evaluate(x1, q1)
            centres1, jacobians1 = self.centres(x1, q1)
            residual_eq = self._equalities(centres0, centres1, unknowns, slacks)
            duals = unknowns[:, :PAIRS]
            products = duals * slacks
            equality = max(abs(residual_dyn).max(), abs(residual_eq).max(),
                           abs(residual_c).max(initial=0.0))
            if equality <= self.tolerance and products.max() <= COMPLEMENTARITY_TOLERANCE:
                self._record(iteration)
                impulses = np.einsum("ij,cj->ci", IMPULSE_MAP, unknowns)
                return StepSolution(x1, q1, multipliers, impulses, unknowns, slacks)
            blocks = start_momentum_jacobian(terms.rotation, self._masses, self._inertias, h)
            matrix[:tangent, :tangent] = -terms.actuation_jacobian
            matrix[self._block_entries] += blocks
            matrix[tangent:, :tangent] = jacobian1
            system = ReducedNewtonSystem(
                matrix.copy(), impulse_map, self._unknown_jacobian,
                self._equality_jacobian(jacobians1),
                np.concatenate([residual_dyn, residual_c]), residual_eq, duals, slacks)
            mu = float(products.sum()) / products.size
            if self.options.predictor_corrector and not blocked:
                smooth, step_u, step_s = mehrotra_direction(system, duals, slacks, KAPPA_FINAL)
            else:
                smooth, step_u, step_s = system.direction(
                    products - max(KAPPA_FINAL, PATH_REDUCTION * mu))
            fraction = boundary_fraction(mu)
            alpha = min(max_step(duals, step_u[:, :PAIRS], fraction),
                        max_step(slacks, step_s, fraction))
            increments = alpha * smooth[:tangent].reshape(-1, 6)
            q1 = multiply(q1, from_rotation_vectors(increments[:, :3]))
            x1 = x1 + increments[:, 3:]
            multipliers = multipliers + alpha * smooth[tangent:]
            unknowns = unknowns + alpha * step_u
            slacks = slacks + alpha * step_s
            if alpha < BLOCKED_STEP:
                # a pair near zero must grow: give it room, and follow the central path
                # from here on (Mehrotra's aggressive targets can cycle where the
                # active set is degenerate, e.g. a diagonal slide coming to rest)
                unknowns[:, :PAIRS] = np.maximum(unknowns[:, :PAIRS], RECENTRE_FLOOR)
                slacks = np.maximum(slacks, RECENTRE_FLOOR)
                blocked = True
        raise NoSolutionError(self._interior_point_failure(state))
