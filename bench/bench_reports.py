"""Wall time of the report step with its figures drawn in the command's own process against
worker processes on the other cores (``mav_ros_common.plot_workers``).

Usage: python bench/bench_reports.py [--duration S] [--repeats K] [--output-dir DIR]

Every figure is the median over ``--repeats`` fresh interpreters, the two ways alternating
(importing matplotlib is part of what the workers take off the command's path):

- ``mav-sim``'s run report of a synthetic ``--duration`` s run with the default demo's
  rates (``bench_report_memory.write_synthetic_run``), the report step alone:
  ``write_bag_report`` drawing in this process (baseline) against workers made when the run
  starts, as ``mav-sim`` makes them (the report is timed once they have loaded matplotlib),
  and against workers made when the report starts (their start-up timed with it);
- ``trident-replay --report`` on the PX4 SITL log of data/ (imported once, not timed), the
  whole command, with its workers (the default) against ``report_workers(0)``.

Both ways must write the same PNG files, byte for byte. The gain needs a second CPU; with one
the workers are not made. Output: reports.json and reports.md (harness ratio table).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report_memory import SITE, write_synthetic_run
from harness import Result, append_and_show, installed_bytecode, write_report

from mav_ros_common.plot_workers import available_cpus

ROOT = Path(__file__).resolve().parents[1]
SITL_LOG = ROOT / "data" / "px4_sitl" / "sample_px4_events.ulg"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
WAYS = ("here", "warm", "cold")
"""mav-sim report: figures drawn here; by workers made at the run's start; made at the
report's start."""


def run_report(bag: Path, way: str, output: Path) -> float:
    """Seconds of ``mav-sim``'s report step of ``bag`` drawn ``way`` (in this process)."""
    from mav_bringup.graph.report import report_workers, write_bag_report

    run = {"sim_time_s": None}
    if way == "here":
        start = time.perf_counter()
        write_bag_report(bag, output, run, SITE)
        return time.perf_counter() - start
    if way == "warm":
        with report_workers() as workers:
            workers.wait_started()
            start = time.perf_counter()
            write_bag_report(bag, output, run, SITE, workers=workers)
            return time.perf_counter() - start
    start = time.perf_counter()
    with report_workers() as workers:
        write_bag_report(bag, output, run, SITE, workers=workers)
    return time.perf_counter() - start


def replay_command(bag: Path, output: Path, here: bool) -> None:
    """``trident-replay BAG --report OUTPUT``, its figures drawn here when ``here``."""
    from trident_ekf.tools import replay, report

    if here:
        replay.report_workers = lambda: report.report_workers(0)  # type: ignore[assignment]
    if replay.main([str(bag), "--report", str(output), "--force"]) != 0:
        raise RuntimeError(f"trident-replay {bag} failed")


def _child(*arguments: str) -> float:
    """Wall seconds of this script's child mode, or the report step's it prints."""
    start = time.perf_counter()
    completed = subprocess.run([sys.executable, __file__, "--child", *arguments], check=True,
                               capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    step = [line.split()[-1] for line in completed.stdout.splitlines()
            if line.startswith("report step ")]
    return float(step[-1]) if step else elapsed


def _same_figures(first: Path, second: Path) -> bool:
    names = sorted(p.name for p in first.glob("*.png"))
    return bool(names) and names == sorted(p.name for p in second.glob("*.png")) and all(
        (first / n).read_bytes() == (second / n).read_bytes() for n in names)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, bag, output = argv[1], Path(argv[2]), Path(argv[3])
        if kind == "replay":
            replay_command(bag, output, here=argv[4] == "here")
        else:
            print(f"report step {run_report(bag, kind, output)!r}")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0,
                        help="sim time of the synthetic mav-sim run, s (default 60)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh interpreters per figure, median (default 3)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if not (args.duration > 0.0 and args.repeats >= 1):
        parser.error("--duration must be > 0 s and --repeats >= 1")
    from trident_ekf.tools import import_cli

    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as workdir, installed_bytecode():
        work = Path(workdir)
        run_bag, sitl_bag = work / "run", work / "sitl"
        messages = write_synthetic_run(run_bag, args.duration)
        with contextlib.redirect_stdout(io.StringIO()):
            imported = import_cli.main([str(SITL_LOG), "--output", str(sitl_bag)])
        if imported != 0:
            raise RuntimeError(f"trident-import {SITL_LOG} failed")
        _child("here", str(run_bag), str(work / "warm-up"))  # fills the bytecode cache
        for k in range(args.repeats):
            for way in WAYS:
                times.setdefault(way, []).append(
                    _child(way, str(run_bag), str(work / f"{way}{k}")))
            for way in ("here", "workers"):
                times.setdefault(f"replay {way}", []).append(
                    _child("replay", str(sitl_bag), str(work / f"replay-{way}{k}"), way))
            print(f"round {k + 1}/{args.repeats}: " + ", ".join(
                f"{name} {values[-1]:.2f} s" for name, values in times.items()), flush=True)
        for way in ("warm", "cold"):
            if not _same_figures(work / "here0", work / f"{way}0"):
                raise AssertionError(f"the {way} workers drew other figures than this process")
        if not _same_figures(work / "replay-here0", work / "replay-workers0"):
            raise AssertionError("trident-replay's workers drew other figures")
    median = {name: statistics.median(values) for name, values in times.items()}
    results = [
        Result(f"mav-sim report, {args.duration:g} s run: workers made at the run's start "
               "(vs drawn in the process)", messages, median["warm"], median["here"]),
        Result(f"mav-sim report, {args.duration:g} s run: workers made at the report's start "
               "(vs drawn in the process)", messages, median["cold"], median["here"]),
        Result("trident-replay --report, PX4 SITL log, whole command: workers (vs drawn in "
               "the process)", 1, median["replay workers"], median["replay here"]),
    ]
    _, markdown = write_report(results, "Report step: figures in worker processes",
                               "drawn in the command's process", args.output_dir, "reports",
                               f"wall time, median of {args.repeats} fresh interpreters")
    lines = ["", f"{available_cpus()} CPUs available (the workers need 2); load average "
             f"(1 min) {os.getloadavg()[0]:.2f}. n = messages of the run bag, or 1 command.",
             "", "| figure | median | every run |", "|---|---:|---|"]
    lines += [f"| {name} | {median[name]:.2f} s | "
              f"{', '.join(f'{v:.2f}' for v in values)} |" for name, values in times.items()]
    append_and_show(markdown, lines)
    (args.output_dir / "reports_times.json").write_text(json.dumps(times, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
