"""The input adapters (trident_ekf.adapters) without ROS: every conversion of the ros, mavros
and px4 profiles with analytic values, on plain objects and on rosbags' deserialized
messages, and the profiles' topics, types, QoS and options."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from mav_geometry import convert, quaternion
from trident_ekf.adapters import (
    PROFILES,
    Aid,
    Fix,
    ImuSample,
    InputOptions,
    Qos,
    build_profile,
    deliver,
    mavros,
    px4,
    ros,
)
from trident_ekf.adapters.base import namespace
from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.session import EstimationSession
from trident_ekf.tools import bagio, frames

RNG = np.random.default_rng(5)


def gps_message(**fields: object) -> SimpleNamespace:
    """A PX4 v1.15 SensorGps with a 3D fix, overridden by ``fields``."""
    values = dict(timestamp=12_345_678, timestamp_sample=0, latitude_deg=47.25,
                  longitude_deg=8.5, altitude_msl_m=440.0, altitude_ellipsoid_m=488.5,
                  fix_type=3, eph=2.0, epv=3.0, vel_n_m_s=1.0, vel_e_m_s=2.0, vel_d_m_s=3.0,
                  s_variance_m_s=0.5, vel_ned_valid=True)
    return SimpleNamespace(**(values | fields))


# ----- frames and units ---------------------------------------------------------------------
def test_frd_to_flu_and_ned_to_enu_are_the_axis_flips() -> None:
    assert px4.frd_to_flu(1.0, 2.0, 3.0) == (1.0, -2.0, -3.0)
    assert px4.ned_to_enu(1.0, 2.0, 3.0) == (2.0, 1.0, -3.0)
    # The same as the log importer's array forms.
    vectors = RNG.normal(size=(5, 3))
    assert_array_equal([px4.frd_to_flu(*v) for v in vectors], frames.frd_to_flu(vectors))
    assert_array_equal([px4.ned_to_enu(*v) for v in vectors], frames.ned_to_enu(vectors))


def test_body_and_local_conversions_agree_with_the_attitude_conversion() -> None:
    """A body vector taken to the local level by the PX4 attitude (FRD -> NED) and then
    converted to ENU equals the FLU vector taken to ENU by the converted attitude."""
    for _ in range(5):
        q_wxyz = RNG.normal(size=4)
        q_wxyz /= np.linalg.norm(q_wxyz)
        v_frd = RNG.normal(size=3)
        c_ned_frd = quaternion.to_matrix(convert.from_scalar_first(q_wxyz))
        v_ned = c_ned_frd @ v_frd
        q_enu_flu = frames.attitude_ned_frd_to_enu_flu(q_wxyz)
        assert_allclose(quaternion.rotate(q_enu_flu, px4.frd_to_flu(*v_frd)),
                        px4.ned_to_enu(*v_ned), atol=1e-12)


def test_gauss_to_tesla_in_flu_axes() -> None:
    message = SimpleNamespace(timestamp=2_000_000, timestamp_sample=1_999_000,
                              magnetometer_ga=np.array([0.2, -0.05, 0.4], dtype=np.float32))
    (sample,) = px4.vehicle_magnetometer(message)
    assert sample.source == "magnetometer"
    assert sample.stamp_ns == 1_999_000_000  # timestamp_sample, us -> ns
    expected = np.array([0.2, 0.05, -0.4]) * 1e-4
    assert_allclose(sample.fields["field_T"], expected, rtol=1e-7)
    assert set(sample.fields) == {"field_T"}  # covariance unknown: the source's default


def test_sample_stamp_falls_back_to_timestamp() -> None:
    message = SimpleNamespace(timestamp=7_000_001, timestamp_sample=0, baro_pressure_pa=95000.5)
    (sample,) = px4.vehicle_air_data(message)
    assert sample == Aid("barometer", 7_000_001_000,
                         {"pressure_pa": 95000.5, "pressure_variance_pa2": 0.0})


def test_a_non_finite_pressure_is_malformed() -> None:
    with pytest.raises(ValueError, match="baro_pressure_pa"):
        px4.vehicle_air_data(SimpleNamespace(timestamp=1, timestamp_sample=1,
                                             baro_pressure_pa=math.nan))


def test_sensor_combined_flu_sample_at_its_timestamp() -> None:
    message = SimpleNamespace(timestamp=1_234_567, accelerometer_timestamp_relative=0,
                              gyro_rad=np.array([0.1, 0.2, 0.3], dtype=np.float32),
                              accelerometer_m_s2=np.array([0.5, -0.25, -9.75], dtype=np.float32))
    (sample,) = px4.sensor_combined(message)
    assert isinstance(sample, ImuSample)
    assert sample.stamp_ns == 1_234_567_000
    assert_allclose(sample.gyro, (0.1, -0.2, -0.3), rtol=1e-7)
    assert sample.accel == (0.5, 0.25, 9.75)  # specific force of a level vehicle: +z up
    message.accelerometer_timestamp_relative = px4.RELATIVE_TIMESTAMP_INVALID
    with pytest.raises(ValueError, match="accelerometer"):
        px4.sensor_combined(message)


# ----- GNSS ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("fix_type", "status"), [
    (0, -1), (1, -1), (2, 0), (3, 0), (4, 1), (5, 2), (6, 2), (8, 0)])
def test_px4_fix_type_to_navsat_status(fix_type: int, status: int) -> None:
    assert px4.navsat_status(fix_type) == status
    (fix, *_) = px4.sensor_gps(gps_message(fix_type=fix_type))
    assert fix.status == status


def test_sensor_gps_fix_and_velocity() -> None:
    fix, velocity = px4.sensor_gps(gps_message())
    assert fix == Fix(12_345_678_000, 0, 47.25, 8.5, 488.5,
                      (4.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 9.0), True)
    assert velocity.stamp_ns == fix.stamp_ns  # 'timestamp' is the fix's time
    assert velocity.velocity_enu == (2.0, 1.0, -3.0)
    assert_array_equal(velocity.covariance_enu, np.eye(3) * 0.25)


def test_sensor_gps_of_older_px4_in_integer_units() -> None:
    old = SimpleNamespace(**{k: v for k, v in vars(gps_message()).items() if k not in {
        "latitude_deg", "longitude_deg", "altitude_msl_m", "altitude_ellipsoid_m"}},
        lat=472_500_000, lon=85_000_000, alt=440_000, alt_ellipsoid=488_500)
    fix, _ = px4.sensor_gps(old)
    assert (fix.latitude_deg, fix.longitude_deg, fix.height_m) == pytest.approx(
        (47.25, 8.5, 488.5), abs=1e-12)


def test_sensor_gps_without_fix_or_valid_velocity() -> None:
    (fix,) = px4.sensor_gps(gps_message(fix_type=1, latitude_deg=0.0))
    assert fix.status == -1
    (fix,) = px4.sensor_gps(gps_message(vel_ned_valid=False))
    assert fix.status == 0


@pytest.mark.parametrize(("eph", "epv"), [(0.0, 3.0), (2.0, math.nan), (-1.0, 3.0)])
def test_unusable_accuracies_make_the_covariance_unknown(eph: float, epv: float) -> None:
    fix, _ = px4.sensor_gps(gps_message(eph=eph, epv=epv))
    assert not fix.covariance_known
    _, velocity = px4.sensor_gps(gps_message(s_variance_m_s=0.0))
    assert not np.any(velocity.covariance_enu)  # the receiver model's default applies


def test_navsatfix_and_twists_of_ros_drivers() -> None:
    fix = bagio.navsatfix_message(5 * 10**9 + 7, 47.0, 8.0, 500.0, np.diag([1.0, 2.0, 3.0]))
    (sample,) = ros.navsatfix(fix)
    assert sample[:5] == (5 * 10**9 + 7, 0, 47.0, 8.0, 500.0)
    assert_array_equal(np.reshape(sample.covariance_enu, (3, 3)), np.diag([1.0, 2.0, 3.0]))
    assert sample.covariance_known
    fix.position_covariance_type = 0
    assert not ros.navsatfix(fix)[0].covariance_known
    twist = bagio.twist_message(10**9, (1.0, 2.0, 3.0), np.diag([0.1, 0.2, 0.3]))
    (velocity,) = ros.twist_with_covariance(twist)
    assert velocity.velocity_enu == (1.0, 2.0, 3.0)
    assert_array_equal(velocity.covariance_enu, np.diag([0.1, 0.2, 0.3]))
    stamped = SimpleNamespace(header=twist.header, twist=twist.twist.twist)
    (velocity,) = ros.twist_stamped(0.3)(stamped)
    assert velocity.velocity_enu == (1.0, 2.0, 3.0)
    assert_allclose(velocity.covariance_enu, np.eye(3) * 0.09)
    (velocity,) = ros.twist_stamped(math.nan)(stamped)
    assert not np.any(velocity.covariance_enu)


def test_raw_imu_is_the_cdr_fast_path() -> None:
    message = bagio.imu_message(3 * 10**9 + 5, (0.1, 0.2, 0.3), (1.0, 2.0, 9.0))
    raw = bagio.TYPESTORE.serialize_cdr(message, bagio.IMU)
    (sample,) = ros.imu(raw)
    assert sample == ImuSample(3 * 10**9 + 5, (0.1, 0.2, 0.3), (1.0, 2.0, 9.0))


# ----- rosbags' messages --------------------------------------------------------------------
PX4_DEFINITIONS = {
    px4.SENSOR_COMBINED: """uint64 timestamp
