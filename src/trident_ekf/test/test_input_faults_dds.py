"""The estimator node over real DDS against an attacker's IMU inputs: a burst of absurd
(finite) readings, one sample stamped an hour ahead, the driver's clock stepping back 10 s
for good (IMU and GNSS), 4 s of NaN samples, then no IMU at all. The published odometry
stays near the truth; /diagnostics reads WARN or ERROR with the reason while a fault lasts
and OK again at most 2 s (input time) after it ends; every rejection is counted by name.

Diagnostics are read at checkpoints: the feed pauses (input time stands still) until a
status arrives that covers every message sent; its level and summary are then those of the
checkpoint, however slow the host."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, NavSatFix

from mav_ros_common.testing import module_from_file, spinning, wait_for
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.simulation import simulate
from trident_ekf.ros.estimator_node import EstimatorNode

NODE_TEST = module_from_file(Path(__file__).with_name("test_estimator_node.py"),
                             "estimator_node_test_messages")
TRAJECTORY, SENSORS = NODE_TEST.TRAJECTORY, NODE_TEST.SENSORS
IMU_RATE = 50.0  # Hz (lock-step sends: fewer messages, a shorter test)
PERIOD_NS = 20_000_000
EPOCH_NS = 1_000 * 10**9
LATENCY = 0.05  # s: fixes arrive this long after their stamp
# Each fault starts more than RECOVERY after the previous one ended.
DURATION = 12.5  # s
BURST = (1.6, 10)  # s, samples of 1e6 m/s^2 (the filter runs from about 1.2 s)
AHEAD_AT = 3.8  # s: an extra sample stamped 1 h ahead is sent after this one
STEP_AT, STEP = 4.0, -10.0  # s: from here on every stamp is 10 s earlier
BLACKOUT = (6.2, 10.2)  # s: NaN samples, stamps going on
DEFAULTS = FilterConfig()
N = DEFAULTS.clock_change_samples
RECOVERY = 2.0  # s of input time after a fault by which diagnostics must read OK


@dataclass
class Run:
    """What went in and what came out, with the diagnostics of each checkpoint."""

    odometry: list[Odometry] = field(default_factory=list)
    diagnostics: list[DiagnosticStatus] = field(default_factory=list)
    checkpoints: dict[str, DiagnosticStatus] = field(default_factory=dict)
    sent: list[tuple[int, int]] = field(default_factory=list)  # (stamp ns, k) taken samples


def stamp_of(t: float) -> int:
    return EPOCH_NS + round(t * IMU_RATE) * PERIOD_NS + (
        round(STEP * 1e9) if t >= STEP_AT - 1e-9 else 0)


def values(status: DiagnosticStatus) -> dict[str, str]:
    return {item.key: item.value for item in status.values}


def index(t: float) -> int:
    return round(t * IMU_RATE)


@pytest.fixture(scope="module")
def run(context) -> Iterator[Run]:
    data = simulate(TRAJECTORY, SENSORS, DURATION, imu_rate=IMU_RATE, gnss_rate=5.0,
                    rng=np.random.default_rng(7))
    result = Run()
    parameters = {"datum_latitude_deg": NODE_TEST.DATUM[0],
                  "datum_longitude_deg": NODE_TEST.DATUM[1],
                  "datum_height_m": NODE_TEST.DATUM[2], "output_rate_hz": 50.0,
                  "diagnostics_rate_hz": 50.0, "publish_tf": False,
                  "initial_yaw_deg": math.degrees(TRAJECTORY.yaw0_rad),
                  "initial_yaw_sigma_deg": 5.0}
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter(name, value=value) for name, value in parameters.items()])
    peer = Node("input_faults_peer", context=context)
    sensor = qos_profile_sensor_data
    imu_pub = peer.create_publisher(Imu, "imu/data", sensor)
    fix_pub = peer.create_publisher(NavSatFix, "gnss/fix", sensor)
    vel_pub = peer.create_publisher(TwistWithCovarianceStamped, "gnss/vel", sensor)
    keep_all = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    peer.create_subscription(Odometry, "trident_ekf/odometry", result.odometry.append,
                             keep_all)
    peer.create_subscription(DiagnosticArray, "/diagnostics", lambda message: (
        result.diagnostics.extend(s for s in message.status if s.name == "trident_ekf")),
        keep_all)
    received = node.session.received
    with spinning(node, peer):
        for publisher in (imu_pub, fix_pub, vel_pub):
            wait_for(lambda p=publisher: p.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")

        def send(publisher: Any, message: Any, kind: str) -> None:
            count = received[kind] + 1
            publisher.publish(message)
            wait_for(lambda: received[kind] >= count, f"the node to take a {kind} message",
                     poll=2e-5)

        def checkpoint(name: str) -> None:
            """The first status computed after every message sent so far."""
            seen, count = len(result.diagnostics), str(received["imu"])
            wait_for(lambda: any(values(s)["imu_messages"] == count
                                 for s in result.diagnostics[seen:]), f"diagnostics at {name}")
            result.checkpoints[name] = next(s for s in result.diagnostics[seen:]
                                            if values(s)["imu_messages"] == count)

        checkpoints = {index(BURST[0]) + BURST[1] - 1: "burst",
                       index(BURST[0]) + BURST[1] - 1 + index(RECOVERY): "burst_over",
                       index(STEP_AT) + N - 1: "step",
                       index(STEP_AT) + N - 1 + index(RECOVERY): "step_over",
                       index(BLACKOUT[1]) - 1: "blackout",
                       index(BLACKOUT[1]) + index(RECOVERY): "blackout_over"}
        gnss = list(range(data.gnss_time.size))
        for k in range(1, data.imu_time.size):
            t = data.imu_time[k]
            while gnss and data.gnss_time[gnss[0]] + LATENCY <= t + 1e-9:
                j = gnss.pop(0)
                for publisher, message, kind in zip(
                        (fix_pub, vel_pub), NODE_TEST.gnss_messages(
                            stamp_of(data.gnss_time[j]), data.gnss_position[j],
                            data.gnss_velocity[j], True), ("fix", "velocity"), strict=True):
                    send(publisher, message, kind)
            gyro, accel = data.gyro[k], data.accel[k]
            if index(BURST[0]) <= k < index(BURST[0]) + BURST[1]:
                accel = np.array([1e6, -1e6, 1e6])
            elif index(BLACKOUT[0]) <= k < index(BLACKOUT[1]):
                gyro = np.full(3, math.nan)
            send(imu_pub, NODE_TEST.imu_message(stamp_of(t), gyro, accel), "imu")
            result.sent.append((stamp_of(t), k))
            if k == index(AHEAD_AT):
                send(imu_pub, NODE_TEST.imu_message(stamp_of(t) + 3600 * 10**9, gyro, accel),
                     "imu")
            if k in checkpoints:
                checkpoint(checkpoints[k])
        checkpoint("end")
        seen = len(result.diagnostics)
        wait_for(lambda: any(float(values(s)["imu_blackout_s"]) > DEFAULTS.imu_timeout
                             for s in result.diagnostics[seen:]),
                 "diagnostics after imu_timeout without any IMU message")
        result.checkpoints["silent"] = next(
            s for s in result.diagnostics[seen:]
            if float(values(s)["imu_blackout_s"]) > DEFAULTS.imu_timeout)
        yield result


def test_diagnostics_read_each_fault_while_it_lasts_and_ok_after_it(run):
    expected = {
        "burst": (DiagnosticStatus.WARN, "IMU saturated: samples at the sensor's range "
                                         "rejected; nominal"),
        "burst_over": (DiagnosticStatus.OK, "nominal"),
        "step": (DiagnosticStatus.ERROR, f"IMU clock stepped {STEP:+.3f} s: continuing on "
                                         "the new time base; nominal"),
        "step_over": (DiagnosticStatus.OK, "nominal"),
        "blackout": (DiagnosticStatus.ERROR, "IMU blackout: no usable sample for 4.0 s; "
                                             "nominal"),
        "blackout_over": (DiagnosticStatus.OK, "nominal"),
        "end": (DiagnosticStatus.OK, "nominal"),
    }
    assert {name: (status.level, status.message)
            for name, status in run.checkpoints.items() if name in expected} == expected
    silent = run.checkpoints["silent"]
    assert silent.level == DiagnosticStatus.ERROR
    assert silent.message.startswith("IMU blackout: no usable sample for ")
    assert values(silent)["input_fault"] == silent.message.removesuffix("; nominal")


def test_every_rejected_sample_is_counted_by_its_reason(run):
    counters = values(run.checkpoints["end"])
    expected = {"imu_saturated": BURST[1], "imu_stamp_jump": 1, "imu_out_of_order": N - 1,
                "imu_clock_changes": 1,
                "imu_nonfinite": index(BLACKOUT[1]) - index(BLACKOUT[0]),
                "imu_gap": 2,  # after the burst (0.22 s) and the blackout (both bridged)
                "imu_duplicate": 0, "imu_malformed": 0, "fix_out_of_range": 0,
                # The fix stamped at the step arrives inside the detection window (N samples,
                # 0.1 s), before the new time base is taken: it is lost, as late.
                "gnss_position_late": 1, "gnss_velocity_late": 1,
                "gnss_position_gated": 0, "gnss_position_resets": 0}
    assert {name: int(counters[name]) for name in expected} == expected
    assert counters["imu_last_clock_step_s"] == f"{STEP:.3f}"


def test_published_odometry_stays_near_the_truth_and_restarts_on_the_new_clock(run):
    """Every output within 3 sigma of the truth (the attacker's burst moved it 240 km);
    outputs again at the N-th sample of the new time base."""
    sent = iter(run.sent)
    ratios = []
    for message in run.odometry:
        stamp = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
        k = next(k for s, k in sent if s == stamp)
        truth, _, _ = TRAJECTORY.local(np.array([k / IMU_RATE]))
        pose = message.pose.pose.position
        error = truth[0] - np.array([pose.x, pose.y, pose.z])
        sigma = np.sqrt(np.diag(np.asarray(message.pose.covariance).reshape(6, 6))[:3])
        ratios.append(np.abs(error) / sigma)
        assert np.all(np.abs(error) < 5.0), (k, error)
    ratios = np.array(ratios)
    assert np.all(np.mean(ratios < 3.0, axis=0) >= 0.95)
    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in run.odometry]
    first_new = next(s for s in stamps if s < stamps[0])  # the clock went back
    assert first_new == stamp_of((index(STEP_AT) + N - 1) / IMU_RATE)
    assert stamps[-1] in {stamp for stamp, _ in run.sent[-2:]}  # outputs to the end
