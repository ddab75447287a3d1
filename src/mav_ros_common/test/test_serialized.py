"""Serialized message templates: re-stamped and refilled, they read back as the message
rclpy serializes with the same fields (compared field by field: rclpy leaves the alignment
padding of its CDR uninitialised, so the bytes themselves may differ there)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from geometry_msgs.msg import TransformStamped
from hypothesis import given, settings
from hypothesis import strategies as st
from nav_msgs.msg import Odometry
from rclpy.serialization import deserialize_message, serialize_message
from tf2_msgs.msg import TFMessage

from mav_ros_common import serialized, stamps

NS = 10**9
STAMPS = st.integers(min_value=-(2**31) * NS, max_value=(2**31 - 1) * NS + NS - 1)
DOUBLES = st.floats(allow_nan=False, width=64)


def _odometry(frame_id: str, child_frame_id: str, stamp_ns: int, values: list[float]) -> Odometry:
    """The Odometry the slow way: every field set on a message object."""
    message = Odometry()
    message.header.frame_id, message.child_frame_id = frame_id, child_frame_id
    stamps.fill_ns(message.header.stamp, stamp_ns)
    pose, twist = message.pose, message.twist
    p, q = pose.pose.position, pose.pose.orientation
    p.x, p.y, p.z = values[serialized.POSITION]
    q.x, q.y, q.z, q.w = values[serialized.ORIENTATION]
    pose.covariance = values[serialized.POSE_COVARIANCE]
    v, w = twist.twist.linear, twist.twist.angular
    v.x, v.y, v.z = values[serialized.LINEAR]
    w.x, w.y, w.z = values[serialized.ANGULAR]
    twist.covariance = values[serialized.TWIST_COVARIANCE]
    return message


@settings(max_examples=30, deadline=None)
@given(stamp_ns=STAMPS, values=st.lists(DOUBLES, min_size=85, max_size=85),
       frames=st.sampled_from([("map", "base_link"), ("odom", "uav12/base_link"), ("", "")]))
def test_odometry_template_matches_rclpy(stamp_ns: int, values: list[float],
                                         frames: tuple[str, str]) -> None:
    template = serialized.SerializedMessage(_odometry(*frames, 0, [0.0] * 85), 0,
                                            serialized.ODOMETRY_DOUBLES)
    template.values[:] = values
    expected = _odometry(*frames, stamp_ns, values)
    assert deserialize_message(template.stamped(stamp_ns), Odometry) == expected
    assert len(template.stamped(stamp_ns)) == len(serialize_message(expected))


@settings(max_examples=30, deadline=None)
@given(stamp_ns=STAMPS, values=st.lists(DOUBLES, min_size=7, max_size=7),
       child=st.sampled_from(["base_link", "uav3/base_link_ground_truth", "b"]))
def test_transform_template_matches_rclpy(stamp_ns: int, values: list[float], child: str) -> None:
    def tf(stamp: int, numbers: list[float]) -> TFMessage:
        transform = TransformStamped()
        transform.header.frame_id, transform.child_frame_id = "map", child
        stamps.fill_ns(transform.header.stamp, stamp)
        t, r = transform.transform.translation, transform.transform.rotation
        t.x, t.y, t.z = numbers[serialized.TRANSLATION]
        r.x, r.y, r.z, r.w = numbers[serialized.ROTATION]
        return TFMessage(transforms=[transform])

    template = serialized.SerializedMessage(tf(0, [0.0] * 7), serialized.TF_STAMP_OFFSET,
                                            serialized.TRANSFORM_DOUBLES)
    template.values[:] = values
    expected = tf(stamp_ns, values)
    assert deserialize_message(template.stamped(stamp_ns), TFMessage) == expected
    assert len(template.stamped(stamp_ns)) == len(serialize_message(expected))


def test_published_bytes_do_not_change_with_the_next_fill() -> None:
    template = serialized.SerializedMessage(_odometry("map", "base_link", 0, [0.0] * 85), 0,
                                            serialized.ODOMETRY_DOUBLES)
    template.values[serialized.POSITION] = (1.0, 2.0, 3.0)
    first = template.stamped(5 * NS + 7)
    template.values[serialized.POSITION] = (4.0, 5.0, 6.0)
    second = template.stamped(6 * NS)
    read = deserialize_message(first, Odometry)
    assert (read.header.stamp.sec, read.header.stamp.nanosec) == (5, 7)
    position = read.pose.pose.position
    assert (position.x, position.y, position.z) == (1.0, 2.0, 3.0)
    assert deserialize_message(second, Odometry).pose.pose.position.z == 6.0
    np.testing.assert_array_equal(template.values[serialized.POSITION], [4.0, 5.0, 6.0])


def test_a_layout_that_does_not_fit_is_refused() -> None:
    message = _odometry("map", "base_link", 0, [0.0] * 85)
    with pytest.raises(ValueError, match="do not fit"):
        serialized.SerializedMessage(message, 0, 100)


@settings(max_examples=30, deadline=None)
@given(stamp_ns=STAMPS, values=st.lists(DOUBLES, min_size=85, max_size=85))
def test_an_odometry_reads_back_from_its_cdr(stamp_ns: int, values: list[float]) -> None:
    raw = serialize_message(_odometry("map", "base_link", stamp_ns, values))
    read_stamp, read_values = serialized.read_stamped(raw, serialized.ODOMETRY_DOUBLES)
    assert read_stamp == stamp_ns
    np.testing.assert_array_equal(read_values, values)


def test_big_endian_and_end_padding_are_read() -> None:
    # Header stamp, frame_id "ab" (uint32 length 3, "ab\0", 1 byte to align the doubles to
    # 8 in the payload), two doubles, then 2 bytes of end padding counted in the options.
    payload = struct.pack(">iI", -2, 5) + struct.pack(">I", 3) + b"ab\x00" + b"\x00"
    raw = b"\x00\x00\x00\x02" + payload + struct.pack(">2d", 1.5, -0.25) + b"\x00\x00"
    stamp_ns, values = serialized.read_stamped(raw, 2)
    assert stamp_ns == -2 * NS + 5
    np.testing.assert_array_equal(values, [1.5, -0.25])


@pytest.mark.parametrize(("raw", "words"), [
    (b"\x00\x03\x00\x00" + bytes(100), "not plain CDR"),
    (b"\x00\x01\x00\x00" + bytes(12), "hold no stamp"),
])
def test_other_data_is_refused(raw: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        serialized.read_stamped(raw, 2)
