"""Direct CDR decoding and encoding of the fixed-layout messages replay streams.

At 200+ Hz rosbags' message objects cost more than the filter, so replay reads
sensor_msgs/Imu and nav_msgs/Odometry, and writes nav_msgs/Odometry and
geometry_msgs/Vector3Stamped, straight from and to CDR. These messages are a header
(stamp, frame_id), possibly more strings, then only float64 fields; the tests check every
function here byte for byte against rosbags.

CDR: a 4-byte encapsulation header (0x0000 big, 0x0001 little endian), then the payload,
whose alignment counts from the payload start. Strings are a uint32 length (NUL included),
the bytes and the NUL.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.arrays import FloatArray

_PAYLOAD = 4  # encapsulation header size
_LITTLE_ENDIAN = b"\x00\x01\x00\x00"
_BYTE_ORDER = {b"\x00\x01": "<", b"\x00\x00": ">"}
# sensor_msgs/Imu doubles: orientation 4, its covariance 9, angular_velocity 3, covariance 9,
# linear_acceleration 3, covariance 9.
_IMU_GYRO = 13
_IMU_ACCEL = 25
# nav_msgs/Odometry doubles (after child_frame_id): position 3, orientation x y z w 4, pose
# covariance 36, twist linear 3, angular 3, twist covariance 36.
ODOMETRY_DOUBLES = 85
POSITION, ORIENTATION, POSE_COVARIANCE = slice(0, 3), slice(3, 7), slice(7, 43)
LINEAR, ANGULAR, TWIST_COVARIANCE = slice(43, 46), slice(46, 49), slice(49, 85)


class ImuSample(NamedTuple):
    """The fields of sensor_msgs/Imu the filter uses: stamp ns, rad/s, m/s^2."""

    stamp_ns: int
    gyro: tuple[float, float, float]
    accel: tuple[float, float, float]


def _align(offset: int, size: int) -> int:
    return (offset + size - 1) // size * size


def _read_head(raw: bytes | memoryview, strings: int) -> tuple[int, int, str]:
    """Header stamp (ns), the byte offset of the first double after the stamp and
    ``strings`` strings, and the byte order ('<' or '>')."""
    order = _BYTE_ORDER.get(bytes(raw[:2]))
    if order is None:
        raise ValueError(f"not plain CDR (encapsulation 0x{bytes(raw[:2]).hex()})")
    sec, nanosec = struct.unpack_from(order + "iI", raw, _PAYLOAD)
    offset = 8
    for _ in range(strings):
        offset = _align(offset, 4)
        offset += 4 + struct.unpack_from(order + "I", raw, _PAYLOAD + offset)[0]
    return sec * 10**9 + nanosec, _PAYLOAD + _align(offset, 8), order


def decode_imu(raw: bytes | memoryview) -> ImuSample:
    """Stamp, angular velocity and linear acceleration of a sensor_msgs/Imu."""
    stamp, body, order = _read_head(raw, 1)
    vector = order + "3d"
    return ImuSample(stamp, struct.unpack_from(vector, raw, body + 8 * _IMU_GYRO),
                     struct.unpack_from(vector, raw, body + 8 * _IMU_ACCEL))


def decode_odometry(raw: bytes | memoryview) -> tuple[int, FloatArray]:
    """Stamp (ns) and the ``ODOMETRY_DOUBLES`` doubles of a nav_msgs/Odometry (index them
    with ``POSITION``, ``ORIENTATION``, ...)."""
    stamp, body, order = _read_head(raw, 2)
    # A copy: a view would keep the whole read buffer alive.
    return stamp, np.frombuffer(raw, order + "f8", ODOMETRY_DOUBLES, body).astype(float)


def encode_odometry(stamp: int, frame_id: str, child_frame_id: str,
                    estimate: Mapping[str, FloatArray]) -> bytes:
    """nav_msgs/Odometry CDR of an ``EstimationSession.estimate()``: pose in ``frame_id``
    (ENU), twist in ``child_frame_id`` (body), 6x6 covariances (x, y, z, rot x, y, z)."""
    values = np.empty(ODOMETRY_DOUBLES)
    values[POSITION] = estimate["position"]
    values[ORIENTATION] = estimate["attitude"]
    values[POSE_COVARIANCE] = estimate["pose_cov"].reshape(36)
    values[LINEAR] = estimate["linear_body"]
    values[ANGULAR] = estimate["angular_body"]
    values[TWIST_COVARIANCE] = estimate["twist_cov"].reshape(36)
    return encode_stamped(stamp, (frame_id, child_frame_id), values)


def encode_stamped(stamp: int, strings: Sequence[str], values: ArrayLike) -> bytes:
    """Little-endian CDR of header stamp, ``strings`` (frame_id first), then ``values`` as
    doubles: Vector3Stamped is ``(frame_id,)`` and 3 values, Odometry ``(frame_id,
    child_frame_id)`` and ``ODOMETRY_DOUBLES``."""
    parts = [_LITTLE_ENDIAN, struct.pack("<iI", stamp // 10**9, stamp % 10**9)]
    offset = 8
    for text in strings:
        data = text.encode() + b"\x00"
        padding = _align(offset, 4) - offset
        parts += (b"\x00" * padding, struct.pack("<I", len(data)), data)
        offset += padding + 4 + len(data)
    parts += (b"\x00" * (_align(offset, 8) - offset),
              np.asarray(values, dtype="<f8").tobytes())
    return b"".join(parts)
