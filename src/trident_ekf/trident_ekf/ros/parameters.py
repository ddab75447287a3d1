"""The estimator node's ROS parameters: declaration with descriptors, validation, core objects.

Every parameter is declared with a description (with units) and, for numbers, a range.
A value rclpy rejects, or one the core's own checks (``FilterConfig``, ``Initializer``)
refuse, stops the node with one ``ParameterError`` naming the parameter, the value and
what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer

FILTERS = {"trident": TridentEKF, "baseline": BaselineESKF}
_DEFAULTS = FilterConfig()
_TINY = 1e-12  # lower bound of "strictly positive" ranges


class ParameterError(ValueError):
    """A parameter value the estimator does not accept."""


@dataclass(frozen=True)
class Spec:
    """One parameter: name, default, description (with units) and numeric range."""

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(name=self.name, description=self.description)
        if self.low is None:
            return descriptor
        if isinstance(self.default, bool):
            return descriptor
        if isinstance(self.default, int):
            descriptor.integer_range = [IntegerRange(
                from_value=int(self.low), to_value=int(self.high), step=1)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(self.low), to_value=float(self.high), step=0.0)]
        return descriptor

    def allowed(self) -> str:
        if self.low is not None:
            return f"allowed [{self.low}, {self.high}]"
        return f"type {type(self.default).__name__}"


SPECS: tuple[Spec, ...] = (
    Spec("filter", "trident", f"estimator, one of {sorted(FILTERS)}"),
    # Noise model and robustness (FilterConfig fields, same names).
    Spec("gyro_noise", _DEFAULTS.gyro_noise, "gyro white noise density (rad/s/sqrt(Hz))",
         _TINY, 1.0),
    Spec("accel_noise", _DEFAULTS.accel_noise,
         "accelerometer white noise density (m/s^2/sqrt(Hz))", _TINY, 10.0),
    Spec("gyro_bias_walk", _DEFAULTS.gyro_bias_walk, "gyro bias random walk (rad/s/sqrt(s))",
         _TINY, 1.0),
    Spec("accel_bias_walk", _DEFAULTS.accel_bias_walk,
         "accelerometer bias random walk (m/s^2/sqrt(s))", _TINY, 10.0),
    Spec("lever_arm", [0.0, 0.0, 0.0],
         "GNSS antenna position relative to the IMU, body (base_link FLU) axes (m)"),
    Spec("covariance_decimation", _DEFAULTS.covariance_decimation,
         "IMU samples per covariance propagation (1 = every sample)", 1, 100),
    Spec("gate_probability", _DEFAULTS.gate_probability,
         "chi-square probability of the NIS gate of every update (0 disables gating)",
         0.0, 0.999999999),
    Spec("max_imu_interval", _DEFAULTS.max_imu_interval,
         "longest IMU interval integrated (s); longer gaps are counted and skipped", 1e-4, 10.0),
    Spec("outage_timeout", _DEFAULTS.outage_timeout,
         "time without an accepted GNSS update before the status reads outage (s)", 0.01, 3600.0),
    Spec("divergence_position_sigma", _DEFAULTS.divergence_position_sigma,
         "position sigma above which the status reads diverged (m)", 0.1, 1e7),
    Spec("max_consecutive_rejections", _DEFAULTS.max_consecutive_rejections,
         "gated GNSS fixes in a row that declare divergence", 1, 100000),
    Spec("reset_on_divergence", _DEFAULTS.reset_on_divergence,
         "on divergence reset position and velocity to GNSS (true) or stay diverged (false)"),
    Spec("history_length", _DEFAULTS.history_length,
         "how far back a late measurement is applied at its own stamp (s; 0 = never)",
         0.0, 10.0),
    Spec("barometer_height_offset", _DEFAULTS.barometer_height_offset,
         "barometric height + offset = ellipsoidal height of the IMU (m)", -1e4, 1e4),
    Spec("gnss_bias_sigma_horizontal", _DEFAULTS.gnss_bias_sigma_horizontal,
         "stationary sigma of the slowly varying GNSS error, east/north (m); with the vertical "
         "one > 0 it is estimated as a Gauss-Markov bias (3 more states); both 0 = white fixes",
         0.0, 100.0),
    Spec("gnss_bias_sigma_vertical", _DEFAULTS.gnss_bias_sigma_vertical,
         "stationary sigma of the slowly varying GNSS error, up (m); 0 with the horizontal one",
         0.0, 100.0),
    Spec("gnss_bias_correlation_time", _DEFAULTS.gnss_bias_correlation_time,
         "correlation time of that GNSS bias (s)", 0.1, 1e5),
    Spec("gnss_covariance_includes_bias", _DEFAULTS.gnss_covariance_includes_bias,
         "the fix covariance reports white + correlated error (true, as receivers do) or only "
         "the white part (false)"),
    Spec("gnss_white_sigma_floor", _DEFAULTS.gnss_white_sigma_floor,
         "smallest white GNSS position sigma left after removing the bias part (m)",
         1e-4, 100.0),
    # Initialization (Initializer).
    Spec("level_duration_s", 1.0, "static levelling window at the start (s)", 0.05, 60.0),
    Spec("initial_yaw_deg", 0.0, "initial ENU yaw (deg from east, counter-clockwise); NaN = "
         "GNSS course once faster than course_speed_mps, yaw 0 with a 180 deg sigma after "
         "course_timeout_s"),
    Spec("initial_yaw_sigma_deg", 60.0, "initial yaw sigma (deg)", 0.01, 180.0),
    Spec("course_speed_mps", 3.0, "GNSS ground speed above which the course gives yaw (m/s)",
         0.1, 100.0),
    Spec("course_timeout_s", 10.0, "wait for that speed before yaw 0 +- 180 deg (s)",
         0.1, 3600.0),
    Spec("initial_tilt_sigma_deg", 3.0, "initial roll/pitch sigma (deg)", 0.01, 90.0),
    Spec("initial_position_sigma_m", 3.0, "initial position sigma (m)", 0.01, 1e4),
    Spec("initial_velocity_sigma_mps", 0.5, "initial velocity sigma (m/s)", 0.001, 100.0),
    Spec("initial_gyro_bias_sigma", math.radians(0.5), "initial gyro bias sigma (rad/s)",
         1e-6, 1.0),
    Spec("initial_accel_bias_sigma", 0.1, "initial accelerometer bias sigma (m/s^2); covers "
         "the turn-on bias and any gravity-model mismatch", 1e-5, 10.0),
    # Sensors and frames.
    Spec("imu_rotation_xyzw", [0.0, 0.0, 0.0, 1.0],
         "orientation of the IMU frame in base_link, unit quaternion [x, y, z, w] (identity: "
         "the IMU frame is the body frame; base_link's origin is the IMU's)"),
    Spec("datum_latitude_deg", math.nan, "map (ENU) origin latitude (deg); NaN: first valid "
         "fix"),
    Spec("datum_longitude_deg", math.nan, "map origin longitude (deg); NaN: first valid fix"),
    Spec("datum_height_m", math.nan, "map origin ellipsoidal height (m); NaN: first valid fix"),
    Spec("use_magnetometer", False, "subscribe to magnetic_field (sensor_msgs/MagneticField, "
         "calibrated, IMU axes) and fuse it"),
    Spec("magnetic_field_ned", [0.0, 0.0, 0.0], "Earth field at the site, north/east/down (T, "
         "e.g. from the WMM); required with use_magnetometer"),
    Spec("magnetometer_sigma", 5e-7, "magnetometer noise per axis when a message has no "
         "covariance (T)", 1e-12, 1e-3),
    Spec("use_barometer", False, "subscribe to barometer/height (geometry_msgs/PointStamped, "
         "point.z = barometric height in m) and fuse it"),
    Spec("barometer_sigma", 0.5, "barometric height noise (m)", 1e-4, 100.0),
    Spec("output_rate_hz", 100.0, "odometry and /tf rate, decimated on IMU stamps (Hz)",
         0.1, 10000.0),
    Spec("diagnostics_rate_hz", 1.0, "/diagnostics rate on the node clock (Hz)", 0.01, 100.0),
    Spec("map_frame", "map", "ENU frame at the datum: odometry frame_id, /tf parent"),
    Spec("base_frame", "base_link", "body (FLU) frame: odometry child_frame_id, /tf child"),
    Spec("publish_tf", True, "publish map_frame -> base_frame on /tf"),
)

_CONFIG_FIELDS = ("gyro_noise", "accel_noise", "gyro_bias_walk", "accel_bias_walk",
                  "covariance_decimation", "gate_probability", "max_imu_interval",
                  "outage_timeout", "divergence_position_sigma", "max_consecutive_rejections",
                  "reset_on_divergence", "history_length", "barometer_height_offset",
                  "gnss_bias_sigma_horizontal", "gnss_bias_sigma_vertical",
                  "gnss_bias_correlation_time", "gnss_covariance_includes_bias",
                  "gnss_white_sigma_floor")


@dataclass(frozen=True)
class Settings:
    """The validated parameters as the node uses them."""

    filter: ErrorStateFilter
    initializer: Initializer
    datum: tuple[float, float, float] | None
    imu_rotation: np.ndarray | None
    values: dict[str, Any]


def declare(node: Node) -> Settings:
    """Declare every parameter on ``node`` and validate them; raises ``ParameterError``."""
    values = {}
    for spec in SPECS:
        try:
            node.declare_parameter(spec.name, spec.default, spec.descriptor())
        except (InvalidParameterTypeException, InvalidParameterValueException) as error:
            raise ParameterError(f"parameter '{spec.name}': {error} ({spec.allowed()}; "
                                 f"{spec.description})") from None
        values[spec.name] = node.get_parameter(spec.name).value
    return settings_from(values)


def settings_from(values: dict[str, Any]) -> Settings:
    """Build the filter, initializer, datum and IMU rotation from parameter values."""
    if values["filter"] not in FILTERS:
        _fail("filter", values["filter"], f"one of {sorted(FILTERS)}")
    for name in ("lever_arm", "magnetic_field_ned"):
        if len(values[name]) != 3 or not all(math.isfinite(c) for c in values[name]):
            _fail(name, values[name], "3 finite numbers")
    field = tuple(float(c) for c in values["magnetic_field_ned"])
    if values["use_magnetometer"] and not any(field):
        _fail("magnetic_field_ned", list(field), "a non-zero field (T) with use_magnetometer")
    config = _build("filter configuration", FilterConfig, **{
        name: values[name] for name in _CONFIG_FIELDS},
        lever_arm=tuple(float(c) for c in values["lever_arm"]),
        magnetic_field_ned=field if values["use_magnetometer"] else None)
    yaw = values["initial_yaw_deg"]
    initializer = _build(
        "initialization", Initializer, level_duration=values["level_duration_s"],
        yaw=None if math.isnan(yaw) else math.radians(yaw),
        course_speed=values["course_speed_mps"], course_timeout=values["course_timeout_s"],
        yaw_sigma=math.radians(values["initial_yaw_sigma_deg"]),
        tilt_sigma=math.radians(values["initial_tilt_sigma_deg"]),
        position_sigma=values["initial_position_sigma_m"],
        velocity_sigma=values["initial_velocity_sigma_mps"],
        gyro_bias_sigma=values["initial_gyro_bias_sigma"],
        accel_bias_sigma=values["initial_accel_bias_sigma"])
    return Settings(FILTERS[values["filter"]](config), initializer, _datum(values),
                    _imu_rotation(values["imu_rotation_xyzw"]), values)


def _datum(values: dict[str, Any]) -> tuple[float, float, float] | None:
    names = ("datum_latitude_deg", "datum_longitude_deg", "datum_height_m")
    datum = tuple(float(values[name]) for name in names)
    if all(math.isnan(c) for c in datum):
        return None
    limits = ((-90.0, 90.0), (-180.0, 360.0), (-1e4, 1e5))
    for name, value, (low, high) in zip(names, datum, limits, strict=True):
        if not low <= value <= high:  # also NaN when only some are set
            _fail(name, value, f"[{low}, {high}], all three set or all NaN")
    return datum


def _imu_rotation(q: list[float]) -> np.ndarray | None:
    norm = math.sqrt(sum(c * c for c in q)) if len(q) == 4 else math.nan
    if not abs(norm - 1.0) < 1e-6:
        _fail("imu_rotation_xyzw", q, "a unit quaternion [x, y, z, w]")
    if abs(abs(q[3]) - 1.0) < 1e-12:
        return None  # identity: the IMU frame is the body frame
    return np.asarray(quaternion.to_matrix(np.asarray(q, dtype=float)))


def _build(what: str, cls: type, **kwargs: Any) -> Any:
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ParameterError(f"invalid {what} parameter: {error}") from error


def _fail(name: str, value: Any, allowed: str) -> None:
    raise ParameterError(f"parameter '{name}' = {value!r} is invalid (allowed: {allowed})")
