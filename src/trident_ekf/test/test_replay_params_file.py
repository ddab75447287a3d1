"""``trident-replay --params-file``: the estimator node's parameter file drives a replay as
it drives the live node (filter, noise, initialization, GNSS, aiding sources and whether
each is enabled), flags override it, and a bad file is a usage error before any replay."""

from __future__ import annotations

import math
import re
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from trident_ekf.tools import replay
from trident_ekf.tools.replay import Aiding, Topics

ROOT = Path(__file__).resolve().parents[3]
LOG171_TUNING = ROOT / "config" / "replay" / "log171.yaml"
WINDOW = ("--stop", "110", "--evaluate-from", "70")  # s: aided flight, fast to replay
Log171 = Any  # conftest.Log171 (conftest modules are not importable under importlib mode)


def _cli(pool: ProcessPoolExecutor, bag: Path, *arguments: str) -> Future[dict[str, Any]]:
    """The command's replay, submitted to the pool (the arguments are parsed here), so that
    the replays of a test run side by side."""
    return pool.submit(replay.run, replay.parse_args([str(bag), *arguments]))


def _tuning_file(tmp_path: Path, **changes: Any) -> Path:
    """log171's tuning with ``changes`` (parameter name -> value, dots for groups)."""
    document = yaml.safe_load(LOG171_TUNING.read_text())
    parameters = document["trident_ekf"]["ros__parameters"]
    for name, value in changes.items():
        *groups, key = name.split(".")
        target = parameters
        for group in groups:
            target = target.setdefault(group, {})
        target[key] = value
    path = tmp_path / "tuning.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_the_file_gives_the_replay_of_the_tested_tuning(
        log171: Log171, replay_pool: ProcessPoolExecutor) -> None:
    """The command with the file replays exactly as the API with the same tuning."""
    from_file_run = _cli(replay_pool, log171.bag, "--params-file", str(LOG171_TUNING), *WINDOW)
    direct_run = replay_pool.submit(
        replay.replay, log171.bag, None, Topics(), "trident", log171.config,
        log171.initializer(), 50.0, None,
        aiding=Aiding(settings=log171.settings, stop=110.0, evaluate_from=70.0))
    from_file, direct = from_file_run.result(), direct_run.result()
    assert from_file["aiding"] == ["barometer", "gnss_position", "gnss_velocity",
                                   "magnetometer"]
    for key in ("rmse_horizontal_m", "rmse_vertical_m", "rmse_yaw_deg"):
        assert from_file[key] == direct[key], key
    for name, source in direct["sources"].items():
        assert from_file["sources"][name]["nis_mean"] == source["nis_mean"], name


def test_flags_override_the_file_and_disabled_sources_are_not_fused(
        log171: Log171, tmp_path: Path, replay_pool: ProcessPoolExecutor) -> None:
    path = _tuning_file(tmp_path, **{"magnetometer.enabled": False})
    args = replay.parse_args([str(log171.bag), "--params-file", str(path), "--gyro-noise",
                              "0.004", "--set", "barometer.noise_sigma_m=0.5", "--yaw", "90"])
    assert args.parameters["gyro_noise"] == 0.004
    assert args.parameters["accel_noise"] == 0.22  # from the file
    assert args.parameters["barometer.noise_sigma_m"] == 0.5
    assert args.parameters["initial_yaw_deg"] == 90.0
    assert args.parameters["filter"] == "trident"  # the node's default
    args.stop, args.evaluate_from = 110.0, 70.0
    summary_run = replay_pool.submit(replay.run, args)
    again_run = _cli(replay_pool, log171.bag, "--params-file", str(path), "--aid",
                     "magnetometer", *WINDOW)
    summary = summary_run.result()
    assert summary["aiding"] == ["barometer", "gnss_position", "gnss_velocity"]
    assert summary["yaw_source"] == "parameter"
    assert math.isfinite(summary["rmse_horizontal_m"])
    assert "magnetometer" in again_run.result()["aiding"]


@pytest.mark.parametrize(("text", "message"), [
    ("trident_ekf:\n  ros__parameters:\n    gyro_nosie: 0.01\n",
     r"unknown parameter\(s\) 'gyro_nosie' \(did you mean \['gyro_noise'"),
    ("trident_ekf:\n  ros__parameters:\n    gyro_noise: -1.0\n", "gyro_noise"),
    ("trident_ekf:\n  ros__parameters:\n    magnetometer:\n      mode: compass\n",
     "magnetometer.mode"),
    ("controller:\n  ros__parameters: {}\n", "no 'trident_ekf: ros__parameters:' block"),
    ("trident_ekf: [unclosed\n", "cannot read the parameter file"),
])
def test_a_bad_file_is_a_usage_error_before_the_replay(log171: Log171, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exit_:
        replay.parse_args([str(log171.bag), "--params-file", str(path)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert str(path) in error
    assert re.search(message, error), error


def test_a_missing_file_is_a_usage_error(log171: Log171, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.parse_args([str(log171.bag), "--params-file", str(tmp_path / "none.yaml")])
    assert exit_.value.code == 2
    assert "cannot read the parameter file" in capsys.readouterr().err


def test_evaluate_from_and_start_do_what_they_say(log171: Log171,
                                                   replay_pool: ProcessPoolExecutor) -> None:
    """``--evaluate-from`` moves only the comparison, ``--start`` only the estimator's start
    (the command passed each as the other before)."""
    runs = [_cli(replay_pool, log171.bag, "--stop", "110", *extra)
            for extra in ((), ("--evaluate-from", "70"), ("--start", "70"))]
    whole, evaluated, started = (run.result() for run in runs)
    assert evaluated["first_estimate_time_s"] == whole["first_estimate_time_s"]
    assert evaluated["reference_samples"] < 0.6 * whole["reference_samples"]
    assert started["first_estimate_time_s"] > whole["first_estimate_time_s"] + 20.0
