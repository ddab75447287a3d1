"""The PNG figures of a campaign report (matplotlib, Agg). Each function draws one figure from
numbers the report has already reduced, and writes it to ``path``.

matplotlib is imported by ``use_agg`` when a report is written, not with this module: it
takes about half a second, which a campaign that only runs should not pay."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.consistency import EnsembleAverage, SourceTally, band

FloatArray = NDArray[np.float64]

DPI = 110
HISTOGRAM_BINS = 60
NORMALISED_RANGE = 5.0
"""Normalised-error histograms span +-this many sigma."""
ERROR_DISPLAY = {"position": ("m", 1.0), "velocity": ("m/s", 1.0),
                 "attitude": ("deg", float(np.degrees(1.0)))}
"""Unit and factor from SI of each error kind in the figures."""


def use_agg() -> None:
    """Load matplotlib, drawing to files only (a campaign may run without a display)."""
    import matplotlib

    matplotlib.use("Agg")


def _plain_log_ticks(axis: Any) -> None:
    """Ticks of a log axis at 1 and 3 times the powers of ten, in plain numbers (not
    3x10^0), without minor ticks: readable, and fewer ticks to lay out (they dominate the
    drawing time of a log axis)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullLocator

    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 3.0)))
    axis.set_major_formatter(FormatStrFormatter("%g"))
    axis.set_minor_locator(NullLocator())


def _save(figure: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def nees_figure(average: EnsembleAverage, title: str, path: Path) -> None:
    """Average NEES over runs against time, one panel per error kind, with the 95 % band
    of the number of runs at each time (log scale: an outage's growth stays readable)."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(C.ERROR_KINDS), 1, figsize=(9, 8), sharex=True,
                                squeeze=False)
    time = average.time_s
    for column, (kind, ax) in enumerate(zip(C.ERROR_KINDS, axes[:, 0], strict=True)):
        count = average.count[:, column]
        lower, upper = band(count, C.NEES_DOF)
        seen = count > 0
        ax.fill_between(time, lower, upper, where=seen, color="tab:green", alpha=0.25,
                        label="95 % band for the number of runs at that time")
        ax.plot(time[seen], average.mean[seen, column], color="tab:blue", lw=1.0,
                label="average NEES over runs")
        ax.axhline(C.NEES_DOF, color="k", ls="--", lw=0.8, label=f"dof = {C.NEES_DOF}")
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
        ax.set_ylabel(f"{kind} NEES")
        runs = count[seen]
        most = int(runs.max()) if len(runs) else 0
        spread = (f"{runs.min()} to {most} runs" if len(runs) and runs.min() < most
                  else f"{most} run{'' if most == 1 else 's'}")
        ax.set_title(f"{kind} ({spread} at each time)", fontsize=10)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=9)
    axes[-1, 0].set_xlabel("time since simulation start, s")
    figure.suptitle(f"Average NEES over runs: {title}")
    # fixed margins: tight_layout would draw the figure once more (log ticks are slow)
    figure.subplots_adjust(left=0.09, right=0.98, top=0.91, bottom=0.13, hspace=0.3)
    _save(figure, path)


def nis_figure(per_source: dict[str, list[SourceTally]], path: Path) -> None:
    """Each run's time-averaged NIS per dof, per source, with the pooled value and its 95 %
    band (the band of one run's average is wider: it depends on that run's dof)."""
    import matplotlib.pyplot as plt

    sources = sorted(per_source)
    figure, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(sources) + 2), 5))
    rng = np.random.default_rng(0)  # jitter only
    for index, source in enumerate(sources):
        used = [t for t in per_source[source] if t.dof_sum]
        values = np.array([t.nis_per_dof for t in used])
        ax.scatter(index + rng.uniform(-0.2, 0.2, len(values)), values, s=8, alpha=0.6,
                   zorder=3,
                   color="tab:blue", label="one run's time average" if index == 0 else None)
        pooled = SourceTally()
        for tally in used:
            pooled.add(tally)
        if pooled.dof_sum:
            lower, upper = band([pooled.dof_sum], 1)
            ax.plot([index - 0.3, index + 0.3], [pooled.nis_per_dof] * 2, color="tab:red",
                    lw=2.5, label="all runs" if index == 0 else None)
            ax.fill_between([index - 0.35, index + 0.35], lower[0], upper[0],
                            color="tab:green", alpha=0.35,
                            label="95 % band of all runs" if index == 0 else None)
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="correct covariance")
    ax.set_xticks(range(len(sources)), sources)
    ax.set_ylabel("time-averaged NIS / dof (accepted updates)")
    ax.set_title("NIS per measurement source")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    _save(figure, path)


def error_histograms(sample: FloatArray, path: Path) -> None:
    """Histograms of the errors (truth - estimate) per kind and axis, pooled over runs;
    ``sample`` holds the error columns in ERROR_KINDS x AXES order, SI units."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(C.ERROR_KINDS), len(C.AXES), figsize=(11, 8),
                                squeeze=False)
    for row, kind in enumerate(C.ERROR_KINDS):
        unit, factor = ERROR_DISPLAY[kind]
        for column, axis in enumerate(C.AXES):
            ax = axes[row, column]
            values = sample[:, row * len(C.AXES) + column] * factor
            values = values[np.isfinite(values)]
            if len(values):
                limit = float(np.quantile(np.abs(values), 0.995)) or 1.0
                counts, edges = np.histogram(np.clip(values, -limit, limit),
                                             bins=HISTOGRAM_BINS, range=(-limit, limit))
                ax.stairs(counts, edges, fill=True, color="tab:blue", alpha=0.8)
                ax.set_title(f"mean {np.mean(values):.3g} {unit}, std {np.std(values):.3g} "
                             f"{unit}", fontsize=9)
            ax.set_xlabel(f"{kind} error {axis}, {unit}")
            ax.set_ylabel("samples" if column == 0 else "")
    figure.suptitle("Estimation errors (truth - estimate, ENU) pooled over runs "
                    "(outermost 0.5 % piled at the edges)")
    figure.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.07, hspace=0.4,
                           wspace=0.25)
    _save(figure, path)


