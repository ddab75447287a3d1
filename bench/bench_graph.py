"""Real-time factor of the simulation node graph (issue 7), against the simulator core alone.

Usage: python bench/bench_graph.py [--duration S] [--repeats K] [--output-dir DIR]

Four ways of simulating the same vehicle (quadrotor_x.yaml) at 1 kHz physics with a
200 Hz IMU and 10 Hz GNSS, each for ``--duration`` s of sim time, in this run:

- one process: ``mav-sim``'s runner (simulator, controller, estimator and the MCAP
  recorder on one executor, lock-step, figure-eight on the estimate); wall time of its
  lock-step loop (``RunResult.wall_time_s``); and the same without recording
  (``mav-sim --no-record``);
- separate processes: ``simulator_node`` in its own process feeding the estimator over DDS,
  the controller and the estimator in this (second) process on one EventsExecutor; wall time
  of the simulator's progress as seen on /clock, from 1 s of sim time (after discovery) on;
- one process per node: the same with ``controller_node`` and ``estimator_node`` in their own
  processes, as ``launch/sim.launch.py`` runs them (each on its ``main``'s executor), with
  the CPU time of each of those processes per sim second (from /proc, Linux);
- baseline: ``VehicleSimulator`` alone without ROS, stepped with a constant command just
  above hover (so the vehicle lifts off and flies, as in the graph).

Each figure is the best of ``--repeats`` runs. The ratio (graph over core) is the cost of the
ROS graph around the core; the real-time factors are sim time over wall time. Issue targets:
>= 5x for the one-process graph, >= 2x for the simulator process (issue 7); the recorded
one-process graph >= 15x on the machine of issue 16 (about 3x faster than the 2-core one the
project's figures come from). bench/bench_graph_breakdown.py splits the one-process time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import Result, append_and_show, best_time, write_report

from mav_bringup.graph.components import default_graph_file, load_graph
from mav_bringup.graph.runner import SIMULATOR, RunOptions, run
from mav_ros_common.resources import find_named_file
from variational_sim.sensors.gnss import GnssConfig
from variational_sim.sensors.imu import ImuConfig
from variational_sim.vehicle_sim.plant import STANDARD_GRAVITY
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
PHYSICS_RATE_HZ, IMU_RATE_HZ, GNSS_RATE_HZ = 1000.0, 200.0, 10.0
RATES = {"physics_rate_hz": PHYSICS_RATE_HZ, "imu_rate_hz": IMU_RATE_HZ,
         "gnss_rate_hz": GNSS_RATE_HZ}
"""Simulator parameters of both graph cases; the core baseline uses the same rates."""
VEHICLE = "quadrotor_x.yaml"
HOVER_MARGIN = 1.01
"""Thrust over weight of the baseline's constant command: lifts off, then climbs gently."""
WARM_UP_SIM_S = 1.0
"""Sim time excluded from the separate-process timing (discovery, first lock-step waits)."""
UNRECORDED = "one process, no recording"
SEPARATE = "separate processes (simulator process)"
LAUNCH_LIKE = "one process per node (simulator process)"
TARGETS = {"one process": 5.0, SEPARATE: 2.0, LAUNCH_LIKE: 2.0}
CONTROLLER, ESTIMATOR = "controller", "trident_ekf"
EXECUTABLES = {SIMULATOR: "simulator_node", CONTROLLER: "controller_node",
               ESTIMATOR: "estimator_node"}
MIN_SPAN_FRACTION = 0.25
"""Least part of the run after the warm-up that the /clock span must cover."""
MAX_DOMAIN_ID = 232
PROCESS_TIMEOUT_S = 600.0


def core_baseline(duration_s: float) -> float:
    """Step the core alone for ``duration_s`` (IMU and GNSS sampled); returns its sim time."""
    simulator = VehicleSimulator(SimulatorConfig(
        vehicle_file=str(find_named_file(VEHICLE, "vehicles")), physics_rate_hz=PHYSICS_RATE_HZ,
        imu=ImuConfig(rate_hz=IMU_RATE_HZ), gnss=GnssConfig(rate_hz=GNSS_RATE_HZ)))
    vehicle = simulator.vehicle
    thrust_per_rotor = HOVER_MARGIN * vehicle.total_mass * STANDARD_GRAVITY / len(vehicle.rotors)
    simulator.set_command([math.sqrt(thrust_per_rotor / rotor.thrust_coefficient)
                           for rotor in vehicle.rotors])
    steps = round(duration_s * PHYSICS_RATE_HZ)
    for _ in range(steps):
        simulator.step()
    if simulator.truth.landed:
        raise AssertionError("baseline: the vehicle did not lift off under the hover command")
    return simulator.time_s


