"""Which standard ROS message feeds which aiding source, shared by the live node and
trident-replay.

Each ``MessageInput`` names a source of ``core.measurements``, the message type, the
default topic (relative: the node resolves it in its namespace, replay looks for
``/<topic>``) and how a message becomes the keyword arguments of
``EstimationSession.aid``. The field access works on rclpy messages and on rosbags'
deserialized ones alike, so nothing here imports ROS. A source without an input (the
zero-velocity update) is driven by the session itself.

The input profiles of ``trident_ekf.adapters`` subscribe these: on these topics (``ros``),
or on the autopilot's topics for the same message types (``mavros``: its magnetometer and
static pressure); ``px4`` has its own converters for the PX4 messages and keeps the
standard input of every source it does not feed (external pose).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def stamp_ns(message: Any) -> int:
    """Header stamp of a message in ns."""
    stamp = message.header.stamp
    return int(stamp.sec) * 10**9 + int(stamp.nanosec)


@dataclass(frozen=True)
class MessageInput:
    source: str
    msgtype: str  # ROS 2 type name, e.g. "sensor_msgs/msg/FluidPressure"
    topic: str  # default, relative
    fields: Callable[[Any], dict[str, Any]]  # message -> keyword arguments of ``aid``

    def arguments(self, message: Any) -> tuple[int, dict[str, Any]]:
        """(stamp ns, keyword arguments) of one message."""
        return stamp_ns(message), self.fields(message)


def _fluid_pressure(message: Any) -> dict[str, Any]:
    return {"pressure_pa": float(message.fluid_pressure),
            "pressure_variance_pa2": float(message.variance)}


def _magnetic_field(message: Any) -> dict[str, Any]:
    field = message.magnetic_field
    return {"field_T": np.array([field.x, field.y, field.z], dtype=float),
            "covariance_T2": np.asarray(message.magnetic_field_covariance,
                                        dtype=float).reshape(3, 3)}


def _pose(message: Any) -> dict[str, Any]:
    pose = message.pose.pose
    q = pose.orientation
    return {"position_enu": np.array([pose.position.x, pose.position.y, pose.position.z]),
            "attitude_xyzw": np.array([q.x, q.y, q.z, q.w]),
            "covariance": np.asarray(message.pose.covariance, dtype=float).reshape(6, 6)}


MESSAGE_INPUTS: dict[str, MessageInput] = {}


def register_input(message_input: MessageInput) -> None:
    """Make a message type feed a source (ValueError if the source already has one)."""
    if message_input.source in MESSAGE_INPUTS:
        raise ValueError(f"source {message_input.source!r} already has a message input")
    MESSAGE_INPUTS[message_input.source] = message_input


for _input in (
        MessageInput("barometer", "sensor_msgs/msg/FluidPressure", "barometer/pressure",
                     _fluid_pressure),
        MessageInput("magnetometer", "sensor_msgs/msg/MagneticField", "magnetic_field",
                     _magnetic_field),
        MessageInput("external_pose", "geometry_msgs/msg/PoseWithCovarianceStamped",
                     "external_pose", _pose)):
    register_input(_input)
