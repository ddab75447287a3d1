"""SimulatorNode over real DDS (isolated domain, private context): parameters, lock-step,
published frames and conventions, bad commands, services."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import FluidPressure, Imu, JointState, MagneticField, NavSatFix, NavSatStatus
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from mav_ros_common import stamps
from mav_ros_common.parameters import ParameterError, flattened
from mav_ros_common.qos import RELIABLE_10, SENSOR_DATA, TF, TF_STATIC
from variational_sim.ros.parameters import SPECS
from variational_sim.ros.simulator_node import SimulatorNode

TIMEOUT_S = 15.0
NOISE_FREE_IMU = ("gyro_noise_density", "accel_noise_density", "gyro_bias_walk",
                  "accel_bias_walk", "gyro_turn_on_sigma", "accel_turn_on_sigma",
                  "gyro_bias_instability", "accel_bias_instability")
"""IMU error parameters set to zero so that messages can be checked exactly."""


@pytest.fixture(scope="module")
def context() -> Iterator[rclpy.Context]:
    """A private rclpy context on a random localhost-only domain."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        patch.delenv("ROS_STATIC_PEERS", raising=False)
        context = rclpy.Context()
        rclpy.init(context=context, args=[])
        try:
            yield context
        finally:
            rclpy.shutdown(context=context)


