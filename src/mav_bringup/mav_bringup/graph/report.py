"""The report of a run: PNG plots, ``summary.json`` and ``report.md`` (figures with units),
from a ``graph.accumulator.RunAccumulator``: figures of merit over every sample, plots of
bounded min/max-preserving decimations (memory bounded whatever the run's length). The plots
are drawn by ``graph.report_figures``, in worker processes when the run made them
(``report_workers``): this module does not load matplotlib.

Scenario events (``run["events"]``, see ``graph.events``) are shaded on every time plot and
listed in report.md; ``sensors.png`` checks the barometer and the magnetometer against the
ground truth next to the simulator's own record of their true errors."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mav_bringup.graph import events as scenario_events
from mav_bringup.graph.accumulator import RunAccumulator, accumulate_bag
from mav_bringup.graph.metrics import AXES, SOURCE_STATISTICS, declination, estimator_sources
from mav_bringup.graph.series import RunSeries, SensorSite
from mav_ros_common import plot_workers
from mav_ros_common.streams import RunningStats

ENERGY_KEYS = ("energy_error_J", "momentum_error_Ns")
"""Simulator diagnostics plotted as the integrator's balance errors."""
GNSS_ERROR_KEYS = tuple(f"gnss_correlated_error_{axis}_m" for axis in ("east", "north", "up"))
"""Simulator diagnostics: the true slowly varying GNSS error, which no filter can remove."""
BAROMETER_ERROR_KEYS = ("barometer_drift_pa", "barometer_ground_effect_pa", "barometer_fault_pa")
"""Simulator diagnostics: the barometer's true pressure errors (Pa)."""
PLOTTED_DIAGNOSTICS = frozenset(
    ("simulator", key) for key in (*ENERGY_KEYS, *BAROMETER_ERROR_KEYS, "barometer_offset_m",
                                   "magnetometer_heading_error_deg", "magnetometer_disturbance_T"))
"""The diagnostics whose series the report plots (the others: statistics only)."""
SOURCE_COLUMNS = ("messages", "accepted", "gated", "disturbed", "delayed")
"""Estimator counters given a column of their own in report.md (the rest: when non-zero)."""


def summarize(series: RunSeries, run: dict[str, Any]) -> dict[str, Any]:
    """Figures of merit of a run read whole (``read_run``) plus ``run``."""
    return summary_of(RunAccumulator.from_series(series, PLOTTED_DIAGNOSTICS), run)


def summary_of(run_data: RunAccumulator, run: dict[str, Any]) -> dict[str, Any]:
    """Figures of merit of a run (tracking, estimation, message counts) plus ``run``. A
    figure over samples of which one is not finite is NaN."""
    simulator = run_data.diagnostics.get("simulator", {})
    balance = {key: _strict(simulator[key].stats, "max_abs")
               for key in ENERGY_KEYS if key in simulator and simulator[key].stats.rows}
    gnss_error = ([_strict(simulator[key].stats, "mean") for key in GNSS_ERROR_KEYS]
                  if all(key in simulator and simulator[key].stats.rows
                         for key in GNSS_ERROR_KEYS) else None)
    tracking = run_data.tracking
    errors = run_data.estimate_error
    rms = [_strict(errors, "rms", k) for k in range(errors.width)]
    return {
        "scenario": None, "events": [],
        **run,
        "tracking_rms_m": _strict(tracking, "rms") if tracking.rows else None,
        "tracking_max_m": _strict(tracking, "maximum") if tracking.rows else None,
        "estimate_samples": errors.rows,
        "estimate_rms": dict(zip(ERROR_NAMES, rms, strict=True)),
        "inside_three_sigma": dict(zip(ERROR_NAMES, map(float, run_data.inside.mean),
                                       strict=True)),
        "max_abs_integrator_balance": balance,
        "gnss_fixes": run_data.gnss_fixes,
        "gnss_no_fix": run_data.gnss_no_fix,
        "gnss_correlated_error_mean_enu_m": gnss_error,
        "barometer": _barometer_summary(run_data),
        "magnetometer": _magnetometer_summary(run_data),
        "estimator_sources": estimator_sources({
            key: (np.zeros(1), np.array([value.last]))
            for key, value in run_data.diagnostics.get("trident_ekf", {}).items()
            if value.stats.rows}),
        "topic_counts": run_data.topic_counts,
    }


