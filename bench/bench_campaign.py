"""Campaign throughput: runs per minute of ``mav-campaign`` on Ray with 1, 2, 4 and all
CPUs, against the same runs as separate ``mav-sim --no-record`` processes one after another.

Usage: python bench/bench_campaign.py [--campaign smoke] [--workers 1,2,4]
       [--output-dir DIR]

Each worker count starts its own local Ray cluster of that many CPUs; its start-up is timed
apart and the throughput is the campaign itself (submit to the last row written). The
baseline runs every run of the campaign as its own ``mav-sim`` process (the ROS graph over
DDS, with the command ``mav-campaign``'s report prints to reproduce a run on the graph),
start-up included, as a user without campaigns would. The ratio is the campaign's wall time
per run over the baseline's (below 1: faster); the Markdown adds runs per minute and the
speed-up. Worker counts above the machine's cores oversubscribe it (shown as measured).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_graph import _isolated_dds
from harness import Result, append_and_show, write_report

from mav_bringup.campaign.campaign_file import expand, find_campaign, load_campaign
from mav_bringup.campaign.closed_loop import run_closed_loop_spec
from mav_bringup.campaign.engine import ray_session, run_campaign
from mav_bringup.campaign.progress import Progress
from mav_bringup.campaign.records import base_row
from mav_bringup.campaign.reproduce import mav_sim_command
from mav_bringup.campaign.store import CampaignStore

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"


def campaign_walls(campaign_name: str, workers: int, workdir: Path) -> tuple[float, float, int]:
    """(Ray start-up s, campaign wall time s, runs) with a local cluster of ``workers`` CPUs;
    every run must succeed."""
    campaign = load_campaign(find_campaign(campaign_name))
    runs = expand(campaign)
    store = CampaignStore(workdir / f"campaign_{workers}")
    store.claim(campaign)
    start = time.perf_counter()
    with ray_session(workers, None):
        started = time.perf_counter()
        outcome = run_campaign(runs, store, run_closed_loop_spec, reproduce=lambda _: "",
                               progress=Progress(len(runs), 0, quiet=True))
        finished = time.perf_counter()
    if outcome.failed or outcome.finished != len(runs):
        raise RuntimeError(f"{outcome.failed} of {len(runs)} runs failed with {workers} workers")
    return started - start, finished - started, len(runs)


def mav_sim_wall(campaign_name: str, workdir: Path) -> float:
    """Wall time of the campaign's runs as ``mav-sim --no-record`` processes in sequence."""
    campaign = load_campaign(find_campaign(campaign_name))
    mav_sim = Path(sys.executable).parent / "mav-sim"
    start = time.perf_counter()
    for spec in expand(campaign):
        command = shlex.split(mav_sim_command(base_row(spec, "ok", "", "", 0.0), {},
                                              workdir / "mav_sim"))
        command[0] = str(mav_sim)
        done = subprocess.run([*command, "--no-record", "--quiet", "--overwrite"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mav-sim failed ({done.returncode}): {done.stderr[-500:]}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaign", default="smoke",
                        help="campaign name or file (default smoke: 4 runs of 5 s)")
    parser.add_argument("--workers", default=f"1,2,4,{os.cpu_count() or 1}",
                        help="worker counts, comma-separated (default 1,2,4 and all CPUs)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    counts = sorted({int(count) for count in args.workers.split(",")})
    if counts[0] < 1:
        parser.error("every worker count must be >= 1")
    _isolated_dds()
    measured = {}
    with tempfile.TemporaryDirectory() as workdir:
        baseline_s = mav_sim_wall(args.campaign, Path(workdir))
        for count in counts:
            measured[count] = campaign_walls(args.campaign, count, Path(workdir))
            startup, wall, runs = measured[count]
            print(f"{count} worker(s): Ray start-up {startup:.1f} s, {runs} runs in {wall:.1f} s "
                  f"({60.0 * runs / wall:.1f} runs/min)")
    runs = measured[counts[0]][2]
    print(f"mav-sim one after another: {runs} runs in {baseline_s:.1f} s "
          f"({60.0 * runs / baseline_s:.1f} runs/min)")
    results = [Result(f"{args.campaign}, {count} worker(s)", runs, wall / runs, baseline_s / runs)
               for count, (_, wall, _) in measured.items()]
    _, markdown = write_report(results, "mav-campaign throughput against mav-sim processes",
                               "mav-sim processes", args.output_dir, "campaign",
                               statistic="wall time per run, one measurement")
    lines = ["", f"n = runs of the campaign; mav-sim processes one after another: "
             f"{60.0 * runs / baseline_s:.1f} runs/min. CPUs on this machine: {os.cpu_count()}.",
             "", "| workers | Ray start-up | runs/min | speed-up over mav-sim processes |",
             "|---:|---:|---:|---:|"]
    lines += [f"| {count} | {startup:.1f} s | {60.0 * runs / wall:.1f} | "
              f"{baseline_s / wall:.2f}x |" for count, (startup, wall, _) in measured.items()]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
