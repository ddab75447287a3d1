"""A real PX4 flight whose logger dropped every topic in two bursts of dropouts (six IMU
intervals of 0.22-2.24 s, at 46 s and at 122-125 s, in flight; data/px4_real): the
estimator bridges the IMU gaps, so the fixes after them are used at once instead of being
gated until a divergence reset."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from trident_ekf.core import FilterConfig
from trident_ekf.core.initialization import Initializer
from trident_ekf.tools.replay import Aiding, Topics, replay

PX4_REAL = Path(__file__).resolve().parents[3] / "data" / "px4_real"


def _imu_gaps(longer_than_s: float) -> int:
    """IMU intervals longer than ``longer_than_s`` in the log itself (PX4 stamps, us)."""
    with (PX4_REAL / "sensor_combined_0.csv").open() as rows:
        stamps = np.array([float(row["timestamp"]) for row in csv.DictReader(rows)]) * 1e-6
    return int(np.count_nonzero(np.diff(stamps) > longer_than_s))


def test_logging_dropouts_in_flight_are_bridged(px4_real):
    summary = replay(px4_real.bag, None, Topics(), "trident", FilterConfig(), Initializer(),
                     50.0, None, aiding=Aiding())
    assert summary["status"] == "nominal"
    assert summary["nonfinite_estimates"] == 0
    assert summary["counters"]["imu_gap"] == _imu_gaps(FilterConfig().max_imu_interval) == 6
    position = summary["sources"]["gnss_position"]
    # With the gaps skipped (max_bridged_gap=0): 50 fixes gated after them, 2 resets.
    assert (position["gated"], position["resets"]) == (0, 0)
    assert position["accepted"] > 700
