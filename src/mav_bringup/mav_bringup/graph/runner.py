"""``mav-sim``: the simulation node graph in one process, recorded to MCAP, with a report.

The nodes of ``config/graph.yaml`` (simulator, controller/allocator, estimator) are created
in one process with their usual parameter files and spun by one executor ("manual
composition"). The simulator runs in lock-step: it advances to each control boundary and
waits for the controller's command for that instant, so the closed loop is the same on a
slow or a fast machine. Every topic goes to a rosbag2 MCAP bag that ``ros2 bag play`` and
Foxglove open; the report (plots, summary) is made from that bag.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mav_bringup.graph.isolation import LOCK_NAME, OutputLock, run_domain_id
from mav_bringup.graph.shortcuts import shortcut_parameters
from mav_ros_common.exit_codes import EXIT_INTERRUPTED, EXIT_TERMINATED

# Start-up time: ``mav-sim --help`` imports this module and argparse only. rclpy, numpy, the
# graph file and scenario readers, and the nodes load when a run starts (``run``); the
# recorder and the report only when they are asked for.
if TYPE_CHECKING:
    import rclpy
    from rclpy.executors import Executor
    from rclpy.node import Node

    from mav_bringup.graph.components import Component
    from mav_bringup.graph.recorder import BagRecorder
    from mav_ros_common.plot_workers import PlotWorkers

SIMULATOR = "simulator"
DRAIN_S = 0.3
"""Wall time given to in-flight messages after the last step, s."""

PROGRESS_EVERY_S = 5.0
"""Simulated time between progress lines, s."""
# A run stopped by SIGINT (Ctrl-C) or SIGTERM (docker stop, systemd, CI) exits
# EXIT_INTERRUPTED or EXIT_TERMINATED (mav_ros_common.exit_codes); the bag is closed and the
# report written for the simulated part.


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping the run like Ctrl-C."""


_STOP_REQUESTS: list[int] = []
"""Signals received by ``mav-sim`` (its handler only notes them: an exception raised inside
rclpy's C++ executor would surface as an unrelated RuntimeError). The lock-step loop stops
between two passes when it sees one."""


def _request_stop(signal_number: int, _frame: Any) -> None:
    _STOP_REQUESTS.append(signal_number)
    signal.signal(signal_number, signal.SIG_DFL)  # a second one ends the process at once


def _check_stop_requests() -> None:
    """Raise ``Terminated`` (SIGTERM) or ``KeyboardInterrupt`` (SIGINT) once one arrived."""
    if _STOP_REQUESTS:
        raise Terminated if _STOP_REQUESTS[0] == signal.SIGTERM else KeyboardInterrupt


@dataclass
class RunOptions:
    """What to run; ``overrides`` maps node name -> parameter -> value (after the files)."""

    duration_s: float = 60.0
    vehicle: str = "quadrotor_x.yaml"
    vehicles: tuple[str, ...] = ()
    """Several vehicles (files) in namespaces uav1, uav2...; empty: ``vehicle`` alone."""
    vehicle_spacing_m: float = 3.0
    trajectory: str = "figure_eight"
    odometry_source: str = "estimate"
    seed: int = 0
    scenario: str | None = None
    """Scenario, a name in config/scenarios/ or a path; None: the simulator's parameter file's."""
    output_dir: Path = Path("results/demo")
    overwrite: bool = False
    record: bool = True
    report: bool = True
    graph: Path | None = None
    """Graph file; None: ``config/graph.yaml`` of the installed bringup."""
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    progress: bool = True

    def node_parameters(self) -> dict[str, dict[str, Any]]:
        """Per-node overrides: the options' shortcuts, then ``overrides``."""
        parameters = shortcut_parameters(
            vehicle=self.vehicle, trajectory=self.trajectory,
            odometry_source=self.odometry_source, seed=self.seed, duration_s=self.duration_s,
            scenario=self.scenario)
        parameters[SIMULATOR].update({"lockstep": True, "real_time_factor": 0.0})
        if self.vehicles:
            parameters[SIMULATOR].update({"vehicles": ",".join(self.vehicles),
                                          "vehicle_spacing_m": float(self.vehicle_spacing_m)})
        for node, values in self.overrides.items():
            parameters.setdefault(node, {}).update(values)
        return parameters


@dataclass
class RunResult:
    """What a run produced: timing, the bag and report paths, and the report's summary."""

    sim_time_s: float
    wall_time_s: float
    bag: Path | None
    report_dir: Path | None
    summary: dict[str, Any]
    topic_counts: dict[str, int]
    exit_code: int = 0
    """0, or ``EXIT_INTERRUPTED`` / ``EXIT_TERMINATED`` when a signal cut the run short."""

    @property
    def real_time_factor(self) -> float:
        return self.sim_time_s / self.wall_time_s if self.wall_time_s > 0 else float("inf")


