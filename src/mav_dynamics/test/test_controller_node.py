"""The controller node over real rclpy/DDS, isolated: a random ROS_DOMAIN_ID, localhost-only
discovery and a private Context per test. A peer node plays estimator and user."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from mav_dynamics.allocation import ControlAllocator, allocation_matrix
from mav_dynamics.model import TreeModel
from mav_dynamics.ros.controller_node import ControllerNode
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion
from mav_ros_common.parameters import ParameterError
from mav_ros_common.testing import private_context

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
WAIT_S = 10.0  # generous bound on every wait; each wait ends as soon as its condition holds
HOVER_POINT = [1.0, 2.0, 3.0]


@pytest.fixture
def context() -> Iterator[rclpy.Context]:
    with private_context() as context:
        yield context


class Peer:
    """The controller under test plus a peer node that publishes odometry and setpoints and
    records every output, spun together by one executor."""

    def __init__(self, context: rclpy.Context, parameters: dict[str, object],
                 executor: type[Executor] = SingleThreadedExecutor) -> None:
        self.controller = ControllerNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in parameters.items()])
        self.node = Node("peer", context=context)
        qos = QoSProfile(depth=10)
        self.commands: list[JointState] = []
        self.wrenches: list[WrenchStamped] = []
        self.references: list[Odometry] = []
        self.diagnostics: list[DiagnosticStatus] = []
        self.node.create_subscription(JointState, "actuator_commands", self.commands.append, qos)
        self.node.create_subscription(WrenchStamped, "controller/wrench", self.wrenches.append,
                                      qos)
        self.node.create_subscription(Odometry, "controller/reference", self.references.append,
                                      qos)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, qos)
        self.odometry = self.node.create_publisher(Odometry, "trident_ekf/odometry", qos)
        self.setpoint = self.node.create_publisher(PoseStamped, "controller/setpoint", qos)
        self.executor = executor(context=context)
        self.executor.add_node(self.controller)
        self.executor.add_node(self.node)

    def _on_diagnostics(self, message: DiagnosticArray) -> None:
        self.diagnostics += [s for s in message.status if s.name == "controller"]

    def spin_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            self.executor.spin_once(timeout_sec=0.01)

    def wait_for_subscribers(self) -> None:
        self.spin_until(lambda: self.odometry.get_subscription_count() > 0
                        and self.setpoint.get_subscription_count() > 0, "the controller's "
                        "subscriptions")

    def send_odometry(self, position: list[float], orientation: list[float] | None = None,
                      stamp_ns: int | None = None, velocity: list[float] | None = None) -> int:
        """Publish an Odometry (twist in the body frame); returns its stamp (ns)."""
        message = Odometry()
        stamp_ns = self.node.get_clock().now().nanoseconds if stamp_ns is None else stamp_ns
        message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 10**9)
        message.header.frame_id, message.child_frame_id = "map", "base_link"
        pose = message.pose.pose
        pose.position.x, pose.position.y, pose.position.z = position
        o = orientation or [0.0, 0.0, 0.0, 1.0]
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = o
        v = velocity or [0.0, 0.0, 0.0]
        linear = message.twist.twist.linear
        linear.x, linear.y, linear.z = v
        self.odometry.publish(message)
        return stamp_ns

    def latest_status(self) -> DiagnosticStatus | None:
        return self.diagnostics[-1] if self.diagnostics else None

    def status_value(self, key: str) -> str | None:
        status = self.latest_status()
        values = {} if status is None else {kv.key: kv.value for kv in status.values}
        return values.get(key)

    def close(self) -> None:
        self.executor.shutdown()
        self.controller.destroy_node()
        self.node.destroy_node()


@pytest.fixture
def make_peer(context: rclpy.Context) -> Iterator[Callable[..., Peer]]:
    peers: list[Peer] = []

    def make(executor: type[Executor] = SingleThreadedExecutor, **parameters: object) -> Peer:
        peer = Peer(context, {"diagnostics_period_s": 0.05, **parameters}, executor)
        peers.append(peer)
        return peer

    try:
        yield make
    finally:
        for peer in peers:
            peer.close()


def _hover_wrench(vehicle: str) -> tuple[np.ndarray, np.ndarray, ControlAllocator]:
    model = TreeModel(load_vehicle(VEHICLES / vehicle))
    wrench = -model.locked_inertia() @ model.gravity_twist(np.eye(3))
    return wrench, allocation_matrix(model), ControlAllocator(model)


def test_idle_commands_are_published_before_any_odometry(make_peer) -> None:
    peer = make_peer()
    peer.spin_until(lambda: len(peer.commands) >= 5, "five commands")
    for command in peer.commands:
        assert list(command.name) == ["rotor_0", "rotor_1", "rotor_2", "rotor_3"]
        assert list(command.velocity) == [0.0] * 4
    stamps = [c.header.stamp.sec * 10**9 + c.header.stamp.nanosec for c in peer.commands]
    assert all(np.diff(stamps) > 0)
    assert not peer.wrenches
    peer.spin_until(lambda: peer.latest_status() is not None, "diagnostics")
    assert peer.latest_status().message.startswith("waiting for odometry")
    assert peer.latest_status().level == DiagnosticStatus.OK


@pytest.mark.parametrize("vehicle", ["quadrotor_x.yaml", "tilting_quadrotor.yaml"])
def test_at_rest_on_the_reference_it_commands_the_hover_wrench(make_peer, vehicle: str) -> None:
    peer = make_peer(vehicle_file=vehicle, trajectory="hover", hover_position=HOVER_POINT,
                     takeoff_delay_s=0.0)
    peer.wait_for_subscribers()
    peer.send_odometry(HOVER_POINT)

    def command_for_first_wrench() -> JointState | None:
        if not peer.wrenches:
            return None
        stamp = peer.wrenches[0].header.stamp
        return next((c for c in peer.commands if c.header.stamp == stamp), None)

    peer.spin_until(lambda: command_for_first_wrench() is not None and bool(peer.references),
                    "a command with its wrench and reference")
    wrench, matrix, allocator = _hover_wrench(vehicle)
    message = peer.wrenches[0].wrench
    published = [message.torque.x, message.torque.y, message.torque.z,
                 message.force.x, message.force.y, message.force.z]
    assert np.allclose(published, wrench, atol=1e-9)
    command = command_for_first_wrench()
    rotors = allocator.model.rotor_count
    speeds = np.array(command.velocity[:rotors])
    tilts = np.array(command.position[rotors:])
    assert np.all(speeds > 0.0)
    # The commands make the hover wrench through the vehicle's own K(tilt).
    at_tilt = allocation_matrix(allocator.model, tilts) if tilts.size else matrix
    assert np.allclose(at_tilt @ speeds**2, wrench, atol=1e-6)
    direct = allocator.allocate(wrench)
    assert np.allclose(speeds, direct.rotor_speeds, rtol=1e-9)
    assert np.allclose(tilts, direct.tilt_angles, atol=1e-9)
    reference = peer.references[-1].pose.pose.position
    assert [reference.x, reference.y, reference.z] == pytest.approx(HOVER_POINT)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"rate_hz": 5000.0}, r"parameter 'rate_hz' = 5000.0 is invalid: must be a number in "
                          r"\[1.0, 2000.0\] \(Hz\)"),
    ({"trajectory": "circle"}, r"parameter 'trajectory' = 'circle' is invalid: must be one of "
                               r"\['hover', 'waypoints', 'figure_eight'\]"),
    ({"odometry_source": 3}, r"parameter 'odometry_source' = 3 is invalid"),
    ({"waypoints": [0.0, 1.0, 2.0, 3.0]}, r"parameter 'waypoints' = \[0.0, 1.0, 2.0, 3.0\] is "
                                          r"invalid: must be a list of finite numbers, a "
                                          r"multiple of 3 long"),
    ({"figure_eight_center": [1.0]}, r"'figure_eight_center' = \[1.0\] is invalid: must be a "
                                     r"list of 2 finite numbers"),
    ({"takeoff_duration_s": 0.0}, r"'takeoff_duration_s' = 0.0 is invalid: must be a number in "
                                  r"\[0.5, 120.0\]"),
    ({"vehicle_file": "no_such_vehicle"}, r"'vehicle_file' = 'no_such_vehicle' is invalid: no "
                                          r"vehicle file 'no_such_vehicle'"),
    ({"gains.position": [1.0, 1.0, -2.0]},
     r"'gains.position' = \[1.0, 1.0, -2.0\] is invalid: must be a list of 3 numbers in "
     r"\[1e-06, 1000000.0\] \(1/s\^2\)"),
])
def test_bad_parameters_are_rejected_with_name_value_and_range(
        context: rclpy.Context, overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ParameterError, match=expected):
        ControllerNode(context=context,
                       parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


def test_a_bad_vehicle_file_is_named_with_its_field(context: rclpy.Context,
                                                    tmp_path: Path) -> None:
    data = yaml.safe_load((VEHICLES / "quadrotor_x.yaml").read_text())
    data["body"]["mass"] = -1.0
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError,
                       match=r"'vehicle_file' = .*broken.yaml.*body.mass: must be > 0"):
        ControllerNode(context=context,
                       parameter_overrides=[Parameter("vehicle_file", value=str(path))])


def test_gains_override_the_vehicle_files_per_key(context: rclpy.Context,
                                                  tmp_path: Path) -> None:
    node = ControllerNode(context=context, parameter_overrides=[
        Parameter("vehicle_file", value=str(VEHICLES / "quadrotor_x.yaml")),
        Parameter("gains.velocity", value=[1, 2, 3])])
    try:
        file_gains = load_vehicle(VEHICLES / "quadrotor_x.yaml").gains
        assert node.controller.gains.velocity.tolist() == [1.0, 2.0, 3.0]
        assert np.array_equal(node.controller.gains.position, file_gains.position)
    finally:
        node.destroy_node()
    # A vehicle without gains needs all four.
    data = yaml.safe_load((VEHICLES / "quadrotor_x.yaml").read_text())
    del data["controller"]
    path = tmp_path / "no_gains.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError, match=r"\['gains.velocity', 'gains.attitude', "
                                             r"'gains.angular_rate'\] are not set"):
        ControllerNode(context=context, parameter_overrides=[
            Parameter("vehicle_file", value=str(path)),
            Parameter("gains.position", value=[1.0, 1.0, 1.0])])


def test_integers_are_accepted_for_numbers_and_structural_parameters_are_read_only(
        context: rclpy.Context) -> None:
    node = ControllerNode(context=context, parameter_overrides=[
        Parameter("rate_hz", value=50), Parameter("hover_position", value=[0, 0, 2])])
    try:
        assert node.parameters["rate_hz"] == 50.0
        assert node.parameters["hover_position"] == (0.0, 0.0, 2.0)
        # The control timer is built from it: a change is refused, with rclpy's reason.
        result = node.set_parameters([Parameter("rate_hz", value=20.0)])[0]
        assert not result.successful
        assert result.reason == "Trying to set a read-only parameter: rate_hz."
        assert node.get_parameter("rate_hz").value == 50
    finally:
        node.destroy_node()


def test_malformed_odometry_is_counted_and_ignored(make_peer) -> None:
    peer = make_peer(trajectory="hover", hover_position=HOVER_POINT, takeoff_delay_s=0.0)
    peer.wait_for_subscribers()
    good = peer.send_odometry(HOVER_POINT)
    peer.spin_until(lambda: len(peer.wrenches) >= 1, "a command on the first odometry")
    peer.send_odometry([math.nan, 2.0, 3.0])
    peer.send_odometry(HOVER_POINT, orientation=[0.0, 0.0, 0.0, 1.2])
    peer.send_odometry([5.0, 5.0, 5.0], stamp_ns=good - 10**6)          # backwards
    peer.send_odometry([5.0, 5.0, 5.0], stamp_ns=good)                  # duplicate
    counters = {f"rejected_odometry_{reason}": "1" for reason in (
        "non_finite", "non_unit_quaternion", "stamp_backwards", "stamp_duplicate")}
    peer.spin_until(lambda: all(peer.status_value(k) == v for k, v in counters.items()),
                    "every rejection on /diagnostics")
    count = len(peer.wrenches)
    peer.spin_until(lambda: len(peer.wrenches) >= count + 3, "commands after the bad input")
    # None of the rejected samples moved the state: still at rest on the reference.
    message = peer.wrenches[-1].wrench
    wrench = _hover_wrench("quadrotor_x.yaml")[0]
    assert [message.force.x, message.force.y, message.force.z] == pytest.approx(wrench[3:])


def test_stale_odometry_is_an_error_on_diagnostics(make_peer) -> None:
    peer = make_peer(trajectory="hover", hover_position=HOVER_POINT, takeoff_delay_s=0.0,
                     odometry_timeout_s=0.1)
    peer.wait_for_subscribers()
    peer.send_odometry(HOVER_POINT)
    peer.spin_until(lambda: (s := peer.latest_status()) is not None
                    and s.level == DiagnosticStatus.ERROR, "an ERROR status")
    assert "odometry stale" in peer.latest_status().message
    assert float(peer.status_value("odometry_age_s")) > 0.1
    count = len(peer.commands)
    peer.spin_until(lambda: len(peer.commands) >= count + 3, "commands while stale")
    assert np.all(np.array(peer.commands[-1].velocity) > 0.0)   # still flying, not motors off


def test_setpoint_moves_the_reference_smoothly_to_a_hover_there(make_peer) -> None:
    peer = make_peer(trajectory="hover", hover_position=HOVER_POINT, takeoff_delay_s=0.0,
                     speed_mps=5.0)
    peer.wait_for_subscribers()
    peer.send_odometry(HOVER_POINT)
    peer.spin_until(lambda: len(peer.references) >= 1, "a reference")
    setpoint = PoseStamped()
    setpoint.header.frame_id = "map"
    setpoint.pose.position.x, setpoint.pose.position.y, setpoint.pose.position.z = 1.0, 2.0, 4.0
    setpoint.pose.orientation.z = setpoint.pose.orientation.w = math.sqrt(0.5)  # yaw 90 deg
    wrong_frame = PoseStamped()
    wrong_frame.header.frame_id = "odom"
    wrong_frame.pose.position.z = 9.0
    wrong_frame.pose.orientation.w = 1.0
    peer.setpoint.publish(wrong_frame)
    peer.spin_until(lambda: peer.status_value("rejected_setpoint_frame_not_map") == "1",
                    "the rejected setpoint on /diagnostics")
    assert peer.references[-1].pose.pose.position.z == pytest.approx(3.0)
    start = len(peer.references)
    peer.setpoint.publish(setpoint)

    def arrived() -> bool:
        p = peer.references[-1].pose.pose.position
        return abs(p.z - 4.0) < 1e-9 and len(peer.references) > start

    peer.spin_until(arrived, "the reference at the setpoint")
    heights = [r.pose.pose.position.z for r in peer.references[start:]]
    assert np.all(np.diff(heights) >= -1e-12)                 # monotonic climb, no jump back
    assert max(np.diff(heights)) < 0.2                         # no step: a smooth move
    assert any(3.0 < z < 4.0 for z in heights)
    orientation = peer.references[-1].pose.pose.orientation
    assert [orientation.z, orientation.w] == pytest.approx([math.sqrt(0.5)] * 2)
    final = peer.references[-1].twist.twist.linear
    assert [final.x, final.y, final.z] == pytest.approx([0.0, 0.0, 0.0])
    peer.spin_until(lambda: peer.status_value("trajectory") == "setpoint", "the new plan name")


def test_a_plan_change_in_flight_moves_smoothly_to_the_new_plan(make_peer) -> None:
    peer = make_peer(trajectory="hover", hover_position=HOVER_POINT, takeoff_delay_s=0.0,
                     takeoff_duration_s=0.5, speed_mps=5.0)
    peer.wait_for_subscribers()
    peer.send_odometry(HOVER_POINT)
    peer.spin_until(lambda: len(peer.references) >= 1, "a reference")
    gains = peer.controller.controller.gains
    start = len(peer.references)
    changes = [Parameter("hover_position", value=[1.0, 2.0, 4.0]),
               Parameter("gains.position", value=[1.0, 2.0, 3.0])]
    assert all(r.successful for r in peer.controller.set_parameters(changes))
    assert peer.controller.controller.gains.position.tolist() == [1.0, 2.0, 3.0]
    assert np.array_equal(peer.controller.controller.gains.velocity, gains.velocity)

    def arrived() -> bool:
        p = peer.references[-1].pose.pose.position
        return abs(p.z - 4.0) < 1e-9 and len(peer.references) > start

    peer.spin_until(arrived, "the reference at the new hover point")
    heights = [r.pose.pose.position.z for r in peer.references[start:]]
    assert np.all(np.diff(heights) >= -1e-12)
    assert max(np.diff(heights)) < 0.2                         # a move, not a jump
    # A parameter of a trajectory not flown is kept for later and moves nothing.
    assert peer.controller.set_parameters([Parameter("figure_eight_size_m", value=3.0)])[0] \
        .successful
    count = len(peer.references)
    peer.spin_until(lambda: len(peer.references) >= count + 5, "references after it")
    assert all(r.pose.pose.position.z == pytest.approx(4.0) for r in peer.references[count:])
    # Choosing the figure-eight flies to its start, then along it.
    assert peer.controller.set_parameters([Parameter("trajectory", value="figure_eight")])[0] \
        .successful
    peer.spin_until(lambda: peer.status_value("trajectory") == "figure_eight", "the new plan")


def test_takeoff_starts_from_the_latest_odometry_and_climbs_to_an_early_setpoint(
        make_peer) -> None:
    peer = make_peer(trajectory="figure_eight", takeoff_delay_s=0.3, takeoff_duration_s=1.0)
    peer.wait_for_subscribers()
    peer.send_odometry([0.0, 0.0, 0.5])              # an estimator's first, unsettled output
    peer.send_odometry([0.0, 0.0, 0.2])              # where the vehicle really sits
    setpoint = PoseStamped()
    setpoint.header.frame_id = "map"
    setpoint.pose.position.x, setpoint.pose.position.y, setpoint.pose.position.z = 0.5, 0.0, 1.2
    setpoint.pose.orientation.w = 1.0
    peer.setpoint.publish(setpoint)
    peer.spin_until(lambda: bool(peer.references), "the first reference of the climb")
    first = peer.references[0].pose.pose.position
    assert [first.x, first.y, first.z] == pytest.approx([0.0, 0.0, 0.2], abs=0.02)
    before = [c for c in peer.commands if _stamp([c]) < _stamp(peer.references[:1])]
    assert before
    assert all(list(c.velocity) == [0.0] * 4 for c in before)   # motors off during the delay
    peer.spin_until(lambda: peer.references[-1].pose.pose.position.z == pytest.approx(1.2),
                    "the climb's end at the setpoint")
    last = peer.references[-1].pose.pose.position
    assert [last.x, last.y] == pytest.approx([0.5, 0.0])
    peer.spin_until(lambda: peer.status_value("trajectory") == "setpoint", "the plan's name")


class _Plant:
    """A rigid quadrotor (tree model, instant motors, semi-implicit Euler at ``step_s``) on a
    ground plane at z = 0 that it cannot sink into; starts landed, level, at the origin."""

    def __init__(self, vehicle: str) -> None:
        self.model = TreeModel(load_vehicle(VEHICLES / vehicle))
        self.pose = np.eye(4)
        self.twist = np.zeros(6)

    def step(self, rotor_speeds: np.ndarray, step_s: float) -> None:
        acceleration = self.model.evaluate(self.pose[:3, :3], self.twist, rotor_speeds,
                                           torques=False).base_acceleration
        self.twist = self.twist + step_s * acceleration
        rotation = self.pose[:3, :3]
        self.pose[:3, 3] += rotation @ self.twist[3:] * step_s
        self.pose[:3, :3] = rotation @ _rodrigues(self.twist[:3] * step_s)
        if self.pose[2, 3] < 0.0:   # on the ground: resting, level
            self.pose[:3, :3], self.pose[2, 3] = np.eye(3), 0.0
            self.twist = np.zeros(6)


def _rodrigues(rotation_vector: np.ndarray) -> np.ndarray:
    """exp of a small rotation vector (rad)."""
    angle = float(np.linalg.norm(rotation_vector))
    hat = np.array([[0.0, -rotation_vector[2], rotation_vector[1]],
                    [rotation_vector[2], 0.0, -rotation_vector[0]],
                    [-rotation_vector[1], rotation_vector[0], 0.0]])
    if angle < 1e-12:
        return np.eye(3) + hat
    return np.eye(3) + math.sin(angle) / angle * hat + (1.0 - math.cos(angle)) / angle**2 * (
        hat @ hat)


@pytest.mark.parametrize(("telemetry_rate_hz", "executor"), [
    (100.0, SingleThreadedExecutor), (50.0, SingleThreadedExecutor), (100.0, EventsExecutor)])
def test_lockstep_closed_loop_takes_off_and_tracks_the_figure_eight(
        make_peer, telemetry_rate_hz: float, executor: type[Executor]) -> None:
    """Sim time driven by the test: at each 10 ms boundary it publishes ground truth and the
    clock, then waits for the command stamped at that boundary, as the simulator does; the
    reference comes with every command, or with every second one at 50 Hz telemetry. Each
    boundary gets exactly one command, on either executor (the node's ``main`` runs the
    EventsExecutor, ``mav-sim`` too)."""
    peer = make_peer(executor, use_sim_time=True, odometry_source="ground_truth",
                     takeoff_delay_s=0.0, takeoff_duration_s=1.5, figure_eight_size_m=0.5,
                     figure_eight_period_s=4.0, figure_eight_height_m=1.0,
                     figure_eight_ramp_s=1.0,
                     telemetry_rate_hz=telemetry_rate_hz)
    telemetry_every_ns = round(1e9 / telemetry_rate_hz)
    truth = peer.node.create_publisher(Odometry, "ground_truth/odometry", QoSProfile(depth=10))
    clock = peer.node.create_publisher(Clock, "/clock", QoSProfile(depth=10))
    peer.spin_until(lambda: truth.get_subscription_count() > 0
                    and clock.get_subscription_count() > 0, "the controller's subscriptions")
    plant, step_s, boundary_every = _Plant("quadrotor_x.yaml"), 0.001, 10
    speeds = np.zeros(4)
    errors = []
    for k in range(3000):
        if k % boundary_every == 0:
            stamp_ns = k * 1_000_000
            message = Odometry()
            message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 10**9)
            pose = message.pose.pose
            pose.position.x, pose.position.y, pose.position.z = plant.pose[:3, 3].tolist()
            o = pose.orientation
            o.x, o.y, o.z, o.w = quaternion.from_matrix(plant.pose[:3, :3]).tolist()
            w, v = message.twist.twist.angular, message.twist.twist.linear
            w.x, w.y, w.z, v.x, v.y, v.z = plant.twist.tolist()
            truth.publish(message)
            tick = Clock()
            tick.clock.sec, tick.clock.nanosec = divmod(stamp_ns, 10**9)
            clock.publish(tick)
            if k > 0:   # the controller's first tick is one period after the clock starts
                with_reference = (stamp_ns - 10_000_000) % telemetry_every_ns == 0
                peer.spin_until(lambda s=stamp_ns, r=with_reference: _stamp(peer.commands) >= s
                                and (not r or _stamp(peer.references) >= s),
                                f"the command for t = {stamp_ns * 1e-9:.2f} s")
                assert _stamp(peer.commands) == stamp_ns
                expected = stamp_ns if with_reference else stamp_ns - 10_000_000
                assert _stamp(peer.references) == expected
                speeds = np.array(peer.commands[-1].velocity)
                reference = peer.references[-1].pose.pose.position
                errors.append(np.linalg.norm(plant.pose[:3, 3] - [reference.x, reference.y,
                                                                  reference.z]))
        plant.step(speeds, step_s)
    assert plant.pose[2, 3] > 0.9                                 # climbed to the curve
    assert plant.pose[0, 3] > 0.3                                 # and flies along it
    assert max(errors) < 0.05
    assert (peer.latest_status().level, peer.latest_status().message) == (
        DiagnosticStatus.OK, "flying")


def _stamp(messages: list) -> int:
    """Stamp (ns) of the last message, -1 without any."""
    if not messages:
        return -1
    stamp = messages[-1].header.stamp
    return stamp.sec * 10**9 + stamp.nanosec


def test_the_shipped_parameter_file_holds_only_declared_parameters(context: rclpy.Context) -> None:
    path = Path(__file__).resolve().parents[3] / "config" / "controller.yaml"
    values = yaml.safe_load(path.read_text())["controller"]["ros__parameters"]
    node = ControllerNode(context=context, cli_args=["--ros-args", "--params-file", str(path)])
    try:
        for name, value in values.items():
            assert node.has_parameter(name), name
            assert node.get_parameter(name).value == pytest.approx(value), name
        assert node.parameters["trajectory"] == "figure_eight"
        assert node.odometry_topic == "trident_ekf/odometry"
    finally:
        node.destroy_node()
