"""The report of a campaign: ``OUT/report/report.md`` with its PNG figures and
``summary.json``, from a campaign output directory (layout: ``campaign.columns``).

1. Monte Carlo consistency: the average NEES over runs against time per group of runs that
   differ by their seed only, against its 95 % chi-square band (``campaign.consistency``);
   the average NIS per measurement source.
2. Error distributions per axis, raw and normalised by the filter's sigma.
3. Tracking error by scenario and vehicle.
4. Parameter settings (the runs sharing their parameter values, over vehicles, scenarios and
   seeds) ranked by a metric (lower is better) with their consistency, and the most accurate
   consistent one.
5. Outliers (beyond their group's median + 3 MAD) and failed runs, each with the commands
   that reproduce it.

Series and update files are read one run at a time into per-time-bin sums, bounded samples
and tallies: memory grows with the number of runs by one short row and one tally per
measurement source each, not by their samples.

``python -m mav_bringup.campaign.report OUT`` writes the report again from the files.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mav_bringup.campaign import columns as C
from mav_bringup.campaign import figures
from mav_bringup.campaign.consistency import (
    CONSISTENT,
    CONSISTENT_FRACTION,
    MIN_RANGE_S,
    BandCheck,
    EnsembleAverage,
    NisCheck,
    SourceTally,
    check_column,
    check_nis,
    tally_updates,
    worst_verdict,
)
from mav_bringup.campaign.reproduce import campaign_command, mav_sim_command
from mav_bringup.campaign.sample import UniformSample
from mav_geometry.shown import shown
from mav_geometry.yaml_file import read_yaml
from mav_ros_common.exit_codes import EXIT_OK
from mav_ros_common.streams import RunningStats
from trident_ekf.tools.command import UsageError, one_line, run_command

FloatArray = NDArray[np.float64]
GroupKey = tuple[str, str, str]  # vehicle, scenario, config hash: runs that differ by seed

DEFAULT_RANK_BY = "position_rms_m"
TRACKING_METRIC = "tracking_rms_m"
OUTLIER_MADS = 3.0
MAD_TO_SIGMA = 1.4826
"""Scales a median absolute deviation to the standard deviation of normal data."""
SAMPLE_ROWS = 100_000
"""Error samples kept for the histograms (uniform over every run's samples)."""
MAX_NEES_FIGURES = 24
"""NEES figures drawn at most (groups in ranking order); the table covers every group."""
ERROR_COLUMNS = tuple(C.error_column(k, a) for k in C.ERROR_KINDS for a in C.AXES)
SIGMA_COLUMNS = tuple(C.sigma_column(k, a) for k in C.ERROR_KINDS for a in C.AXES)


@dataclass
class Scan:
    """What the report keeps of the runs' series and update files."""

    nees: dict[GroupKey, EnsembleAverage] = field(default_factory=dict)
    tallies: dict[str, dict[str, SourceTally]] = field(default_factory=dict)  # by run id
    errors: RunningStats = field(default_factory=lambda: RunningStats(len(ERROR_COLUMNS)))
    normalised: RunningStats = field(
        default_factory=lambda: RunningStats(len(ERROR_COLUMNS)))
    sample: UniformSample = field(
        default_factory=lambda: UniformSample(2 * len(ERROR_COLUMNS), SAMPLE_ROWS))
    missing: list[str] = field(default_factory=list)  # "<run id>: <file>"


def write_campaign_report(output_dir: Path, *, rank_by: str | None = None) -> Path:
    """Write ``output_dir/report/`` (report.md, PNGs, summary.json); return report.md's path.
    ``rank_by`` (a metric name, lower is better) defaults to the campaign file's
    ``rank_by``, then to DEFAULT_RANK_BY. ValueError if results.parquet cannot be read or
    ``rank_by`` is no metric of it."""
    campaign = _read_campaign(output_dir / C.CAMPAIGN_FILE)
    metric = str(rank_by or campaign.get("rank_by") or DEFAULT_RANK_BY)
    metric = metric.removeprefix(C.METRIC_PREFIX)
    runs = _read_results(output_dir / C.RESULTS_FILE, metric)
    ok = [run for run in runs if run.get(C.STATUS) == C.STATUS_OK]
    scan = _scan(output_dir, ok)
    directory = output_dir / C.REPORT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    figures.use_agg()
    summary, lines = _Report(output_dir, campaign, runs, ok, metric, scan, directory).build()
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False)
                                            + "\n")
    path = directory / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _read_campaign(path: Path) -> dict[str, Any]:
    """The campaign file, or {} without one (the report then names no campaign)."""
    if not path.is_file():
        return {}
    _, loaded = read_yaml(path, "campaign", ValueError)
    return loaded if isinstance(loaded, dict) else {}


