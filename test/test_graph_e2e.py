"""End to end: the simulator, the controller/allocator and the trident EKF in a closed loop.

- One process (the ``mav-sim`` runner, ``mav_bringup.graph.runner.run``): the controller
  flies the figure-eight on the estimate; tracking and estimate consistency come from the
  recorded bag through the runner's own series/metrics; the bag and the report are checked.
- Separate processes over real DDS: ``simulator_node``, ``controller_node`` and
  ``estimator_node`` each in its own process (as launch/sim.launch.py runs them, with the
  runner's parameters), in lock-step on /clock; a probe node in this process reads the
  ground truth, the reference, the estimate and /diagnostics.
- A GNSS outage scheduled in the middle of a flight (one process, recorded) and the recovery
  after it.
- Bad input published by a test node into the live graph: every node keeps running and the
  rejections show up in the /diagnostics counters.

Every wait is bounded and driven by a condition; nothing here asserts on speed (the real-time
factors are printed and measured in bench/bench_graph.py).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Reader

from mav_bringup.graph.components import default_graph_file, load_graph
from mav_bringup.graph.metrics import estimate_errors, tracking_error
from mav_bringup.graph.recorder import TYPESTORE
from mav_bringup.graph.report import summarize
from mav_bringup.graph.runner import SIMULATOR, RunOptions, RunResult, run
from mav_bringup.graph.series import (
    ESTIMATE,
    REFERENCE,
    TRUTH,
    OdometrySeries,
    RunSeries,
    read_run,
)
from mav_geometry.arrays import FloatArray
from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC as DIAGNOSTICS
from mav_ros_common.resources import find_named_file
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

if TYPE_CHECKING:  # conftest is not importable at run time under --import-mode=importlib
    from conftest import PeerProcess

pytestmark = pytest.mark.timeout(240)

ONE_PROCESS_DURATION_S = 30.0
DDS_DURATION_S = 20.0
IMU_RATE_HZ = 200.0
GNSS_RATE_HZ = 10.0
AIDING_RATE_HZ = 50.0
"""Barometer and magnetometer rate of config/simulator.yaml."""
CONTROL_RATE_HZ = 100.0
LOCKSTEP_RATE_HZ = 100.0
"""1 / lockstep_period_s of config/simulator.yaml."""
ESTIMATE_RATE_HZ = 100.0
PHYSICS_RATE_HZ = 1000.0
MAX_TRACKING_RMS_M = 1.0
MIN_INSIDE_THREE_SIGMA = 0.95
ESTIMATOR_START_S = 5.0
"""Sim time the estimator may take to initialise at rest before it publishes, s (generous)."""
TYPICAL_DRAW_SIGMAS = 2.0
"""Largest initial GNSS correlated error of a run, in sigmas of its law (see ``seed``)."""
SEEDS_TRIED = 100
RATE_TOLERANCE = 0.05
"""Relative tolerance on the message count of a topic with a fixed rate."""
ESTIMATOR = "trident_ekf"
CONTROLLER = "controller"
OK, WARN = 0, 1
"""diagnostic_msgs/DiagnosticStatus levels."""

CONTRACT_TOPICS = {
    "/clock": "rosgraph_msgs/msg/Clock",
    "/imu/data": "sensor_msgs/msg/Imu",
    "/gnss/fix": "sensor_msgs/msg/NavSatFix",
    "/gnss/vel": "geometry_msgs/msg/TwistWithCovarianceStamped",
    "/barometer/pressure": "sensor_msgs/msg/FluidPressure",
    "/magnetic_field": "sensor_msgs/msg/MagneticField",
    TRUTH: "nav_msgs/msg/Odometry",
    "/simulator/rotor_speeds": "sensor_msgs/msg/JointState",
    "/simulator/markers": "visualization_msgs/msg/MarkerArray",
    "/actuator_commands": "sensor_msgs/msg/JointState",
    "/controller/wrench": "geometry_msgs/msg/WrenchStamped",
    REFERENCE: "nav_msgs/msg/Odometry",
    ESTIMATE: "nav_msgs/msg/Odometry",
    "/tf": "tf2_msgs/msg/TFMessage",
    "/tf_static": "tf2_msgs/msg/TFMessage",
    DIAGNOSTICS: "diagnostic_msgs/msg/DiagnosticArray",
}
REPORT_FILES = ("report.md", "summary.json", "trajectory.png", "estimate_errors.png",
                "tracking.png", "integrator.png")

# Waits over DDS (wall s): generous for a loaded 2-core machine, every one of them bounded.
STARTUP_TIMEOUT_S = 60.0
FLIGHT_TIMEOUT_S = 150.0
EXIT_TIMEOUT_S = 20.0
DRAIN_S = 0.5


@pytest.fixture(scope="session")
def seed() -> int:
    """Sensor-noise seed of every run here: the first whose GNSS Gauss-Markov position error
    starts within ``TYPICAL_DRAW_SIGMAS`` of its law on every axis.

    That error has a 60 s correlation time, so over a 20-30 s run it is one draw acting as a
    bias. The inside-3-sigma criterion counts samples, which only tests the estimator when
    the run is not one outlying draw: seed 0 starts 3.5 sigma off vertically, and then any
    consistent estimator sits outside its 3-sigma bound for most of the run. The choice uses
    the simulator core alone (the same seeding as the node), never a run's outcome.
    """
    for candidate in range(SEEDS_TRIED):
        simulator = VehicleSimulator(SimulatorConfig(
            vehicle_file=str(find_named_file("quadrotor_x", "vehicles")), seed=candidate))
        config = simulator.config
        for _ in range(round(config.physics_rate_hz / config.gnss.rate_hz)):  # to the 1st fix
            simulator.step()
        sigma = np.array([config.gnss.correlated_horizontal_sigma_m] * 2
                         + [config.gnss.correlated_vertical_sigma_m])
        if np.all(np.abs(simulator.gnss.correlated_error_enu) <= TYPICAL_DRAW_SIGMAS * sigma):
            return candidate
    raise AssertionError(f"no seed below {SEEDS_TRIED} draws a typical GNSS error: check the "
                         "simulator's Gauss-Markov model")


def expected_count(rate_hz: float, span_s: float) -> tuple[float, float]:
    """(low, high) message count of a ``rate_hz`` stream over ``span_s`` of sim time."""
    nominal = rate_hz * span_s
    return (1.0 - RATE_TOLERANCE) * nominal - 1.0, (1.0 + RATE_TOLERANCE) * nominal + 1.0


# ----------------------------------------------------------------------------- one process


@pytest.fixture(scope="module")
def one_process_run(ros_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory,
                    seed: int) -> RunResult:
    """One closed-loop run of the default graph (quadrotor, figure-eight, on the estimate).

    Not overlapped with the GNSS-outage run: two graphs on two cores starve the estimator's
    best-effort IMU stream at times, and the outage test's 3-sigma fractions then fail."""
    output = tmp_path_factory.mktemp("one_process") / "run"
    result = run(RunOptions(duration_s=ONE_PROCESS_DURATION_S, output_dir=output,
                            seed=seed, progress=False))
    figures = {k: result.summary.get(k) for k in ("tracking_rms_m", "inside_three_sigma")}
    print(f"\none process, seed {seed}: {result.sim_time_s:.1f} s simulated in "
          f"{result.wall_time_s:.1f} s, {result.real_time_factor:.2f}x real time; "
          f"{json.dumps(figures)}")
    return result


