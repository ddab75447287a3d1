"""Behaviour of the maximal-coordinate variational integrator (no contact).

Oracles: closed forms (free fall, exact pendulum period through the complete elliptic
integral), invariants (constraints, momenta) and the order of the energy error.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ellipk

from mav_geometry import quaternion as Q
from variational_sim.experiments.common import fly_hopper
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.hopper import (
    nominal_configuration,
    with_welded_base,
)
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import (
    body_velocities,
    forward_kinematics,
    joint_angle,
)
from variational_sim.multibody.mechanism import WORLD, Body, Joint, Mechanism

GRAVITY = np.array([0.0, 0.0, -9.81])


def _pendulum(mass: float, inertia: np.ndarray, length: float) -> Mechanism:
    """A body hanging from a world pivot ``length`` above its CoM, free about +y."""
    pivot = Joint("pivot", "revolute", WORLD, "bob", np.zeros(3), np.array([0.0, 0.0, length]))
    return Mechanism("pendulum", (Body("bob", mass, inertia),), (pivot,), gravity=GRAVITY)


def _swing(mechanism: Mechanism, step: float, angle: float, steps: int) -> np.ndarray:
    """Pivot angles (rad) of a pendulum released at rest from ``angle``."""
    attitude = Q.from_rotation_vector([0.0, angle, 0.0])
    length = mechanism.joints[0].child_point[2]
    integrator = VariationalMultibody(mechanism, step)
    state = integrator.initial_state(-Q.rotate(attitude, [0.0, 0.0, length])[None],
                                     attitude[None], np.zeros((1, 6)))
    angles = [angle]
    for _ in range(steps):
        state = integrator.step(state)
        angles.append(float(joint_angle(mechanism, "pivot", state.quaternions)))
    return np.array(angles)


def test_free_fall_is_exact_at_the_nodes() -> None:
    body = Body("ball", 2.0, np.diag([0.1, 0.2, 0.3]))
    integrator = VariationalMultibody(Mechanism("ball", (body,), (), gravity=GRAVITY), 0.01)
    velocity = np.array([1.0, -2.0, 3.0])
    state = integrator.initial_state(np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]),
                                     np.concatenate([[0.2, 0.1, -0.3], velocity])[None])
    for _ in range(100):
        state = integrator.step(state)
    t = state.time
    assert np.allclose(state.positions[0], velocity * t + 0.5 * GRAVITY * t**2, atol=1e-12)


def test_compound_pendulum_period_matches_the_exact_value() -> None:
    """Catches the missing 1/2 of the paper's code: it would act as J_yy/2 (6.5 % here)."""
    mass, length, inertia = 1.0, 0.3, np.diag([0.02, 0.03, 0.01])
    amplitude, step = 0.3, 0.005
    pivot_inertia = inertia[1, 1] + mass * length**2
    exact = 4.0 * np.sqrt(pivot_inertia / (mass * 9.81 * length)) * ellipk(
        np.sin(amplitude / 2.0) ** 2)
    half_inertia = exact * np.sqrt((inertia[1, 1] / 2 + mass * length**2) / pivot_inertia)
    angles = _swing(_pendulum(mass, inertia, length), step, amplitude, int(2.3 * exact / step))
    down = np.where((angles[:-1] > 0.0) & (angles[1:] <= 0.0))[0]
    crossings = step * (down + angles[down] / (angles[down] - angles[down + 1]))
    period = crossings[1] - crossings[0]
    assert abs(period / exact - 1.0) < 1e-4
    assert abs(half_inertia / exact - 1.0) > 0.05


def test_energy_of_a_long_passive_swing_is_bounded_without_drift() -> None:
    """Double pendulum (two revolute joints), 2000 steps: no secular energy change."""
    link = Body("upper", 0.5, np.diag([2e-3, 4e-3, 2.5e-3]))
    joints = (
        Joint("shoulder", "revolute", WORLD, "upper", np.zeros(3), np.array([-0.15, 0, 0])),
        Joint("elbow", "revolute", "upper", "lower", np.array([0.15, 0, 0]),
              np.array([-0.15, 0, 0])),
    )
    mechanism = Mechanism("double", (link, Body("lower", 0.5, link.inertia)), joints,
                          gravity=GRAVITY)
    positions, quaternions = forward_kinematics(
        mechanism, np.array([0.15, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]), {"elbow": 0.4})
    integrator = VariationalMultibody(mechanism, 0.01)
    state = integrator.initial_state(positions, quaternions, np.zeros((2, 6)))
    energy0 = integrator.energy(state)
    errors = []
    for _ in range(2000):
        state = integrator.step(state)
        errors.append(integrator.energy(state) - energy0)
    errors = np.abs(np.array(errors))
    assert errors.max() < 1e-2  # J, against a potential-energy swing of about 3 J
    # the error of the last quarter is no larger than that of the first: no drift
    assert errors[-500:].max() < 1.5 * errors[:500].max()


