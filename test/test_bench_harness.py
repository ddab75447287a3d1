"""The benchmark harness refuses disagreeing results and writes its tables.

No timing is asserted here (speed belongs in bench/, never in tests).
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_geometry
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
