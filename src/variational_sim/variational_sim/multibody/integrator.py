"""Variational integrator of a mechanism in maximal coordinates (contact-free step).

Per step of ``h`` seconds under held actuator torques ``u`` (forced discrete
Euler-Lagrange equations in momentum form, constraint forces at ``q_k``):

    p_k^+(q_k, q_{k+1}) = p_k + (h/2) F(q_k, u) + h C(q_k)^T lambda,   c(q_{k+1}) = 0,
    p_{k+1} = p_{k+1}^-(q_k, q_{k+1}) + (h/2) F(q_{k+1}, u),

with ``p^+``/``p^-`` the discrete Legendre transforms of ``discrete``, ``C`` the
tangent-space constraint Jacobian of ``constraints`` and ``F`` gravity plus actuator
couples. With ``motor_commands`` the actuator torque of a step is an implicit function of
the step's own joint speed (the motor's back-EMF line, see ``forces.motor_torques``):
its derivative enters the Newton matrix, so the stiff electrical damping of a
saturating motor on light links neither chatters nor needs small steps, and the torque
stays a pure couple. The state carries the node momentum ``p_k``; starting it from the physical
initial momentum ``(J omega_0, m v_0)`` is the discrete Legendre transform
initialization (no half-step lag, ``docs/theory/multibody-contact.md`` erratum 4). The
unknowns ``(q_{k+1}, lambda)`` are found by Newton on the KKT system
``[[A, -h C_k^T], [C_{k+1}, 0]]`` with ``A = dp_k^+/dq_{k+1}``; attitudes are updated
multiplicatively (unit norm kept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.shown import shown
from variational_sim.integrators.base import NoSolutionError, check_step_size
from variational_sim.multibody.batched import from_rotation_vectors, multiply
from variational_sim.multibody.compiled import (
    NEWTON_FAILED,
    OK,
    SINGULAR,
    CompiledStep,
    kernels,
)
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.discrete import (
    RelativeRotation,
    body_rates,
    momenta,
    relative_rotation,
    start_momentum_jacobian,
)
from variational_sim.multibody.forces import (
    couple_matrix,
    gravity_wrench,
    joint_speeds,
    limit_torques,
    motor_lines,
    motor_torques,
)
from variational_sim.multibody.kinematics import inverse_mass_matrix, project_velocities
from variational_sim.multibody.mechanism import Contact, Mechanism

_NO_PAIRS = np.zeros((0, 0))
_NO_PAIRS.flags.writeable = False  # shared by every state without contact pairs


@dataclass(frozen=True)
class MultibodyState:
    """Configuration and node momentum of a mechanism at ``time`` (s).

    ``positions`` (n, 3) world CoM (m); ``quaternions`` (n, 4) body to world;
    ``momenta`` (n, 6) body angular momentum about the CoM (N m s) and world linear
    momentum (N s); ``multipliers`` the constraint forces of the last step (N for
    point rows, N m for dot rows); ``torques`` the applied actuator torques (N m);
    ``contact_impulses`` (contacts, 3) the world impulse of each ground contact over
    the last step (N s; divide by the step for the mean force); ``contact_duals`` and
    ``contact_slacks`` (contacts, k) the contact interior point's unknowns at the end of
    the last step (its warm start; empty when the step took no contact solve).
    """

    time: float
    positions: FloatArray
    quaternions: FloatArray
    momenta: FloatArray
    multipliers: FloatArray
    torques: FloatArray = field(default_factory=lambda: np.zeros(0))
    contact_impulses: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    contact_duals: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    contact_slacks: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))


@dataclass(frozen=True)
class StepSolution:
    """The unknowns of a step: end configuration, constraint forces (as in
    ``MultibodyState``) and the contact impulses and complementarity pairs."""

    positions: FloatArray
    quaternions: FloatArray
    multipliers: FloatArray
    contact_impulses: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    contact_duals: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    contact_slacks: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))


@dataclass(frozen=True)
class StepTerms:
    """The step's configuration-dependent terms at an end configuration: relative
    rotation, momenta ``p_k^+`` and ``p_{k+1}^-`` (n, 6), actuator impulse at each end
    (6 n), its Jacobian (6 n, 6 n) and the torques (N m)."""

    rotation: RelativeRotation
    start: FloatArray
    end: FloatArray
    actuation: FloatArray
    actuation_jacobian: FloatArray
    torques: FloatArray


@dataclass
class NewtonStatistics:
    """Iterations of the last step and the maximum seen."""

    last_iterations: int = 0
    max_iterations_seen: int = 0


class VariationalMultibody:
    """Steps a ``MultibodyState`` of ``mechanism`` by ``step_size`` seconds."""

    def __init__(
        self, mechanism: Mechanism, step_size: float,
        tolerance: float = 1e-12, max_iterations: int = 30, motor_commands: bool = False,
        speed_feedback: float = 0.0, compiled: bool = True,
    ) -> None:
        """``tolerance``: Newton stop on the constraint violation (m) and on the momentum
        residual relative to ``max(1, |p|)`` (N s). ``motor_commands``: step inputs are
        motor voltage commands in [-1, 1] driving the implicit back-EMF model instead of
        torques (N m) clamped explicitly at the start of the step. ``speed_feedback``
        (N m s/rad): damping of the motor drives' speed loop, added to the back-EMF slope
        and solved implicitly like it (the derivative term of a joint PD whose gain
        would make an explicit loop unstable on the light links). ``compiled``: step with
        the C kernel (``multibody.compiled``) when it is built and ``MAV_KERNELS`` is not
        ``reference``; false runs the numpy reference."""
        if speed_feedback < 0.0 or (speed_feedback > 0.0 and not motor_commands):
            raise ValueError("speed_feedback must be >= 0 and needs motor_commands")
        if motor_commands and not all(np.isfinite(a.peak_torque) and np.isfinite(a.no_load_speed)
                                      for a in mechanism.actuators):
            raise ValueError("motor_commands needs a finite peak_torque and no_load_speed "
                             "on every actuator")
        self.mechanism = mechanism
        self.step_size = check_step_size(step_size)
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.constraints = ConstraintSet(mechanism)
        self.statistics = NewtonStatistics()
        self.motor_commands = motor_commands
        self.speed_feedback = float(speed_feedback)
        self._couples = couple_matrix(mechanism)
        self._no_coupling = np.zeros((self._couples.shape[0],) * 2)
        # B^T restricted to each body's angular rows: body rates to joint speeds
        self._angular_couples = self._couples.T.reshape(
            len(mechanism.actuators), len(mechanism.bodies), 6)[..., :3]
        if motor_commands:
            self._peaks, self._gains = motor_lines(mechanism, self.speed_feedback)
        self._masses = mechanism.masses
        self._inertias = mechanism.inertias
        self._inverse_inertias = np.linalg.inv(self._inertias)
        self._gravity = gravity_wrench(mechanism)
        self._last_terms: tuple[bytes, StepTerms] | None = None
        body_rows = 6 * np.arange(len(self._masses))[:, None, None] + np.arange(6)[:, None]
        self._block_entries = (body_rows, body_rows.transpose(0, 2, 1))  # (n, 6, 6) blocks
        module = kernels()
        self._compiled = (CompiledStep(module, self, self._stepped_contacts())
                          if compiled and module is not None else None)

    def _stepped_contacts(self) -> tuple[Contact, ...]:
        """The contacts the step solves (none: this integrator ignores contacts)."""
        return ()

    def _solver_flags(self) -> int:
        """The contact solver's switches for the compiled step (``compiled`` flags)."""
        return 0

    # -- state helpers ---------------------------------------------------------------------

    def initial_state(
        self, positions: FloatArray, quaternions: FloatArray, velocities: FloatArray,
        time: float = 0.0,
    ) -> MultibodyState:
        """State from a consistent configuration and body velocities (n, 6).

        ``velocities``: body-frame angular (rad/s) and world CoM linear (m/s), e.g. from
        ``kinematics.body_velocities``.
        """
        angular = np.einsum("nij,nj->ni", self._inertias, velocities[:, :3])
        linear = self._masses[:, None] * velocities[:, 3:]
        return MultibodyState(
            float(time), np.array(positions, dtype=float), np.array(quaternions, dtype=float),
            np.concatenate([angular, linear], axis=1), np.zeros(self.constraints.rows),
            np.zeros(len(self.mechanism.actuators)),
        )

    def velocities(self, state: MultibodyState) -> FloatArray:
        """Node velocities (n, 6), projected onto the constraint tangent space.

        The node momentum of the scheme satisfies the velocity constraint only to
        O(h^2); the projection (RATTLE's) changes nothing in the trajectory, because any
        momentum along ``C^T`` is absorbed by the next step's multipliers.
        """
        raw = np.concatenate([
            np.einsum("nij,nj->ni", self._inverse_inertias, state.momenta[:, :3]),
            state.momenta[:, 3:] / self._masses[:, None],
        ], axis=1)
        _, jacobian = self.constraints.evaluate(state.positions, state.quaternions)
        return project_velocities(self.mechanism, jacobian, raw)

    def energy(self, state: MultibodyState) -> float:
        """Kinetic plus gravitational potential energy (J) at the node."""
        u = self.velocities(state).reshape(-1)
        mass = np.linalg.inv(inverse_mass_matrix(self.mechanism))
        potential = -float(np.sum(self._masses[:, None] * self.mechanism.gravity
                                  * state.positions))
        return 0.5 * float(u @ mass @ u) + potential

    def total_momentum(self, state: MultibodyState) -> tuple[FloatArray, FloatArray]:
        """Total linear momentum (N s) and angular momentum about the world origin (N m s)."""
        linear = state.momenta[:, 3:]
        spin = Q.rotate(state.quaternions, state.momenta[:, :3])
        angular = np.sum(np.cross(state.positions, linear) + spin, axis=0)
        return np.sum(linear, axis=0), angular

    def step_inputs(self, state: MultibodyState, inputs: ArrayLike | None) -> FloatArray:
        """Validated inputs of a step: motor commands in [-1, 1] with ``motor_commands``,
        else the commanded torques (N m) clamped to the torque-speed envelope at the
        node's joint speeds. ``None`` is no command: the actuators are passive and apply
        exactly zero torque at any joint speed (NaN commands, zero torques)."""
        count = len(self.mechanism.actuators)
        if inputs is None:
            return np.full(count, np.nan) if self.motor_commands else np.zeros(count)
        command = np.asarray(inputs, dtype=float)
        bound = 1.0 if self.motor_commands else math.inf
        # plain floats: a few actuators, checked at every step
        if command.shape != (count,) or not all(math.isfinite(value) and abs(value) <= bound
                                                 for value in command.tolist()):
            unit = "motor commands in [-1, 1]" if self.motor_commands else "actuator torques (N m)"
            raise ValueError(f"inputs must be {count} finite {unit}, got {shown(inputs)}")
        if self.motor_commands:
            return command
        omega = np.einsum("nij,nj->ni", self._inverse_inertias, state.momenta[:, :3])
        speeds = joint_speeds(self.mechanism, state.quaternions, omega)
        return limit_torques(self.mechanism, command, speeds)

    # -- step ------------------------------------------------------------------------------

    def step(self, state: MultibodyState, inputs: ArrayLike | None = None) -> MultibodyState:
        """One step with ``inputs`` (actuator order) held over it: torques (N m), or motor
        commands in [-1, 1] with ``motor_commands``; ``None``: passive actuators (zero
        torque, no back-EMF braking)."""
        h = self.step_size
        commands = self.step_inputs(state, inputs)
        if self._compiled is not None:
            return self._compiled_step(state, commands)
        x0, q0 = state.positions, state.quaternions
        target = (state.momenta + 0.5 * h * self._gravity).reshape(-1)
        _, jacobian_k = self.constraints.evaluate(x0, q0)
        solution = self._solve(state, target, jacobian_k, commands)
        x1, q1 = solution.positions, solution.quaternions
        terms = self._terms(state, x1, q1, commands)
        return replace(
            state, time=state.time + h, positions=x1, quaternions=q1,
            momenta=terms.end + 0.5 * h * self._gravity + terms.actuation.reshape(-1, 6),
            multipliers=solution.multipliers, torques=terms.torques,
            contact_impulses=solution.contact_impulses, contact_duals=solution.contact_duals,
            contact_slacks=solution.contact_slacks,
        )

    def _compiled_step(self, state: MultibodyState, commands: FloatArray) -> MultibodyState:
        """``step`` by the C kernel: the same algorithm as the reference below."""
        assert self._compiled is not None
        result = self._compiled.step(
            state.positions, state.quaternions, state.momenta, state.multipliers,
            state.torques, commands, state.contact_duals, state.contact_slacks,
            self._solver_flags())
        if result.status != OK:
            raise self._step_error(result.status, state)
        self._record(result.iterations)
        solved = result.contact_solved
        return MultibodyState(
            state.time + self.step_size, result.positions, result.quaternions, result.momenta,
            result.multipliers, result.torques, result.contact_impulses,
            result.contact_duals if solved else _NO_PAIRS,
            result.contact_slacks if solved else _NO_PAIRS,
        )

    def _step_error(self, status: int, state: MultibodyState) -> Exception:
        """The reference's exception for a failed compiled step."""
        if status == NEWTON_FAILED:
            return NoSolutionError(self._newton_failure(state))
        if status == SINGULAR:
            return np.linalg.LinAlgError("singular Newton matrix of the multibody step")
        return RuntimeError(f"compiled multibody step failed with status {status}")

    def _newton_failure(self, state: MultibodyState) -> str:
        """Message of a Newton solve that did not converge."""
        return (f"maximal-coordinate Newton did not converge in {self.max_iterations} "
                f"iterations at t = {state.time:.6g} s with step {self.step_size} s: reduce "
                "the step size or check for a singular configuration")

    def _terms(self, state: MultibodyState, x1: FloatArray, q1: FloatArray,
               commands: FloatArray) -> StepTerms:
        """``StepTerms`` of the step from ``state`` to ``(x1, q1)``. The last result is
        remembered: the step's end is where its solver last evaluated them."""
        key = b"".join(a.tobytes() for a in (state.positions, state.quaternions, x1, q1,
                                             commands))
        if self._last_terms is not None and self._last_terms[0] == key:
            return self._last_terms[1]
        rotation = relative_rotation(state.quaternions, q1)
        start, end = momenta(state.positions, x1, rotation, self._masses, self._inertias,
                             self.step_size)
        terms = StepTerms(rotation, start, end, *self._actuation(rotation, commands))
        self._last_terms = (key, terms)
        return terms

    def _actuation(
        self, rotation: RelativeRotation, commands: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Actuator impulse at each end of the step, ``(h/2) B tau`` (6 n), its derivative
        with respect to the end increments ``(dtheta, dr)_{k+1}`` (6 n, 6 n) and ``tau``
        (N m). Explicit torques are constant over the step (zero derivative)."""
        h = self.step_size
        if not self.motor_commands:
            return 0.5 * h * self._couples @ commands, self._no_coupling, commands
        rates, rate_jacobians = body_rates(rotation, h)
        speeds = np.einsum("mni,ni->m", self._angular_couples, rates)
        torques, slopes = motor_torques(self._peaks, self._gains, commands, speeds)
        speed_jacobian = np.zeros((len(commands), len(self._masses), 6))
        speed_jacobian[:, :, :3] = np.einsum("mni,nij->mnj", self._angular_couples,
                                             rate_jacobians)
        jacobian = 0.5 * h * self._couples @ (slopes[:, None]
                                              * speed_jacobian.reshape(len(commands), -1))
        return 0.5 * h * self._couples @ torques, jacobian, torques

    def _solve(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> StepSolution:
        """``(q_{k+1}, lambda)`` of the contact-free step, and no contact impulses.

        ``target``: node momentum plus the half-step gravity impulse (6 n, N s)."""
        return StepSolution(*self._newton(state, target, jacobian_k, commands))

    def _guess(self, state: MultibodyState) -> tuple[FloatArray, FloatArray]:
        """Constant-velocity guess of ``(x_{k+1}, Q_{k+1})``: the last step's mean
        velocity, ``p_k^-``, the node momentum without the forces' end-of-step half
        impulses. (The node momentum itself would add the unbalanced half impulse of a
        large torque on a light link, which the constraint forces cancel only inside the
        step.)"""
        h = self.step_size
        momentum = state.momenta - 0.5 * h * (self._gravity
                                              + (self._couples @ state.torques).reshape(-1, 6))
        omega = np.einsum("nij,nj->ni", self._inverse_inertias, momentum[:, :3])
        q1 = multiply(state.quaternions, from_rotation_vectors(h * omega))
        x1 = state.positions + h * momentum[:, 3:] / self._masses[:, None]
        return x1, q1

    def _newton(
        self, state: MultibodyState, target: FloatArray, jacobian_k: FloatArray,
        commands: FloatArray,
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        h = self.step_size
        multipliers = state.multipliers.copy()
        impulse_map = -h * jacobian_k.T
        x1, q1 = self._guess(state)
        momentum_tolerance = self.tolerance * max(1.0, float(np.max(np.abs(target))))
        rows = self.constraints.rows
        tangent = 6 * len(self._masses)
        # KKT matrix [[A, -h C_k^T], [C_{k+1}, 0]]; A is block-diagonal, filled per iteration
        kkt = np.zeros((tangent + rows, tangent + rows))
        kkt[:tangent, tangent:] = impulse_map
        for iteration in range(self.max_iterations + 1):
            terms = self._terms(state, x1, q1, commands)
            residual_p = (terms.start.reshape(-1) - target - terms.actuation
                          + impulse_map @ multipliers)
            residual_c, jacobian = self.constraints.evaluate(x1, q1)
            if (np.max(np.abs(residual_c), initial=0.0) <= self.tolerance
                    and np.max(np.abs(residual_p)) <= momentum_tolerance):
                self._record(iteration)
                return x1, q1, multipliers
            if iteration == self.max_iterations:
                break
            blocks = start_momentum_jacobian(terms.rotation, self._masses, self._inertias, h)
            kkt[:tangent, :tangent] = -terms.actuation_jacobian
            kkt[self._block_entries] += blocks
            kkt[tangent:, :tangent] = jacobian
            delta = np.linalg.solve(kkt, -np.concatenate([residual_p, residual_c]))
            increments = delta[:tangent].reshape(-1, 6)
            q1 = multiply(q1, from_rotation_vectors(increments[:, :3]))
            x1 = x1 + increments[:, 3:]
            multipliers = multipliers + delta[tangent:]
            if np.max(np.abs(delta)) <= 1e-15 * max(1.0, float(np.max(np.abs(x1)))):
                self._record(iteration + 1)
                return x1, q1, multipliers  # correction at round-off: converged
        raise NoSolutionError(self._newton_failure(state))

    def _record(self, iterations: int) -> None:
        self.statistics.last_iterations = iterations
        self.statistics.max_iterations_seen = max(self.statistics.max_iterations_seen,
                                                  iterations)
