"""The compiled QVI steps (integrators/_kernels.c) against the numpy references.

Same Newton iteration and stopping rule (plus the one extra iteration), so the states
agree to round-off; only the 6x6 solves and the small matrix products round differently
from numpy/LAPACK. The iteration counts agree except when a residual lands within
round-off of the stop threshold (1e-14 relative), where they may differ by one.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mav_geometry import quaternion as Q
from variational_sim.integrators.base import NoSolutionError
from variational_sim.integrators.qvi_left import LeftRectangleQVI
from variational_sim.integrators.qvi_midpoint import MidpointQVI
from variational_sim.models.coupled_body import (
    CoupledBodyState,
    FixedCoefficients,
    KineticCoefficients,
    fixed_wing_coupled_body,
    legendre_initial_state,
)
from variational_sim.models.morphing_uav import small_morphing_uav
from variational_sim.models.rigid_body import skew

KERNELS = importlib.import_module("variational_sim.integrators._kernels")
SCHEMES = (LeftRectangleQVI, MidpointQVI)
FIELDS = ("attitude", "position", "velocity", "rate", "interval_attitude", "momentum")


def pair(kind, model, h, **options):
    compiled, reference = kind(model, h, **options), kind(model, h, **options)
    compiled.kernels, reference.kernels = KERNELS, None
    return compiled, reference


def worst_difference(a: CoupledBodyState, b: CoupledBodyState) -> float:
    """Largest field-wise difference relative to the field's size."""
    assert a.time == b.time
    return max(float(np.abs(getattr(a, f) - getattr(b, f)).max()
                     / max(np.abs(getattr(b, f)).max(), 1.0)) for f in FIELDS)


vector = st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(SCHEMES), mass=st.floats(0.5, 5.0), com=vector,
       inertia=st.lists(st.floats(0.05, 2.0), min_size=3, max_size=3),
       morphing=st.lists(st.floats(-0.2, 0.2), min_size=6, max_size=6),
       attitude=st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4), velocity=vector,
       rate=vector, held=st.lists(st.floats(-3.0, 3.0), min_size=6, max_size=6),
       h=st.sampled_from([1e-3, 1e-2, 5e-2]), coupling=st.sampled_from([0.5, 1.0]))
def test_one_step_agrees_with_the_reference(kind, mass, com, inertia, morphing, attitude,
                                            velocity, rate, held, h, coupling):
    a_xw = -mass * skew(0.3 * np.array(com))
    coefficients = KineticCoefficients(0.5 * mass, a_xw, np.array(morphing[:3]),
                                       0.5 * np.diag(inertia), np.array(morphing[3:]), 0.0)
    model = FixedCoefficients(coefficients)
    q = np.array(attitude) if np.linalg.norm(attitude) > 0.1 else np.array([0, 0, 0, 1.0])
    state = legendre_initial_state(model, q, [1.0, -2.0, 3.0], velocity, rate)
    options = {"coupling_factor": coupling} if kind is MidpointQVI else {}
    compiled, reference = pair(kind, model, h, **options)
    ours, expected = compiled.step(state, held), reference.step(state, held)
    assert worst_difference(ours, expected) < 1e-12
    assert abs(compiled.last_iterations - reference.last_iterations) <= 1


@pytest.mark.parametrize("kind", SCHEMES)
def test_fixed_wing_run_keeps_the_reference_trajectory(kind):
    """The QVI paper's first experiment, 250 steps at h = 0.01 s, with a held wrench."""
    model = fixed_wing_coupled_body()
    compiled, reference = pair(kind, model, 0.01)
    ours = expected = legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3),
                                             np.ones(3))
    held = [0.05, 0.0, -0.02, 0.3, 0.0, 0.1]
    different_counts = 0
    for _ in range(250):
        ours, expected = compiled.step(ours, held), reference.step(expected, held)
        assert abs(compiled.last_iterations - reference.last_iterations) <= 1
        different_counts += compiled.last_iterations != reference.last_iterations
    assert different_counts <= 3
    assert worst_difference(ours, expected) < 1e-10
    c = model.coefficients(0.0)
    assert c.energy(ours.velocity, ours.rate) == pytest.approx(
        c.energy(expected.velocity, expected.rate), rel=1e-11)


@pytest.mark.parametrize("kind", SCHEMES)
def test_morphing_run_follows_the_time_varying_coefficients(kind):
    """Flapping wings: new coefficients every step (the packed copy must follow them)."""
    model = small_morphing_uav()
    compiled, reference = pair(kind, model, 0.005)
    ours = expected = legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3),
                                             [0.2, -0.1, 0.3])
    for _ in range(60):
        ours, expected = compiled.step(ours), reference.step(expected)
    assert worst_difference(ours, expected) < 1e-11
    assert np.abs(ours.position).max() > 1e-4  # the flapping moved the body


def test_non_convergence_and_bad_inputs_are_reported_like_the_reference():
    model = fixed_wing_coupled_body()
    state = legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3), np.ones(3))
    for integrator in pair(MidpointQVI, model, 0.01, max_iterations=1):
        with pytest.raises(NoSolutionError, match="midpoint QVI Newton did not converge in 1 "):
            integrator.step(state)
    compiled, _ = pair(LeftRectangleQVI, model, 0.01)
    with pytest.raises(ValueError, match="inputs must hold 6 numbers, got 2"):
        compiled.step(state, [0.0, 1.0])
    with pytest.raises(ValueError, match="finite body wrench"):
        compiled.step(state, [0.0, 0.0, np.inf, 0.0, 0.0, 0.0])
    arguments = [0, np.zeros(25), 0.01, 0.5, 1e-14, 30, state.attitude, state.position,
                 state.velocity, state.rate, state.momentum, None, np.empty(23)]
    for index, value, error, message in (
            (0, 2, ValueError, "scheme must be 0"),
            (1, np.zeros(24), ValueError, "coefficients must hold 25 numbers"),
            (2, 0.0, ValueError, "positive finite step"),
            (8, [0.0, 0.0], ValueError, "velocity must hold 3 numbers"),
            (12, np.empty(22), ValueError, "out must be a float64 array of 23"),
            (12, bytes(184), TypeError, "out must be a writable")):
        bad = list(arguments)
        bad[index] = value
        with pytest.raises(error, match=message):
            KERNELS.qvi_step(*bad)
