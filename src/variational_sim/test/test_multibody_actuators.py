"""The implicit back-EMF motor model: Jacobian, dissipation, momentum and torque envelope."""

from __future__ import annotations

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from variational_sim.experiments.common import fly_hopper
from variational_sim.multibody.discrete import body_rates, relative_rotation
from variational_sim.multibody.forces import (
    couple_matrix,
    joint_speeds,
    limit_torques,
    motor_lines,
    motor_torques,
)
from variational_sim.multibody.hopper import nominal_configuration
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import body_velocities

STEP = 0.001


def _spinning_leg(gravity: np.ndarray) -> tuple[VariationalMultibody, object]:
    """Floating hopper in motor-command mode, tumbling, with the hips spinning."""
    hopper = fly_hopper().with_gravity(gravity)
    positions, quaternions = nominal_configuration(hopper)
    velocities = body_velocities(hopper, positions, quaternions,
                                 np.array([0.0, 0.4, 0.0, 0.1, 0.0, 0.2]),
                                 {"hip0": 40.0, "hip2": -25.0})
    integrator = VariationalMultibody(hopper, STEP, motor_commands=True)
    return integrator, integrator.initial_state(positions, quaternions, velocities)


def _step_speeds(integrator: VariationalMultibody, before, after) -> np.ndarray:
    """Mean joint speeds (rad/s) of the actuated joints over one step."""
    rates, _ = body_rates(relative_rotation(before.quaternions, after.quaternions), STEP)
    velocities = np.zeros((len(rates), 6))
    velocities[:, :3] = rates
    return couple_matrix(integrator.mechanism).T @ velocities.reshape(-1)


def test_actuation_jacobian_matches_finite_differences() -> None:
    integrator, state = _spinning_leg(np.zeros(3))
    q0 = state.quaternions
    rng = np.random.default_rng(3)
    q1 = Q.multiply(q0, Q.from_rotation_vector(0.002 * rng.standard_normal((5, 3))))
    commands = np.array([0.3, -0.2])
    base, jacobian, _ = integrator._actuation(relative_rotation(q0, q1), commands)
    epsilon = 1e-7
    numeric = np.zeros_like(jacobian)
    for column in range(jacobian.shape[1]):
        body, axis = divmod(column, 6)
        if axis >= 3:
            continue  # positions do not enter the joint speeds
        increment = np.zeros((5, 3))
        increment[body, axis] = epsilon
        moved_q1 = Q.multiply(q1, Q.from_rotation_vector(increment))
        moved, _, _ = integrator._actuation(relative_rotation(q0, moved_q1), commands)
        numeric[:, column] = (moved - base) / epsilon
    assert np.max(np.abs(numeric - jacobian)) < 1e-6 * max(1.0, np.max(np.abs(jacobian)))
    assert np.max(np.abs(jacobian)) > 0.0


def test_zero_command_motor_only_dissipates_and_conserves_momentum() -> None:
    integrator, state = _spinning_leg(np.zeros(3))
    peaks = np.array([a.peak_torque for a in integrator.mechanism.actuators])
    linear0, angular0 = integrator.total_momentum(state)
    energies = [integrator.energy(state)]
    for _ in range(60):
        after = integrator.step(state, np.zeros(2))
        speeds = _step_speeds(integrator, state, after)
        # a brake on the back-EMF line: opposes the motion, never beyond the current limit
        assert np.all(after.torques * speeds <= 0.0)
        assert np.all(np.abs(after.torques) <= peaks + 1e-12)
        linear, angular = integrator.total_momentum(after)
        assert np.max(np.abs(linear - linear0)) < 1e-10
        assert np.max(np.abs(angular - angular0)) < 1e-10
        energies.append(integrator.energy(after))
        state = after
    assert np.all(np.diff(energies) <= 1e-9)
    # the relative leg motion is braked within a few of the 0.6 ms electrical time
    # constants (no chatter at h = 1 ms); the tumble of the whole robot remains
    assert energies[-1] < 0.9 * energies[0]


def test_full_command_torque_stays_inside_the_envelope() -> None:
    integrator, state = _spinning_leg(np.array([0.0, 0.0, -9.807]))
    peaks = np.array([a.peak_torque for a in integrator.mechanism.actuators])
    saturated = False
    for _ in range(40):
        after = integrator.step(state, np.array([-1.0, 1.0]))  # against the spin
        speeds = _step_speeds(integrator, state, after)
        for actuator, torque, speed in zip(integrator.mechanism.actuators, after.torques,
                                           speeds, strict=True):
            low, high = actuator.limits(float(speed))
            assert low - 1e-9 <= torque <= high + 1e-9
        saturated |= bool(np.any(np.abs(after.torques) >= peaks - 1e-9))
        state = after
    assert saturated  # the current limit was reached


