"""``mav-campaign``: run every run of a campaign file on Ray, keep each as a row of one
table, and write the campaign's report.

A second invocation with the same campaign file and output directory runs only the runs
that have no row yet (``--retry-failed``: the failed ones too), so an interrupted campaign
resumes where it stopped. ``--only RUN_ID`` runs one run in this process, without Ray:
the command printed for every failed run reproduces it.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.campaign_file import (
    Campaign,
    CampaignError,
    RunSpec,
    expand,
    find_campaign,
    load_campaign,
)
from mav_bringup.campaign.records import RunFunction, execute
from mav_bringup.campaign.reproduce import campaign_command
from mav_ros_common.exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)

PROG = "mav-campaign"
DEFAULT_OUTPUT = Path("results/campaigns")
SHOWN_FAILURES = 10
"""Failed runs whose reproduction command is printed at the end (all are in the table)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run a campaign: every combination of vehicles, scenarios, parameter "
                    "sets and seeds of a campaign file, each a closed-loop run (simulator, "
                    "controller, estimator; no ROS), in parallel on Ray. Each run is a row of "
                    "OUTPUT_DIR/results.parquet (run id, seed, config hash, parameters, "
                    "metrics) with its time series in OUTPUT_DIR/series/; rerunning the same "
                    "command resumes an interrupted campaign. Exit 0 when the campaign "
                    "completed (failed runs are rows too, their reproduction commands "
                    "printed), 2 for a bad campaign file or output directory, 1 when Ray or "
                    "the report fails, 130/143 on Ctrl-C/SIGTERM.")
    parser.add_argument("campaign", metavar="CAMPAIGN",
                        help="campaign file, or a name in config/campaigns/ (smoke, "
                             "consistency, tuning)")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the runs, results.parquet and report/ go (default "
                             "results/campaigns/<campaign name>)")
    parser.add_argument("--workers", type=_positive, default=None, metavar="N",
                        help="CPUs of the local Ray cluster, one run each (default: all of "
                             "this machine's)")
    parser.add_argument("--address", default=None, metavar="HOST:PORT",
                        help="join this Ray cluster (`ray start --head` prints it) instead of "
                             "starting one; its CPUs decide the parallelism")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run the failed runs of an earlier invocation again")
    parser.add_argument("--limit", type=_positive, default=None, metavar="N",
                        help="only the first N runs of the campaign (a quick try)")
    parser.add_argument("--only", default=None, metavar="RUN_ID",
                        help="run this one run in this process, without Ray (its row and "
                             "tables are replaced); a failure prints the whole traceback")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the runs (id, parameter set, vehicle, scenario, seed and "
                             "parameters) and exit")
    parser.add_argument("--no-report", action="store_true",
                        help="do not write OUTPUT_DIR/report/ at the end")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}")
    return value


def _describe(spec: RunSpec) -> str:
    parameters = " ".join(f"{key}={value}" for key, value in spec.parameters)
    return (f"{spec.run_id}  {spec.config_hash}  {spec.vehicle.label}  {spec.scenario.label}  "
            f"{spec.trajectory}  seed {spec.seed}  {parameters}").rstrip()


def _write_report(output_dir: Path) -> int:
    """The campaign report (``report/report.md``); a failure is one line, the runs stay."""
    from mav_bringup.campaign.report import write_campaign_report

    try:
        path = write_campaign_report(output_dir)
    except (ValueError, OSError) as error:
        print(f"{PROG}: error: the report could not be written: {str(error)[:300]}",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"{PROG}: report {path}")
    return EXIT_OK


def _run_only(run_id: str, campaign: Campaign, runs: list[RunSpec], output_dir: Path,
              run_function: RunFunction, reproduce: Callable[[str], str]) -> int:
    from mav_bringup.campaign.store import CampaignStore

    spec = next((run for run in runs if run.run_id == run_id), None)
    if spec is None:
        print(f"{PROG}: error: no run {run_id[:40]!r} in this campaign (--dry-run lists them)",
              file=sys.stderr)
        return EXIT_USAGE
    store = CampaignStore(output_dir)
    store.claim(campaign)
    record = execute(spec, run_function, reproduce(spec.run_id), show_traceback=True)
    store.write(record)
    store.combine(run.run_id for run in runs)
    if not record.ok:
        print(f"{PROG}: run {run_id} failed: {record.row[C.ERROR]}", file=sys.stderr)
        return EXIT_FAILED
    metrics = {key.removeprefix(C.METRIC_PREFIX): value for key, value in record.row.items()
               if key.startswith(C.METRIC_PREFIX)}
    print(f"{PROG}: run {run_id} done in {record.row['wall_time_s']:.1f} s: "
          + ", ".join(f"{name} {value}" for name, value in list(metrics.items())[:12]))
    return EXIT_OK