def test_one_process_run_simulates_the_whole_duration(one_process_run: RunResult) -> None:
    assert one_process_run.sim_time_s == pytest.approx(ONE_PROCESS_DURATION_S, abs=0.011)


def test_one_process_vehicle_tracks_the_reference(one_process_run: RunResult) -> None:
    tracking_rms = one_process_run.summary["tracking_rms_m"]
    assert tracking_rms is not None, "no ground truth / reference in the bag"
    assert tracking_rms < MAX_TRACKING_RMS_M, one_process_run.summary


def test_one_process_estimate_is_inside_its_three_sigma_bounds(
        one_process_run: RunResult) -> None:
    summary = one_process_run.summary
    # Estimate and truth matched sample by sample: most of the flight, not a handful.
    low, _ = expected_count(ESTIMATE_RATE_HZ, ONE_PROCESS_DURATION_S - ESTIMATOR_START_S)
    assert summary["estimate_samples"] >= low, summary
    fractions = summary["inside_three_sigma"]
    assert set(fractions) == {f"{q}_{a}" for q in ("position", "velocity", "attitude")
                              for a in "xyz"}
    outside = {axis: f for axis, f in fractions.items() if not f >= MIN_INSIDE_THREE_SIGMA}
    assert not outside, f"inside 3 sigma below {MIN_INSIDE_THREE_SIGMA}: {outside}"


