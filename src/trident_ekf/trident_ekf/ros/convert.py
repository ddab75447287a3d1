"""Session outputs -> ROS messages (inputs go the other way through ``trident_ekf.adapters``,
which works on rclpy and rosbags messages alike).

Outputs follow REP-105 (pose in the ENU world frame, twist in the body frame). At the output
rate (100 Hz by default, up to the IMU rate) building and converting message objects cost
more than the filter step, so each stream keeps its serialized message
(``mav_ros_common.serialized``) and a publication writes the numbers into it: the 6x6
covariances are one array copy each.
"""

from __future__ import annotations

from collections.abc import Mapping

from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from tf2_msgs.msg import TFMessage

from mav_geometry.arrays import FloatArray
from mav_ros_common.serialized import (
    ANGULAR,
    LINEAR,
    ODOMETRY_DOUBLES,
    ORIENTATION,
    POSE_COVARIANCE,
    POSITION,
    ROTATION,
    TF_STAMP_OFFSET,
    TRANSFORM_DOUBLES,
    TRANSLATION,
    TWIST_COVARIANCE,
    SerializedMessage,
)


class EstimateMessages:
    """The odometry (pose in ``frame_id``, twist in ``child_frame_id``, 6x6 covariances
    ordered x, y, z, rot x, y, z) and the /tf ``frame_id`` -> ``child_frame_id`` of an
    ``EstimationSession.estimate()``, as serialized messages."""

    def __init__(self, frame_id: str, child_frame_id: str) -> None:
        odometry = Odometry()
        odometry.header.frame_id = frame_id
        odometry.child_frame_id = child_frame_id
        self.odometry = SerializedMessage(odometry, 0, ODOMETRY_DOUBLES)
        transform = TransformStamped()
        transform.header.frame_id = frame_id
        transform.child_frame_id = child_frame_id
        self.transform = SerializedMessage(TFMessage(transforms=[transform]), TF_STAMP_OFFSET,
                                           TRANSFORM_DOUBLES)

    def fill(self, estimate: Mapping[str, FloatArray]) -> None:
        """Write ``estimate`` into both messages (then publish ``odometry.stamped(stamp)``
        and ``transform.stamped(stamp)``)."""
        values = self.odometry.values
        values[POSITION] = estimate["position"]
        values[ORIENTATION] = estimate["attitude"]
        values[POSE_COVARIANCE] = estimate["pose_cov"].ravel()
        values[LINEAR] = estimate["linear_body"]
        values[ANGULAR] = estimate["angular_body"]
        values[TWIST_COVARIANCE] = estimate["twist_cov"].ravel()
        pose = self.transform.values
        pose[TRANSLATION] = values[POSITION]
        pose[ROTATION] = values[ORIENTATION]
