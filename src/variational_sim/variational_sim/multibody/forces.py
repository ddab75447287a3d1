"""Applied wrenches: gravity and actuator torques as equal-and-opposite joint couples.

Wrenches are (n, 6) per body in ``(angular, linear)`` order: torque about the CoM in
the body frame (N m), force in the world frame (N). A motor torque ``u`` about a
revolute joint acts as ``+u`` about the axis on the child and ``-u`` on the parent and
adds no force, so it never changes the total momentum (the paper's CoM forces
(23)-(25) do; notes erratum 3).
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


def actuator_wrench(mechanism: Mechanism, torques: FloatArray) -> FloatArray:
    """Joint couples of the actuators, (n, 6); ``torques`` (N m) in actuator order."""
    result = np.zeros((len(mechanism.bodies), 6))
    for actuator, torque in zip(mechanism.actuators, torques, strict=True):
        joint = mechanism.joint(actuator.joint)
        a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
        result[b, :3] += torque * joint.child_axis
        if a >= 0:
            result[a, :3] -= torque * joint.axis
    return result


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
    """Clamp commanded torques (N m) to each actuator's torque-speed envelope."""
    limited = [
        min(max(float(u), low), high)
        for actuator, u, speed in zip(mechanism.actuators, torques, speeds, strict=True)
        for low, high in [actuator.limits(float(speed))]
    ]
    return np.array(limited)