def spin_until(executor: SingleThreadedExecutor, condition: Callable[[], bool],
               what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {TIMEOUT_S} s waiting for {what}")
        executor.spin_once(timeout_sec=0.01)


@pytest.mark.parametrize(("name", "value", "words"), [
    ("physics_rate_hz", 50.0, ["physics_rate_hz", "50.0", "10000.0"]),
    ("physics_rate_hz", "fast", ["physics_rate_hz", "'fast'", "[100.0, 10000.0] (Hz)"]),
    ("integrator", "euler", ["integrator", "'euler'", "dqvi"]),
    ("seed", -3, ["'seed' = -3", "an integer in [0, 2147483647]"]),
    ("initial_position", [0.0, 1.0], ["initial_position", "[0.0, 1.0]", "a list of 3"]),
    ("lockstep_period_s", 0.0075, ["lockstep_period_s", "0.0075", "IMU period"]),
    ("gnss_outages", [3.0, 1.0], ["gnss_outages", "[3.0, 1.0]", "start < end"]),
    ("ground_truth_rate_hz", 300.0, ["ground_truth_rate_hz", "300.0", "divide"]),
    ("vehicle_file", "no_such_vehicle.yaml", ["vehicle_file", "no_such_vehicle.yaml"]),
    ("imu_mount_rotation_xyzw", [0.0, 0.0, 0.0, 2.0], ["imu_mount_rotation_xyzw", "unit"]),
    ("imu_rate_hz", 300.0, ["imu_rate_hz = 300.0", "divide physics_rate_hz"]),
    ("datum", [95.0, 0.0, 0.0], ["datum", "95.0"]),
])
def test_bad_parameters_stop_the_node_with_one_clear_message(context, name, value, words):
    with pytest.raises(ParameterError) as error:
        SimulatorNode(context=context, parameter_overrides=[Parameter(name, value=value)])
    for word in words:
        assert word in str(error.value)


class Probe:
    """A test node: publishes actuator commands, records what the simulator publishes."""

    def __init__(self, context: rclpy.Context) -> None:
        self.node = Node("probe", context=context)
        self.commands = self.node.create_publisher(JointState, "actuator_commands", RELIABLE_10)
        self.clock: list[Clock] = []
        self.imu: list[Imu] = []
        self.odometry: list[Odometry] = []
        self.tf_static: list[TFMessage] = []
        self.pressure: list[FluidPressure] = []
        self.field: list[MagneticField] = []
        self.node.create_subscription(Clock, "/clock", self.clock.append, RELIABLE_10)
        self.node.create_subscription(Imu, "imu/data", self.imu.append, SENSOR_DATA)
        self.node.create_subscription(Odometry, "ground_truth/odometry", self.odometry.append,
                                      RELIABLE_10)
        self.node.create_subscription(TFMessage, "/tf_static", self.tf_static.append, TF_STATIC)
        self.node.create_subscription(FluidPressure, "barometer/pressure", self.pressure.append,
                                      SENSOR_DATA)
        self.node.create_subscription(MagneticField, "magnetic_field", self.field.append,
                                      SENSOR_DATA)
        self.reset = self.node.create_client(Trigger, "simulator/reset")

    def command(self, stamp_s: float, speeds: list[float], names: list[str] | None = None) -> None:
        message = JointState()
        message.header.stamp = stamps.from_seconds(stamp_s)
        message.name = names or [f"rotor_{i}" for i in range(len(speeds))]
        message.velocity = speeds
        self.commands.publish(message)


@pytest.fixture
def graph(context) -> Iterator[tuple[SimulatorNode, Probe, SingleThreadedExecutor]]:
    simulator = SimulatorNode(context=context, parameter_overrides=[
        Parameter("lockstep", value=True), Parameter("real_time_factor", value=0.0),
        Parameter("lockstep_timeout_s", value=60.0), Parameter("seed", value=5),
        Parameter("barometer.enabled", value=True), Parameter("magnetometer.enabled", value=True),
        *(Parameter(f"imu_{name}", value=0.0) for name in NOISE_FREE_IMU)])
    probe = Probe(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(simulator)
    executor.add_node(probe.node)
    try:
        spin_until(executor, lambda: probe.commands.get_subscription_count() > 0
                   and simulator.count_subscribers("/clock") > 0, "discovery")
        yield simulator, probe, executor
    finally:
        executor.shutdown()
        probe.node.destroy_node()
        simulator.destroy_node()


def test_lockstep_waits_for_a_command_stamped_at_the_boundary(graph):
    simulator, probe, executor = graph
    assert not simulator.waiting_for_command
    assert simulator.advance()
    assert simulator.sim_time == pytest.approx(0.01)
    assert simulator.waiting_for_command
    assert not simulator.advance()  # never blocks, never steps while waiting
    probe.command(0.005, [600.0] * 4)  # older than the boundary: does not release it
    spin_until(executor, lambda: simulator.simulator.motors.commands == [600.0] * 4,
               "the first command")
    assert simulator.waiting_for_command
    probe.command(0.01, [650.0] * 4)
    spin_until(executor, lambda: not simulator.waiting_for_command, "release of the boundary")
    assert simulator.simulator.motors.commands == [650.0] * 4
    assert simulator.advance()
    assert simulator.sim_time == pytest.approx(0.02)
    assert simulator.lockstep_timeouts == 0


def test_start_waits_for_the_graph_to_connect_then_for_at_most_start_wait_s(context):
    simulator = SimulatorNode(context=context, parameter_overrides=[
        Parameter("start_wait_s", value=60.0), Parameter("real_time_factor", value=0.0),
        Parameter("lockstep_timeout_s", value=60.0)])
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(simulator)
    probe: Probe | None = None
    try:
        for _ in range(20):  # nobody listens yet: t = 0 is held
            executor.spin_once(timeout_sec=0.01)
            assert not simulator.advance()
        assert simulator.waiting_to_start
        assert simulator.sim_time == 0.0
        probe = Probe(context)  # an IMU subscriber and a command publisher appear
        executor.add_node(probe.node)
        spin_until(executor, simulator.advance, "the start once the probe is matched")
        assert not simulator.waiting_to_start
        probe.command(0.01, [0.0] * 4)
        spin_until(executor, lambda: len(probe.imu) >= 2, "the first IMU samples")
        # Nothing published before the subscriber was there: it sees the first sample.
        assert stamps.to_ns(probe.imu[0].header.stamp) == 5_000_000
    finally:
        executor.shutdown()
        if probe is not None:
            probe.node.destroy_node()
        simulator.destroy_node()


def test_start_goes_on_alone_after_start_wait_s(context):
    simulator = SimulatorNode(context=context, parameter_overrides=[
        Parameter("start_wait_s", value=0.3), Parameter("real_time_factor", value=0.0),
        Parameter("lockstep", value=False)])
    try:
        assert not simulator.advance()
        time.sleep(0.3)
        assert simulator.advance()
        assert simulator.sim_time == pytest.approx(0.01)
    finally:
        simulator.destroy_node()


def test_published_clock_imu_ground_truth_and_static_frames(graph):
    simulator, probe, executor = graph
    for k in range(1, 4):
        assert simulator.advance()
        probe.command(0.01 * k, [0.0] * 4)
        spin_until(executor, lambda: not simulator.waiting_for_command, "a boundary release")
    spin_until(executor, lambda: len(probe.odometry) >= 3 and len(probe.imu) >= 1
               and probe.tf_static and len(probe.clock) >= 3, "the simulator's messages")
    clock = [stamps.to_ns(c.clock) for c in probe.clock]
    assert clock == sorted(clock)
    # /clock once per lock-step boundary: what sim-time timers need, at the least traffic
    assert clock[-3:] == [10_000_000, 20_000_000, 30_000_000]
    imu = probe.imu[-1]
    assert imu.header.frame_id == "imu_link"
    assert imu.orientation_covariance[0] == -1.0
    # REP-145 at rest on the ground: specific force +g up; the gyro sees only the earth rate
    acceleration = imu.linear_acceleration
    assert (acceleration.x, acceleration.y) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert acceleration.z == pytest.approx(9.80665, rel=1e-12)
    rate = imu.angular_velocity
    assert math.hypot(rate.x, rate.y, rate.z) == pytest.approx(7.292115e-5, rel=1e-3)
    odometry = probe.odometry[-1]
    assert (odometry.header.frame_id, odometry.child_frame_id) == ("map",
                                                                   "base_link_ground_truth")
    assert odometry.pose.pose.orientation.w == 1.0
    transforms = {(t.header.frame_id, t.child_frame_id) for t in probe.tf_static[-1].transforms}
    assert transforms == {("base_link", "imu_link"), ("base_link", "gnss_link")}


def test_malformed_commands_are_counted_and_the_node_keeps_running(graph):
    simulator, probe, executor = graph
    assert simulator.advance()
    probe.command(0.002, [600.0, math.nan, 600.0, 600.0])
    probe.command(0.003, [600.0] * 3)
    probe.command(0.004, [600.0] * 4, names=["rotor_0", "rotor_1", "rotor_2", "motor_3"])
    # A rotor named twice: which value was meant is unknowable (the last used to win).
    probe.command(0.005, [600.0] * 5, names=["rotor_0", "rotor_1", "rotor_2", "rotor_3",
                                             "rotor_1"])

    def counted() -> dict[str, int]:
        values = simulator.diagnostic_values()
        return {key: values[f"rejected_commands_{key}"]
                for key in ("non_finite", "missing_rotor", "unknown_joint", "stamp_backwards",
                            "duplicate_joint")}

    spin_until(executor, lambda: counted()["non_finite"] == 1 and counted()["missing_rotor"] == 1
               and counted()["unknown_joint"] == 1 and counted()["duplicate_joint"] == 1,
               "the bad commands to be counted")
    probe.command(0.001, [600.0] * 4)  # stamp going backwards
    spin_until(executor, lambda: counted()["stamp_backwards"] == 1, "the old stamp")
    # Malformed and old: counted for its content, which is what a user needs to fix.
    probe.command(0.0015, [600.0] * 3)
    spin_until(executor, lambda: counted()["missing_rotor"] == 2, "the old malformed command")
    assert counted()["stamp_backwards"] == 1
    assert simulator.simulator.motors.commands == [0.0] * 4
    probe.command(0.01, [600.0] * 4)
    spin_until(executor, lambda: not simulator.waiting_for_command, "a good command")
    assert simulator.advance()
    assert simulator.simulator.motors.commands == [600.0] * 4


def test_reset_service_returns_to_the_start(graph):
    simulator, probe, executor = graph
    simulator.lockstep = False
    for _ in range(20):
        simulator.advance()
    assert simulator.sim_time == pytest.approx(0.2)
    spin_until(executor, probe.reset.service_is_ready, "the reset service")
    future = probe.reset.call_async(Trigger.Request())
    spin_until(executor, future.done, "the reset response")
    assert future.result().success
    assert simulator.sim_time == 0.0
    assert simulator.simulator.truth.landed


def test_every_contract_topic_carries_its_frames_and_faults_are_injected(graph):
    simulator, probe, executor = graph
    node = probe.node
    received: dict[str, list] = {}
    topics = [("gnss/fix", NavSatFix, SENSOR_DATA), ("gnss/vel", TwistWithCovarianceStamped,
                                                     SENSOR_DATA),
              ("/tf", TFMessage, TF), ("simulator/markers", MarkerArray, RELIABLE_10),
              ("simulator/rotor_speeds", JointState, RELIABLE_10),
              ("/diagnostics", DiagnosticArray, RELIABLE_10)]
    for topic, kind, qos in topics:
        received[topic] = []
        node.create_subscription(kind, topic, received[topic].append, qos)
    spin_until(executor, lambda: all(simulator.count_subscribers(t) for t, _, _ in topics),
               "subscriptions")
    outage = node.create_client(Trigger, "simulator/inject_gnss_outage")
    spike = node.create_client(Trigger, "simulator/inject_imu_spike")
    simulator.lockstep = False
    for _ in range(110):  # 1.1 s: fixes at 0.1 .. 1.0 s published by 1.05 s
        simulator.advance()
        executor.spin_once(timeout_sec=0.0)
    spin_until(executor, lambda: len(received["gnss/fix"]) >= 8 and received["/diagnostics"],
               "GNSS fixes and diagnostics")
    fix = received["gnss/fix"][-1]
    assert fix.header.frame_id == "gnss_link"
    assert fix.status.status == NavSatStatus.STATUS_FIX
    assert fix.position_covariance_type == NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    assert (fix.latitude, fix.longitude) == pytest.approx((47.3977, 8.5456), abs=1e-4)
    assert fix.position_covariance[0] == pytest.approx(0.25 + 0.01, rel=0.5)
    assert received["gnss/vel"][-1].header.frame_id == "gnss_link"
    truth = received["/tf"][-1].transforms[0]
    assert (truth.header.frame_id, truth.child_frame_id) == ("map", "base_link_ground_truth")
    assert len(received["simulator/markers"][-1].markers) == 4
    assert list(received["simulator/rotor_speeds"][-1].name) == [f"rotor_{i}" for i in range(4)]
    status = received["/diagnostics"][-1].status[0]
    keys = {pair.key for pair in status.values}
    assert status.name == "simulator"
    assert {"energy_error_J", "momentum_error_Ns", "newton_iterations", "real_time_factor",
            "lockstep_timeouts", "rejected_commands_non_finite"} <= keys

    for client in (outage, spike):
        spin_until(executor, client.service_is_ready, "the fault services")
    futures = [client.call_async(Trigger.Request()) for client in (outage, spike)]
    spin_until(executor, lambda: all(f.done() for f in futures), "the fault responses")
    assert all(f.result().success for f in futures)
    spike_stamp_ns = round((simulator.sim_time + 0.005) * 1e9)  # the next IMU sample
    fixes_before = len(received["gnss/fix"])
    simulator.advance()

    def spiked() -> list[float]:
        return [m.linear_acceleration.z for m in probe.imu
                if stamps.to_ns(m.header.stamp) == spike_stamp_ns]

    spin_until(executor, spiked, "the IMU sample after the spike")
    for _ in range(20):
        simulator.advance()
        executor.spin_once(timeout_sec=0.0)
    spin_until(executor, lambda: len(received["gnss/fix"]) >= fixes_before + 2,
               "fixes after the outage started")
    assert received["gnss/fix"][-1].status.status == NavSatStatus.STATUS_NO_FIX
    assert spiked() == [pytest.approx(9.80665 + 30.0, rel=1e-12)]  # fault_imu_spike_accel


def test_standalone_main_runs_to_duration_and_rejects_bad_parameters(context):
    environment = dict(os.environ, ROS_DOMAIN_ID=str(random.SystemRandom().randint(1, 232)),
                       ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    command = [sys.executable, "-m", "variational_sim.ros.simulator_node", "--ros-args",
               "-p", "duration_s:=0.3", "-p", "real_time_factor:=0.0", "-p", "lockstep:=false"]
    done = subprocess.run(command, env=environment, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "finished at 0.300 s sim time" in done.stderr
    bad = subprocess.run([*command, "-p", "seed:=-3"], env=environment, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2
    assert "parameter 'seed'" in bad.stderr


def test_barometer_and_magnetometer_publish_standard_messages(graph):
    """50 Hz each, stamped on the physics grid: static pressure of the standard day at the
    datum's height above the geoid (ellipsoid 488 m - geoid 47 m), and the configured Earth
    field (NED) seen by a level imu_link with yaw 0 (x east, y north, z up)."""
    simulator, probe, executor = graph
    for k in range(1, 6):
        assert simulator.advance()
        probe.command(0.01 * k, [0.0] * 4)
        spin_until(executor, lambda: not simulator.waiting_for_command, "a boundary release")
    spin_until(executor, lambda: len(probe.pressure) >= 2 and len(probe.field) >= 2,
               "barometer and magnetometer messages")
    pressure = probe.pressure[-1]
    assert pressure.header.frame_id == "base_link"
    assert stamps.to_ns(pressure.header.stamp) % 20_000_000 == 0
    standard = 101325.0 * (1.0 - 0.0065 * 441.0 / 288.15) ** 5.25588
    assert pressure.fluid_pressure == pytest.approx(standard, abs=60.0)  # drift, noise
    assert pressure.variance == pytest.approx(3.0**2)
    field = probe.field[-1]
    assert field.header.frame_id == "imu_link"
    north, east, down = simulator.simulator.config.magnetometer.earth_field_ned_T
    measured = (field.magnetic_field.x, field.magnetic_field.y, field.magnetic_field.z)
    assert measured == pytest.approx((east, north, -down), abs=2e-6)  # 0.3 uT noise
    assert field.magnetic_field_covariance[0] == pytest.approx(3e-7**2)
    values = simulator.diagnostic_values()
    assert {"barometer_drift_pa", "magnetometer_disturbance_T",
            "gnss_correlated_error_up_m"} <= set(values)


def test_a_scenario_that_does_not_fit_the_simulator_is_a_clear_error(context, tmp_path):
    scenario = tmp_path / "needs_a_magnetometer.yaml"
    scenario.write_text("events:\n  - {type: magnetometer_disturbance, start_s: 1.0, "
                        "field_T: [1.0e-5, 0.0, 0.0]}\n")
    for name, words in ((str(scenario), ["scenario", "magnetometer", "enabled"]),
                        ("no_such_scenario", ["scenario", "no_such_scenario", "calm"])):
        with pytest.raises(ParameterError) as error:
            SimulatorNode(context=context, parameter_overrides=[
                Parameter("scenario", value=name)])
        assert error.value.name == "scenario"
        for word in words:
            assert word in str(error.value)


def test_several_vehicles_fly_in_their_own_namespaces_in_lock_step(context):
    """``vehicles``: a quadrotor and a hexarotor in one simulator, namespaces uav1 and uav2,
    3 m apart, each with its own seed; the lock-step waits for both commands; frames, static
    transforms and diagnostics per vehicle."""
    simulator = SimulatorNode(context=context, parameter_overrides=[
        Parameter("vehicles", value="quadrotor_x, hexarotor.yaml"),
        Parameter("real_time_factor", value=0.0), Parameter("lockstep_timeout_s", value=60.0)])
    peer = Node("peer", context=context)
    imu: dict[str, list[Imu]] = {"uav1": [], "uav2": []}
    static: list[TFMessage] = []
    statuses: list[str] = []
    commands = {name: peer.create_publisher(JointState, f"/{name}/actuator_commands",
                                            RELIABLE_10) for name in imu}
    for name, received in imu.items():
        peer.create_subscription(Imu, f"/{name}/imu/data", received.append, SENSOR_DATA)
    peer.create_subscription(TFMessage, "/tf_static", static.append, TF_STATIC)
    peer.create_subscription(DiagnosticArray, "/diagnostics",
                             lambda m: statuses.extend(s.name for s in m.status), RELIABLE_10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(simulator)
    executor.add_node(peer)

    def command(name: str, stamp_s: float, rotors: int) -> None:
        message = JointState()
        message.header.stamp = stamps.from_seconds(stamp_s)
        message.name = [f"rotor_{i}" for i in range(rotors)]
        message.velocity = [0.0] * rotors
        commands[name].publish(message)

    try:
        first, second = (channel.simulator for channel in simulator.channels)
        assert (first.vehicle.name, second.vehicle.name) == ("quadrotor_x", "hexarotor")
        assert first.config.seed != second.config.seed
        assert second.config.initial_position[0] - first.config.initial_position[0] == 3.0
        spin_until(executor, lambda: all(p.get_subscription_count() for p in commands.values())
                   and simulator.count_subscribers("/uav2/imu/data") > 0, "discovery")
        assert simulator.advance()
        command("uav1", 0.01, 4)
        spin_until(executor, lambda: first.motors.commands == [0.0] * 4, "uav1's command")
        assert simulator.waiting_for_command  # uav2 has not answered the boundary
        command("uav2", 0.01, 6)
        spin_until(executor, lambda: not simulator.waiting_for_command, "both commands")
        for k in range(2, 101):
            assert simulator.advance()
            command("uav1", 0.01 * k, 4)
            command("uav2", 0.01 * k, 6)
            spin_until(executor, lambda: not simulator.waiting_for_command, "a release")
        assert all(not channel.rejected_commands for channel in simulator.channels)
        spin_until(executor, lambda: imu["uav1"] and imu["uav2"] and static
                   and {"uav1/simulator", "uav2/simulator"} <= set(statuses), "the messages")
        assert imu["uav1"][-1].header.frame_id == "uav1/imu_link"
        assert imu["uav2"][-1].header.frame_id == "uav2/imu_link"
        children = {t.child_frame_id: t.header.frame_id for t in static[-1].transforms}
        assert children == {"uav1/imu_link": "uav1/base_link", "uav1/gnss_link": "uav1/base_link",
                            "uav2/imu_link": "uav2/base_link", "uav2/gnss_link": "uav2/base_link"}
    finally:
        executor.shutdown()
        peer.destroy_node()
        simulator.destroy_node()


def test_a_bad_vehicles_entry_names_the_parameter(context):
    for value, words in (("quadrotor_x,,hexarotor", ["vehicles", "none empty"]),
                         ("quadrotor_x,no_such_vehicle", ["vehicles", "entry 2",
                                                          "no_such_vehicle"])):
        with pytest.raises(ParameterError) as error:
            SimulatorNode(context=context, parameter_overrides=[Parameter("vehicles",
                                                                          value=value)])
        assert error.value.name == "vehicles"
        for word in words:
            assert word in str(error.value)


def test_the_parameter_file_declares_exactly_the_nodes_parameters(context):
    path = Path(__file__).resolve().parents[3] / "config" / "simulator.yaml"
    keys = set(flattened(yaml.safe_load(path.read_text())["simulator"]["ros__parameters"]))
    node = SimulatorNode(context=context, cli_args=["--ros-args", "--params-file", str(path)])
    try:
        assert keys == {spec.name for spec in SPECS}
        assert all(node.has_parameter(key) for key in keys)
        assert node.get_parameter("lockstep_period_s").value == 0.01
        assert node.simulator.config.gnss.outages == ()
        assert node.lockstep
        assert set(node.simulator.sensors) == {"imu", "gnss", "barometer", "magnetometer"}
    finally:
        node.destroy_node()