def test_uncommanded_actuator_applies_no_torque_at_any_speed() -> None:
    """No command is a passive motor: exactly zero torque, also beyond the no-load speed;
    a commanded torque (even zero) stays clamped to the torque-speed envelope."""
    hopper = fly_hopper()
    motor = hopper.actuators[0]  # 50 N m peak, 30 rad/s no-load speed
    peaks, gains = motor_lines(hopper)
    for speed in (0.0, 12.0, 29.0, 30.0, 45.0, -80.0, 1e3):
        speeds = np.array([speed, -speed])
        assert np.array_equal(limit_torques(hopper, np.full(2, np.nan), speeds), np.zeros(2))
        torques, slopes = motor_torques(peaks, gains, np.full(2, np.nan), speeds)
        assert np.array_equal(torques, np.zeros(2))
        assert np.array_equal(slopes, np.zeros(2))
        for command in (-80.0, 0.0, 20.0, 80.0):
            low, high = motor.limits(speed)
            limited = limit_torques(hopper, np.array([command, 0.0]), speeds)[0]
            assert limited == min(max(command, low), high)
    # beyond the no-load speed a commanded zero brakes; no command does not
    assert limit_torques(hopper, np.zeros(2), np.array([45.0, -45.0]))[0] == -25.0
    floating = hopper.with_gravity(np.zeros(3))
    positions, quaternions = nominal_configuration(floating)
    velocities = body_velocities(floating, positions, quaternions, np.zeros(6),
                                 {"hip0": 40.0, "hip2": 40.0})  # beyond the no-load speed
    for motor_commands in (False, True):
        integrator = VariationalMultibody(floating, STEP, motor_commands=motor_commands)
        state = integrator.initial_state(positions, quaternions, velocities)
        rates = integrator.velocities(state)[:, :3]
        assert np.allclose(joint_speeds(floating, state.quaternions, rates), 40.0)
        energy0 = integrator.energy(state)
        passive = state
        for _ in range(5):
            passive = integrator.step(passive)
            assert np.array_equal(passive.torques, np.zeros(2))
        assert abs(integrator.energy(passive) - energy0) < 1e-4 * energy0
        braked = integrator.step(state, np.zeros(2))
        assert braked.torques[0] < -1.0


def test_bad_inputs_are_rejected_with_what_is_allowed() -> None:
    """Motor commands must be finite and in [-1, 1], torques finite, one per actuator; the
    reference and the compiled step check alike (before any solve)."""
    for compiled in (True, False):
        for motor_commands in (True, False):
            integrator, state = _spinning_leg(np.zeros(3))
            integrator = VariationalMultibody(integrator.mechanism, STEP, compiled=compiled,
                                              motor_commands=motor_commands)
            unit = ("motor commands in \\[-1, 1\\]" if motor_commands
                    else "actuator torques \\(N m\\)")
            for bad in ([0.5, np.nan], [np.inf, 0.0], [0.1, -np.inf], [0.5], [0.1, 0.2, 0.3],
                        [[0.1, 0.2]]):
                with pytest.raises(ValueError, match=f"inputs must be 2 finite {unit}"):
                    integrator.step(state, bad)
            out_of_range = [1.0 + 1e-12, 0.0]
            if motor_commands:
                with pytest.raises(ValueError, match="motor commands in"):
                    integrator.step(state, out_of_range)
            else:  # a torque beyond the envelope is clamped, not refused
                assert np.all(np.isfinite(integrator.step(state, [80.0, -80.0]).torques))
            assert np.all(np.isfinite(integrator.step(state, [1.0, -1.0]).positions))


def test_bodies_and_joints_are_found_by_name_or_named_in_the_error() -> None:
    hopper = fly_hopper()
    assert [hopper.index(body.name) for body in hopper.bodies] == list(range(5))
    assert hopper.index("world") == -1
    assert [hopper.joint(joint.name) for joint in hopper.joints] == list(hopper.joints)
    with pytest.raises(KeyError, match="no body named 'foot'"):
        hopper.index("foot")
    with pytest.raises(KeyError, match="no joint named 'ankle'"):
        hopper.joint("ankle")
