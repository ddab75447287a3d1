"""Applied wrenches: gravity and actuator torques as equal-and-opposite joint couples.

Wrenches are (n, 6) per body in ``(angular, linear)`` order: torque about the CoM in
the body frame (N m), force in the world frame (N). A motor torque ``u`` about a
revolute joint acts as ``+u`` about the axis on the child and ``-u`` on the parent and
adds no force, so it never changes the total momentum (the paper's CoM forces
(23)-(25) do; ``docs/theory/multibody-contact.md`` erratum 3).
"""

from __future__ import annotations

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.multibody.mechanism import Mechanism


def gravity_wrench(mechanism: Mechanism) -> FloatArray:
    """Weight of every body, (n, 6), forces in the world frame (N)."""
    result = np.zeros((len(mechanism.bodies), 6))
    result[:, 3:] = mechanism.masses[:, None] * mechanism.gravity
    return result


def couple_matrix(mechanism: Mechanism) -> FloatArray:
    """Map (6 n, m) from actuator torques (N m) to the flattened (n, 6) wrench.

    Column ``j`` holds ``+axis`` on the child's torque rows and ``-axis`` on the
    parent's (body frames). Its transpose maps flattened body-frame angular velocities
    (rad/s, linear rows ignored) to the joint speeds (rad/s), so the actuator power is
    ``torques . speeds``.
    """
    result = np.zeros((len(mechanism.bodies), 6, len(mechanism.actuators)))
    for column, actuator in enumerate(mechanism.actuators):
        joint = mechanism.joint(actuator.joint)
        a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
        result[b, :3, column] += joint.child_axis
        if a >= 0:
            result[a, :3, column] -= joint.axis
    return result.reshape(6 * len(mechanism.bodies), len(mechanism.actuators))


def motor_lines(mechanism: Mechanism, feedback: float = 0.0) -> tuple[FloatArray, FloatArray]:
    """Peak torques (N m) and line gains (N m s/rad) of the actuators' back-EMF lines.

    The gain is ``peak / no_load_speed + feedback``; ``feedback`` (N m s/rad, >= 0) is
    the drives' own speed loop.
    """
    peaks = np.array([actuator.peak_torque for actuator in mechanism.actuators])
    speeds = np.array([actuator.no_load_speed for actuator in mechanism.actuators])
    return peaks, feedback + peaks / speeds


def motor_torques(peaks: FloatArray, gains: FloatArray, commands: FloatArray,
                  speeds: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Torques (N m) on each actuator's back-EMF line and their slopes (N m s/rad).

    ``peaks``, ``gains`` from ``motor_lines``; ``commands`` in [-1, 1] (fraction of the
    supply voltage), ``speeds`` joint speeds (rad/s): ``tau = peak command - gain speed``
    saturated at the current limit ``+-peak``. The slope ``d tau / d speed`` is
    ``-gain`` on the line and zero where saturated. For commands in [-1, 1] the torque
    stays inside the envelope of ``Actuator.limits`` (the feedback only brakes). A NaN
    command is no command: a passive (open-circuit) drive, zero torque and zero slope at
    any speed.
    """
    passive = np.isnan(commands)
    line = peaks * np.where(passive, 0.0, commands) - gains * speeds
    torques = np.where(passive, 0.0, np.minimum(np.maximum(line, -peaks), peaks))
    slopes = np.where(~passive & (np.abs(line) < peaks), -gains, 0.0)
    return torques, slopes


def joint_speeds(
    mechanism: Mechanism, quaternions: FloatArray, angular_velocities: FloatArray
) -> FloatArray:
    """Speeds (rad/s) of the actuated joints from body-frame angular velocities (n, 3)."""
    world = Q.rotate(quaternions, angular_velocities)
    speeds = []
    for actuator in mechanism.actuators:
        joint = mechanism.joint(actuator.joint)
        a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
        parent_omega = world[a] if a >= 0 else np.zeros(3)
        axis = Q.rotate(quaternions[a], joint.axis) if a >= 0 else joint.axis
        speeds.append(float(axis @ (world[b] - parent_omega)))
    return np.array(speeds)


def limit_torques(mechanism: Mechanism, torques: FloatArray, speeds: FloatArray) -> FloatArray:
    """Clamp commanded torques (N m) to each actuator's torque-speed envelope.

    A NaN torque is no command: that actuator is passive and applies exactly zero torque
    at any speed. (The envelope bounds what a driven motor can deliver; clamping an
    absent command would brake the joint beyond the no-load speed.)
    """
    limited = [
        0.0 if np.isnan(u) else min(max(float(u), low), high)
        for actuator, u, speed in zip(mechanism.actuators, torques, speeds, strict=True)
        for low, high in [actuator.limits(float(speed))]
    ]
    return np.array(limited, dtype=float)