def test_one_process_bag_holds_every_contract_topic(one_process_run: RunResult) -> None:
    assert one_process_run.bag is not None
    with Reader(one_process_run.bag) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        counts = {c.topic: c.msgcount for c in reader.connections}
        statuses = {status.name for _, status in _diagnostic_statuses(reader)}
    assert {t: types.get(t) for t in CONTRACT_TOPICS} == CONTRACT_TOPICS
    # What the recorder counted is what the bag holds.
    assert counts == one_process_run.topic_counts
    span = ONE_PROCESS_DURATION_S
    fixed_rates = {"/imu/data": IMU_RATE_HZ, "/gnss/fix": GNSS_RATE_HZ,
                   "/gnss/vel": GNSS_RATE_HZ, "/actuator_commands": CONTROL_RATE_HZ,
                   "/barometer/pressure": AIDING_RATE_HZ, "/magnetic_field": AIDING_RATE_HZ}
    for topic, rate in fixed_rates.items():
        low, high = expected_count(rate, span)
        assert low <= counts[topic] <= high, f"{topic}: {counts[topic]} not in [{low}, {high}]"
    # /clock ticks at least at every lock-step boundary (sim-time timers need no more), at
    # most at every IMU sample too.
    low, _ = expected_count(LOCKSTEP_RATE_HZ, span)
    _, high = expected_count(IMU_RATE_HZ + LOCKSTEP_RATE_HZ, span)
    assert low <= counts["/clock"] <= high, counts["/clock"]
    low, high = expected_count(ESTIMATE_RATE_HZ, span)
    assert low - ESTIMATOR_START_S * ESTIMATE_RATE_HZ <= counts[ESTIMATE] <= high, counts
    # Topics without a rate in the contract: at least 1 Hz, at most the physics rate.
    for topic in (TRUTH, REFERENCE, "/simulator/rotor_speeds", "/simulator/markers",
                  "/controller/wrench", "/tf", DIAGNOSTICS):
        assert span <= counts[topic] <= PHYSICS_RATE_HZ * span, f"{topic}: {counts[topic]}"
    assert counts["/tf_static"] >= 1
    assert {SIMULATOR, CONTROLLER, ESTIMATOR} <= statuses


def test_one_process_report_is_written(one_process_run: RunResult) -> None:
    report_dir = one_process_run.report_dir
    assert report_dir is not None
    missing = [name for name in REPORT_FILES
               if not (report_dir / name).is_file() or (report_dir / name).stat().st_size == 0]
    assert not missing, f"report files missing or empty: {missing}"
    written = json.loads((report_dir / "summary.json").read_text())
    assert written["tracking_rms_m"] == one_process_run.summary["tracking_rms_m"]
    assert "tracking" in (report_dir / "report.md").read_text()


# ------------------------------------------------------------------------- bag helpers


def _stamp_s(header: Any) -> float:
    """A std_msgs/Header stamp in s (rclpy and rosbags messages alike)."""
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


@dataclass(frozen=True)
class Status:
    """One diagnostic_msgs/DiagnosticStatus as plain values."""

    name: str
    level: int
    values: dict[str, str]

    def number(self, key: str) -> float:
        return float(self.values[key])


def _status(message: Any) -> Status:
    level = message.level
    # rclpy gives the byte field as bytes, rosbags as int.
    return Status(message.name, level if isinstance(level, int) else ord(level),
                  {pair.key: pair.value for pair in message.values})


def _diagnostic_statuses(reader: Reader) -> Iterator[tuple[float, Status]]:
    """(stamp s, status) of every /diagnostics status in a bag (text values included, which
    the runner's series leaves out)."""
    connections = [c for c in reader.connections if c.topic == DIAGNOSTICS]
    for connection, _, raw in reader.messages(connections=connections):
        array = TYPESTORE.deserialize_cdr(raw, connection.msgtype)
        for status in array.status:
            yield _stamp_s(array.header), _status(status)


# ------------------------------------------------------------------- separate processes


@dataclass
class Recording:
    """What the test process received from the live graph (rclpy messages, arrival order)."""

    odometry: dict[str, list[Any]] = field(
        default_factory=lambda: {TRUTH: [], REFERENCE: [], ESTIMATE: []})
    diagnostics: list[tuple[float, Status]] = field(default_factory=list)
    sim_time_s: float = 0.0

    def series(self) -> RunSeries:
        """The recording as the runner's RunSeries, for its metrics and summary."""
        odometry = {topic: OdometrySeries.from_messages(messages)
                    for topic, messages in self.odometry.items()}
        return RunSeries(truth=odometry[TRUTH], estimate=odometry[ESTIMATE],
                         reference=odometry[REFERENCE], fix_time=np.zeros(0),
                         fix_enu=np.zeros((0, 3)), fix_valid=np.zeros(0, dtype=bool))

    def statuses(self, name: str) -> list[tuple[float, Status]]:
        return [(t, s) for t, s in self.diagnostics if s.name == name]


