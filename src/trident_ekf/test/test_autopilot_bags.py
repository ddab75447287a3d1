"""The same real flight through the three input profiles gives the same estimate.

A 20 s slice of the ArduCopter log (data/ardupilot/log171.bin, with barometer and
magnetometer) is written three times: as the standard topics trident-import writes
(/imu/data, /gnss/fix, /gnss/vel, /barometer/pressure, /magnetic_field), as the PX4
uXRCE-DDS topics (/fmu/out/..., px4_msgs types registered in rosbags from
tools/px4_msgs/msg, NED/FRD, microseconds, gauss) and as the MAVROS topics (/mavros/...).
The slice is first put in the form an autopilot's messages carry (stamps in whole
microseconds, float32 sensor values and accuracies, float32 gauss, one speed accuracy)
so that every bag holds the same numbers: any difference in the estimates is a
conversion error. Each bag is played into the estimator node over real DDS (isolated
domain, private context), message by message like ``ros2 bag play`` (raw CDR), with the
parameters and remappings estimator.launch.py gives for ``inputs:=ros|px4|mavros``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosbags.interfaces import Nodetype
from rosbags.typesys import get_types_from_msg

from mav_ros_common.parameters import ParameterError
from mav_ros_common.testing import module_from_file
from mav_ros_common.testing import wait_for as _wait_for
from trident_ekf.adapters import InputOptions, build_profile, deliver, mavros, px4
from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.measurements.barometer import BarometerConfig
from trident_ekf.core.measurements.gnss import GnssConfig
from trident_ekf.core.measurements.magnetometer import MagnetometerConfig
from trident_ekf.core.session import EstimationSession
from trident_ekf.tools import bagio, frames
from trident_ekf.tools.flightlog import GAUSS, FlightLog, read_log, write_bag

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "data" / "ardupilot" / "log171.bin"
PX4_MSG_DIR = ROOT / "tools" / "px4_msgs" / "msg"
LAUNCH_TEST = ROOT / "test" / "test_launch_files.py"
START, DURATION = 44.0, 20.0  # s of the log clock: standing, take-off, flight
SPEED_SIGMA = 0.25  # m/s: the receiver's speed accuracy in every bag (exact in float32)
TUNING = {  # this log's tuning (src/trident_ekf/test/conftest.py)
    "gyro_noise": 5e-3, "accel_noise": 0.22, "gyro_bias_walk": 1e-4, "accel_bias_walk": 1e-3,
    "covariance_decimation": 2, "output_rate_hz": 10.0,
    "diagnostics_rate_hz": 0.01,  # no status during a run: it flushes the filter (timing)
    "gnss.delay_s": 0.2, "gnss.accuracy_scale": 0.25, "gnss.speed_accuracy_scale": 0.3,
    "gnss.horizontal_floor_m": 0.05, "gnss.vertical_floor_m": 0.1,
    "gnss.speed_floor_mps": 0.03, "barometer.enabled": True, "barometer.noise_sigma_m": 0.25,
    "magnetometer.enabled": True, "magnetometer.heading_sigma_deg": 4.5,
    "magnetometer.model_year": 2015.9,
}
WAIT = 10.0  # s: bound of every wait


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    _wait_for(condition, what, timeout, poll=2e-5)  # messages one by one: poll fast
_NUMPY = {"float32": np.float32, "float64": np.float64, "uint8": np.uint8, "int32": np.int32,
          "uint32": np.uint32, "uint64": np.uint64, "int64": np.int64, "uint16": np.uint16}


# ----- bags ---------------------------------------------------------------------------------
def px4_definitions() -> dict[str, str]:
    """The .msg text of the PX4 types: tools/px4_msgs (the venv's copy), else the installed
    px4_msgs; empty when neither is there."""
    directory = PX4_MSG_DIR
    if not directory.is_dir():
        try:
            from ament_index_python.packages import get_package_share_directory
            directory = Path(get_package_share_directory(px4.PACKAGE)) / "msg"
        except (ImportError, LookupError):
            return {}
    return {msgtype: (directory / f"{msgtype.rsplit('/', 1)[1]}.msg").read_text()
            for msgtype in px4.MESSAGE_TYPES
            if (directory / f"{msgtype.rsplit('/', 1)[1]}.msg").is_file()}


def register_px4_types() -> None:
    """Teach rosbags (bagio.TYPESTORE) the PX4 types; skip the test without them."""
    definitions = px4_definitions()
    if set(definitions) != set(px4.MESSAGE_TYPES):
        pytest.skip("no px4_msgs definitions (tools/px4_msgs/msg or an installed px4_msgs)")
    types = {}
    for msgtype, text in definitions.items():
        if msgtype not in bagio.TYPESTORE.fielddefs:
            types.update(get_types_from_msg(text, msgtype))
    bagio.TYPESTORE.register(types)


def message(msgtype: str, **values: Any) -> Any:
    """A rosbags message of a flat type (PX4's), every field not given zero."""
    defaults: dict[str, Any] = {}
    for name, (node, detail) in bagio.TYPESTORE.fielddefs[msgtype][1]:
        if node == Nodetype.BASE:
            defaults[name] = False if detail[0] == "bool" else 0
        elif node == Nodetype.ARRAY:
            (_, (element, _)), length = detail
            defaults[name] = np.zeros(length, dtype=_NUMPY[element])
        else:
            raise ValueError(f"{msgtype}.{name}: not a flat field")
    return bagio.TYPESTORE.types[msgtype](**(defaults | values))


def autopilot_view(log: FlightLog) -> FlightLog:
    """The slice [START, START + DURATION) s as an autopilot's messages carry it: stamps in
    whole microseconds, IMU, pressure, GNSS velocity and accuracies in float32, the field
    in float32 gauss (FRD), the speed accuracy ``SPEED_SIGMA``."""
    def window(time: np.ndarray) -> np.ndarray:
        return (time >= START) & (time < START + DURATION)

    def us(time: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.round(time * 1e6) / 1e6
        return result

    def f32(values: np.ndarray) -> np.ndarray:
        return values.astype(np.float32).astype(float)

    i, g, b, m, r = (window(t) for t in (log.imu_time, log.gnss_time, log.baro_time,
                                           log.mag_time, log.reference_time))
    sigma = f32(log.gnss_sigma[g])
    sigma[:, 2] = SPEED_SIGMA
    gauss_frd = f32(frames.frd_to_flu(log.mag_field[m]) / GAUSS)
    return replace(
        log, imu_time=us(log.imu_time[i]), gyro=f32(log.gyro[i]), accel=f32(log.accel[i]),
        gnss_time=us(log.gnss_time[g]), gnss_geodetic=log.gnss_geodetic[g],
        gnss_velocity_enu=f32(log.gnss_velocity_enu[g]), gnss_sigma=sigma,
        reference_time=log.reference_time[r],
        reference_position_enu=log.reference_position_enu[r],
        reference_velocity_enu=log.reference_velocity_enu[r],
        reference_attitude=log.reference_attitude[r], baro_time=us(log.baro_time[b]),
        baro_pressure=f32(log.baro_pressure[b]), baro_temperature=log.baro_temperature[b],
        mag_time=us(log.mag_time[m]), mag_field=frames.frd_to_flu(gauss_frd) * GAUSS)


@dataclass(frozen=True)
class Stream:
    topic: str
    msgtype: str
    time: np.ndarray  # s
    message: Callable[[int, int], Any]  # (row, stamp ns) -> message


def write_streams(streams: list[Stream], path: Path) -> None:
    """A bag of the streams by time, then stream order (as trident-import writes)."""
    times = np.concatenate([s.time for s in streams])
    kinds = np.concatenate([np.full(s.time.size, k) for k, s in enumerate(streams)])
    rows = np.concatenate([np.arange(s.time.size) for s in streams])
    with bagio.BagWriter(path) as writer:
        for event in np.lexsort((rows, kinds, times)):
            stream = streams[kinds[event]]
            stamp = round(times[event] * 1e9)
            writer.write(stream.topic, stream.msgtype, stamp,
                         stream.message(int(rows[event]), stamp))


def write_px4_bag(log: FlightLog, path: Path, namespace: str = "/fmu") -> None:
    """PX4 uXRCE-DDS topics of ``log`` (an ``autopilot_view``)."""
    register_px4_types()
    f32 = np.float32

    def us(stamp: int) -> int:
        return stamp // 1000

    def imu(i: int, stamp: int) -> Any:
        return message(px4.SENSOR_COMBINED, timestamp=us(stamp), gyro_integral_dt=20000,
                       accelerometer_integral_dt=20000,
                       gyro_rad=frames.frd_to_flu(log.gyro[i]).astype(f32),
                       accelerometer_m_s2=frames.frd_to_flu(log.accel[i]).astype(f32))

    def gps(i: int, stamp: int) -> Any:
        latitude, longitude, height = log.gnss_geodetic[i]
        east, north, up = log.gnss_velocity_enu[i]
        horizontal, vertical, speed = log.gnss_sigma[i]
        return message(px4.SENSOR_GPS, timestamp=us(stamp), timestamp_sample=us(stamp),
                       latitude_deg=latitude, longitude_deg=longitude,
                       altitude_msl_m=height - 20.0, altitude_ellipsoid_m=height,
                       s_variance_m_s=speed, fix_type=3, eph=horizontal, epv=vertical,
                       vel_n_m_s=north, vel_e_m_s=east, vel_d_m_s=-up, vel_ned_valid=True,
                       vel_m_s=float(np.hypot(north, east)), satellites_used=12)

    def air(i: int, stamp: int) -> Any:
        return message(px4.VEHICLE_AIR_DATA, timestamp=us(stamp) + 300,
                       timestamp_sample=us(stamp), baro_pressure_pa=log.baro_pressure[i])

    def mag(i: int, stamp: int) -> Any:
        gauss = frames.frd_to_flu(log.mag_field[i] / GAUSS).astype(f32)
        return message(px4.VEHICLE_MAGNETOMETER, timestamp=us(stamp) + 300,
                       timestamp_sample=us(stamp), magnetometer_ga=gauss)

    write_streams([
        Stream(f"{namespace}/{px4.GNSS_TOPIC}", px4.SENSOR_GPS, log.gnss_time, gps),
        Stream(f"{namespace}/{px4.IMU_TOPIC}", px4.SENSOR_COMBINED, log.imu_time, imu),
        Stream(f"{namespace}/{px4.BAROMETER_TOPIC}", px4.VEHICLE_AIR_DATA, log.baro_time, air),
        Stream(f"{namespace}/{px4.MAGNETOMETER_TOPIC}", px4.VEHICLE_MAGNETOMETER, log.mag_time,
               mag),
    ], path)


def write_mavros_bag(log: FlightLog, path: Path, namespace: str = "/mavros") -> None:
    """MAVROS topics of ``log``: the fix, the velocity as a TwistStamped (no accuracy)."""
    types = bagio.TYPESTORE.types

    def fix(i: int, stamp: int) -> Any:
        horizontal, vertical, _ = log.gnss_sigma[i]
        return bagio.navsatfix_message(stamp, *log.gnss_geodetic[i],
                                       np.diag([horizontal**2, horizontal**2, vertical**2]))

    def vector(values: np.ndarray) -> Any:
        x, y, z = (float(c) for c in values)
        return types["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)

    def velocity(i: int, stamp: int) -> Any:
        header = types["std_msgs/msg/Header"](
            stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9,
                                                       nanosec=stamp % 10**9),
            frame_id="base_link")
        return types["geometry_msgs/msg/TwistStamped"](
            header=header, twist=types["geometry_msgs/msg/Twist"](
                linear=vector(log.gnss_velocity_enu[i]), angular=vector(np.zeros(3))))

    write_streams([
        Stream(f"{namespace}/{mavros.FIX_TOPIC}", bagio.NAVSATFIX, log.gnss_time, fix),
        Stream(f"{namespace}/{mavros.VELOCITY_TOPIC}", "geometry_msgs/msg/TwistStamped",
               log.gnss_time, velocity),
        Stream(f"{namespace}/{mavros.IMU_TOPIC}", bagio.IMU, log.imu_time,
               lambda i, stamp: bagio.imu_message(stamp, log.gyro[i], log.accel[i])),
        Stream(f"{namespace}/{mavros.BAROMETER_TOPIC}", bagio.FLUID_PRESSURE, log.baro_time,
               lambda i, stamp: bagio.fluid_pressure_message(stamp, log.baro_pressure[i])),
        Stream(f"{namespace}/{mavros.MAGNETOMETER_TOPIC}", bagio.MAGNETIC_FIELD, log.mag_time,
               lambda i, stamp: bagio.magnetic_field_message(stamp, log.mag_field[i])),
    ], path)


@pytest.fixture(scope="module")
def view() -> FlightLog:
    return autopilot_view(read_log(LOG))


@pytest.fixture(scope="module")
def bags(view: FlightLog, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The slice as standard (``ros``), MAVROS and PX4 bags."""
    directory = tmp_path_factory.mktemp("autopilot_bags")
    paths = {name: directory / name for name in ("ros", "mavros", "px4")}
    write_bag(view, paths["ros"])
    write_mavros_bag(view, paths["mavros"])
    write_px4_bag(view, paths["px4"])
    return paths


def test_the_bags_hold_the_same_messages(view: FlightLog, bags: dict[str, Path]) -> None:
    counts = {name: bagio.topic_counts(path) for name, path in bags.items()}
    imu, gnss, baro, mag = (view.imu_time.size, view.gnss_time.size, view.baro_time.size,
                            view.mag_time.size)
    assert min(imu / 900, gnss / 90, baro / 180, mag / 180) > 1.0
    assert {k: v for k, v in counts["ros"].items() if k in (
        "/imu/data", "/gnss/fix", "/gnss/vel", "/barometer/pressure", "/magnetic_field")} == {
        "/imu/data": imu, "/gnss/fix": gnss, "/gnss/vel": gnss, "/barometer/pressure": baro,
        "/magnetic_field": mag}
    assert counts["px4"] == {"/fmu/out/sensor_combined": imu,
                             "/fmu/out/vehicle_gps_position": gnss,
                             "/fmu/out/vehicle_air_data": baro,
                             "/fmu/out/vehicle_magnetometer": mag}
    assert counts["mavros"] == {"/mavros/imu/data_raw": imu,
                                "/mavros/global_position/raw/fix": gnss,
                                "/mavros/global_position/raw/gps_vel": gnss,
                                "/mavros/imu/static_pressure": baro, "/mavros/imu/mag": mag}
    # The PX4 bag in PX4 units and axes.
    first = {topic: message for topic, _, message in bagio.read_messages(
        bags["px4"], ["/fmu/out/sensor_combined", "/fmu/out/vehicle_magnetometer"])}
    imu_message = first["/fmu/out/sensor_combined"]
    assert imu_message.timestamp * 1000 == round(view.imu_time[-1] * 1e9)
    assert imu_message.gyro_rad[1] == np.float32(-view.gyro[-1, 1])
    assert first["/fmu/out/vehicle_magnetometer"].magnetometer_ga[2] == np.float32(
        -view.mag_field[-1, 2] / GAUSS)


def replay_through_adapters(bag: Path, options: InputOptions) -> EstimationSession:
    """The bag's messages as trident-replay reads them (rosbags objects; raw CDR for the IMU
    fast path) through the profile's converters into a session."""
    config = FilterConfig(gyro_noise=5e-3, accel_noise=0.22, gyro_bias_walk=1e-4,
                          accel_bias_walk=1e-3, covariance_decimation=2)
    sources = build_sources({
        "barometer": BarometerConfig(noise_sigma_m=0.25),
        "magnetometer": MagnetometerConfig(heading_sigma_deg=4.5, model_year=2015.9)})
    receiver = GnssConfig(delay_s=0.2, accuracy_scale=0.25, speed_accuracy_scale=0.3,
                          horizontal_floor_m=0.05, vertical_floor_m=0.1, speed_floor_mps=0.03)
    session = EstimationSession(TridentEKF(config, sources), Initializer(),
                                gnss_receiver=receiver)
    inputs = build_profile(options).topics()
    for topic, msgtype, _, raw in bagio.read_raw(bag, list(inputs)):
        item = inputs[topic]
        message = raw if item.raw else bagio.TYPESTORE.deserialize_cdr(raw, msgtype)
        for sample in item.convert(message):
            deliver(session, sample)
    return session


def test_bag_messages_through_the_adapters_give_the_same_session(bags: dict[str, Path]) -> None:
    sessions = {name: replay_through_adapters(bags[name], options) for name, options in (
        ("ros", InputOptions()), ("px4", InputOptions("px4")),
        ("mavros", InputOptions("mavros", velocity_sigma_mps=SPEED_SIGMA)))}
    standard = sessions.pop("ros")
    assert standard.started
    reference = standard.estimate()
    for name, session in sessions.items():
        assert session.received == standard.received, name
        assert session.counts() == standard.counts(), name
        estimate = session.estimate()
        for key in ("position", "velocity", "attitude", "pose_cov"):
            np.testing.assert_allclose(estimate[key], reference[key], rtol=0.0, atol=1e-9,
                                       err_msg=f"{name} {key}")


# ----- over DDS -----------------------------------------------------------------------------
def launch_reader() -> Any:
    """test/test_launch_files.py, which reads launch files as ``ros2 launch`` would."""
    return module_from_file(LAUNCH_TEST, "launch_file_checks")


@pytest.fixture(scope="module")
def launched() -> Callable[[str], Any]:
    """The trident_ekf node as estimator.launch.py starts it for ``inputs:=<profile>``."""
    checks = launch_reader()

    def node(profile: str) -> Any:
        return checks.reader("estimator.launch.py").launch({"inputs": profile}).node(
            "trident_ekf")

    return node


def node_class() -> Any:
    from trident_ekf.ros.estimator_node import EstimatorNode
    return EstimatorNode


def message_class(msgtype: str) -> Any:
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


@dataclass
class Run:
    odometry: list[Odometry] = field(default_factory=list)
    published: list[int] = field(default_factory=list)  # odometry stamps the node sent
    received: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    estimate: dict[str, np.ndarray] = field(default_factory=dict)
    messages: int = 0


def play(context: Context, launch: Any, bag: Path, **parameters: Any) -> Run:
    """Start the node with the launch file's overrides and remappings plus ``parameters``,
    play the bag into it one message at a time and collect what comes out."""
    overrides = {name: value for name, value in launch.overrides.items()
                 if name not in ("map_frame", "base_frame")} | TUNING | parameters
    remappings = [arg for source, target in launch.remappings
                  for arg in ("-r", f"{source}:={target}")]
    node = node_class()(context=context, cli_args=["--ros-args", *remappings],
                        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
    run = Run()
    publish_estimate = node._publish_estimate

    def counted(stamp: int) -> None:
        run.published.append(stamp)
        publish_estimate(stamp)

    node._publish_estimate = counted
    peer = Node("bag_player", context=context)
    executor = SingleThreadedExecutor(context=context)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    try:
        inputs = {s.topic_name for s in node.subscriptions}
        types = {topic: value for topic, value in bagio.topic_types(bag).items()
                 if topic in inputs}  # the bag's other topics are no input
        publishers = {topic: peer.create_publisher(message_class(msgtype), topic,
                                                   qos_profile_sensor_data)
                      for topic, (msgtype, _) in types.items()}
        peer.create_subscription(Odometry, "trident_ekf/odometry", run.odometry.append,
                                 QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE))
        executor.add_node(node)
        executor.add_node(peer)
        spinner.start()
        for publisher in publishers.values():
            wait_for(lambda p=publisher: p.get_subscription_count() >= 1, "discovery")
        wait_for(lambda: node.count_subscribers("trident_ekf/odometry") >= 1, "discovery")
        received = node.session.received
        for topic, _, _, raw in bagio.read_raw(bag, list(types)):
            before = sum(received.values())
            publishers[topic].publish(raw)
            run.messages += 1
            wait_for(lambda before=before: sum(received.values()) > before,
                     f"the node to take a message on {topic}")
        # A task of the single-threaded executor runs after the callback in progress.
        idle = executor.create_task(lambda: None)
        wait_for(idle.done, "the node to finish the last message")
        wait_for(lambda: len(run.odometry) == len(run.published), "the last odometry")
    finally:
        executor.shutdown()
        spinner.join(timeout=WAIT)
        peer.destroy_node()
    run.received = dict(node.session.received)
    run.counts = node.session.counts()
    run.estimate = node.session.estimate()
    node.destroy_node()
    return run


@pytest.fixture(scope="module")
def runs(context: Context, bags: dict[str, Path], launched: Callable[[str], Any]
         ) -> dict[str, Run]:
    """The node on each bag, as estimator.launch.py configures it for that bag."""
    results = {"ros": play(context, launched("ros"), bags["ros"])}
    results["mavros"] = play(context, launched("mavros"), bags["mavros"],
                             gnss_velocity_sigma_mps=SPEED_SIGMA)
    try:
        importlib.import_module("px4_msgs.msg")
    except ImportError:
        return results
    results["px4"] = play(context, launched("px4"), bags["px4"])
    return results


def _pose(message: Odometry) -> np.ndarray:
    pose = message.pose.pose
    return np.array([pose.position.x, pose.position.y, pose.position.z, pose.orientation.x,
                     pose.orientation.y, pose.orientation.z, pose.orientation.w])


def _ns(message: Odometry) -> int:
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


def test_the_standard_run_fuses_every_source(runs: dict[str, Run], view: FlightLog) -> None:
    standard = runs["ros"]
    assert standard.received == {"imu": view.imu_time.size, "fix": view.gnss_time.size,
                                 "velocity": view.gnss_time.size,
                                 "barometer": view.baro_time.size,
                                 "magnetometer": view.mag_time.size}
    assert len(standard.odometry) > 150  # 10 Hz once started
    for source in ("gnss_position", "gnss_velocity", "barometer", "magnetometer"):
        assert standard.counts[f"{source}_accepted"] > 0.8 * view.gnss_time.size, source


@pytest.mark.parametrize("profile", ["mavros", "px4"])
def test_an_autopilot_profile_gives_the_standard_estimate(runs: dict[str, Run],
                                                          profile: str) -> None:
    if profile not in runs:
        pytest.skip("px4_msgs is not installed")
    standard, run = runs["ros"], runs[profile]
    assert run.received == standard.received
    assert run.counts == standard.counts
    assert [_ns(m) for m in run.odometry] == [_ns(m) for m in standard.odometry]
    poses = np.array([_pose(m) for m in run.odometry])
    reference = np.array([_pose(m) for m in standard.odometry])
    np.testing.assert_allclose(poses, reference, rtol=0.0, atol=1e-9)
    covariance = np.array([m.pose.covariance for m in run.odometry])
    np.testing.assert_allclose(covariance, [m.pose.covariance for m in standard.odometry],
                               rtol=1e-9, atol=1e-15)
    for name in ("position", "velocity", "attitude", "gyro_bias", "accel_bias"):
        np.testing.assert_allclose(run.estimate[name], standard.estimate[name], rtol=0.0,
                                   atol=1e-9, err_msg=name)


# ----- subscriptions as launched ------------------------------------------------------------
def _subscriptions(node: Any) -> dict[str, tuple[str, Any]]:
    return {s.topic_name: (f"{s.msg_type.__module__.split('.')[0]}/msg/{s.msg_type.__name__}",
                           s.qos_profile) for s in node.subscriptions}


def test_mavros_profile_subscribes_the_mavros_topics(context: Context,
                                                     launched: Callable[[str], Any]) -> None:
    launch = launched("mavros")
    assert launch.overrides["inputs"] == "mavros"
    node = node_class()(context=context, parameter_overrides=[
        Parameter("inputs", value="mavros"), Parameter("mavros_namespace", value="/uav2/mavros"),
        Parameter("barometer.enabled", value=True)])
    try:
        subscriptions = _subscriptions(node)
    finally:
        node.destroy_node()
    assert {topic: kind for topic, (kind, _) in subscriptions.items() if "mavros" in topic} == {
        "/uav2/mavros/imu/data_raw": "sensor_msgs/msg/Imu",
        "/uav2/mavros/global_position/raw/fix": "sensor_msgs/msg/NavSatFix",
        "/uav2/mavros/global_position/raw/gps_vel": "geometry_msgs/msg/TwistStamped",
        "/uav2/mavros/imu/static_pressure": "sensor_msgs/msg/FluidPressure"}
    assert "/imu/data" not in subscriptions  # the magnetometer is not enabled
    assert "/uav2/mavros/imu/mag" not in subscriptions


def test_ros_profile_takes_a_twist_stamped_velocity(context: Context) -> None:
    node = node_class()(context=context, parameter_overrides=[
        Parameter("gnss_velocity_type", value="TwistStamped"),
        Parameter("gnss_velocity_sigma_mps", value=0.4)])
    try:
        subscriptions = _subscriptions(node)
    finally:
        node.destroy_node()
    assert subscriptions["/gnss/vel"][0] == "geometry_msgs/msg/TwistStamped"
    assert subscriptions["/imu/data"][0] == "sensor_msgs/msg/Imu"


def test_px4_profile_without_px4_msgs_says_what_is_missing(
        context: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "px4_msgs", None)  # import px4_msgs fails
    monkeypatch.setitem(sys.modules, "px4_msgs.msg", None)
    with pytest.raises(ParameterError, match=r"'inputs' = 'px4' needs the px4_msgs interface "
                                             r"package \(px4_msgs/msg/SensorCombined for "
                                             r"/fmu/out/sensor_combined\)"):
        node_class()(context=context, parameter_overrides=[Parameter("inputs", value="px4")])


def test_px4_profile_subscribes_best_effort(context: Context,
                                            launched: Callable[[str], Any]) -> None:
    launch = launched("px4")
    assert (launch.overrides["inputs"], launch.overrides["px4_namespace"]) == ("px4", "/fmu")
    pytest.importorskip("px4_msgs.msg", reason="the px4 profile needs px4_msgs")
    node = node_class()(context=context, parameter_overrides=[
        Parameter("inputs", value="px4"), Parameter("magnetometer.enabled", value=True)])
    try:
        subscriptions = _subscriptions(node)
    finally:
        node.destroy_node()
    fmu = {topic: value for topic, value in subscriptions.items() if topic.startswith("/fmu")}
    assert {topic: kind for topic, (kind, _) in fmu.items()} == {
        "/fmu/out/sensor_combined": "px4_msgs/msg/SensorCombined",
        "/fmu/out/vehicle_gps_position": "px4_msgs/msg/SensorGps",
        "/fmu/out/vehicle_magnetometer": "px4_msgs/msg/VehicleMagnetometer"}
    for _, qos in fmu.values():
        assert qos.reliability == ReliabilityPolicy.BEST_EFFORT
        assert qos.durability.name == "VOLATILE"
        assert qos.history.name == "KEEP_LAST"
