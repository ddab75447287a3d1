"""ROS messages <-> the plain values of ``EstimationSession`` (the only place that knows both).

Stamps are integer nanoseconds (``mav_ros_common.stamps``); vectors are tuples or numpy
arrays in SI units. Inputs follow
REP-145 (IMU specific force, sensor frame) and sensor_msgs/NavSatFix (WGS-84, ENU covariance);
outputs follow REP-105 (odometry pose in the ENU map frame, twist in the body frame).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from geometry_msgs.msg import TransformStamped, TwistWithCovarianceStamped
from sensor_msgs.msg import NavSatFix
from tf2_msgs.msg import TFMessage

from mav_ros_common.stamps import from_ns
from mav_ros_common.stamps import to_ns as stamp_ns

Vector3 = tuple[float, float, float]


def fix_fields(message: NavSatFix) -> dict[str, Any]:
    """Keyword arguments of ``EstimationSession.fix``: stamp, status, WGS-84 position and
    the ENU covariance (m^2) with whether it is known (type not COVARIANCE_TYPE_UNKNOWN)."""
    return {
        "stamp_ns": stamp_ns(message.header.stamp), "status": message.status.status,
        "latitude_deg": message.latitude, "longitude_deg": message.longitude,
        "height_m": message.altitude, "covariance_enu": message.position_covariance,
        "covariance_known": message.position_covariance_type != NavSatFix.COVARIANCE_TYPE_UNKNOWN,
    }


def velocity_fields(message: TwistWithCovarianceStamped) -> tuple[int, Vector3, np.ndarray]:
    """(stamp ns, ENU velocity m/s, its 3x3 covariance m^2/s^2) of a GNSS velocity."""
    linear = message.twist.twist.linear
    covariance = np.asarray(message.twist.covariance, dtype=float).reshape(6, 6)[:3, :3]
    return stamp_ns(message.header.stamp), (linear.x, linear.y, linear.z), covariance


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

