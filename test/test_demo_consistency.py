"""The default demo is consistent across seeds: the short form of the 20-seed sweep.

The sweep (``mav-sim --seed N`` for N = 0..19, 60 s each, docs/architecture.md) asks every
axis of position and velocity to lie inside its 3-sigma bound at least 95 % of the time in
at least 19 of the 20 runs. Here three seeds fly 15 s each and all but one must pass: one
run may draw a GNSS Gauss-Markov error far out in its law (seed 0 draws -0.48 m
vertically, 2.4 sigma), which no filter can tell from motion. Every run's summary carries
the error it drew, so such a run explains itself.
"""

from __future__ import annotations

import math

import pytest

from mav_bringup.graph.report import summarize
from mav_bringup.graph.runner import RunOptions, run
from mav_bringup.graph.series import read_run

pytestmark = pytest.mark.timeout(300)

SEEDS = (0, 1, 2)
DURATION_S = 15.0
MIN_INSIDE = 0.95
CHECKED = [f"{quantity}_{axis}" for quantity in ("position", "velocity") for axis in "xyz"]


def test_most_seeds_of_the_default_demo_are_consistent(ros_env, tmp_path):
    datum = (47.3977, 8.5456, 488.0)  # config/simulator.yaml
    passed = {}
    for seed in SEEDS:
        result = run(RunOptions(duration_s=DURATION_S, seed=seed, output_dir=tmp_path / str(seed),
                                report=False, progress=False))
        assert result.bag is not None
        summary = summarize(read_run(result.bag, datum), {})
        inside = summary["inside_three_sigma"]
        drawn = summary["gnss_correlated_error_mean_enu_m"]
        assert drawn is not None
        assert len(drawn) == 3
        assert all(math.isfinite(c) for c in drawn)
        passed[seed] = all(inside[axis] >= MIN_INSIDE for axis in CHECKED)
        print(f"seed {seed}: inside 3 sigma {inside}; GNSS correlated error drawn {drawn}")
    assert sum(passed.values()) >= len(SEEDS) - 1, passed