ERROR_NAMES = tuple(f"{name}_{axis}" for name in ("position", "velocity", "attitude")
                    for axis in AXES)
"""Keys of ``estimate_rms`` and ``inside_three_sigma``, in ``RunAccumulator`` column order."""


def _strict(stats: RunningStats, figure: str, column: int = 0) -> float:
    """``stats.<figure>`` of a column; NaN when a sample was not finite."""
    return float(getattr(stats, figure)[column]) if not stats.nonfinite[column] else math.nan


def finite_figure(stats: RunningStats, figure: str) -> float | None:
    """``stats.<figure>`` over the finite samples, None without any."""
    return float(getattr(stats, figure)[0]) if stats.count[0] else None


def _barometer_summary(run_data: RunAccumulator) -> dict[str, Any] | None:
    """Pressure altitude minus the true ellipsoidal height: its mean (m, mostly the geoid
    height and the day's atmosphere) and its scatter about that mean (m); the simulator's
    true offset and drift. None without barometer readings."""
    if not run_data.barometer_readings:
        return None
    error = run_data.barometer_error
    simulator = run_data.diagnostics.get("simulator", {})

    def stat(key: str, figure: str) -> float | None:
        return finite_figure(simulator[key].stats, figure) if key in simulator else None

    return {
        "readings": run_data.barometer_readings,
        "compared": int(error.count[0]),
        "height_error_mean_m": finite_figure(error, "mean"),
        "height_error_std_m": finite_figure(error, "std"),
        "true_offset_mean_m": stat("barometer_offset_m", "mean"),
        "true_drift_max_abs_pa": stat("barometer_drift_pa", "max_abs"),
        "true_ground_effect_max_pa": stat("barometer_ground_effect_pa", "maximum"),
    }


def _magnetometer_summary(run_data: RunAccumulator) -> dict[str, Any] | None:
    """The yaw error of the magnetometer levelled with the true attitude (deg): mean, RMS,
    largest; the field's declination and the simulator's largest true disturbance. None
    without magnetometer readings."""
    if not run_data.magnetometer_readings:
        return None
    field = run_data.site.earth_field_ned_T
    simulator = run_data.diagnostics.get("simulator", {})
    disturbance = simulator.get("magnetometer_disturbance_T")
    result: dict[str, Any] = {
        "readings": run_data.magnetometer_readings,
        "declination_deg": math.degrees(declination(field)) if field is not None else None,
        "true_disturbance_max_T": (finite_figure(disturbance.stats, "maximum")
                                   if disturbance is not None else None),
        "compared": 0, "heading_error_mean_deg": None, "heading_error_rms_deg": None,
        "heading_error_max_abs_deg": None,
    }
    error = run_data.heading_error
    if field is not None and error.count[0]:
        result.update(compared=int(error.count[0]),
                      heading_error_mean_deg=math.degrees(error.mean[0]),
                      heading_error_rms_deg=math.degrees(error.rms[0]),
                      heading_error_max_abs_deg=math.degrees(error.max_abs[0]))
    return result


FIGURE_NAMES = ("trajectory.png", "estimate_errors.png", "tracking.png", "integrator.png",
                "sensors.png")
"""The report's figures, drawn by ``graph.report_figures``."""
FIGURE_MODULE = "mav_bringup.graph.report_figures"


@dataclass(frozen=True)
class FigureData:
    """What the figures of a report draw: the run's accumulated series, and the scenario
    events shaded on its time plots (open-ended ones up to ``end_of_run_s``, s)."""

    run_data: RunAccumulator
    events: list[dict[str, Any]]
    end_of_run_s: float


