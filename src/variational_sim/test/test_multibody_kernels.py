"""The compiled multibody step (multibody/_kernels.c) against the numpy reference.

Both run the same Newton and interior-point iterations; the C step factorises the
Newton matrix as a band under a reverse Cuthill-McKee order (other pivots, other
summation order than numpy's LAPACK), so one step agrees to round-off amplified by the
conditioning of the KKT matrix, and whole runs keep their contact events and energy.
"""

from __future__ import annotations

import functools
import importlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from variational_sim.experiments import drop_test, hop
from variational_sim.experiments.common import fly_hopper
from variational_sim.integrators.base import NoSolutionError
from variational_sim.multibody.chain import chain_configuration, pendulum_chain
from variational_sim.multibody.compiled import band_order
from variational_sim.multibody.contact import ContactVariationalMultibody, InteriorPointOptions
from variational_sim.multibody.hopper import (
    LEG_JOINTS,
    nominal_configuration,
    with_vertical_guide,
    with_welded_base,
)
from variational_sim.multibody.integrator import MultibodyState, VariationalMultibody
from variational_sim.multibody.kinematics import body_velocities, joint_angle

KERNELS = importlib.import_module("variational_sim.multibody._kernels")
HOPPER = with_vertical_guide(fly_hopper())
NOMINAL = {"hip0": 30.0, "knee1": 120.0, "hip2": 150.0, "knee3": -120.0}
FIELDS = ("positions", "quaternions", "momenta", "multipliers", "torques", "contact_impulses")


def hopper_state(integrator: VariationalMultibody, turns_deg: list[float], height: float,
                 rates: list[float], sink: float) -> MultibodyState:
    """A consistent hopper state: hips turned from the nominal pose (deg), the base at
    ``height`` (m), hip rates (rad/s) and the base sinking at ``sink`` (m/s)."""
    angles = dict(NOMINAL, hip0=NOMINAL["hip0"] + turns_deg[0], hip2=NOMINAL["hip2"] + turns_deg[1])
    positions, quaternions = nominal_configuration(HOPPER, angles, np.array([0.0, 0.0, height]))
    velocities = body_velocities(HOPPER, positions, quaternions,
                                 np.array([0.0, 0.0, 0.0, 0.0, 0.0, -sink]),
                                 {"hip0": rates[0], "hip2": rates[1]})
    return integrator.initial_state(positions, quaternions, velocities)


def assert_same_step(compiled: MultibodyState, reference: MultibodyState, scale: float) -> None:
    """Every field equal to ``scale`` times round-off, relative to its size."""
    for name in FIELDS:
        a, b = getattr(compiled, name), getattr(reference, name)
        assert a.shape == b.shape, name
        size = max(1.0, np.abs(b).max(initial=0.0))
        assert np.abs(a - b).max(initial=0.0) <= scale * 1e-15 * size, name
    assert compiled.contact_duals.shape == reference.contact_duals.shape


def pair(mechanism, step: float, **options) -> tuple[VariationalMultibody, VariationalMultibody]:
    kind = ContactVariationalMultibody if mechanism.contacts else VariationalMultibody
    return kind(mechanism, step, compiled=True, **options), kind(mechanism, step, compiled=False,
                                                                 **options)


hips = st.lists(st.floats(-15.0, 15.0), min_size=2, max_size=2)
rates = st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=2)
slow = st.lists(st.floats(-0.5, 0.5), min_size=2, max_size=2)
commands = st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=2)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(turns=hips, height=st.floats(0.3, 0.4), speeds=slow, sink=st.floats(-0.5, 1.0),
       command=commands, feedback=st.sampled_from([0.0, 40.0]))
def test_contact_steps_agree_with_the_reference(turns, height, speeds, sink, command, feedback):
    """Two steps (the second warm-started), the foot from 2 cm into the ground (at the
    nominal hips) to 7 cm above it: the interior point, the broad phase and the motor
    model."""
    compiled, reference = pair(HOPPER, 0.001, motor_commands=True, speed_feedback=feedback)
    state = hopper_state(compiled, turns, height, speeds, sink)
    for _ in range(2):
        try:
            b = reference.step(state, command)
        except NoSolutionError as error:  # a sudden full command the step cannot follow
            with pytest.raises(NoSolutionError, match=re.escape(str(error))):
                compiled.step(state, command)
            return
        assert_same_step(compiled.step(state, command), b, 1e6)
        state = b


