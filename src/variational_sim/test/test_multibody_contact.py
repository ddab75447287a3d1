"""Sphere-ground contact: complementarity, inelastic impact, friction stick and slip."""

from __future__ import annotations

import numpy as np
import pytest

from variational_sim.experiments import drop_test
from variational_sim.multibody.contact import ContactVariationalMultibody
from variational_sim.multibody.mechanism import Body, Contact, Mechanism

MU, G, STEP = 0.5, 9.81, 0.01


def _ball_run(gravity: list[float], speed: float, steps: int, heading: float = 0.0):
    """A 1 kg ball (radius 0.1 m) resting on the ground, pushed by tilted gravity or
    launched at ``heading`` (rad from x); returns the states after each step and the
    integrator."""
    ball = Mechanism("ball", (Body("ball", 1.0, 0.004 * np.eye(3)),), (),
                     contacts=(Contact("c", "ball", np.zeros(3), 0.1, MU),),
                     gravity=np.array(gravity))
    integrator = ContactVariationalMultibody(ball, STEP)
    state = integrator.initial_state(np.array([[0.0, 0.0, 0.1]]),
                                     np.array([[0.0, 0.0, 0.0, 1.0]]),
                                     np.array([[0.0, 0.0, 0.0, speed * np.cos(heading),
                                                speed * np.sin(heading), 0.0]]))
    states = []
    for _ in range(steps):
        state = integrator.step(state)
        states.append(state)
    return states, integrator


def test_friction_below_the_cone_sticks() -> None:
    states, _ = _ball_run([2.0, 0.0, -G], 0.0, 30)
    assert abs(states[-1].positions[0, 0]) < 1e-9
    force = states[-1].contact_impulses[0] / STEP
    assert force == pytest.approx([-2.0, 0.0, G], abs=1e-6)


def test_friction_beyond_the_cone_slides_on_its_boundary() -> None:
    states, _ = _ball_run([6.0, 0.0, -G], 0.0, 30)
    force = states[-1].contact_impulses[0] / STEP
    assert force == pytest.approx([-MU * G, 0.0, G], abs=1e-6)
    # the ball accelerates at g_t - mu g_n (m/s^2), friction opposing the sliding
    velocities = np.array([s.momenta[0, 3] for s in states])
    assert np.allclose(np.diff(velocities[5:]) / STEP, 6.0 - MU * G, atol=1e-6)


def test_sliding_ball_decelerates_at_mu_g_and_stops() -> None:
    states, _ = _ball_run([0.0, 0.0, -G], 1.0, 40)
    velocities = np.array([s.momenta[0, 3] for s in states])
    moving = velocities > 0.1
    assert np.allclose(np.diff(velocities[moving]) / STEP, -MU * G, atol=1e-6)
    assert abs(velocities[-1]) < 1e-9
    stop = 1.0 / (MU * G)
    assert states[-1].positions[0, 0] == pytest.approx(0.5 * stop, rel=0.02)


def test_diagonal_slide_decelerates_on_the_pyramid_edge_and_stops() -> None:
    """Along a diagonal the friction impulse lies on an edge of the pyramid
    ``|b_x| + |b_y| <= mu gamma``: its component against the motion is
    ``mu gamma / sqrt 2``. Coming to rest there is the solver's hardest active-set
    change (the sliding facet's multiplier and both friction components switch)."""
    states, _ = _ball_run([0.0, 0.0, -G], 1.0, 40, heading=np.pi / 4)
    velocities = np.array([s.momenta[0, 3:5] for s in states])
    speeds = np.linalg.norm(velocities, axis=1)
    moving = speeds > 0.1
    assert np.allclose(np.diff(speeds[moving]) / STEP, -MU * G / np.sqrt(2.0), atol=1e-6)
    assert np.max(np.abs(velocities[:, 0] - velocities[:, 1])) < 1e-9
    assert np.max(np.abs(velocities[-1])) < 1e-9


def test_ball_gap_and_complementarity_at_rest() -> None:
    states, integrator = _ball_run([0.0, 0.0, -G], 0.0, 10)
    for state in states:
        gap = integrator.gaps(state)[0]
        assert gap > -1e-10
        assert abs(gap * state.contact_impulses[0, 2]) < 1e-10


def test_drop_test_lands_without_penetration_or_rebound() -> None:
    result = drop_test.simulate(step=0.002, duration=1.2)
    assert result.gap.min() > -1e-9
    assert np.abs(result.complementarity).max() < 1e-9
    assert np.all(result.normal_force > -1e-9)
    landed = result.times > result.times[np.argmax(result.normal_force > 1.0)]
    # inelastic, and the PD-held leg does not throw the robot back up: the foot stays down
    assert result.gap[landed].max() < 1e-9
    # the leg yields on impact (motors at their current limit), then the hold brings the
    # robot to rest at its standing height, carried by the ground
    assert result.base_height.min() < result.base_height[-1] - 0.05
    assert np.ptp(result.base_height[-20:]) < 1e-5
    assert result.normal_force[-20:] == pytest.approx(result.weight, rel=1e-3)
    assert result.weight == pytest.approx(7.7248 * 9.807, rel=1e-4)
