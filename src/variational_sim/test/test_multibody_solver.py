"""The contact solver's pieces: reduced Newton system, predictor-corrector, warm start,
broad phase and the well-posed friction cone, each against a plainer reference."""

from __future__ import annotations

import numpy as np
import pytest

from variational_sim.experiments import drop_test
from variational_sim.experiments.common import PoseHold, fly_hopper
from variational_sim.multibody.contact import (
    PAIRS,
    ContactVariationalMultibody,
    InteriorPointOptions,
)
from variational_sim.multibody.hopper import (
    NOMINAL_ANGLES_DEG,
    nominal_configuration,
    with_vertical_guide,
)
from variational_sim.multibody.interior_point import ReducedNewtonSystem
from variational_sim.multibody.mechanism import Body, Contact, Mechanism

DROP_STEP, DROP_STEPS = 0.002, 160  # 0.32 s: flight, impact at about 0.2 s, compression


def _drop(options: InteriorPointOptions) -> tuple[list, list[int]]:
    """The drop test's first ``DROP_STEPS`` steps: states and solver iterations per step."""
    hopper = with_vertical_guide(fly_hopper())
    integrator = ContactVariationalMultibody(hopper, DROP_STEP, motor_commands=True,
                                             speed_feedback=drop_test.SPEED_FEEDBACK,
                                             options=options)
    positions, quaternions = nominal_configuration(hopper)
    state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
    hold = PoseHold(hopper, NOMINAL_ANGLES_DEG, drop_test.HOLD_GAIN)
    states, iterations = [], []
    for _ in range(DROP_STEPS):
        commands = hold.commands(hold.angles(state))
        state = integrator.step(state, commands)
        states.append(state)
        iterations.append(integrator.statistics.last_iterations)
    return states, iterations


@pytest.fixture(scope="module")
def reference_drop() -> tuple[list, list[int]]:
    return _drop(InteriorPointOptions())


def _assert_same_trajectory(states: list, reference: list) -> None:
    for state, expected in zip(states, reference, strict=True):
        assert np.max(np.abs(state.positions - expected.positions)) < 1e-9
        assert np.max(np.abs(state.momenta - expected.momenta)) < 1e-6
        # the normal impulse is unique; the friction's y component on the planar leg is
        # statically indeterminate against the joint forces, so only x and z compare
        assert np.max(np.abs(state.contact_impulses[:, [0, 2]]
                             - expected.contact_impulses[:, [0, 2]])) < 1e-9


def test_drop_reaches_resting_contact(reference_drop) -> None:
    states, _ = reference_drop
    normal = np.array([s.contact_impulses[0, 2] for s in states])
    assert normal[:80].max() == 0.0  # free fall: the exact broad phase, no impulse at all
    assert normal[-20:].min() > 0.0


def _contact_iterations(states: list, iterations: list[int]) -> int:
    """Solver iterations summed over the steps with the foot on the ground."""
    return sum(n for state, n in zip(states, iterations, strict=True)
               if state.contact_impulses[0, 2] > 0.0)


def test_predictor_corrector_matches_path_following(reference_drop) -> None:
    states, iterations = reference_drop
    plain, plain_iterations = _drop(InteriorPointOptions(predictor_corrector=False))
    _assert_same_trajectory(plain, states)
    assert (_contact_iterations(states, iterations)
            < _contact_iterations(states, plain_iterations))


def test_warm_start_changes_the_iterations_not_the_result(reference_drop) -> None:
    states, iterations = reference_drop
    cold, cold_iterations = _drop(InteriorPointOptions(warm_start=False))
    _assert_same_trajectory(cold, states)
    assert (_contact_iterations(states, iterations)
            < _contact_iterations(states, cold_iterations))


def test_broad_phase_never_misses_a_contact(reference_drop) -> None:
    states, _ = reference_drop
    always, _ = _drop(InteriorPointOptions(free_step_first=False))
    _assert_same_trajectory(always, states)
    # the interior point everywhere leaves impulses at its complementarity tolerance in
    # flight; the step of first real contact is the same
    first = [next(i for i, s in enumerate(run) if s.contact_impulses[0, 2] > 1e-6)
             for run in (states, always)]
    assert first[0] == first[1]