def one_process(duration_s: float, output_dir: Path, record: bool = True
                ) -> tuple[float, float]:
    """(sim time, wall time of the lock-step loop) of one ``mav-sim`` run (recorded or not)."""
    result = run(RunOptions(duration_s=duration_s, vehicle=VEHICLE, output_dir=output_dir,
                            overwrite=True, record=record, report=False, progress=False,
                            overrides={SIMULATOR: RATES}))
    imu_samples = result.topic_counts.get("/imu/data", 0)
    if record and imu_samples < 0.95 * IMU_RATE_HZ * duration_s:
        raise AssertionError(f"one process: only {imu_samples} IMU samples were recorded")
    return result.sim_time_s, result.wall_time_s


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a running process, s (from Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def separate_processes(duration_s: float, log_dir: Path, feeders_in_bench: bool,
                       cpu_per_sim_s: dict[str, list[float]] | None = None
                       ) -> tuple[float, float]:
    """(sim time span, wall time span) of the simulator process's /clock from
    ``WARM_UP_SIM_S`` on. The controller and the estimator are hosted in this process on one
    EventsExecutor (``feeders_in_bench``) or run their own executables (one process each);
    then the CPU time each of their processes spent per sim second over the span is appended
    to ``cpu_per_sim_s[name]`` (less sensitive to the machine's other load than the span's
    wall time)."""
    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    options = RunOptions(duration_s=duration_s, vehicle=VEHICLE, overrides={SIMULATOR: RATES})
    parameters = options.node_parameters()
    components = {c.name: c for c in load_graph(options.graph or default_graph_file())}
    # (sim s, wall s) of the first /clock at or after the warm-up, then of the latest one.
    marks: list[tuple[float, float]] = []
    processes: dict[str, subprocess.Popen[bytes]] = {}
    cpu_at_first_mark: dict[str, float] = {}

    def on_clock(message: Clock) -> None:
        sim = message.clock.sec + 1e-9 * message.clock.nanosec
        if sim >= WARM_UP_SIM_S:
            point = (sim, time.perf_counter())
            if not marks:
                marks.append(point)
                cpu_at_first_mark.update({name: _cpu_seconds(process.pid)
                                          for name, process in processes.items()
                                          if name != SIMULATOR})
            marks[1:] = [point]

    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    nodes: list[Node] = []
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    try:
        clock_node = Node("bench_clock", context=context)
        nodes.append(clock_node)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        clock_node.create_subscription(Clock, "/clock", on_clock, reliable)
        for name in (CONTROLLER, ESTIMATOR, SIMULATOR):
            values = {"use_sim_time": name != SIMULATOR, **parameters.get(name, {})}
            arguments = components[name].ros_arguments(values)
            if feeders_in_bench and name != SIMULATOR:
                nodes.append(components[name].load_class()(context=context, cli_args=arguments))
                continue
            executable = Path(sys.executable).with_name(EXECUTABLES[name])
            with (log_dir / f"{name}.stderr").open("wb") as stderr:
                processes[name] = subprocess.Popen([str(executable), *arguments],
                                                   stdout=subprocess.DEVNULL, stderr=stderr)
        executor = EventsExecutor(context=context)
        for node in nodes:
            executor.add_node(node)
        simulator = processes[SIMULATOR]
        while simulator.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)
        if simulator.poll() != 0:
            raise RuntimeError(f"simulator process failed or timed out (code {simulator.poll()})"
                               f"; see {log_dir / 'simulator.stderr'}")
        cpu_used = {name: _cpu_seconds(processes[name].pid) - start
                    for name, start in cpu_at_first_mark.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
            process.wait(timeout=10.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    # Discovery between four participants can take a few seconds: the span starts at the
    # first /clock seen, but must cover a good part of the run and reach its end.
    if not marks:
        raise AssertionError("separate processes: no /clock seen after the warm-up")
    (first_sim, first_wall), (last_sim, last_wall) = marks[0], marks[-1]
    too_short = last_sim - first_sim < MIN_SPAN_FRACTION * (duration_s - WARM_UP_SIM_S)
    if too_short or last_sim < duration_s - 0.5:
        raise AssertionError(f"separate processes: /clock seen only over {marks} (sim s, wall s)")
    if cpu_per_sim_s is not None:
        for name, seconds in cpu_used.items():
            cpu_per_sim_s.setdefault(name, []).append(seconds / (last_sim - first_sim))
    return last_sim - first_sim, last_wall - first_wall


def _isolated_dds() -> None:
    """A random ROS domain on loopback only, so the benchmark talks to nothing else."""
    os.environ.update({
        "ROS_DOMAIN_ID": str(random.SystemRandom().randint(1, MAX_DOMAIN_ID)),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
    })
    os.environ.pop("ROS_STATIC_PEERS", None)


def _best_wall_per_sim_second(measure: Callable[[], tuple[float, float]], repeats: int) -> float:
    """Least wall time per sim second over ``repeats`` runs of ``measure() -> (sim, wall)``."""
    best = math.inf
    for _ in range(repeats):
        sim, wall = measure()
        best = min(best, wall / sim)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0,
                        help="sim time per run, s (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (default 3)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.duration <= 2.0 * WARM_UP_SIM_S or args.repeats < 1:
        parser.error(f"--duration must exceed {2.0 * WARM_UP_SIM_S} s and --repeats be >= 1")
    _isolated_dds()
    duration = args.duration
    steps = round(duration * PHYSICS_RATE_HZ)
    core_s = best_time(lambda: core_baseline(duration), args.repeats)
    print(f"core alone: {duration / core_s:.2f}x real time")
    with tempfile.TemporaryDirectory() as workdir:
        walls = {"one process": duration * _best_wall_per_sim_second(
            lambda: one_process(duration, Path(workdir) / "one_process"), args.repeats)}
        print(f"one process: {duration / walls['one process']:.2f}x real time")
        walls[UNRECORDED] = duration * _best_wall_per_sim_second(
            lambda: one_process(duration, Path(workdir) / "unrecorded", record=False),
            args.repeats)
        print(f"{UNRECORDED}: {duration / walls[UNRECORDED]:.2f}x real time")
        node_cpu: dict[str, list[float]] = {}
        for name, feeders_in_bench in ((SEPARATE, True), (LAUNCH_LIKE, False)):
            walls[name] = duration * _best_wall_per_sim_second(
                lambda f=feeders_in_bench: separate_processes(duration, Path(workdir), f,
                                                              node_cpu),
                args.repeats)
            print(f"{name}: {duration / walls[name]:.2f}x real time")
    results = [Result(f"{name}, {duration:g} s sim", steps, wall, core_s)
               for name, wall in walls.items()]
    json_path, markdown = write_report(
        results, "Node graph real-time factor vs the simulator core", "core alone",
        args.output_dir, "graph")
    factors = {"core alone (baseline)": duration / core_s,
               **{name: duration / wall for name, wall in walls.items()}}
    report = json.loads(json_path.read_text())
    report["real_time_factors"] = factors
    report["targets"] = TARGETS
    cpu = {name: min(values) for name, values in node_cpu.items()}
    report["node_cpu_s_per_sim_s"] = cpu
    json_path.write_text(json.dumps(report, indent=2))
    lines = ["", f"n = physics steps ({PHYSICS_RATE_HZ:g} Hz, IMU {IMU_RATE_HZ:g} Hz, GNSS "
             f"{GNSS_RATE_HZ:g} Hz, {VEHICLE}).", "",
             "| case | real-time factor | issue target |", "|---|---:|---:|"]
    lines += [f"| {name} | {factor:.2f}x | "
              f"{f'>= {TARGETS[name]:g}x' if name in TARGETS else '-'} |"
              for name, factor in factors.items()]
    lines += ["", f"CPU time of each node process per sim second in '{LAUNCH_LIKE}' (least "
              "of the runs, after the warm-up; its reciprocal is how fast that process alone "
              "could go):", "", "| process | CPU s per sim s |", "|---|---:|"]
    lines += [f"| {EXECUTABLES[name]} | {seconds:.3f} |" for name, seconds in cpu.items()]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
