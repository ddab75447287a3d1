"""The estimator node's output messages: an estimate written into the serialized odometry and
/tf reads back exactly, as the replay's encoder writes it."""

from __future__ import annotations

import numpy as np
from rclpy.serialization import deserialize_message
from tf2_msgs.msg import TFMessage

from trident_ekf.ros.convert import EstimateMessages
from trident_ekf.tools import cdr

STAMP = 1_700_000_123_456_789_012


def _estimate(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"position": rng.normal(size=3), "attitude": rng.normal(size=4),
            "pose_cov": rng.normal(size=(6, 6)), "linear_body": rng.normal(size=3),
            "angular_body": rng.normal(size=3), "twist_cov": rng.normal(size=(6, 6))}


def test_odometry_and_tf_carry_the_estimate() -> None:
    outputs = EstimateMessages("odom", "uav2/base_link")
    for seed, stamp in ((1, STAMP), (2, STAMP + 10_000_000)):
        estimate = _estimate(seed)
        outputs.fill(estimate)
        raw = outputs.odometry.stamped(stamp)
        reference = cdr.encode_odometry(stamp, "odom", "uav2/base_link", estimate)
        assert len(raw) == len(reference)
        decoded_stamp, values = cdr.decode_odometry(raw)
        assert decoded_stamp == stamp
        np.testing.assert_array_equal(values, cdr.decode_odometry(reference)[1])
        tf = deserialize_message(outputs.transform.stamped(stamp), TFMessage)
        (transform,) = tf.transforms
        assert (transform.header.frame_id, transform.child_frame_id) == ("odom",
                                                                         "uav2/base_link")
        assert transform.header.stamp.sec * 10**9 + transform.header.stamp.nanosec == stamp
        t, r = transform.transform.translation, transform.transform.rotation
        np.testing.assert_array_equal([t.x, t.y, t.z], estimate["position"])
        np.testing.assert_array_equal([r.x, r.y, r.z, r.w], estimate["attitude"])
