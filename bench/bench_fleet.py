"""Real-time factor of ``mav-sim`` against the number of vehicles in one simulator.

Usage: python bench/bench_fleet.py [--duration S] [--repeats K] [--counts 1,2,4]
       [--output-dir DIR]

For each count N, N quadrotors (``quadrotor_x``) fly the figure-eight in one simulator
process, each with its own controller and estimator in its namespace (``--vehicles``), for
``--duration`` s of sim time, not recorded. The baseline in the same run is the single-vehicle
graph (N = 1, no namespace): the ratio is the wall time of N vehicles over that of one, so
a graph whose cost is linear in the vehicles has ratio N, and the real-time factor is the
single vehicle's divided by N. DDS stays on loopback, in the domain of ``ROS_DOMAIN_ID``
if set, else a random one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench_graph import _best_wall_per_sim_second, _isolated_dds
from harness import Result, append_and_show, write_report

from mav_bringup.graph.runner import RunOptions, run

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
VEHICLE = "quadrotor_x"
PHYSICS_RATE_HZ = 1000.0


def fleet(count: int, duration_s: float, output_dir: Path) -> tuple[float, float]:
    """(sim time, wall time of the lock-step loop) of ``count`` vehicles, unrecorded."""
    vehicles = (VEHICLE,) * count if count > 1 else ()
    result = run(RunOptions(duration_s=duration_s, vehicle=VEHICLE, vehicles=vehicles,
                            output_dir=output_dir, overwrite=True, record=False,
                            report=False, progress=False))
    return result.sim_time_s, result.wall_time_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0,
                        help="sim time per run, s (default 10)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per count (default 2)")
    parser.add_argument("--counts", default="1,2,4",
                        help="vehicle counts, comma-separated (default 1,2,4)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    counts = sorted({int(c) for c in args.counts.split(",")} | {1})
    if args.duration <= 0.0 or args.repeats < 1 or counts[0] < 1:
        parser.error("--duration must be > 0, --repeats >= 1 and every count >= 1")
    preset_domain = os.environ.get("ROS_DOMAIN_ID")
    _isolated_dds()
    if preset_domain:  # keep a domain the caller chose (several runs sharing the machine)
        os.environ["ROS_DOMAIN_ID"] = preset_domain
    walls = {}
    with tempfile.TemporaryDirectory() as workdir:
        for count in counts:
            per_sim_second = _best_wall_per_sim_second(
                lambda c=count: fleet(c, args.duration, Path(workdir) / str(c)), args.repeats)
            walls[count] = args.duration * per_sim_second
            print(f"{count} vehicle(s): {args.duration / walls[count]:.2f}x real time")
    steps = round(args.duration * PHYSICS_RATE_HZ)
    results = [Result(f"{count} vehicle(s), {args.duration:g} s sim", steps * count,
                      walls[count], walls[1]) for count in counts]
    _, markdown = write_report(results, "mav-sim wall time against the number of vehicles",
                               "one vehicle", args.output_dir, "fleet")
    lines = ["", "n = vehicle physics steps (1 kHz per vehicle).", "",
             "| vehicles | real-time factor | wall time / one vehicle's |", "|---:|---:|---:|"]
    lines += [f"| {count} | {args.duration / walls[count]:.2f}x | "
              f"{walls[count] / walls[1]:.2f} |" for count in counts]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