def _read_results(path: Path, metric: str) -> list[dict[str, Any]]:
    """The rows of results.parquet, with the columns the report uses only (the run, its
    parameters, ``metric`` and the tracking metric): 10 000 runs stay a few megabytes.
    UsageError if the runs have metrics but not ``metric``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        metrics = sorted(n.removeprefix(C.METRIC_PREFIX) for n in names
                         if n.startswith(C.METRIC_PREFIX))
        if metrics and metric not in metrics:
            raise UsageError(f"rank_by {shown(metric)} is not a metric of the results "
                             f"(metrics: {shown(metrics)})")
        wanted = [n for n in names if n in C.RESULTS_COLUMNS or n.startswith(C.PARAM_PREFIX)
                  or n in (C.METRIC_PREFIX + metric, C.METRIC_PREFIX + TRACKING_METRIC)]
        rows: list[dict[str, Any]] = pq.read_table(path, columns=wanted).to_pylist()
    except (OSError, pa.ArrowException) as error:
        raise ValueError(f"cannot read {path}: {one_line(str(error))}") from None
    return rows


def _read_columns(path: Path) -> dict[str, NDArray[Any]] | None:
    """The columns of a small Parquet file, None if it is missing or unreadable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException):
        return None
    return {name: table.column(name).to_numpy() for name in table.column_names}


def _group_key(run: dict[str, Any]) -> GroupKey:
    return str(run[C.VEHICLE]), str(run[C.SCENARIO]), str(run[C.CONFIG_HASH])


def _scan(output_dir: Path, runs: list[dict[str, Any]]) -> Scan:
    """Read every successful run's series and updates, one run at a time."""
    scan = Scan()
    for run in runs:
        run_id = str(run[C.RUN_ID])
        series = _read_columns(output_dir / C.SERIES_DIR / f"{run_id}.parquet")
        if series is None or C.TIME not in series:
            scan.missing.append(f"{run_id}: {C.SERIES_DIR}/{run_id}.parquet")
        else:
            _add_series(scan, _group_key(run), series)
        updates = _read_columns(output_dir / C.UPDATES_DIR / f"{run_id}.parquet")
        if updates is None or any(name not in updates for name in C.UPDATE_COLUMNS):
            scan.missing.append(f"{run_id}: {C.UPDATES_DIR}/{run_id}.parquet")
        else:
            scan.tallies[run_id] = tally_updates(updates[C.SOURCE], updates[C.NIS],
                                                 updates[C.DOF], updates[C.ACCEPTED])
    return scan


def _add_series(scan: Scan, key: GroupKey, series: dict[str, NDArray[Any]]) -> None:
    time = np.asarray(series[C.TIME], dtype=float)

    def stack(names: Iterable[str]) -> FloatArray:
        nan = np.full(len(time), np.nan)
        return np.column_stack([np.asarray(series.get(n, nan), dtype=float) for n in names])

    nees = stack(C.nees_column(kind) for kind in C.ERROR_KINDS)
    average = scan.nees.setdefault(key, EnsembleAverage(len(C.ERROR_KINDS),
                                                        1.0 / C.SERIES_RATE_HZ))
    average.add(time, nees)
    errors = stack(ERROR_COLUMNS)
    sigma = stack(SIGMA_COLUMNS)
    normalised = np.divide(errors, sigma, out=np.full(errors.shape, np.nan), where=sigma > 0)
    scan.errors.add(errors)
    scan.normalised.add(normalised)
    scan.sample.add(np.hstack([errors, normalised]))