@pytest.fixture(scope="module")
def welded_runs() -> dict[float, tuple[list[float], list[float], list[float]]]:
    """Welded-base passive hopper from the nominal pose: energies, violations, identity."""
    hopper = with_welded_base(fly_hopper())
    positions, quaternions = nominal_configuration(hopper)
    runs = {}
    for step in (0.01, 0.005):
        integrator = VariationalMultibody(hopper, step)
        state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
        energies, violations, identity = [integrator.energy(state)], [], []
        for _ in range(round(0.4 / step)):
            state = integrator.step(state)
            energies.append(integrator.energy(state))
            values, _ = integrator.constraints.evaluate(state.positions, state.quaternions,
                                                        jacobian=False)
            violations.append(float(np.max(np.abs(values))))
            angles = {name: joint_angle(hopper, name, state.quaternions)
                      for name in ("hip0", "knee1", "hip2")}
            # parallelogram: link 1 stays parallel to link 2
            identity.append(float(angles["hip0"] + angles["knee1"] - angles["hip2"]))
        runs[step] = (energies, violations, identity)
    return runs


def test_constraints_hold_at_solver_tolerance_every_step(welded_runs) -> None:
    for _, violations, identity in welded_runs.values():
        assert max(violations) <= 1e-12
        half = len(violations) // 2
        assert max(violations[half:]) <= 10 * max(max(violations[:half]), 1e-14)
        assert np.max(np.abs(identity)) < 1e-10


def test_passive_leg_energy_error_is_second_order(welded_runs) -> None:
    bands = {step: np.ptp(energies) for step, (energies, _, _) in welded_runs.items()}
    assert bands[0.01] < 0.05
    assert 3.0 < bands[0.01] / bands[0.005] < 5.0


def test_actuated_floating_hopper_conserves_momentum_in_zero_gravity() -> None:
    hopper = fly_hopper().with_gravity(np.zeros(3))
    positions, quaternions = nominal_configuration(hopper)
    velocities = body_velocities(hopper, positions, quaternions,
                                 np.array([0.3, -0.5, 0.2, 0.1, 0.2, -0.3]), {})
    integrator = VariationalMultibody(hopper, 0.01)
    state = integrator.initial_state(positions, quaternions, velocities)
    linear0, angular0 = integrator.total_momentum(state)
    for k in range(60):
        t = 0.01 * k
        state = integrator.step(state, [0.05 * np.sin(10 * t), -0.03 * np.cos(7 * t)])
        linear, angular = integrator.total_momentum(state)
        assert np.max(np.abs(linear - linear0)) < 1e-11
        assert np.max(np.abs(angular - angular0)) < 1e-11
    # the actuators did work: the leg moved against its initial rigid rotation
    assert abs(joint_angle(hopper, "hip0", state.quaternions) - np.radians(30.0)) > 0.01


def test_constraint_forces_of_a_hanging_pendulum_carry_its_weight() -> None:
    """From the second step on; the first covers only [t_0, t_1/2] and carries half."""
    mechanism = _pendulum(1.5, np.diag([0.01, 0.02, 0.01]), 0.2)
    integrator = VariationalMultibody(mechanism, 0.01)
    state = integrator.initial_state(np.array([[0.0, 0.0, -0.2]]),
                                     np.array([[0.0, 0.0, 0.0, 1.0]]), np.zeros((1, 6)))
    state = integrator.step(state)
    first = state.multipliers.copy()
    state = integrator.step(integrator.step(state))
    _, jacobian = ConstraintSet(mechanism).evaluate(state.positions, state.quaternions)
    force = jacobian.T @ state.multipliers
    assert np.allclose(force[3:], [0.0, 0.0, 1.5 * 9.81], atol=1e-9)
    assert np.allclose(first, 0.5 * state.multipliers, atol=1e-9)
