"""The benchmark harness refuses disagreeing results and writes its tables.

No timing is asserted here (speed belongs in bench/, never in tests).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_geometry
import bench_instructions
import bench_startup
from harness import Case, run


def test_a_wrong_result_is_refused_before_timing():
    wrong = Case("wrong", 3, lambda: np.zeros(3), lambda: np.ones(3),
                 lambda a, b: bool(np.allclose(a, b)))
    with pytest.raises(AssertionError, match="wrong: our result disagrees"):
        run([wrong], repeats=1, progress=lambda _: None)


def test_geometry_benchmark_writes_json_and_markdown(tmp_path):
    assert bench_geometry.main(["--size", "64", "--repeats", "1", "--output-dir",
                                str(tmp_path)]) == 0
    report = json.loads((tmp_path / "geometry.json").read_text())
    names = {row["name"] for row in report["results"]}
    assert {"compose", "exp (from rotation vector)", "log (to rotation vector)",
            "rotate vectors"} <= names
    assert {row["size"] for row in report["results"]} == {1, 64}
    for row in report["results"]:
        assert row["ours_s"] > 0
        assert row["baseline_s"] > 0
        assert row["ratio"] == pytest.approx(row["ours_s"] / row["baseline_s"])
    markdown = (tmp_path / "geometry.md").read_text()
    assert "| compose | 64 |" in markdown


def test_startup_benchmark_writes_medians_against_rclpy(tmp_path):
    assert bench_startup.main(["--commands", "trident-bag-recover", "--repeats", "1",
                               "--output-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "startup.json").read_text())
    assert [row["name"] for row in report["results"]] == [
        "trident-bag-recover: import", "trident-bag-recover --help"]
    for row in report["results"]:
        assert row["size"] == 1
        assert row["ours_s"] > 0
        assert row["baseline_s"] > 0
        assert row["ratio"] == pytest.approx(row["ours_s"] / row["baseline_s"])
    markdown = (tmp_path / "startup.md").read_text()
    assert "median of n fresh interpreters" in markdown
    assert "Load average (1 min)" in markdown


@pytest.mark.parametrize("name", sorted(bench_instructions.WORKLOADS))
def test_every_instruction_count_workload_runs_and_checks(name):
    """The workloads bench_instructions.py counts under valgrind run in a plain interpreter
    and print their finite check value (valgrind itself is not needed here)."""
    workload = bench_instructions.WORKLOADS[name]
    result = subprocess.run([sys.executable, "-c",
                             bench_instructions.child_code(workload, instrumented=False)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    checks = [line.split()[1] for line in result.stdout.splitlines()
              if line.startswith("check")]
    assert len(checks) == 1
    assert np.isfinite(float(checks[0]))
