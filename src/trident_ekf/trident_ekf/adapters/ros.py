"""Standard ROS driver messages (already ENU/FLU, REP-145/REP-105) and the ``ros`` profile.

    imu/data   sensor_msgs/Imu          (raw CDR: the fast path)
    gnss/fix   sensor_msgs/NavSatFix    (ellipsoidal height, ENU covariance)
    gnss/vel   geometry_msgs/TwistWithCovarianceStamped, or TwistStamped (ENU velocity)

plus the aiding inputs of ``trident_ekf.inputs`` (barometer/pressure, magnetic_field,
external_pose). The converters read fields only, so they take rclpy and rosbags messages
alike; MAVROS publishes the same types and reuses them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trident_ekf.adapters.base import (
    COVARIANCE_TYPE_UNKNOWN,
    Aid,
    Converter,
    Fix,
    Input,
    InputOptions,
    Profile,
    Sample,
    Velocity,
    stamp_ns,
)
from trident_ekf.inputs import MESSAGE_INPUTS, MessageInput
from trident_ekf.tools import cdr

IMU = "sensor_msgs/msg/Imu"
NAVSATFIX = "sensor_msgs/msg/NavSatFix"
TWIST_WITH_COVARIANCE = "geometry_msgs/msg/TwistWithCovarianceStamped"
TWIST = "geometry_msgs/msg/TwistStamped"


def imu(data: bytes | memoryview) -> tuple[Sample, ...]:
    """A serialized sensor_msgs/Imu: stamp, angular velocity, linear acceleration."""
    return (cdr.decode_imu(data),)


def navsatfix(message: Any) -> tuple[Sample, ...]:
    """sensor_msgs/NavSatFix as it is: status, WGS-84 degrees, ellipsoidal height, ENU
    covariance (unknown when its type is COVARIANCE_TYPE_UNKNOWN; 9 numbers even then: a
    message with another count is malformed)."""
    covariance = np.asarray(message.position_covariance, dtype=float).reshape(3, 3)
    return (Fix(stamp_ns(message), int(message.status.status), float(message.latitude),
                float(message.longitude), float(message.altitude), covariance,
                int(message.position_covariance_type) != COVARIANCE_TYPE_UNKNOWN),)


def twist_with_covariance(message: Any) -> tuple[Sample, ...]:
    """TwistWithCovarianceStamped: ENU velocity and the linear 3x3 block of its covariance."""
    linear = message.twist.twist.linear
    covariance = np.asarray(message.twist.covariance, dtype=float).reshape(6, 6)[:3, :3]
    return (Velocity(stamp_ns(message), (float(linear.x), float(linear.y), float(linear.z)),
                     covariance),)


def twist_stamped(sigma_mps: float) -> Converter:
    """TwistStamped (no covariance): ENU velocity with ``sigma_mps`` per axis, or, when it
    is NaN, a zero covariance (the receiver model's default)."""
    variance = sigma_mps * sigma_mps if math.isfinite(sigma_mps) else 0.0

    def convert(message: Any) -> tuple[Sample, ...]:
        linear = message.twist.linear
        return (Velocity(stamp_ns(message),
                         (float(linear.x), float(linear.y), float(linear.z)),
                         np.eye(3) * variance),)

    return convert


def aiding(message_input: MessageInput) -> Converter:
    """The converter of an aiding message input (``trident_ekf.inputs``)."""

    def convert(message: Any) -> tuple[Sample, ...]:
        stamp, fields = message_input.arguments(message)
        return (Aid(message_input.source, stamp, fields),)

    return convert


def aiding_input(source: str, topic: str | None = None) -> Input:
    """The standard message input of an aiding source, on ``topic`` (default its own)."""
    message_input = MESSAGE_INPUTS[source]
    return Input(topic if topic is not None else message_input.topic, message_input.msgtype,
                 aiding(message_input), source, source=source)


def with_standard_aiding(inputs: list[Input]) -> tuple[Input, ...]:
    """``inputs`` plus the standard input of every aiding source they do not feed."""
    fed = {i.source for i in inputs}
    return (*inputs, *(aiding_input(source) for source in MESSAGE_INPUTS if source not in fed))


def velocity_converter(options: InputOptions, velocity_type: str) -> tuple[str, Converter]:
    """(type name, converter) of a GNSS velocity message type."""
    if velocity_type == "TwistStamped":
        return TWIST, twist_stamped(options.velocity_sigma_mps)
    return TWIST_WITH_COVARIANCE, twist_with_covariance


def profile(options: InputOptions) -> Profile:
    """ROS drivers on imu/data, gnss/fix, gnss/vel (relative: the node's namespace and the
    launch file's remappings apply) and the standard aiding topics."""
    velocity_type, velocity = velocity_converter(options, options.velocity_type)
    return Profile("ros", with_standard_aiding([
        Input("imu/data", IMU, imu, "imu", raw=True),
        Input("gnss/fix", NAVSATFIX, navsatfix, "fix"),
        Input("gnss/vel", velocity_type, velocity, "velocity"),
    ]))
