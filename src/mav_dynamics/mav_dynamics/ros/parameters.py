"""Parameters of the ``controller`` node: declaration with descriptors, validation, settings.

Numbers accept integers or floats (``rate_hz: 100`` is fine); every bad value stops the node
with one ``ValueError`` naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node

from mav_dynamics.trajectories import FigureEight, Hover, Trajectory, Waypoints
from mav_dynamics.vehicle import ControllerGains
from mav_dynamics.vehicle_file import parse_controller_gains

"""The repository's vehicle files (``config/vehicles``), searched after the cwd."""
ODOMETRY_TOPICS = {"estimate": "trident_ekf/odometry", "ground_truth": "ground_truth/odometry"}
TRAJECTORIES = ("hover", "waypoints", "figure_eight")
GAIN_KEYS = ("position", "velocity", "attitude", "angular_rate")


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: default (its type fixes the kind: str, float or list of floats; None
    for an optional list), description with units, and the allowed values."""

    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    size: int | None = None
    """Required list length (None: any, see ``multiple_of``)."""
    multiple_of: int = 1

    def allowed(self) -> str:
        """What a valid value looks like, for descriptors and error messages."""
        if self.choices:
            return f"one of {list(self.choices)}"
        if self.low is not None:
            return f"a number in [{self.low}, {self.high}]"
        if self.size is not None:
            return f"a list of {self.size} numbers"
        return f"a list of numbers, a multiple of {self.multiple_of} long and not empty"

    def descriptor(self) -> ParameterDescriptor:
        numeric = not isinstance(self.default, str)
        # Read once at start-up, so read-only; dynamic typing lets integers stand for doubles.
        descriptor = ParameterDescriptor(description=self.description,
                                         additional_constraints=self.allowed(),
                                         read_only=True, dynamic_typing=numeric)
        if self.low is not None:
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=self.low, to_value=self.high)]
        return descriptor


PARAMETERS: dict[str, ParameterSpec] = {
    "vehicle_file": ParameterSpec(
        "quadrotor_x.yaml", "vehicle YAML: a path (absolute or relative to the cwd) or a name "
        "in the repository's config/vehicles/"),
    "trajectory": ParameterSpec("figure_eight", "flight plan after take-off",
                                choices=TRAJECTORIES),
    "figure_eight_size_m": ParameterSpec(2.0, "figure-eight half-width A (m): "
                                         "x = A sin(phi), y = A/2 sin(2 phi)", 0.1, 100.0),
    "figure_eight_period_s": ParameterSpec(12.0, "figure-eight period (s)", 1.0, 600.0),
    "figure_eight_height_m": ParameterSpec(1.5, "figure-eight z in map (m)", -1000.0, 1000.0),
    "figure_eight_center": ParameterSpec([0.0, 0.0], "figure-eight centre x, y in map (m)",
                                         size=2),
    "figure_eight_ramp_s": ParameterSpec(12.0, "time over which the figure-eight speeds up "
                                         "from rest (s; 0 = full speed at once)", 0.0, 600.0),
    "hover_position": ParameterSpec([0.0, 0.0, 1.5], "hover point x, y, z in map (m)", size=3),
    "waypoints": ParameterSpec(
        [0.0, 0.0, 1.5, 2.0, 0.0, 1.5, 2.0, 2.0, 1.5, 0.0, 2.0, 1.5, 0.0, 0.0, 1.5],
        "waypoints in map (m), flat: x0, y0, z0, x1, y1, z1, ...", multiple_of=3),
    "speed_mps": ParameterSpec(1.0, "peak speed of waypoint segments and setpoint moves (m/s)",
                               0.05, 20.0),
    "yaw_rad": ParameterSpec(0.0, "heading of every flight plan (rad, ENU, from east)",
                             -math.pi, math.pi),
    "takeoff_duration_s": ParameterSpec(4.0, "minimum-jerk climb to the trajectory's start "
                                        "(s)", 0.5, 120.0),
    "takeoff_delay_s": ParameterSpec(1.0, "wait after the first odometry before the climb, "
                                     "motors off (s)", 0.0, 600.0),
    "odometry_source": ParameterSpec("estimate", f"odometry to fly on: {ODOMETRY_TOPICS}",
                                     choices=tuple(ODOMETRY_TOPICS)),
    "odometry_timeout_s": ParameterSpec(0.5, "odometry older than this is stale: ERROR (s, "
                                        "node clock)", 0.001, 60.0),
    "rate_hz": ParameterSpec(100.0, "control rate on the node clock (Hz)", 1.0, 2000.0),
    "telemetry_rate_hz": ParameterSpec(50.0, "rate of controller/wrench and "
                                       "controller/reference (Hz; for plots and rviz, rounded "
                                       "to every n-th control tick; commands go out every tick)",
                                       1.0, 2000.0),
    "diagnostics_period_s": ParameterSpec(1.0, "period of /diagnostics (s, node clock)",
                                          0.001, 60.0),
    **{f"gains.{key}": ParameterSpec(None, f"override of the vehicle file's controller.{key} "
                                     "gains, per body axis (unset: the file's)", size=3)
       for key in GAIN_KEYS},
}


@dataclass(frozen=True)
class ControllerSettings:
    """The node's validated parameters by name (units in ``PARAMETERS``), and the gains
    override (None: the vehicle file's)."""

    values: dict[str, Any]
    gains: ControllerGains | None

    def mission(self) -> Trajectory:
        """The flight plan after take-off."""
        v = self.values
        yaw = v["yaw_rad"]
        if v["trajectory"] == "hover":
            return Hover(v["hover_position"], yaw)
        if v["trajectory"] == "waypoints":
            return Waypoints(np.reshape(v["waypoints"], (-1, 3)), v["speed_mps"], yaw)
        return FigureEight(v["figure_eight_center"], v["figure_eight_size_m"],
                           v["figure_eight_period_s"], v["figure_eight_height_m"], yaw,
                           v["figure_eight_ramp_s"])


def _invalid(name: str, value: Any) -> ValueError:
    spec = PARAMETERS[name]
    return ValueError(f"parameter {name} = {value!r} is invalid: must be {spec.allowed()} "
                      f"({spec.description})")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value)


