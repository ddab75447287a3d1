"""What keeps trident-replay cheap changes nothing it computes: the commands' modules load
no bag reader, scipy or plotting before they run, the report's chunked plot series keep the
rows a per-row decimator keeps, and the report's updates settle as a scan of every held
update would settle them. (Speed itself: bench/bench_replay.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from mav_ros_common.streams import MinMaxDecimator
from trident_ekf.tools import bagio
from trident_ekf.tools.report import CHUNK_ROWS, PlotSeries, SourceUpdates

HEAVY = ["rosbags.rosbag2", "rosbags.typesys.stores", "scipy", "matplotlib", "rclpy"]

# Imports the commands' modules and parses their --help; prints the heavy modules loaded.
PROBE = """
import contextlib, io, json, sys
from trident_ekf.tools import import_cli, replay
for command in (replay.main, import_cli.main):
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        command(["--help"])
print(json.dumps(sorted(m for m in sys.modules if any(
    m == h or m.startswith(h + ".") for h in json.loads(sys.argv[1])))))
"""


def test_help_of_replay_and_import_loads_no_bag_reader_scipy_or_plotting() -> None:
    probe = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY)],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(probe.stdout) == []


def test_the_standard_typestore_is_made_once_on_first_use() -> None:
    store = bagio.TYPESTORE
    assert store is bagio.standard_typestore() is bagio.TYPESTORE
    assert "nav_msgs/msg/Odometry" in store.fielddefs


def test_plot_series_keeps_the_rows_of_a_per_row_decimator() -> None:
    rng = np.random.default_rng(11)
    for length in (1, CHUNK_ROWS - 1, CHUNK_ROWS, 511, 512, 513, 5000):
        rows = rng.normal(size=(length, 3))
        rows[:, 0] = np.arange(length)
        rows[rng.integers(0, length, 7), 1] = 0.0  # ties: the first of equal extremes is kept
        rows[rng.integers(0, length, 3), 2] = np.nan
        single, chunked = MinMaxDecimator(3), PlotSeries(3)
        for row in rows:
            single.add(tuple(row))
            chunked.add(tuple(row))
        assert chunked.seen == single.seen == length
        np.testing.assert_array_equal(chunked.rows(), single.rows())
        for a, b in zip(chunked.columns(), single.columns(), strict=True):
            np.testing.assert_array_equal(a, b)


def _settled_by_scan(stream: list[tuple[float, float]], window_s: float) -> list[float]:
    """The stamps settled, in settling order, by scanning every held update at each one."""
    applied: dict[float, float] = {}
    order: list[float] = []
    for stamp, filter_time in stream:
        applied.setdefault(stamp, filter_time)
        old = sorted(t for t, at in applied.items() if at < filter_time - window_s)
        for t in old:
            del applied[t]
        order += old
    return order


def test_updates_settle_as_a_scan_would_also_when_the_filter_clock_steps_back() -> None:
    rng = np.random.default_rng(3)
    window_s = 2.0
    stream = []
    filter_time = 0.0
    for k in range(450):  # fewer than the decimator's buckets: every settled row is kept
        filter_time += 0.02 if k != 200 else -30.0  # a clock change
        # Mostly new stamps; some re-applied (an earlier stamp again, after a delayed one).
        stamp = round(filter_time - (0.5 if rng.random() < 0.1 else 0.0), 2)
        stream.append((stamp, filter_time))
    updates = SourceUpdates(1, window_s)
    for stamp, filter_time in stream:
        updates.add(stamp, 1.0, True, np.array([0.5]), filter_time)
    expected = _settled_by_scan(stream, window_s)
    settled = updates.rows()[:-updates.replaceable or None, 0]
    np.testing.assert_array_equal(settled, expected)
    assert updates.figures()["updates"] == len(expected) + updates.replaceable
    assert len(expected) > 200