EXECUTABLES = {SIMULATOR: "simulator_node", CONTROLLER: "controller_node",
               ESTIMATOR: "estimator_node"}
"""The console scripts of the three nodes (what launch/sim.launch.py starts)."""


class DdsGraph:
    """The closed loop over DDS, one process per node as ``ros2 launch`` runs it, and a probe
    node in this process (recording what the graph publishes, injecting bad input).

    The nodes run their own executables (``main()``); they get the runner's parameters
    (``RunOptions.node_parameters``) on top of their parameter files, so this flies the same
    loop as ``mav-sim``, only split over processes. The controller and the estimator are not
    hosted here: on one executor with the probe they would share its process's one core.
    """

    def __init__(self, spawn_peer: Callable[[str, list[str]], PeerProcess],
                 options: RunOptions) -> None:
        import rclpy
        from rclpy.experimental import EventsExecutor

        self.recording = Recording()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, args=[])
        self.probe: Any = None
        self.processes: dict[str, PeerProcess] = {}
        try:
            self.probe = self._create_probe()
            # The probe has subscriptions only: no timer for EventsExecutor to misfire.
            self.executor = EventsExecutor(context=self.context)
            self.executor.add_node(self.probe)
            components = {c.name: c for c in load_graph(options.graph or default_graph_file())}
            parameters = options.node_parameters()
            for name in (CONTROLLER, ESTIMATOR, SIMULATOR):
                if name == SIMULATOR:
                    # Started once the others listen, so its first lock-step boundaries
                    # do not wait for a controller still importing.
                    self.spin_until(self._controller_and_estimator_listen, STARTUP_TIMEOUT_S,
                                    "controller and estimator subscribed")
                values = {"use_sim_time": name != SIMULATOR, **parameters.get(name, {})}
                executable = Path(sys.executable).with_name(EXECUTABLES[name])
                self.processes[name] = spawn_peer(
                    name, [str(executable), *components[name].ros_arguments(values)])
        except BaseException:
            self.close()
            raise

    def _create_probe(self) -> Any:
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        probe = Node("e2e_probe", context=self.context)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        for topic, messages in self.recording.odometry.items():
            probe.create_subscription(Odometry, topic, messages.append, reliable)
        probe.create_subscription(DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, reliable)
        probe.create_subscription(Clock, "/clock", self._on_clock, reliable)
        return probe

    def _controller_and_estimator_listen(self) -> bool:
        return (self.probe.count_subscribers("/clock") >= 3  # controller, estimator, probe
                and self.probe.count_subscribers("/imu/data") >= 1
                and self.probe.count_publishers("/actuator_commands") >= 1)

    def _on_diagnostics(self, array: Any) -> None:
        stamp = _stamp_s(array.header)
        self.recording.diagnostics.extend((stamp, _status(s)) for s in array.status)

    def _on_clock(self, message: Any) -> None:
        self.recording.sim_time_s = message.clock.sec + 1e-9 * message.clock.nanosec

    @property
    def simulator(self) -> PeerProcess:
        return self.processes[SIMULATOR]

    @property
    def sim_time_s(self) -> float:
        return self.recording.sim_time_s

    def _check_alive(self, what: str, finished: Callable[[], bool]) -> None:
        """Fail if a node process exited, unless the simulator did and ``finished()``."""
        for name, process in self.processes.items():
            code = process.proc.poll()
            if code is None:
                continue
            if name == SIMULATOR:
                self.drain()
                if finished():
                    return
            process.fail(f"exited (code {code}) before {what}")

    def spin_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Spin until ``condition()``; fail (with the stderr of the node concerned) at the
        timeout or if a node process exits first."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                logs = "".join(f"\n--- {name} stderr:\n{process.stderr_text()}"
                               for name, process in self.processes.items())
                pytest.fail(f"{what}: not within {timeout_s} s (sim time "
                            f"{self.sim_time_s:.2f} s){logs}")
            self._check_alive(what, condition)
            self.executor.spin_once(timeout_sec=0.01)

    def spin_until_sim_time(self, sim_time_s: float) -> None:
        self.spin_until(lambda: self.sim_time_s >= sim_time_s, FLIGHT_TIMEOUT_S,
                        f"sim time {sim_time_s} s")

    def drain(self) -> None:
        """Spin a moment longer so messages still in flight arrive."""
        until = time.monotonic() + DRAIN_S
        while time.monotonic() < until:
            self.executor.spin_once(timeout_sec=0.01)

    def finish(self) -> int:
        """Keep the loop going until the simulator finishes; return its exit code."""
        self.spin_until(lambda: self.simulator.proc.poll() is not None, FLIGHT_TIMEOUT_S,
                        "the simulator finished")
        return self.simulator.wait(EXIT_TIMEOUT_S)

    def close(self) -> None:
        """Destroy the probe and shut its context down (spawn_peer ends the processes)."""
        import rclpy

        if self.probe is not None:
            self.probe.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def dds_graph(ros_env: dict[str, str],
              spawn_peer: Callable[[str, list[str]], PeerProcess]
              ) -> Iterator[Callable[[RunOptions], DdsGraph]]:
    """Factory of DdsGraph runs, closed after the test (their node processes by spawn_peer)."""
    graphs: list[DdsGraph] = []

    def start(options: RunOptions) -> DdsGraph:
        graph = DdsGraph(spawn_peer, options)
        graphs.append(graph)
        return graph

    try:
        yield start
    finally:
        for graph in graphs:
            graph.close()