def run(options: RunOptions) -> RunResult:
    """Run the graph to ``options.duration_s`` of sim time; record and report as asked."""
    if not options.duration_s > 0.0:
        raise ValueError(f"duration must be > 0 s, got {options.duration_s!r}")
    from mav_bringup.graph.components import default_graph_file, load_graph
    from mav_ros_common.resources import find_named_file
    from variational_sim.vehicle_sim.scenario import load_scenario

    graph_file = options.graph if options.graph is not None else default_graph_file()
    components = load_graph(graph_file)
    if SIMULATOR not in {c.name for c in components}:
        raise ValueError(f"graph file {graph_file} has no '{SIMULATOR}' node")
    if options.scenario is not None:
        # A typo fails here, before the output directory is cleared and ROS starts (the
        # simulator node checks it again: ScenarioError is a ValueError, a missing file an
        # OSError).
        load_scenario(find_named_file(options.scenario, "scenarios"))
    names = [c.name for c in components]
    strangers = sorted(set(options.overrides) - set(names))
    if strangers:
        raise ValueError(f"--set names no node of the graph: {strangers}; the graph's nodes "
                         f"are {names}")
    with OutputLock(options.output_dir), contextlib.ExitStack() as cleanup:
        workers = None
        if options.record and options.report:
            # Imported only for a report (rosbags): start-up time of --no-record. The
            # figures' processes load matplotlib on another core while the graph runs; forked
            # before rclpy is loaded and starts its threads (``plot_workers``).
            from mav_bringup.graph.report import report_workers

            workers = cleanup.enter_context(report_workers())
        return _run_locked(options, components, workers)


def _run_locked(options: RunOptions, components: list[Component],
                workers: PlotWorkers | None) -> RunResult:
    """``run`` once the output directory is this run's (the report's figures drawn by
    ``workers`` when given)."""
    import rclpy
    from rclpy.experimental.events_executor import EventsExecutor
    from rclpy.node import Node

    from mav_bringup.discovery import localhost_by_default
    from mav_bringup.graph import fleet
    from mav_bringup.graph.events import scenario_facts
    from mav_ros_common.parameters import ParameterError

    bag = options.output_dir / "bag" if options.record else None
    _prepare_output(options.output_dir, options.overwrite)
    parameters = options.node_parameters()
    domain, picked = run_domain_id()
    if picked and options.progress:
        print(f"[mav-sim] ROS domain {domain}, picked for this run (set ROS_DOMAIN_ID to "
              "choose it, e.g. to watch the run live)", file=sys.stderr)
    context = rclpy.Context()
    # rcl reads the discovery range at init: this machine only unless the user chose one.
    with localhost_by_default():
        rclpy.init(context=context, args=[], domain_id=domain)
    nodes: dict[str, Node] = {}
    recorder: BagRecorder | None = None
    try:
        for component in components:
            try:
                nodes.update(_create_nodes(component, options, parameters, context))
            except ParameterError as error:
                raise ParameterError(f"node '{component.name}': {error}", error.name) from None
        executor = EventsExecutor(context=context)
        if bag is not None:
            # Imported only when recording (rosbags' type store): start-up time of --no-record.
            from mav_bringup.graph.recorder import BagRecorder, topic_specs

            simulator: Any = nodes[SIMULATOR]
            recorder_node = Node("recorder", context=context, start_parameter_services=False)
            recorder = BagRecorder(recorder_node, bag,
                                   lambda: round(simulator.sim_time * 1e9))
            recorder.record(topic_specs(nodes.values()))
            executor.add_node(recorder_node)
        for node in nodes.values():
            executor.add_node(node)
        sim_time, wall_time, exit_code = _lockstep_loop(nodes[SIMULATOR], executor, options)
        counts = dict(recorder.counts) if recorder else {}
        latitude, longitude, height = nodes[SIMULATOR].get_parameter("datum").value
        datum = (float(latitude), float(longitude), float(height))
        simulator_node: Any = nodes[SIMULATOR]
        config = simulator_node.simulator.config  # what the simulator really ran with
        scenario = scenario_facts(config.scenario)
        earth_field = (tuple(config.magnetometer.earth_field_ned_T)
                       if config.magnetometer is not None else None)
        imu_mount = tuple(config.imu.mount_rotation_xyzw)
    finally:
        if recorder is not None:
            recorder.close()
        for node in nodes.values():
            node.destroy_node()
        rclpy.shutdown(context=context)
    run_facts = {"vehicle": ",".join(options.vehicles) or options.vehicle,
                 "trajectory": options.trajectory,
                 "odometry_source": options.odometry_source, "seed": options.seed,
                 **scenario,
                 "sim_time_s": sim_time, "wall_time_s": wall_time,
                 "real_time_factor": sim_time / wall_time if wall_time > 0 else None}
    summary: dict[str, Any] = dict(run_facts)
    report_dir = None
    if bag is not None and options.report:
        from mav_bringup.graph.report import write_bag_report
        from mav_bringup.graph.series import SensorSite

        report_dir = options.output_dir / "report"
        site = SensorSite(datum, earth_field, imu_mount)
        if not options.vehicles:
            summary = write_bag_report(bag, report_dir, run_facts, site, workers=workers)
        else:
            summary = fleet.write_fleet_summary(report_dir, run_facts, {
                fleet.namespace(k): write_bag_report(
                    bag, report_dir / fleet.namespace(k), {**run_facts, "vehicle": vehicle_file},
                    site, fleet.namespace(k), workers)
                for k, vehicle_file in enumerate(options.vehicles)})
    return RunResult(sim_time, wall_time, bag, report_dir, summary, counts, exit_code)


