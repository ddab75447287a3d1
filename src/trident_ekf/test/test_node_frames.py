"""The estimator node's frames (REP-105) over real DDS: map -> base_link by default,
odom -> base_link when world_frame is odom_frame, also switched at run time; the frame and
status parameters refused clearly when inconsistent; config/estimator_live.yaml, the
real-vehicle parameter file, loads as it is written."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu
from tf2_msgs.msg import TFMessage

from mav_ros_common.parameters import ParameterError, flattened
from mav_ros_common.stamps import from_ns
from mav_ros_common.testing import spinning, wait_for
from trident_ekf.ros.estimator_node import EstimatorNode
from trident_ekf.ros.parameters import SPECS

LIVE_CONFIG = Path(__file__).resolve().parents[3] / "config" / "estimator_live.yaml"
DATUM = {"datum_latitude_deg": 47.3977, "datum_longitude_deg": 8.5456, "datum_height_m": 488.0}
EPOCH_NS = 1_000 * 10**9
IMU_PERIOD_NS = 10_000_000
KEEP_ALL = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


class Outputs:
    """A started node (at a set pose) fed with a still IMU; its odometry and /tf."""

    def __init__(self, node: EstimatorNode, peer: Node) -> None:
        self.node = node
        self.odometry: list[Odometry] = []
        self.transforms: list[Any] = []
        peer.create_subscription(Odometry, "trident_ekf/odometry", self.odometry.append,
                                 KEEP_ALL)
        peer.create_subscription(TFMessage, "/tf", self._on_tf, KEEP_ALL)
        self.imu = peer.create_publisher(Imu, "imu/data", qos_profile_sensor_data)
        self.next = 1

    def _on_tf(self, message: TFMessage) -> None:
        self.transforms += list(message.transforms)

    def feed(self, samples: int) -> None:
        """``samples`` more IMU samples (at rest); waits for the outputs they make."""
        received = self.node.session.received
        for _ in range(samples):
            message = Imu()
            message.header.stamp = from_ns(EPOCH_NS + self.next * IMU_PERIOD_NS)
            message.linear_acceleration.z = 9.81
            count = received["imu"] + 1
            self.imu.publish(message)
            wait_for(lambda c=count: received["imu"] >= c, "the node to take an IMU sample")
            self.next += 1
        published = self.node.session.filter.time  # the last output's stamp is at most this
        wait_for(lambda: self.odometry and _ns(self.odometry[-1]) >= (published - 0.02) * 1e9,
                 "the odometry of the last samples")
        wait_for(lambda: len(self.transforms) >= len(self.odometry), "the /tf of every output")

    def frames(self, since: int = 0) -> set[tuple[str, str]]:
        """(frame_id, child_frame_id) of the odometry and the transforms from ``since`` on."""
        return ({(m.header.frame_id, m.child_frame_id) for m in self.odometry[since:]}
                | {(t.header.frame_id, t.child_frame_id) for t in self.transforms[since:]})


def _ns(message: Any) -> int:
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


@contextmanager
def started(context: Context, **parameters: Any) -> Iterator[Outputs]:
    values = {"output_rate_hz": 50.0, **DATUM, **parameters}
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter(name, value=value) for name, value in values.items()])
    # Started before spinning (no other thread touches the session yet).
    node.session.set_pose(EPOCH_NS, (1.0, 2.0, 3.0), (0.0, 0.0, 0.0, 1.0),
                          np.diag([0.25, 0.25, 0.25, 1e-3, 1e-3, 1e-2]))
    peer = Node("frames_peer", context=context)
    outputs = Outputs(node, peer)
    with spinning(node, peer):
        wait_for(lambda: outputs.imu.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("/tf") >= 1, "discovery")
        yield outputs


def test_default_world_frame_is_the_map_frame(context):
    with started(context) as outputs:
        assert outputs.node.parameters["world_frame"] == ""  # empty: map_frame
        outputs.feed(10)
        assert outputs.frames() == {("map", "base_link")}
        pose = outputs.odometry[-1].pose.pose.position
        assert (pose.x, pose.y, pose.z) == pytest.approx((1.0, 2.0, 3.0), abs=1e-3)


def test_odom_world_frame_publishes_odom_to_base_link(context):
    with started(context, world_frame="local_odom", odom_frame="local_odom",
                 map_frame="earth_map") as outputs:
        outputs.feed(10)
        assert outputs.frames() == {("local_odom", "base_link")}


def test_world_frame_switches_at_run_time_and_a_bad_one_is_refused(context):
    with started(context) as outputs:
        outputs.feed(6)
        node = outputs.node
        [result] = node.set_parameters([Parameter("world_frame", value="odom")])
        assert result.successful, result.reason
        since = len(outputs.odometry)
        outputs.feed(6)
        assert outputs.frames(since) == {("odom", "base_link")}
        [result] = node.set_parameters([Parameter("world_frame", value="utm")])
        assert not result.successful
        assert re.search("'world_frame' = 'utm' is invalid: must be map_frame 'map' or "
                         "odom_frame 'odom'", result.reason), result.reason
        [result] = node.set_parameters([Parameter("odom_frame", value="map")])
        assert not result.successful
        assert "'odom_frame' = 'map'" in result.reason
        assert node.parameters["world_frame"] == "odom"  # nothing changed


@pytest.mark.parametrize(("overrides", "message"), [
    ({"world_frame": "utm"}, "parameter 'world_frame' = 'utm' is invalid: must be map_frame "
                             "'map' or odom_frame 'odom' \\(or empty: map_frame\\)"),
    ({"world_frame": "odom", "odom_frame": "odom_local"},
     "'world_frame' = 'odom' is invalid: must be map_frame 'map' or odom_frame 'odom_local'"),
    ({"odom_frame": "map"}, "'odom_frame' = 'map' is invalid: must be a frame other than "
                            "map_frame 'map'"),
    ({"base_frame": "odom"}, "'base_frame' = 'odom' is invalid: must be a frame other than "
                             "map_frame 'map' and odom_frame 'odom'"),
    ({"outage_timeout": -1.0}, "'outage_timeout' = -1.0 is invalid: must be a number in "
                               "\\[0.01, 3600.0\\] \\(s\\), or NaN"),
    ({"outage_gnss_periods": 0.5}, "'outage_gnss_periods' = 0.5 is invalid: must be a number "
                                   "in \\[1.0, 100.0\\]"),
    ({"outage_timeout_floor": 0.0}, "'outage_timeout_floor' = 0.0 is invalid"),
    ({"subscribe_initial_pose": "yes"}, "'subscribe_initial_pose' = 'yes' is invalid: must be "
                                        "true or false"),
])
def test_inconsistent_frame_and_status_parameters_stop_the_node(context, overrides, message):
    with pytest.raises(ParameterError, match=message):
        EstimatorNode(context=context, parameter_overrides=[
            Parameter(name, value=value) for name, value in overrides.items()])


def test_outage_parameters_reach_the_filter(context):
    node = EstimatorNode(context=context)
    try:
        config = node.session.filter.config
        assert math.isnan(config.outage_timeout)  # automatic by default
        assert (config.outage_gnss_periods, config.outage_timeout_floor) == (3.0, 1.0)
        [result] = node.set_parameters([Parameter("outage_timeout", value=2.5)])
        assert result.successful, result.reason
        assert node.session.filter.outage_threshold == 2.5
        [result] = node.set_parameters([Parameter("outage_timeout", value=math.nan)])
        assert result.successful, result.reason
        assert node.session.filter.outage_threshold == 3.0  # 3 x the assumed 1 s period
    finally:
        node.destroy_node()


# ----- config/estimator_live.yaml -------------------------------------------------------------

def test_live_parameter_file_is_accepted_as_written(context):
    document = yaml.safe_load(LIVE_CONFIG.read_text())
    assert list(document) == ["trident_ekf"]
    parameters = flattened(document["trident_ekf"]["ros__parameters"])
    assert set(parameters) <= {spec.name for spec in SPECS}
    # The datum comes from the first good fix: no datum keys.
    assert not any(name.startswith("datum_") for name in parameters)
    node = EstimatorNode(context=context,
                         cli_args=["--ros-args", "--params-file", str(LIVE_CONFIG)])
    try:
        for name, value in parameters.items():
            assert node.get_parameter(name).value == pytest.approx(value, nan_ok=True), name
        settings = node.parameters.settings
        assert settings.datum is None
        assert set(settings.aiding) == {"barometer", "magnetometer"}
        assert math.isnan(settings.filter_config.outage_timeout)
        assert settings.frames == ("map", "base_link")
    finally:
        node.destroy_node()


def test_every_live_parameter_is_documented_with_a_comment():
    for number, line in enumerate(LIVE_CONFIG.read_text().splitlines(), 1):
        leaf = re.match(r"\s+[a-z_]+: \S", line)
        if leaf:
            assert "#" in line, f"estimator_live.yaml:{number} has no comment: {line.strip()}"