@settings(max_examples=15, deadline=None, derandomize=True)
@given(turns=hips, speeds=rates, torques=st.lists(st.floats(-30.0, 30.0), min_size=2,
                                                    max_size=2),
       plain=st.booleans())
def test_torque_driven_and_plain_interior_point_steps_agree(turns, speeds, torques, plain):
    options = InteriorPointOptions(False, False, False) if plain else InteriorPointOptions()
    compiled, reference = pair(HOPPER, 0.002, options=options)
    state = hopper_state(compiled, turns, 0.31, speeds, 0.5)
    a, b = compiled.step(state, torques), reference.step(state, torques)
    assert_same_step(a, b, 1e6)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(links=st.integers(1, 8), angle=st.floats(-1.0, 1.0), step=st.sampled_from([1e-3, 1e-2]))
def test_chain_steps_agree_with_the_reference(links, angle, step):
    """Contact-free Newton on chains of any length, with a passive joint set."""
    chain = pendulum_chain(links, np.array([0.0, 0.0, 5.0])).without_contacts()
    compiled, reference = pair(chain, step)
    positions, quaternions = chain_configuration(chain, np.full(links, angle))
    state = compiled.initial_state(positions, quaternions, np.zeros((links, 6)))
    for _ in range(3):
        a, b = compiled.step(state), reference.step(state)
        assert_same_step(a, b, 1e4)
        state = b


def test_chain_band_stays_narrow_as_bodies_are_added() -> None:
    """The Newton matrix of a chain keeps one bandwidth at any length: linear cost."""
    widths = set()
    for links in (3, 10, 30):
        integrator = VariationalMultibody(pendulum_chain(links, np.zeros(3)), 0.01)
        order, lower, upper = band_order(links, integrator.constraints.table, [])
        assert sorted(order) == list(range(6 * links + integrator.constraints.rows))
        widths.add((lower, upper))
    assert len(widths) == 1
    assert max(widths.pop()) < 20


def with_integrator(compiled: bool):
    """An experiment's integrator class with the compiled or the reference step."""
    return functools.partial(ContactVariationalMultibody, compiled=compiled)


def test_drop_test_run_matches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.6 s at h = 2 ms: the fall, the impact (same step) and the settling."""
    runs = []
    for compiled in (True, False):
        monkeypatch.setattr(drop_test, "ContactVariationalMultibody",
                            with_integrator(compiled))
        runs.append(drop_test.simulate(0.002, 0.6))
    a, b = runs
    first_contact = [int(np.argmax(run.normal_force > 1e-3)) for run in runs]
    assert first_contact[0] == first_contact[1] > 0
    assert np.abs(a.base_height - b.base_height).max() < 1e-10
    assert np.abs(a.normal_force - b.normal_force).max() < 1e-5 * b.normal_force.max()
    assert np.abs(a.iterations - b.iterations).max() <= 1


def test_hop_run_matches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole hop at h = 2 ms: same lift-off and touch-down steps, same apex."""
    runs = []
    for compiled in (True, False):
        monkeypatch.setattr(hop, "ContactVariationalMultibody", with_integrator(compiled))
        runs.append(hop.simulate(0.002, 1.0))
    a, b = runs
    assert a.liftoff == b.liftoff
    assert a.touchdown == b.touchdown
    assert abs(a.apex_height - b.apex_height) < 1e-10
    assert np.abs(a.base_height - b.base_height).max() < 1e-9
    assert np.abs(a.torques - b.torques).max() < 1e-6