def _run_all(campaign: Campaign, runs: list[RunSpec], output_dir: Path, args: argparse.Namespace,
             run_function: RunFunction, reproduce: Callable[[str], str]) -> int:
    from mav_bringup.campaign.engine import run_campaign
    from mav_bringup.campaign.progress import Progress
    from mav_bringup.campaign.store import CampaignStore

    store = CampaignStore(output_dir)
    store.claim(campaign)
    finished = store.rows()
    todo = [run for run in runs if run.run_id not in finished or (
        args.retry_failed and finished[run.run_id].get(C.STATUS) != C.STATUS_OK)]
    print(f"{PROG}: {campaign.name}: {len(runs)} runs, {len(runs) - len(todo)} already done, "
          f"{len(todo)} to run; output {output_dir}", file=sys.stderr)
    progress = Progress(len(runs), len(runs) - len(todo), quiet=args.quiet)
    outcome = run_campaign(todo, store, run_function, reproduce=reproduce, progress=progress,
                           workers=args.workers, address=args.address)
    results = store.combine(run.run_id for run in runs)
    rows = store.rows()
    failed = [run.run_id for run in runs
              if run.run_id in rows and rows[run.run_id].get(C.STATUS) != C.STATUS_OK]
    print(f"{PROG}: {outcome.finished} runs finished here ({outcome.failed} failed); "
          f"{sum(run.run_id in rows for run in runs)}/{len(runs)} done, {len(failed)} failed: "
          f"{results}", file=sys.stderr)
    for run_id in failed[:SHOWN_FAILURES]:
        print(f"{PROG}: failed {run_id}: {str(rows[run_id].get(C.ERROR))[:200]}\n"
              f"    reproduce: {reproduce(run_id)}", file=sys.stderr)
    if outcome.stopped_by is not None:
        stopped_by_term = outcome.stopped_by == signal.SIGTERM
        print(f"{PROG}: {'terminated' if stopped_by_term else 'interrupted'}: finished runs "
              "kept; run the same command again to resume", file=sys.stderr)
        return EXIT_TERMINATED if stopped_by_term else EXIT_INTERRUPTED
    return EXIT_OK if args.no_report else _write_report(output_dir)


def main(argv: list[str] | None = None, run_function: RunFunction | None = None) -> int:
    """The command; ``run_function`` replaces the closed loop (tests)."""
    args = parse_args(argv)
    if run_function is None:
        from mav_bringup.campaign.closed_loop import run_closed_loop_spec

        run_function = run_closed_loop_spec
    try:
        source = find_campaign(args.campaign)
        campaign = load_campaign(source)
        runs = expand(campaign)
        output_dir = args.output_dir or DEFAULT_OUTPUT / campaign.name

        def reproduce(run_id: str) -> str:
            return campaign_command(Path(args.campaign), output_dir, run_id)

        if args.only is not None:
            return _run_only(args.only, campaign, runs, output_dir, run_function, reproduce)
        runs = runs[:args.limit]
        if args.dry_run:
            print("run_id        config_hash   vehicle  scenario  trajectory  seed  parameters")
            for spec in runs:
                print(_describe(spec))
            print(f"{PROG}: {len(runs)} runs", file=sys.stderr)
            return EXIT_OK
        return _run_all(campaign, runs, output_dir, args, run_function, reproduce)
    except CampaignError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as error:  # a ROS install without the campaign's pip packages
        print(f"{PROG}: error: campaigns need ray and pyarrow (pip install ray pyarrow): "
              f"{str(error)[:200]}", file=sys.stderr)
        return EXIT_FAILED
    except (ConnectionError, OSError) as error:  # no Ray cluster at --address, disk full...
        print(f"{PROG}: error: {' '.join(str(error).split())[:300]}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:  # before the runs started, or during --only
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
