"""The estimator node over real DDS (isolated domain, private context): a simulated IMU/GNSS
flight with injected bad inputs goes in through publishers; odometry, /tf and /diagnostics
come out. Also its parameters: the parameter file, and bad values rejected clearly."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, NavSatFix, NavSatStatus
from tf2_msgs.msg import TFMessage

from mav_geometry import quaternion
from mav_ros_common.parameters import ParameterError, flattened
from mav_ros_common.stamps import from_ns as time_message
from mav_ros_common.testing import spinning
from mav_ros_common.testing import wait_for as _wait_for
from trident_ekf.core.earth import ecef_to_geodetic
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate
from trident_ekf.ros.estimator_node import EstimatorNode, main
from trident_ekf.ros.parameters import SPECS, aiding_specs

CONFIG = Path(__file__).resolve().parents[3] / "config" / "estimator.yaml"
DATUM = (47.3977, 8.5456, 488.0)
IMU_PERIOD_NS = 5_000_000  # 200 Hz
EPOCH_NS = 1_000 * 10**9  # stamps as a simulator's /clock would give them
LATENCY = 0.05  # s: fixes arrive this long after their stamp
DURATION = 14.0  # s
GAP = (2.0, 2.15)  # s: IMU samples not sent (hovering, longer than max_imu_interval)
NAN_IMU_AT, BACKWARDS_AT = 5.0, 6.0  # s
NO_FIX = (8.0, 10.0)  # s: the receiver reports NO_FIX with NaN fields
OUTPUT_RATE = 50.0  # Hz
FRAMES = ("test_map", "test_body")
SENSORS = SensorModel(gnss_position_sigma=0.5, gnss_velocity_sigma=0.05)
TRAJECTORY = Trajectory(*DATUM, hover_time=3.0, amplitude_m=(6.0, 4.0, 1.0),
                        period_s=(12.0, 10.0, 15.0), yaw0_rad=0.3)
WAIT = 10.0  # s: bound of every wait


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    _wait_for(condition, what, timeout, poll=2e-5)  # messages one by one: poll fast


@dataclass
class Flight:
    """What went in and what came out."""

    data: object
    odometry: list[Odometry] = field(default_factory=list)
    transforms: list[TFMessage] = field(default_factory=list)
    diagnostics: list[DiagnosticArray] = field(default_factory=list)
    published: dict[str, int] = field(default_factory=dict)
    valid_fixes_after_start: int = 0
    start_stamp: int | None = None


def stamp_of(t: float) -> int:
    return EPOCH_NS + round(t * 1e9 / IMU_PERIOD_NS) * IMU_PERIOD_NS


def imu_message(stamp: int, gyro, accel) -> Imu:
    message = Imu()
    message.header.stamp = time_message(stamp)
    message.header.frame_id = "imu_link"
    message.orientation_covariance[0] = -1.0  # REP-145: no orientation
    w, a = message.angular_velocity, message.linear_acceleration
    w.x, w.y, w.z = (float(c) for c in gyro)
    a.x, a.y, a.z = (float(c) for c in accel)
    return message


def gnss_messages(stamp: int, position_ecef, velocity_ecef, fix: bool
                  ) -> tuple[NavSatFix, TwistWithCovarianceStamped]:
    """The simulator's NavSatFix and ENU velocity; NO_FIX with NaN values and zero
    (unknown) covariances when ``fix`` is False."""
    navsat, twist = NavSatFix(), TwistWithCovarianceStamped()
    for message in (navsat, twist):
        message.header.stamp = time_message(stamp)
        message.header.frame_id = "gnss_link"
    navsat.status.service = NavSatStatus.SERVICE_GPS
    navsat.position_covariance_type = NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    linear = twist.twist.twist.linear
    if not fix:
        navsat.status.status = NavSatStatus.STATUS_NO_FIX
        navsat.latitude = navsat.longitude = navsat.altitude = math.nan
        linear.x = linear.y = linear.z = math.nan
        return navsat, twist
    navsat.status.status = NavSatStatus.STATUS_FIX  # the default is STATUS_UNKNOWN (< 0)
    navsat.latitude, navsat.longitude, navsat.altitude = ecef_to_geodetic(position_ecef)
    navsat.position_covariance = np.diag([SENSORS.gnss_position_sigma**2] * 3).reshape(9)
    linear.x, linear.y, linear.z = (TRAJECTORY.enu_to_ecef.T @ velocity_ecef).tolist()
    covariance = np.zeros((6, 6))
    covariance[:3, :3] = np.eye(3) * SENSORS.gnss_velocity_sigma**2
    twist.twist.covariance = covariance.reshape(36)
    return navsat, twist


def node_parameters() -> list[Parameter]:
    values = {
        "map_frame": FRAMES[0], "base_frame": FRAMES[1], "output_rate_hz": OUTPUT_RATE,
        "diagnostics_rate_hz": 20.0, "initial_yaw_deg": math.degrees(TRAJECTORY.yaw0_rad),
        "initial_yaw_sigma_deg": 5.0, "datum_latitude_deg": DATUM[0],
        "datum_longitude_deg": DATUM[1], "datum_height_m": DATUM[2],
    }
    return [Parameter(name, value=value) for name, value in values.items()]


@pytest.fixture(scope="module")
def flight(context) -> Iterator[Flight]:
    """Fly the simulated data through the node once; every test reads the outcome."""
    data = simulate(TRAJECTORY, SENSORS, DURATION, gnss_rate=10.0,
                    rng=np.random.default_rng(11))
    result = Flight(data)
    node = EstimatorNode(context=context, parameter_overrides=node_parameters())
    peer = Node("flight_peer", context=context)
    sensor = qos_profile_sensor_data
    imu_pub = peer.create_publisher(Imu, "imu/data", sensor)
    fix_pub = peer.create_publisher(NavSatFix, "gnss/fix", sensor)
    vel_pub = peer.create_publisher(TwistWithCovarianceStamped, "gnss/vel", sensor)
    keep_all = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    peer.create_subscription(Odometry, "trident_ekf/odometry", result.odometry.append,
                             keep_all)
    peer.create_subscription(TFMessage, "/tf", result.transforms.append, keep_all)
    peer.create_subscription(DiagnosticArray, "/diagnostics", result.diagnostics.append,
                             keep_all)
    with spinning(node, peer):
        for publisher in (imu_pub, fix_pub, vel_pub):
            wait_for(lambda p=publisher: p.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")
        received = node.session.received

        def send(publisher, message, kind: str) -> None:
            count = received[kind] + 1
            publisher.publish(message)
            result.published[kind] = result.published.get(kind, 0) + 1
            wait_for(lambda: received[kind] >= count, f"the node to take a {kind} message")

        gnss = list(range(data.gnss_time.size))
        for k in range(1, data.imu_time.size):
            t = data.imu_time[k]
            while gnss and data.gnss_time[gnss[0]] + LATENCY <= t + 1e-9:
                j = gnss.pop(0)
                valid = not NO_FIX[0] <= data.gnss_time[j] < NO_FIX[1]
                navsat, twist = gnss_messages(stamp_of(data.gnss_time[j]), data.gnss_position[j],
                                              data.gnss_velocity[j], valid)
                started = node.session.started
                send(fix_pub, navsat, "fix")
                send(vel_pub, twist, "velocity")
                result.valid_fixes_after_start += int(valid and started)
            if GAP[0] <= t < GAP[1]:
                continue
            gyro = (math.nan, 0.0, 0.0) if k == round(NAN_IMU_AT / 0.005) else data.gyro[k]
            if k == round(NAN_IMU_AT / 0.005):  # bytes that are no sensor_msgs/Imu
                imu_pub.publish(b"\x00\x01\x00\x00truncated")
                wait_for(lambda: node.session.rejected["imu_malformed"] == 1,
                         "the node to reject a malformed IMU message")
            send(imu_pub, imu_message(stamp_of(t), gyro, data.accel[k]), "imu")
            if k == round(BACKWARDS_AT / 0.005):
                send(imu_pub, imu_message(stamp_of(t) - 3 * IMU_PERIOD_NS, data.gyro[k],
                                          data.accel[k]), "imu")
        last = stamp_of(data.imu_time[-1])
        wait_for(lambda: result.odometry and _ns(result.odometry[-1]) == last - last % (
            round(1e9 / OUTPUT_RATE)), "the last odometry")
        total = result.published["imu"]
        wait_for(lambda: result.diagnostics and _values(result.diagnostics[-1]).get(
            "imu_messages") == str(total), "diagnostics covering every message")
        # Those of the flight: later ones read an IMU blackout (no IMU after it, imu_timeout).
        result.diagnostics = list(result.diagnostics)
        yield result


def _ns(message) -> int:
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


def _values(diagnostics: DiagnosticArray) -> dict[str, str]:
    (status,) = diagnostics.status
    return {item.key: item.value for item in status.values}


def _truth(flight: Flight, stamp: int):
    """ENU position and q body->ENU of the simulated truth at an IMU stamp."""
    k = (stamp - EPOCH_NS) // IMU_PERIOD_NS
    position, _, _ = TRAJECTORY.local(flight.data.imu_time[k:k + 1])
    (roll, pitch, yaw), _ = (a[0] for a in TRAJECTORY.euler(flight.data.imu_time[k:k + 1]))
    q = quaternion.multiply(quaternion.from_rotation_vector([0.0, 0.0, yaw]),
                            quaternion.multiply(quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                                                quaternion.from_rotation_vector([roll, 0, 0])))
    return position[0], q


def test_node_starts_after_levelling_and_tracks_the_truth_within_three_sigma(flight):
    first = _ns(flight.odometry[0]) - EPOCH_NS
    assert 1.0e9 <= first <= 1.5e9  # 1 s levelling, then the next fix
    ratios = []
    for message in flight.odometry:
        assert (message.header.frame_id, message.child_frame_id) == FRAMES
        position, q_true = _truth(flight, _ns(message))
        pose = message.pose.pose
        estimate = np.array([pose.position.x, pose.position.y, pose.position.z])
        q = [pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w]
        error = np.concatenate([position - estimate, quaternion.to_rotation_vector(
            quaternion.multiply(q_true, quaternion.conjugate(q)))])
        sigma = np.sqrt(np.diag(np.asarray(message.pose.covariance).reshape(6, 6)))
        ratios.append(np.abs(error) / sigma)
    inside = np.mean(np.array(ratios) < 3.0, axis=0)
    assert np.all(inside >= 0.95), inside
    final = ratios[-1]
    assert np.all(final < 3.0)
    covariance = np.asarray(flight.odometry[-1].twist.covariance).reshape(6, 6)
    assert np.all(np.diag(covariance) > 0.0)
    assert np.allclose(covariance, covariance.T)


def test_odometry_is_decimated_on_imu_stamps_at_the_output_period(flight):
    stamps = np.array([_ns(m) for m in flight.odometry])
    period = round(1e9 / OUTPUT_RATE)
    # Multiples of the period, except the first sample after a missing one (the gap and
    # the rejected NaN sample) when the sample at the period edge is missing.
    irregular = {stamp_of(GAP[1]), stamp_of(NAN_IMU_AT) + IMU_PERIOD_NS}
    assert set(stamps[stamps % period != 0].tolist()) == irregular
    assert np.all(np.diff(stamps) > 0)
    # One per period, except across the IMU gap (no sample there).
    span = (stamps[-1] - stamps[0]) // period + 1
    missing = span - stamps.size
    assert 0 <= missing <= round((GAP[1] - GAP[0]) * OUTPUT_RATE)


def test_tf_carries_the_odometry_pose_with_the_configured_frames(flight):
    transforms = [t for message in flight.transforms for t in message.transforms]
    assert len(transforms) == len(flight.odometry)
    for transform, odometry in zip(transforms[-50:], flight.odometry[-50:], strict=True):
        assert (transform.header.frame_id, transform.child_frame_id) == FRAMES
        assert _ns(transform) == _ns(odometry)
        assert transform.transform.translation.x == odometry.pose.pose.position.x
        assert transform.transform.rotation.w == odometry.pose.pose.orientation.w


def test_diagnostics_report_nis_biases_and_every_rejected_input(flight):
    status = flight.diagnostics[-1].status[0]
    values = _values(flight.diagnostics[-1])
    assert (status.name, status.level, status.message) == ("trident_ekf", b"\x00", "nominal")
    assert float(values["nis"]) >= 0.0
    assert (values["dof"], values["accepted"]) == ("3", "true")  # the GNSS position update
    for name in ("gyro_bias_z_rad_s", "accel_bias_sigma_x_m_s2", "yaw_sigma_deg"):
        assert math.isfinite(float(values[name]))
    no_fix = sum(NO_FIX[0] <= t < NO_FIX[1] for t in flight.data.gnss_time[:-1])
    assert no_fix >= 19
    expected = {"fix_no_fix": no_fix, "velocity_nonfinite": no_fix, "imu_nonfinite": 1,
                "imu_malformed": 1,
                "imu_out_of_order": 1, "imu_gap": 1,
                "imu_messages": flight.published["imu"], "fix_messages": flight.published["fix"]}
    assert {name: int(values[name]) for name in expected} == expected
    # NO_FIX epochs are never fused; every other fix after the start was, those stamped
    # inside the IMU gap too (the gap is bridged: they are applied at their stamps).
    assert int(values["gnss_position_accepted"]) == flight.valid_fixes_after_start
    assert values["gnss_position_gated"] == "0"
    assert values["gnss_position_late"] == "0"


def test_no_fix_outage_grows_the_position_sigma_then_gnss_recovers_it(flight):
    def position_sigma(at: float) -> float:
        stamp = stamp_of(at)
        message = next(m for m in flight.odometry if _ns(m) >= stamp)
        return float(np.sqrt(np.asarray(message.pose.covariance)[0]))

    before, during, after = (position_sigma(NO_FIX[0]), position_sigma(NO_FIX[1]),
                             position_sigma(NO_FIX[1] + 1.0))
    assert during > 1.5 * before
    assert after < during



STALL_SAMPLES = 80  # 0.4 s of a 200 Hz IMU
DELIVERY_S = 0.5  # s given to DDS to deliver what was sent before the node spins


@pytest.mark.parametrize(("depth", "taken"), [(5, 5), (100, STALL_SAMPLES)])
def test_a_stalled_node_keeps_the_newest_input_queue_depth_samples(context, depth, taken):
    """A best-effort IMU stream sent while the node's executor does not run (a busy
    companion computer): once it runs it takes the newest ``input_queue_depth`` samples,
    in order, and nothing more."""
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter("input_queue_depth", value=depth)])
    peer = Node("stall_peer", context=context)
    publisher = peer.create_publisher(Imu, "imu/data", qos_profile_sensor_data)
    wait_for(lambda: publisher.get_subscription_count() >= 1
             and node.count_publishers("/imu/data") >= 1, "discovery")
    for k in range(STALL_SAMPLES):
        message = Imu()
        message.header.stamp = time_message(EPOCH_NS + k * IMU_PERIOD_NS)
        message.linear_acceleration.z = 9.81
        publisher.publish(message)
    time.sleep(DELIVERY_S)
    session = node.session
    with spinning(node, peer):
        wait_for(lambda: session.received["imu"] >= taken, f"{taken} IMU samples")
        time.sleep(DELIVERY_S)
        assert session.received["imu"] == taken
    assert session.rejected["imu_out_of_order"] == 0
    assert session.input_clock.last_usable == pytest.approx(
        (EPOCH_NS + (STALL_SAMPLES - 1) * IMU_PERIOD_NS) * 1e-9)

def test_parameter_file_declares_every_key(context):
    parameters = flattened(yaml.safe_load(CONFIG.read_text())["trident_ekf"]["ros__parameters"])
    generated = {spec.name for spec in aiding_specs()}
    # Every hand-written parameter is in the file; of each generated group (the GNSS
    # receiver and every aiding source) at least the switch, and nothing unknown.
    assert set(parameters) <= {spec.name for spec in SPECS}
    assert {spec.name for spec in SPECS} - generated <= set(parameters)
    assert {name for name in generated if name.endswith(".enabled")} <= set(parameters)
    node = EstimatorNode(context=context,
                         cli_args=["--ros-args", "--params-file", str(CONFIG)])
    try:
        for name, value in parameters.items():
            assert node.get_parameter(name).value == pytest.approx(value, nan_ok=True), name
    finally:
        node.destroy_node()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("gyro_noise", -1.0, "parameter 'gyro_noise' = -1.0 is invalid: must be a number in "
                         "\\[1e-12, 1.0\\] \\(rad/s/sqrt\\(Hz\\)\\)"),
    ("filter", "kalman", "parameter 'filter' = 'kalman'.*one of \\['baseline', 'trident'\\]"),
    ("output_rate_hz", "fast", "parameter 'output_rate_hz' = 'fast' is invalid"),
    ("covariance_decimation", 2.0, "parameter 'covariance_decimation' = 2.0.*an integer in"),
    ("datum_latitude_deg", 47.0, "parameter 'datum_longitude_deg' = nan.*all three set"),
    ("imu_rotation_xyzw", [0.0, 0.0, 0.5, 0.5], "'imu_rotation_xyzw'.*unit quaternion"),
    ("magnetometer.mode", "sideways", "'magnetometer.mode' = 'sideways'.*one of"),
    ("barometer.noise_sigma_m", 0.0, "'barometer.noise_sigma_m' = 0.0.*\\[0.001, 100.0\\] \\(m\\)"),
    ("lever_arm", [0.1, 0.2], "'lever_arm' = \\[0.1, 0.2\\].*a list of 3 finite numbers"),
])
def test_bad_parameters_stop_the_node_with_a_clear_message(context, name, value, message):
    with pytest.raises(ParameterError, match=message):
        EstimatorNode(context=context, parameter_overrides=[Parameter(name, value=value)])


def test_main_reports_a_bad_parameter_and_exits_with_2(context, capsys):
    arguments = ["estimator_node", "--ros-args", "-p", "filter:=kalman"]
    assert main(arguments) == 2
    assert ("trident_ekf: parameter 'filter' = 'kalman' is invalid"
            in capsys.readouterr().err)


def test_integers_are_accepted_for_numbers(context):
    node = EstimatorNode(context=context, parameter_overrides=[
        Parameter("output_rate_hz", value=50), Parameter("lever_arm", value=[0, 0, 1])])
    try:
        assert node.parameters["output_rate_hz"] == 50.0
        assert node.session.filter.config.lever_arm == (0.0, 0.0, 1.0)
    finally:
        node.destroy_node()
