"""Messages serialized once, then re-stamped and refilled in place: the high-rate publishers'
fast path.

Publishing a message object makes rclpy convert every field to C and serialize it (an
Odometry with its two 36-double covariances costs tens of microseconds); building the object
costs as much again. A stream whose strings never change keeps instead the serialized bytes
of one message, writes the stamp and the float64 fields that end the message into them, and
publishes the bytes (``Publisher.publish`` passes serialized data through as it is). The
template is rclpy's own serialization of an example message, so the layout is the type's;
only the stamp's place and the number of trailing doubles are given here. ``read_stamped``
reads such a message back from a raw subscription, without building the message object.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from rclpy.serialization import serialize_message

from mav_ros_common.stamps import NANOSECONDS_PER_SECOND
from mav_ros_common.streams import FloatArray

ENCAPSULATION_BYTES = 4
"""The CDR encapsulation header before the payload."""
LITTLE_ENDIAN_CDR = b"\x00\x01"
_BYTE_ORDERS = {b"\x00\x01": "<", b"\x00\x00": ">"}
_STAMP = struct.Struct("<iI")

ODOMETRY_DOUBLES = 85
"""nav_msgs/Odometry ends with 85 float64 after its child_frame_id: these slices of
``SerializedMessage.values``."""
POSITION, ORIENTATION, POSE_COVARIANCE = slice(0, 3), slice(3, 7), slice(7, 43)
LINEAR, ANGULAR, TWIST_COVARIANCE = slice(43, 46), slice(46, 49), slice(49, 85)
TRANSFORM_DOUBLES = 7
"""A tf2_msgs/TFMessage of one transform ends with its translation (3) and rotation
(x, y, z, w)."""
TRANSLATION, ROTATION = slice(0, 3), slice(3, 7)
TF_STAMP_OFFSET = 4
"""Payload offset of the stamp of a TFMessage's first transform (after the sequence length)."""


class SerializedMessage:
    """The serialized form of ``message`` with its stamp and its trailing doubles writable.

    ``stamp_offset`` is the payload byte offset of the stamp (0 for a message that starts
    with its header); ``doubles`` the number of float64 fields that end the message, exposed
    as the writable array ``values`` (in field order). Write ``values``, then publish
    ``stamped(stamp_ns)``.
    """

    def __init__(self, message: Any, stamp_offset: int, doubles: int) -> None:
        data = serialize_message(message)
        if data[:2] != LITTLE_ENDIAN_CDR:
            raise ValueError(f"expected little-endian CDR, got encapsulation 0x{data[:2].hex()}")
        start = len(data) - 8 * doubles
        if not ENCAPSULATION_BYTES + stamp_offset + _STAMP.size <= start:
            raise ValueError(f"{doubles} trailing doubles and a stamp at {stamp_offset} do not "
                             f"fit a message of {len(data)} bytes")
        self._buffer = bytearray(data)
        self._stamp_at = ENCAPSULATION_BYTES + stamp_offset
        # A view into the buffer: writing ``values`` writes the serialized message.
        self.values = np.frombuffer(self._buffer, dtype="<f8", count=doubles, offset=start)

    def stamped(self, stamp_ns: int) -> bytes:
        """The message's bytes with the stamp ``stamp_ns`` (integer ns) and the current
        ``values`` (a copy: the next fill does not change what was published)."""
        _STAMP.pack_into(self._buffer, self._stamp_at,
                         *divmod(stamp_ns, NANOSECONDS_PER_SECOND))
        return bytes(self._buffer)


def read_stamped(raw: bytes, doubles: int) -> tuple[int, FloatArray]:
    """The header stamp (integer ns) and the ``doubles`` float64 fields that end a serialized
    message which starts with its header (plain CDR in either byte order, as a raw
    subscription receives it); the values are a copy. ValueError for other data."""
    order = _BYTE_ORDERS.get(bytes(raw[:2]))
    if order is None:
        raise ValueError(f"not plain CDR (encapsulation 0x{bytes(raw[:2]).hex()})")
    end = len(raw) - (raw[3] & 0x3)  # the options' last two bits count the end padding
    start = end - 8 * doubles
    if start < ENCAPSULATION_BYTES + _STAMP.size:
        raise ValueError(f"{len(raw)} bytes hold no stamp and {doubles} doubles")
    sec, nanosec = struct.unpack_from(order + "iI", raw, ENCAPSULATION_BYTES)
    values = np.frombuffer(raw, order + "f8", doubles, start).astype(float)
    return sec * NANOSECONDS_PER_SECOND + nanosec, values
