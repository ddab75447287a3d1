"""``mav-campaign`` on a real Ray cluster: one ``ray start --head`` for the module (token
authentication on, as Ray sets it up when ``~/.ray/auth_token`` exists), joined by this
process and by the command run as a child process with ``--address``. Runs are made by a
picklable fake closed loop that records every call, except one test that flies the real
closed loop for 3 s.

Checked: each run's row, series and updates on disk and ``results.parquet`` with the
documented columns; a run that raises and a worker that dies are failed rows with their
error and the command that reproduces them, and the campaign completes; a second
invocation runs only what has no row (``--retry-failed``: the failed ones too); SIGTERM
half-way stops the command (exit 143) with the finished runs kept, and the rerun makes only
the rest; ``--only`` runs one run in-process; a different campaign file is refused for an
existing output directory.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import ray
import yaml
from ray import cloudpickle

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.campaign_file import RunSpec
from mav_bringup.campaign.command import main
from mav_bringup.campaign.engine import _check_reachable, ray_session
from mav_bringup.campaign.progress import Progress
from mav_bringup.campaign.records import ROW_COLUMNS
from mav_ros_common.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE

# Ray's workers cannot import this test module: its fakes travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

CAMPAIGN: dict[str, Any] = {
    "name": "engine", "duration_s": 5.0, "vehicles": ["quadrotor_x"], "scenarios": ["calm"],
    "seeds": {"start": 0, "count": 4}, "grid": {"trident_ekf.gyro_noise": [1e-3, 2e-3]}}
"""8 runs: two parameter sets x four seeds."""
RAY = Path(sys.executable).parent / "ray"


class FakeLoop:
    """A closed loop that notes each call (run id, pid, the cluster it ran on) in ``calls``,
    raises for ``fail_seed`` and kills its worker process for ``crash_seed``."""

    def __init__(self, calls: Path, fail_seed: int | None = None,
                 crash_seed: int | None = None) -> None:
        self.calls = calls
        self.fail_seed = fail_seed
        self.crash_seed = crash_seed

    def __call__(self, spec: RunSpec) -> SimpleNamespace:
        cluster = ray.get_runtime_context().gcs_address if ray.is_initialized() else ""
        (self.calls / f"{spec.run_id}.{time.monotonic_ns()}").write_text(cluster)
        if spec.seed == self.fail_seed:
            raise ValueError(f"seed {spec.seed} refused")
        if spec.seed == self.crash_seed:
            os._exit(3)
        gyro_noise = dict(spec.parameters)["trident_ekf.gyro_noise"]
        t = np.arange(0.0, spec.duration_s, 0.1)
        n = 3
        return SimpleNamespace(
            metrics={"position_rms_m": spec.seed + gyro_noise, "consistent": spec.seed != 2,
                     "worst_axis": "z", "update_count": n},
            series={"t_s": t, "error_position_x": spec.seed * np.sin(t)},
            updates={"t_s": np.arange(n) * 0.1, "source": np.array(["gnss_position"] * n),
                     "nis": np.full(n, 2.5), "dof": np.full(n, 3),
                     "accepted": np.array([True, False, True])})


def called(calls: Path) -> list[str]:
    """Run ids of the calls noted, oldest first."""
    entries = sorted(calls.iterdir(), key=lambda p: int(p.name.split(".")[1]))
    return [p.name.split(".")[0] for p in entries]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-CPU Ray cluster from ``ray start --head`` (its address), joined by this process.
    ``--block`` keeps ``ray start`` in the foreground: ending it by its pid stops exactly this
    cluster (``ray stop`` would stop every Ray cluster of the user on the machine)."""
    port = free_port()
    log = tmp_path_factory.mktemp("ray") / "head.log"
    with log.open("w") as output:
        head = subprocess.Popen([str(RAY), "start", "--head", f"--port={port}", "--num-cpus=1",
                                 "--include-dashboard=false", "--node-ip-address=127.0.0.1",
                                 "--block"], stdout=output, stderr=subprocess.STDOUT)
    auth_mode = os.environ.pop("RAY_AUTH_MODE", None)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 120.0
        while not listening(port):
            assert head.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "ray start --head did not come up"
            time.sleep(0.2)
        with ray_session(None, address):
            yield address
    finally:
        head.send_signal(signal.SIGTERM)
        head.wait(timeout=60)
        # `ray start` notes its cluster for `ray.init()` to find; this one is gone.
        current = Path("/tmp/ray/ray_current_cluster")
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()
        os.environ.pop("RAY_AUTH_MODE", None)
        if auth_mode is not None:
            os.environ["RAY_AUTH_MODE"] = auth_mode


def campaign_file(folder: Path, **changes: Any) -> Path:
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(CAMPAIGN | changes))
    return path