def test_passive_swing_energy_matches_the_reference() -> None:
    """Fixed-base swing, 0.15 s at h = 1 ms: the same bounded energy error."""
    mechanism = with_welded_base(fly_hopper().without_contacts())
    positions, quaternions = nominal_configuration(mechanism)
    energies = []
    for compiled in (True, False):
        integrator = VariationalMultibody(mechanism, 0.001, compiled=compiled)
        state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
        energy = [integrator.energy(state)]
        for _ in range(15):
            for _ in range(10):
                state = integrator.step(state)
            energy.append(integrator.energy(state))
        energies.append(np.array(energy))
    drift = np.abs(energies[0] - energies[0][0]).max()
    assert drift < 1e-3 * passive_swing_scale(mechanism)
    assert np.abs(energies[0] - energies[1]).max() < 1e-9


def passive_swing_scale(mechanism) -> float:
    """Energy scale of the swing (J): the leg's weight times its length."""
    return float(mechanism.masses[1:].sum() * 9.807 * 0.4)


def test_gaps_and_joint_angles_agree_with_the_reference() -> None:
    compiled, reference = pair(HOPPER, 0.001)
    rng = np.random.default_rng(3)
    for _ in range(5):
        state = hopper_state(compiled, list(rng.uniform(-20, 20, 2)), rng.uniform(0.2, 0.5),
                             [0.0, 0.0], 0.0)
        assert np.abs(compiled.gaps(state) - reference.gaps(state)).max() < 1e-15
        for name in LEG_JOINTS:
            single = joint_angle(HOPPER, name, state.quaternions)  # compiled: one configuration
            batch = joint_angle(HOPPER, name, state.quaternions[None])[0]  # numpy reference
            assert abs(single - batch) < 1e-14


def test_bad_buffers_are_rejected() -> None:
    integrator = ContactVariationalMultibody(HOPPER, 0.001)
    compiled = integrator._compiled
    assert compiled is not None
    state = hopper_state(integrator, [0.0, 0.0], 0.5, [0.0, 0.0], 0.0)
    arguments = [compiled.model, np.empty(KERNELS.workspace_size(compiled.model)),
                 state.positions, state.quaternions, state.momenta, state.multipliers,
                 state.torques, np.zeros(2), np.zeros((1, 7)), np.zeros((1, 5)), 0,
                 *(np.empty(shape) for shape in compiled._shapes)]
    assert KERNELS.step(*arguments)[0] == 0
    short = list(arguments)
    short[2] = state.positions[:4]
    with pytest.raises(ValueError, match="positions: expected 15 float64 values"):
        KERNELS.step(*short)
    wrong_type = list(arguments)
    wrong_type[3] = state.quaternions.astype(np.float32)
    with pytest.raises(ValueError, match="quaternions"):
        KERNELS.step(*wrong_type)
    strided = list(arguments)
    strided[4] = np.zeros((5, 12))[:, ::2]
    with pytest.raises(TypeError, match="momenta: expected a C-contiguous"):
        KERNELS.step(*strided)
    read_only = list(arguments)
    read_only[11] = np.zeros((5, 3))
    read_only[11].flags.writeable = False
    with pytest.raises(TypeError, match="out positions: expected a writable"):
        KERNELS.step(*read_only)
    with pytest.raises(ValueError, match="model: header does not match"):
        KERNELS.workspace_size(compiled.model[:-1])
    broken = compiled.model.copy()
    broken[-1] = 1e6  # a band position past the matrix
    with pytest.raises(ValueError, match="out of range"):
        KERNELS.workspace_size(broken)
    with pytest.raises(ValueError, match="work"):
        KERNELS.step(compiled.model, np.empty(3), *arguments[2:])
    with pytest.raises(ValueError, match="axis: expected 3"):
        KERNELS.joint_angle(np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(4))


def test_failed_steps_raise_the_reference_errors() -> None:
    """A step whose solver cannot converge in its iteration budget."""
    for compiled in (True, False):
        integrator = ContactVariationalMultibody(HOPPER, 0.001, max_iterations=1,
                                                 compiled=compiled)
        state = hopper_state(integrator, [0.0, 0.0], 0.30, [0.0, 0.0], 1.0)
        with pytest.raises(NoSolutionError, match="did not converge in 1 iterations"):
            integrator.step(state)