PACED_RATE = 1.0
"""Sim seconds per wall second of the separate-process runs. Paced rather than as fast as
the lock-step allows, so that a run outlasts DDS discovery of the late-starting simulator
(Fast DDS falls back to its 3 s announcement period when its first announcements are
missed) and no node starts or ends while the others are still being discovered. Real time,
as ``ros2 launch`` runs it: the estimator's process must keep up with its best-effort sensor
streams, and with the barometer and magnetometer fused it fell behind at 2x and 3x on a
2-core machine (dropped IMU samples, a diverged estimate)."""


def test_separate_processes_close_the_loop_over_dds(
        dds_graph: Callable[[RunOptions], DdsGraph], seed: int) -> None:
    graph = dds_graph(RunOptions(duration_s=DDS_DURATION_S, seed=seed,
                                 overrides={SIMULATOR: {"real_time_factor": PACED_RATE}}))
    exit_code = graph.finish()

    recording = graph.recording
    assert exit_code == 0, graph.simulator.stderr_text()
    assert recording.sim_time_s == pytest.approx(DDS_DURATION_S, abs=0.011)
    series = recording.series()
    summary = summarize(series, {})
    print(f"\nseparate processes: tracking RMS {summary['tracking_rms_m']} m, inside 3 sigma "
          f"{summary['inside_three_sigma']}")
    # Took off: the truth climbed to the reference's flight height.
    received = {topic: len(messages) for topic, messages in recording.odometry.items()}
    assert len(series.truth), received
    assert len(series.reference), received
    assert series.truth.position[:, 2].max() > 0.5 * series.reference.position[:, 2].max() > 0.0
    assert summary["tracking_rms_m"] < MAX_TRACKING_RMS_M, summary
    # The simulator held t = 0 until the estimator and the controller were connected, so the
    # loop ran on the estimate, which was there for the whole flight.
    assert "starting without" not in graph.simulator.stderr_path.read_text(errors="replace")
    low, _ = expected_count(ESTIMATE_RATE_HZ, DDS_DURATION_S - ESTIMATOR_START_S)
    assert len(series.estimate) >= low


# ------------------------------------------------------------------------ GNSS outage

OUTAGE_S = (12.0, 18.0)
"""Scheduled GNSS outage (start, end), s of sim time: mid figure-eight, well after take-off."""
RECOVERY_S = 3.0
"""Sim time after the outage given to the estimate and the tracking to recover, s."""
OUTAGE_REPORT_DELAY_S = 2.5
"""Time into the outage by which the estimator reports it (its outage timeout is 2 s), s."""
FILTER_STATUS_KEY = "status"
OUTAGE_STATUS = ("outage", WARN)
NOMINAL_STATUS = ("nominal", OK)


def _simulator_datum() -> tuple[float, float, float]:
    """The map origin of the simulator's parameter file: latitude, longitude (deg), height (m)."""
    simulator = next(c for c in load_graph(default_graph_file()) if c.name == SIMULATOR)
    values = yaml.safe_load(simulator.parameters.read_text())[SIMULATOR]["ros__parameters"]
    latitude, longitude, height = (float(v) for v in values["datum"])
    return latitude, longitude, height


@dataclass(frozen=True)
class OutageRun:
    series: RunSeries
    statuses: list[tuple[float, Status]]


@dataclass(frozen=True)
class OutageChild:
    """The GNSS-outage run in flight in its child process, and where it records."""

    process: PeerProcess
    output: Path


