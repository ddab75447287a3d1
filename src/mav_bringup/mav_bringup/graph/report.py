"""The report of a run: PNG plots, ``summary.json`` and ``report.md`` (figures with units)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from mav_bringup.graph.metrics import AXES, EstimateErrors, estimate_errors, tracking_error
from mav_bringup.graph.series import RunSeries

matplotlib.use("Agg")  # files only: the runner may have no display

ENERGY_KEYS = ("energy_error_J", "momentum_error_Ns")
"""Simulator diagnostics plotted as the integrator's balance errors."""
GNSS_ERROR_KEYS = tuple(f"gnss_correlated_error_{axis}_m" for axis in ("east", "north", "up"))
"""Simulator diagnostics: the true slowly varying GNSS error, which no filter can remove."""


def summarize(series: RunSeries, run: dict[str, Any]) -> dict[str, Any]:
    """Figures of merit of a run (tracking, estimation, message counts) plus ``run``."""
    errors = estimate_errors(series.estimate, series.truth)
    _, tracking = tracking_error(series.truth, series.reference)
    tracking_norm = np.linalg.norm(tracking, axis=1)
    simulator = series.diagnostics.get("simulator", {})
    balance = {key: float(np.max(np.abs(simulator[key][1])))
               for key in ENERGY_KEYS if key in simulator and len(simulator[key][1])}
    gnss_error = ([float(np.mean(simulator[key][1])) for key in GNSS_ERROR_KEYS]
                  if all(key in simulator and len(simulator[key][1]) for key in GNSS_ERROR_KEYS)
                  else None)
    return {
        **run,
        "tracking_rms_m": float(np.sqrt(np.mean(tracking_norm**2))) if len(tracking) else None,
        "tracking_max_m": float(tracking_norm.max()) if len(tracking) else None,
        "estimate_samples": len(errors.time),
        "estimate_rms": errors.rms(),
        "inside_three_sigma": errors.inside_three_sigma(),
        "max_abs_integrator_balance": balance,
        "gnss_fixes": len(series.fix_time),
        "gnss_no_fix": int(np.count_nonzero(~series.fix_valid)),
        "gnss_correlated_error_mean_enu_m": gnss_error,
        "topic_counts": series.topic_counts,
    }


