"""The default demo is consistent across seeds: the short form of the 20-seed sweep.

The sweep (``mav-sim --seed N`` for N = 0..19, 60 s each, docs/architecture.md) asks every
axis of position and velocity to lie inside its 3-sigma bound at least 95 % of the time in
at least 19 of the 20 runs. Here three seeds fly 15 s each and all but one must pass: one
run may draw a GNSS Gauss-Markov error far out in its law (seed 0 draws -0.48 m
vertically, 2.4 sigma), which no filter can tell from motion. Every run's summary carries
the error it drew, so such a run explains itself. The runs are independent lock-step runs,
so they fly side by side, one per core, each in its own process on its own ROS domain
(``run_in_child``).
"""

from __future__ import annotations

import math
import os

import pytest

from mav_bringup.graph.report import summarize
from mav_bringup.graph.series import read_run

pytestmark = pytest.mark.timeout(300)

SEEDS = (0, 1, 2)
DURATION_S = 15.0
MIN_INSIDE = 0.95
CHECKED = [f"{quantity}_{axis}" for quantity in ("position", "velocity") for axis in "xyz"]
RUN_TIMEOUT_S = 240.0
"""Wall time for one run on a loaded 2-core machine, s (bounded wait)."""
AT_ONCE = os.cpu_count() or 1
"""Runs flying at the same time: one per core. More would only share the cores, and a run
whose DDS threads are starved receives its sensor streams late."""


def test_most_seeds_of_the_default_demo_are_consistent(run_in_child, tmp_path):
    datum = (47.3977, 8.5456, 488.0)  # config/simulator.yaml
    running = {}
    passed = {}

    def finish(seed):
        child = running.pop(seed)
        exit_code = child.wait(RUN_TIMEOUT_S)
        assert exit_code == 0, child.stderr_text()
        summary = summarize(read_run(tmp_path / str(seed) / "bag", datum), {})
        inside = summary["inside_three_sigma"]
        drawn = summary["gnss_correlated_error_mean_enu_m"]
        assert drawn is not None
        assert len(drawn) == 3
        assert all(math.isfinite(c) for c in drawn)
        passed[seed] = all(inside[axis] >= MIN_INSIDE for axis in CHECKED)
        print(f"seed {seed}: inside 3 sigma {inside}; GNSS correlated error drawn {drawn}")

    for seed in SEEDS:
        if len(running) >= AT_ONCE:
            finish(next(iter(running)))  # the earliest started
        running[seed] = run_in_child(f"seed_{seed}", tmp_path / str(seed),
                                     duration_s=DURATION_S, seed=seed, report=False)
    while running:
        finish(next(iter(running)))
    assert sum(passed.values()) >= len(SEEDS) - 1, passed