def _ball_step(gravity: list[float], options: InteriorPointOptions, steps: int):
    ball = Mechanism("ball", (Body("ball", 1.0, 0.004 * np.eye(3)),), (),
                     contacts=(Contact("c", "ball", np.zeros(3), 0.1, 0.5),),
                     gravity=np.array(gravity))
    integrator = ContactVariationalMultibody(ball, 0.01, options=options)
    state = integrator.initial_state(np.array([[0.0, 0.0, 0.1]]),
                                     np.array([[0.0, 0.0, 0.0, 1.0]]), np.zeros((1, 6)))
    for _ in range(steps):
        state = integrator.step(state)
    return state


def test_sticking_friction_has_a_unique_solution() -> None:
    """Cold and warm starts end at the same contact unknowns, not just the same net
    force: inside the cone every facet multiplier is zero and the friction impulse is
    the one that holds the contact point (a cone of non-negative impulses along +-x
    would leave their sum free)."""
    gravity = [2.0, -1.0, -9.81]
    warm = _ball_step(gravity, InteriorPointOptions(), 20)
    cold = _ball_step(gravity, InteriorPointOptions(warm_start=False), 20)
    assert np.max(np.abs(warm.contact_duals - cold.contact_duals)) < 1e-9
    assert np.max(np.abs(warm.contact_duals[0, 1:PAIRS])) < 1e-9  # facet multipliers
    assert warm.contact_impulses[0] == pytest.approx([-0.02, 0.01, 0.0981], abs=1e-9)


def test_reduced_newton_system_solves_the_full_system() -> None:
    """Eliminating the blocks' unknowns gives the solution of the unreduced system."""
    rng = np.random.default_rng(1)
    tangent, rows, blocks, size, pairs = 8, 3, 2, 4, 3
    smooth = tangent + rows
    matrix = rng.normal(size=(smooth, smooth)) + 5.0 * np.eye(smooth)
    matrix[tangent:, tangent:] = 0.0
    impulse_map = rng.normal(size=(tangent, blocks * size))
    local = rng.normal(size=(blocks, size, size))
    equality = rng.normal(size=(blocks, size, tangent))
    residual_y, residual_e = rng.normal(size=smooth), rng.normal(size=(blocks, size))
    duals, slacks = rng.random((blocks, pairs)) + 0.1, rng.random((blocks, pairs)) + 0.1
    residual_w = rng.normal(size=(blocks, pairs))
    system = ReducedNewtonSystem(matrix.copy(), impulse_map, local, equality, residual_y,
                                 residual_e, duals, slacks)
    y, du, ds = system.direction(residual_w)
    # the full system in (y, du, ds)
    n_u, n_s = blocks * size, blocks * pairs
    full = np.zeros((smooth + n_u + n_s,) * 2)
    full[:smooth, :smooth] = matrix
    full[:tangent, smooth:smooth + n_u] = -impulse_map
    for b in range(blocks):
        u = slice(smooth + b * size, smooth + (b + 1) * size)
        rows_e = u  # one equality row per local unknown
        full[rows_e, :tangent] = equality[b]
        full[rows_e, u] = local[b]
        for p in range(pairs):
            s_column = smooth + n_u + b * pairs + p
            full[smooth + b * size + p, s_column] = -1.0
            full[s_column, smooth + b * size + p] = slacks[b, p]
            full[s_column, s_column] = duals[b, p]
    rhs = -np.concatenate([residual_y, residual_e.reshape(-1), residual_w.reshape(-1)])
    solution = np.linalg.solve(full, rhs)
    assert np.allclose(y, solution[:smooth], atol=1e-10)
    assert np.allclose(du.reshape(-1), solution[smooth:smooth + n_u], atol=1e-10)
    assert np.allclose(ds.reshape(-1), solution[smooth + n_u:], atol=1e-10)
