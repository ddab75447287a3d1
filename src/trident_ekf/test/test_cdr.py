"""The direct CDR codec of the replay tools against rosbags' serializer and deserializer."""

from __future__ import annotations

import numpy as np
import pytest

from trident_ekf.tools import bagio, cdr

# Frame ids of every length modulo the 4- and 8-byte alignments.
FRAME_IDS = ["", "a", "ab", "imu", "base", "imu_lin", "imu_link", "gnss_link", "a_long_frame"]
STAMP = 1_700_000_123_456_789_012


def _odometry(rng: np.random.Generator, frame_id: str, child_frame_id: str):
    values = rng.normal(size=cdr.ODOMETRY_DOUBLES)
    message = bagio.odometry_message(
        STAMP, values[cdr.POSITION], values[cdr.ORIENTATION], values[cdr.POSE_COVARIANCE],
        values[cdr.LINEAR], values[cdr.ANGULAR], values[cdr.TWIST_COVARIANCE],
        frame_id=frame_id, child_frame_id=child_frame_id)
    return values, message


@pytest.mark.parametrize("little_endian", [True, False])
@pytest.mark.parametrize("frame_id", FRAME_IDS)
def test_imu_decoding_matches_rosbags(frame_id, little_endian):
    rng = np.random.default_rng(len(frame_id))
    message = bagio.imu_message(STAMP, rng.normal(size=3), rng.normal(size=3), frame_id)
    raw = bytes(bagio.TYPESTORE.serialize_cdr(message, bagio.IMU, little_endian=little_endian))
    reference = bagio.TYPESTORE.deserialize_cdr(raw, bagio.IMU)
    w, a = reference.angular_velocity, reference.linear_acceleration
    assert cdr.decode_imu(raw) == (bagio.stamp_ns(reference), (w.x, w.y, w.z), (a.x, a.y, a.z))


@pytest.mark.parametrize("little_endian", [True, False])
@pytest.mark.parametrize("frame_id", FRAME_IDS)
def test_odometry_decoding_matches_rosbags(frame_id, little_endian):
    rng = np.random.default_rng(len(frame_id))
    for child_frame_id in FRAME_IDS:
        _, message = _odometry(rng, frame_id, child_frame_id)
        raw = bytes(bagio.TYPESTORE.serialize_cdr(message, bagio.ODOMETRY,
                                                  little_endian=little_endian))
        reference = bagio.TYPESTORE.deserialize_cdr(raw, bagio.ODOMETRY)
        pose, twist = reference.pose, reference.twist
        expected = np.concatenate([
            [pose.pose.position.x, pose.pose.position.y, pose.pose.position.z],
            [pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z,
             pose.pose.orientation.w], pose.covariance,
            [twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z],
            [twist.twist.angular.x, twist.twist.angular.y, twist.twist.angular.z],
            twist.covariance])
        stamp, values = cdr.decode_odometry(raw)
        assert stamp == bagio.stamp_ns(reference)
        np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("frame_id", FRAME_IDS)
def test_encoding_is_byte_identical_to_rosbags(frame_id):
    rng = np.random.default_rng(len(frame_id))
    for child_frame_id in FRAME_IDS:
        values, message = _odometry(rng, frame_id, child_frame_id)
        assert cdr.encode_stamped(STAMP, (frame_id, child_frame_id), values) == bytes(
            bagio.TYPESTORE.serialize_cdr(message, bagio.ODOMETRY))
    vector = rng.normal(size=3)
    assert cdr.encode_stamped(STAMP, (frame_id,), vector) == bytes(
        bagio.TYPESTORE.serialize_cdr(bagio.vector_message(STAMP, vector, frame_id),
                                      bagio.VECTOR))


def test_other_encapsulations_are_rejected():
    raw = bytearray(bagio.TYPESTORE.serialize_cdr(bagio.imu_message(STAMP, (0, 0, 0),
                                                                     (0, 0, 0)), bagio.IMU))
    raw[1] = 0x03  # PL_CDR_LE: parameter lists, not the fixed layout
    with pytest.raises(ValueError, match="not plain CDR"):
        cdr.decode_imu(bytes(raw))


def test_an_estimate_is_encoded_as_the_odometry_it_describes():
    rng = np.random.default_rng(5)
    estimate = {"position": rng.normal(size=3), "attitude": rng.normal(size=4),
                "pose_cov": rng.normal(size=(6, 6)), "linear_body": rng.normal(size=3),
                "angular_body": rng.normal(size=3), "twist_cov": rng.normal(size=(6, 6))}
    raw = cdr.encode_odometry(STAMP, "map", "base_link", estimate)
    message = bagio.TYPESTORE.deserialize_cdr(raw, bagio.ODOMETRY)
    assert (message.header.frame_id, message.child_frame_id) == ("map", "base_link")
    assert bagio.stamp_ns(message) == STAMP
    pose, twist = message.pose, message.twist
    position = pose.pose.position
    orientation = pose.pose.orientation
    np.testing.assert_array_equal([position.x, position.y, position.z], estimate["position"])
    np.testing.assert_array_equal([orientation.x, orientation.y, orientation.z, orientation.w],
                                  estimate["attitude"])
    np.testing.assert_array_equal(pose.covariance, estimate["pose_cov"].reshape(36))
    np.testing.assert_array_equal([twist.twist.linear.x, twist.twist.linear.y,
                                   twist.twist.linear.z], estimate["linear_body"])
    np.testing.assert_array_equal([twist.twist.angular.x, twist.twist.angular.y,
                                   twist.twist.angular.z], estimate["angular_body"])
    np.testing.assert_array_equal(twist.covariance, estimate["twist_cov"].reshape(36))
