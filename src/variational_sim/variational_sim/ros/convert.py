"""Message <-> numpy conversion for the simulator node (the only place that does it).

Core conventions (angular first, ``[x, y, z, w]``, SI, ENU/FLU) are mapped onto the ROS
message fields (``linear`` / ``angular`` by name). Builders take plain numbers and arrays
and return messages (the ``*Messages`` classes refill one message per high-rate stream; the
ground truth's odometry and /tf are kept serialized, ``mav_ros_common.serialized``, and
returned as bytes); parsers take messages and return numbers or raise ``CommandError``.
Stamps and diagnostics are built with ``mav_ros_common`` (``stamps``, ``diagnostics``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from geometry_msgs.msg import (
    Point,
    Quaternion,
    TransformStamped,
    Vector3,
)
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import (
    JointState,
)
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from mav_geometry.arrays import FloatArray
from mav_geometry.shown import shown
from mav_ros_common.serialized import (
    ANGULAR,
    LINEAR,
    ODOMETRY_DOUBLES,
    ORIENTATION,
    POSITION,
    ROTATION,
    TF_STAMP_OFFSET,
    TRANSFORM_DOUBLES,
    TRANSLATION,
    SerializedMessage,
)
from mav_ros_common.stamps import fill_seconds, from_seconds, seconds_to_ns

Floats = Sequence[float] | FloatArray
"""Numbers as a sequence of floats or a float array."""


class CommandError(ValueError):
    """An actuator command that cannot be used; ``reason`` is its diagnostics counter name."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _vector(values: Floats) -> Vector3:
    return Vector3(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def _quaternion(xyzw: Floats) -> Quaternion:
    return Quaternion(x=float(xyzw[0]), y=float(xyzw[1]), z=float(xyzw[2]), w=float(xyzw[3]))


def _diagonal(variances: Iterable[float]) -> list[float]:
    """Row-major 3x3 covariance with ``variances`` on the diagonal."""
    a, b, c = (float(v) for v in variances)
    return [a, 0.0, 0.0, 0.0, b, 0.0, 0.0, 0.0, c]


def transform(time_s: float, parent: str, child: str, translation: Floats,
              rotation_xyzw: Floats) -> TransformStamped:
    """``child`` in ``parent``: translation (m) and rotation ``[x, y, z, w]`` child->parent."""
    message = TransformStamped()
    message.header.stamp = from_seconds(time_s)
    message.header.frame_id = parent
    message.child_frame_id = child
    message.transform.translation = _vector(translation)
    message.transform.rotation = _quaternion(rotation_xyzw)
    return message


def tf_message(transforms: list[TransformStamped]) -> TFMessage:
    return TFMessage(transforms=transforms)


# -- reusable messages for the per-sample streams ---------------------------------------------
# Building a message costs tens of us (nested fields, covariance arrays); refilling one costs a
# few. A refilled message is serialized (published, or queued as bytes) before its next fill.


class ClockMessages:
    """``rosgraph_msgs/Clock`` at a sim time (s)."""

    def __init__(self) -> None:
        self._message = Clock()

    def fill(self, time_s: float) -> Clock:
        fill_seconds(self._message.clock, time_s)
        return self._message


class OdometryMessages:
    """``nav_msgs/Odometry`` (serialized): pose of ``child_frame_id`` in ``frame_id`` (m,
    [x, y, z, w]) and its twist ``(omega, v)`` (rad/s, m/s) in the child frame; covariances
    zero."""

    def __init__(self, frame_id: str, child_frame_id: str) -> None:
        message = Odometry()
        message.header.frame_id = frame_id
        message.child_frame_id = child_frame_id
        self._message = SerializedMessage(message, 0, ODOMETRY_DOUBLES)

    def fill(self, time_s: float, position: Floats, orientation_xyzw: Floats,
             twist_body: Floats) -> bytes:
        values = self._message.values
        values[POSITION] = position
        values[ORIENTATION] = orientation_xyzw
        values[LINEAR] = twist_body[3:]
        values[ANGULAR] = twist_body[:3]
        return self._message.stamped(seconds_to_ns(time_s))


class TransformMessages:
    """``tf2_msgs/TFMessage`` (serialized) holding ``child`` in ``parent`` (m,
    ``[x, y, z, w]``)."""

    def __init__(self, parent: str, child: str) -> None:
        message = TFMessage(transforms=[transform(0.0, parent, child, (0.0, 0.0, 0.0),
                                                  (0.0, 0.0, 0.0, 1.0))])
        self._message = SerializedMessage(message, TF_STAMP_OFFSET, TRANSFORM_DOUBLES)

    def fill(self, time_s: float, translation: Floats, rotation_xyzw: Floats) -> bytes:
        values = self._message.values
        values[TRANSLATION] = translation
        values[ROTATION] = rotation_xyzw
        return self._message.stamped(seconds_to_ns(time_s))


class ActuatorStateMessages:
    """Actual rotor speeds (rad/s, ``velocity`` of ``rotor_i``) and tilt angles (rad,
    ``position`` of ``tilt_i``); the unused entries are NaN as JointState allows."""

    def __init__(self, rotor_count: int, tilt_count: int) -> None:
        self._message = JointState()
        self._message.name = ([f"rotor_{i}" for i in range(rotor_count)]
                              + [f"tilt_{i}" for i in range(tilt_count)])
        self._rotor_nans = [math.nan] * rotor_count
        self._tilt_nans = [math.nan] * tilt_count

    def fill(self, time_s: float, rotor_speeds: Floats,
             tilt_angles: Floats) -> JointState:
        message = self._message
        fill_seconds(message.header.stamp, time_s)
        message.position = self._rotor_nans + [float(a) for a in tilt_angles]
        message.velocity = [float(w) for w in rotor_speeds] + self._tilt_nans
        return message


def actuator_command(message: JointState, rotor_count: int,
                     tilt_count: int) -> tuple[list[float], list[float] | None]:
    """Rotor speed commands (rad/s, rotor file order) and tilt commands (rad, or None when the
    message names no ``tilt_i``) from an ``/actuator_commands`` JointState.

    Raises ``CommandError`` with reason ``duplicate_joint``, ``unknown_joint``,
    ``missing_rotor``, ``missing_tilt``, ``wrong_length`` or ``non_finite``.
    """
    index = {name: k for k, name in enumerate(message.name)}
    if len(index) != len(message.name):  # which of the values was meant is unknowable
        repeated = sorted(name for name, n in Counter(message.name).items() if n > 1)
        raise CommandError("duplicate_joint", f"{shown(repeated)} named more than once")
    rotor_names = [f"rotor_{i}" for i in range(rotor_count)]
    tilt_names = [f"tilt_{i}" for i in range(tilt_count)]
    # A command for another vehicle (e.g. six rotors) must not be half applied to this one.
    unknown = sorted(set(index) - set(rotor_names) - set(tilt_names))
    if unknown:
        raise CommandError("unknown_joint", f"{shown(unknown)} are not joints of this vehicle")
    missing = [name for name in rotor_names if name not in index]
    if missing:
        raise CommandError("missing_rotor", f"no {missing[0]} in {shown(list(message.name))}")
    velocity, position = message.velocity, message.position
    if len(velocity) != len(message.name) or (tilt_count and any(
            name in index for name in tilt_names) and len(position) != len(message.name)):
        raise CommandError("wrong_length", f"{len(message.name)} names, {len(velocity)} "
                                           f"velocities, {len(position)} positions")
    speeds = [float(velocity[index[name]]) for name in rotor_names]
    tilts = None
    present = [name in index for name in tilt_names]
    if any(present):
        if not all(present):
            raise CommandError("missing_tilt", f"needs all of {tilt_names}")
        tilts = [float(position[index[name]]) for name in tilt_names]
    if not all(map(math.isfinite, speeds + (tilts or []))):
        raise CommandError("non_finite", "NaN or infinite command")
    return speeds, tilts


class RotorMarkerMessages:
    """One arrow per rotor (``visualization_msgs/MarkerArray`` in ``frame_id``) from its
    position (m) along its thrust axis; the markers are built once and refilled."""

    def __init__(self, frame_id: str, rotor_count: int) -> None:
        self._message = MarkerArray(markers=[_arrow(frame_id, index)
                                             for index in range(rotor_count)])

    def fill(self, time_s: float, positions: FloatArray, axes: FloatArray,
             lengths: FloatArray) -> MarkerArray:
        """Arrows from ``positions`` along ``axes`` with length ``lengths`` (m)."""
        ends = positions + lengths[:, None] * axes
        for marker, start, end in zip(self._message.markers, positions.tolist(), ends.tolist(),
                                      strict=True):
            fill_seconds(marker.header.stamp, time_s)
            tail, head = marker.points
            tail.x, tail.y, tail.z = start
            head.x, head.y, head.z = end
        return self._message


def _arrow(frame_id: str, index: int) -> Marker:
    marker = Marker()
    marker.header.frame_id = frame_id
    marker.ns = "rotor_thrust"
    marker.id = index
    marker.type = Marker.ARROW
    marker.action = Marker.ADD
    marker.points = [Point(), Point()]
    marker.pose.orientation.w = 1.0
    marker.scale = Vector3(x=0.01, y=0.02, z=0.02)  # shaft and head diameters, head length
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = 1.0, 0.4, 0.0, 0.9
    return marker
