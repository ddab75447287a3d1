"""The campaign report (``mav_bringup.campaign.report``) on synthetic campaign directories whose
errors are drawn from known distributions: exact covariances come out consistent, 4x and
0.25x optimistic and pessimistic; bands equal scipy's chi-square quantiles; the ranking
picks the known best consistent set; outliers and failed runs come with their reproduce
commands; runs of different lengths; a campaign without a successful run. No Ray, no ROS."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from scipy.stats import chi2

from mav_bringup.campaign import columns as C
from mav_bringup.campaign import report as report_module
from mav_bringup.campaign.consistency import EnsembleAverage, band, check_column
from mav_bringup.campaign.report import main, write_campaign_report
from mav_bringup.campaign.reproduce import mav_sim_command
from mav_bringup.campaign.sample import UniformSample

SIGMA = {"position": 0.5, "velocity": 0.1, "attitude": 0.02}  # true error std, SI
STEP_S = 1.0 / C.SERIES_RATE_HZ
SEEDS = 20
DURATION_S = 60.0
PARAMETER = "trident_ekf.gnss_position_sigma_m"
NIS_DOF = {"gnss_position": 3, "barometer": 1}
REJECTED_PER_RUN = 2  # gnss_position updates each run rejects
NEES_FIGURES = 3  # drawn at most (5 groups)


@dataclass
class RunSet:
    """Runs differing by seed only: errors of std ``accuracy`` * SIGMA, the filter's sigma
    smaller by sqrt(``scale``) (errors drawn from ``scale`` times its covariance)."""

    config_hash: str
    accuracy: float
    scale: float
    parameter: float
    outage_s: tuple[float, float] | None = None  # errors of 3x std (9x covariance) then
    lengths: dict[int, tuple[float, float]] = field(default_factory=dict)  # seed: start, end
    scenario: str = "calm"


def _write_run(directory: Path, run_id: str, runs: RunSet, seed: int) -> dict[str, Any]:
    """series/ and updates/ files of one run; its metrics."""
    rng = np.random.default_rng(seed + 1000 * int(runs.config_hash, 16) % 100_000)
    start, end = runs.lengths.get(seed, (0.0, DURATION_S))
    time = np.round(np.arange(round(start / STEP_S), round(end / STEP_S)) * STEP_S, 6)
    inflate = np.ones(len(time))
    if runs.outage_s:
        inflate[(time >= runs.outage_s[0]) & (time < runs.outage_s[1])] = 3.0
    series: dict[str, Any] = {C.TIME: time}
    position_squares = np.zeros(len(time))
    for kind in C.ERROR_KINDS:
        true_std = runs.accuracy * SIGMA[kind]
        error = rng.normal(0.0, true_std, (len(time), 3)) * inflate[:, None]
        sigma = true_std / np.sqrt(runs.scale)
        for index, axis in enumerate(C.AXES):
            series[C.error_column(kind, axis)] = error[:, index]
            series[C.sigma_column(kind, axis)] = np.full(len(time), sigma)
        series[C.nees_column(kind)] = np.sum((error / sigma) ** 2, axis=1)
        if kind == "position":
            position_squares = np.sum(error**2, axis=1)
    for axis in C.AXES:
        series[f"tracking_error_{axis}"] = rng.normal(0.0, 0.1, len(time))
    pq.write_table(pa.table(series), directory / C.SERIES_DIR / f"{run_id}.parquet")
    updates: dict[str, list[Any]] = {name: [] for name in C.UPDATE_COLUMNS}
    for source, dof in NIS_DOF.items():
        nis = runs.scale * rng.chisquare(dof, len(time))
        updates[C.UPDATE_TIME] += list(time)
        updates[C.SOURCE] += [source] * len(time)
        updates[C.NIS] += list(nis)
        updates[C.DOF] += [dof] * len(time)
        updates[C.ACCEPTED] += [True] * len(time)
    for _ in range(REJECTED_PER_RUN):
        updates[C.UPDATE_TIME].append(float(time[-1]))
        updates[C.SOURCE].append("gnss_position")
        updates[C.NIS].append(500.0)
        updates[C.DOF].append(3)
        updates[C.ACCEPTED].append(False)
    pq.write_table(pa.table(updates), directory / C.UPDATES_DIR / f"{run_id}.parquet")
    # the ranked metric: the run's position RMS, spread 10 % over seeds as real runs are (the
    # GNSS error each seed draws), more than the 2 % of these white errors
    spread = 1.0 + 0.1 * rng.standard_normal()
    return {"metric.position_rms_m": float(np.sqrt(position_squares.mean())) * spread,
            "metric.tracking_rms_m": float(0.1 * runs.accuracy + 0.01 * rng.random()),
            "metric.nees_position_mean": float(series[C.nees_column("position")].mean())}


def write_campaign(directory: Path, sets: list[RunSet], *, failed: int = 0,
                   outlier: tuple[str, int] | None = None) -> list[dict[str, Any]]:
    """A campaign output directory: SEEDS runs of each set, ``failed`` failed runs of the
    first set (no files), the metric of ``outlier`` (config hash, seed) made 5x larger."""
    for sub in (C.SERIES_DIR, C.UPDATES_DIR):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    (directory / C.CAMPAIGN_FILE).write_text(yaml.safe_dump({
        "name": "synthetic", "description": "errors drawn from known covariances",
        "duration_s": DURATION_S, "rank_by": "position_rms_m",
        "overrides": {"simulator": {"gnss_rate_hz": 5.0}}}))
    rows = []
    for runs in sets:
        for seed in range(SEEDS):
            run_id = f"{runs.config_hash}-s{seed}"
            metrics = _write_run(directory, run_id, runs, seed)
            if outlier == (runs.config_hash, seed):
                metrics["metric.position_rms_m"] *= 5.0
            rows.append(_row(run_id, runs, seed, "ok", None, metrics))
    for index in range(failed):
        rows.append(_row(f"{sets[0].config_hash}-failed{index}", sets[0], 100 + index,
                         "failed", "RuntimeError: diverged | at t=3.2 s\nsecond line", {}))
    columns = sorted({key for row in rows for key in row})
    table = {name: [row.get(name) for row in rows] for name in columns}
    pq.write_table(pa.table(table), directory / C.RESULTS_FILE)
    return rows


def _row(run_id: str, runs: RunSet, seed: int, status: str, error: str | None,
         metrics: dict[str, float]) -> dict[str, Any]:
    return {C.RUN_ID: run_id, C.CONFIG_HASH: runs.config_hash, C.STATUS: status,
            C.ERROR: error, C.SEED: seed, C.VEHICLE: "quadrotor", C.SCENARIO: runs.scenario,
            C.TRAJECTORY: "figure_eight", C.DURATION: DURATION_S,
            C.PARAM_PREFIX + PARAMETER: runs.parameter, **metrics}


EXACT = RunSet("aaaa01", 1.0, 1.0, 1.0, lengths={0: (5.0, 60.0), 1: (5.0, 60.0),
                                                   2: (0.0, 40.0), 3: (10.0, 30.0)})
OPTIMISTIC = RunSet("bbbb02", 0.5, 4.0, 0.25)  # the most accurate, but not consistent
PESSIMISTIC = RunSet("cccc03", 0.8, 0.25, 2.0)
LOOSE = RunSet("dddd04", 2.0, 1.0, 4.0, outage_s=(12.0, 14.0))
OPTIMISTIC_GUSTY = RunSet("eeee05", 0.5, 1.0, 0.25, scenario="gusty")  # OPTIMISTIC's setting


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    directory = tmp_path_factory.mktemp("campaign")
    write_campaign(directory, [EXACT, OPTIMISTIC, PESSIMISTIC, LOOSE, OPTIMISTIC_GUSTY],
                   failed=1, outlier=(EXACT.config_hash, 7))
    with pytest.MonkeyPatch.context() as patch:  # the cap on NEES figures, and a faster test
        patch.setattr(report_module, "MAX_NEES_FIGURES", NEES_FIGURES)
        report = write_campaign_report(directory)
    summary = json.loads((report.parent / "summary.json").read_text())
    return directory, summary, report.read_text()


def _group(summary: dict[str, Any], runs: RunSet) -> dict[str, Any]:
    (group,) = [g for g in summary["nees"] if g["config_hash"] == runs.config_hash]
    return group


def test_band_limits_are_the_chi_square_quantiles() -> None:
    counts = np.array([0, 1, 7, 200])
    lower, upper = band(counts, 3)
    assert np.isnan(lower[0])
    assert np.isnan(upper[0])
    np.testing.assert_allclose(lower[1:], chi2.ppf(0.025, 3 * counts[1:]) / counts[1:],
                               rtol=1e-12)
    np.testing.assert_allclose(upper[1:], chi2.ppf(0.975, 3 * counts[1:]) / counts[1:],
                               rtol=1e-12)


def test_exact_covariance_is_consistent_and_wrong_ones_are_not(
        campaign: tuple[Path, dict[str, Any], str]) -> None:
    _, summary, _ = campaign
    exact = _group(summary, EXACT)
    for kind in C.ERROR_KINDS:
        assert 0.92 <= exact[kind]["inside"] <= 0.98, (kind, exact[kind])
        assert exact[kind]["verdict"] == "consistent"
        assert exact[kind]["mean"] == pytest.approx(3.0, rel=0.03)
        assert exact[kind]["ranges"] == []
    assert exact["verdict"] == "consistent"
    for runs, verdict in ((OPTIMISTIC, "optimistic"), (PESSIMISTIC, "pessimistic")):
        group = _group(summary, runs)
        for kind in C.ERROR_KINDS:
            assert group[kind]["verdict"] == verdict
            assert group[kind]["mean"] == pytest.approx(3.0 * runs.scale, rel=0.03)
            assert group[kind]["inside"] < 0.01
    # an outage of 2 s in 60: still consistent, and the report names when it was not
    loose = _group(summary, LOOSE)
    assert loose["verdict"] == "consistent"
    assert loose["position"]["ranges"] == [{"start_s": 12.0, "end_s": 13.9, "side": "above"}]


def test_runs_of_different_lengths_use_the_count_at_each_time(
        campaign: tuple[Path, dict[str, Any], str]) -> None:
    average = EnsembleAverage(1, STEP_S)
    average.add([0.0, 0.1, 0.2], [1.0, 2.0, 3.0])
    average.add([0.2, 0.3], [5.0, np.nan])
    np.testing.assert_array_equal(average.count[:, 0], [1, 1, 2, 0])
    np.testing.assert_allclose(average.mean[:3, 0], [1.0, 2.0, 4.0])
    assert np.isnan(average.mean[3, 0])
    check = check_column(average, 0, 1)
    assert check.bins == 3
    # the campaign's exact set: 20 runs where all fly, 16 before 5 s, 18 after 40 s
    _, summary, _ = campaign
    assert _group(summary, EXACT)["runs"] == SEEDS
    assert _group(summary, EXACT)["position"]["bins"] == round(DURATION_S / STEP_S)


def test_nis_per_source_and_rejected_updates(campaign: tuple[Path, dict[str, Any], str]) -> None:
    _, summary, report = campaign
    runs = 5 * SEEDS
    assert summary["nis"]["gnss_position"]["rejected"] == REJECTED_PER_RUN * runs
    assert summary["nis"]["barometer"]["rejected"] == 0
    samples = sum(round((end - start) / STEP_S) for start, end in
                  [EXACT.lengths.get(s, (0.0, DURATION_S)) for s in range(SEEDS)])
    samples += 4 * SEEDS * round(DURATION_S / STEP_S)
    assert summary["nis"]["barometer"]["accepted"] == samples
    verdicts = {(g["config_hash"], g["source"]): g["verdict"] for g in summary["nis_by_group"]}
    for source in NIS_DOF:
        assert verdicts[(EXACT.config_hash, source)] == "consistent"
        assert verdicts[(OPTIMISTIC.config_hash, source)] == "optimistic"
        assert verdicts[(PESSIMISTIC.config_hash, source)] == "pessimistic"
    # NIS drawn from `scale` times chi-square: innovations sqrt(scale) times the predicted
    spreads = {(g["config_hash"], g["source"]): g["spread_ratio"]
               for g in summary["nis_by_group"]}
    for runs_set in (EXACT, OPTIMISTIC, PESSIMISTIC):
        for source in NIS_DOF:
            assert spreads[(runs_set.config_hash, source)] == pytest.approx(
                np.sqrt(runs_set.scale), rel=0.05)
    assert "| gnss_position | 100 |" in report


def test_ranking_picks_the_most_accurate_consistent_set(
        campaign: tuple[Path, dict[str, Any], str]) -> None:
    _, summary, report = campaign
    order = [r["config_hashes"] for r in summary["ranking"]]
    assert order == [[OPTIMISTIC.config_hash, OPTIMISTIC_GUSTY.config_hash],
                     [PESSIMISTIC.config_hash], [EXACT.config_hash], [LOOSE.config_hash]]
    # a setting spans its vehicles and scenarios and is consistent only if it is in each
    both = summary["ranking"][0]
    assert (both["scenarios"], both["runs"]) == (["calm", "gusty"], 2 * SEEDS)
    assert _group(summary, OPTIMISTIC_GUSTY)["verdict"] == "consistent"
    assert "| [quadrotor · calm · setting 1](nees_01.png) |" in report
    assert "| [quadrotor · gusty](nees_02.png) |" in report
    exact = summary["ranking"][2]
    assert summary["best_consistent"] == exact
    assert exact["parameters"] == {PARAMETER: 1.0}
    assert (exact["runs"], exact["failed"]) == (SEEDS, 1)
    assert exact["verdict"] == "consistent"
    assert [r["verdict"] for r in summary["ranking"]] == [
        "optimistic", "pessimistic", "consistent", "consistent"]
    assert f"| 3 **(best consistent)** | {PARAMETER}=1.0 |" in report


def test_outlier_and_failed_run_with_their_commands(
        campaign: tuple[Path, dict[str, Any], str]) -> None:
    directory, summary, report = campaign
    by_id = {entry["run_id"]: entry for entry in summary["outliers"]}
    assert set(by_id) == {"aaaa01-s7", "aaaa01-failed0"}
    outlier = by_id["aaaa01-s7"]
    assert not outlier["failed"]
    assert outlier["value"] > outlier["threshold"]
    assert shlex.split(outlier["campaign_command"]) == [
        "mav-campaign", str(directory / "campaign.yaml"), "--output-dir", str(directory),
        "--only", "aaaa01-s7"]
    assert shlex.split(outlier["mav_sim_command"]) == [
        "mav-sim", "--vehicle", "quadrotor", "--scenario", "calm", "--trajectory",
        "figure_eight", "--seed", "7", "--duration", "60.0",
        "--set", "simulator.gnss_rate_hz=5.0", "--set", f"{PARAMETER}=1.0",
        "--output-dir", str(directory / "reproduce" / "aaaa01-s7")]
    failed = by_id["aaaa01-failed0"]
    assert failed["failed"]
    assert failed["error"].startswith("RuntimeError: diverged")
    assert "--seed 100" in failed["mav_sim_command"]
    # the table cell stays one line with its pipe escaped, and links to the commands
    assert "failed: RuntimeError: diverged \\| at t=3.2 s second line |" in report
    assert "[aaaa01-failed0](#reproduce-aaaa01-failed0)" in report
    assert '<a id="reproduce-aaaa01-failed0"></a>' in report
    assert failed["campaign_command"] in report


def test_figures_and_files_written(campaign: tuple[Path, dict[str, Any], str]) -> None:
    directory, _, report = campaign
    written = sorted(p.name for p in (directory / "report").iterdir())
    assert written == ["errors.png", "nees_01.png", "nees_02.png", "nees_03.png", "nis.png",
                       "normalised_errors.png", "ranking.png", "report.md", "summary.json",
                       "tracking.png"]
    for name in written:
        if name.endswith(".png"):
            assert f"]({name})" in report
    # groups past the cap keep their table row, without a figure
    assert f"Figures for the first {NEES_FIGURES} groups in ranking order only." in report
    assert "\n| quadrotor · calm · setting 4 | 20 |" in report


def test_error_tables_match_the_drawn_errors(
        campaign: tuple[Path, dict[str, Any], str]) -> None:
    _, summary, _ = campaign
    errors = summary["errors"]
    # pooled over sets of std 1.0, 0.5, 0.8, 2.0 (3x during the outage) and 0.5 SIGMA
    assert errors["error_velocity_x"]["unit"] == "m/s"
    assert errors["error_attitude_z"]["unit"] == "deg"
    assert abs(errors["error_position_x"]["mean"]) < 0.02
    # error / sigma: the root of the sample-weighted mean of the covariance scales (exact
    # 113 s of runs in 120 at 1, then 4, 0.25, 1 + 8/30 (the outage) and 1)
    weights = np.array([1130.0, 1200.0, 1200.0, 1200.0, 1200.0])
    scales = np.array([1.0, 4.0, 0.25, 1.0 + 8.0 / 30.0, 1.0])
    expected = float(np.sqrt(weights @ scales / weights.sum()))
    assert errors["error_position_y"]["normalised_std"] == pytest.approx(expected, abs=0.02)


def test_report_without_successful_runs(tmp_path: Path) -> None:
    write_campaign(tmp_path, [], failed=0)
    rows = [_row(f"x-failed{i}", EXACT, i, "failed", "ValueError: bad vehicle", {})
            for i in range(2)]
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}),
                   tmp_path / C.RESULTS_FILE)
    report = write_campaign_report(tmp_path).read_text()
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert "**No successful runs**" in report
    assert (summary["successful"], summary["failed"]) == (0, 2)
    assert [e["run_id"] for e in summary["outliers"]] == ["x-failed0", "x-failed1"]
    assert summary["best_consistent"] is None
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["report.md",
                                                                       "summary.json"]


def test_command_line_errors(campaign: tuple[Path, dict[str, Any], str], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    directory, _, _ = campaign
    assert main([str(directory), "--rank-by", "no_such_metric"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("python -m mav_bringup.campaign.report: error: rank_by "
                            "'no_such_metric' is not a metric")
    assert main([str(tmp_path / "missing")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_mav_sim_command_formats() -> None:
    run = {C.RUN_ID: "r 1", C.VEHICLE: "config/vehicles/my quad.yaml", C.SCENARIO: "gusty",
           C.TRAJECTORY: None, C.SEED: 3, C.DURATION: 30.0,
           "param.trident_ekf.gyro_noise_density": 2e-4, "param.controller.gains": [1.0, 2],
           "param.trident_ekf.unused": None, "param.trident_ekf.use_magnetometer": False}
    words = shlex.split(mav_sim_command(run, {"simulator.wind_mps": 3}, Path("/o")))
    assert words == ["mav-sim", "--vehicle", "config/vehicles/my quad.yaml", "--scenario",
                     "gusty", "--seed", "3", "--duration", "30.0",
                     "--set", "simulator.wind_mps=3",
                     "--set", "trident_ekf.gyro_noise_density=0.0002",
                     "--set", "controller.gains=[1.0, 2]",
                     "--set", "trident_ekf.use_magnetometer=false",
                     "--output-dir", "/o/reproduce/r 1"]


def test_uniform_sample_is_bounded_and_uniform() -> None:
    sample = UniformSample(2, 1000, seed=1)
    for start in range(0, 100_000, 600):  # runs of 600 samples
        stop = min(start + 600, 100_000)
        values = np.arange(start, stop, dtype=float)
        sample.add(np.column_stack([values, -values]))
    rows = sample.rows
    assert sample.seen == 100_000
    assert rows.shape == (1000, 2)
    np.testing.assert_array_equal(rows[:, 1], -rows[:, 0])  # rows kept whole
    assert len(np.unique(rows[:, 0])) == 1000  # without replacement
    # uniform over the stream: the mean within 4 standard errors of 49 999.5
    assert abs(rows[:, 0].mean() - 49_999.5) < 4 * 28_867.5 / np.sqrt(1000)