def _create_nodes(component: Component, options: RunOptions,
                  parameters: dict[str, dict[str, Any]], context: rclpy.Context
                  ) -> dict[str, Node]:
    """The component's node, or with several vehicles one per vehicle (keyed
    ``uav<k>/<name>``) in its namespace, with its own parameter file copy."""
    from mav_bringup.graph import fleet

    values = {"use_sim_time": component.name != SIMULATOR,
              **parameters.get(component.name, {})}
    node_class = component.load_class()
    if component.name == SIMULATOR or not options.vehicles:
        return {component.name: node_class(context=context,
                                           cli_args=component.ros_arguments(values))}
    nodes = {}
    for k, vehicle_file in enumerate(options.vehicles):
        name_space = fleet.namespace(k)
        copy = replace(component, parameters=fleet.namespaced_parameter_file(
            component, name_space, options.output_dir / "parameters"))
        arguments = copy.ros_arguments({**values, **fleet.vehicle_parameters(
            component, k, vehicle_file, options.vehicle_spacing_m)})
        nodes[f"{name_space}/{component.name}"] = node_class(
            context=context, cli_args=[*arguments, "-r", f"__ns:=/{name_space}"])
    return nodes


def _prepare_output(directory: Path, overwrite: bool) -> None:
    if directory.exists() and any(p.name != LOCK_NAME for p in directory.iterdir()):
        if not overwrite:
            raise FileExistsError(f"output directory {directory} is not empty; pass "
                                  "--overwrite or choose another --output-dir")
        for name in ("bag", "report", "parameters"):
            target = directory / name
            if target.is_dir():
                shutil.rmtree(target)
    directory.mkdir(parents=True, exist_ok=True)


