"""Replay report: errors against the reference, per-source consistency (NIS against its
chi-square expectation), a simulated GNSS outage, Markdown/JSON and PNG plots."""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mav_geometry.arrays import FloatArray
from mav_ros_common import plot_workers
from mav_ros_common.streams import MinMaxDecimator
from trident_ekf.core import chi_square
from trident_ekf.core.filter import UpdateResult
from trident_ekf.tools.frames import euler_enu

GNSS_POSITION = "gnss_position"
REAPPLY_MARGIN_S = 1.0
"""Added to the filter's ``history_length`` for how long an update stays replaceable, s."""
CHUNK_ROWS = 256
"""Rows a ``PlotSeries`` collects before handing them to its decimator in one call."""


class PlotSeries:
    """A ``MinMaxDecimator`` fed a chunk at a time: rows are collected in a list and added
    ``CHUNK_ROWS`` at once, since one numpy call per row costs more than the filter step that
    made it. The kept rows are the same as when adding each row alone (a bucket's extreme
    rows do not depend on how its rows arrived); memory stays bounded."""

    def __init__(self, width: int) -> None:
        self._decimator = MinMaxDecimator(width)
        self._pending: list[tuple[float, ...]] = []

    def add(self, row: tuple[float, ...]) -> None:
        self._pending.append(row)
        if len(self._pending) >= CHUNK_ROWS:
            self._flush()

    def extend(self, rows: list[tuple[float, ...]]) -> None:
        self._pending += rows
        if len(self._pending) >= CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._decimator.add(self._pending)
            self._pending = []

    @property
    def seen(self) -> int:
        """Rows added."""
        return self._decimator.seen + len(self._pending)

    def rows(self) -> FloatArray:
        """The kept rows in stream order, ``(m, width)``."""
        self._flush()
        return self._decimator.rows()

    def columns(self) -> tuple[FloatArray, ...]:
        self._flush()
        return self._decimator.columns()


def _wrap(angle: FloatArray) -> FloatArray:
    return (angle + np.pi) % (2.0 * np.pi) - np.pi


class SourceUpdates:
    """The updates of one aiding source, in memory bounded whatever the log's length: counts
    and NIS sums of the settled updates, the updates the filter applied in the last
    ``window_s`` s of its own time, still replaceable (a re-applied measurement replaces its
    first result), and min/max-preserving decimations of the settled (time, NIS) and (time,
    innovation...) rows for the plots.

    Settling goes by when the filter applied an update, not by its stamp: a measurement
    that arrives later than the filter's history is applied at the filter's time, and a
    delayed fix can re-apply it seconds after its stamp."""

    def __init__(self, dof: int, window_s: float) -> None:
        self.dof = dof
        self.window_s = window_s
        self._settled = np.zeros(4)  # updates, accepted, NIS sum of the accepted, above 95%
        self._nis = PlotSeries(2)
        self._innovations = PlotSeries(1 + dof)
        self._recent: dict[float, tuple[float, bool, FloatArray]] = {}  # stamp -> result
        self._applied_at: dict[float, float] = {}  # stamp -> filter time first applied
        self._by_applied: list[tuple[float, float]] = []  # heap of (applied, stamp) of those
        self._bound = chi_square.quantile(0.95, dof)

    def add(self, time: float, nis: float, accepted: bool, innovation: FloatArray,
            filter_time: float) -> None:
        """An update's result (stamp ``time``, applied at ``filter_time``, s); one at a stamp
        still replaceable replaces it."""
        self._recent[time] = (nis, accepted, innovation)
        if time not in self._applied_at:
            self._applied_at[time] = filter_time
            heapq.heappush(self._by_applied, (filter_time, time))
        horizon = filter_time - self.window_s
        heap = self._by_applied
        if not heap[0][0] < horizon:
            return
        old = []  # the stamps applied before the horizon: settled
        while heap and heap[0][0] < horizon:
            old.append(heapq.heappop(heap)[1])
            del self._applied_at[old[-1]]
        old.sort()
        rows = [self._recent.pop(t) for t in old]
        self._settled += self._counts(rows)
        self._nis.extend([(t, nis) for t, (nis, _, _) in zip(old, rows, strict=True)])
        self._innovations.extend([(t, *innovation)
                                  for t, (_, _, innovation) in zip(old, rows, strict=True)])

    @property
    def replaceable(self) -> int:
        """Updates held because a re-applied measurement may still replace them."""
        return len(self._recent)

    def _counts(self, rows: list[tuple[float, bool, FloatArray]]) -> FloatArray:
        return np.array([len(rows), sum(accepted for _, accepted, _ in rows),
                         sum(nis for nis, accepted, _ in rows if accepted),
                         sum(nis > self._bound for nis, _, _ in rows)], dtype=float)

    def figures(self) -> dict[str, Any]:
        """updates, accepted, NIS mean of the accepted (NaN without), fraction above the
        chi-square 95% bound: over every update, the replaceable ones included."""
        updates, accepted, nis_sum, above = self._settled + self._counts(
            list(self._recent.values()))
        return {"updates": int(updates), "accepted": int(accepted),
                "nis_mean": nis_sum / accepted if accepted else math.nan,
                "above_95pct": above / updates}

    def rows(self, innovations: bool = False) -> FloatArray:
        """(time, NIS) rows, or (time, innovation...) ones, decimated, in time order."""
        recent = sorted(self._recent.items())
        if innovations:
            tail = [(t, *innovation) for t, (_, _, innovation) in recent]
            settled = self._innovations.rows()
        else:
            tail = [(t, nis) for t, (nis, _, _) in recent]
            settled = self._nis.rows()
        table: FloatArray = np.concatenate([settled, np.reshape(tail, (-1, settled.shape[1]))])
        return table