def _finite(value: Any) -> float:
    """A metric as a float, NaN when absent."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def _num(value: float, spec: str = ".3g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def _percent(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100 * value:.0f} %"


def _cell(text: str) -> str:
    """Text in a Markdown table cell: one bounded line, pipes escaped."""
    return one_line(text).replace("|", "\\|")


def _clean(value: Any) -> Any:
    """Plain JSON, recursively: NaN and infinities as null (JSON has neither), numpy
    scalars as Python's."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


Setting = tuple[tuple[str, str], ...]
"""A parameter setting: (NODE.PARAM, value as JSON) of every ``param.`` column, sorted."""


def _setting(run: dict[str, Any]) -> Setting:
    return tuple(sorted((key.removeprefix(C.PARAM_PREFIX), json.dumps(value))
                        for key, value in run.items()
                        if key.startswith(C.PARAM_PREFIX) and value is not None))


@dataclass(frozen=True)
class RankedSet:
    """One parameter setting of the ranking: every run with these parameter values, over
    vehicles, scenarios (its groups, one config hash each) and seeds."""

    parameters: dict[str, Any]
    config_hashes: list[str]
    vehicles: list[str]
    scenarios: list[str]
    runs: int  # successful
    failed: int
    mean: float  # of the rank metric over the successful runs
    std: float  # sample standard deviation (0 for one run)
    nees_mean: dict[str, float]  # per error kind, over runs and time, per dof
    verdict: str  # the worst of its groups' NEES verdicts