def _lockstep_loop(simulator: Any, executor: Executor,
                   options: RunOptions) -> tuple[float, float, int]:
    """Drive the simulator's lock-step to the end with progress lines; (sim s, wall s, exit
    code: 0, or that of the signal that cut it short)."""
    # Loaded already with the graph's nodes; not at the top, so that --help does not load the
    # simulator stack (start-up time).
    from variational_sim.ros.simulator_node import drive

    start = time.perf_counter()
    next_progress = [PROGRESS_EVERY_S]

    def progress(sim_time: float) -> None:
        _check_stop_requests()
        if options.progress and sim_time >= next_progress[0]:
            next_progress[0] += PROGRESS_EVERY_S
            print(f"[mav-sim] {sim_time:6.1f} / {options.duration_s:.1f} s sim, "
                  f"{sim_time / (time.perf_counter() - start):5.2f}x real time", file=sys.stderr)

    exit_code = 0
    try:
        drive(simulator, executor, progress)
    except KeyboardInterrupt as stop:
        exit_code = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
        print(f"[mav-sim] {'terminated' if exit_code == EXIT_TERMINATED else 'interrupted'}: "
              "closing the bag and writing the report for the simulated part", file=sys.stderr)
    wall = time.perf_counter() - start
    drain_until = time.perf_counter() + DRAIN_S
    while time.perf_counter() < drain_until:
        executor.spin_once(timeout_sec=0.01)
    return float(simulator.sim_time), wall, exit_code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="mav-sim",
        description="Run the simulator, the controller/allocator and the trident EKF in one "
                    "process (lock-step, sim time), record every topic to an MCAP bag and write "
                    "a report with plots. Parameters come from config/*.yaml as with "
                    "ros2 launch (launch/sim.launch.py runs the same graph as separate "
                    "processes). DDS discovery stays on this machine "
                    "(ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) unless that variable is set.")
    defaults = RunOptions()
    parser.add_argument("--duration", type=float, default=defaults.duration_s,
                        help="simulated time to run, s (default %(default)s)")
    parser.add_argument("--vehicle", default=defaults.vehicle,
                        help="vehicle file, a name in config/vehicles/ or a path "
                             "(default %(default)s)")
    parser.add_argument("--vehicles", type=_vehicle_list, default=defaults.vehicles,
                        metavar="FILE,FILE,...",
                        help="fly several vehicles in one simulator, e.g. "
                             "quadrotor_x,hexarotor: namespaces uav1, uav2..., one controller "
                             "and estimator each, one report per vehicle (replaces --vehicle)")
    parser.add_argument("--vehicle-spacing", type=float, default=defaults.vehicle_spacing_m,
                        help="with --vehicles, east spacing of the start positions, m "
                             "(default %(default)s)")
    parser.add_argument("--trajectory", default=defaults.trajectory,
                        choices=("figure_eight", "hover", "waypoints"),
                        help="reference the controller tracks (default %(default)s)")
    parser.add_argument("--odometry-source", default=defaults.odometry_source,
                        choices=("estimate", "ground_truth"),
                        help="what the controller flies on (default %(default)s)")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="sensor-noise seed (default %(default)s)")
    parser.add_argument("--scenario", default=defaults.scenario, metavar="NAME_OR_PATH",
                        help="wind and timed faults: a name in config/scenarios/ (calm, ...) or "
                             "a scenario file (default: the simulator parameter file's "
                             "'scenario')")
    parser.add_argument("--output-dir", type=Path, default=defaults.output_dir,
                        help="where bag/ and report/ go (default %(default)s)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace bag/ and report/ in a non-empty output directory")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record a bag (and so no report)")
    parser.add_argument("--graph", type=Path, default=defaults.graph,
                        help="graph file (default: config/graph.yaml of the installed "
                             "mav_bringup)")
    parser.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one parameter, e.g. --set simulator.gnss_rate_hz=5.0 "
                             "(YAML value: write 5.0 for a real-valued parameter; repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser.parse_args(argv)


def _vehicle_list(text: str) -> tuple[str, ...]:
    files = tuple(entry.strip() for entry in text.split(","))
    if not all(files):
        raise argparse.ArgumentTypeError(f"expected comma-separated vehicle files, got {text!r}")
    return files


def _overrides(assignments: list[str]) -> dict[str, dict[str, Any]]:
    import yaml

    result: dict[str, dict[str, Any]] = {}
    for assignment in assignments:
        target, separator, text = assignment.partition("=")
        node, dot, name = target.partition(".")
        if not (separator and dot and node and name):
            raise ValueError(f"--set expects NODE.PARAM=VALUE, got {assignment!r}")
        result.setdefault(node, {})[name] = yaml.safe_load(text)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    previous = {stop: signal.signal(stop, _request_stop)
                for stop in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run_and_print(args)
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        _STOP_REQUESTS.clear()


def _run_and_print(args: argparse.Namespace) -> int:
    try:
        options = RunOptions(
            duration_s=args.duration, vehicle=args.vehicle, vehicles=args.vehicles,
            vehicle_spacing_m=args.vehicle_spacing, trajectory=args.trajectory,
            odometry_source=args.odometry_source, seed=args.seed, scenario=args.scenario,
            output_dir=args.output_dir,
            overwrite=args.overwrite, record=not args.no_record, report=not args.no_record,
            graph=args.graph, overrides=_overrides(args.set), progress=not args.quiet)
        result = run(options)
    except (ValueError, OSError, ImportError) as error:
        print(f"mav-sim: {error}", file=sys.stderr)
        return 2
    print(f"mav-sim: {result.sim_time_s:.1f} s simulated in {result.wall_time_s:.1f} s "
          f"({result.real_time_factor:.2f}x real time)")
    if result.bag is not None:
        print(f"mav-sim: bag {result.bag} ({sum(result.topic_counts.values())} messages on "
              f"{len(result.topic_counts)} topics)")
    if result.report_dir is not None and "vehicles" in result.summary:
        print(f"mav-sim: report {result.report_dir / 'report.md'}")
        for name, facts in result.summary["vehicles"].items():
            print(f"mav-sim: {name} ({facts.get('vehicle')}): tracking RMS "
                  f"{facts.get('tracking_rms_m')} m; inside 3 sigma "
                  f"{facts.get('inside_three_sigma')}")
    elif result.report_dir is not None:
        summary = result.summary
        print(f"mav-sim: report {result.report_dir / 'report.md'}; scenario "
              f"{summary.get('scenario')}; tracking RMS "
              f"{summary.get('tracking_rms_m')} m; inside 3 sigma "
              f"{summary.get('inside_three_sigma')}")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
