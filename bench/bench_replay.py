"""Whole-command trident-replay on real logs: real-time factor, where the time goes, and
how the cost grows with the log's length (issue 16, items 2 and 4).

Usage: python bench/bench_replay.py [--logs LOG ...] [--scaling-log LOG] [--repeats K]
                                    [--before-tree DIR] [--output-dir DIR]

Each log is imported once with trident-import (not timed). Child interpreters keep their
compiled modules as an installed package does (``harness.installed_bytecode``), filled by one
untimed whole command per environment first. Then:

- whole command: ``trident-replay BAG --output OUT --force`` run as its console script runs
  it, in a fresh interpreter, median of ``--repeats``; the same with ``--filter baseline``
  (the conventional ESKF), with the compiled kernels off (``MAV_KERNELS=reference``: the
  numpy filter) and with ``--report``, all alternating, one of each per repeat. The
  real-time factor is the log's IMU span over the wall time. ``--help`` and ``python -c
  pass`` give the start-up floor.
- breakdown: one in-process replay with the phases timed exclusively (a phase inside another
  is not counted twice): reading the bag (rosbags' reader, or the record walk of a damaged
  bag), decoding messages (cdr and rosbags' deserializer), writing the output bag (encoding
  and the MCAP writer), the report (only with ``--report``), and the rest: the estimator
  (session, filter, yaw estimator, report series). Start-up is the whole command's wall time
  less the in-process replay's.
- ceilings: log length over (``--help``'s start-up + the breakdown's reading, decoding and
  writing) is the real-time factor the whole command could reach if the estimator cost
  nothing (compiled whole, input and output as they are); over (start-up + reading) alone,
  if decoding and writing cost nothing as well.
- scaling: in-process replays of the first 25, 40, 55, 70, 85 and 100 % of ``--scaling-log``
  (``--stop``), best of ``--repeats``; a least-squares line cost = a + b * IMU samples, and
  the cost per IMU sample of each run against the slope: linear when every run past the
  first is within ``LINEARITY_TOLERANCE`` of it. Table, and a PNG plot.
- before: with ``--before-tree DIR`` (a source tree, e.g. ``git archive HEAD src | tar -x -C
  DIR``), the whole command again with DIR's packages first on PYTHONPATH, in the same run.

Results: ``replay.json`` and ``replay.md`` (harness ratio table: trident against
``--filter baseline`` and, with ``--before-tree``, against the tree given), ``replay.png``.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from harness import Result, append_and_show, installed_bytecode, write_report

from trident_ekf.tools import bag_reader, bagio, cdr, import_cli
from trident_ekf.tools import replay as replay_tool

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
DEFAULT_LOGS = [DATA / "px4_sitl" / "test_replay_data_ekf_gsf_reset.csv",
                DATA / "ardupilot" / "log171.bin", DATA / "px4_real"]
DEFAULT_SCALING_LOG = DATA / "ardupilot" / "log171.bin"  # the longest: 243 s
FRACTIONS = (0.25, 0.4, 0.55, 0.7, 0.85, 1.0)
REPLAY_TARGET = 300.0  # issue 16: whole-command replay of a real log, x real time
"""Of the scaling log (log171: its first GNSS fix is at 45 s, 19 % in)."""
LINEARITY_TOLERANCE = 0.25
"""Largest relative difference of a run's cost per IMU sample from the fitted slope (the
first, shortest run excluded: its fixed costs weigh most)."""
ENTRY = "import sys; from trident_ekf.tools.replay import main; sys.exit(main())"
CHILD_TIMEOUT_S = 900.0


def _quiet() -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


def import_log(log: Path, workdir: Path) -> Path:
    bag = workdir / f"in_{log.resolve().name}"
    if bag.exists():  # imported already
        return bag
    with _quiet():
        if import_cli.main([str(log), "--output", str(bag)]) != 0:
            raise RuntimeError(f"trident-import failed on {log}")
    return bag


def command_seconds(arguments: list[str], env: dict[str, str] | None = None) -> float:
    """Wall time of one fresh interpreter running ``arguments`` (exit status 0 required)."""
    start = time.perf_counter()
    subprocess.run(arguments, check=True, env=env, timeout=CHILD_TIMEOUT_S,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def replay_command(bag: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, str(bag), "--output", str(output), "--force", *extra]


def tree_environment(tree: Path) -> dict[str, str]:
    """The environment that imports the packages of the source tree ``tree`` (its src/*)
    ahead of the venv's editable installs; compiled kernels off (a tree has none built)."""
    packages = sorted(str(p) for p in (tree / "src").iterdir() if p.is_dir())
    if not packages:
        raise ValueError(f"{tree} has no src/<package> folders")
    return os.environ | {"PYTHONPATH": os.pathsep.join(packages), "MAV_KERNELS": "reference"}


class Phases:
    """Exclusive time per phase: entering a phase pauses the one it is called from."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[tuple[str, float]] = []

    def enter(self, name: str) -> None:
        now = time.perf_counter()
        if self._stack:
            outer, since = self._stack[-1]
            self.seconds[outer] = self.seconds.get(outer, 0.0) + now - since
        self._stack.append((name, now))

    def leave(self) -> None:
        now = time.perf_counter()
        name, since = self._stack.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - since
        if self._stack:
            self._stack[-1] = (self._stack[-1][0], now)

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(name)
            try:
                return function(*args, **kwargs)
            finally:
                self.leave()
        return timed

    def wrap_iterator(self, name: str, function: Callable[..., Iterator[Any]]
                      ) -> Callable[..., Iterator[Any]]:
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            iterator = function(*args, **kwargs)
            while True:
                self.enter(name)
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                finally:
                    self.leave()
                yield item
        return timed


def _patched(phases: Phases) -> contextlib.ExitStack:
    """The replay's reading, decoding, writing and report functions timed by ``phases``."""
    from rosbags.typesys.store import Typestore

    stack = contextlib.ExitStack()
    targets: list[tuple[Any, str, str]] = [
        (cdr, "decode_imu", "decode"), (cdr, "decode_odometry", "decode"),
        (Typestore, "deserialize_cdr", "decode"),
        (cdr, "encode_odometry", "write"), (cdr, "encode_stamped", "write"),
        (bagio, "diagnostics_message", "write"),
        (bagio.BagWriter, "write_cdr", "write"), (bagio.BagWriter, "write", "write"),
        (bagio.BagWriter, "__exit__", "write"), (bagio.BagWriter, "__enter__", "write"),
        (replay_tool, "write_report", "report")]
    for owner, name, phase in targets:
        original = getattr(owner, name)
        stack.callback(setattr, owner, name, original)
        setattr(owner, name, phases.wrap(phase, original))
    original_raw = bag_reader.BagReader.raw
    stack.callback(setattr, bag_reader.BagReader, "raw", original_raw)
    bag_reader.BagReader.raw = phases.wrap_iterator("read", original_raw)  # type: ignore[method-assign]
    return stack


def replay_in_process(bag: Path, output: Path, *extra: str) -> dict[str, Any]:
    with _quiet():
        return replay_tool.run(replay_tool.parse_args(
            [str(bag), "--output", str(output), "--force", *extra]))


def breakdown(bag: Path, output: Path, report: Path) -> dict[str, float]:
    """Exclusive seconds per phase of one in-process replay with ``--report`` (in a process
    that has replayed already: every lazy import done)."""
    phases = Phases()
    with _patched(phases):
        phases.enter("estimator")
        replay_in_process(bag, output, "--report", str(report))
        phases.leave()
    return phases.seconds


def best_of(repeats: int, function: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def scaling(bag: Path, output: Path, duration: float, repeats: int
            ) -> list[dict[str, float]]:
    """In-process replay cost of the first fractions of the log (``--stop``)."""
    rows = []
    for fraction in FRACTIONS:
        stop = ["--stop", f"{fraction * duration + 1e-3:.3f}"] if fraction < 1.0 else []
        summaries: list[dict[str, Any]] = []

        def run(arguments: list[str] = stop,
                found: list[dict[str, Any]] = summaries) -> None:
            found.append(replay_in_process(bag, output, *arguments))

        seconds = best_of(repeats, run)
        summary = summaries[-1]
        rows.append({"fraction": fraction, "imu_samples": summary["imu_messages"],
                     "log_s": summary["log_duration_s"], "seconds": seconds})
    return rows


def linear_fit(rows: list[dict[str, float]]) -> tuple[float, float, list[float], bool]:
    """Intercept (s), slope (s per IMU sample), each run's cost per sample (its time less
    the intercept, over its samples) relative to the slope, and whether every run past the
    first is within ``LINEARITY_TOLERANCE``."""
    n = np.array([r["imu_samples"] for r in rows], dtype=float)
    seconds = np.array([r["seconds"] for r in rows])
    slope, intercept = np.polyfit(n, seconds, 1)
    relative = ((seconds - intercept) / n / slope - 1.0).tolist()
    linear = all(abs(r) <= LINEARITY_TOLERANCE for r in relative[1:])
    return float(intercept), float(slope), relative, linear


def plot_scaling(rows: list[dict[str, float]], fit: tuple[float, float, list[float], bool],
                 title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    intercept, slope, _, _ = fit
    n = np.array([r["imu_samples"] for r in rows], dtype=float)
    seconds = np.array([r["seconds"] for r in rows])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(n, seconds, "o", label="replay (in process, best of repeats)")
    grid = np.linspace(0.0, n.max(), 50)
    left.plot(grid, intercept + slope * grid, "-",
              label=f"fit: {intercept:.3f} s + {slope * 1e6:.1f} us x samples")
    left.set_xlabel("IMU samples replayed")
    left.set_ylabel("replay time (s)")
    left.legend(fontsize=8)
    right.plot(n, (seconds - intercept) / n * 1e6, "o-")
    right.axhline(slope * 1e6, color="k", linestyle="--", label="slope")
    right.set_ylim(0.0, 2.0 * slope * 1e6)
    right.set_xlabel("IMU samples replayed")
    right.set_ylabel("cost per IMU sample (us)")
    right.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def warm_up(bag: Path, out: Path, report: Path, before_env: dict[str, str] | None) -> None:
    """One untimed whole command with ``--report`` in each environment the figures use:
    it fills the bytecode cache (``installed_bytecode``) with every module they import."""
    environments: list[dict[str, str] | None] = [None, os.environ | {"MAV_KERNELS": "reference"}]
    if before_env is not None:
        environments.append(before_env)
    for env in environments:
        command_seconds(replay_command(bag, out, "--report", str(report)), env)


def _alternating_medians(commands: list[tuple[list[str], dict[str, str] | None]],
                         repeats: int) -> list[float]:
    """Median wall time of each command, run in turn ``repeats`` times (load hits all)."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeats):
        for index, (arguments, env) in enumerate(commands):
            times[index].append(command_seconds(arguments, env))
    return [statistics.median(t) for t in times]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, nargs="+", default=DEFAULT_LOGS,
                        help="logs trident-import reads (default: the PX4 SITL EKF-GSF CSV, "
                             "ArduPilot log171.bin, the px4_real folder)")
    parser.add_argument("--scaling-log", type=Path, default=DEFAULT_SCALING_LOG,
                        help=f"log of the scaling curve (default {DEFAULT_SCALING_LOG})")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh interpreters per whole-command figure (median) and "
                             "in-process repeats per scaling point (best); default 3")
    parser.add_argument("--before-tree", type=Path,
                        help="a source tree (DIR/src/<package>) to run the whole command "
                             "with as well, e.g. the previous commit's")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where replay.json, replay.md, replay.png go (default "
                             f"{DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    for log in [*args.logs, args.scaling_log]:
        if not log.exists():
            parser.error(f"no such log: {log}")
    load_before = os.getloadavg()[0]
    results: list[Result] = []
    lines: list[str] = []
    per_log: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as directory, installed_bytecode():
        before_env = tree_environment(args.before_tree) if args.before_tree else None
        workdir = Path(directory)
        out, report = workdir / "out", workdir / "report"
        warm_up(import_log(args.logs[0], workdir), out, report, before_env)
        help_s, floor_s = _alternating_medians(
            [([sys.executable, "-c", ENTRY, "--help"], None),
             ([sys.executable, "-c", "pass"], None)], args.repeats)
        for index, log in enumerate(args.logs, start=1):
            bag = import_log(log, workdir)
            summary = replay_in_process(bag, out)
            duration, samples = summary["log_duration_s"], summary["imu_messages"]
            commands: list[tuple[list[str], dict[str, str] | None]] = [
                (replay_command(bag, out), None),
                (replay_command(bag, out, "--filter", "baseline"), None),
                (replay_command(bag, out, "--report", str(report)), None),
                (replay_command(bag, out), os.environ | {"MAV_KERNELS": "reference"})]
            if before_env is not None:
                commands.append((replay_command(bag, out), before_env))
            walls = _alternating_medians(commands, args.repeats)
            in_process = best_of(args.repeats, lambda b=bag: replay_in_process(b, out))
            phases = breakdown(bag, out, report)
            per_log.append({"log": log.name, "duration_s": duration, "imu_samples": samples,
                            "wall_s": walls[0], "baseline_wall_s": walls[1],
                            "report_wall_s": walls[2],
                            "reference_kernels_wall_s": walls[3],
                            "before_wall_s": walls[4] if before_env is not None else None,
                            "in_process_s": in_process, "phases_s": phases})
            results.append(Result(f"trident-replay {log.name} (vs --filter baseline)", samples,
                                  walls[0], walls[1]))
            if before_env is not None:
                results.append(Result(f"trident-replay {log.name} (vs before: "
                                      f"{args.before_tree})", samples, walls[0], walls[4]))
            print(f"[{index}/{len(args.logs)}] {log.name}: {duration:.1f} s log, "
                  f"{walls[0]:.2f} s wall ({duration / walls[0]:.0f}x real time)")
        scaling_bag = import_log(args.scaling_log, workdir)
        scaling_summary = replay_in_process(scaling_bag, out)
        rows = scaling(scaling_bag, out, scaling_summary["log_duration_s"], args.repeats)
    fit = linear_fit(rows)
    _, markdown = write_report(results, "trident-replay: whole command on real logs",
                               "the other run", args.output_dir, "replay",
                               statistic=f"median wall time of {args.repeats} fresh "
                                         "interpreters")
    plot = args.output_dir / "replay.png"
    plot_scaling(rows, fit, f"trident-replay cost against log length "
                            f"({args.scaling_log.name})", plot)
    lines += ["", f"Start-up: `trident-replay --help` {help_s:.3f} s wall, `python -c pass` "
                  f"{floor_s:.3f} s (medians).", "",
              "| log | log length | IMU samples | wall (trident) | real-time factor | "
              "per IMU sample | --filter baseline | with --report | kernels off | before |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in per_log:
        before = row["before_wall_s"]
        before_text = ("-" if before is None else
                       f"{before:.2f} s ({row['duration_s'] / before:.0f}x)")
        lines.append(
            f"| {row['log']} | {row['duration_s']:.1f} s | {row['imu_samples']} | "
            f"{row['wall_s']:.2f} s | {row['duration_s'] / row['wall_s']:.0f}x | "
            f"{row['wall_s'] / row['imu_samples'] * 1e6:.0f} us | "
            f"{row['baseline_wall_s']:.2f} s ({row['duration_s'] / row['baseline_wall_s']:.0f}x)"
            f" | {row['report_wall_s']:.2f} s | {row['reference_kernels_wall_s']:.2f} s | "
            f"{before_text} |")
    lines += ["", "Ceilings (issue 16's target is >= "
                  f"{REPLAY_TARGET:g}x), with start-up = `--help`'s {help_s:.3f} s and the "
                  "phases of the breakdown below: *free estimator*, log length / (start-up + "
                  "read + decode + write), the most a compiled estimator could give with the "
                  "input and output as they are; *start-up and reading only*, log length / "
                  "(start-up + read), with decoding and writing free as well.", "",
              "| log | read | decode + write | free estimator | start-up and reading only "
              "| measured |", "|---|---:|---:|---:|---:|---:|"]
    for row in per_log:
        phases = row["phases_s"]
        read_s = phases.get("read", 0.0)
        io_s = phases.get("decode", 0.0) + phases.get("write", 0.0)
        lines.append(f"| {row['log']} | {read_s:.3f} s | {io_s:.3f} s | "
                     f"{row['duration_s'] / (help_s + read_s + io_s):.0f}x | "
                     f"{row['duration_s'] / (help_s + read_s):.0f}x | "
                     f"{row['duration_s'] / row['wall_s']:.0f}x |")
    names = ["start-up", "read", "decode", "estimator", "write", "report"]
    lines += ["", "Where the time goes (s; one in-process replay with --report, phases "
                  "exclusive; start-up = whole command without --report less the in-process "
                  "replay, best of repeats):", "",
              "| log | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for row in per_log:
        seconds = row["phases_s"] | {"start-up": row["wall_s"] - row["in_process_s"]}
        lines.append(f"| {row['log']} | "
                     + " | ".join(f"{seconds.get(name, 0.0):.3f}" for name in names) + " |")
    intercept, slope, relative, linear = fit
    lines += ["", f"Scaling on {args.scaling_log.name} (in process, best of {args.repeats}): "
                  f"cost = {intercept:.3f} s + {slope * 1e6:.1f} us x IMU samples; "
                  f"{'linear' if linear else 'NOT linear'} (every run past the first within "
                  f"{LINEARITY_TOLERANCE:.0%} of the slope per sample). Plot: {plot.name}.", "",
              "| fraction | log length | IMU samples | time | per sample (less the intercept) "
              "| against the slope |", "|---:|---:|---:|---:|---:|---:|"]
    for row, rel in zip(rows, relative, strict=True):
        lines.append(f"| {row['fraction']:.0%} | {row['log_s']:.1f} s | {row['imu_samples']} | "
                     f"{row['seconds']:.3f} s | "
                     f"{(row['seconds'] - intercept) / row['imu_samples'] * 1e6:.1f} us | "
                     f"{rel:+.1%} |")
    lines += ["", f"Load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} "
                  f"after, on {os.cpu_count()} CPUs."]
    with (args.output_dir / "replay.json").open("r+") as file:
        data = json.load(file)
        data |= {"logs": per_log, "scaling": {"log": args.scaling_log.name, "rows": rows,
                                              "intercept_s": intercept, "slope_s": slope,
                                              "relative": relative, "linear": linear},
                 "help_s": help_s, "python_floor_s": floor_s}
        file.seek(0)
        json.dump(data, file, indent=2)
        file.truncate()
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
