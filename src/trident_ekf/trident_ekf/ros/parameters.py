"""The estimator node's parameters and the settings built from them.

Read-only (the filter and its inputs are built from them): ``filter``, the GNSS bias model
(``gnss_bias_sigma_*``, ``gnss_bias_correlation_time``: they size the state), every
initialization parameter (used once, when the filter starts), ``imu_rotation_xyzw``, the
map datum, the GNSS noise model ``gnss.*``, the yaw estimator's ``yaw_estimator.*`` and
every aiding source's ``<source>.enabled``
and ``<source>.<setting>`` (one group per source registered in ``core.measurements``,
generated from its config dataclass: units and ranges come from there),
``subscribe_initial_pose``, and the input profile (``inputs``, ``mavros_namespace``,
``px4_namespace``, ``gnss_velocity_type``, ``gnss_velocity_sigma_mps``: ``input_options``)
and its queue, ``input_queue_depth``.

Dynamic: the IMU noise model, ``lever_arm``, the gate, decimation, timeouts, divergence and
history settings of the filter (``FilterConfig``, taken from the next sample on), the output
and diagnostics rates, the frame names and ``publish_tf``.

Frames (REP-105): the estimate is published in the world frame ``world_frame`` (empty:
``map_frame``), which must be ``map_frame`` or ``odom_frame`` (``frames``).

A value rclpy refuses, or one the core's own checks (``FilterConfig``, ``Initializer``)
refuse, is one ``ParameterError`` naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mav_geometry import quaternion
from mav_geometry.settings import configure
from mav_ros_common.parameters import (
    ParameterError,
    ParameterSpec,
    Values,
    config_specs,
    group,
    invalid,
)
from trident_ekf.adapters import PROFILE_NAMES, VELOCITY_TYPES, InputOptions
from trident_ekf.adapters.base import namespace
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.config import MAX_SAMPLING_FACTOR
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import REGISTRY
from trident_ekf.core.measurements.gnss import GnssConfig
from trident_ekf.core.yaw_estimator import YawEstimatorConfig

FILTERS: dict[str, type[ErrorStateFilter]] = {"trident": TridentEKF, "baseline": BaselineESKF}
_DEFAULTS = FilterConfig()
_TINY = 1e-12  # lower bound of "strictly positive" ranges
CONFIG_FIELDS = ("gyro_noise", "accel_noise", "gyro_bias_walk", "accel_bias_walk",
                 "gyro_sampling_factor", "accel_sampling_factor",
                 "covariance_decimation", "gate_probability", "max_imu_interval",
                 "max_bridged_gap", "gap_rate_sigma", "gap_accel_sigma",
                 "outage_timeout", "outage_gnss_periods", "outage_timeout_floor",
                 "divergence_position_sigma", "max_consecutive_rejections",
                 "reset_on_divergence", "consistency_probability", "history_length",
                 "gnss_bias_sigma_horizontal",
                 "gnss_bias_sigma_vertical",
                 "gnss_bias_correlation_time", "gnss_covariance_includes_bias",
                 "gnss_white_sigma_floor", "gyro_range", "accel_range", "max_imu_stamp_jump",
                 "clock_change_samples", "imu_timeout")
"""Parameters that are ``FilterConfig`` fields of the same name."""
DATUM = ("datum_latitude_deg", "datum_longitude_deg", "datum_height_m")



@dataclass(frozen=True)
class OptionalFrameSpec(ParameterSpec):
    """A frame-name parameter that may be empty: it then names another frame parameter,
    ``empty_means`` (the default follows it)."""

    empty_means: str = ""

    def allowed(self) -> str:
        return f"a frame name, or empty for {self.empty_means}"

    def check(self, value: Any) -> Any:
        return "" if value == "" else super().check(value)


SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec("filter", "trident", "estimator (baseline: a conventional ESKF)",
                  choices=tuple(sorted(FILTERS)), read_only=True),
    # Noise model and robustness (FilterConfig fields, same names).
    ParameterSpec("gyro_noise", _DEFAULTS.gyro_noise, "gyro white noise density",
                  "rad/s/sqrt(Hz)", _TINY, 1.0),
    ParameterSpec("accel_noise", _DEFAULTS.accel_noise, "accelerometer white noise density",
                  "m/s^2/sqrt(Hz)", _TINY, 10.0),
    ParameterSpec("gyro_bias_walk", _DEFAULTS.gyro_bias_walk, "gyro bias random walk",
                  "rad/s/sqrt(s)", _TINY, 1.0),
    ParameterSpec("accel_bias_walk", _DEFAULTS.accel_bias_walk,
                  "accelerometer bias random walk", "m/s^2/sqrt(s)", _TINY, 10.0),
    ParameterSpec("gyro_sampling_factor", _DEFAULTS.gyro_sampling_factor, "k_g: attitude "
                  "noise (k_g |change of the rate| dt)^2 per IMU interval, for a coarsely "
                  "sampled (logged, low-rate) IMU; 1/6 for an input that wanders between "
                  "samples, 0 = off", "", 0.0, MAX_SAMPLING_FACTOR),
    ParameterSpec("accel_sampling_factor", _DEFAULTS.accel_sampling_factor, "k_a: velocity "
                  "noise (k_a |change of the specific force| dt)^2 per IMU interval; 0 = off",
                  "", 0.0, MAX_SAMPLING_FACTOR),
    ParameterSpec("lever_arm", [0.0, 0.0, 0.0], "GNSS antenna position relative to the IMU, "
                  "body (base_link FLU) axes", "m", length=3),
    ParameterSpec("covariance_decimation", _DEFAULTS.covariance_decimation,
                  "IMU samples per covariance propagation (1 = every sample)", "", 1, 100),
    ParameterSpec("gate_probability", _DEFAULTS.gate_probability,
                  "chi-square probability of the NIS gate of every update (0 disables gating)",
                  "", 0.0, 0.999999999),
    ParameterSpec("max_imu_interval", _DEFAULTS.max_imu_interval, "longest IMU interval "
                  "integrated; a longer one is a gap (counted)", "s", 1e-4, 10.0),
    ParameterSpec("max_bridged_gap", _DEFAULTS.max_bridged_gap, "longest IMU gap bridged "
                  "(state coasting, covariance grown by gap_rate_sigma and gap_accel_sigma); "
                  "a longer one is skipped (the clock jumps)", "s", 0.0, 60.0),
    ParameterSpec("max_imu_stamp_jump", _DEFAULTS.max_imu_stamp_jump, "largest forward IMU "
                  "interval that is a gap; a longer one is a stamp fault (sample rejected, "
                  "imu_stamp_jump); at least max_imu_interval", "s", 1e-4, 86400.0),
    ParameterSpec("clock_change_samples", _DEFAULTS.clock_change_samples, "consecutive IMU "
                  "samples rejected for their stamps (backward or jumping) that agree on a new "
                  "time base and so make a clock change (the estimate continues on it)", "", 2,
                  1000),
    ParameterSpec("imu_timeout", _DEFAULTS.imu_timeout, "time without a usable IMU sample "
                  "(input stamps or the node clock) that reads as an IMU blackout "
                  "(diagnostics ERROR)", "s", 0.01, 3600.0),
    ParameterSpec("gyro_range", _DEFAULTS.gyro_range, "declared gyro full-scale range per "
                  "axis; a reading at or beyond it is saturated (rejected, imu_saturated); "
                  "default 2000 deg/s", "rad/s", 0.1, 1000.0),
    ParameterSpec("accel_range", _DEFAULTS.accel_range, "declared accelerometer full-scale "
                  "range per axis; a reading at or beyond it is saturated (rejected, "
                  "imu_saturated); default 16 g", "m/s^2", 1.0, 10000.0),
    ParameterSpec("gap_rate_sigma", _DEFAULTS.gap_rate_sigma, "unknown rotation rate "
                  "assumed over a bridged IMU gap", "rad/s", _TINY, 10.0),
    ParameterSpec("gap_accel_sigma", _DEFAULTS.gap_accel_sigma, "unknown acceleration "
                  "assumed over a bridged IMU gap", "m/s^2", _TINY, 100.0),
    ParameterSpec("outage_timeout", _DEFAULTS.outage_timeout, "time without an accepted GNSS "
                  "position update before the status reads outage (a shorter gap leaves the "
                  "status as it is); NaN: automatic, outage_gnss_periods nominal GNSS periods "
                  "measured from the fix stamps, at least outage_timeout_floor", "s", 0.01,
                  3600.0, allow_nan=True),
    ParameterSpec("outage_gnss_periods", _DEFAULTS.outage_gnss_periods, "automatic outage "
                  "timeout: nominal GNSS periods (median of the recent fix intervals) without "
                  "an accepted fix", "", 1.0, 100.0),
    ParameterSpec("outage_timeout_floor", _DEFAULTS.outage_timeout_floor, "smallest automatic "
                  "outage timeout", "s", 0.01, 3600.0),
    ParameterSpec("divergence_position_sigma", _DEFAULTS.divergence_position_sigma,
                  "position sigma above which the status reads diverged", "m", 0.1, 1e7),
    ParameterSpec("max_consecutive_rejections", _DEFAULTS.max_consecutive_rejections,
                  "gated GNSS fixes in a row that declare divergence", "", 1, 100000),
    ParameterSpec("reset_on_divergence", _DEFAULTS.reset_on_divergence,
                  "on divergence reset position and velocity to GNSS (true) or stay diverged "
                  "(false)"),
    ParameterSpec("consistency_probability", _DEFAULTS.consistency_probability,
                  "chi-square probability of the tests of a rejected fix's displacement "
                  "against the GNSS velocity and the IMU: a fix both contradict is "
                  "inconsistent (suspected spoofing, not divergence), and a divergence reset "
                  "only takes a fix ending a track of max_consecutive_rejections fixes that "
                  "move as both say (0 disables the tests: any fix)", "", 0.0, 0.999999999),
    ParameterSpec("history_length", _DEFAULTS.history_length, "how far back a late "
                  "measurement is applied at its own stamp (0 = never)", "s", 0.0, 10.0),
    ParameterSpec("gnss_bias_sigma_horizontal", _DEFAULTS.gnss_bias_sigma_horizontal,
                  "stationary sigma of the slowly varying GNSS error, east/north; with the "
                  "vertical one > 0 it is estimated as a Gauss-Markov bias (3 more states); "
                  "both 0 = white fixes", "m", 0.0, 100.0, read_only=True),
    ParameterSpec("gnss_bias_sigma_vertical", _DEFAULTS.gnss_bias_sigma_vertical,
                  "stationary sigma of the slowly varying GNSS error, up; 0 with the "
                  "horizontal one", "m", 0.0, 100.0, read_only=True),
    ParameterSpec("gnss_bias_correlation_time", _DEFAULTS.gnss_bias_correlation_time,
                  "correlation time of that GNSS bias", "s", 0.1, 1e5, read_only=True),
    ParameterSpec("gnss_covariance_includes_bias", _DEFAULTS.gnss_covariance_includes_bias,
                  "the fix covariance reports white + correlated error (true, as receivers "
                  "do) or only the white part (false)"),
    ParameterSpec("gnss_white_sigma_floor", _DEFAULTS.gnss_white_sigma_floor,
                  "smallest white GNSS position sigma left after removing the bias part", "m",
                  1e-4, 100.0),
    # Initialization (Initializer): used once, when the filter starts.
    ParameterSpec("level_duration_s", 1.0, "IMU window of the stillness test and the static "
                  "levelling", "s", 0.05, 60.0, read_only=True),
    ParameterSpec("still_gyro_rad_s", 0.05, "a still window has rate spread and mean rate "
                  "below this", "rad/s", 1e-4, 1.0, read_only=True),
    ParameterSpec("still_accel_m_s2", 1.0, "a still window has a specific-force spread below "
                  "this", "m/s^2", 1e-3, 10.0, read_only=True),
    ParameterSpec("static_speed_mps", 0.3, "largest GNSS speed of a static start", "m/s", 0.01,
                  10.0, read_only=True),
    ParameterSpec("initial_yaw_deg", math.nan, "initial ENU yaw (from east, counter-"
                  "clockwise); NaN = from the magnetometer when enabled, else from the yaw "
                  "estimator (a static start without either runs with yaw unknown until the "
                  "vehicle has moved)", "deg", allow_nan=True, read_only=True),
    ParameterSpec("initial_yaw_sigma_deg", 60.0, "sigma of initial_yaw_deg (a yaw set by hand "
                  "is coarse)", "deg", 0.01,
                  180.0, read_only=True),
    ParameterSpec("magnetic_yaw_sigma_deg", 15.0, "initial yaw sigma of a magnetometer "
                  "heading (covers uncalibrated hard iron)", "deg", 0.1, 180.0,
                  read_only=True),
    ParameterSpec("motion_tilt_sigma_deg", 5.0, "initial roll/pitch sigma of an in-motion "
                  "start", "deg", 0.1, 90.0, read_only=True),
    ParameterSpec("initial_tilt_sigma_deg", 3.0, "initial roll/pitch sigma", "deg", 0.01, 90.0,
                  read_only=True),
    ParameterSpec("initial_position_sigma_m", 3.0, "initial position sigma", "m", 0.01, 1e4,
                  read_only=True),
    ParameterSpec("initial_velocity_sigma_mps", 0.5, "initial velocity sigma", "m/s", 0.001,
                  100.0, read_only=True),
    ParameterSpec("initial_gyro_bias_sigma", math.radians(0.5), "initial gyro bias sigma",
                  "rad/s", 1e-6, 1.0, read_only=True),
    ParameterSpec("initial_accel_bias_sigma", 0.1, "initial accelerometer bias sigma; covers "
                  "the turn-on bias and any gravity-model mismatch", "m/s^2", 1e-5, 10.0,
                  read_only=True),
    # Sensors and frames.
    ParameterSpec("imu_rotation_xyzw", [0.0, 0.0, 0.0, 1.0],
                  "orientation of the IMU frame in base_link, unit quaternion [x, y, z, w] "
                  "(identity: the IMU frame is the body frame; base_link's origin is the "
                  "IMU's)", length=4, read_only=True),
    ParameterSpec("datum_latitude_deg", math.nan, "map (ENU) origin latitude; NaN: the first "
                  "valid fix", "deg", -90.0, 90.0, allow_nan=True, read_only=True),
    ParameterSpec("datum_longitude_deg", math.nan, "map origin longitude; NaN: the first valid "
                  "fix", "deg", -180.0, 360.0, allow_nan=True, read_only=True),
    ParameterSpec("datum_height_m", math.nan, "map origin ellipsoidal height; NaN: the first "
                  "valid fix", "m", -1e4, 1e5, allow_nan=True, read_only=True),
    ParameterSpec("output_rate_hz", 100.0, "odometry and /tf rate, decimated on IMU stamps",
                  "Hz", 0.1, 10000.0),
    ParameterSpec("diagnostics_rate_hz", 1.0, "/diagnostics rate on the node clock", "Hz",
                  0.01, 100.0),
    # Frames (REP-105): the estimate is published in world_frame, map_frame or odom_frame.
    ParameterSpec("map_frame", "map", "REP-105 map frame, ENU at the datum: odometry frame_id "
                  "and /tf parent when world_frame is map_frame"),
    ParameterSpec("odom_frame", "odom", "REP-105 odom frame: odometry frame_id and /tf parent "
                  "when world_frame is odom_frame (another node then publishes map_frame -> "
                  "odom_frame)"),
    OptionalFrameSpec("world_frame", "", "frame the estimate is published in: map_frame "
                      "(map_frame -> base_frame on /tf) or odom_frame (odom_frame -> "
                      "base_frame)", empty_means="map_frame"),
    ParameterSpec("base_frame", "base_link", "body (FLU) frame: odometry child_frame_id, /tf "
                  "child"),
    ParameterSpec("publish_tf", True, "publish world frame -> base_frame on /tf"),
    ParameterSpec("subscribe_initial_pose", False, "subscribe to initial_pose "
                  "(geometry_msgs/PoseWithCovarianceStamped in the world frame) and set the "
                  "pose from each message as ~/set_pose does (robot_localization's set_pose "
                  "topic)", read_only=True),
)
# Inputs (``trident_ekf.adapters``): which vehicle interface publishes the sensors.
SPECS += (
    ParameterSpec("inputs", "ros", "input topics: ros (drivers: imu/data, gnss/fix, gnss/vel), "
                  "mavros (MAVROS under mavros_namespace), px4 (uXRCE-DDS under "
                  "px4_namespace; needs px4_msgs)", choices=PROFILE_NAMES, read_only=True),
    ParameterSpec("mavros_namespace", "/mavros", "namespace of the MAVROS topics (inputs "
                  "mavros)", read_only=True),
    ParameterSpec("px4_namespace", "/fmu", "namespace of the PX4 uXRCE-DDS topics (inputs "
                  "px4)", read_only=True),
    ParameterSpec("gnss_velocity_type", VELOCITY_TYPES[0], "geometry_msgs type of gnss/vel "
                  "(inputs ros; MAVROS always sends TwistStamped)", choices=VELOCITY_TYPES,
                  read_only=True),
    ParameterSpec("gnss_velocity_sigma_mps", math.nan, "velocity sigma per axis of GNSS "
                  "velocities without a covariance (TwistStamped); NaN: gnss.default_speed_mps",
                  "m/s", 1e-3, 100.0, allow_nan=True, read_only=True),
    ParameterSpec("input_queue_depth", 5, "messages kept per input while the node is busy; "
                  "beyond, the oldest is lost. 5 (rclpy's sensor data) keeps the estimate "
                  "fresh for a control loop when the process cannot keep up; deeper keeps "
                  "every sample through short stalls at the cost of latency", "", 1, 1000,
                  read_only=True),
)




def aiding_specs() -> list[ParameterSpec]:
    """``gnss.*``, ``yaw_estimator.*`` and, per registered optional source,
    ``<source>.enabled`` and its settings."""
    specs = config_specs("gnss", GnssConfig) + config_specs("yaw_estimator", YawEstimatorConfig)
    for name, registration in REGISTRY.items():
        specs.append(ParameterSpec(f"{name}.enabled", False, f"fuse the {name} aiding source "
                                   "(subscribing to its topic if it has one)", read_only=True))
        specs += config_specs(name, registration.config)
    return specs


SPECS += tuple(aiding_specs())


@dataclass(frozen=True)
class EstimatorSettings:
    """The validated parameters as the node uses them: the filter configuration, a fresh
    initializer (used once, at start), the datum (None: the first fix) and the IMU-to-body
    rotation (None: identity), the GNSS noise model and the enabled aiding sources."""

    filter_config: FilterConfig
    initializer: Initializer
    datum: tuple[float, float, float] | None
    imu_rotation: NDArray[np.float64] | None
    gnss_receiver: GnssConfig
    aiding: dict[str, Any]  # enabled optional source -> its config (``build_sources``)
    yaw_estimator: YawEstimatorConfig = field(default_factory=YawEstimatorConfig)
    frames: tuple[str, str] = ("map", "base_link")  # (world frame, base_frame): ``frames``
    inputs: InputOptions = field(default_factory=InputOptions)  # ``input_options``
    input_queue_depth: int = 5


def estimator_settings(values: Values) -> EstimatorSettings:
    """Settings from validated values; ParameterError if the core refuses them."""
    config = _build("filter configuration", FilterConfig, **{
        name: values[name] for name in CONFIG_FIELDS}, lever_arm=values["lever_arm"])
    yaw = values["initial_yaw_deg"]
    initializer = _build(
        "initialization", Initializer, level_duration=values["level_duration_s"],
        yaw=None if math.isnan(yaw) else math.radians(yaw),
        still_gyro=values["still_gyro_rad_s"], still_accel=values["still_accel_m_s2"],
        static_speed=values["static_speed_mps"],
        magnetic_yaw_sigma=math.radians(values["magnetic_yaw_sigma_deg"]),
        motion_tilt_sigma=math.radians(values["motion_tilt_sigma_deg"]),
        yaw_sigma=math.radians(values["initial_yaw_sigma_deg"]),
        tilt_sigma=math.radians(values["initial_tilt_sigma_deg"]),
        position_sigma=values["initial_position_sigma_m"],
        velocity_sigma=values["initial_velocity_sigma_mps"],
        gyro_bias_sigma=values["initial_gyro_bias_sigma"],
        accel_bias_sigma=values["initial_accel_bias_sigma"])
    gnss_receiver = _build("gnss", configure, GnssConfig, group(values, "gnss"))
    aiding = {name: _build(name, configure, registration.config, group(values, name))
              for name, registration in REGISTRY.items() if values[f"{name}.enabled"]}
    yaw_estimator = _build("yaw_estimator", configure, YawEstimatorConfig,
                           group(values, "yaw_estimator"))
    return EstimatorSettings(config, initializer, _datum(values),
                             _imu_rotation(values["imu_rotation_xyzw"]), gnss_receiver, aiding,
                             yaw_estimator, frames=frames(values), inputs=input_options(values),
                             input_queue_depth=values["input_queue_depth"])


def input_options(values: Values) -> InputOptions:
    """The input profile options; ParameterError for a namespace that is not one."""
    for name in ("mavros_namespace", "px4_namespace"):
        try:
            namespace(values[name], name)
        except ValueError:
            raise invalid(name, values[name], "a ROS namespace such as /mavros") from None
    return InputOptions(values["inputs"], values["mavros_namespace"], values["px4_namespace"],
                        values["gnss_velocity_type"], values["gnss_velocity_sigma_mps"])


def frames(values: Values) -> tuple[str, str]:
    """(parent, child) of the odometry and /tf: the world frame (``world_frame``, empty:
    ``map_frame``) and ``base_frame``. ParameterError unless the world frame is
    ``map_frame`` or ``odom_frame`` and the three frames differ."""
    map_frame, odom_frame, base_frame = (values[name] for name in (
        "map_frame", "odom_frame", "base_frame"))
    world = values["world_frame"] or map_frame
    if odom_frame == map_frame:
        raise invalid("odom_frame", odom_frame, f"a frame other than map_frame '{map_frame}'")
    if base_frame in (map_frame, odom_frame):
        raise invalid("base_frame", base_frame, f"a frame other than map_frame '{map_frame}' "
                                                f"and odom_frame '{odom_frame}'")
    if world not in (map_frame, odom_frame):
        raise invalid("world_frame", world, f"map_frame '{map_frame}' or odom_frame "
                                            f"'{odom_frame}' (or empty: map_frame)")
    return world, base_frame


def _datum(values: Values) -> tuple[float, float, float] | None:
    latitude, longitude, height = (float(values[name]) for name in DATUM)
    if all(math.isnan(c) for c in (latitude, longitude, height)):
        return None
    for name in DATUM:
        if math.isnan(values[name]):
            raise invalid(name, values[name], "a number: the datum needs all three set or all "
                                              "NaN")
    return latitude, longitude, height


def _imu_rotation(q: tuple[float, ...]) -> NDArray[np.float64] | None:
    norm = math.sqrt(sum(c * c for c in q))
    if not abs(norm - 1.0) < 1e-6:
        raise invalid("imu_rotation_xyzw", q, "a unit quaternion [x, y, z, w]")
    if abs(abs(q[3]) - 1.0) < 1e-12:
        return None  # identity: the IMU frame is the body frame
    return np.asarray(quaternion.to_matrix(np.asarray(q, dtype=float)))


def _build(what: str, cls: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return cls(*args, **kwargs)
    except ValueError as error:
        raise ParameterError(f"invalid {what} parameter: {error}") from error
