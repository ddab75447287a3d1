"""The simulator node's parameters and the settings built from them.

Read-only (the simulator is built from them): ``vehicle_file``, ``vehicles``,
``vehicle_spacing_m``, ``scenario``, ``integrator``,
``physics_rate_hz``, ``seed``, the initial pose, ``lockstep_period_s`` (the boundary
spacing), ``datum``, the IMU and GNSS rates, ``gnss_latency_s``, the sensor mounts
(``imu_mount_*``, ``gnss_antenna_position``; /tf_static carries them) and the optional
sensors: ``<sensor>.enabled`` and ``<sensor>.<setting>`` for the barometer and the
magnetometer, one parameter per field of their config (``mav_geometry.settings``).

Dynamic: the run (``duration_s``, ``start_wait_s``, ``lockstep``, ``lockstep_timeout_s``,
``real_time_factor``), the output rates (ground truth, markers, diagnostics: each must still
divide the physics rate), ``marker_length_per_newton``, the IMU and GNSS error models
(noise, bias walk and instability, turn-on sigmas, correlation times, ranges, outage
schedule, ``gnss_publish_during_outage``) and the fault sizes of the injection services.

Every bad value, and any the core's own checks (``SimulatorConfig``, the sensor configs)
refuse, is one ``ParameterError`` naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mav_geometry.settings import configure
from mav_ros_common.parameters import (
    ParameterError,
    ParameterSpec,
    Values,
    config_specs,
    group,
    show,
)
from variational_sim.sensors.gnss import GnssConfig
from variational_sim.sensors.imu import ImuConfig
from variational_sim.sensors.optional import OPTIONAL_SENSORS
from variational_sim.vehicle_sim.plant import INTEGRATORS
from variational_sim.vehicle_sim.simulator import SimulatorConfig
from variational_sim.vehicle_sim.simulator import steps_per_period as core_steps_per_period

_IMU = ImuConfig()
_GNSS = GnssConfig()
_POSITIVE = 1e-12
Vector3 = tuple[float, float, float]

SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec("vehicle_file", "quadrotor_x.yaml",
                  "vehicle file: a path (absolute or from the working directory) or a name in "
                  "the bringup's config/vehicles/", read_only=True),
    ParameterSpec("vehicles", "", "several vehicles in one simulator: comma-separated vehicle "
                  "files (names or paths), vehicle k (from 1) in namespace uav<k> (topics "
                  "uav<k>/imu/data..., frames uav<k>/base_link...); empty = one vehicle, "
                  "vehicle_file, no namespace", read_only=True, allow_empty=True),
    ParameterSpec("vehicle_spacing_m", 3.0, "with several vehicles, vehicle k starts "
                  "(k - 1) times this east of initial_position", "m", 0.0, 1000.0,
                  read_only=True),
    ParameterSpec("scenario", "calm", "scenario file with the wind and the timed faults of the "
                  "flight: a path or a name in the bringup's config/scenarios/ (calm: still "
                  "air, no faults)", read_only=True),
    ParameterSpec("integrator", "dqvi", "rigid-body integrator",
                  choices=tuple(sorted(INTEGRATORS)), read_only=True),
    ParameterSpec("physics_rate_hz", 1000.0, "physics step rate", "Hz", 100.0, 10000.0,
                  read_only=True),
    ParameterSpec("duration_s", 0.0, "sim time to run before finishing; 0 = forever", "s",
                  0.0, 1e7),
    ParameterSpec("seed", 0, "sensor-noise seed", "", 0, 2**31 - 1, read_only=True),
    ParameterSpec("initial_position", [0.0, 0.0, 0.0],
                  "start position of base_link in map (ENU); the ground plane is at its z", "m",
                  length=3, read_only=True),
    ParameterSpec("initial_yaw", 0.0, "start heading about map z", "rad", -2.0 * math.pi,
                  2.0 * math.pi, read_only=True),
    ParameterSpec("start_wait_s", 0.0, "wall time to hold t = 0 until the IMU has a subscriber "
                  "and, with lockstep, the actuator commands a publisher; 0 = start at once",
                  "s", 0.0, 3600.0),
    ParameterSpec("lockstep", True, "wait at each lock-step boundary for an actuator command"),
    ParameterSpec("lockstep_period_s", 0.01, "lock-step boundary period; a multiple of the "
                  "physics step and of the IMU period", "s", 1e-4, 1.0, read_only=True),
    ParameterSpec("lockstep_timeout_s", 0.25, "wall time to wait for a command at a boundary "
                  "before going on with the held one", "s", 1e-3, 3600.0),
    ParameterSpec("real_time_factor", 1.0, "pace sim time at this multiple of wall time; "
                  "0 = as fast as possible", "", 0.0, 1000.0),
    ParameterSpec("ground_truth_rate_hz", 100.0, "ground truth odometry and /tf rate; divides "
                  "the physics rate", "Hz", 0.1, 10000.0),
    ParameterSpec("markers_rate_hz", 10.0, "rotor thrust markers and rotor speeds rate; "
                  "divides the physics rate", "Hz", 0.1, 10000.0),
    ParameterSpec("diagnostics_rate_hz", 1.0, "/diagnostics rate; divides the physics rate",
                  "Hz", 0.1, 1000.0),
    ParameterSpec("marker_length_per_newton", 0.05, "thrust arrow length per newton", "m/N",
                  0.0, 10.0),
    ParameterSpec("datum", list(_GNSS.datum), "ENU origin of map: latitude (deg), longitude "
                  "(deg), ellipsoid height (m)", "deg, deg, m", length=3, read_only=True),
    ParameterSpec("imu_rate_hz", _IMU.rate_hz, "IMU sample rate; divides the physics rate",
                  "Hz", 1.0, 10000.0, read_only=True),
    ParameterSpec("imu_gyro_noise_density", _IMU.gyro_noise_density, "gyro white noise",
                  "rad/s/sqrt(Hz)", 0.0, 1.0),
    ParameterSpec("imu_accel_noise_density", _IMU.accel_noise_density,
                  "accelerometer white noise", "m/s^2/sqrt(Hz)", 0.0, 10.0),
    ParameterSpec("imu_gyro_bias_walk", _IMU.gyro_bias_walk, "gyro bias random walk",
                  "rad/s/sqrt(s)", 0.0, 1.0),
    ParameterSpec("imu_accel_bias_walk", _IMU.accel_bias_walk,
                  "accelerometer bias random walk", "m/s^2/sqrt(s)", 0.0, 10.0),
    ParameterSpec("imu_gyro_turn_on_sigma", _IMU.gyro_turn_on_sigma, "gyro turn-on bias sigma "
                  "(drawn at start and at ~/reset)", "rad/s", 0.0, 1.0),
    ParameterSpec("imu_accel_turn_on_sigma", _IMU.accel_turn_on_sigma, "accelerometer turn-on "
                  "bias sigma (drawn at start and at ~/reset)", "m/s^2", 0.0, 10.0),
    ParameterSpec("imu_gyro_bias_instability", _IMU.gyro_bias_instability,
                  "gyro bias instability, Gauss-Markov sigma", "rad/s", 0.0, 1.0),
    ParameterSpec("imu_accel_bias_instability", _IMU.accel_bias_instability,
                  "accelerometer bias instability, Gauss-Markov sigma", "m/s^2", 0.0, 10.0),
    ParameterSpec("imu_bias_correlation_time_s", _IMU.bias_correlation_time_s,
                  "bias instability correlation time", "s", 1.0, 1e6),
    ParameterSpec("imu_gyro_range", _IMU.gyro_range, "gyro saturation", "rad/s", 1.0, 1000.0),
    ParameterSpec("imu_accel_range", _IMU.accel_range, "accelerometer saturation", "m/s^2",
                  10.0, 10000.0),
    ParameterSpec("imu_mount_position", list(_IMU.mount_position_m),
                  "imu_link origin in base_link", "m", length=3, read_only=True),
    ParameterSpec("imu_mount_rotation_xyzw", list(_IMU.mount_rotation_xyzw),
                  "imu_link orientation in base_link, unit quaternion [x, y, z, w]", length=4,
                  read_only=True),
    ParameterSpec("gnss_rate_hz", _GNSS.rate_hz, "GNSS fix rate; divides the physics rate",
                  "Hz", 0.1, 100.0, read_only=True),
    ParameterSpec("gnss_latency_s", _GNSS.latency_s, "GNSS publication latency after the fix "
                  "time", "s", 0.0, 10.0, read_only=True),
    ParameterSpec("gnss_horizontal_sigma_m", _GNSS.horizontal_sigma_m,
                  "GNSS white horizontal position noise", "m", _POSITIVE, 100.0),
    ParameterSpec("gnss_vertical_sigma_m", _GNSS.vertical_sigma_m,
                  "GNSS white vertical position noise", "m", _POSITIVE, 100.0),
    ParameterSpec("gnss_correlated_horizontal_sigma_m", _GNSS.correlated_horizontal_sigma_m,
                  "GNSS Gauss-Markov horizontal error sigma", "m", 0.0, 100.0),
    ParameterSpec("gnss_correlated_vertical_sigma_m", _GNSS.correlated_vertical_sigma_m,
                  "GNSS Gauss-Markov vertical error sigma", "m", 0.0, 100.0),
    ParameterSpec("gnss_correlation_time_s", _GNSS.correlation_time_s,
                  "GNSS Gauss-Markov correlation time", "s", 1e-3, 1e6),
    ParameterSpec("gnss_velocity_sigma_mps", _GNSS.velocity_sigma_mps, "GNSS velocity noise",
                  "m/s", _POSITIVE, 100.0),
    ParameterSpec("gnss_antenna_position", list(_GNSS.antenna_position_m),
                  "gnss_link (antenna) origin in base_link", "m", length=3, read_only=True),
    ParameterSpec("gnss_outages", None, "scheduled GNSS outages as a flat list [start_s, "
                  "end_s, start_s, end_s, ...] in sim time; unset or [] = none", "s",
                  length_multiple=2, min_length=0),
    ParameterSpec("gnss_publish_during_outage", _GNSS.publish_during_outage,
                  "during outages publish NO_FIX messages (true) or nothing (false)"),
    ParameterSpec("fault_gnss_outage_s", 5.0, "duration of an outage injected by "
                  "~/inject_gnss_outage", "s", 1e-3, 1e6),
    ParameterSpec("fault_imu_spike_gyro", [0.0, 0.0, 2.0],
                  "rate added once by ~/inject_imu_spike (imu_link)", "rad/s", length=3),
    ParameterSpec("fault_imu_spike_accel", [0.0, 0.0, 30.0],
                  "specific force added once by ~/inject_imu_spike (imu_link)", "m/s^2",
                  length=3),
)

def _optional_sensor_specs() -> list[ParameterSpec]:
    specs = []
    for name, optional in OPTIONAL_SENSORS.items():
        specs.append(ParameterSpec(f"{name}.enabled", False, f"fit a {name}: "
                                   f"{optional.publishes}", read_only=True))
        specs += config_specs(name, optional.config)
    return specs


SPECS += tuple(_optional_sensor_specs())


def _optional_sensor(values: Values, name: str) -> Any:
    """The config of an enabled optional sensor, None when it is not fitted."""
    if not values[f"{name}.enabled"]:
        return None
    try:
        return configure(OPTIONAL_SENSORS[name].config, group(values, name))
    except ValueError as error:
        field, _, reason = str(error).partition(" ")
        raise ParameterError(f"parameter '{name}.{field}' {reason}", f"{name}.{field}") from None


@dataclass(frozen=True)
class SimulatorSettings:
    """What the node runs with: the core's configuration (``vehicle_file`` as given; the
    node resolves it) and the publication periods in physics steps."""

    config: SimulatorConfig
    truth_every: int
    markers_every: int
    diagnostics_every: int
    boundary_every: int
    """Physics steps per lock-step boundary."""
    vehicles: tuple[str, ...] = ()
    """Vehicle files of a multi-vehicle run (empty: the one of ``config``)."""
    vehicle_spacing_m: float = 3.0


def _outages(values: Values) -> tuple[tuple[float, float], ...]:
    flat = values["gnss_outages"] or ()
    pairs = tuple(zip(flat[::2], flat[1::2], strict=True))
    if any(not 0.0 <= start < end for start, end in pairs):
        raise ParameterError(f"parameter 'gnss_outages' = {list(flat)}: must be pairs start_s, "
                             "end_s with 0 <= start < end (s)", "gnss_outages")
    return pairs


def _vector3(values: Values, name: str) -> Vector3:
    x, y, z = values[name]
    return (x, y, z)


def simulator_config(values: Values) -> SimulatorConfig:
    """The core's configuration from validated values (errors name the parameter)."""
    try:
        x, y, z, w = values["imu_mount_rotation_xyzw"]
        imu = ImuConfig(
            rate_hz=values["imu_rate_hz"],
            gyro_noise_density=values["imu_gyro_noise_density"],
            accel_noise_density=values["imu_accel_noise_density"],
            gyro_bias_walk=values["imu_gyro_bias_walk"],
            accel_bias_walk=values["imu_accel_bias_walk"],
            gyro_turn_on_sigma=values["imu_gyro_turn_on_sigma"],
            accel_turn_on_sigma=values["imu_accel_turn_on_sigma"],
            gyro_bias_instability=values["imu_gyro_bias_instability"],
            accel_bias_instability=values["imu_accel_bias_instability"],
            bias_correlation_time_s=values["imu_bias_correlation_time_s"],
            gyro_range=values["imu_gyro_range"],
            accel_range=values["imu_accel_range"],
            mount_rotation_xyzw=(x, y, z, w),
            mount_position_m=_vector3(values, "imu_mount_position"),
        )
        gnss = GnssConfig(
            rate_hz=values["gnss_rate_hz"],
            latency_s=values["gnss_latency_s"],
            horizontal_sigma_m=values["gnss_horizontal_sigma_m"],
            vertical_sigma_m=values["gnss_vertical_sigma_m"],
            correlated_horizontal_sigma_m=values["gnss_correlated_horizontal_sigma_m"],
            correlated_vertical_sigma_m=values["gnss_correlated_vertical_sigma_m"],
            correlation_time_s=values["gnss_correlation_time_s"],
            velocity_sigma_mps=values["gnss_velocity_sigma_mps"],
            antenna_position_m=_vector3(values, "gnss_antenna_position"),
            datum=_vector3(values, "datum"),
            outages=_outages(values),
            publish_during_outage=values["gnss_publish_during_outage"],
        )
        return SimulatorConfig(
            vehicle_file=values["vehicle_file"],
            integrator=values["integrator"],
            physics_rate_hz=values["physics_rate_hz"],
            seed=values["seed"],
            initial_position=_vector3(values, "initial_position"),
            initial_yaw=values["initial_yaw"],
            imu=imu,
            gnss=gnss,
            **{name: _optional_sensor(values, name) for name in OPTIONAL_SENSORS},
        )
    except ParameterError:
        raise
    except ValueError as error:
        raise ParameterError(f"parameter {_with_parameter_name(str(error))}") from None


