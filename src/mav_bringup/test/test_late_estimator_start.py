"""End to end over real DDS: the estimator started in flight, 20 s after the simulator.

The simulator and the controller fly the figure-eight (the controller on the ground truth,
as it must without an estimate for the first 20 s), each in its own process, paced on
/clock, as ``test/test_graph_e2e.py`` runs the graph (its ``DdsGraph`` with the probe's
recording, ``PeerProcess`` and the isolated ROS environment are imported, not copied; the
estimate is compared with the truth by the runner's ``metrics``). The estimator node gets the
shipped ``config/estimator.yaml`` with ``initial_yaw_deg`` NaN and the magnetometer off
(simulator and estimator: the path of a vehicle without a compass), so its yaw must come
from the Gaussian-sum yaw estimator, from horizontal accelerations in flight. It is started
late by ``LATE_START``, a stand-in in the estimator's own process:
until ``START_S`` of sim time it only listens (on /clock and /imu/data, as the estimator
does, which is what ``DdsGraph`` waits for before it starts the simulator), then leaves the
graph and runs the estimator's executable with the parameters ``DdsGraph`` gave it.

Checked: the estimator converges (first odometry within ``MAX_FIRST_OUTPUT_S`` of its first
status, the node being up, after an in-motion alignment with the yaw from the yaw
estimator, no reset), then from
``SETTLE_S`` after its first output on the position on each axis and the yaw stay inside
their 3-sigma bounds at least 95 % of the time and the horizontal error stays small. The
figures (time to first output and to yaw within 10 deg, containment per axis, horizontal
error, wall time) are printed (``-s``). Flight: the shortest that leaves some 11 s of settled
estimate (``DURATION_S``), about 60-70 s of wall time on a loaded 2-core machine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from mav_bringup.graph.metrics import EstimateErrors, estimate_errors
from mav_bringup.graph.runner import SIMULATOR, RunOptions
from mav_bringup.graph.series import RunSeries
from mav_ros_common.resources import find_named_file
from mav_ros_common.testing import module_from_file
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

WORKSPACE_TESTS = Path(__file__).resolve().parents[3] / "test"
PACED_RATE = 3.0
"""Sim seconds per wall second: the estimator here fuses no magnetometer (the barometer
only) and keeps up at 3x (test_graph_e2e.PACED_RATE, with both, runs at real time)."""


def _workspace_test_module(name: str) -> ModuleType:
    """A module of the workspace-level tests (``test/<name>.py``), loaded by path: the DDS
    graph helpers live there, and test folders are not packages."""
    return module_from_file(WORKSPACE_TESTS / f"{name}.py", f"workspace_test_{name}")


_peers = _workspace_test_module("conftest")
_e2e = _workspace_test_module("test_graph_e2e")
PeerProcess = _peers.PeerProcess
DdsGraph = _e2e.DdsGraph
ESTIMATOR = _e2e.ESTIMATOR

pytestmark = pytest.mark.timeout(240)

START_S = 20.0
"""Sim time at which the estimator is started, s."""
DURATION_S = 42.0
"""Sim time of the flight, s: the start, about 5.5 s to the first output, the settling time
and some 11 s of flight held to the bounds."""
SETTLE_S = 5.0
"""Time after the first output before the estimate is held to its 3-sigma bounds, s."""
MAX_FIRST_OUTPUT_S = 10.0
"""Longest time from the start to the first output, s: 5 s of IMU for the yaw estimator's
AHRS, then up to 5 s for its yaw to converge in flight."""
MIN_INSIDE_THREE_SIGMA = 0.95
MIN_MATCHED_SHARE = 0.8
"""Share of the nominal 100 Hz estimates after the settling time that must be compared with
the truth. Not all: an output whose IMU sample was lost takes the next IMU stamp, 5 ms off
the truth's 10 ms grid (``metrics.MATCH_TOLERANCE_S``)."""
INPUT_QUEUE_DEPTH = 100
"""The estimator's ``input_queue_depth`` here. The default (5) drops inputs whenever its
process is not scheduled for 25 ms of wall time at this pace, as on a loaded 2-core CI
machine, where a run once received only 82 % of the estimates. Nothing flies on this
estimate (the controller uses the truth), so the test takes the parameter's other side:
late rather than lost."""
MAX_HORIZONTAL_ERROR_M = 0.75
"""Largest horizontal position error after the settling time, m (measured 0.22-0.24 m; the
GNSS white error is 0.5 m per axis, its correlated part 0.1 m)."""
MAX_HORIZONTAL_RMS_M = 0.4
"""Horizontal RMS error after the settling time, m (measured 0.15-0.16 m)."""
YAW_WITHIN_DEG = 10.0
MIN_FLIGHT_SPEED_MPS = 0.5
"""Slowest the vehicle may fly after the start: the start must be in motion."""
AXES = ("position_x", "position_y", "position_z", "attitude_z")
"""The containment checked: position on each axis and yaw (attitude about up)."""

