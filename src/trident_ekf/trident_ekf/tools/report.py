"""Replay report: errors against the reference, NIS statistics, Markdown/JSON and PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import chi2

from mav_geometry.arrays import FloatArray
from trident_ekf.tools.frames import euler_enu


def _wrap(angle: FloatArray) -> FloatArray:
    return (angle + np.pi) % (2.0 * np.pi) - np.pi


class ReportSeries:
    """Decimated series kept for the report (estimate, reference comparison, NIS)."""

    def __init__(self) -> None:
        self.estimates: list[dict[str, Any]] = []
        self.comparisons: list[dict[str, Any]] = []
        self.nis: list[tuple[float, float, int, bool]] = []
        self.last_estimate_time = -math.inf

    def add_estimate(self, t: float, estimate: dict[str, FloatArray]) -> None:
        self.last_estimate_time = t
        self.estimates.append({
            "time": t, "position": estimate["position"], "velocity": estimate["velocity"],
            "euler": euler_enu(estimate["attitude"]),
            "position_sigma": np.sqrt(np.diag(estimate["position_cov"])),
            "gyro_bias": estimate["gyro_bias"], "accel_bias": estimate["accel_bias"],
            "bias_sigma": estimate["bias_sigma"]})

    def add_reference(self, t: float, position: Any, velocity: Any, q: FloatArray,
                      estimate: dict[str, FloatArray]) -> None:
        """Compare the estimate at (up to one IMU interval before) ``t`` with the reference."""
        self.comparisons.append({
            "time": t, "reference_position": np.asarray(position, dtype=float),
            "position_error": estimate["position"] - np.asarray(position, dtype=float),
            "velocity_error": estimate["velocity"] - np.asarray(velocity, dtype=float),
            "euler_error": _wrap(euler_enu(estimate["attitude"]) - euler_enu(q)),
            "position_sigma": np.sqrt(np.diag(estimate["position_cov"])),
            "attitude_sigma": np.sqrt(np.diag(estimate["attitude_cov"]))})

    def add_nis(self, t: float, nis: float, dof: int, accepted: bool) -> None:
        self.nis.append((t, nis, dof, accepted))

    def _stack(self, rows: list[dict[str, Any]], key: str) -> FloatArray:
        return np.array([row[key] for row in rows])

    def summary(self) -> dict[str, Any]:
        """RMSE against the reference (all of it, the second half, the last fifth: the
        converged part after manoeuvres) and NIS statistics."""
        result: dict[str, Any] = {"reference_samples": len(self.comparisons)}
        if self.comparisons:
            n = len(self.comparisons)
            for label, rows in (("", self.comparisons),
                                ("_second_half", self.comparisons[n // 2:]),
                                ("_last_fifth", self.comparisons[4 * n // 5:])):
                pos = self._stack(rows, "position_error")
                vel = self._stack(rows, "velocity_error")
                euler = np.degrees(self._stack(rows, "euler_error"))
                result[f"rmse_position_m{label}"] = float(np.sqrt(np.mean(np.sum(pos**2, 1))))
                result[f"rmse_position_enu_m{label}"] = np.sqrt(np.mean(pos**2, 0)).tolist()
                result[f"rmse_velocity_m_s{label}"] = float(np.sqrt(np.mean(np.sum(vel**2, 1))))
                result[f"rmse_roll_pitch_deg{label}"] = np.sqrt(
                    np.mean(euler[:, :2] ** 2, 0)).tolist()
                result[f"rmse_yaw_deg{label}"] = float(np.sqrt(np.mean(euler[:, 2] ** 2)))
        if self.nis:
            nis = np.array([n for _, n, _, _ in self.nis])
            dof = np.array([d for _, _, d, _ in self.nis])
            accepted = np.array([a for _, _, _, a in self.nis])
            result["nis_epochs"] = int(nis.size)
            result["nis_mean"] = float(np.mean(nis[accepted])) if accepted.any() else math.nan
            result["nis_mean_dof"] = float(np.mean(dof[accepted])) if accepted.any() else math.nan
            result["nis_above_95pct_bound"] = float(np.mean(nis > chi2.ppf(0.95, dof)))
            result["nis_gated"] = int(np.sum(~accepted))
        return result


def _plot_trajectory(series: ReportSeries, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 6))
    if series.estimates:
        p = series._stack(series.estimates, "position")
        ax.plot(p[:, 0], p[:, 1], label="trident EKF")
    if series.comparisons:
        r = series._stack(series.comparisons, "reference_position")
        ax.plot(r[:, 0], r[:, 1], "--", label="reference (autopilot)")
    ax.set_xlabel("east (m)")
    ax.set_ylabel("north (m)")
    ax.axis("equal")
    if series.estimates or series.comparisons:
        ax.legend()
    ax.set_title("trajectory in the ENU map frame")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_errors(series: ReportSeries, path: Path) -> None:
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
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_biases(series: ReportSeries, path: Path) -> None:
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    if series.estimates:
        t = series._stack(series.estimates, "time")
        t = t - t[0]
        sigma = series._stack(series.estimates, "bias_sigma")
        for ax, key, scale, unit, offset in ((axes[0], "gyro_bias", 180 / np.pi, "deg/s", 0),
                                             (axes[1], "accel_bias", 1.0, "m/s^2", 3)):
            values = series._stack(series.estimates, key) * scale
            for i, name in enumerate("xyz"):
                line, = ax.plot(t, values[:, i], label=f"{name} (FLU)")
                ax.fill_between(t, values[:, i] - 3 * sigma[:, offset + i] * scale,
                                values[:, i] + 3 * sigma[:, offset + i] * scale,
                                color=line.get_color(), alpha=0.15)
            ax.set_ylabel(f"{key.replace('_', ' ')} ({unit})")
            ax.legend(fontsize=7)
    axes[-1].set_xlabel("time since start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_nis(series: ReportSeries, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4))
    if series.nis:
        t = np.array([row[0] for row in series.nis])
        nis = np.array([row[1] for row in series.nis])
        dof = np.array([row[2] for row in series.nis])
        ax.semilogy(t - t[0], nis, ".", markersize=3, label="NIS")
        ax.semilogy(t - t[0], chi2.ppf(0.95, dof), "r-", label="chi-square 95%")
        ax.semilogy(t - t[0], dof, "k--", label="dof")
        ax.legend()
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("NIS")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    return str(value)


def write_report(series: ReportSeries, summary: dict[str, Any], directory: Path) -> Path:
    """Write report.md, report.json and four PNG plots into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    plots = {"trajectory.png": _plot_trajectory, "errors.png": _plot_errors,
             "biases.png": _plot_biases, "nis.png": _plot_nis}
    for name, plot in plots.items():
        plot(series, directory / name)
    (directory / "report.json").write_text(json.dumps(summary, indent=2, default=str))
    lines = [f"# trident-replay report: {summary.get('bag', '')}", "",
             "Errors are estimate minus the reference odometry (the autopilot's own estimate, "
             "which also fuses baro and magnetometer: not ground truth). Positions in the ENU "
             "map frame at the first GNSS fix; angles ZYX Euler in ENU/FLU.", "",
             "| quantity | value |", "|---|---|"]
    lines += [f"| {key} | {_format(value)} |" for key, value in summary.items()
              if key != "counters"]
    lines += ["", "| counter | value |", "|---|---:|"]
    lines += [f"| {key} | {value} |" for key, value in summary.get("counters", {}).items()]
    lines += [""] + [f"![{name}]({name})" for name in plots]
    path = directory / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
