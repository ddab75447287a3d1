"""Where the time of a ``mav-sim`` run goes (issue 16): the one-process graph's CPU time split
between the cores, the nodes' ROS shells, the executor with DDS, the recorder and start-up.

Usage: python bench/bench_graph_breakdown.py [--duration S] [--no-record] [--output-dir DIR]

Two runs of the default demo (quadrotor, figure-eight on the estimate), recording unless
``--no-record`` (no report: the report is timed by ``mav-sim`` itself and by
bench/bench_report_memory.py), and the simulator core alone for the same sim time:

- a plain run: real-time factor (sim time over the lock-step loop's wall time) and the CPU
  time of the process (all threads: the DDS threads included);
- a run under cProfile timed by process CPU time: each part is the cumulative time of its
  entry points (below), the executor's share is what the lock-step loop spent outside every
  part (rclpy's C++ executor, DDS, the sim-time clock callbacks, message (de)serialization in
  rclpy). The profiler inflates Python-heavy parts against C ones: read the shares, not the
  seconds;
- the simulator core alone (``bench_graph.core_baseline``), the floor the graph is measured
  against.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import sys
import tempfile
import time
from pathlib import Path

from bench_graph import VEHICLE, core_baseline

from mav_bringup.graph.runner import RunOptions, run

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
LOOP = ("mav_bringup/graph/runner.py", "_lockstep_loop")
RUN = ("mav_bringup/graph/runner.py", "run")
SIMULATOR_CORE = [("variational_sim/vehicle_sim/simulator.py", "step")]
SIMULATOR_NODE = [("variational_sim/ros/simulator_node.py", "advance")]
ESTIMATOR_CORE = [("trident_ekf/adapters/base.py", "deliver"),
                  ("trident_ekf/core/session.py", "estimate")]
ESTIMATOR_NODE = [("trident_ekf/ros/estimator_node.py", "_on_input"),
                  ("trident_ekf/ros/estimator_node.py", "publish_diagnostics")]
CONTROLLER_CORE = [("mav_dynamics/flight.py", "tick"), ("mav_dynamics/flight.py", "odometry")]
CONTROLLER_NODE = [("mav_dynamics/ros/controller_node.py", "_tick"),
                   ("mav_dynamics/ros/controller_node.py", "_on_odometry")]
RECORDER = [("mav_bringup/graph/recorder.py", "write")]
"""Entry points (file suffix, function name); each must name exactly one profiled function."""


def _cumulative(stats: pstats.Stats, entries: list[tuple[str, str]]) -> float:
    """Summed cumulative seconds of the entry points (0 for one never called)."""
    total = 0.0
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = (
        stats.stats)  # type: ignore[attr-defined]
    for suffix, name in entries:
        found = [values[3] for (path, _, function), values in table.items()
                 if path.endswith(suffix) and function == name]
        if len(found) > 1:
            raise AssertionError(f"{suffix}:{name} names {len(found)} functions")
        total += sum(found)
    return total


def breakdown(stats: pstats.Stats) -> dict[str, float]:
    """CPU seconds (under the profiler) of each part of the run."""
    simulator_core = _cumulative(stats, SIMULATOR_CORE)
    estimator_core = _cumulative(stats, ESTIMATOR_CORE)
    controller_core = _cumulative(stats, CONTROLLER_CORE)
    parts = {
        "simulator core (physics, sensors)": simulator_core,
        "simulator node (messages, batches, publish)":
            _cumulative(stats, SIMULATOR_NODE) - simulator_core,
        "estimator core (session, filter)": estimator_core,
        "estimator node (decode, outputs, publish)":
            _cumulative(stats, ESTIMATOR_NODE) - estimator_core,
        "controller core (flight)": controller_core,
        "controller node (messages, publish)":
            _cumulative(stats, CONTROLLER_NODE) - controller_core,
        "recorder (bag writes)": _cumulative(stats, RECORDER),
    }
    loop = _cumulative(stats, [LOOP])
    parts["executor, DDS, clock callbacks"] = loop - sum(parts.values())
    parts["start-up and shutdown (imports, nodes, discovery, bag close)"] = (
        _cumulative(stats, [RUN]) - loop)
    return parts


def _run(duration_s: float, record: bool, output_dir: Path) -> tuple[float, float]:
    """(real-time factor of the lock-step loop, process CPU seconds of the whole run)."""
    cpu = time.process_time()
    result = run(RunOptions(duration_s=duration_s, vehicle=VEHICLE, output_dir=output_dir,
                            overwrite=True, record=record, report=False, progress=False))
    return result.real_time_factor, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0,
                        help="sim time per run, s (default 20)")
    parser.add_argument("--no-record", action="store_true", help="runs without the bag")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if not args.duration > 0.0:
        parser.error("--duration must be positive")
    record = not args.no_record
    load_before = os.getloadavg()[0]
    core_wall = time.perf_counter()
    core_sim = core_baseline(args.duration)
    core_factor = core_sim / (time.perf_counter() - core_wall)
    with tempfile.TemporaryDirectory() as workdir:
        factor, cpu_s = _run(args.duration, record, Path(workdir) / "plain")
        profiler = cProfile.Profile(time.process_time)
        profiler.runcall(_run, args.duration, record, Path(workdir) / "profiled")
    parts = breakdown(pstats.Stats(profiler))
    total = sum(parts.values())
    label = "recording" if record else "no recording"
    lines = [f"# mav-sim ({VEHICLE}, {args.duration:g} s sim, {label}): where the time goes",
             "", f"Real-time factor {factor:.2f}x (lock-step loop, plain run; process CPU "
             f"{cpu_s:.1f} s for the whole run); the simulator core alone "
             f"{core_factor:.2f}x: the graph costs {core_factor / factor:.1f}x the core.", "",
             "| part | CPU s (profiled) | share |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.2f} | {100.0 * seconds / total:.0f} % |"
              for name, seconds in parts.items()]
    lines += ["", f"Python {platform.python_version()}, {platform.machine()}; load average "
              f"(1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on "
              f"{os.cpu_count()} CPUs."]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = "graph_breakdown" + ("" if record else "_no_record")
    (args.output_dir / f"{stem}.json").write_text(json.dumps({
        "duration_s": args.duration, "record": record, "real_time_factor": factor,
        "process_cpu_s": cpu_s, "core_alone_real_time_factor": core_factor,
        "profiled_cpu_s": parts}, indent=2))
    markdown = args.output_dir / f"{stem}.md"
    markdown.write_text("\n".join(lines) + "\n")
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