@pytest.fixture(scope="module")
def outage_child(run_in_child: Callable[..., PeerProcess],
                 tmp_path_factory: pytest.TempPathFactory, seed: int) -> OutageChild:
    """One recorded closed-loop run with the GNSS outage scheduled in the simulator, started
    in a child process on a ROS domain of its own (``run_in_child``)."""
    output = tmp_path_factory.mktemp("gnss_outage") / "run"
    process = run_in_child("gnss_outage", output, duration_s=ONE_PROCESS_DURATION_S,
                           report=False, seed=seed,
                           overrides={SIMULATOR: {"gnss_outages": OUTAGE_S}})
    return OutageChild(process, output)


@pytest.fixture(scope="module")
def outage_run(outage_child: OutageChild) -> OutageRun:
    """The GNSS-outage run once it finished: its recorded series and diagnostic statuses."""
    exit_code = outage_child.process.wait(FLIGHT_TIMEOUT_S)
    assert exit_code == 0, outage_child.process.stderr_text()
    bag = outage_child.output / "bag"
    with Reader(bag) as reader:
        statuses = list(_diagnostic_statuses(reader))
    return OutageRun(read_run(bag, _simulator_datum()), statuses)


def _window(series: OdometrySeries, start_s: float, end_s: float) -> OdometrySeries:
    """The samples of ``series`` stamped in [start_s, end_s)."""
    inside = (series.time >= start_s) & (series.time < end_s)
    return OdometrySeries(*(getattr(series, f.name)[inside] for f in fields(series)))


def _horizontal_sigma(series: OdometrySeries) -> FloatArray:
    """Horizontal position sigma of each sample, m (root of the east + north variances)."""
    return np.sqrt(series.pose_variance[:, 0] + series.pose_variance[:, 1])


def test_gnss_outage_sends_no_fix_during_it_only(outage_run: OutageRun) -> None:
    series = outage_run.series
    start, end = OUTAGE_S
    during = (series.fix_time >= start) & (series.fix_time < end)
    assert during.sum() >= (end - start) * GNSS_RATE_HZ - 1
    assert not series.fix_valid[during].any()
    assert series.fix_valid[~during].all()


def test_estimator_reports_the_gnss_outage(outage_run: OutageRun) -> None:
    start, end = OUTAGE_S
    reports = [(t, (s.values.get(FILTER_STATUS_KEY), s.level)) for t, s in outage_run.statuses
               if s.name == ESTIMATOR]
    before = [report for t, report in reports if ESTIMATOR_START_S < t < start]
    during = [report for t, report in reports if start + OUTAGE_REPORT_DELAY_S <= t < end]
    after = [report for t, report in reports if end + RECOVERY_S <= t]
    assert before, reports
    assert during, reports
    assert after, reports
    assert set(before) == {NOMINAL_STATUS}, reports
    assert set(during) == {OUTAGE_STATUS}, reports
    assert set(after) == {NOMINAL_STATUS}, reports


def test_position_sigma_grows_during_the_gnss_outage(outage_run: OutageRun) -> None:
    start, end = OUTAGE_S
    estimate = outage_run.series.estimate
    sigma = _horizontal_sigma(_window(estimate, start, end))
    assert len(sigma) >= 0.9 * (end - start) * ESTIMATE_RATE_HZ
    before = _horizontal_sigma(_window(estimate, start - 1.0, start))
    # Without fixes nothing bounds the position error any more: its sigma ends the outage
    # above anything it reached while fixes came in.
    assert sigma[-1] > 2.0 * before.max(), (before.max(), sigma[0], sigma[-1])
    assert np.all(np.diff(sigma) >= 0.0), "the position sigma shrank without fixes"


def test_estimate_and_tracking_recover_after_the_gnss_outage(outage_run: OutageRun) -> None:
    series = outage_run.series
    recovered = OUTAGE_S[1] + RECOVERY_S
    errors = estimate_errors(_window(series.estimate, recovered, math.inf), series.truth)
    assert len(errors.time) >= 0.9 * (ONE_PROCESS_DURATION_S - recovered) * ESTIMATE_RATE_HZ
    fractions = errors.inside_three_sigma()
    outside = {axis: f for axis, f in fractions.items() if not f >= MIN_INSIDE_THREE_SIGMA}
    assert not outside, f"inside 3 sigma below {MIN_INSIDE_THREE_SIGMA} after the outage: {outside}"
    _, tracking = tracking_error(_window(series.truth, recovered, math.inf), series.reference)
    assert len(tracking)
    assert np.sqrt(np.mean(np.sum(tracking**2, axis=1))) < MAX_TRACKING_RMS_M
    # Kept flying: never touched the ground again after take-off.
    simulator = series.diagnostics[SIMULATOR]
    assert simulator["touchdowns"][1].max() == 0
    airborne = series.truth.position[series.truth.time >= OUTAGE_S[0], 2]
    assert airborne.min() > 0.5 * series.reference.position[:, 2].max()


