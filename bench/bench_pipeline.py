"""Real-time factor of the ROS-free closed-loop pipeline (issue 17) against ``mav-sim``.

Usage: python bench/bench_pipeline.py [--duration S] [--repeats K] [--output-dir DIR]

Both fly the default demo (quadrotor_x.yaml, figure-eight on the estimate, calm, seed 0)
for ``--duration`` s of sim time, in this process, one after the other:

- ours: ``mav_bringup.pipeline.run_closed_loop`` (the same cores in one Python loop); wall
  time of its loop (``metrics["wall_time_s"]``);
- baseline: ``mav-sim --no-record`` (``graph.runner.run`` without bag or report: the three
  nodes on one executor over DDS, lock-step); wall time of its lock-step loop
  (``RunResult.wall_time_s``).

Each figure is the best of ``--repeats`` runs, the two taking turns. The two fly the same
trajectory to the bit (``src/mav_bringup/test/test_pipeline.py``); here the runs' sim times
must agree.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness import Result, append_and_show, write_report

from mav_bringup.graph.runner import RunOptions, run
from mav_bringup.pipeline import LoopOptions, run_closed_loop

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
MAX_DOMAIN_ID = 232


def pipeline(duration_s: float) -> tuple[float, float]:
    """(sim time, wall time of the loop) of one pipeline run."""
    metrics = run_closed_loop(LoopOptions(duration_s=duration_s)).metrics
    return float(metrics["sim_time_s"]), float(metrics["wall_time_s"])


def graph(duration_s: float, output_dir: Path) -> tuple[float, float]:
    """(sim time, wall time of the lock-step loop) of one ``mav-sim --no-record`` run."""
    result = run(RunOptions(duration_s=duration_s, output_dir=output_dir, overwrite=True,
                            record=False, report=False, progress=False))
    return result.sim_time_s, result.wall_time_s


def _best(cases: list[Callable[[], tuple[float, float]]], duration_s: float,
          repeats: int) -> list[float]:
    """Least wall time (s) of each case over ``repeats`` rounds, the cases taking turns
    within a round (a machine whose load changes slows both alike); every run must
    simulate ``duration_s``."""
    best = [math.inf] * len(cases)
    for _ in range(repeats):
        for k, measure in enumerate(cases):
            sim, wall = measure()
            if abs(sim - duration_s) > 1e-6:
                raise AssertionError(f"a run simulated {sim} s, not {duration_s} s")
            best[k] = min(best[k], wall)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0,
                        help="sim time per run, s (default 60: the demo)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per case (default 1)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if not args.duration > 0.0 or args.repeats < 1:
        parser.error("--duration must be > 0 s and --repeats >= 1")
    # mav-sim's own loopback-only domain, away from anything else on this machine
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, MAX_DOMAIN_ID)))
    duration = args.duration
    with tempfile.TemporaryDirectory() as workdir:
        ours, baseline = _best([lambda: pipeline(duration),
                                lambda: graph(duration, Path(workdir))], duration, args.repeats)
    print(f"pipeline: {duration / ours:.2f}x real time")
    print(f"mav-sim --no-record: {duration / baseline:.2f}x real time")
    _, markdown = write_report(
        [Result(f"default demo, {duration:g} s sim", round(duration * 1000.0), ours, baseline)],
        "Closed-loop pipeline vs mav-sim", "mav-sim --no-record", args.output_dir,
        "pipeline", statistic="wall time per run, best of repeats")
    append_and_show(markdown, [
        "", "n = physics steps (1000 Hz).", "",
        "| case | real-time factor |", "|---|---:|",
        f"| pipeline | {duration / ours:.2f}x |",
        f"| mav-sim --no-record | {duration / baseline:.2f}x |",
        f"| speed-up (pipeline over mav-sim) | {baseline / ours:.2f} |"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