def checked_value(name: str, value: Any) -> Any:
    """``value`` of parameter ``name`` as the node uses it (float, list of floats, str or
    None), or ValueError."""
    spec = PARAMETERS[name]
    if isinstance(spec.default, str):
        if not isinstance(value, str) or (spec.choices and value not in spec.choices):
            raise _invalid(name, value)
        return value
    if isinstance(spec.default, float):
        if not (_is_number(value) and spec.low <= value <= spec.high):
            raise _invalid(name, value)
        return float(value)
    if value is None and spec.default is None:
        return None
    values = list(value) if isinstance(value, list | tuple | array) else None
    if values is None or not values or not all(map(_is_number, values)) or (
            spec.size is not None and len(values) != spec.size) or len(values) % spec.multiple_of:
        raise _invalid(name, value)
    return [float(v) for v in values]


def _gains(values: dict[str, Any]) -> ControllerGains | None:
    given = {key: values[f"gains.{key}"] for key in GAIN_KEYS
             if values[f"gains.{key}"] is not None}
    if not given:
        return None
    if len(given) != len(GAIN_KEYS):
        missing = [f"gains.{k}" for k in GAIN_KEYS if k not in given]
        raise ValueError(f"parameters {missing} are not set: a gains override needs all of "
                         f"{[f'gains.{k}' for k in GAIN_KEYS]}")
    try:
        return parse_controller_gains(given)
    except ValueError as error:
        raise ValueError(f"parameter gains.{error.args[0].removeprefix('controller.')}") from (
            error)


def declare_parameters(node: Node) -> ControllerSettings:
    """Declare every parameter on ``node`` with its descriptor and return them validated."""
    values = {}
    for name, spec in PARAMETERS.items():
        try:
            value = node.declare_parameter(name, spec.default, spec.descriptor()).value
        except (InvalidParameterValueException, InvalidParameterTypeException) as error:
            override = node._parameter_overrides.get(name)  # the value rclpy refused
            raise _invalid(name, override.value if override else spec.default) from error
        values[name] = checked_value(name, value)
    return ControllerSettings(values, _gains(values))