_RENAMED_FIELDS = {"imu_mount_position_m": "imu_mount_position",
                   "gnss_antenna_position_m": "gnss_antenna_position", "gnss_datum": "datum"}
_CONFIG_FIELD = re.compile(r"^(ImuConfig|GnssConfig|imu|gnss)\.(\w+)")


def _with_parameter_name(message: str) -> str:
    """A core error naming a sensor config field (``ImuConfig.rate_hz``, ``imu.rate_hz``)
    rewritten to name the ROS parameter (``imu_rate_hz``)."""
    match = _CONFIG_FIELD.match(message)
    if match is None:
        return message
    prefix = "imu_" if match.group(1).lower().startswith("imu") else "gnss_"
    name = prefix + match.group(2)
    return _RENAMED_FIELDS.get(name, name) + message[match.end():]


def steps_per_period(name: str, rate_hz: float, physics_rate_hz: float) -> int:
    """Physics steps per period of a publisher at ``rate_hz`` (must divide the physics rate)."""
    try:
        return core_steps_per_period(name, rate_hz, physics_rate_hz)
    except ValueError as error:
        raise ParameterError(f"parameter {error}", name) from None


def lockstep_steps(values: Values, imu_steps: int) -> int:
    """Physics steps per lock-step period: a whole number of steps and of IMU periods."""
    period: float = values["lockstep_period_s"]
    rate: float = values["physics_rate_hz"]
    steps = round(period * rate)
    if steps < 1 or abs(steps - period * rate) > 1e-6 or steps % imu_steps:
        raise ParameterError(f"parameter 'lockstep_period_s' = {show(period)}: must be a "
                             f"multiple of the physics step ({1.0 / rate} s) and of the IMU "
                             f"period ({imu_steps / rate} s)", "lockstep_period_s")
    return steps


