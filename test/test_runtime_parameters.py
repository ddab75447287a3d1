"""Every parameter of the three nodes set at run time from another process, over DDS.

A client process (``test/param_client.py``) calls each node's ``SetParameters`` service, as
``ros2 param set`` does, with a valid new value for every parameter the node declares:

- read-only ones come back refused, with rclpy's reason, and nothing changes;
- dynamic ones come back accepted and the node's live state shows the new value (the
  core objects, not the parameter store: the controller's gains and mission, the
  simulator's sensor models, the filter's configuration...);
- for each node one change is also seen over DDS: a controller gain changes the commanded
  wrench, an IMU noise density the covariance in ``imu/data``, the estimator's diagnostics
  rate the spacing of its ``/diagnostics`` and ``publish_tf`` its ``/tf`` publisher;
- invalid values (out of range, NaN, wrong type, or refused by a cross-parameter check) of
  dynamic parameters come back refused with a reason, and the old value stays in effect
  (live state and ``GetParameters`` alike).

Each node runs in this process on its own executor thread (between callbacks, as in its
``main``); the tables below name every parameter, so a new one fails here until it is
classified and, if dynamic, shown to take effect.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:  # conftest is not importable at run time under --import-mode=importlib
    from conftest import PeerProcess

pytestmark = pytest.mark.timeout(120)

CLIENT = Path(__file__).with_name("param_client.py")
VEHICLES = Path(__file__).resolve().parents[1] / "config" / "vehicles"
VEHICLE = VEHICLES / "quadrotor_x.yaml"
STARTUP_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 60.0
WAIT_S = 15.0


class Client:
    """The client process: ``set`` and ``get`` over the target node's services."""

    def __init__(self, peer: PeerProcess, node: str) -> None:
        self.peer = peer
        self.node = node
        peer.expect("READY", STARTUP_TIMEOUT_S)

    def _ask(self, request: dict[str, Any]) -> Any:
        self.peer.send(json.dumps({"node": self.node, **request}))
        self.peer.expect("DONE", ANSWER_TIMEOUT_S)
        return json.loads(self.peer.lines[-2])

    def set(self, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """name -> {"successful", "reason"}, one service call per parameter."""
        answers = self._ask({"op": "set", "parameters": [list(p) for p in values.items()]})
        return dict(zip(values, answers, strict=True))

    def get(self, names: list[str]) -> dict[str, Any]:
        return dict(zip(names, self._ask({"op": "get", "names": names}), strict=True))


@pytest.fixture
def client(spawn_peer: Callable[[str, list[str]], PeerProcess]) -> Callable[[str], Client]:
    return lambda node: Client(spawn_peer("param_client", [str(CLIENT)]), node)


@contextmanager
def hosted(node_factory: Callable[[Any], Any], step: Callable[[Any], bool] | None = None
           ) -> Iterator[tuple[Any, Any]]:
    """The node (made by ``node_factory(context)``) and a probe node on one executor spun on
    a thread; ``step(node)`` runs between spins (the simulator's ``advance``)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    node = probe = executor = None
    stop = threading.Event()
    thread = None
    try:
        node = node_factory(context)
        probe = Node("probe", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(probe)

        def spin() -> None:
            while not stop.is_set() and context.ok():
                stepped = step(node) if step is not None else False
                executor.spin_once(timeout_sec=0.0 if stepped else 0.005)

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        yield node, probe
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=WAIT_S)
        if executor is not None:
            executor.shutdown()
        for each in (probe, node):
            if each is not None:
                each.destroy_node()
        rclpy.try_shutdown(context=context)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT_S} s waiting for {what}")
        time.sleep(0.005)


def same(a: Any, b: Any) -> bool:
    """Equal as parameter values: sequences element-wise, floats to 1e-9, NaN equal."""
    if isinstance(a, list | tuple | np.ndarray) or isinstance(b, list | tuple | np.ndarray):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9,
                                                                  abs_tol=1e-12)
    return bool(a == b)


def sweep(node: Any, client: Client, new_values: dict[str, Any],
          live_state: Callable[[Any], dict[str, Any]], later: frozenset[str] = frozenset()
          ) -> None:
    """Set every parameter of ``new_values`` from the client; read-only ones must be refused
    with rclpy's reason and leave the value as it was, dynamic ones accepted and applied
    (``later``: accepted, shown applied by the caller once they are in use)."""
    specs = node.parameters.specs
    before = live_state(node)
    results = client.set(new_values)
    after = live_state(node)
    for name, value in new_values.items():
        result = results[name]
        if specs[name].read_only:
            assert not result["successful"], f"read-only {name} was accepted"
            assert result["reason"] == f"Trying to set a read-only parameter: {name}.", name
            assert not same(node.parameters[name], value), name
        else:
            assert result["successful"], f"{name}: {result['reason']}"
            if name in later:
                continue
            assert name in after, f"no live state shown for dynamic parameter {name}"
            assert same(after[name], value), f"{name}: live {after[name]!r}, set {value!r}"
            assert not same(before[name], value), f"{name}: {value!r} is not a new value"


def refusals(node: Any, client: Client, invalid_values: dict[str, Any],
             live_state: Callable[[Any], dict[str, Any]]) -> None:
    """Invalid values of dynamic parameters: refused with a reason, nothing changes."""
    before = live_state(node)
    stored = client.get(list(invalid_values))
    results = client.set(invalid_values)
    for name, result in results.items():
        assert not node.parameters.specs[name].read_only, name
        assert not result["successful"], f"{name} = {invalid_values[name]!r} was accepted"
        assert result["reason"], f"{name}: refused without a reason"
    after = live_state(node)
    assert all(same(before[name], after[name]) for name in before), "the live state changed"
    assert all(same(a, b) for a, b in zip(client.get(list(invalid_values)).values(),
                                          stored.values(), strict=True))


def covers_every_parameter(node: Any, *tables: dict[str, Any]) -> None:
    declared = set(node.parameters.specs)
    given = set().union(*tables)
    assert given == declared, f"missing {declared - given}, unknown {given - declared}"


# ------------------------------------------------------------------ controller

CONTROLLER_READ_ONLY = {
    "vehicle_file": str(VEHICLES / "hexarotor.yaml"), "rate_hz": 50.0,
    "odometry_source": "ground_truth", "takeoff_duration_s": 2.0, "takeoff_delay_s": 0.5,
}
# The figure-eight stays chosen: its parameters show in the live mission.
CONTROLLER_DYNAMIC: dict[str, Any] = {
    "figure_eight_size_m": 1.5, "figure_eight_period_s": 10.0, "figure_eight_height_m": 2.0,
    "figure_eight_center": [0.5, -0.5], "figure_eight_ramp_s": 5.0, "yaw_rad": 0.5,
    "hover_position": [1.0, 2.0, 3.0], "waypoints": [0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0],
    "speed_mps": 2.0, "odometry_timeout_s": 2.0, "telemetry_rate_hz": 25.0,
    "diagnostics_period_s": 0.5, "gains.position": [5.0, 5.0, 5.0],
    "gains.velocity": [3.0, 3.0, 3.0], "gains.attitude": [100.0, 100.0, 50.0],
    "gains.angular_rate": [20.0, 20.0, 10.0],
}
CONTROLLER_PLANS = ({"trajectory": "waypoints"}, {"trajectory": "hover"})


def controller_state(node: Any) -> dict[str, Any]:
    from mav_dynamics.trajectories import FigureEight, Hover, Waypoints

    gains = node.controller.gains
    mission = node.mission
    attitude = mission.reference(0.0).attitude
    state = {
        "trajectory": node.plan_name,
        "yaw_rad": math.atan2(attitude[1, 0], attitude[0, 0]),
        "gains.position": gains.position, "gains.velocity": gains.velocity,
        "gains.attitude": gains.attitude, "gains.angular_rate": gains.angular_rate,
        "telemetry_rate_hz": node.parameters["rate_hz"] / node.parameters.settings.telemetry_every,
        # Read where they are used (odometry age check, diagnostics scheduling).
        "odometry_timeout_s": node.parameters["odometry_timeout_s"],
        "diagnostics_period_s": node.parameters["diagnostics_period_s"],
    }
    if isinstance(mission, FigureEight):
        state.update({
            "figure_eight_size_m": mission.size, "figure_eight_period_s": mission.period,
            "figure_eight_height_m": mission.origin[2],
            "figure_eight_center": mission.origin[:2], "figure_eight_ramp_s": mission.ramp})
    elif isinstance(mission, Waypoints):
        first = mission.moves[0]
        points = [first.start.position, *(move.target for move in mission.moves)]
        distance = float(np.linalg.norm(first.target - first.start.position))
        state.update({"waypoints": np.concatenate(points),
                      "speed_mps": 1.875 * distance / first.duration})
    elif isinstance(mission, Hover):
        state["hover_position"] = mission.reference(0.0).position
    return state


def test_controller_parameters_at_run_time(client: Callable[[str], Client]) -> None:
    from geometry_msgs.msg import WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter

    from mav_dynamics.model import TreeModel
    from mav_dynamics.ros.controller_node import ControllerNode
    from mav_dynamics.vehicle_file import load_vehicle
    from mav_ros_common.qos import RELIABLE_10

    def make(context: Any) -> Any:
        return ControllerNode(context=context, parameter_overrides=[
            Parameter("vehicle_file", value=str(VEHICLE)),
            Parameter("takeoff_delay_s", value=0.0)])

    parameters = client("/controller")
    with hosted(make) as (node, probe):
        covers_every_parameter(node, CONTROLLER_READ_ONLY, CONTROLLER_DYNAMIC,
                               *CONTROLLER_PLANS)
        # The other trajectories' parameters show once they are chosen (below).
        sweep(node, parameters, {**CONTROLLER_READ_ONLY, **CONTROLLER_DYNAMIC},
              controller_state, later=frozenset({"hover_position", "waypoints", "speed_mps"}))
        for plan in CONTROLLER_PLANS:  # hover_position, waypoints, speed_mps show now
            sweep(node, parameters, plan, controller_state)
            state = controller_state(node)
            names = {"waypoints": ("waypoints", "speed_mps"), "hover": ("hover_position",)}
            for name in names[plan["trajectory"]]:
                assert same(state[name], CONTROLLER_DYNAMIC[name]), name
        refusals(node, parameters, {
            "speed_mps": 50.0, "yaw_rad": math.nan, "gains.position": "strong",
            "waypoints": [0.0, 0.0, 1.0, 2.0], "trajectory": "circle",
            "telemetry_rate_hz": 0.0}, controller_state)

        # Over DDS: at rest on the hover point, rising at 0.5 m/s, the thrust is the hover
        # thrust minus m kv_z 0.5: doubling kv_z doubles that deviation in the wrench.
        wrenches: list[Any] = []
        probe.create_subscription(WrenchStamped, "controller/wrench", wrenches.append,
                                  RELIABLE_10)
        odometry = probe.create_publisher(Odometry, "trident_ekf/odometry", RELIABLE_10)
        wait_until(lambda: odometry.get_subscription_count() > 0
                   and probe.count_publishers("controller/wrench") > 0, "discovery")
        message = Odometry()
        message.header.stamp = probe.get_clock().now().to_msg()
        message.header.frame_id, message.child_frame_id = "map", "base_link"
        pose = message.pose.pose
        pose.position.x, pose.position.y, pose.position.z = CONTROLLER_DYNAMIC["hover_position"]
        pose.orientation.w = 1.0
        message.twist.twist.linear.z = 0.5
        odometry.publish(message)
        wait_until(lambda: len(wrenches) >= 3, "wrenches on the odometry")
        model = TreeModel(load_vehicle(VEHICLE))
        hover = float((-model.locked_inertia() @ model.gravity_twist(np.eye(3)))[5])
        before = wrenches[-1].wrench.force.z - hover
        assert before < 0.0
        count = len(wrenches)
        assert parameters.set({"gains.velocity": [3.0, 3.0, 6.0]})["gains.velocity"][
            "successful"]
        wait_until(lambda: len(wrenches) >= count + 2, "wrenches after the change")
        after = wrenches[-1].wrench.force.z - hover
        assert after / before == pytest.approx(2.0, rel=0.02)


# ------------------------------------------------------------------ simulator

SIMULATOR_READ_ONLY = {
    "vehicle_file": str(VEHICLES / "hexarotor.yaml"), "integrator": "rk4",
    "physics_rate_hz": 2000.0, "seed": 7, "initial_position": [1.0, 2.0, 0.0],
    "initial_yaw": 0.5, "lockstep_period_s": 0.02, "datum": [47.0, 8.0, 400.0],
    "imu_rate_hz": 100.0, "imu_mount_position": [0.1, 0.0, 0.0],
    "imu_mount_rotation_xyzw": [0.0, 0.0, 1.0, 0.0], "gnss_rate_hz": 5.0,
    "gnss_latency_s": 0.1, "gnss_antenna_position": [0.0, 0.0, 0.1],
    "scenario": "gusty", "vehicles": "hexarotor,quadrotor_x", "vehicle_spacing_m": 5.0,
}
SIMULATOR_DYNAMIC: dict[str, Any] = {
    "duration_s": 3600.0, "start_wait_s": 2.0, "lockstep": False, "lockstep_timeout_s": 0.5,
    "real_time_factor": 0.5, "ground_truth_rate_hz": 50.0, "markers_rate_hz": 20.0,
    "diagnostics_rate_hz": 2.0, "marker_length_per_newton": 0.1,
    "imu_gyro_noise_density": 0.002, "imu_accel_noise_density": 0.05,
    "imu_gyro_bias_walk": 2e-5, "imu_accel_bias_walk": 2e-4, "imu_gyro_turn_on_sigma": 0.003,
    "imu_accel_turn_on_sigma": 0.05, "imu_gyro_bias_instability": 0.001,
    "imu_accel_bias_instability": 0.01, "imu_bias_correlation_time_s": 100.0,
    "imu_gyro_range": 30.0, "imu_accel_range": 100.0, "gnss_horizontal_sigma_m": 0.8,
    "gnss_vertical_sigma_m": 1.5, "gnss_correlated_horizontal_sigma_m": 0.3,
    "gnss_correlated_vertical_sigma_m": 0.4, "gnss_correlation_time_s": 30.0,
    "gnss_velocity_sigma_mps": 0.1, "gnss_outages": [100.0, 200.0],
    "gnss_publish_during_outage": False, "fault_gnss_outage_s": 2.0,
    "fault_imu_spike_gyro": [1.0, 0.0, 0.0], "fault_imu_spike_accel": [0.0, 5.0, 0.0],
}
IMU_FIELDS = ("gyro_noise_density", "accel_noise_density", "gyro_bias_walk",
              "accel_bias_walk", "gyro_turn_on_sigma", "accel_turn_on_sigma",
              "gyro_bias_instability", "accel_bias_instability", "bias_correlation_time_s",
              "gyro_range", "accel_range")
GNSS_FIELDS = ("horizontal_sigma_m", "vertical_sigma_m", "correlated_horizontal_sigma_m",
               "correlated_vertical_sigma_m", "correlation_time_s", "velocity_sigma_mps")


def simulator_state(node: Any) -> dict[str, Any]:
    simulator = node.simulator
    imu, gnss = simulator.imu.config, simulator.gnss.config
    assert (simulator.config.imu, simulator.config.gnss) == (imu, gnss)  # kept over ~/reset
    rate = simulator.config.physics_rate_hz
    settings = node._settings
    return {
        "duration_s": node.duration_s, "start_wait_s": node.start_wait_s,
        "lockstep": node.lockstep,
        "lockstep_timeout_s": node.lockstep_timeout_s, "real_time_factor": node._pace,
        "ground_truth_rate_hz": rate / settings.truth_every,
        "markers_rate_hz": rate / settings.markers_every,
        "diagnostics_rate_hz": rate / settings.diagnostics_every,
        "marker_length_per_newton": node._marker_scale,
        **{f"imu_{field}": getattr(imu, field) for field in IMU_FIELDS},
        **{f"gnss_{field}": getattr(gnss, field) for field in GNSS_FIELDS},
        "gnss_outages": [t for window in gnss.outages for t in window],
        "gnss_publish_during_outage": gnss.publish_during_outage,
        "fault_gnss_outage_s": node._outage_s, "fault_imu_spike_gyro": node._spike[0],
        "fault_imu_spike_accel": node._spike[1],
    }


def simulated_sensor_values() -> dict[str, Any]:
    """Every parameter the simulator's optional sensors generate (``<sensor>.*``)."""
    from variational_sim.ros.parameters import SPECS
    from variational_sim.sensors.optional import OPTIONAL_SENSORS

    return values_other_than_default(
        spec for spec in SPECS if spec.name.split(".")[0] in OPTIONAL_SENSORS)


def test_simulator_parameters_at_run_time(client: Callable[[str], Client]) -> None:
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Imu

    from mav_ros_common.qos import SENSOR_DATA
    from variational_sim.ros.simulator_node import SimulatorNode

    def make(context: Any) -> Any:
        return SimulatorNode(context=context, parameter_overrides=[
            Parameter("vehicle_file", value=str(VEHICLE)), Parameter("lockstep", value=True),
            Parameter("real_time_factor", value=1.0)])

    parameters = client("/simulator")
    read_only = {**SIMULATOR_READ_ONLY, **simulated_sensor_values()}
    with hosted(make, step=lambda node: node.advance()) as (node, probe):
        covers_every_parameter(node, read_only, SIMULATOR_DYNAMIC)
        samples: list[Any] = []
        probe.create_subscription(Imu, "imu/data", samples.append, SENSOR_DATA)
        sweep(node, parameters, {**read_only, **SIMULATOR_DYNAMIC}, simulator_state)
        refusals(node, parameters, {
            "lockstep_timeout_s": -1.0, "imu_gyro_noise_density": math.nan,
            "markers_rate_hz": 300.0,  # does not divide the physics rate: build refuses
            "gnss_outages": [5.0, 1.0], "duration_s": "long",
            "gnss_horizontal_sigma_m": 0.0}, simulator_state)

        # Over DDS: the IMU messages carry the new white-noise variance (density^2 rate).
        variance = SIMULATOR_DYNAMIC["imu_accel_noise_density"] ** 2 * 200.0
        wait_until(lambda: any(m.linear_acceleration_covariance[0] == pytest.approx(variance)
                               for m in samples[-5:]), "IMU messages with the new covariance")
        assert node.sim_time > 0.0


# ------------------------------------------------------------------ estimator

def values_other_than_default(specs: Any) -> dict[str, Any]:
    """A valid value other than the default for every spec, so that generated parameters (a
    new aiding source's or simulated sensor's) are swept without editing this test."""
    values: dict[str, Any] = {}
    for spec in specs:
        default = spec.default
        if isinstance(default, bool):
            values[spec.name] = not default
        elif spec.choices:
            values[spec.name] = next(c for c in spec.choices if c != default)
        elif isinstance(default, tuple):
            value = 0.5 * (spec.low or 0.0) + 0.25 * (spec.high or 1.0) + 1e-6
            values[spec.name] = [value] * len(default)
        else:
            low, high = spec.low, spec.high
            assert low is not None, spec.name
            assert high is not None, spec.name
            middle = low + 0.37 * (high - low)
            values[spec.name] = middle if middle != default else low
    return values


def aiding_values() -> dict[str, Any]:
    """Every parameter the estimator's GNSS model and registered aiding sources generate
    (``gnss.*``, ``<source>.*``)."""
    from trident_ekf.ros.parameters import aiding_specs

    return values_other_than_default(aiding_specs())


ESTIMATOR_READ_ONLY = {
    "filter": "baseline", "gnss_bias_sigma_horizontal": 0.2, "gnss_bias_sigma_vertical": 0.3,
    "gnss_bias_correlation_time": 30.0, "level_duration_s": 2.0, "initial_yaw_deg": 10.0,
    "initial_yaw_sigma_deg": 20.0, "still_gyro_rad_s": 0.02, "still_accel_m_s2": 0.5,
    "static_speed_mps": 0.2, "magnetic_yaw_sigma_deg": 20.0, "motion_tilt_sigma_deg": 4.0,
    "subscribe_initial_pose": True, "inputs": "mavros", "mavros_namespace": "/uav1/mavros",
    "px4_namespace": "/uav1/fmu", "gnss_velocity_type": "TwistStamped",
    "gnss_velocity_sigma_mps": 0.2, "input_queue_depth": 50,
    "initial_tilt_sigma_deg": 2.0, "initial_position_sigma_m": 2.0,
    "initial_velocity_sigma_mps": 0.3, "initial_gyro_bias_sigma": 0.01,
    "initial_accel_bias_sigma": 0.2, "imu_rotation_xyzw": [0.0, 0.0, 1.0, 0.0],
    "datum_latitude_deg": 47.0, "datum_longitude_deg": 8.0, "datum_height_m": 400.0,
    **aiding_values(),
}
ESTIMATOR_FILTER = {
    "gyro_noise": 0.002, "accel_noise": 0.03, "gyro_bias_walk": 1e-4, "accel_bias_walk": 1e-3,
    "gyro_sampling_factor": 0.2, "accel_sampling_factor": 0.1,
    "lever_arm": [0.1, 0.0, 0.05], "covariance_decimation": 2, "gate_probability": 0.999,
    "max_imu_interval": 0.2, "max_bridged_gap": 2.0, "gap_rate_sigma": 0.2,
    "gap_accel_sigma": 5.0, "outage_timeout": 3.0, "outage_gnss_periods": 4.0,
    "outage_timeout_floor": 2.0, "divergence_position_sigma": 500.0,
    "max_consecutive_rejections": 10, "reset_on_divergence": False, "history_length": 0.5,
    "gnss_covariance_includes_bias": False,
    "gnss_white_sigma_floor": 0.02, "consistency_probability": 0.999, "gyro_range": 20.0,
    "accel_range": 100.0, "max_imu_stamp_jump": 5.0, "clock_change_samples": 8,
    "imu_timeout": 2.0,
}
ESTIMATOR_NODE = {
    "output_rate_hz": 50.0,
    "diagnostics_rate_hz": 20.0, "map_frame": "world", "odom_frame": "odom_test",
    "world_frame": "odom_test", "base_frame": "base_footprint", "publish_tf": False,
}


def estimator_state(node: Any) -> dict[str, Any]:
    from scipy.stats import chi2

    filter_ = node.session.filter
    config = filter_.config
    # The filter's derived quantities follow its configuration.
    assert filter_._threshold(3) == pytest.approx(chi2.ppf(config.gate_probability, 3))
    assert filter_._q_error[0] == pytest.approx(config.gyro_noise**2)
    return {
        **{name: getattr(config, name) for name in ESTIMATOR_FILTER},
        "output_rate_hz": 1e9 / node._schedule.period_ns,
        "diagnostics_rate_hz": 1e9 / node._diagnostics_timer.timer_period_ns,
        "map_frame": node.parameters["map_frame"], "odom_frame": node.parameters["odom_frame"],
        "world_frame": node._frames[0], "base_frame": node._frames[1],
        "publish_tf": node._tf is not None,
    }


def test_estimator_parameters_at_run_time(client: Callable[[str], Client]) -> None:
    from diagnostic_msgs.msg import DiagnosticArray

    from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC
    from mav_ros_common.qos import RELIABLE_10
    from mav_ros_common.stamps import to_seconds
    from trident_ekf.ros.estimator_node import EstimatorNode

    parameters = client("/trident_ekf")
    with hosted(lambda context: EstimatorNode(context=context)) as (node, probe):
        covers_every_parameter(node, ESTIMATOR_READ_ONLY, ESTIMATOR_FILTER, ESTIMATOR_NODE)
        stamps: list[float] = []
        probe.create_subscription(
            DiagnosticArray, DIAGNOSTICS_TOPIC,
            lambda m: stamps.extend(to_seconds(m.header.stamp) for s in m.status
                                    if s.name == "trident_ekf"), RELIABLE_10)
        wait_until(lambda: probe.count_publishers("/tf") == 1, "the estimator's /tf publisher")
        sweep(node, parameters, {**ESTIMATOR_READ_ONLY, **ESTIMATOR_FILTER, **ESTIMATOR_NODE},
              estimator_state)
        refusals(node, parameters, {
            "gate_probability": 1.5, "gyro_noise": math.nan, "covariance_decimation": 2.5,
            "map_frame": "", "output_rate_hz": True, "lever_arm": [0.0, 0.0]},
                 estimator_state)

        # Over DDS: /diagnostics now comes every 50 ms (node clock), and /tf has no publisher.
        count = len(stamps)
        wait_until(lambda: len(stamps) >= count + 6, "diagnostics at the new rate")
        assert float(np.median(np.diff(stamps[count:]))) == pytest.approx(0.05, abs=0.02)
        wait_until(lambda: probe.count_publishers("/tf") == 0, "/tf without a publisher")