def report_workers(workers: int | None = None) -> plot_workers.PlotWorkers:
    """Processes that draw the figures of run reports (``mav_ros_common.plot_workers``;
    ``workers`` as there): made when a reported run starts, so that they load matplotlib
    while it runs."""
    return plot_workers.PlotWorkers((FIGURE_MODULE,), len(FIGURE_NAMES), workers)


def write_report(series: RunSeries, directory: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The report of a run read whole (``read_run``): see ``write_accumulated``."""
    return write_accumulated(RunAccumulator.from_series(series, PLOTTED_DIAGNOSTICS), directory,
                             run)


def write_bag_report(bag: Path, directory: Path, run: dict[str, Any], site: SensorSite,
                     namespace: str = "",
                     workers: plot_workers.PlotWorkers | None = None) -> dict[str, Any]:
    """The report of a run's bag, streamed (memory bounded whatever the run's length):
    see ``write_accumulated``; ``namespace`` as in ``read_run``."""
    return write_accumulated(accumulate_bag(bag, site, namespace, PLOTTED_DIAGNOSTICS),
                             directory, run, workers)


def write_accumulated(run_data: RunAccumulator, directory: Path, run: dict[str, Any],
                      workers: plot_workers.PlotWorkers | None = None) -> dict[str, Any]:
    """Write plots (in ``workers`` when given, see ``report_workers``), ``summary.json`` and
    ``report.md`` into ``directory``; return the summary."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = summary_of(run_data, run)
    data = FigureData(run_data, summary.get("events") or [], _end_of_run(run_data, summary))
    plots = {name: plot_workers.PlotFunction(FIGURE_MODULE, "draw", (name,))
             for name in FIGURE_NAMES}
    plot_workers.draw(plots, data, directory, workers)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    (directory / "report.md").write_text(_markdown(summary, list(FIGURE_NAMES)))
    return summary


def _end_of_run(run_data: RunAccumulator, summary: dict[str, Any]) -> float:
    """Sim time (s) an open-ended event is shaded to: the run's, else the last truth stamp."""
    if summary.get("sim_time_s") is not None:
        return float(summary["sim_time_s"])
    truth = run_data.paths["truth"].rows()
    return float(truth[-1, 0]) if len(truth) else 0.0



def _enu(values: list[float] | None) -> str:
    if values is None:
        return "n/a"
    return "E {:+.2f} m, N {:+.2f} m, U {:+.2f} m".format(*values)