# -------------------------------------------------------------------------- bad input

BAD_INPUT_DURATION_S = 15.0
INJECT_AFTER_S = 9.0
"""Sim time of the injection: airborne, estimator running, figure-eight under way."""
KEEPS_RUNNING_S = 3.0
"""Sim time after the injection within which every node must still publish, s."""
BAD_INPUT_RATE = 0.5
"""Sim seconds per wall second here: half of PACED_RATE. The estimator keeps the newest 5
messages per input (``input_queue_depth``), so where its process lags the simulator by 25 ms
(5 IMU samples) the oldest are lost, the injected ones with them, before they are counted.
At real time that happened on a loaded 2-core host (1 run in 5, every run with two busy-loop
processes beside the graph); at half rate not even with three."""
SLOWEST_DIAGNOSTICS_HZ = 1.0
"""The simulator's /diagnostics rate (config/simulator.yaml), the slowest of the three."""
QUADROTOR_ROTORS = [f"rotor_{i}" for i in range(4)]
BAD_COMMANDS = (  # (stamp after the controller's command in ms, joint names, rotor speeds)
    (1, QUADROTOR_ROTORS[:3], [500.0] * 3),                 # a rotor missing
    (2, QUADROTOR_ROTORS, [500.0] * 3),                     # fewer speeds than names
    (3, QUADROTOR_ROTORS, [500.0, math.nan, 500.0, 500.0]),  # NaN speed
    (4, [*QUADROTOR_ROTORS, "rotor_4"], [500.0] * 5),        # a fifth rotor on a quadrotor
)
COMMAND_REJECTION_PREFIX = "rejected_commands_"
# Expected counter increments on /diagnostics, by status name and key, for one of each.
EXPECTED_REJECTIONS = {
    SIMULATOR: {"rejected_commands_missing_rotor": 1, "rejected_commands_wrong_length": 1,
                "rejected_commands_non_finite": 1, "rejected_commands_unknown_joint": 1},
    ESTIMATOR: {"imu_nonfinite": 1, "imu_out_of_order": 1, "fix_no_fix": 1,
                "fix_bad_covariance": 1},
}