def simulator_settings(values: Values) -> SimulatorSettings:
    """Settings from validated values: the core's checks and the publication periods."""
    config = simulator_config(values)
    rate = config.physics_rate_hz
    imu_steps = steps_per_period("imu_rate_hz", config.imu.rate_hz, rate)
    return SimulatorSettings(
        config=config,
        truth_every=steps_per_period("ground_truth_rate_hz", values["ground_truth_rate_hz"],
                                     rate),
        markers_every=steps_per_period("markers_rate_hz", values["markers_rate_hz"], rate),
        diagnostics_every=steps_per_period("diagnostics_rate_hz", values["diagnostics_rate_hz"],
                                           rate),
        boundary_every=lockstep_steps(values, imu_steps),
        vehicles=vehicle_files(values["vehicles"]),
        vehicle_spacing_m=values["vehicle_spacing_m"])


MAX_VEHICLES = 64


def vehicle_files(text: str) -> tuple[str, ...]:
    """The vehicle files of the ``vehicles`` parameter (ParameterError: an empty entry or
    more than ``MAX_VEHICLES``)."""
    if not text.strip():
        return ()
    files = tuple(entry.strip() for entry in text.split(","))
    if not all(files) or len(files) > MAX_VEHICLES:
        raise ParameterError(f"parameter 'vehicles' = {show(text)} is invalid: allowed 1 to "
                             f"{MAX_VEHICLES} comma-separated vehicle files, none empty",
                             "vehicles")
    return files