def _number(value: Any, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _sensor_lines(summary: dict[str, Any]) -> list[str]:
    """Bullets on the barometer and the magnetometer against the truth (sensors.png)."""
    lines = []
    barometer = summary.get("barometer")
    if barometer is None:
        lines.append("- barometer: no readings in the bag (disabled)")
    else:
        lines.append(
            f"- barometer: {barometer['readings']} readings; standard pressure altitude minus "
            f"the true ellipsoidal height averaged "
            f"{_number(barometer['height_error_mean_m'], '+.2f')} m (geoid height, the day's "
            f"atmosphere, drift; the simulator's true offset averaged "
            f"{_number(barometer['true_offset_mean_m'], '+.2f')} m) and scattered "
            f"{_number(barometer['height_error_std_m'], '.2f')} m (std) about that mean; "
            f"largest true drift {_number(barometer['true_drift_max_abs_pa'], '.1f')} Pa, "
            f"ground effect {_number(barometer['true_ground_effect_max_pa'], '.1f')} Pa")
    magnetometer = summary.get("magnetometer")
    if magnetometer is None:
        lines.append("- magnetometer: no readings in the bag (disabled)")
    else:
        disturbance = magnetometer["true_disturbance_max_T"]
        lines.append(
            f"- magnetometer: {magnetometer['readings']} readings; as a compass levelled with "
            f"the true attitude (declination "
            f"{_number(magnetometer['declination_deg'], '+.2f')} deg) its yaw error was RMS "
            f"{_number(magnetometer['heading_error_rms_deg'], '.2f')} deg, mean "
            f"{_number(magnetometer['heading_error_mean_deg'], '+.2f')} deg, largest "
            f"{_number(magnetometer['heading_error_max_abs_deg'], '.2f')} deg; largest true "
            f"disturbance {_number(None if disturbance is None else 1e6 * disturbance, '.2f')}"
            " uT")
    return lines


def _source_lines(sources: dict[str, dict[str, float]]) -> list[str]:
    """The estimator's final counters per aiding source, as a table."""
    if not sources:
        return ["No per-source counters in the estimator's diagnostics.", ""]
    columns = [c for c in SOURCE_COLUMNS if any(c in counters for counters in sources.values())]
    lines = ["Estimator (trident_ekf) per aiding source, final counts (NIS mean: expected about "
             "the measurement's dimension):", "",
             "| source | " + " | ".join(columns) + " | other (non-zero) | NIS mean |",
             "|---|" + "---|" * (len(columns) + 2)]
    for source, counters in sources.items():
        cells = [f"{counters[c]:g}" if c in counters else "-" for c in columns]
        other = ", ".join(f"{name} {value:g}" for name, value in counters.items()
                          if name not in columns and name not in SOURCE_STATISTICS and value)
        lines.append(f"| {source} | " + " | ".join(cells)
                     + f" | {other or '-'} | {_number(counters.get('nis_mean'), '.3f')} |")
    return [*lines, ""]


def _scenario_words(summary: dict[str, Any]) -> str:
    if summary.get("scenario") is None:
        return ""
    return (f", scenario `{summary['scenario']}` ({len(summary.get('events') or [])} timed "
            "events)")


def _markdown(summary: dict[str, Any], figures: list[str]) -> str:
    lines = [
        "# mav-sim run report", "",
        f"- vehicle `{summary.get('vehicle')}`, trajectory `{summary.get('trajectory')}`, "
        f"controller on `{summary.get('odometry_source')}`{_scenario_words(summary)}",
        f"- {_number(summary.get('sim_time_s'), '.1f')} s simulated in "
        f"{_number(summary.get('wall_time_s'), '.1f')} s wall: "
        f"**{_number(summary.get('real_time_factor'), '.2f')}x real time**",
        f"- tracking (truth vs reference): RMS **{_number(summary['tracking_rms_m'], '.3f')} m**, "
        f"max {_number(summary['tracking_max_m'], '.3f')} m",
        f"- GNSS fixes {summary['gnss_fixes']} ({summary['gnss_no_fix']} NO_FIX); the "
        "simulated correlated (Gauss-Markov) GNSS error averaged "
        f"{_enu(summary['gnss_correlated_error_mean_enu_m'])} over the run: the estimate "
        "follows it (no filter can tell it from motion) and its GNSS-bias states should "
        "cover it",
        *_sensor_lines(summary), "",
        "| estimate error | RMS | inside 3 sigma |", "|---|---|---|",
    ]
    units = {"position": "m", "velocity": "m/s", "attitude": "rad"}
    for key, rms in summary["estimate_rms"].items():
        unit = units[key.split("_")[0]]
        lines.append(f"| {key} | {rms:.4f} {unit} | "
                     f"{100 * summary['inside_three_sigma'][key]:.1f} % |")
    lines += ["", *_source_lines(summary.get("estimator_sources") or {})]
    lines += scenario_events.markdown_lines(summary)
    lines += ["## Recorded topics", "", "| topic | messages |", "|---|---|"]
    counts = sorted(summary["topic_counts"].items())
    lines += [f"| `{topic}` | {count} |" for topic, count in counts]
    lines += ["", "## Figures", ""] + [f"![{name}]({name})" for name in figures] + [""]
    return "\n".join(lines)