def write_report(series: RunSeries, directory: Path, run: dict[str, Any]) -> dict[str, Any]:
    """Write plots, ``summary.json`` and ``report.md`` into ``directory``; return the summary."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = summarize(series, run)
    errors = estimate_errors(series.estimate, series.truth)
    figures = {
        "trajectory.png": _plot_trajectory(series),
        "estimate_errors.png": _plot_estimate_errors(errors),
        "tracking.png": _plot_tracking(series),
        "integrator.png": _plot_integrator(series),
    }
    for name, figure in figures.items():
        figure.savefig(directory / name, dpi=110)
        plt.close(figure)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    (directory / "report.md").write_text(_markdown(summary, list(figures)))
    return summary


def _plot_trajectory(series: RunSeries) -> Figure:
    figure, (top, side) = plt.subplots(1, 2, figsize=(13, 5.5))
    valid = series.fix_valid
    top.plot(series.fix_enu[valid, 0], series.fix_enu[valid, 1], ".", ms=2, color="0.7",
             label="GNSS fixes")
    for odometry, style, label in ((series.reference, "k--", "reference"),
                                   (series.truth, "C0-", "ground truth"),
                                   (series.estimate, "C1-", "estimate")):
        top.plot(odometry.position[:, 0], odometry.position[:, 1], style, lw=1, label=label)
        side.plot(odometry.time, odometry.position[:, 2], style, lw=1, label=label)
    side.plot(series.fix_time[valid], series.fix_enu[valid, 2], ".", ms=2, color="0.7",
              label="GNSS fixes")
    top.set(xlabel="east (m)", ylabel="north (m)", title="Trajectory in the map frame (ENU)")
    top.axis("equal")
    top.legend(loc="best", fontsize=8)
    side.set(xlabel="sim time (s)", ylabel="up (m)", title="Height")
    side.legend(loc="best", fontsize=8)
    figure.tight_layout()
    return figure


def _plot_estimate_errors(errors: EstimateErrors) -> Figure:
    figure, axes = plt.subplots(3, 3, figsize=(14, 9), sharex=True)
    rows = (("position", "m", 1.0), ("velocity", "m/s", 1.0), ("attitude", "deg", np.degrees(1.0)))
    for row, (name, unit, scale) in zip(axes, rows, strict=True):
        error = getattr(errors, name) * scale
        bound = 3.0 * getattr(errors, f"{name}_sigma") * scale
        for k, axis in enumerate(row):
            axis.fill_between(errors.time, -bound[:, k], bound[:, k], color="C0", alpha=0.2,
                              label="+/-3 sigma (estimator)")
            axis.plot(errors.time, error[:, k], "C3", lw=0.8, label="estimate - truth")
            axis.set_ylabel(f"{name} {AXES[k]} ({unit})")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    for axis in axes[-1]:
        axis.set_xlabel("sim time (s)")
    figure.suptitle("Estimation errors with 3-sigma bounds (position ENU, velocity body, "
                    "attitude map frame)")
    figure.tight_layout()
    return figure


def _plot_tracking(series: RunSeries) -> Figure:
    time, error = tracking_error(series.truth, series.reference)
    figure, axis = plt.subplots(figsize=(10, 4))
    for k in range(3):
        axis.plot(time, error[:, k], lw=0.8, label=f"{AXES[k]}")
    axis.plot(time, np.linalg.norm(error, axis=1), "k", lw=1.2, label="norm")
    axis.set(xlabel="sim time (s)", ylabel="truth - reference (m)",
             title="Tracking error of the closed loop (controller on the estimate)")
    axis.legend(loc="best", fontsize=8)
    figure.tight_layout()
    return figure


def _plot_integrator(series: RunSeries) -> Figure:
    simulator = series.diagnostics.get("simulator", {})
    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    for axis, key in zip(axes, ENERGY_KEYS, strict=True):
        if key in simulator:
            axis.plot(*simulator[key], lw=1)
        else:
            axis.text(0.5, 0.5, f"no '{key}' in the simulator diagnostics", ha="center",
                      transform=axis.transAxes)
        axis.set(xlabel="sim time (s)", ylabel=key,
                 title="energy balance error" if "energy" in key else "momentum balance error")
    figure.suptitle("Integrator balance errors (state minus work/impulse of the applied wrench)")
    figure.tight_layout()
    return figure


def _enu(values: list[float] | None) -> str:
    if values is None:
        return "n/a"
    return "E {:+.2f} m, N {:+.2f} m, U {:+.2f} m".format(*values)


def _markdown(summary: dict[str, Any], figures: list[str]) -> str:
    def number(value: Any, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    lines = [
        "# mav-sim run report", "",
        f"- vehicle `{summary.get('vehicle')}`, trajectory `{summary.get('trajectory')}`, "
        f"controller on `{summary.get('odometry_source')}`",
        f"- {number(summary.get('sim_time_s'), '.1f')} s simulated in "
        f"{number(summary.get('wall_time_s'), '.1f')} s wall: "
        f"**{number(summary.get('real_time_factor'), '.2f')}x real time**",
        f"- tracking (truth vs reference): RMS **{number(summary['tracking_rms_m'], '.3f')} m**, "
        f"max {number(summary['tracking_max_m'], '.3f')} m",
        f"- GNSS fixes {summary['gnss_fixes']} ({summary['gnss_no_fix']} NO_FIX); the "
        "simulated correlated (Gauss-Markov) GNSS error averaged "
        f"{_enu(summary['gnss_correlated_error_mean_enu_m'])} over the run: the estimate "
        "follows it (no filter can tell it from motion) and its GNSS-bias states should "
        "cover it", "",
        "| estimate error | RMS | inside 3 sigma |", "|---|---|---|",
    ]
    units = {"position": "m", "velocity": "m/s", "attitude": "rad"}
    for key, rms in summary["estimate_rms"].items():
        unit = units[key.split("_")[0]]
        lines.append(f"| {key} | {rms:.4f} {unit} | "
                     f"{100 * summary['inside_three_sigma'][key]:.1f} % |")
    lines += ["", "| topic | messages |", "|---|---|"]
    counts = sorted(summary["topic_counts"].items())
    lines += [f"| `{topic}` | {count} |" for topic, count in counts]
    lines += [""] + [f"![{name}]({name})" for name in figures] + [""]
    return "\n".join(lines)
