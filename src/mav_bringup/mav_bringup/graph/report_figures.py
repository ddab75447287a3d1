"""The figures of a ``mav-sim`` run report (``graph.report``), drawn with matplotlib.

Only what draws the figures imports this module: a report whose figures go to worker
processes (``mav_ros_common.plot_workers``) never loads matplotlib in the run's process.
Scenario events are shaded on every time plot."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mav_bringup.graph import events as scenario_events
from mav_bringup.graph.accumulator import RunAccumulator
from mav_bringup.graph.metrics import AXES, declination
from mav_bringup.graph.report import (
    BAROMETER_ERROR_KEYS,
    ENERGY_KEYS,
    FigureData,
    finite_figure,
)
from mav_bringup.graph.series import BAROMETER, MAGNETOMETER

matplotlib.use("Agg")  # files only: the runner may have no display

DPI = 110


class Marks:
    """The scenario events to shade on the time plots of one report."""

    def __init__(self, events: list[dict[str, Any]], end_of_run_s: float) -> None:
        self.events = events
        self.end_of_run_s = end_of_run_s

    def on(self, axes: Any) -> int:
        """Shade the events on ``axes`` (one axis or many; labelled on the first)."""
        flat = [axes] if isinstance(axes, Axes) else list(np.ravel(axes))
        return scenario_events.mark_events(flat, self.events, self.end_of_run_s)


def plot_trajectory(run_data: RunAccumulator, marks: Marks) -> Figure:
    figure, (top, side) = plt.subplots(1, 2, figsize=(13, 5.5))
    fix_time, east, north, up = run_data.paths["fixes"].columns()
    top.plot(east, north, ".", ms=2, color="0.7", label="GNSS fixes")
    for name, style, label in (("reference", "k--", "reference"),
                               ("truth", "C0-", "ground truth"),
                               ("estimate", "C1-", "estimate")):
        time, x, y, z = run_data.paths[name].columns()
        top.plot(x, y, style, lw=1, label=label)
        side.plot(time, z, style, lw=1, label=label)
    side.plot(fix_time, up, ".", ms=2, color="0.7", label="GNSS fixes")
    marks.on(side)
    top.set(xlabel="east (m)", ylabel="north (m)", title="Trajectory in the map frame (ENU)")
    top.axis("equal")
    top.legend(loc="best", fontsize=8)
    side.set(xlabel="sim time (s)", ylabel="up (m)", title="Height")
    side.legend(loc="best", fontsize=8)
    figure.tight_layout()
    return figure


def plot_estimate_errors(run_data: RunAccumulator, marks: Marks) -> Figure:
    figure, axes = plt.subplots(3, 3, figsize=(14, 9), sharex=True)
    marks.on(axes)
    rows = (("position", "m", 1.0), ("velocity", "m/s", 1.0), ("attitude", "deg", np.degrees(1.0)))
    for index, (row, (name, unit, scale)) in enumerate(zip(axes, rows, strict=True)):
        for k, axis in enumerate(row):
            time, error, sigma = run_data.error_series[3 * index + k].columns()
            axis.fill_between(time, -3.0 * scale * sigma, 3.0 * scale * sigma, color="C0",
                              alpha=0.2, label="+/-3 sigma (estimator)")
            axis.plot(time, scale * error, "C3", lw=0.8, label="estimate - truth")
            axis.set_ylabel(f"{name} {AXES[k]} ({unit})")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    for axis in axes[-1]:
        axis.set_xlabel("sim time (s)")
    figure.suptitle("Estimation errors with 3-sigma bounds (position ENU, velocity body, "
                    "attitude map frame)")
    figure.tight_layout()
    return figure


def plot_tracking(run_data: RunAccumulator, marks: Marks) -> Figure:
    time, *error, norm = run_data.tracking_series.columns()
    figure, axis = plt.subplots(figsize=(10, 4))
    marks.on(axis)
    for k in range(3):
        axis.plot(time, error[k], lw=0.8, label=f"{AXES[k]}")
    axis.plot(time, norm, "k", lw=1.2, label="norm")
    axis.set(xlabel="sim time (s)", ylabel="truth - reference (m)",
             title="Tracking error of the closed loop (controller on the estimate)")
    axis.legend(loc="best", fontsize=8)
    figure.tight_layout()
    return figure


def plot_integrator(run_data: RunAccumulator, marks: Marks) -> Figure:
    simulator = run_data.diagnostics.get("simulator", {})
    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    if marks.on(axes):
        axes[0].legend(loc="best", fontsize=8)
    for axis, key in zip(axes, ENERGY_KEYS, strict=True):
        if key in simulator:
            axis.plot(*simulator[key].columns(), lw=1)
        else:
            axis.text(0.5, 0.5, f"no '{key}' in the simulator diagnostics", ha="center",
                      transform=axis.transAxes)
        axis.set(xlabel="sim time (s)", ylabel=key,
                 title="energy balance error" if "energy" in key else "momentum balance error")
    figure.suptitle("Integrator balance errors (state minus work/impulse of the applied wrench)")
    figure.tight_layout()
    return figure


def _absent(axis: Axes, text: str) -> None:
    axis.text(0.5, 0.5, text, ha="center", va="center", transform=axis.transAxes, color="0.3")


def plot_sensors(run_data: RunAccumulator, marks: Marks) -> Figure:
    """The barometer and the magnetometer against the ground truth, with the simulator's true
    error terms (its 1 Hz diagnostics), on a common sim-time axis; a panel without its data
    says so."""
    simulator = run_data.diagnostics.get("simulator", {})
    figure, (height, pressure, heading, disturbance) = plt.subplots(
        4, 1, figsize=(12, 12), sharex=True)
    marked = marks.on((height, pressure, heading, disturbance))

    if run_data.barometer_readings:
        time, error = run_data.barometer_series.columns()
        mean = finite_figure(run_data.barometer_error, "mean") or 0.0
        height.plot(time, error - mean, color="C0", lw=0.6,
                    label=f"pressure altitude - true height, run mean {mean:+.2f} m removed")
        if "barometer_offset_m" in simulator:
            stamps, offset = simulator["barometer_offset_m"].columns()
            height.plot(stamps, offset - mean, "o", color="C3", ms=4,
                        label="simulator's true offset (noise-free), same mean removed")
        height.legend(loc="best", fontsize=8)
    else:
        _absent(height, f"no {BAROMETER} in the bag (barometer disabled)")
        if marked:
            height.legend(loc="best", fontsize=8)
    height.set(ylabel="height error (m)",
               title="Barometer: ICAO standard pressure altitude minus true WGS-84 height")

    plotted = [key for key in BAROMETER_ERROR_KEYS if key in simulator]
    for key in plotted:
        pressure.plot(*simulator[key].columns(), "o-", ms=3, lw=1,
                      label=key.removeprefix("barometer_").removesuffix("_pa").replace("_", " "))
    if plotted:
        pressure.legend(loc="best", fontsize=8)
    else:
        _absent(pressure, "no barometer errors in the simulator diagnostics")
    pressure.set(ylabel="pressure (Pa)",
                 title="Barometer: simulator's true pressure errors (+ Pa reads as lower "
                       "height)")

    field = run_data.site.earth_field_ned_T
    if run_data.magnetometer_readings and field is not None:
        time, error = run_data.heading_series.columns()
        heading.plot(time, np.degrees(error), color="C0", lw=0.6,
                     label="yaw from the field levelled with the true attitude, declination "
                           "applied, - true yaw")
        if "magnetometer_heading_error_deg" in simulator:
            heading.plot(*simulator["magnetometer_heading_error_deg"].columns(), "o",
                         color="C3", ms=4, label="simulator's true heading error (noise-free)")
        heading.legend(loc="best", fontsize=8)
        title = (f"Magnetometer: yaw error as a compass (declination "
                 f"{math.degrees(declination(field)):+.2f} deg of the simulator's field)")
    elif run_data.magnetometer_readings:
        _absent(heading, "the simulator's Earth field is unknown: no heading check")
        title = "Magnetometer: yaw error as a compass"
    else:
        _absent(heading, f"no {MAGNETOMETER} in the bag (magnetometer disabled)")
        title = "Magnetometer: yaw error as a compass"
    heading.set(ylabel="yaw error (deg, + CCW)", title=title)

    if "magnetometer_disturbance_T" in simulator:
        stamps, values = simulator["magnetometer_disturbance_T"].columns()
        disturbance.plot(stamps, 1e6 * values, "o-", color="C4", ms=3, lw=1,
                         label="|field added to the Earth field| (iron, motors, ground, "
                               "faults)")
        disturbance.legend(loc="best", fontsize=8)
    else:
        _absent(disturbance, "no magnetometer disturbance in the simulator diagnostics")
    disturbance.set(xlabel="sim time (s)", ylabel="disturbance (uT)",
                    title="Magnetometer: simulator's true disturbance magnitude")
    figure.tight_layout()
    return figure



FIGURES: dict[str, Callable[[RunAccumulator, Marks], Figure]] = {
    "trajectory.png": plot_trajectory, "estimate_errors.png": plot_estimate_errors,
    "tracking.png": plot_tracking, "integrator.png": plot_integrator,
    "sensors.png": plot_sensors}
"""The report's figures by file name (``report.FIGURE_NAMES``, in that order)."""


def draw(name: str, data: FigureData, path: Path) -> None:
    """Draw the figure ``name`` of ``data`` into the PNG at ``path``."""
    figure = FIGURES[name](data.run_data, Marks(data.events, data.end_of_run_s))
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
