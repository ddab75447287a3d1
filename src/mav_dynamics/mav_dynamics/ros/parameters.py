"""Parameters of the ``controller`` node and the settings built from them.

Read-only (the node is built from them): ``vehicle_file``, ``rate_hz`` (the control timer;
the simulator's lock-step expects it), ``odometry_source`` (the subscription),
``takeoff_delay_s`` and ``takeoff_duration_s`` (used once, for the take-off).
Everything else can change at run time: the flight plan (``trajectory`` and the
parameters of each trajectory, ``speed_mps``, ``yaw_rad``), the gains override
``gains.*``, ``odometry_timeout_s``, ``telemetry_rate_hz`` and ``diagnostics_period_s``.
How a change takes effect is the node's business (``controller_node``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mav_dynamics.trajectories import FigureEight, Hover, Trajectory, Waypoints
from mav_dynamics.vehicle import FloatArray
from mav_ros_common.parameters import ParameterError, ParameterSpec, Values

ODOMETRY_TOPICS = {"estimate": "trident_ekf/odometry", "ground_truth": "ground_truth/odometry"}
TRAJECTORIES = ("hover", "waypoints", "figure_eight")
GAIN_UNITS = {"position": "1/s^2", "velocity": "1/s", "attitude": "1/s^2",
              "angular_rate": "1/s"}
"""Mass-normalised gains of the tracking controller by key (``ControllerGains`` fields)."""
GAIN_PARAMETERS = frozenset(f"gains.{key}" for key in GAIN_UNITS)
MISSION_PARAMETERS = {
    "hover": frozenset({"hover_position", "yaw_rad"}),
    "waypoints": frozenset({"waypoints", "speed_mps", "yaw_rad"}),
    "figure_eight": frozenset({"figure_eight_size_m", "figure_eight_period_s",
                               "figure_eight_height_m", "figure_eight_center",
                               "figure_eight_ramp_s", "yaw_rad"}),
}
"""The parameters each trajectory is built from."""

SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec("vehicle_file", "quadrotor_x.yaml",
                  "vehicle file: a path (absolute or from the working directory) or a name in "
                  "the bringup's config/vehicles/", read_only=True),
    ParameterSpec("trajectory", "figure_eight", "flight plan after take-off; a change flies a "
                  "smooth move to the new plan's start", choices=TRAJECTORIES),
    ParameterSpec("figure_eight_size_m", 2.0, "figure-eight half-width A: x = A sin(phi), "
                  "y = A/2 sin(2 phi)", "m", 0.1, 100.0),
    ParameterSpec("figure_eight_period_s", 12.0, "figure-eight period", "s", 1.0, 600.0),
    ParameterSpec("figure_eight_height_m", 1.5, "figure-eight z in map", "m", -1000.0, 1000.0),
    ParameterSpec("figure_eight_center", [0.0, 0.0], "figure-eight centre x, y in map", "m",
                  length=2),
    ParameterSpec("figure_eight_ramp_s", 12.0, "time over which the figure-eight speeds up "
                  "from rest (0: full speed at once)", "s", 0.0, 600.0),
    ParameterSpec("hover_position", [0.0, 0.0, 1.5], "hover point x, y, z in map", "m",
                  length=3),
    ParameterSpec("waypoints",
                  [0.0, 0.0, 1.5, 2.0, 0.0, 1.5, 2.0, 2.0, 1.5, 0.0, 2.0, 1.5, 0.0, 0.0, 1.5],
                  "waypoints in map, flat: x0, y0, z0, x1, y1, z1, ...", "m",
                  length_multiple=3),
    ParameterSpec("speed_mps", 1.0, "peak speed of waypoint segments, setpoint moves and moves "
                  "to a changed plan", "m/s", 0.05, 20.0),
    ParameterSpec("yaw_rad", 0.0, "heading of every flight plan (ENU, from east)", "rad",
                  -math.pi, math.pi),
    ParameterSpec("takeoff_duration_s", 4.0, "minimum-jerk climb to the trajectory's start",
                  "s", 0.5, 120.0, read_only=True),
    ParameterSpec("takeoff_delay_s", 1.0, "wait after the first odometry before the climb, "
                  "motors off", "s", 0.0, 600.0, read_only=True),
    ParameterSpec("odometry_source", "estimate", f"odometry to fly on: {ODOMETRY_TOPICS}",
                  choices=tuple(ODOMETRY_TOPICS), read_only=True),
    ParameterSpec("odometry_timeout_s", 0.5, "odometry older than this is stale: ERROR on "
                  "/diagnostics (node clock)", "s", 0.001, 60.0),
    ParameterSpec("rate_hz", 100.0, "control rate on the node clock (the simulator's lock-step "
                  "expects one command per lock-step period)", "Hz", 1.0, 2000.0,
                  read_only=True),
    ParameterSpec("telemetry_rate_hz", 50.0, "rate of controller/wrench and "
                  "controller/reference, rounded to every n-th control tick (commands go out "
                  "every tick)", "Hz", 1.0, 2000.0),
    ParameterSpec("diagnostics_period_s", 1.0, "period of /diagnostics (node clock)", "s",
                  0.001, 60.0),
    *(ParameterSpec(f"gains.{key}", None, f"override of the vehicle file's controller.{key} "
                    "gains per body axis (unset: the file's)", unit, 1e-6, 1e6, length=3)
      for key, unit in GAIN_UNITS.items()),
)


@dataclass(frozen=True)
class ControllerSettings:
    """What the node runs with, besides the plain values: the mission after take-off, the
    gains given as parameters (key -> 3 gains) and the output decimation."""

    mission: Trajectory
    gain_overrides: Mapping[str, FloatArray]
    telemetry_every: int
    """Control ticks per controller/wrench and controller/reference message."""


def mission(values: Values) -> Trajectory:
    """The flight plan after take-off chosen by ``trajectory``."""
    yaw = values["yaw_rad"]
    if values["trajectory"] == "hover":
        return Hover(values["hover_position"], yaw)
    if values["trajectory"] == "waypoints":
        return Waypoints(np.reshape(values["waypoints"], (-1, 3)), values["speed_mps"], yaw)
    return FigureEight(values["figure_eight_center"], values["figure_eight_size_m"],
                       values["figure_eight_period_s"], values["figure_eight_height_m"], yaw,
                       values["figure_eight_ramp_s"])


def controller_settings(values: Values) -> ControllerSettings:
    """Settings from validated values; ParameterError if they do not make a flight plan."""
    try:
        plan = mission(values)
    except ValueError as error:
        raise ParameterError(f"parameters of trajectory '{values['trajectory']}': {error}",
                             "trajectory") from error
    overrides: dict[str, Any] = {
        key: np.array(values[f"gains.{key}"]) for key in GAIN_UNITS
        if values[f"gains.{key}"] is not None}
    telemetry_every = max(1, round(values["rate_hz"] / values["telemetry_rate_hz"]))
    return ControllerSettings(plan, overrides, telemetry_every)
