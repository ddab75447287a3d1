"""The simulator node's ROS parameters: declaration with descriptors, and validation.

Every parameter is declared with a description (with units) and, for numbers, a
``FloatingPointRange`` / ``IntegerRange``. A value rclpy rejects, or one that fails the
core's own checks (``SimulatorConfig``), stops the node with one ``ParameterError`` naming
the parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from variational_sim.sensors.gnss import GnssConfig
from variational_sim.sensors.imu import ImuConfig
from variational_sim.vehicle_sim.plant import INTEGRATORS
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator
from variational_sim.vehicle_sim.simulator import steps_per_period as core_steps_per_period

_IMU = ImuConfig()
_GNSS = GnssConfig()


class ParameterError(ValueError):
    """A parameter value outside what the simulator accepts."""


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
        if self.low is not None and self.high is not None:
            if isinstance(self.default, int) and not isinstance(self.default, bool):
                descriptor.integer_range = [IntegerRange(
                    from_value=int(self.low), to_value=int(self.high), step=1)]
            elif isinstance(self.default, float):
                descriptor.floating_point_range = [FloatingPointRange(
                    from_value=float(self.low), to_value=float(self.high), step=0.0)]
        return descriptor

    def allowed(self) -> str:
        """What the parameter accepts, for error messages."""
        if self.low is not None and self.high is not None:
            kind = "float" if isinstance(self.default, float) else "integer"
            return f"allowed {kind} in [{self.low}, {self.high}]"
        if isinstance(self.default, Parameter.Type):
            return f"type {self.default.name.lower()}"
        return f"type {type(self.default).__name__}"


_POSITIVE = 1e-12
SPECS: tuple[Spec, ...] = (
    Spec("vehicle_file", "quadrotor_x.yaml",
         "vehicle file: path (absolute or relative to the cwd) or a name in config/vehicles/"),
    Spec("integrator", "dqvi", f"rigid-body integrator, one of {sorted(INTEGRATORS)}"),
    Spec("physics_rate_hz", 1000.0, "physics step rate (Hz)", 100.0, 10000.0),
    Spec("duration_s", 0.0, "sim time to run before finishing (s); 0 = forever", 0.0, 1e7),
    Spec("seed", 0, "sensor-noise seed (integer >= 0)", 0, 2**31 - 1),
    Spec("initial_position", [0.0, 0.0, 0.0],
         "start position of base_link in map (m, ENU); the ground plane is at its z"),
    Spec("initial_yaw", 0.0, "start heading about map z (rad)", -2.0 * math.pi, 2.0 * math.pi),
    Spec("lockstep", True, "wait at each lockstep boundary for an actuator command"),
    Spec("lockstep_period_s", 0.01, "lock-step boundary period (s); a multiple of the physics "
         "step and of the IMU period", 1e-4, 1.0),
    Spec("lockstep_timeout_s", 0.25, "wall time to wait for a command at a boundary before "
         "continuing with the held one (s)", 1e-3, 3600.0),
    Spec("real_time_factor", 1.0, "pace sim time at this multiple of wall time; 0 = as fast "
         "as possible", 0.0, 1000.0),
    Spec("ground_truth_rate_hz", 100.0, "ground truth odometry and /tf rate (Hz)",
         0.1, 10000.0),
    Spec("markers_rate_hz", 10.0, "rotor thrust markers and rotor speeds rate (Hz)", 0.1,
         10000.0),
    Spec("diagnostics_rate_hz", 1.0, "/diagnostics rate (Hz)", 0.1, 1000.0),
    Spec("marker_length_per_newton", 0.05, "thrust arrow length per newton (m/N)", 0.0, 10.0),
    Spec("datum", list(_GNSS.datum),
         "ENU origin of map: latitude (deg), longitude (deg), ellipsoid height (m)"),
    Spec("imu_rate_hz", _IMU.rate_hz, "IMU sample rate (Hz); divides the physics rate",
         1.0, 10000.0),
    Spec("imu_gyro_noise_density", _IMU.gyro_noise_density, "gyro white noise (rad/s/sqrt(Hz))",
         0.0, 1.0),
    Spec("imu_accel_noise_density", _IMU.accel_noise_density,
         "accelerometer white noise (m/s^2/sqrt(Hz))", 0.0, 10.0),
    Spec("imu_gyro_bias_walk", _IMU.gyro_bias_walk, "gyro bias random walk (rad/s/sqrt(s))",
         0.0, 1.0),
    Spec("imu_accel_bias_walk", _IMU.accel_bias_walk,
         "accelerometer bias random walk (m/s^2/sqrt(s))", 0.0, 10.0),
    Spec("imu_gyro_turn_on_sigma", _IMU.gyro_turn_on_sigma, "gyro turn-on bias sigma (rad/s)",
         0.0, 1.0),
    Spec("imu_accel_turn_on_sigma", _IMU.accel_turn_on_sigma,
         "accelerometer turn-on bias sigma (m/s^2)", 0.0, 10.0),
    Spec("imu_gyro_bias_instability", _IMU.gyro_bias_instability,
         "gyro bias instability, Gauss-Markov sigma (rad/s)", 0.0, 1.0),
    Spec("imu_accel_bias_instability", _IMU.accel_bias_instability,
         "accelerometer bias instability, Gauss-Markov sigma (m/s^2)", 0.0, 10.0),
    Spec("imu_bias_correlation_time_s", _IMU.bias_correlation_time_s,
         "bias instability correlation time (s)", 1.0, 1e6),
    Spec("imu_gyro_range", _IMU.gyro_range, "gyro saturation (rad/s)", 1.0, 1000.0),
    Spec("imu_accel_range", _IMU.accel_range, "accelerometer saturation (m/s^2)", 10.0, 10000.0),
    Spec("imu_mount_position", list(_IMU.mount_position_m), "imu_link origin in base_link (m)"),
    Spec("imu_mount_rotation_xyzw", list(_IMU.mount_rotation_xyzw),
         "imu_link orientation in base_link, unit quaternion [x, y, z, w]"),
    Spec("gnss_rate_hz", _GNSS.rate_hz, "GNSS fix rate (Hz); divides the physics rate",
         0.1, 100.0),
    Spec("gnss_latency_s", _GNSS.latency_s, "GNSS publication latency after the fix time (s)",
         0.0, 10.0),
    Spec("gnss_horizontal_sigma_m", _GNSS.horizontal_sigma_m,
         "GNSS white horizontal position noise (m)", _POSITIVE, 100.0),
    Spec("gnss_vertical_sigma_m", _GNSS.vertical_sigma_m, "GNSS white vertical noise (m)",
         _POSITIVE, 100.0),
    Spec("gnss_correlated_horizontal_sigma_m", _GNSS.correlated_horizontal_sigma_m,
         "GNSS Gauss-Markov horizontal error sigma (m)", 0.0, 100.0),
    Spec("gnss_correlated_vertical_sigma_m", _GNSS.correlated_vertical_sigma_m,
         "GNSS Gauss-Markov vertical error sigma (m)", 0.0, 100.0),
    Spec("gnss_correlation_time_s", _GNSS.correlation_time_s,
         "GNSS Gauss-Markov correlation time (s)", 1e-3, 1e6),
    Spec("gnss_velocity_sigma_mps", _GNSS.velocity_sigma_mps, "GNSS velocity noise (m/s)",
         _POSITIVE, 100.0),
    Spec("gnss_antenna_position", list(_GNSS.antenna_position_m),
         "gnss_link (antenna) origin in base_link (m)"),
    Spec("gnss_outages", Parameter.Type.DOUBLE_ARRAY,
         "scheduled GNSS outages as a flat list [start_s, end_s, start_s, end_s, ...] (s); "
         "unset or [] = none"),
    Spec("gnss_publish_during_outage", _GNSS.publish_during_outage,
         "during outages publish NO_FIX messages (true) or nothing (false)"),
    Spec("fault_gnss_outage_s", 5.0, "duration of an outage injected by ~/inject_gnss_outage (s)",
         1e-3, 1e6),
    Spec("fault_imu_spike_gyro", [0.0, 0.0, 2.0],
         "rate added once by ~/inject_imu_spike (rad/s, imu_link)"),
    Spec("fault_imu_spike_accel", [0.0, 0.0, 30.0],
         "specific force added once by ~/inject_imu_spike (m/s^2, imu_link)"),
)


def declare(node: Node) -> dict[str, Any]:
    """Declare every parameter of ``SPECS`` on ``node``; return name -> value."""
    values = {}
    for spec in SPECS:
        try:
            parameter = node.declare_parameter(spec.name, spec.default, spec.descriptor())
        except InvalidParameterValueException as error:
            raise ParameterError(f"parameter '{spec.name}': {error} ({spec.allowed()})") from None
        except InvalidParameterTypeException as error:
            hint = " (write a decimal point, e.g. 5.0)" if isinstance(spec.default, float) else ""
            raise ParameterError(f"parameter '{spec.name}': {error}; {spec.allowed()}"
                                 f"{hint}") from None
        values[spec.name] = parameter.value
    return values


def vector3(values: dict[str, Any], name: str) -> tuple[float, float, float]:
    """A parameter that must hold 3 finite numbers."""
    x, y, z = vector(values, name, 3)
    return (x, y, z)


def vector(values: dict[str, Any], name: str, size: int) -> tuple[float, ...]:
    """A parameter that must hold ``size`` finite numbers, as a tuple."""
    value = values[name]
    if len(value) != size or not all(math.isfinite(v) for v in value):
        raise ParameterError(f"parameter '{name}' = {list(value)}: must be {size} finite numbers")
    return tuple(float(v) for v in value)


def _quaternion(values: dict[str, Any], name: str) -> tuple[float, float, float, float]:
    x, y, z, w = vector(values, name, 4)
    return (x, y, z, w)


def _outages(values: dict[str, Any]) -> tuple[tuple[float, float], ...]:
    flat = [float(v) for v in values["gnss_outages"] or ()]
    if len(flat) % 2 or not all(math.isfinite(v) for v in flat) or any(
            not 0.0 <= start < end for start, end in zip(flat[::2], flat[1::2], strict=True)):
        raise ParameterError(f"parameter 'gnss_outages' = {flat}: must be pairs start_s, end_s "
                             "with 0 <= start < end (s)")
    return tuple(zip(flat[::2], flat[1::2], strict=True))


def simulator_config(values: dict[str, Any]) -> SimulatorConfig:
    """The core's configuration from validated parameter values (errors name the parameter)."""
    try:
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
            mount_rotation_xyzw=_quaternion(values, "imu_mount_rotation_xyzw"),
            mount_position_m=vector3(values, "imu_mount_position"),
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
            antenna_position_m=vector3(values, "gnss_antenna_position"),
            datum=vector3(values, "datum"),
            outages=_outages(values),
            publish_during_outage=values["gnss_publish_during_outage"],
        )
        return SimulatorConfig(
            vehicle_file=values["vehicle_file"],
            integrator=values["integrator"],
            physics_rate_hz=values["physics_rate_hz"],
            seed=values["seed"],
            initial_position=vector3(values, "initial_position"),
            initial_yaw=values["initial_yaw"],
            imu=imu,
            gnss=gnss,
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


def vehicle_simulator(values: dict[str, Any]) -> VehicleSimulator:
    """The simulator for validated parameter values; a bad vehicle file is a parameter error."""
    config = simulator_config(values)
    try:
        return VehicleSimulator(config)
    except ValueError as error:
        raise ParameterError(f"parameter {error}") from None


def steps_per_period(name: str, rate_hz: float, physics_rate_hz: float) -> int:
    """Physics steps per period of a publisher at ``rate_hz`` (must divide the physics rate)."""
    try:
        return core_steps_per_period(name, rate_hz, physics_rate_hz)
    except ValueError as error:
        raise ParameterError(f"parameter {error}") from None


def lockstep_steps(values: dict[str, Any], imu_steps: int) -> int:
    """Physics steps per lock-step period: a whole number of steps and of IMU periods."""
    period: float = values["lockstep_period_s"]
    rate: float = values["physics_rate_hz"]
    steps = round(period * rate)
    if steps < 1 or abs(steps - period * rate) > 1e-6 or steps % imu_steps:
        raise ParameterError(f"parameter 'lockstep_period_s' = {period}: must be a multiple of "
                             f"the physics step ({1.0 / values['physics_rate_hz']} s) and of the "
                             f"IMU period ({imu_steps / values['physics_rate_hz']} s)")
    return steps

