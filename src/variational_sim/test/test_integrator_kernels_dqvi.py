"""The compiled DQVI step (integrators/_kernels.c) against the Python reference in dqvi.py.

Both run the same Newton iteration; only the 6x6 Jacobian product and its LU factors
(numpy/LAPACK against plain C loops) round differently, so states agree to round-off
and the Jacobian counts exactly. The iteration counts may differ by the one final chord
step when the residual lands within round-off of the stop threshold (3e-16 relative).
"""

from __future__ import annotations

import importlib
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion as Q
from mav_geometry.kernels import kernel_choice
from mav_geometry.nilpotent import DUAL
from mav_ros_common.resources import find_named_file
from variational_sim.integrators.base import CouplingLimitWarning, NoSolutionError
from variational_sim.integrators.dqvi import DQVI
from variational_sim.models.paper_bodies import generic_body, generic_initial_state
from variational_sim.models.rigid_body import RigidBody, RigidBodyState
from variational_sim.vehicle_sim.plant import MultirotorPlant

KERNELS = importlib.import_module("variational_sim.integrators._kernels")


def pair(body: RigidBody, h: float) -> tuple[DQVI, DQVI]:
    """A compiled DQVI and its Python reference."""
    compiled, reference = DQVI(body, h), DQVI(body, h)
    compiled.kernels, reference.kernels = KERNELS, None
    return compiled, reference


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


unit = st.floats(-1.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(mass=st.floats(0.2, 5.0), inertia=st.lists(st.floats(0.05, 2.0), min_size=3, max_size=3),
       com=st.lists(st.floats(-0.3, 0.3), min_size=3, max_size=3),
       axis=st.lists(unit, min_size=4, max_size=4), position=st.lists(unit, min_size=3, max_size=3),
       rate=st.lists(unit, min_size=3, max_size=3), velocity=st.lists(unit, min_size=3, max_size=3),
       held=st.lists(st.floats(-5.0, 5.0), min_size=6, max_size=6),
       h=st.sampled_from([1e-3, 1e-2, 0.1]), turn=st.floats(0.0, 0.8))
def test_one_step_agrees_with_the_reference(mass, inertia, com, axis, position, rate, velocity,
                                            held, h, turn):
    body = RigidBody.from_mass_properties(mass, np.diag(inertia), com, (0.0, 0.0, -9.81))
    q = np.array(axis) if np.linalg.norm(axis) > 0.1 else np.array([0.0, 0.0, 0.0, 1.0])
    omega = np.array(rate)
    # rate scaled so that h |omega| = turn (below the step limit of about 1)
    omega = omega * (turn / h / max(np.linalg.norm(omega), 1e-9))
    state = body.state(DUAL.pack(Q.normalize(q), position), [*omega, *velocity])
    compiled, reference = pair(body, h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CouplingLimitWarning)
        try:
            expected = reference.step(state, held)
        except NoSolutionError as error:
            failure = str(error).split(":")[0]
        else:
            failure = ""
        if failure:
            # A few states near h |omega| = 1 have no solution the line search reaches
            # (about 1 in 600 draws): the compiled step must fail the same way.
            with pytest.raises(NoSolutionError, match=re.escape(failure)):
                compiled.step(state, held)
            return
        ours = compiled.step(state, held)
    assert ours.time == expected.time
    assert relative(ours.pose, expected.pose) < 1e-13
    assert relative(ours.momentum, expected.momentum) < 1e-12
    ours_stats, expected_stats = compiled.statistics, reference.statistics
    assert ours_stats.last_jacobians == expected_stats.last_jacobians
    assert abs(ours_stats.last_iterations - expected_stats.last_iterations) <= 1
    assert ours_stats.last_coupling_number == pytest.approx(
        expected_stats.last_coupling_number, rel=1e-10, abs=1e-30)


def test_whole_run_keeps_the_reference_trajectory_energy_and_momentum():
    """1000 steps of body B1 at h = 0.1 s (about 16 turns): round-off apart, same run."""
    body = generic_body()
    compiled, reference = pair(body, 0.1)
    ours = expected = generic_initial_state(body)
    energy0, momentum0 = body.energy(ours), body.spatial_momentum(ours)
    drift = {"ours": [0.0, 0.0], "expected": [0.0, 0.0]}
    for _ in range(1000):
        ours, expected = compiled.step(ours), reference.step(expected)
        for key, state in (("ours", ours), ("expected", expected)):
            drift[key][0] = max(drift[key][0], abs(body.energy(state) / energy0 - 1.0))
            drift[key][1] = max(drift[key][1], float(
                np.abs(body.spatial_momentum(state) - momentum0).max()))
    assert relative(ours.pose, expected.pose) < 1e-11
    assert relative(ours.momentum, expected.momentum) < 1e-11
    # bounded energy error of the same size (it is O(h^2), far above round-off)
    assert drift["ours"][0] == pytest.approx(drift["expected"][0], rel=1e-8)
    assert drift["ours"][0] < 1e-2
    # momentum conserved to round-off by both
    assert drift["ours"][1] < 1e-12
    assert drift["expected"][1] < 1e-12
    assert compiled.statistics.max_jacobians_seen == reference.statistics.max_jacobians_seen
    assert compiled.statistics.max_iterations_seen == reference.statistics.max_iterations_seen


def test_the_vehicle_plant_steps_the_compiled_dqvi_with_its_held_wrench():
    """quadrotor_x at 1 kHz, rotors unbalanced so it climbs, rolls and yaws: 300 steps."""
    vehicle = load_vehicle(find_named_file("quadrotor_x", "vehicles"))
    plants = MultirotorPlant(vehicle), MultirotorPlant(vehicle)
    # the simulator's default path is the compiled step unless MAV_KERNELS=reference
    expected_default = None if kernel_choice() == "reference" else KERNELS
    assert plants[0].integrator.kernels is expected_default
    plants[0].integrator.kernels, plants[1].integrator.kernels = KERNELS, None
    speeds = [700.0, 720.0, 690.0, 730.0]
    for plant in plants:
        plant.reset((0.0, 0.0, 5.0), twist=(0.2, -0.1, 1.0, 0.5, 0.0, 0.0))
        for _ in range(300):
            plant.step(speeds)
    ours, expected = plants[0].state, plants[1].state
    assert not plants[0].landed
    assert abs(ours.pose[2]) > 0.1  # turned 0.3 rad in yaw
    assert relative(ours.pose, expected.pose) < 1e-12
    assert relative(ours.momentum, expected.momentum) < 1e-12
    assert plants[0].integrator.statistics.max_jacobians_seen == \
        plants[1].integrator.statistics.max_jacobians_seen


def test_solve_agrees_with_the_reference_solve():
    body = generic_body()
    compiled, reference = pair(body, 0.1)
    rng = np.random.default_rng(7)
    for _ in range(50):
        target = list(body.inertia @ rng.uniform(-0.4, 0.4, 6) * 0.5)
        ours, expected = compiled.solve(target), reference.solve(target)
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-15)
        assert compiled.statistics.last_jacobians == reference.statistics.last_jacobians


