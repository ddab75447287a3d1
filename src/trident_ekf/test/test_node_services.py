"""The estimator node's services and status over real DDS (isolated domain, private context):
~/reset, ~/set_pose, ~/set_datum, the optional initial_pose topic, and /diagnostics at its
fixed rate in every phase, before any input and through a GNSS outage."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseWithCovarianceStamped, TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, NavSatFix, NavSatStatus
from std_srvs.srv import Trigger

from mav_ros_common.stamps import from_ns
from mav_ros_common.testing import spinning, wait_for
from trident_ekf.core.earth import ecef_to_geodetic
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate
from trident_ekf.ros.estimator_node import EstimatorNode
from trident_ekf_interfaces.srv import SetDatum, SetPose

DATUM = (47.3977, 8.5456, 488.0)
EPOCH_NS = 1_000 * 10**9
IMU_PERIOD_NS = 10_000_000  # 100 Hz
DIAGNOSTICS_RATE = 20.0  # Hz
WAIT = 10.0  # s: bound of every wait
WINDOW = 0.5  # s of wall time in which diagnostics are counted
# At least this share of the statuses due in a window must arrive (slack for a loaded host).
MIN_SHARE = 0.4
PHASE_STATUSES = 5
"""Statuses checked per phase of the GNSS-outage test."""
KEEP_ALL = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
GRAVITY_UP = (0.0, 0.0, 9.81)


class Peer:
    """The other side of the node: service clients, sensor publishers and what came out."""

    def __init__(self, node: EstimatorNode, peer: Node) -> None:
        self.node, self.peer = node, peer
        self.diagnostics: list[tuple[float, Any]] = []  # (arrival monotonic s, status)
        self.odometry: list[Odometry] = []
        peer.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics,
                                 KEEP_ALL)
        peer.create_subscription(Odometry, "trident_ekf/odometry", self.odometry.append,
                                 KEEP_ALL)
        self.reset = peer.create_client(Trigger, "/trident_ekf/reset")
        self.set_pose = peer.create_client(SetPose, "/trident_ekf/set_pose")
        self.set_datum = peer.create_client(SetDatum, "/trident_ekf/set_datum")
        sensor = qos_profile_sensor_data
        self.imu = peer.create_publisher(Imu, "imu/data", sensor)
        self.fix = peer.create_publisher(NavSatFix, "gnss/fix", sensor)
        self.vel = peer.create_publisher(TwistWithCovarianceStamped, "gnss/vel", sensor)
        self.initial_pose = peer.create_publisher(PoseWithCovarianceStamped, "initial_pose",
                                                  KEEP_ALL)

    def _on_diagnostics(self, message: DiagnosticArray) -> None:
        self.diagnostics += [(time.monotonic(), s) for s in message.status
                             if s.name == "trident_ekf"]

    def discovered(self) -> None:
        for client in (self.reset, self.set_pose, self.set_datum):
            assert client.wait_for_service(timeout_sec=WAIT), client.srv_name
        for publisher in (self.imu, self.fix, self.vel):
            wait_for(lambda p=publisher: p.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: self.node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")
        wait_for(lambda: self.diagnostics, "the first diagnostics")

    def call(self, client: Any, request: Any) -> Any:
        future = client.call_async(request)
        wait_for(future.done, f"{client.srv_name} to answer")
        return future.result()

    def send(self, publisher: Any, message: Any, kind: str) -> None:
        """Publish and wait until the node has taken it (best effort: no loss unseen)."""
        received = self.node.session.received
        count = received[kind] + 1
        publisher.publish(message)
        wait_for(lambda: received[kind] >= count, f"the node to take a {kind} message")

    def send_imu(self, stamp: int, gyro=(0.0, 0.0, 0.0), accel=GRAVITY_UP) -> None:
        self.send(self.imu, imu_message(stamp, gyro, accel), "imu")

    def latest(self) -> tuple[Any, dict[str, str]]:
        """The latest diagnostics status and its values."""
        status = self.diagnostics[-1][1]
        return status, {item.key: item.value for item in status.values}

    def fresh(self) -> dict[str, str]:
        """Values of a diagnostics status published after now (commands have taken effect)."""
        count = len(self.diagnostics)
        wait_for(lambda: len(self.diagnostics) > count + 1, "fresh diagnostics")
        return self.latest()[1]


@contextmanager
def running(context: Context, **parameters: Any) -> Iterator[Peer]:
    """The node with ``parameters`` and a peer, spun by one executor thread."""
    values = {"diagnostics_rate_hz": DIAGNOSTICS_RATE, "output_rate_hz": 50.0,
              "level_duration_s": 1.0, "initial_yaw_deg": 0.0, **parameters}
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter(name, value=value) for name, value in values.items()])
    peer_node = Node("services_peer", context=context)
    peer = Peer(node, peer_node)
    with spinning(node, peer_node):
        peer.discovered()
        yield peer


def imu_message(stamp: int, gyro, accel) -> Imu:
    message = Imu()
    message.header.stamp = from_ns(stamp)
    message.orientation_covariance[0] = -1.0
    w, a = message.angular_velocity, message.linear_acceleration
    w.x, w.y, w.z = (float(c) for c in gyro)
    a.x, a.y, a.z = (float(c) for c in accel)
    return message


def pose_message(stamp: int, position, frame_id: str = "map", yaw: float = 0.0,
                 sigmas=(0.5, 0.5, 0.5, 0.05, 0.05, 0.1)) -> PoseWithCovarianceStamped:
    message = PoseWithCovarianceStamped()
    message.header.stamp = from_ns(stamp)
    message.header.frame_id = frame_id
    pose = message.pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(c) for c in position)
    pose.orientation.z, pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    message.pose.covariance = np.diag(np.square(sigmas)).reshape(36).tolist()
    return message


def set_pose_request(message: PoseWithCovarianceStamped) -> SetPose.Request:
    request = SetPose.Request()
    request.pose = message
    return request


def datum_request(latitude: float, longitude: float, height: float) -> SetDatum.Request:
    request = SetDatum.Request()
    request.latitude_deg, request.longitude_deg, request.height_m = latitude, longitude, height
    return request


def position_of(odometry: Odometry) -> np.ndarray:
    p = odometry.pose.pose.position
    return np.array([p.x, p.y, p.z])


# ----- services -----------------------------------------------------------------------------
def test_set_pose_needs_a_datum_then_starts_the_filter_and_reset_drops_it(context):
    with running(context) as peer:
        values = peer.fresh()
        assert values["phase"] == "waiting_for_data"
        pose = pose_message(EPOCH_NS, (10.0, -4.0, 2.0), yaw=0.7)
        # No datum parameters and no fix yet: refused, with the reason.
        answer = peer.call(peer.set_pose, set_pose_request(pose))
        assert not answer.success
        assert "datum" in answer.message
        # A pose in another frame is refused whatever the datum.
        answer = peer.call(peer.set_pose, set_pose_request(
            pose_message(EPOCH_NS, (0.0, 0.0, 0.0), frame_id="odom")))
        assert not answer.success
        assert "world frame 'map'" in answer.message
        # Out-of-range datum refused, a valid one accepted.
        answer = peer.call(peer.set_datum, datum_request(95.0, 8.0, 400.0))
        assert not answer.success
        assert "latitude" in answer.message
        answer = peer.call(peer.set_datum, datum_request(*DATUM))
        assert answer.success, answer.message
        assert peer.node.session.datum.geodetic == DATUM
        # Now the pose starts the filter: odometry follows the IMU from that pose.
        answer = peer.call(peer.set_pose, set_pose_request(pose))
        assert answer.success, answer.message
        for k in range(1, 11):
            peer.send_imu(EPOCH_NS + k * IMU_PERIOD_NS)
        wait_for(lambda: peer.odometry, "odometry after set_pose")
        assert np.allclose(position_of(peer.odometry[-1]), (10.0, -4.0, 2.0), atol=0.01)
        q = peer.odometry[-1].pose.pose.orientation
        assert 2.0 * math.atan2(q.z, q.w) == pytest.approx(0.7, abs=1e-3)
        covariance = np.asarray(peer.odometry[-1].pose.covariance).reshape(6, 6)
        assert math.sqrt(covariance[0, 0]) == pytest.approx(0.5, rel=0.05)
        values = peer.fresh()
        assert values["phase"] == "running"
        assert (values["resets_set_pose"], values["resets_set_datum"]) == ("1", "1")
        assert (values["set_pose_refused"], values["set_datum_refused"]) == ("2", "1")
        # Reset: back to waiting for data, no odometry until the filter starts again.
        answer = peer.call(peer.reset, Trigger.Request())
        assert answer.success
        assert "waiting for data" in answer.message
        values = peer.fresh()
        assert values["phase"] == "waiting_for_data"
        assert values["resets_reset"] == "1"
        assert peer.latest()[0].message == "waiting for data"
        published = len(peer.odometry)
        for k in range(11, 21):
            peer.send_imu(EPOCH_NS + k * IMU_PERIOD_NS)
        assert peer.fresh()["phase"] != "running"  # IMU alone does not start the filter
        assert len(peer.odometry) == published
        assert peer.node.session.datum.geodetic == DATUM  # the datum stays


def test_initial_pose_topic_sets_the_pose_when_enabled(context):
    with running(context, subscribe_initial_pose=True, datum_latitude_deg=DATUM[0],
                 datum_longitude_deg=DATUM[1], datum_height_m=DATUM[2]) as peer:
        wait_for(lambda: peer.initial_pose.get_subscription_count() >= 1, "discovery")
        peer.initial_pose.publish(pose_message(EPOCH_NS, (1.0, 2.0, 3.0), frame_id=""))
        wait_for(lambda: peer.node.session.started, "the filter to start from initial_pose")
        peer.initial_pose.publish(pose_message(EPOCH_NS, (1.0, 2.0, 3.0), frame_id="elsewhere"))
        wait_for(lambda: peer.node.refused["initial_pose"] == 1, "the wrong frame refused")
        values = peer.fresh()
        assert (values["phase"], values["resets_set_pose"]) == ("running", "1")
        assert values["initial_pose_refused"] == "1"


def test_initial_pose_topic_is_not_subscribed_by_default(context):
    with running(context) as peer:
        time.sleep(0.3)  # discovery would have matched by now (services did)
        assert peer.initial_pose.get_subscription_count() == 0


def test_set_pose_with_a_zero_stamp_holds_now_on_the_node_clock(context):
    with running(context, datum_latitude_deg=DATUM[0], datum_longitude_deg=DATUM[1],
                 datum_height_m=DATUM[2]) as peer:
        before = peer.node.get_clock().now().nanoseconds
        answer = peer.call(peer.set_pose, set_pose_request(pose_message(0, (0.0, 0.0, 0.0))))
        assert answer.success, answer.message
        assert peer.node.session.filter.time * 1e9 >= before - 1e3


# ----- diagnostics in every phase -------------------------------------------------------------
def _rate(peer: Peer, seconds: float) -> list[Any]:
    """The statuses that arrive during ``seconds`` of wall time."""
    start = time.monotonic()
    time.sleep(seconds)
    return [status for t, status in peer.diagnostics if t >= start]


def _next_statuses(peer: Peer, count: int) -> list[Any]:
    """The next ``count`` statuses to arrive (AssertionError if they take more than ``WAIT``
    s: the diagnostics stopped)."""
    start = len(peer.diagnostics)
    wait_for(lambda: len(peer.diagnostics) >= start + count, f"{count} diagnostics")
    return [status for _, status in peer.diagnostics[start:start + count]]


def test_diagnostics_come_at_their_rate_before_any_input(context):
    with running(context) as peer:
        statuses = _rate(peer, WINDOW)
        assert len(statuses) >= WINDOW * DIAGNOSTICS_RATE * MIN_SHARE
        for status in statuses:
            values = {item.key: item.value for item in status.values}
            assert (status.level, status.message) == (b"\x01", "waiting for data")
            assert (values["phase"], values["status"]) == ("waiting_for_data", "uninitialized")
            assert values["imu_messages"] == "0"


def _gnss(stamp: int, position_ecef, velocity_enu) -> tuple[NavSatFix, TwistWithCovarianceStamped]:
    fix, vel = NavSatFix(), TwistWithCovarianceStamped()
    fix.header.stamp = vel.header.stamp = from_ns(stamp)
    fix.status.status, fix.status.service = NavSatStatus.STATUS_FIX, NavSatStatus.SERVICE_GPS
    fix.latitude, fix.longitude, fix.altitude = ecef_to_geodetic(position_ecef)
    fix.position_covariance_type = NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    fix.position_covariance = np.diag([0.5**2] * 3).reshape(9).tolist()
    linear = vel.twist.twist.linear
    linear.x, linear.y, linear.z = (float(c) for c in velocity_enu)
    covariance = np.zeros((6, 6))
    covariance[:3, :3] = np.eye(3) * 0.05**2
    vel.twist.covariance = covariance.reshape(36).tolist()
    return fix, vel


def test_diagnostics_keep_coming_through_aligning_running_and_a_gnss_outage(context):
    """A landed vehicle with 5 Hz GNSS: levelling, running, 3 s without fixes (outage after
    the automatic timeout: 3 periods, at least 1 s), then fixes again (nominal). Between the
    phases no input is sent, and the next ``PHASE_STATUSES`` statuses must all report the
    phase: the diagnostics keep coming whatever the estimator's state (their rate is the
    test above's)."""
    trajectory = Trajectory(*DATUM, hover_time=20.0, yaw0_rad=0.0)  # still on the ground
    # Noise-free: the stillness test of the static start must pass at once (this test is
    # about the status, not the estimate).
    data = simulate(trajectory, SensorModel(), 9.0, imu_rate=1e9 / IMU_PERIOD_NS,
                    gnss_rate=5.0, noise=False)
    gap = (4.0, 7.0)  # s: no fix stamped in [4, 7)
    with running(context, datum_latitude_deg=DATUM[0], datum_longitude_deg=DATUM[1],
                 datum_height_m=DATUM[2]) as peer:
        phases = {}
        cursor = {"imu": 1, "gnss": 0}  # next sample of each stream

        def feed(until: float) -> None:
            """Send the IMU samples (and the fixes due before each) up to ``until`` s."""
            while cursor["imu"] < data.imu_time.size and data.imu_time[cursor["imu"]] <= until:
                k = cursor["imu"]
                while (cursor["gnss"] < data.gnss_time.size
                       and data.gnss_time[cursor["gnss"]] <= data.imu_time[k]):
                    j = cursor["gnss"]
                    if not gap[0] <= data.gnss_time[j] < gap[1]:
                        fix, vel = _gnss(EPOCH_NS + round(data.gnss_time[j] * 1e9),
                                         data.gnss_position[j],
                                         trajectory.enu_to_ecef.T @ data.gnss_velocity[j])
                        peer.send(peer.fix, fix, "fix")
                        peer.send(peer.vel, vel, "velocity")
                    cursor["gnss"] += 1
                peer.send_imu(EPOCH_NS + k * IMU_PERIOD_NS, data.gyro[k], data.accel[k])
                cursor["imu"] += 1

        feed(0.5)
        phases["aligning"] = _next_statuses(peer, PHASE_STATUSES)
        feed(3.0)
        phases["running"] = _next_statuses(peer, PHASE_STATUSES)
        feed(6.5)  # 2.7 s after the last fix
        phases["outage"] = _next_statuses(peer, PHASE_STATUSES)
        feed(9.0)
        phases["recovered"] = _next_statuses(peer, PHASE_STATUSES)
    expected = {"aligning": ("aligning", "uninitialized", b"\x01"),
                "running": ("running", "nominal", b"\x00"),
                "outage": ("running", "outage", b"\x01"),
                "recovered": ("running", "nominal", b"\x00")}
    for name, statuses in phases.items():
        for status in statuses:
            values = {item.key: item.value for item in status.values}
            assert (values["phase"], values["status"], status.level) == expected[name], name
    values = {item.key: item.value for item in phases["recovered"][-1].values}
    assert float(values["gnss_period_s"]) == pytest.approx(0.2, abs=1e-3)
    assert float(values["outage_timeout_s"]) == pytest.approx(1.0)  # 3 x 0.2 s < the floor