def _time_message(nanoseconds: int) -> Any:
    from builtin_interfaces.msg import Time

    return Time(sec=nanoseconds // 10**9, nanosec=nanoseconds % 10**9)


class BadInput:
    """Publishes one of each kind of bad message into the live graph, right after the next
    controller command: stamped just after it and before the controller's next command (10 ms
    later), which it must not disturb. The simulator counts a malformed command for its
    content even when it arrives after that next command (a loaded machine)."""

    def __init__(self, node: Any) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import Imu, JointState, NavSatFix

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.imu = node.create_publisher(Imu, "/imu/data", qos_profile_sensor_data)
        self.fix = node.create_publisher(NavSatFix, "/gnss/fix", qos_profile_sensor_data)
        self.commands = node.create_publisher(JointState, "/actuator_commands", reliable)
        node.create_subscription(JointState, "/actuator_commands", self._on_command, reliable)
        self.datum = _simulator_datum()
        self.armed = False
        self.sent_at_s: float | None = None

    def matched(self) -> bool:
        """Estimator on the sensor topics; simulator (and this node) on the commands."""
        return (self.imu.get_subscription_count() >= 1 and self.fix.get_subscription_count() >= 1
                and self.commands.get_subscription_count() >= 2)

    def _on_command(self, message: Any) -> None:
        if not self.armed:
            return
        self.armed = False
        stamp_ns = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
        self._publish_all(stamp_ns)
        self.sent_at_s = stamp_ns * 1e-9

    def _publish_all(self, command_ns: int) -> None:
        from sensor_msgs.msg import Imu, JointState, NavSatFix, NavSatStatus

        millisecond = 10**6
        for offset, names, speeds in BAD_COMMANDS:
            command = JointState(name=names, velocity=speeds)
            command.header.stamp = _time_message(command_ns + offset * millisecond)
            self.commands.publish(command)
        for offset, gyro_x in ((2, math.nan),      # NaN, stamped in order
                               (-500, 0.0)):       # finite, stamped back in time
            imu = Imu()
            imu.header.stamp = _time_message(command_ns + offset * millisecond)
            imu.header.frame_id = "imu_link"
            imu.angular_velocity.x = gyro_x
            imu.linear_acceleration.z = 9.81
            self.imu.publish(imu)
        latitude, longitude, height = self.datum
        # Off the 10 Hz grid of the real fixes, newer than any published (50 ms latency).
        for offset, status, variance in ((-13, NavSatStatus.STATUS_NO_FIX, 0.25),
                                         (-27, NavSatStatus.STATUS_FIX, math.nan)):
            fix = NavSatFix(latitude=latitude, longitude=longitude, altitude=height + 1.5,
                            position_covariance=[variance, 0.0, 0.0, 0.0, variance, 0.0,
                                                 0.0, 0.0, variance],
                            position_covariance_type=NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN)
            fix.status.status = status
            fix.header.stamp = _time_message(command_ns + offset * millisecond)
            fix.header.frame_id = "gnss_link"
            self.fix.publish(fix)


def _status_at(recording: Recording, name: str, before_s: float) -> Status:
    """The last status ``name`` stamped before ``before_s``."""
    statuses = [s for t, s in recording.statuses(name) if t < before_s]
    assert statuses, f"no /diagnostics status {name!r} before {before_s} s"
    return statuses[-1]


def test_bad_input_is_counted_and_every_node_keeps_running(
        dds_graph: Callable[[RunOptions], DdsGraph], seed: int) -> None:
    graph = dds_graph(RunOptions(duration_s=BAD_INPUT_DURATION_S, seed=seed, overrides={
        SIMULATOR: {"real_time_factor": BAD_INPUT_RATE}}))
    bad_input = BadInput(graph.probe)
    graph.spin_until(bad_input.matched, STARTUP_TIMEOUT_S, "bad-input publishers matched")
    graph.spin_until_sim_time(INJECT_AFTER_S)
    bad_input.armed = True
    graph.spin_until(lambda: bad_input.sent_at_s is not None, STARTUP_TIMEOUT_S,
                     "a controller command to inject after")
    injected = bad_input.sent_at_s
    assert injected is not None
    graph.spin_until_sim_time(injected + KEEPS_RUNNING_S)
    simulator_alive = graph.simulator.proc.poll() is None
    exit_code = graph.finish()

    recording = graph.recording
    assert simulator_alive
    assert exit_code == 0, graph.simulator.stderr_text()
    # Every node still published, and sensibly, well after the bad input.
    later = injected + KEEPS_RUNNING_S - 1.0
    for topic, messages in recording.odometry.items():
        assert any(_stamp_s(m.header) >= later for m in messages), f"{topic} stopped"
    series = recording.series()
    estimate = _window(series.estimate, injected, math.inf)
    assert np.isfinite(estimate.position).all()
    assert np.isfinite(estimate.pose_variance).all()
    truth_after = _window(series.truth, injected, math.inf)
    assert truth_after.position[:, 2].min() > 0.5, "the vehicle came down after the bad input"
    # The slowest /diagnostics stream (the simulator's, 1 Hz) has one status in any 1 s
    # window, but the last one may still be in flight when the graph stops: two periods.
    diagnostics_since = injected + KEEPS_RUNNING_S - 2.0 / SLOWEST_DIAGNOSTICS_HZ
    for name in (SIMULATOR, CONTROLLER, ESTIMATOR):
        assert any(t >= diagnostics_since for t, _ in recording.statuses(name)), (
            f"{name}: no diagnostics")
    # Each bad message was counted once, for its own reason.
    for name, expected in EXPECTED_REJECTIONS.items():
        before = _status_at(recording, name, injected)
        after = _status_at(recording, name, math.inf)
        increments = {key: after.number(key) - before.number(key) for key in expected}
        assert increments == expected, f"{name}: {after.values}"
    # Every bad command was rejected, whatever the reason (none may reach the motors). The
    # stamp reasons are left out: the injected commands are stamped just after the
    # controller's latest as the probe saw it, and when that controller command reaches the
    # simulator after them (another process, another path), it is older than they are and
    # is counted as stamp_backwards: a race of the injection, not a bad command.
    before = _status_at(recording, SIMULATOR, injected)
    after = _status_at(recording, SIMULATOR, math.inf)
    stamp_reasons = {f"{COMMAND_REJECTION_PREFIX}{reason}"
                     for reason in ("stamp_backwards", "duplicate_stamp")}
    rejected = sum(after.number(key) - before.number(key) for key in after.values
                   if key.startswith(COMMAND_REJECTION_PREFIX) and key not in stamp_reasons)
    assert rejected == len(BAD_COMMANDS), f"{rejected} of {len(BAD_COMMANDS)}: {after.values}"