float32[3] gyro_rad
uint32 gyro_integral_dt
int32 accelerometer_timestamp_relative
float32[3] accelerometer_m_s2
""",
    px4.SENSOR_GPS: """uint64 timestamp
uint64 timestamp_sample
float64 latitude_deg
float64 longitude_deg
float64 altitude_ellipsoid_m
float32 s_variance_m_s
uint8 fix_type
float32 eph
float32 epv
float32 vel_n_m_s
float32 vel_e_m_s
float32 vel_d_m_s
bool vel_ned_valid
""",
    px4.VEHICLE_MAGNETOMETER: """uint64 timestamp
uint64 timestamp_sample
float32[3] magnetometer_ga
""",
}
"""Reduced PX4 layouts under a private package name: only the fields the converters read."""


def test_converters_read_rosbags_messages() -> None:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    names = {msgtype: msgtype.replace("px4_msgs", "reduced_px4") for msgtype in PX4_DEFINITIONS}
    for msgtype, text in PX4_DEFINITIONS.items():
        store.register(get_types_from_msg(text, names[msgtype]))

    def roundtrip(msgtype: str, **values: object) -> object:
        name = names[msgtype]
        message = store.types[name](**values)
        return store.deserialize_cdr(store.serialize_cdr(message, name), name)

    f32 = np.float32
    imu = roundtrip(px4.SENSOR_COMBINED, timestamp=10, gyro_rad=np.array([1, 2, 3], f32),
                    gyro_integral_dt=4000, accelerometer_timestamp_relative=0,
                    accelerometer_m_s2=np.array([0.5, 0.25, -9.5], f32))
    assert px4.sensor_combined(imu) == (ImuSample(10_000, (1.0, -2.0, -3.0),
                                                  (0.5, -0.25, 9.5)),)
    gps = roundtrip(px4.SENSOR_GPS, timestamp=20, timestamp_sample=0, latitude_deg=47.25,
                    longitude_deg=8.5, altitude_ellipsoid_m=488.5, s_variance_m_s=0.5,
                    fix_type=3, eph=2.0, epv=3.0, vel_n_m_s=1.0, vel_e_m_s=2.0,
                    vel_d_m_s=3.0, vel_ned_valid=True)
    fix, velocity = px4.sensor_gps(gps)
    assert fix == px4.sensor_gps(gps_message(timestamp=20))[0]
    assert velocity.velocity_enu == (2.0, 1.0, -3.0)
    mag = roundtrip(px4.VEHICLE_MAGNETOMETER, timestamp=30, timestamp_sample=29,
                    magnetometer_ga=np.array([0.25, 0.5, -0.125], f32))
    (sample,) = px4.vehicle_magnetometer(mag)
    assert sample.stamp_ns == 29_000
    assert_array_equal(sample.fields["field_T"], np.array([0.25, -0.5, 0.125]) * 1e-4)
    # Standard messages as trident-replay reads them.
    raw = bagio.TYPESTORE.serialize_cdr(bagio.fluid_pressure_message(10**9, 9.5e4, 4.0),
                                        bagio.FLUID_PRESSURE)
    pressure = bagio.TYPESTORE.deserialize_cdr(raw, bagio.FLUID_PRESSURE)
    (barometer,) = mavros.profile(InputOptions()).topics()["/mavros/imu/static_pressure"].convert(
        pressure)
    assert barometer == Aid("barometer", 10**9, {"pressure_pa": 9.5e4,
                                                 "pressure_variance_pa2": 4.0})


# ----- profiles -----------------------------------------------------------------------------
def test_profiles_list_their_topics_types_and_qos() -> None:
    topics = {name: {i.topic: (i.msgtype, i.source, i.raw) for i in build_profile(
        InputOptions(name)).inputs} for name in PROFILES}
    assert topics["ros"] == {
        "imu/data": ("sensor_msgs/msg/Imu", None, True),
        "gnss/fix": ("sensor_msgs/msg/NavSatFix", None, False),
        "gnss/vel": ("geometry_msgs/msg/TwistWithCovarianceStamped", None, False),
        "barometer/pressure": ("sensor_msgs/msg/FluidPressure", "barometer", False),
        "magnetic_field": ("sensor_msgs/msg/MagneticField", "magnetometer", False),
        "external_pose": ("geometry_msgs/msg/PoseWithCovarianceStamped", "external_pose",
                          False),
    }
    assert topics["mavros"] == {
        "/mavros/imu/data_raw": ("sensor_msgs/msg/Imu", None, True),
        "/mavros/global_position/raw/fix": ("sensor_msgs/msg/NavSatFix", None, False),
        "/mavros/global_position/raw/gps_vel": ("geometry_msgs/msg/TwistStamped", None, False),
        "/mavros/imu/static_pressure": ("sensor_msgs/msg/FluidPressure", "barometer", False),
        "/mavros/imu/mag": ("sensor_msgs/msg/MagneticField", "magnetometer", False),
        "external_pose": ("geometry_msgs/msg/PoseWithCovarianceStamped", "external_pose",
                          False),
    }
    assert topics["px4"] == {
        "/fmu/out/sensor_combined": ("px4_msgs/msg/SensorCombined", None, False),
        "/fmu/out/vehicle_gps_position": ("px4_msgs/msg/SensorGps", None, False),
        "/fmu/out/vehicle_air_data": ("px4_msgs/msg/VehicleAirData", "barometer", False),
        "/fmu/out/vehicle_magnetometer": ("px4_msgs/msg/VehicleMagnetometer", "magnetometer",
                                          False),
        "external_pose": ("geometry_msgs/msg/PoseWithCovarianceStamped", "external_pose",
                          False),
    }
    # Every input of every profile: best effort (the PX4 bridge publishes nothing else).
    assert {i.qos for name in PROFILES for i in build_profile(InputOptions(name)).inputs} == {
        Qos("best_effort", "volatile")}
    selected = build_profile(InputOptions("px4")).selected(["magnetometer"])
    assert [i.topic for i in selected] == ["/fmu/out/sensor_combined",
                                           "/fmu/out/vehicle_gps_position",
                                           "/fmu/out/vehicle_magnetometer"]


def test_namespaces_and_velocity_options() -> None:
    profile = build_profile(InputOptions("mavros", mavros_namespace="/uav1/mavros/"))
    assert profile.inputs[0].topic == "/uav1/mavros/imu/data_raw"
    assert build_profile(InputOptions("px4", px4_namespace="vehicle")).inputs[0].topic == (
        "vehicle/out/sensor_combined")  # relative: in the node's namespace
    assert build_profile(InputOptions("px4", px4_namespace="/")).inputs[0].topic == (
        "/out/sensor_combined")
    assert namespace("/a/b_1/") == "/a/b_1"
    for bad in ("/a//b", "/1a", "a b", "~/x"):
        with pytest.raises(ValueError, match="not a ROS namespace"):
            InputOptions(mavros_namespace=bad)
    twist = build_profile(InputOptions(velocity_type="TwistStamped", velocity_sigma_mps=0.2))
    assert twist.topics()["/gnss/vel"].msgtype == "geometry_msgs/msg/TwistStamped"
    with pytest.raises(ValueError, match="velocity_type"):
        InputOptions(velocity_type="Twist")
    with pytest.raises(ValueError, match="velocity_sigma_mps"):
        InputOptions(velocity_sigma_mps=0.0)
    with pytest.raises(ValueError, match="unknown inputs profile"):
        build_profile(InputOptions("ardupilot"))


def test_samples_reach_the_session_as_its_own_calls() -> None:
    filter_ = TridentEKF(FilterConfig(), build_sources({"barometer": None}))
    session = EstimationSession(filter_, Initializer(level_duration=0.1, yaw=0.0))
    gravity = (0.0, 0.0, 9.80665)
    for k in range(30):
        assert not deliver(session, ImuSample(k * 10**7, (0.0, 0.0, 0.0), gravity))
    (fix, velocity) = px4.sensor_gps(gps_message(timestamp=300_000, vel_n_m_s=0.0,
                                                 vel_e_m_s=0.0, vel_d_m_s=0.0))
    deliver(session, fix)
    deliver(session, velocity)
    assert session.received == {"imu": 30, "fix": 1, "velocity": 1, "barometer": 0}
    assert deliver(session, ImuSample(31 * 10**7, (0.0, 0.0, 0.0), gravity))
    assert session.started
    deliver(session, Aid("barometer", 31 * 10**7, {"pressure_pa": 95000.0}))
    assert session.received["barometer"] == 1