LATE_START = """
import runpy
import sys

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu

import trident_ekf.ros.estimator_node  # imported now, so that it starts without delay

start_s, executable, arguments = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
rclpy.init(args=[])
node = Node("late_start", parameter_overrides=[Parameter("use_sim_time", value=True)])
node.create_subscription(Imu, "/imu/data", lambda message: None, qos_profile_sensor_data)
while node.get_clock().now().nanoseconds < start_s * 1e9:
    rclpy.spin_once(node, timeout_sec=0.01)
started = node.get_clock().now().nanoseconds * 1e-9
node.destroy_node()
rclpy.shutdown()
print(f"{started:.3f}")
print("STARTED", flush=True)
sys.argv = [executable, *arguments]
runpy.run_path(executable, run_name="__main__")
"""
"""Runs in the estimator's process: waits for ``sys.argv[1]`` s of sim time, then runs the
executable ``sys.argv[2]`` with the arguments after it, as if started then."""


@dataclass(frozen=True)
class LateStartRun:
    """What the probe received, the sim time the estimator started at (s) and the wall time
    of the run (s)."""

    series: RunSeries
    statuses: list[tuple[float, Any]]
    started_s: float
    wall_s: float


@pytest.fixture(scope="session")
def seed() -> int:
    """Sensor-noise seed: the first whose GNSS Gauss-Markov position error stays within
    ``TYPICAL_DRAW_SIGMAS`` of its law on every axis at every fix from ``START_S`` to the end.

    The criterion of ``test/test_graph_e2e.py``'s ``seed`` (a typical error at the first
    fix), held over the span the estimator sees: the error (60 s correlation time) acts as
    one bias over it, which the estimator cannot observe, so counting samples inside 3 sigma
    tests the estimator only when that bias is a typical draw. Seed 2, that fixture's choice,
    drifts to 2.7 sigma north at 30-40 s here, and the north position error with it. The
    choice runs the simulator's own GNSS model (its seeding, one fix per period), never a
    flight."""
    for candidate in range(_e2e.SEEDS_TRIED):
        gnss = VehicleSimulator(SimulatorConfig(
            vehicle_file=str(find_named_file("quadrotor_x", "vehicles")), seed=candidate)).gnss
        config = gnss.config
        sigma = np.array([config.correlated_horizontal_sigma_m] * 2
                         + [config.correlated_vertical_sigma_m])
        largest = np.zeros(3)
        for k in range(1, round(DURATION_S * config.rate_hz) + 1):
            fix_time = k / config.rate_hz
            gnss.measure_at(fix_time, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
            if fix_time >= START_S:
                largest = np.maximum(largest, np.abs(gnss.correlated_error_enu))
        if np.all(largest <= _e2e.TYPICAL_DRAW_SIGMAS * sigma):
            return candidate
    raise AssertionError(f"no seed below {_e2e.SEEDS_TRIED} keeps a typical GNSS error")


@pytest.fixture(scope="module")
def ros_env() -> Iterator[dict[str, str]]:
    """An isolated ROS domain for this module only: the workspace tests' session fixture
    would stay in os.environ after it, under their own session fixture's domain."""
    with _peers.isolated_ros_environment() as environment:
        yield environment


@pytest.fixture(scope="module")
def late_start_run(ros_env: dict[str, str], seed: int,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[LateStartRun]:
    """One paced flight over DDS with the estimator started at ``START_S``."""
    logs = tmp_path_factory.mktemp("late_estimator_start")
    peers: list[Any] = []

    def spawn(name: str, argv: list[str]) -> Any:
        if name == ESTIMATOR:
            argv = ["-c", LATE_START, str(START_S), *argv]
        peer = PeerProcess(name, argv, ros_env, logs)
        peers.append(peer)
        return peer

    options = RunOptions(duration_s=DURATION_S, seed=seed, odometry_source="ground_truth",
                         overrides={SIMULATOR: {"real_time_factor": PACED_RATE,
                                                "magnetometer.enabled": False},
                                    ESTIMATOR: {"initial_yaw_deg": math.nan,
                                                "magnetometer.enabled": False,
                                                "input_queue_depth": INPUT_QUEUE_DEPTH}})
    wall_start = time.perf_counter()
    graph = None
    try:
        graph = DdsGraph(spawn, options)
        exit_code = graph.finish()
        estimator = graph.processes[ESTIMATOR]
        estimator_alive = estimator.proc.poll() is None
        estimator.expect("STARTED", _e2e.EXIT_TIMEOUT_S)
        wall = time.perf_counter() - wall_start
        assert exit_code == 0, graph.simulator.stderr_text()
        assert estimator_alive, estimator.stderr_text()
        recording = graph.recording
        yield LateStartRun(recording.series(), recording.statuses(ESTIMATOR),
                           float(estimator.lines[-2]), wall)
    finally:
        if graph is not None:
            graph.close()
        for peer in peers:
            peer.close()


def _evaluation(run: LateStartRun) -> tuple[float, EstimateErrors]:
    """(first output s, errors from ``SETTLE_S`` after it to the end)."""
    estimate = run.series.estimate
    assert len(estimate), "no estimate"
    first = float(estimate.time[0])
    settled = _e2e._window(estimate, first + SETTLE_S, math.inf)
    return first, estimate_errors(settled, run.series.truth)


def _yaw_within(errors: EstimateErrors, limit_deg: float) -> float:
    """Stamp (s) from which the yaw error stays within ``limit_deg`` (inf if never)."""
    outside = np.flatnonzero(np.abs(errors.attitude[:, 2]) > math.radians(limit_deg))
    if not len(outside):
        return float(errors.time[0]) if len(errors.time) else math.inf
    return float(errors.time[outside[-1] + 1]) if outside[-1] + 1 < len(errors.time) else math.inf


def test_the_late_estimator_converges_in_motion_on_the_yaw_estimator(
        late_start_run: LateStartRun) -> None:
    run = late_start_run
    series = run.series
    first, _ = _evaluation(run)
    errors = estimate_errors(series.estimate, series.truth)
    yaw_within = _yaw_within(errors, YAW_WITHIN_DEG)
    running = [s for _, s in run.statuses if s.values.get("phase") == "running"]
    last = running[-1].values if running else {}
    resets = {k: v for k, v in last.items() if k.startswith("resets_")}
    imu_share = float(last.get("imu_messages", "nan")) / (
        _e2e.IMU_RATE_HZ * (run.statuses[-1][0] - run.started_s))
    print(f"\nestimator started at {run.started_s:.2f} s sim, first status (node up) "
          f"{run.statuses[0][0] - run.started_s:.2f} s later; first output after "
          f"{first - run.started_s:.2f} s, yaw within {YAW_WITHIN_DEG:g} deg after "
          f"{yaw_within - run.started_s:.2f} s; {resets}; IMU samples received "
          f"{100.0 * imu_share:.1f} %; {DURATION_S:g} s flight in {run.wall_s:.1f} s wall")
    assert run.started_s == pytest.approx(START_S, abs=0.05)
    # The budget counts from the node being up (its first status): how long its process
    # takes to start and join the graph on a loaded machine (0.3-2 s) is not convergence.
    node_up = run.statuses[0][0]
    assert run.started_s < first <= node_up + MAX_FIRST_OUTPUT_S
    # It flew the figure-eight through the start: an in-motion alignment.
    truth = _e2e._window(series.truth, run.started_s, math.inf)
    speed = np.linalg.norm(truth.velocity_body, axis=1)
    assert truth.position[:, 2].min() > 1.0
    assert speed.min() > MIN_FLIGHT_SPEED_MPS, speed.min()
    assert running, [s.values.get("phase") for _, s in run.statuses]
    for status in running:
        values = status.values
        assert (values["alignment"], values["yaw_source"]) == ("in_motion", "yaw_estimator")
        assert (values["resets_reset"], values["resets_set_pose"]) == ("0", "0"), values
    assert yaw_within <= first + SETTLE_S


def test_after_settling_position_and_yaw_stay_inside_three_sigma(
        late_start_run: LateStartRun) -> None:
    first, errors = _evaluation(late_start_run)
    received = _e2e._window(late_start_run.series.estimate, first + SETTLE_S, math.inf)
    nominal = _e2e.ESTIMATE_RATE_HZ * (DURATION_S - first - SETTLE_S)
    assert len(errors.time) >= MIN_MATCHED_SHARE * nominal, (
        f"{len(errors.time)} estimates matched to the truth, {len(received)} received, "
        f"{nominal:.0f} nominal")
    inside = errors.inside_three_sigma()
    checked = {axis: round(inside[axis], 4) for axis in AXES}
    print(f"\n{len(errors.time)} of {nominal:.0f} nominal estimates matched to the truth, "
          f"{len(received)} received; inside 3 sigma from {first + SETTLE_S:.2f} s: "
          f"{checked}; all: "
          f"{ {k: round(v, 4) for k, v in inside.items()} }")
    outside = {axis: f for axis, f in checked.items() if not f >= MIN_INSIDE_THREE_SIGMA}
    assert not outside, f"inside 3 sigma below {MIN_INSIDE_THREE_SIGMA}: {outside}"


def test_after_settling_the_horizontal_error_is_small(late_start_run: LateStartRun) -> None:
    _, errors = _evaluation(late_start_run)
    horizontal = np.hypot(errors.position[:, 0], errors.position[:, 1])
    yaw_deg = np.degrees(np.abs(errors.attitude[:, 2]))
    print(f"\nafter settling: horizontal error RMS {np.sqrt(np.mean(horizontal**2)):.3f} m, "
          f"max {horizontal.max():.3f} m; yaw error RMS {np.sqrt(np.mean(yaw_deg**2)):.2f} "
          f"deg, max {yaw_deg.max():.2f} deg")
    assert horizontal.max() < MAX_HORIZONTAL_ERROR_M
    assert np.sqrt(np.mean(horizontal**2)) < MAX_HORIZONTAL_RMS_M
