"""Fuzz (Hypothesis) of the estimator's input path: every message an input profile
subscribes (ROS drivers, MAVROS, PX4 uXRCE-DDS), built as a real rclpy message with
arbitrary field values, goes through its converter and ``deliver`` into a running session,
as the node's ``_on_input`` does.

Property, per message: the converter returns samples or raises one of ``MALFORMED`` (the
node counts ``<kind>_malformed``); each sample the session does not use raises one of its
named counters; nothing raises; and after clean IMU samples the estimate is finite (no NaN
or infinity passed on). Values: NaN, infinities, huge and negative numbers, extreme stamps
(0, negative, the largest), out-of-range status and covariance types; rosbags-style
messages (plain objects) add wrong-length covariances and missing fields; the raw IMU path
gets its serialized bytes cut and mangled.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from geometry_msgs.msg import PoseWithCovarianceStamped, TwistStamped, TwistWithCovarianceStamped
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rclpy.serialization import serialize_message
from sensor_msgs.msg import FluidPressure, Imu, MagneticField, NavSatFix

from trident_ekf.adapters import MALFORMED, InputOptions, build_profile, deliver
from trident_ekf.adapters.base import Sample
from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.session import EstimationSession
from trident_ekf.tools.cdr import ImuSample

DATUM = (47.3977, 8.5456, 488.0)
START_NS = 1_000 * 10**9
GRAVITY = (0.0, 0.0, 9.80665)
IMU_PERIOD_NS = 10**7
PROFILES = {name: build_profile(InputOptions(name)).topics()
            for name in ("ros", "mavros", "px4")}


def running_session() -> EstimationSession:
    """A session with every aiding source, started at the datum by ``set_pose`` and fed
    one second of IMU at rest."""
    filter_ = TridentEKF(FilterConfig(), build_sources(
        {"barometer": None, "magnetometer": None, "external_pose": None}))
    session = EstimationSession(filter_, Initializer(), datum=DATUM)
    session.set_pose(START_NS, np.zeros(3), [0.0, 0.0, 0.0, 1.0], np.eye(6) * 0.01)
    for k in range(1, 101):
        assert deliver(session, ImuSample(START_NS + k * IMU_PERIOD_NS, (0.0, 0.0, 0.0),
                                          GRAVITY))
    return session


TEMPLATE = running_session()


def rejections(session: EstimationSession) -> int:
    return sum(session.counts().values()) - session.filter.imu_counts["accepted"] - sum(
        status.counts.get("accepted", 0) for status in session.filter.aid_status.values())


def check_input(convert: Callable[[Any], tuple[Sample, ...]], message: Any) -> None:
    """The property for one message, on a copy of the running session."""
    session = copy.deepcopy(TEMPLATE)
    try:
        samples = convert(message)
    except MALFORMED:
        return
    with warnings.catch_warnings():
        # numpy's overflow warnings in the cores' arithmetic on absurd values (1e308 m^2)
        # are reported separately; here the question is what the session does with them.
        warnings.simplefilter("ignore", RuntimeWarning)
        for sample in samples:
            before = rejections(session)
            if not deliver(session, sample):
                assert rejections(session) > before, f"{sample} refused without a counter"
        time_ns = round(session.filter.time * 1e9)
        for k in range(1, 21):  # applies what was queued, sends a lone fix on its own
            deliver(session, ImuSample(time_ns + k * IMU_PERIOD_NS, (0.0, 0.0, 0.0), GRAVITY))
    for name, value in session.estimate().items():
        assert np.all(np.isfinite(value)), f"{name} = {value} after {samples}"


# ----- field values -------------------------------------------------------------------------
AWKWARD = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-30]
FLOAT64 = st.one_of(st.sampled_from(AWKWARD), st.floats(), st.floats(-1e3, 1e3))
FLOAT32 = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 3e38, -3e38]),
                    st.floats(width=32), st.floats(-1e3, 1e3, width=32))
INT32 = st.integers(-2**31, 2**31 - 1)
UINT32 = st.integers(0, 2**32 - 1)
UINT64 = st.one_of(st.sampled_from([0, 1, 2**64 - 1]), st.integers(0, 2**64 - 1))
STAMPS = st.one_of(st.sampled_from([(0, 0), (-1, 999_999_999), (2**31 - 1, 2**32 - 1)]),
                   st.tuples(INT32, UINT32),
                   # near the filter's time: in order, duplicate, backwards
                   st.integers(-200, 200).map(lambda k: divmod(
                       START_NS + 100 * IMU_PERIOD_NS + k * IMU_PERIOD_NS, 10**9)))
FIX_STATUS = st.integers(-128, 127)


def floats64(size: int) -> st.SearchStrategy[list[float]]:
    """A row-major n x n covariance (n^2 = size): any values, all zeros, or v on the
    diagonal."""
    stride = math.isqrt(size) + 1
    return st.one_of(st.lists(FLOAT64, min_size=size, max_size=size),
                     st.just([0.0] * size), FLOAT64.map(lambda v: [
                         v if index % stride == 0 else 0.0 for index in range(size)]))


def stamped(message: Any, stamp: tuple[int, int]) -> Any:
    message.header.stamp.sec, message.header.stamp.nanosec = stamp
    return message


def xyz(target: Any, values: list[float]) -> None:
    target.x, target.y, target.z = values


# ----- ROS drivers and MAVROS: real rclpy messages --------------------------------------------
@st.composite
def navsatfixes(draw: st.DrawFn) -> NavSatFix:
    message = stamped(NavSatFix(), draw(STAMPS))
    message.status.status = draw(FIX_STATUS)
    message.latitude, message.longitude, message.altitude = (
        draw(st.one_of(FLOAT64, st.just(DATUM[i]))) for i in range(3))
    message.position_covariance = draw(floats64(9))
    message.position_covariance_type = draw(st.integers(0, 255))
    return message


@st.composite
def twists_with_covariance(draw: st.DrawFn) -> TwistWithCovarianceStamped:
    message = stamped(TwistWithCovarianceStamped(), draw(STAMPS))
    xyz(message.twist.twist.linear, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    message.twist.covariance = draw(floats64(36))
    return message


@st.composite
def twists(draw: st.DrawFn) -> TwistStamped:
    message = stamped(TwistStamped(), draw(STAMPS))
    xyz(message.twist.linear, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    return message


@st.composite
def pressures(draw: st.DrawFn) -> FluidPressure:
    message = stamped(FluidPressure(), draw(STAMPS))
    message.fluid_pressure = draw(st.one_of(FLOAT64, st.floats(90_000.0, 100_000.0)))
    message.variance = draw(FLOAT64)
    return message


@st.composite
def magnetic_fields(draw: st.DrawFn) -> MagneticField:
    message = stamped(MagneticField(), draw(STAMPS))
    xyz(message.magnetic_field, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    message.magnetic_field_covariance = draw(floats64(9))
    return message


@st.composite
def poses(draw: st.DrawFn) -> PoseWithCovarianceStamped:
    message = stamped(PoseWithCovarianceStamped(), draw(STAMPS))
    pose = message.pose.pose
    xyz(pose.position, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    q = pose.orientation
    q.x, q.y, q.z, q.w = draw(st.lists(FLOAT64, min_size=4, max_size=4))
    message.pose.covariance = draw(floats64(36))
    return message


@st.composite
def imu_bytes(draw: st.DrawFn) -> bytes:
    """A serialized Imu, then maybe cut short or with bytes overwritten."""
    message = stamped(Imu(), draw(STAMPS))
    xyz(message.angular_velocity, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    xyz(message.linear_acceleration, draw(st.lists(FLOAT64, min_size=3, max_size=3)))
    message.header.frame_id = draw(st.text(max_size=12))
    data = bytearray(serialize_message(message))
    damage = draw(st.sampled_from(["none", "cut", "overwrite"]))
    if damage == "cut":
        del data[draw(st.integers(0, len(data))):]
    elif damage == "overwrite":
        start = draw(st.integers(0, len(data) - 1))
        patch = draw(st.binary(min_size=1, max_size=8))
        data[start:start + len(patch)] = patch
    return bytes(data)


MESSAGES = {
    "/imu/data": imu_bytes(),
    "/gnss/fix": navsatfixes(),
    "/gnss/vel": twists_with_covariance(),
    "/barometer/pressure": pressures(),
    "/magnetic_field": magnetic_fields(),
    "/external_pose": poses(),
}
FUZZ = settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("topic", MESSAGES)
@FUZZ
@given(data=st.data())
def test_ros_driver_messages_are_used_or_counted(topic: str, data: st.DataObject) -> None:
    check_input(PROFILES["ros"][topic].convert, data.draw(MESSAGES[topic]))


@FUZZ
@given(message=twists())
def test_mavros_velocity_without_covariance_is_used_or_counted(message: TwistStamped) -> None:
    check_input(PROFILES["mavros"]["/mavros/global_position/raw/gps_vel"].convert, message)


# ----- rosbags-style messages: any array length, fields missing ----------------------------
def plain(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**fields)


@st.composite
def plain_navsatfixes(draw: st.DrawFn) -> SimpleNamespace:
    return plain(header=plain(stamp=plain(sec=0, nanosec=0)), status=plain(status=0),
                 latitude=DATUM[0], longitude=DATUM[1], altitude=DATUM[2],
                 position_covariance=draw(st.lists(st.floats(0.1, 10.0), max_size=12)),
                 position_covariance_type=draw(st.sampled_from([0, 1, 2, 3])))


@st.composite
def plain_covariance_messages(draw: st.DrawFn) -> tuple[str, SimpleNamespace]:
    """A velocity, magnetometer or pose message whose covariance has any length."""
    header = plain(stamp=plain(sec=START_NS // 10**9 + 1, nanosec=0))
    covariance = draw(st.lists(st.floats(0.0, 1.0), max_size=40))
    vector = plain(x=0.0, y=0.0, z=0.0)
    return draw(st.sampled_from([
        ("/gnss/vel", plain(header=header, twist=plain(twist=plain(linear=vector),
                                                       covariance=covariance))),
        ("/magnetic_field", plain(header=header, magnetic_field=vector,
                                  magnetic_field_covariance=covariance)),
        ("/external_pose", plain(header=header, pose=plain(
            pose=plain(position=vector, orientation=plain(x=0.0, y=0.0, z=0.0, w=1.0)),
            covariance=covariance)))]))


@FUZZ
@given(message=plain_navsatfixes())
def test_a_fix_covariance_of_any_length_is_used_or_malformed(message: SimpleNamespace) -> None:
    check_input(PROFILES["ros"]["/gnss/fix"].convert, message)


@FUZZ
@given(case=plain_covariance_messages())
def test_covariances_of_any_length_are_used_or_malformed(
        case: tuple[str, SimpleNamespace]) -> None:
    topic, message = case
    check_input(PROFILES["ros"][topic].convert, message)


@pytest.mark.parametrize("topic", MESSAGES)
def test_a_message_without_its_fields_is_malformed(topic: str) -> None:
    with pytest.raises(MALFORMED):
        PROFILES["ros"][topic].convert(b"" if topic == "/imu/data" else plain())


# ----- PX4 uXRCE-DDS ------------------------------------------------------------------------
def px4_messages() -> Any:
    """px4_msgs.msg; the tests skip (as test_autopilot_bags.py does) where it is missing."""
    return pytest.importorskip("px4_msgs.msg", reason="the px4 profile needs px4_msgs")


def three(strategy: st.SearchStrategy[float]) -> st.SearchStrategy[list[float]]:
    return st.lists(strategy, min_size=3, max_size=3)


PX4_FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "/fmu/out/sensor_combined": {
        "timestamp": UINT64, "gyro_rad": three(FLOAT32), "accelerometer_m_s2": three(FLOAT32),
        "accelerometer_timestamp_relative": st.sampled_from([0, 4, -4, 2147483647])},
    "/fmu/out/vehicle_gps_position": {
        "timestamp": UINT64, "fix_type": st.integers(0, 255), "latitude_deg": FLOAT64,
        "longitude_deg": FLOAT64, "altitude_ellipsoid_m": FLOAT64, "eph": FLOAT32,
        "epv": FLOAT32, "vel_n_m_s": FLOAT32, "vel_e_m_s": FLOAT32, "vel_d_m_s": FLOAT32,
        "s_variance_m_s": FLOAT32, "vel_ned_valid": st.booleans()},
    "/fmu/out/vehicle_air_data": {
        "timestamp": UINT64, "timestamp_sample": UINT64,
        "baro_pressure_pa": st.one_of(FLOAT32, st.floats(90_000.0, 100_000.0, width=32))},
    "/fmu/out/vehicle_magnetometer": {
        "timestamp": UINT64, "timestamp_sample": UINT64, "magnetometer_ga": three(FLOAT32)},
}


@pytest.mark.parametrize("topic", PX4_FIELDS)
@FUZZ
@given(data=st.data())
def test_px4_messages_are_used_or_counted(topic: str, data: st.DataObject) -> None:
    item = PROFILES["px4"][topic]
    message = getattr(px4_messages(), item.msgtype.rsplit("/", 1)[1])()
    for name, values in PX4_FIELDS[topic].items():
        setattr(message, name, data.draw(values, label=name))
    check_input(item.convert, message)