def test_failure_beyond_the_step_limit_is_reported_like_the_reference():
    body = generic_body()
    state = body.state(DUAL.identity(), [0.0, 0.0, 1.5 / 0.1, 0.0, 0.0, 0.0])
    messages = []
    for integrator in pair(body, 0.1):
        with pytest.raises(NoSolutionError, match=r"h \|omega\| = 1\.5: ") as raised:
            integrator.step(state)
        messages.append(str(raised.value).split(";")[0])
    assert messages[0] == messages[1]


def test_inputs_as_lists_integer_arrays_and_none_give_the_same_step():
    body = generic_body((0.0, 0.0, -9.81))
    compiled, _ = pair(body, 0.01)
    state = generic_initial_state(body)
    as_floats = compiled.step(state, np.zeros(6))
    for inputs in (None, [0, 0, 0, 0, 0, 0], np.zeros(6, dtype=int)):
        step = compiled.step(state, inputs)
        assert np.array_equal(step.pose, as_floats.pose)
        assert np.array_equal(step.momentum, as_floats.momentum)
    integer_pose = RigidBodyState(0.0, np.array([0, 0, 0, 1, 0, 0, 0, 0]), state.momentum)
    float_pose = RigidBodyState(0.0, DUAL.identity(), state.momentum)
    assert np.array_equal(compiled.step(integer_pose).pose, compiled.step(float_pose).pose)


def test_bad_buffers_and_inputs_are_rejected_with_one_clear_error():
    body = generic_body()
    integrator, _ = pair(body, 0.1)
    state = generic_initial_state(body)
    good = [integrator._kernel_body, 0.1, 3e-16, 50, 1e-9, 0.1, state.pose, state.momentum,
            None, np.empty(8), np.empty(6)]

    def call(index: int, value: object) -> None:
        arguments = list(good)
        arguments[index] = value
        KERNELS.dqvi_step(*arguments)

    with pytest.raises(ValueError, match="inputs must hold 6 numbers, got 2"):
        integrator.step(state, [0.0, 1.0])
    with pytest.raises(ValueError, match="finite body wrench"):
        integrator.step(state, [0.0, 0.0, math.nan, 0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match=r"inputs\[1\] is not a number"):
        integrator.step(state, [0.0, "x", 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="body must hold 78 numbers"):
        call(0, np.zeros(77))
    with pytest.raises(ValueError, match="positive finite step"):
        call(1, -0.1)
    with pytest.raises(ValueError, match="max_iterations"):
        call(3, 0)
    with pytest.raises(ValueError, match="pose must hold 8 numbers, got 7"):
        call(6, np.zeros(7))
    with pytest.raises(TypeError, match="momentum must be a sequence of 6 numbers"):
        call(7, 3.0)
    with pytest.raises(TypeError, match="pose_out must be a writable"):
        call(9, bytes(64))
    with pytest.raises(ValueError, match="pose_out must be a float64 array of 8"):
        call(9, np.empty(8, dtype=np.float32))
    with pytest.raises(ValueError, match="momentum_out must be a float64 array of 6"):
        call(10, np.empty(7))
    with pytest.raises(ValueError, match="out must be a float64 array of 6"):
        KERNELS.dqvi_solve(integrator._kernel_body, 3e-16, 50, 1e-9, 0.1, [0.0] * 6,
                           np.empty(5))