def rows(output: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (output / "runs").glob("*.json")}


def run_main(arguments: list[str], run_function: Any) -> int:
    code: int = main([*arguments, "--no-report", "--quiet"], run_function=run_function)
    return code


def test_rows_tables_and_a_failing_run(cluster: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    path, output = campaign_file(tmp_path), tmp_path / "out"
    code = run_main([str(path), "--output-dir", str(output)], FakeLoop(calls, fail_seed=1))
    assert code == EXIT_OK
    err = capsys.readouterr().err
    table = pq.read_table(output / C.RESULTS_FILE).to_pylist()
    assert len(table) == 8
    assert len(called(calls)) == 8
    assert list(table[0]) == [*ROW_COLUMNS, "param.trident_ekf.gyro_noise",
                              "metric.consistent", "metric.position_rms_m",
                              "metric.update_count", "metric.worst_axis"]
    assert [(r["seed"], r["param.trident_ekf.gyro_noise"]) for r in table] == [
        (seed, noise) for noise in (1e-3, 2e-3) for seed in range(4)]
    assert len({r["config_hash"] for r in table}) == 2
    failed = [r for r in table if r["status"] == C.STATUS_FAILED]
    assert [r["seed"] for r in failed] == [1, 1]
    for row in failed:
        assert row["error"].startswith("ValueError: seed 1 refused [at __call__")
        assert row["reproduce"] == (f"mav-campaign {path} --output-dir {output} --only "
                                    f"{row['run_id']}")
        assert row["metric.position_rms_m"] is None
        assert not (output / C.SERIES_DIR / f"{row['run_id']}.parquet").exists()
        assert f"reproduce: {row['reproduce']}" in err
    for row in table:
        if row["status"] == C.STATUS_OK:
            assert row["error"] == ""
            assert row["metric.position_rms_m"] == row["seed"] + row[
                "param.trident_ekf.gyro_noise"]
            assert row["metric.consistent"] == (row["seed"] != 2)
            series = pq.read_table(output / C.SERIES_DIR / f"{row['run_id']}.parquet")
            assert series.column_names == ["t_s", "error_position_x"]
            assert series.num_rows == 50
            updates = pq.read_table(output / C.UPDATES_DIR / f"{row['run_id']}.parquet")
            assert updates.column_names == list(C.UPDATE_COLUMNS)
            assert updates.column("accepted").to_pylist() == [True, False, True]
    assert (output / C.CAMPAIGN_FILE).read_text() == path.read_text()
    assert not [p for p in output.rglob("*") if p.name.endswith(".tmp")]


def test_resume_runs_only_what_has_no_row(cluster: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    arguments = [str(campaign_file(tmp_path)), "--output-dir", str(tmp_path / "out")]
    assert run_main([*arguments, "--limit", "3"], FakeLoop(calls, fail_seed=1)) == EXIT_OK
    first = called(calls)
    assert len(first) == 3
    assert run_main(arguments, FakeLoop(calls, fail_seed=1)) == EXIT_OK
    second = called(calls)[3:]
    assert len(second) == 5
    assert not set(first) & set(second)
    assert run_main(arguments, FakeLoop(calls)) == EXIT_OK
    assert len(called(calls)) == 8  # nothing left to run: no call
    assert run_main([*arguments, "--retry-failed"], FakeLoop(calls)) == EXIT_OK
    retried = called(calls)[8:]
    failed = {run_id for run_id, row in rows(tmp_path / "out").items()
              if row["seed"] == 1}
    assert set(retried) == failed
    assert len(retried) == 2
    table = pq.read_table(tmp_path / "out" / C.RESULTS_FILE).to_pylist()
    assert len(table) == 8
    assert all(r["status"] == C.STATUS_OK for r in table)


def test_a_dead_worker_is_a_failed_run(cluster: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    output = tmp_path / "out"
    path = campaign_file(tmp_path, seeds=[0, 1], grid={"trident_ekf.gyro_noise": [1e-3]})
    assert run_main([str(path), "--output-dir", str(output)],
                    FakeLoop(calls, crash_seed=1)) == EXIT_OK
    found = sorted(rows(output).values(), key=lambda row: row["seed"])
    assert [row["status"] for row in found] == [C.STATUS_OK, C.STATUS_FAILED]
    assert "WorkerCrashedError" in found[1]["error"]
    assert len(found[1]["error"]) <= 600
    assert found[1]["reproduce"].endswith(f"--only {found[1]['run_id']}")


SCRIPT = """
import sys, time
from pathlib import Path
from types import SimpleNamespace
import ray
from mav_bringup.campaign.command import main
calls = Path(sys.argv[1])
def slow(spec):
    (calls / f"{spec.run_id}.{time.monotonic_ns()}").write_text(
        ray.get_runtime_context().gcs_address)
    time.sleep(0.5)
    return SimpleNamespace(metrics={"position_rms_m": 1.0}, series={}, updates={})
sys.exit(main(sys.argv[2:], run_function=slow))
"""


def test_sigterm_half_way_then_resume_on_an_external_cluster(cluster: str,
                                                             tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    output = tmp_path / "out"
    arguments = [str(campaign_file(tmp_path)), "--output-dir", str(output), "--no-report"]
    environment = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(calls), *arguments, "--address", cluster],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120.0
        while len(list((output / "runs").glob("*.json"))) < 3:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "no 3 runs finished"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        _, errors = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == EXIT_TERMINATED, errors
    assert "terminated: finished runs kept" in errors
    kept = rows(output)
    assert 3 <= len(kept) < 8
    # Every run went to the external cluster (token authentication included).
    assert {p.read_text() for p in calls.iterdir()} == {
        ray.get_runtime_context().gcs_address}
    assert pq.read_table(output / C.RESULTS_FILE).num_rows == len(kept)
    before = len(called(calls))
    assert run_main(arguments, FakeLoop(calls)) == EXIT_OK
    rerun = called(calls)[before:]
    assert sorted(rerun) == sorted(set(rows(output)) - set(kept))
    assert pq.read_table(output / C.RESULTS_FILE).num_rows == 8


def test_only_reproduces_one_run_in_process(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    path, output = campaign_file(tmp_path), tmp_path / "out"
    assert main([str(path), "--dry-run"]) == EXIT_OK
    listed = capsys.readouterr().out.splitlines()[1:]
    assert len(listed) == 8
    run_id = listed[1].split()[0]  # seed 1
    arguments = [str(path), "--output-dir", str(output), "--only", run_id]
    assert run_main(arguments, FakeLoop(calls, fail_seed=1)) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "ValueError: seed 1 refused" in err
    assert rows(output)[run_id]["status"] == C.STATUS_FAILED
    assert run_main(arguments, FakeLoop(calls)) == EXIT_OK
    assert called(calls) == [run_id, run_id]
    assert rows(output)[run_id]["status"] == C.STATUS_OK
    assert pq.read_table(output / C.RESULTS_FILE).column("run_id").to_pylist() == [run_id]
    assert run_main([str(path), "--output-dir", str(output), "--only", "0" * 12],
                    FakeLoop(calls)) == EXIT_USAGE
    assert "no run '000000000000' in this campaign" in capsys.readouterr().err


def test_an_output_directory_belongs_to_one_campaign(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / C.CAMPAIGN_FILE).write_text("name: other\n")
    code = run_main([str(campaign_file(tmp_path)), "--output-dir", str(output)],
                    FakeLoop(tmp_path))
    assert code == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.startswith("mav-campaign: error: output directory")
    assert "\n" not in error
    assert "holds the runs of another campaign file" in error
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nseeds: [1, 1]\n")
    assert run_main([str(bad)], FakeLoop(tmp_path)) == EXIT_USAGE
    assert "seeds = [1, 1] names one seed twice" in capsys.readouterr().err


def test_an_address_without_a_cluster_fails_at_once() -> None:
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match=f"no Ray cluster at {address}: .*refused"):
        _check_reachable(address)


def test_progress_line() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(10, 2, stream=stream, clock=lambda: now[0])
    now[0] = 30.0
    progress.finished(ok=True)
    now[0] = 31.0
    progress.finished(ok=False)  # within LOG_EVERY_S of the last line: not written
    now[0] = 60.0
    progress.show(final=True)
    assert stream.getvalue().splitlines() == [
        "[mav-campaign] 3/10 runs, 0 failed, 2.0 runs/min, 3m30s left",
        "[mav-campaign] 4/10 runs, 1 failed, 2.0 runs/min, 3m00s left"]


def test_real_closed_loop_runs_through_ray(cluster: str, tmp_path: Path) -> None:
    path = campaign_file(tmp_path, duration_s=3.0, seeds=[0, 1],
                         grid={"trident_ekf.gyro_noise": [1e-3]})
    output = tmp_path / "out"
    assert main([str(path), "--output-dir", str(output), "--no-report", "--quiet"]) == EXIT_OK
    table = pq.read_table(output / C.RESULTS_FILE).to_pylist()
    assert [row["status"] for row in table] == [C.STATUS_OK, C.STATUS_OK], table
    assert [row["seed"] for row in table] == [0, 1]
    assert any(key.startswith(C.METRIC_PREFIX) for key in table[0])
    for row in table:
        series = pq.read_table(output / C.SERIES_DIR / f"{row['run_id']}.parquet")
        assert series.column_names[0] == C.TIME
        assert series.num_rows > 0
        assert (output / C.UPDATES_DIR / f"{row['run_id']}.parquet").exists()