def normalised_histograms(sample: FloatArray, path: Path) -> None:
    """Histograms of error / sigma per kind and axis against the standard normal density."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(C.ERROR_KINDS), len(C.AXES), figsize=(11, 8),
                                sharex=True, squeeze=False)
    grid = np.linspace(-NORMALISED_RANGE, NORMALISED_RANGE, 201)
    normal = np.exp(-0.5 * grid**2) / np.sqrt(2.0 * np.pi)
    for row, kind in enumerate(C.ERROR_KINDS):
        for column, axis in enumerate(C.AXES):
            ax = axes[row, column]
            values = sample[:, row * len(C.AXES) + column]
            values = values[np.isfinite(values)]
            if len(values):
                beyond = float(np.mean(np.abs(values) > NORMALISED_RANGE))
                density, edges = np.histogram(values, bins=HISTOGRAM_BINS, density=True,
                                              range=(-NORMALISED_RANGE, NORMALISED_RANGE))
                ax.stairs(density * np.mean(np.abs(values) <= NORMALISED_RANGE), edges,
                          fill=True, color="tab:blue", alpha=0.7, label="pooled runs")
                ax.set_title(f"std {np.std(values):.2f}, {100 * beyond:.1f} % beyond "
                             f"±{NORMALISED_RANGE:g}", fontsize=9)
            ax.plot(grid, normal, color="k", lw=1.0, label="N(0, 1)")
            ax.set_xlabel(f"{kind} {axis}: error / sigma")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    axes[0, 0].set_ylabel("probability density")
    figure.suptitle("Normalised errors pooled over runs against N(0, 1): wider is optimistic, "
                    "narrower pessimistic")
    figure.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.07, hspace=0.4,
                           wspace=0.25)
    _save(figure, path)


def tracking_figure(values: dict[tuple[str, str], list[float]], metric: str,
                    path: Path) -> None:
    """Box plot of ``metric`` (m) per scenario, one box per vehicle; ``values`` maps
    (scenario, vehicle) to the runs' values."""
    import matplotlib.pyplot as plt

    scenarios = sorted({s for s, _ in values})
    vehicles = sorted({v for _, v in values})
    width = 0.8 / len(vehicles)
    figure, ax = plt.subplots(figsize=(max(7.0, 1.8 * len(scenarios) + 2), 5))
    colours = plt.get_cmap("tab10")
    for index, vehicle in enumerate(vehicles):
        positions = [s + (index - (len(vehicles) - 1) / 2) * width
                     for s, scenario in enumerate(scenarios) if (scenario, vehicle) in values]
        data = [values[(scenario, vehicle)] for scenario in scenarios
                if (scenario, vehicle) in values]
        boxes = ax.boxplot(data, positions=positions, widths=0.9 * width, patch_artist=True,
                           manage_ticks=False)
        for box in boxes["boxes"]:
            box.set_facecolor(colours(index % 10))
            box.set_alpha(0.6)
        ax.plot([], [], "s", color=colours(index % 10), label=vehicle)
    ax.set_xticks(range(len(scenarios)), scenarios, rotation=20)
    ax.set_xlabel("scenario")
    ax.set_ylabel(f"{metric.removesuffix('_m').replace('_', ' ')} per run, m")
    ax.set_title("Tracking error per run, by scenario and vehicle")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title="vehicle", fontsize=8)
    figure.tight_layout()
    _save(figure, path)


def ranking_figure(means: Sequence[float], spreads: Sequence[float], nees: Sequence[float],
                   consistent: Sequence[bool], metric: str, path: Path) -> None:
    """Each parameter setting's ``metric`` (mean and spread over its runs) against its mean
    position NEES per dof: the most accurate consistent setting is the lowest green point."""
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(7, 5))
    for flag, colour, label in ((True, "tab:green", "consistent"),
                                (False, "tab:red", "not consistent")):
        pick = [i for i, c in enumerate(consistent) if c == flag]
        if pick:
            ax.errorbar([nees[i] for i in pick], [means[i] for i in pick],
                        yerr=[spreads[i] for i in pick], fmt="o", color=colour, label=label,
                        capsize=3)
    ax.axvline(1.0, color="k", ls="--", lw=0.8, label="correct covariance")
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    ax.set_xlabel("mean position NEES / dof over runs and time")
    ax.set_ylabel(f"{metric} (mean ± std over runs)")
    ax.set_title("Parameter settings: accuracy against consistency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    _save(figure, path)