class ReportSeries:
    """What the report keeps: of the estimates (at the report rate), running figures and
    min/max-decimated plot series; the reference comparisons (at the report rate, whole:
    the map offset is their median); the updates of every source (``SourceUpdates``;
    ``history_s``: how far back the filter re-applies updates after a delayed measurement,
    its ``history_length``)."""

    def __init__(self, history_s: float = 1.0) -> None:
        self.first_estimate_time = math.nan
        self.max_gyro_bias_deg_s = -math.inf  # NaN once a bias is not finite
        self.nonfinite_estimates = 0
        self.estimate_path = PlotSeries(3)  # time, east, north (m)
        self.bias_series = [PlotSeries(3) for _ in range(6)]
        """time, bias, its sigma: gyro x y z (rad/s), then accelerometer x y z (m/s^2)."""
        self.comparisons: list[dict[str, Any]] = []
        self.updates: dict[str, SourceUpdates] = {}
        self._window_s = history_s + REAPPLY_MARGIN_S
        self.last_estimate_time = -math.inf

    def add_estimate(self, t: float, estimate: dict[str, FloatArray]) -> None:
        self.last_estimate_time = t
        if math.isnan(self.first_estimate_time):
            self.first_estimate_time = t
        bias_norm = math.degrees(float(np.linalg.norm(estimate["gyro_bias"])))
        self.max_gyro_bias_deg_s = float(np.maximum(self.max_gyro_bias_deg_s, bias_norm))
        self.nonfinite_estimates += not all(
            np.all(np.isfinite(value)) for value in (
                estimate["position"], estimate["velocity"], euler_enu(estimate["attitude"])))
        east, north = estimate["position"][:2].tolist()
        self.estimate_path.add((t, east, north))
        biases = [*estimate["gyro_bias"].tolist(), *estimate["accel_bias"].tolist()]
        sigmas = estimate["bias_sigma"].tolist()
        for series, bias, sigma in zip(self.bias_series, biases, sigmas, strict=True):
            series.add((t, bias, sigma))

    def add_reference(self, t: float, position: Any, velocity: Any, q: FloatArray,
                      estimate: dict[str, FloatArray],
                      outage: tuple[float, float] | None = None) -> None:
        """Compare the estimate at (up to one IMU interval before) ``t`` with the reference;
        ``outage``: a simulated GNSS outage window (stamp s) to flag the rows inside."""
        self.comparisons.append({
            "in_outage": outage is not None and outage[0] <= t < outage[1],
            "time": t, "reference_position": np.asarray(position, dtype=float),
            "position_error": estimate["position"] - np.asarray(position, dtype=float),
            "velocity_error": estimate["velocity"] - np.asarray(velocity, dtype=float),
            "euler_error": _wrap(euler_enu(estimate["attitude"]) - euler_enu(q)),
            "position_sigma": np.sqrt(np.diag(estimate["position_cov"])),
            "attitude_sigma": np.sqrt(np.diag(estimate["attitude_cov"]))})

    def add_update(self, update: UpdateResult, filter_time: float) -> None:
        """An update of any source, applied by the filter at ``filter_time`` (s); the
        innovation is measured - predicted. A measurement re-applied after a delayed one
        (same source and stamp) replaces its first result, as the filter's own counts do."""
        if update.reason not in ("accepted", "gated"):
            return  # rejected before the gate: no innovation (counted by the filter)
        if update.source not in self.updates:
            self.updates[update.source] = SourceUpdates(update.dof, self._window_s)
        self.updates[update.source].add(update.time, update.nis, update.accepted,
                                        -np.asarray(update.residual, dtype=float), filter_time)

    def _stack(self, rows: list[dict[str, Any]], key: str) -> FloatArray:
        return np.array([row[key] for row in rows])

    def summary(self) -> dict[str, Any]:
        """RMSE against the reference (all of it, the second half, the last fifth: the
        converged part after manoeuvres; horizontal and vertical also with the constant map
        offset between the two removed), the simulated outage, and NIS per source. The map
        offset is the median position difference outside a simulated outage: the drift
        inside it, and the recovery after it, are what the outage figures measure."""
        result: dict[str, Any] = {"reference_samples": len(self.comparisons)}
        if self.comparisons:
            n = len(self.comparisons)
            for label, rows in (("", self.comparisons),
                                ("_second_half", self.comparisons[n // 2:]),
                                ("_last_fifth", self.comparisons[4 * n // 5:])):
                result.update(_errors(self, rows, label))
            aided = [row for row in self.comparisons if not row["in_outage"]]
            offset = np.median(self._stack(aided or self.comparisons, "position_error"), axis=0)
            result["position_offset_enu_m"] = offset.tolist()
            pos = self._stack(self.comparisons, "position_error") - offset
            result["rmse_horizontal_m_offset_removed"] = _rms(np.hypot(pos[:, 0], pos[:, 1]))
            result["rmse_vertical_m_offset_removed"] = _rms(pos[:, 2])
            outage = [row for row in self.comparisons if row["in_outage"]]
            if outage:
                result.update(_outage(self, outage, offset))
        if not math.isnan(self.first_estimate_time):
            result["first_estimate_time_s"] = self.first_estimate_time
            result["max_gyro_bias_deg_s"] = self.max_gyro_bias_deg_s
            result["nonfinite_estimates"] = self.nonfinite_estimates
        result.update(self._nis_summary())
        return result

    def _nis_summary(self) -> dict[str, Any]:
        """Per source: accepted updates, mean NIS and its ratio to the expectation (dof)."""
        result: dict[str, Any] = {}
        by_source = {}
        for source, updates in self.updates.items():
            figures = updates.figures()
            by_source[source] = {
                "updates": figures["updates"], "accepted": figures["accepted"],
                "nis_mean": figures["nis_mean"], "nis_expected": updates.dof,
                "nis_ratio": figures["nis_mean"] / updates.dof,
                "above_95pct": figures["above_95pct"]}
        result["nis_by_source"] = by_source
        gnss = by_source.get(GNSS_POSITION)
        if gnss is not None:  # the GNSS position NIS, as the earlier reports gave it
            result["nis_epochs"] = gnss["updates"]
            result["nis_mean"] = gnss["nis_mean"]
            result["nis_mean_dof"] = gnss["nis_expected"]
            result["nis_gated"] = gnss["updates"] - gnss["accepted"]
        return result


def _rms(values: FloatArray) -> float:
    return float(np.sqrt(np.mean(np.square(values))))


def _errors(series: ReportSeries, rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    pos = series._stack(rows, "position_error")
    vel = series._stack(rows, "velocity_error")
    euler = np.degrees(series._stack(rows, "euler_error"))
    return {f"rmse_position_m{label}": _rms(np.linalg.norm(pos, axis=1)),
            f"rmse_position_enu_m{label}": np.sqrt(np.mean(pos**2, 0)).tolist(),
            f"rmse_horizontal_m{label}": _rms(np.hypot(pos[:, 0], pos[:, 1])),
            f"rmse_vertical_m{label}": _rms(pos[:, 2]),
            f"rmse_velocity_m_s{label}": _rms(np.linalg.norm(vel, axis=1)),
            f"rmse_roll_pitch_deg{label}": np.sqrt(np.mean(euler[:, :2] ** 2, 0)).tolist(),
            f"rmse_yaw_deg{label}": _rms(euler[:, 2]),
            f"max_horizontal_error_m{label}": float(np.max(np.hypot(pos[:, 0], pos[:, 1]))),
            f"max_yaw_error_deg{label}": float(np.max(np.abs(euler[:, 2])))}


def _outage(series: ReportSeries, rows: list[dict[str, Any]], offset: FloatArray
            ) -> dict[str, Any]:
    """Errors inside the simulated GNSS outage with the flight's constant map offset
    removed (it is no dead-reckoning error), and how often 3 sigma holds them: the errors
    themselves, and their drift from the outage's first row (the part the estimator's
    covariance describes when the reference, an autopilot's estimate, already differs from
    the aided estimate by more than the estimate's own sigma)."""
    drift = series._stack(rows, "position_error") - offset
    sigma = series._stack(rows, "position_sigma")
    bound = 3.0 * sigma[:, :2]
    inside = np.all(np.abs(drift[:, :2]) <= bound, axis=1)
    from_start = np.all(np.abs(drift[:, :2] - drift[0, :2]) <= bound, axis=1)
    return {"outage_samples": len(rows),
            "outage_max_vertical_error_m": float(np.max(np.abs(drift[:, 2]))),
            "outage_max_horizontal_error_m": float(np.max(np.hypot(drift[:, 0], drift[:, 1]))),
            "outage_horizontal_inside_3sigma": float(np.mean(inside)),
            "outage_horizontal_drift_inside_3sigma": float(np.mean(from_start)),
            "outage_max_vertical_sigma_m": float(np.max(sigma[:, 2])),
            "outage_max_horizontal_sigma_m": float(np.max(np.hypot(sigma[:, 0], sigma[:, 1])))}


def _save(fig: Any, path: Path, title: bool = False) -> None:
    """Write the PNG with fixed margins (inches, room for the tick and axis labels, and a
    title above): ``tight_layout`` measures every tick label by drawing the figure an extra
    time, a third of the report's time."""
    import matplotlib.pyplot as plt  # on use: see write_report

    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.9 / width, right=1.0 - 0.25 / width, bottom=0.6 / height,
                        top=1.0 - (0.7 if title else 0.4) / height, hspace=0.3, wspace=0.3)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_trajectory(series: ReportSeries, path: Path) -> None:
    import matplotlib.pyplot as plt  # on use: see write_report

    fig, ax = plt.subplots(figsize=(6, 6))
    if series.estimate_path.seen:
        _, east, north = series.estimate_path.columns()
        ax.plot(east, north, label="trident EKF")
    if series.comparisons:
        r = series._stack(series.comparisons, "reference_position")
        ax.plot(r[:, 0], r[:, 1], "--", label="reference (autopilot)")
    ax.set_xlabel("east (m)")
    ax.set_ylabel("north (m)")
    ax.axis("equal")
    if series.estimate_path.seen or series.comparisons:
        ax.legend()
    ax.set_title("trajectory in the ENU map frame")
    _save(fig, path)


def _plot_errors(series: ReportSeries, path: Path) -> None:
    import matplotlib.pyplot as plt  # on use: see write_report

    fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex=True)
    if series.comparisons:
        t = series._stack(series.comparisons, "time")
        t = t - t[0]
        pos = series._stack(series.comparisons, "position_error")
        sig = series._stack(series.comparisons, "position_sigma")
        euler = np.degrees(series._stack(series.comparisons, "euler_error"))
        att_sig = np.degrees(series._stack(series.comparisons, "attitude_sigma"))
        for i, name in enumerate("ENU"):
            axes[i, 0].plot(t, pos[:, i], label="estimate - reference")
            axes[i, 0].fill_between(t, -3 * sig[:, i], 3 * sig[:, i], alpha=0.3, label="3 sigma")
            axes[i, 0].set_ylabel(f"{name} error (m)")
        for i, name in enumerate(("roll", "pitch", "yaw")):
            axes[i, 1].plot(t, euler[:, i], label="estimate - reference")
            axes[i, 1].fill_between(t, -3 * att_sig[:, i], 3 * att_sig[:, i], alpha=0.3,
                                    label="3 sigma (about E, N, U)")
            axes[i, 1].set_ylabel(f"{name} error (deg)")
        axes[0, 0].legend(fontsize=7)
        axes[0, 1].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("time since start (s)")
    _save(fig, path)


def _plot_biases(series: ReportSeries, path: Path) -> None:
    import matplotlib.pyplot as plt  # on use: see write_report

    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    if series.estimate_path.seen:
        for ax, name, scale, unit, first in ((axes[0], "gyro bias", 180 / np.pi, "deg/s", 0),
                                             (axes[1], "accel bias", 1.0, "m/s^2", 3)):
            for i, axis in enumerate("xyz"):
                time, value, sigma = series.bias_series[first + i].columns()
                t = time - series.first_estimate_time
                line, = ax.plot(t, value * scale, label=f"{axis} (FLU)")
                ax.fill_between(t, (value - 3 * sigma) * scale, (value + 3 * sigma) * scale,
                                color=line.get_color(), alpha=0.15)
            ax.set_ylabel(f"{name} ({unit})")
            ax.legend(fontsize=7)
    axes[-1].set_xlabel("time since start (s)")
    _save(fig, path)


def _plot_per_source(series: ReportSeries, path: Path,
                     draw: Callable[[Any, SourceUpdates, float], None],
                     title: str | None = None) -> None:
    """One panel per source, its updates drawn by ``draw(ax, updates, start)``, with time
    from the first update of any source (``start``, s)."""
    import matplotlib.pyplot as plt  # on use: see write_report

    sources = sorted(series.updates)
    panels = max(len(sources), 1)
    fig, axes = plt.subplots(panels, 1, figsize=(9, 2.2 * panels), sharex=True, squeeze=False)
    start = min((float(updates.rows()[0, 0]) for updates in series.updates.values()),
                default=0.0)
    for ax, source in zip(axes[:, 0], sources, strict=False):
        draw(ax, series.updates[source], start)
        ax.set_ylabel(source, fontsize=8)
    axes[-1, 0].set_xlabel("time since the first update (s)")
    if title:
        fig.suptitle(title)
    _save(fig, path, title=bool(title))


def _draw_nis(ax: Any, updates: SourceUpdates, start: float) -> None:
    """NIS of the updates (decimated) against the chi-square 95% bound and the expectation."""
    time, nis = updates.rows().T
    from matplotlib.ticker import LogFormatter, NullFormatter

    ax.semilogy(time - start, nis, ".", markersize=2, label=f"NIS ({updates.dof} dof)")
    # Plain labels: the default ones are mathtext, whose parser costs a second to set up.
    ax.yaxis.set_major_formatter(LogFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(chi_square.quantile(0.95, updates.dof), color="r", label="chi-square 95%")
    ax.axhline(updates.dof, color="k", linestyle="--", label="expectation")
    ax.legend(fontsize=7, loc="upper right")


def _draw_innovations(ax: Any, updates: SourceUpdates, start: float) -> None:
    """Every component of the innovation (measured - predicted), decimated."""
    table = updates.rows(innovations=True)
    for i in range(updates.dof):
        ax.plot(table[:, 0] - start, table[:, 1 + i], ".", markersize=2, label=f"component {i}")
    ax.legend(fontsize=7, loc="upper right", ncol=3)


def _plot_nis(series: ReportSeries, path: Path) -> None:
    _plot_per_source(series, path, _draw_nis)


def _plot_innovations(series: ReportSeries, path: Path) -> None:
    _plot_per_source(series, path, _draw_innovations,
                     "innovations, measured - predicted (source units: m, m/s, T, rad)")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    return str(value)


def _source_table(summary: dict[str, Any]) -> list[str]:
    """Per source: updates accepted and rejected by reason, NIS mean against dof."""
    lines = ["## Measurements", "",
             "NIS mean of the accepted updates against its expectation (the dof); a ratio "
             "well below 1 means the noise is set too large, above 1 too small.", "",
             "| source | accepted | rejected (by reason) | NIS mean | expected | ratio |",
             "|---|---:|---|---:|---:|---:|"]
    for name, status in summary.get("sources", {}).items():
        reasons = ", ".join(f"{reason} {status[reason]}" for reason in status
                            if reason not in ("source", "dof", "accepted", "rejected",
                                              "nis_mean", "nis_expected", "last_time",
                                              "last_nis", "last_test_ratio",
                                              "last_innovation") and status[reason])
        mean, dof = status["nis_mean"], status["dof"]
        lines.append(f"| {name} | {status['accepted']} | {status['rejected']} "
                     f"({reasons or 'none'}) | {mean:.2f} | {dof} | {mean / dof:.2f} |")
    return lines


def _import_table(summary: dict[str, Any]) -> list[str]:
    """What trident-import dropped or flagged (when the bag came from it)."""
    imported = summary.get("import") or {}
    if not imported:
        return []
    return ["## Log import", "", "| item | value |", "|---|---|",
            *(f"| {key} | {value} |" for key, value in imported.items()), ""]


TABLE_EXCLUDED = ("counters", "sources", "import", "nis_by_source")


PLOTS: dict[str, plot_workers.Plot] = {
    "trajectory.png": _plot_trajectory, "errors.png": _plot_errors, "biases.png": _plot_biases,
    "nis.png": _plot_nis, "innovations.png": _plot_innovations}
"""The report's figures (file name: plot function), drawn by ``write_report``."""


def report_workers(workers: int | None = None) -> plot_workers.PlotWorkers:
    """Processes that draw the report's figures (``mav_ros_common.plot_workers``; ``workers``
    as there): made when a reported replay starts, so that they load matplotlib meanwhile."""
    return plot_workers.PlotWorkers(("matplotlib.pyplot", __name__), len(PLOTS), workers)


def write_report(series: ReportSeries, summary: dict[str, Any], directory: Path,
                 workers: plot_workers.PlotWorkers | None = None) -> Path:
    """Write report.md, report.json and the PNG plots into ``directory`` (the plots in
    ``workers`` when given, see ``report_workers``)."""
    # matplotlib (~0.5 s to import) is loaded by the plot functions, not at the top: a
    # replay imports this module for its series long before it plots, --help never plots.
    directory.mkdir(parents=True, exist_ok=True)
    plot_workers.draw(PLOTS, series, directory, workers)
    (directory / "report.json").write_text(json.dumps(summary, indent=2, default=str))
    lines = [f"# trident-replay report: {summary.get('bag', '')}", "",
             "Errors are estimate minus the reference odometry (the autopilot's own estimate, "
             "which also fuses baro and magnetometer: not ground truth). Positions in the ENU "
             "map frame at the reference's datum; angles ZYX Euler in ENU/FLU. "
             "'offset_removed' figures subtract the median position difference (the two maps' "
             "constant offset).", "",
             "| quantity | value |", "|---|---|"]
    lines += [f"| {key} | {_format(value)} |" for key, value in summary.items()
              if key not in TABLE_EXCLUDED]
    lines += ["", *_source_table(summary), "", *_import_table(summary)]
    lines += ["| counter | value |", "|---|---:|"]
    lines += [f"| {key} | {value} |" for key, value in summary.get("counters", {}).items()]
    lines += [""] + [f"![{name}]({name})" for name in PLOTS]
    path = directory / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
