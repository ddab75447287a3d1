"""A spoofed GNSS jump over real DDS (isolated domain, private context): the estimator node
is fed a simulated flight whose fixes jump 500 m east for 2 s while the GNSS velocity and
the IMU say the vehicle did not. Its odometry never follows the jump, /diagnostics reports
the spoofing alarm (ERROR, with the reason) while it lasts and is nominal again after it
(docs/theory/trident-ekf.md §5.14)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, NavSatFix, NavSatStatus

from mav_ros_common.stamps import from_ns as time_message
from mav_ros_common.testing import spinning
from mav_ros_common.testing import wait_for as _wait_for
from trident_ekf.core.earth import ecef_to_geodetic
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate
from trident_ekf.ros.estimator_node import EstimatorNode

DATUM = (47.3977, 8.5456, 488.0)
IMU_PERIOD_NS = 10_000_000  # 100 Hz
EPOCH_NS = 1_000 * 10**9
LATENCY = 0.05  # s: fixes arrive this long after their stamp (applied in the past)
DURATION = 7.0  # s
SPOOFED = (3.0, 5.0)  # s: fixes stamped in here are 500 m east of the truth
JUMP_ENU = np.array([500.0, 0.0, 0.0])
LOOKS = {"during": 4.5, "after": 6.0}  # s: a /diagnostics status is taken at these
SENSORS = SensorModel(gnss_position_sigma=0.5, gnss_velocity_sigma=0.05)
TRAJECTORY = Trajectory(*DATUM, hover_time=2.0, amplitude_m=(6.0, 4.0, 1.0),
                        period_s=(12.0, 10.0, 15.0), yaw0_rad=0.3)


def wait_for(condition: Callable[[], Any], what: str) -> None:
    _wait_for(condition, what, 10.0, poll=2e-5)


def _stamp(t: float) -> int:
    return EPOCH_NS + round(t * 1e9 / IMU_PERIOD_NS) * IMU_PERIOD_NS


def _imu(stamp: int, gyro: np.ndarray, accel: np.ndarray) -> Imu:
    message = Imu()
    message.header.stamp = time_message(stamp)
    message.orientation_covariance[0] = -1.0  # REP-145: no orientation
    w, a = message.angular_velocity, message.linear_acceleration
    w.x, w.y, w.z = (float(c) for c in gyro)
    a.x, a.y, a.z = (float(c) for c in accel)
    return message


def _gnss(stamp: int, position_ecef: np.ndarray, velocity_ecef: np.ndarray
          ) -> tuple[NavSatFix, TwistWithCovarianceStamped]:
    navsat, twist = NavSatFix(), TwistWithCovarianceStamped()
    for message in (navsat, twist):
        message.header.stamp = time_message(stamp)
    navsat.status.status = NavSatStatus.STATUS_FIX
    navsat.position_covariance_type = NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    navsat.latitude, navsat.longitude, navsat.altitude = ecef_to_geodetic(position_ecef)
    navsat.position_covariance = np.diag([SENSORS.gnss_position_sigma**2] * 3).reshape(9)
    linear = twist.twist.twist.linear
    linear.x, linear.y, linear.z = (TRAJECTORY.enu_to_ecef.T @ velocity_ecef).tolist()
    covariance = np.zeros((6, 6))
    covariance[:3, :3] = np.eye(3) * SENSORS.gnss_velocity_sigma**2
    twist.twist.covariance = covariance.reshape(36)
    return navsat, twist


def _values(diagnostics: DiagnosticArray) -> dict[str, str]:
    (status,) = diagnostics.status
    return {item.key: item.value for item in status.values}


def _ns(message: Any) -> int:
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


def test_a_spoofed_jump_is_not_followed_and_is_reported_while_it_lasts(context):
    data = simulate(TRAJECTORY, SENSORS, DURATION, imu_rate=100.0, gnss_rate=10.0,
                    rng=np.random.default_rng(5))
    parameters = {"initial_yaw_deg": math.degrees(TRAJECTORY.yaw0_rad),
                  "initial_yaw_sigma_deg": 5.0, "diagnostics_rate_hz": 20.0,
                  "output_rate_hz": 20.0, "datum_latitude_deg": DATUM[0],
                  "datum_longitude_deg": DATUM[1], "datum_height_m": DATUM[2]}
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter(name, value=value) for name, value in parameters.items()])
    peer = Node("spoofer", context=context)
    imu_pub = peer.create_publisher(Imu, "imu/data", qos_profile_sensor_data)
    fix_pub = peer.create_publisher(NavSatFix, "gnss/fix", qos_profile_sensor_data)
    vel_pub = peer.create_publisher(TwistWithCovarianceStamped, "gnss/vel",
                                    qos_profile_sensor_data)
    keep_all = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    odometry: list[Odometry] = []
    diagnostics: list[DiagnosticArray] = []
    peer.create_subscription(Odometry, "trident_ekf/odometry", odometry.append, keep_all)
    peer.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, keep_all)
    looks: dict[str, DiagnosticArray] = {}
    spoofed_after_start = 0
    jump_ecef = TRAJECTORY.enu_to_ecef @ JUMP_ENU
    with spinning(node, peer):
        for publisher in (imu_pub, fix_pub, vel_pub):
            wait_for(lambda p=publisher: p.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")
        received = node.session.received

        def send(publisher: Any, message: Any, kind: str) -> None:
            count = received[kind] + 1
            publisher.publish(message)
            wait_for(lambda: received[kind] >= count, f"the node to take a {kind} message")

        j = 0
        for k in range(1, data.imu_time.size):
            t = data.imu_time[k]
            while j < data.gnss_time.size and data.gnss_time[j] + LATENCY <= t + 1e-9:
                spoofed = SPOOFED[0] <= data.gnss_time[j] < SPOOFED[1]
                spoofed_after_start += spoofed and node.session.started
                position = data.gnss_position[j] + (jump_ecef if spoofed else 0.0)
                navsat, twist = _gnss(_stamp(data.gnss_time[j]), position,
                                      data.gnss_velocity[j])
                send(fix_pub, navsat, "fix")
                send(vel_pub, twist, "velocity")
                j += 1
            send(imu_pub, _imu(_stamp(t), data.gyro[k], data.accel[k]), "imu")
            for name, at in LOOKS.items():
                if name not in looks and t >= at:  # the next status, from this state
                    seen = len(diagnostics)
                    wait_for(lambda n=seen: len(diagnostics) > n, "a diagnostics status")
                    looks[name] = diagnostics[-1]
        total = received["imu"]
        wait_for(lambda: diagnostics and _values(diagnostics[-1]).get("imu_messages")
                 == str(total), "diagnostics covering every message")
        final = _values(diagnostics[-1])

    during = looks["during"].status[0]
    match = re.fullmatch(r"GNSS position inconsistent with velocity and IMU: suspected "
                         r"spoofing, (\d+) m jump; (nominal|outage)", during.message)
    assert match, during.message
    assert abs(int(match.group(1)) - 500) <= 10
    assert during.level == b"\x02"
    assert _values(looks["during"])["gnss_alarm"] == during.message.split("; ")[0]
    after = looks["after"].status[0]
    assert (after.level, after.message, _values(looks["after"])["gnss_alarm"]) == (
        b"\x00", "nominal", "")
    # Every spoofed fix was rejected as inconsistent, none gated, none reset onto: one alarm.
    assert spoofed_after_start == 20
    counters = ("inconsistent", "gated", "resets", "spoofing_alarms")
    assert [int(final[f"gnss_position_{name}"]) for name in counters] == [20, 0, 0, 1]
    # The published estimate stayed with the truth: within 3 sigma, never near the jump.
    assert len(odometry) > 100
    for message in odometry:
        t = (_ns(message) - EPOCH_NS) * 1e-9
        truth = TRAJECTORY.local(np.array([t]))[0][0]
        p = message.pose.pose.position
        error = np.array([p.x, p.y, p.z]) - truth
        sigma = np.sqrt(np.diag(np.asarray(message.pose.covariance).reshape(6, 6))[:3])
        assert np.all(np.abs(error) <= 3.0 * sigma), (t, error, sigma)
        assert np.linalg.norm(error) < 3.0
