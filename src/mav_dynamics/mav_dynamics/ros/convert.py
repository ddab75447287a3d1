"""Message <-> numpy conversion for the controller node (the only place that does it).

Core order: twists ``(omega, v)``, wrenches ``(moment, force)``, quaternions ``[x, y, z, w]``.
ROS messages name ``linear``/``angular`` fields; per REP-105 an Odometry twist is in the
child (body) frame, so the world velocity is ``R v_body``. Builders fill messages that the
node allocates once (publishing every tick stays cheap); parsers return plain numbers (the
odometry is read from its serialized form: building the message object costs several times
the control tick).
Stamps and diagnostics are built with ``mav_ros_common`` (``stamps``, ``diagnostics``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState

from mav_dynamics.controller import TrackingReference
from mav_dynamics.vehicle import FloatArray
from mav_ros_common.serialized import (
    ANGULAR,
    LINEAR,
    ODOMETRY_DOUBLES,
    ORIENTATION,
    POSITION,
    read_stamped,
)


@dataclass(frozen=True, slots=True)
class OdometrySample:
    """An Odometry message in core form, unchecked: stamp (ns), attitude R^0_b as a quaternion
    ``[x, y, z, w]`` (as received, maybe not unit), position p^0_b (m, world) and body
    twist ``(omega, v)`` (rad/s, m/s, child frame)."""

    stamp_ns: int
    orientation: FloatArray
    position: FloatArray
    twist: FloatArray


def odometry_sample(raw: bytes) -> OdometrySample:
    """Read a serialized nav_msgs/Odometry (pose in its frame, twist in its child frame);
    ValueError if it is not plain CDR."""
    stamp_ns, values = read_stamped(raw, ODOMETRY_DOUBLES)
    return OdometrySample(stamp_ns, values[ORIENTATION], values[POSITION],
                          np.concatenate((values[ANGULAR], values[LINEAR])))


def pose_target(message: PoseStamped) -> tuple[FloatArray, FloatArray]:
    """Position (m) and unit quaternion ``[x, y, z, w]`` of a pose, as received."""
    p, o = message.pose.position, message.pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])


def joint_state_message(rotor_count: int, tilt_count: int) -> JointState:
    """An actuator-command message with the contract's names: ``rotor_i`` (velocity = rotor
    speed, rad/s), then ``tilt_i`` (position = tilt angle, rad)."""
    message = JointState()
    message.name = [f"rotor_{i}" for i in range(rotor_count)] + [
        f"tilt_{i}" for i in range(tilt_count)]
    return message


def fill_joint_state(message: JointState, stamp: Time, rotor_speeds: FloatArray,
                     tilt_angles: FloatArray) -> None:
    """Rotor speeds (rad/s) as velocities and tilt angles (rad) as positions; tilt velocities
    and rotor positions are NaN (not commanded)."""
    rotors, tilts = rotor_speeds.size, tilt_angles.size
    message.header.stamp = stamp
    message.velocity = array("d", np.concatenate([rotor_speeds, np.full(tilts, np.nan)]))
    message.position = array("d", np.concatenate([np.full(rotors, np.nan), tilt_angles]))


def fill_wrench(message: WrenchStamped, stamp: Time, wrench: FloatArray) -> None:
    """Body wrench ``(moment, force)`` (N m, N) in ``base_link``."""
    message.header.stamp = stamp
    torque, force = message.wrench.torque, message.wrench.force
    torque.x, torque.y, torque.z, force.x, force.y, force.z = wrench.tolist()


def fill_reference(message: Odometry, stamp: Time, reference: TrackingReference,
                   orientation: FloatArray) -> None:
    """Reference pose (world) and twist in the reference body frame: ``R_d^T v_d`` and the
    reference angular velocity; ``orientation`` is R_d as ``[x, y, z, w]``."""
    message.header.stamp = stamp
    pose, twist = message.pose.pose, message.twist.twist
    position, o, linear, angular = pose.position, pose.orientation, twist.linear, twist.angular
    position.x, position.y, position.z = reference.position.tolist()
    o.x, o.y, o.z, o.w = orientation.tolist()
    linear.x, linear.y, linear.z = (reference.attitude.T @ reference.velocity).tolist()
    angular.x, angular.y, angular.z = reference.angular_velocity.tolist()