class _Report:
    """Builds summary.json and report.md's lines, drawing the figures on the way."""

    def __init__(self, output_dir: Path, campaign: dict[str, Any], runs: list[dict[str, Any]],
                 ok: list[dict[str, Any]], metric: str, scan: Scan, directory: Path) -> None:
        self.output_dir = output_dir
        self.campaign = campaign
        self.runs = runs
        self.ok = ok
        self.metric = metric
        self.scan = scan
        self.directory = directory
        self.lines: list[str] = []
        self.summary: dict[str, Any] = {}

    def build(self) -> tuple[dict[str, Any], list[str]]:
        self._header()
        self.checks = {key: [check_column(average, column, C.NEES_DOF)
                             for column in range(len(C.ERROR_KINDS))]
                       for key, average in self.scan.nees.items()}
        ranking = self._ranking()
        self.rank_of = {config: index + 1 for index, ranked in enumerate(ranking)
                        for config in ranked.config_hashes}
        self._nees()
        self._nis()
        self._errors()
        self._tracking()
        self._ranking_section(ranking)
        self._outliers()
        return _clean(self.summary), self.lines

    # -- header ---------------------------------------------------------------------------

    def _header(self) -> None:
        name = str(self.campaign.get("name", self.output_dir.name))
        failed = len(self.runs) - len(self.ok)
        self.lines += [f"# Campaign report: {name}", ""]
        if self.campaign.get("description"):
            self.lines += [str(self.campaign["description"]), ""]
        self.lines += [
            f"- runs: {len(self.runs)} ({len(self.ok)} successful, {failed} failed)",
            f"- vehicles: {', '.join(sorted({str(r[C.VEHICLE]) for r in self.runs})) or '-'}",
            f"- scenarios: "
            f"{', '.join(sorted({str(r[C.SCENARIO]) for r in self.runs})) or '-'}",
            f"- ranked by: `{self.metric}` (lower is better)",
            f"- output directory: `{self.output_dir}`", ""]
        if not self.ok:
            self.lines += ["**No successful runs**: there is nothing to test for consistency "
                           "or to rank; the failed runs are listed at the end.", ""]
        if self.scan.missing:
            self.lines += [f"{len(self.scan.missing)} files of successful runs are missing or "
                           "unreadable and left out (summary.json lists them).", ""]
        self.summary.update(campaign=name, runs=len(self.runs), successful=len(self.ok),
                            failed=failed, rank_by=self.metric, missing_files=self.scan.missing)

    # -- 1. NEES --------------------------------------------------------------------------

    def _group_label(self, key: GroupKey) -> str:
        vehicle, scenario, config = key
        shared = sum(1 for k in self.scan.nees if k[:2] == key[:2])
        return f"{vehicle} · {scenario}" + (f" · setting {self.rank_of.get(config, '?')}"
                                            if shared > 1 else "")

    def _nees(self) -> None:
        self.lines += ["## 1. Monte Carlo consistency: average NEES over runs", "",
                       "Each group holds the runs that differ by their seed only (settings "
                       "are numbered as in the ranking, section 4). At every "
                       "time (10 Hz grid from the simulation start) the NEES of position, "
                       "velocity and attitude (3 dof each) is averaged over the group's N "
                       "runs that have a value then; a consistent filter keeps that average "
                       "inside the two-sided 95 % band "
                       "[χ²(0.025, 3N)/N, χ²(0.975, 3N)/N] about 95 % of the time. Verdict: "
                       f"*consistent* with at least {CONSISTENT_FRACTION:.0%} of the time "
                       "inside, otherwise *optimistic* (average above the band: errors "
                       "larger than the covariance says) or *pessimistic* (below), by the "
                       "side it leaves to most. Stretches of "
                       f"{MIN_RANGE_S:g} s or more outside the band are named.", ""]
        if not self.scan.nees:
            self.lines += ["No series of successful runs: nothing to test.", ""]
            self.summary["nees"] = []
            return
        keys = sorted(self.scan.nees, key=lambda k: (self.rank_of.get(k[2], 0), k))
        header = "| group | runs | " + " | ".join(
            f"{kind}: inside, mean NEES, verdict" for kind in C.ERROR_KINDS) + " | outside " \
            "the band |"
        self.lines += [header, "|" + "---|" * (3 + len(C.ERROR_KINDS))]
        groups = []
        for index, key in enumerate(keys):
            average = self.scan.nees[key]
            checks = self.checks[key]
            label = self._group_label(key)
            figure_name = f"nees_{index + 1:02d}.png" if index < MAX_NEES_FIGURES else None
            if figure_name:
                figures.nees_figure(average, label, self.directory / figure_name)
            runs = int(average.count.max()) if len(average.count) else 0
            cells = [f"{_percent(c.inside)}, {_num(c.mean)}, {c.verdict}" for c in checks]
            named = f"[{label}]({figure_name})" if figure_name else label
            self.lines.append(f"| {named} | {runs} | " + " | ".join(cells) + " | "
                              + _ranges_text(checks) + " |")
            groups.append({"vehicle": key[0], "scenario": key[1], "config_hash": key[2],
                           "runs": runs, "figure": figure_name,
                           "verdict": worst_verdict([c.verdict for c in checks]),
                           **{kind: asdict(c) for kind, c in
                              zip(C.ERROR_KINDS, checks, strict=True)}})
        self.lines.append("")
        if len(keys) > MAX_NEES_FIGURES:
            self.lines += [f"Figures for the first {MAX_NEES_FIGURES} groups in ranking "
                           "order only.", ""]
        self.lines += [f"![NEES, {self._group_label(k)}](nees_{i + 1:02d}.png)"
                       for i, k in enumerate(keys[:MAX_NEES_FIGURES])] + [""]
        self.summary["nees"] = groups

    # -- 1b. NIS --------------------------------------------------------------------------

    def _nis(self) -> None:
        self.lines += ["## 1b. NIS per measurement source", "",
                       "Accepted updates only (rejected ones counted apart). Per source, the "
                       "NIS summed over every accepted update of every run and divided by "
                       "its total dof D is 1 for a correct filter, inside "
                       "[χ²(0.025, D)/D, χ²(0.975, D)/D] with 95 % probability; the last "
                       "column is the share of runs whose own time average lies inside its "
                       "own band. The gates clip the largest NIS values, so a value slightly "
                       "under 1 is expected. *Spread seen / predicted* is sqrt(NIS / dof): "
                       "below 1 the filter expects larger innovations than it sees (its noise "
                       "for the source, or its state covariance, is too large by about that "
                       "factor's inverse), above 1 smaller.", ""]
        by_source: dict[str, list[SourceTally]] = defaultdict(list)
        by_group: dict[tuple[GroupKey, str], list[SourceTally]] = defaultdict(list)
        for run in self.ok:
            for source, tally in self.scan.tallies.get(str(run[C.RUN_ID]), {}).items():
                by_source[source].append(tally)
                by_group[(_group_key(run), source)].append(tally)
        if not by_source:
            self.lines += ["No measurement updates recorded: nothing to test.", ""]
            self.summary["nis"] = {}
            return
        self.lines += ["| source | runs | accepted | rejected | NIS / dof | 95 % band | "
                       "verdict | spread seen / predicted | runs inside their band |",
                       "|" + "---|" * 9]
        checks: dict[str, NisCheck] = {}
        for source in sorted(by_source):
            check = check_nis(by_source[source])
            checks[source] = check
            self.lines.append(
                f"| {source} | {check.runs} | {check.accepted} | {check.rejected} | "
                f"{_num(check.nis_per_dof)} | {_num(check.lower)} to {_num(check.upper)} | "
                f"{check.verdict} | {_num(check.spread_ratio, '.2f')} | "
                f"{_percent(check.runs_inside)} |")
        figures.nis_figure(dict(by_source), self.directory / "nis.png")
        sources = sorted(by_source)
        groups = sorted({key for key, _ in by_group})
        self.lines += ["", "![NIS per source](nis.png)", "",
                       "NIS / dof per group (✓ inside the group's band, ↑ optimistic, "
                       "↓ pessimistic):", "",
                       "| group | " + " | ".join(sources) + " |",
                       "|" + "---|" * (1 + len(sources))]
        per_group = []
        for key in groups:
            cells = []
            for source in sources:
                tallies = by_group.get((key, source))
                if not tallies:
                    cells.append("-")
                    continue
                group_check = check_nis(tallies)
                cells.append(_nis_cell(group_check))
                per_group.append({"vehicle": key[0], "scenario": key[1],
                                  "config_hash": key[2], "source": source,
                                  **asdict(group_check),
                                  "spread_ratio": group_check.spread_ratio})
            self.lines.append(f"| {self._group_label(key)} | " + " | ".join(cells) + " |")
        self.lines.append("")
        self.summary["nis"] = {source: {**asdict(check), "spread_ratio": check.spread_ratio}
                               for source, check in checks.items()}
        self.summary["nis_by_group"] = per_group

    # -- 2. error distributions -----------------------------------------------------------

    def _errors(self) -> None:
        self.lines += ["## 2. Error distributions", ""]
        errors, normalised = self.scan.errors, self.scan.normalised
        if not errors.rows:
            self.lines += ["No series of successful runs: no error distributions.", ""]
            return
        shown_rows = len(self.scan.sample.rows)
        drawn = ("all of them" if shown_rows == errors.rows else
                 f"a uniform random sample of {shown_rows} of them")
        self.lines += [f"Every sample of every successful run with an estimate "
                       f"({int(errors.count.max())} samples); the "
                       f"histograms show {drawn}. Truth - estimate, ENU; "
                       "attitude as a rotation vector. A consistent filter's normalised "
                       "errors have a standard deviation of 1.", "",
                       "| error | mean | std | RMS | error / sigma: std | "
                       "beyond 3 sigma |", "|---|---|---|---|---|---|"]
        rows = {}
        sample = self.scan.sample.rows
        width = len(ERROR_COLUMNS)
        for column, name in enumerate(ERROR_COLUMNS):
            kind = C.ERROR_KINDS[column // len(C.AXES)]
            unit, factor = figures.ERROR_DISPLAY[kind]
            values = sample[:, width + column]
            finite = values[np.isfinite(values)]
            beyond = float(np.mean(np.abs(finite) > 3.0)) if len(finite) else math.nan
            figures_of = {"mean": float(errors.mean[column]) * factor,
                          "std": float(errors.std[column]) * factor,
                          "rms": float(errors.rms[column]) * factor,
                          "normalised_std": float(normalised.std[column]),
                          "beyond_three_sigma": beyond}
            rows[name] = {**figures_of, "unit": unit}
            self.lines.append(
                f"| {name} ({unit}) | {_num(figures_of['mean'])} | {_num(figures_of['std'])}"
                f" | {_num(figures_of['rms'])} | {_num(figures_of['normalised_std'], '.2f')} | "
                f"{_num(100 * beyond, '.1f')} % |")
        figures.error_histograms(sample[:, :width], self.directory / "errors.png")
        figures.normalised_histograms(sample[:, width:],
                                      self.directory / "normalised_errors.png")
        self.lines += ["", "(beyond 3 sigma: from the histogram sample; 0.3 % for normal "
                       "errors)", "", "![errors](errors.png)", "",
                       "![normalised errors](normalised_errors.png)", ""]
        self.summary["errors"] = rows

    # -- 3. tracking ----------------------------------------------------------------------

    def _tracking(self) -> None:
        self.lines += ["## 3. Tracking error by scenario", ""]
        values: dict[tuple[str, str], list[float]] = defaultdict(list)
        for run in self.ok:
            value = _finite(run.get(C.METRIC_PREFIX + TRACKING_METRIC))
            if math.isfinite(value):
                values[(str(run[C.SCENARIO]), str(run[C.VEHICLE]))].append(value)
        if not values:
            self.lines += [f"No `{TRACKING_METRIC}` in the results: no tracking figure.", ""]
            return
        figures.tracking_figure(dict(values), TRACKING_METRIC, self.directory / "tracking.png")
        self.lines += [f"`{TRACKING_METRIC}` per run (reference - truth position, m), one box "
                       "per vehicle and scenario (box: quartiles and median; whiskers: the "
                       "farthest runs within 1.5 times the box; points: the runs beyond).",
                       "", "![tracking](tracking.png)", "",
                       "| scenario | vehicle | runs | median, m | max, m |",
                       "|---|---|---|---|---|"]
        self.lines += [f"| {s} | {v} | {len(x)} | {_num(float(np.median(x)))} | "
                       f"{_num(max(x))} |" for (s, v), x in sorted(values.items())] + [""]
        self.summary["tracking"] = [
            {"scenario": s, "vehicle": v, "runs": len(x), "median_m": float(np.median(x)),
             "max_m": max(x)} for (s, v), x in sorted(values.items())]

    # -- 4. ranking -----------------------------------------------------------------------

    def _ranking(self) -> list[RankedSet]:
        """Parameter settings by the mean of the rank metric over their successful runs."""
        settings: dict[Setting, list[dict[str, Any]]] = defaultdict(list)
        for run in self.runs:
            settings[_setting(run)].append(run)
        ranked = []
        for members in settings.values():
            good = [r for r in members if r.get(C.STATUS) == C.STATUS_OK]
            values = np.array([_finite(r.get(C.METRIC_PREFIX + self.metric)) for r in good])
            values = values[np.isfinite(values)]
            keys = sorted({_group_key(r) for r in good} & set(self.scan.nees))
            merged = EnsembleAverage(len(C.ERROR_KINDS), 1.0 / C.SERIES_RATE_HZ)
            for key in keys:
                merged.merge(self.scan.nees[key])
            seen = merged.count.sum(axis=0)
            nees = merged.total.sum(axis=0) / np.maximum(seen, 1) / C.NEES_DOF
            ranked.append(RankedSet(
                {k.removeprefix(C.PARAM_PREFIX): v for k, v in members[0].items()
                 if k.startswith(C.PARAM_PREFIX) and v is not None},
                sorted({str(r[C.CONFIG_HASH]) for r in members}),
                sorted({str(r[C.VEHICLE]) for r in members}),
                sorted({str(r[C.SCENARIO]) for r in members}),
                len(good), len(members) - len(good),
                float(values.mean()) if len(values) else math.nan,
                float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                {kind: float(value) if count else math.nan for kind, value, count in
                 zip(C.ERROR_KINDS, nees, seen, strict=True)},
                worst_verdict([c.verdict for key in keys for c in self.checks[key]])))
        return sorted(ranked, key=lambda r: (not math.isfinite(r.mean), r.mean,
                                             _parameters_text(r.parameters)))

    def _ranking_section(self, ranking: list[RankedSet]) -> None:
        self.lines += [f"## 4. Parameter settings ranked by `{self.metric}`", "",
                       "A setting is the runs with the same parameter values, over vehicles, "
                       "scenarios and seeds. Mean and standard deviation of the metric over "
                       "its successful runs; mean NEES per dof over its runs and time (1 for "
                       "a correct filter); verdict: the worst of its groups' NEES band tests "
                       "(section 1), so *consistent* means consistent with every vehicle and "
                       "scenario.", ""]
        best = next((r for r in ranking if r.verdict == CONSISTENT and math.isfinite(r.mean)),
                    None)
        self.lines.append(
            f"**Best consistent**: setting {ranking.index(best) + 1} "
            f"({_parameters_text(best.parameters)}), `{self.metric}` "
            f"{_num(best.mean)} ± {_num(best.std)}." if best else
            "**Best consistent**: none of the settings passes the NEES band test.")
        self.lines += ["", f"| setting | parameters | vehicles | scenarios | runs | failed "
                       f"| {self.metric} | NEES/dof position, velocity, attitude | verdict |",
                       "|" + "---|" * 9]
        for index, ranked in enumerate(ranking):
            mark = " **(best consistent)**" if ranked is best else ""
            nees = ", ".join(_num(ranked.nees_mean.get(k, math.nan), ".2f")
                             for k in C.ERROR_KINDS)
            self.lines.append(
                f"| {index + 1}{mark} | "
                f"{_cell(_parameters_text(ranked.parameters))} | "
                f"{_cell(', '.join(ranked.vehicles))} | {_cell(', '.join(ranked.scenarios))} "
                f"| {ranked.runs} | {ranked.failed} | {_num(ranked.mean)} ± "
                f"{_num(ranked.std)} | {nees} | {ranked.verdict} |")
        self.lines.append("")
        drawn = [r for r in ranking if math.isfinite(r.mean)
                 and math.isfinite(r.nees_mean.get("position", math.nan))]
        if len(drawn) > 1:
            figures.ranking_figure([r.mean for r in drawn], [r.std for r in drawn],
                                   [r.nees_mean["position"] for r in drawn],
                                   [r.verdict == CONSISTENT for r in drawn], self.metric,
                                   self.directory / "ranking.png")
            self.lines += ["![ranking](ranking.png)", ""]
        self.summary["ranking"] = [asdict(r) for r in ranking]
        self.summary["best_consistent"] = asdict(best) if best else None

    # -- 5. outliers ----------------------------------------------------------------------

    def _outliers(self) -> None:
        self.lines += ["## 5. Outliers and failed runs", "",
                       f"Successful runs whose `{self.metric}` exceeds the median of their "
                       f"group (runs differing by seed only) by more than {OUTLIER_MADS:g} "
                       "MAD, the median absolute relative deviation from the group medians "
                       f"pooled over the campaign (scaled by {MAD_TO_SIGMA} to a standard "
                       "deviation of normal data), and every failed run. Each links to the "
                       "commands that reproduce it.", ""]
        listed = _outlier_runs(self.ok, self.metric) + [
            (run, math.nan) for run in self.runs if run.get(C.STATUS) != C.STATUS_OK]
        if not listed:
            self.lines += ["None.", ""]
            self.summary["outliers"] = []
            return
        overrides = self.campaign.get("overrides") or {}
        campaign_file = self.output_dir / C.CAMPAIGN_FILE
        self.lines += [f"| run | vehicle | scenario | seed | {self.metric} | why |",
                       "|---|---|---|---|---|---|"]
        entries: list[dict[str, Any]] = []
        for run, threshold in listed:
            run_id = str(run[C.RUN_ID])
            failed = run.get(C.STATUS) != C.STATUS_OK
            why = (f"failed: {run.get(C.ERROR) or 'no error recorded'}" if failed else
                   f"above {_num(threshold)}")
            self.lines.append(
                f"| [{_cell(run_id)}](#reproduce-{_anchor(run_id)}) | {run[C.VEHICLE]} | "
                f"{run[C.SCENARIO]} | {run[C.SEED]} | "
                f"{_num(_finite(run.get(C.METRIC_PREFIX + self.metric)))} | {_cell(why)} |")
            entries.append({"run_id": run_id, "failed": failed,
                            "error": run.get(C.ERROR) if failed else None,
                            "value": _finite(run.get(C.METRIC_PREFIX + self.metric)),
                            "threshold": threshold,
                            "campaign_command": campaign_command(campaign_file,
                                                                 self.output_dir, run_id),
                            "mav_sim_command": mav_sim_command(run, overrides,
                                                               self.output_dir)})
        self.lines += ["", "### Reproducing them", ""]
        for entry in entries:
            self.lines += [f'<a id="reproduce-{_anchor(entry["run_id"])}"></a>',
                           f"**{entry['run_id']}**", "", "```bash",
                           entry["campaign_command"], entry["mav_sim_command"], "```", ""]
        self.summary["outliers"] = entries


def _outlier_runs(runs: list[dict[str, Any]], metric: str) -> list[tuple[dict[str, Any],
                                                                         float]]:
    """(run, threshold) of the runs whose ``metric`` exceeds their group's median m by more
    than OUTLIER_MADS scaled MADs: ``value > m (1 + OUTLIER_MADS s)``, s the scaled median
    absolute relative deviation ``|value / m - 1|`` pooled over every group of two runs or
    more. Pooled because a group's few seeds (10 in consistency.yaml) estimate a MAD too
    poorly (a few percent of correct runs would be listed); relative because the spread of
    an error figure grows with its size. Groups whose median is not positive (the metrics
    are errors and NEES, positive) and single runs are not screened."""
    groups: dict[GroupKey, list[tuple[dict[str, Any], float]]] = defaultdict(list)
    for run in runs:
        value = _finite(run.get(C.METRIC_PREFIX + metric))
        if math.isfinite(value):
            groups[_group_key(run)].append((run, value))
    screened = []
    for members in groups.values():
        median = float(np.median([value for _, value in members]))
        if len(members) > 1 and median > 0:
            screened.append((median, members))
    deviations = [abs(value / median - 1.0) for median, members in screened
                  for _, value in members]
    if not deviations:
        return []
    spread = MAD_TO_SIGMA * float(np.median(deviations))
    found = []
    for median, members in screened:
        threshold = median * (1.0 + OUTLIER_MADS * spread)
        found += [(run, threshold) for run, value in members if value > threshold]
    return found


def _anchor(run_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in run_id.lower())


def _parameters_text(parameters: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(parameters.items())) or "defaults"


def _ranges_text(checks: list[BandCheck]) -> str:
    parts = [f"{kind} {r.side} {r.start_s:.1f} to {r.end_s:.1f} s"
             for kind, check in zip(C.ERROR_KINDS, checks, strict=True) for r in check.ranges]
    return "; ".join(parts) or "-"


def _nis_cell(check: NisCheck) -> str:
    if not math.isfinite(check.nis_per_dof):
        return "-"
    mark = {CONSISTENT: "✓", "optimistic": "↑", "pessimistic": "↓"}[check.verdict]
    return f"{check.nis_per_dof:.2f} {mark}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mav_bringup.campaign.report",
        description="Write (again) the report of a campaign output directory: "
                    "OUT/report/report.md, its PNG figures and summary.json.")
    parser.add_argument("output_dir", type=Path, metavar="OUT",
                        help="campaign output directory (holding results.parquet)")
    parser.add_argument("--rank-by", metavar="METRIC",
                        help="metric ranking the parameter settings, lower is better (default: "
                             f"the campaign file's rank_by, else {DEFAULT_RANK_BY})")
    args = parser.parse_args(argv)

    def body() -> int:
        print(write_campaign_report(args.output_dir, rank_by=args.rank_by))
        return EXIT_OK

    return run_command(parser.prog, body)


if __name__ == "__main__":
    raise SystemExit(main())
