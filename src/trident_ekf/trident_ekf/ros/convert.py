"""Session outputs -> ROS messages (inputs go the other way through ``trident_ekf.adapters``,
which works on rclpy and rosbags messages alike).

Stamps are integer nanoseconds (``mav_ros_common.stamps``); vectors are numpy arrays in SI
units. Outputs follow REP-105 (pose in the ENU world frame, twist in the body frame).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from mav_ros_common.stamps import from_ns


def transform(estimate: dict[str, np.ndarray], stamp: int, frame_id: str,
              child_frame_id: str) -> TFMessage:
    """/tf message with the body pose in ``frame_id``: ``frame_id`` -> ``child_frame_id``."""
    message = TransformStamped()
    message.header.stamp = from_ns(stamp)
    message.header.frame_id = frame_id
    message.child_frame_id = child_frame_id
    t, r = message.transform.translation, message.transform.rotation
    t.x, t.y, t.z = estimate["position"].tolist()
    r.x, r.y, r.z, r.w = estimate["attitude"].tolist()
    return TFMessage(transforms=[message])
