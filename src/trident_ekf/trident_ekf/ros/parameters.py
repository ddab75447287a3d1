"""The estimator node's parameters and the settings built from them.

Read-only (the filter and its inputs are built from them): ``filter``, the GNSS bias model
(``gnss_bias_sigma_*``, ``gnss_bias_correlation_time``: they size the state), every
initialization parameter (used once, when the filter starts), ``imu_rotation_xyzw``, the
map datum, the GNSS noise model ``gnss.*`` and every aiding source's ``<source>.enabled``
and ``<source>.<setting>`` (one group per source registered in ``core.measurements``,
generated from its config dataclass: units and ranges come from there).

Dynamic: the IMU noise model, ``lever_arm``, the gate, decimation, timeouts, divergence and
history settings of the filter (``FilterConfig``, taken from the next sample on), the output
and diagnostics rates, the frame names and ``publish_tf``.

A value rclpy refuses, or one the core's own checks (``FilterConfig``, ``Initializer``)
refuse, is one ``ParameterError`` naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mav_geometry import quaternion
from mav_ros_common.parameters import ParameterError, ParameterSpec, Values, invalid
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import REGISTRY
from trident_ekf.core.measurements.base import configure
from trident_ekf.core.measurements.gnss import GnssConfig

FILTERS: dict[str, type[ErrorStateFilter]] = {"trident": TridentEKF, "baseline": BaselineESKF}
_DEFAULTS = FilterConfig()
_TINY = 1e-12  # lower bound of "strictly positive" ranges
CONFIG_FIELDS = ("gyro_noise", "accel_noise", "gyro_bias_walk", "accel_bias_walk",
                 "covariance_decimation", "gate_probability", "max_imu_interval",
                 "outage_timeout", "divergence_position_sigma", "max_consecutive_rejections",
                 "reset_on_divergence", "history_length", "gnss_bias_sigma_horizontal",
                 "gnss_bias_sigma_vertical",
                 "gnss_bias_correlation_time", "gnss_covariance_includes_bias",
                 "gnss_white_sigma_floor")
"""Parameters that are ``FilterConfig`` fields of the same name."""
DATUM = ("datum_latitude_deg", "datum_longitude_deg", "datum_height_m")

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
    ParameterSpec("lever_arm", [0.0, 0.0, 0.0], "GNSS antenna position relative to the IMU, "
                  "body (base_link FLU) axes", "m", length=3),
    ParameterSpec("covariance_decimation", _DEFAULTS.covariance_decimation,
                  "IMU samples per covariance propagation (1 = every sample)", "", 1, 100),
    ParameterSpec("gate_probability", _DEFAULTS.gate_probability,
                  "chi-square probability of the NIS gate of every update (0 disables gating)",
                  "", 0.0, 0.999999999),
    ParameterSpec("max_imu_interval", _DEFAULTS.max_imu_interval, "longest IMU interval "
                  "integrated; longer gaps are counted and skipped", "s", 1e-4, 10.0),
    ParameterSpec("outage_timeout", _DEFAULTS.outage_timeout, "time without an accepted GNSS "
                  "update before the status reads outage", "s", 0.01, 3600.0),
    ParameterSpec("divergence_position_sigma", _DEFAULTS.divergence_position_sigma,
                  "position sigma above which the status reads diverged", "m", 0.1, 1e7),
    ParameterSpec("max_consecutive_rejections", _DEFAULTS.max_consecutive_rejections,
                  "gated GNSS fixes in a row that declare divergence", "", 1, 100000),
    ParameterSpec("reset_on_divergence", _DEFAULTS.reset_on_divergence,
                  "on divergence reset position and velocity to GNSS (true) or stay diverged "
                  "(false)"),
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
    ParameterSpec("level_duration_s", 1.0, "static levelling window at the start", "s", 0.05,
                  60.0, read_only=True),
    ParameterSpec("initial_yaw_deg", 0.0, "initial ENU yaw (from east, counter-clockwise); "
                  "NaN = GNSS course once faster than course_speed_mps, yaw 0 with a 180 deg "
                  "sigma after course_timeout_s", "deg", allow_nan=True, read_only=True),
    ParameterSpec("initial_yaw_sigma_deg", 60.0, "initial yaw sigma", "deg", 0.01, 180.0,
                  read_only=True),
    ParameterSpec("course_speed_mps", 3.0, "GNSS ground speed above which the course gives "
                  "yaw", "m/s", 0.1, 100.0, read_only=True),
    ParameterSpec("course_timeout_s", 10.0, "wait for that speed before yaw 0 +- 180 deg", "s",
                  0.1, 3600.0, read_only=True),
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
    ParameterSpec("map_frame", "map", "ENU frame at the datum: odometry frame_id, /tf parent"),
    ParameterSpec("base_frame", "base_link", "body (FLU) frame: odometry child_frame_id, /tf "
                  "child"),
    ParameterSpec("publish_tf", True, "publish map_frame -> base_frame on /tf"),
)




def config_specs(prefix: str, config_class: type[Any]) -> list[ParameterSpec]:
    """Read-only parameters ``<prefix>.<field>`` from a config dataclass made with
    ``core.measurements.base.setting`` (description, unit, range, choices)."""
    specs = []
    for item in fields(config_class):
        meta = item.metadata
        default: Any = item.default
        specs.append(ParameterSpec(
            f"{prefix}.{item.name}", list(default) if isinstance(default, tuple) else default,
            meta["doc"], meta["unit"], meta["low"], meta["high"], meta["choices"],
            read_only=True, length=len(default) if isinstance(default, tuple) else None,
            allow_nan=meta["allow_nan"]))
    return specs


def aiding_specs() -> list[ParameterSpec]:
    """``gnss.*`` and, per registered optional source, ``<source>.enabled`` and its
    settings."""
    specs = config_specs("gnss", GnssConfig)
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


def estimator_settings(values: Values) -> EstimatorSettings:
    """Settings from validated values; ParameterError if the core refuses them."""
    config = _build("filter configuration", FilterConfig, **{
        name: values[name] for name in CONFIG_FIELDS}, lever_arm=values["lever_arm"])
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
    gnss_receiver = _build("gnss", configure, GnssConfig, _group(values, "gnss"))
    aiding = {name: _build(name, configure, registration.config, _group(values, name))
              for name, registration in REGISTRY.items() if values[f"{name}.enabled"]}
    return EstimatorSettings(config, initializer, _datum(values),
                             _imu_rotation(values["imu_rotation_xyzw"]), gnss_receiver, aiding)


def _group(values: Values, prefix: str) -> dict[str, Any]:
    """The ``<prefix>.<field>`` values (except ``enabled``) as field -> value."""
    start = f"{prefix}."
    return {name[len(start):]: value for name, value in values.items()
            if name.startswith(start) and name != f"{prefix}.enabled"}


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
