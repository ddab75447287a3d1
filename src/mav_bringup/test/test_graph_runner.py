"""The one-process runner's parts: graph file, raw MCAP recording, metrics and report.

The closed loop of the real nodes is tested end to end in test/test_graph_e2e.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Vector3Stamped
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader

from mav_bringup.graph import isolation, metrics
from mav_bringup.graph.components import default_graph_file, load_graph
from mav_bringup.graph.recorder import TYPESTORE, BagRecorder, topic_specs, type_name
from mav_bringup.graph.runner import RunOptions, _overrides, main, parse_args, run
from mav_bringup.graph.series import OdometrySeries
from mav_geometry import quaternion as Q


def _series(time, position, attitude=None, pose_variance=None, velocity=None):
    n = len(time)
    return OdometrySeries(
        time=np.asarray(time, float), position=np.asarray(position, float),
        attitude=np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)) if attitude is None else attitude,
        velocity_body=np.zeros((n, 3)) if velocity is None else velocity,
        pose_variance=np.ones((n, 6)) if pose_variance is None else pose_variance,
        twist_variance=np.ones((n, 6)))


# ----- graph file ---------------------------------------------------------------------------
def test_the_shipped_graph_names_three_nodes_with_existing_parameter_files():
    components = load_graph(default_graph_file())
    assert [c.name for c in components] == ["simulator", "controller", "trident_ekf"]
    for component in components:
        assert component.parameters.is_file()
        assert component.parameters.parent == default_graph_file().resolve().parent


def test_a_graph_file_with_a_missing_parameter_file_is_refused(tmp_path):
    graph = tmp_path / "graph.yaml"
    graph.write_text("nodes:\n  - {name: a, plugin: 'x.y:Z', parameters: missing.yaml}\n")
    with pytest.raises(ValueError, match="parameter file of 'a' not found"):
        load_graph(graph)


def test_a_plugin_without_a_class_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("a: {ros__parameters: {}}\n")
    graph = tmp_path / "graph.yaml"
    graph.write_text("nodes:\n  - {name: a, plugin: 'x.y', parameters: a.yaml}\n")
    with pytest.raises(ValueError, match="module:Class"):
        load_graph(graph)


def test_a_missing_package_names_what_to_install(tmp_path):
    (tmp_path / "a.yaml").write_text("a: {ros__parameters: {}}\n")
    graph = tmp_path / "graph.yaml"
    graph.write_text("nodes:\n  - {name: a, plugin: 'no_such_pkg.node:N', parameters: a.yaml}\n")
    with pytest.raises(ImportError, match="needs package 'no_such_pkg'"):
        load_graph(graph)[0].load_class()


def test_parameter_overrides_become_ros_arguments_after_the_file():
    component = load_graph(default_graph_file())[0]
    arguments = component.ros_arguments({"duration_s": 2.5, "lockstep": True,
                                         "vehicle_file": "quadrotor_x.yaml", "list": [1.0, 2]})
    assert arguments[:3] == ["--ros-args", "--params-file", str(component.parameters)]
    assert arguments[3:] == ["-p", "duration_s:=2.5", "-p", "lockstep:=true",
                             "-p", "vehicle_file:=quadrotor_x.yaml", "-p", "list:=[1.0, 2]"]


def test_command_line_shortcuts_and_set_overrides_reach_the_nodes():
    args = parse_args(["--duration", "12", "--vehicle", "hexarotor.yaml", "--set",
                       "simulator.gnss_rate_hz=5.0", "--set", "controller.rate_hz=50"])
    options = RunOptions(duration_s=args.duration, vehicle=args.vehicle,
                         overrides=_overrides(args.set))
    parameters = options.node_parameters()
    assert parameters["simulator"]["duration_s"] == 12.0
    assert parameters["simulator"]["vehicle_file"] == "hexarotor.yaml"
    assert parameters["controller"]["vehicle_file"] == "hexarotor.yaml"
    assert parameters["simulator"]["gnss_rate_hz"] == 5.0
    assert parameters["controller"]["rate_hz"] == 50
    with pytest.raises(ValueError, match=r"NODE\.PARAM=VALUE"):
        _overrides(["duration=3"])


# ----- recording over real DDS ----------------------------------------------------------------
@pytest.fixture
def ros_context():
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 232))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


def test_the_recorder_writes_every_published_message_byte_exact(ros_context, tmp_path):
    talker = rclpy.create_node("talker", context=ros_context)
    listener = rclpy.create_node("recorder", context=ros_context)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    odometry = talker.create_publisher(Odometry, "odom", 10)
    vector = talker.create_publisher(Vector3Stamped, "latched", latched)
    bag = tmp_path / "bag"
    received_at = iter(range(10**9, 2 * 10**9))
    recorder = BagRecorder(listener, bag, lambda: next(received_at))
    assert recorder.record(topic_specs([talker])) == ["/latched", "/odom"]
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(talker)
    executor.add_node(listener)
    sent = []
    for k in range(20):
        message = Odometry()
        message.header.stamp.nanosec = k
        message.pose.pose.position.x = 0.5 * k
        message.pose.covariance[7] = float(k)
        sent.append(message)
    deadline_spins = 2000
    while odometry.get_subscription_count() == 0 and deadline_spins:
        executor.spin_once(timeout_sec=0.005)
        deadline_spins -= 1
    for message in sent:
        odometry.publish(message)
    vector.publish(Vector3Stamped())
    for _ in range(4000):
        if recorder.counts["/odom"] == len(sent) and recorder.counts["/latched"] == 1:
            break
        executor.spin_once(timeout_sec=0.005)
    recorder.close()
    talker.destroy_node()
    listener.destroy_node()

    with Reader(bag) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        assert types == {"/odom": "nav_msgs/msg/Odometry",
                         "/latched": "geometry_msgs/msg/Vector3Stamped"}
        latched_connection = next(c for c in reader.connections if c.topic == "/latched")
        assert "TRANSIENT_LOCAL" in str(latched_connection.ext.offered_qos_profiles).upper()
        odometry_connection = next(c for c in reader.connections if c.topic == "/odom")
        entries = list(reader.messages(connections=[odometry_connection]))
        received = [TYPESTORE.deserialize_cdr(raw, c.msgtype) for c, _, raw in entries]
        bag_times = [time for _, time, _ in entries]
    assert [m.header.stamp.nanosec for m in received] == list(range(20))
    assert [m.pose.pose.position.x for m in received] == [0.5 * k for k in range(20)]
    assert [m.pose.covariance[7] for m in received] == [float(k) for k in range(20)]
    assert bag_times == sorted(bag_times)
    assert bag_times[0] >= 10**9  # stamped with the given clock, not the node's


def test_the_recorder_refuses_to_overwrite_a_bag(ros_context, tmp_path):
    node = rclpy.create_node("recorder", context=ros_context)
    (tmp_path / "bag").mkdir()
    with pytest.raises(FileExistsError, match="already exists"):
        BagRecorder(node, tmp_path / "bag")
    node.destroy_node()


def test_type_names_follow_the_rosbag2_convention():
    assert type_name(Odometry) == "nav_msgs/msg/Odometry"
    assert type_name(Vector3Stamped) == "geometry_msgs/msg/Vector3Stamped"


# ----- metrics ---------------------------------------------------------------------------------
def test_stamps_are_matched_to_the_nearest_sample_within_tolerance():
    truth = _series([0.0, 0.01, 0.02, 0.03], np.zeros((4, 3)))
    estimate = _series([0.0101, 0.0149, 0.0298, 0.5], np.zeros((4, 3)))
    estimate_index, truth_index = metrics.match(estimate, truth)
    assert estimate_index.tolist() == [0, 2]  # 0.0149 is 4.9 ms from both neighbours: dropped
    assert truth_index.tolist() == [1, 3]


def test_estimate_errors_recover_a_known_offset_and_rotation():
    n = 50
    time = np.arange(n) * 0.01
    truth_attitude = Q.from_rotation_vector(np.column_stack([np.zeros(n), np.zeros(n), time]))
    tilt = np.array([0.02, -0.01, 0.035])  # z beyond 3 sigma = 0.03 rad
    estimate_attitude = Q.multiply(Q.from_rotation_vector(tilt), truth_attitude)
    truth = _series(time, np.zeros((n, 3)), truth_attitude)
    variance = np.tile([0.01, 0.04, 0.25, 1e-4, 1e-4, 1e-4], (n, 1))
    offset = np.array([0.25, -0.5, 1.6])  # z beyond 3 sigma = 1.5 m
    estimate = _series(time, np.tile(offset, (n, 1)), estimate_attitude, variance)
    errors = metrics.estimate_errors(estimate, truth)
    np.testing.assert_allclose(errors.position, np.tile(offset, (n, 1)))
    np.testing.assert_allclose(errors.attitude, np.tile(tilt, (n, 1)), atol=1e-12)
    inside = errors.inside_three_sigma()
    assert inside["position_x"] == 1.0
    assert inside["position_y"] == 1.0
    assert inside["position_z"] == 0.0
    assert inside["attitude_z"] == 0.0
    assert inside["attitude_y"] == 1.0
    assert errors.rms()["position_y"] == pytest.approx(0.5)


def test_tracking_error_interpolates_the_reference_and_stays_inside_its_span():
    reference = _series([1.0, 2.0, 3.0], [[0, 0, 0], [1, 0, 0], [1, 2, 0]])
    truth_time = np.array([0.5, 1.5, 2.5, 3.5])
    truth = _series(truth_time, np.zeros((4, 3)))
    time, error = metrics.tracking_error(truth, reference)
    assert time.tolist() == [1.5, 2.5]
    np.testing.assert_allclose(error, [[-0.5, 0, 0], [-1.0, -1.0, 0]])


def test_a_misspelt_set_is_one_error_naming_the_node_and_the_closest_parameter(
        tmp_path, monkeypatch, capsys):
    """A typo in ``--set`` stops the run before it flies (the default stays in force
    otherwise, silently); a node the graph does not have stops it before ROS starts."""
    monkeypatch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(100, 200)))
    for assignment, words in (
            ("trident_ekf.gyro_nosie=0.5", ["node 'trident_ekf'", "'gyro_nosie'",
                                            "did you mean 'gyro_noise'"]),
            ("tridentekf.gyro_noise=0.5", ["names no node", "'tridentekf'", "trident_ekf"])):
        code = main(["--set", assignment, "--duration", "1", "--no-record", "--quiet",
                     "--output-dir", str(tmp_path / "out"), "--overwrite"])
        assert code == 2
        error_lines = capsys.readouterr().err.strip().splitlines()
        assert len(error_lines) == 1, error_lines
        for word in words:
            assert word in error_lines[0]


def test_sigterm_closes_the_bag_writes_the_report_and_exits_143(tmp_path):
    """What docker stop, systemd and CI send: handled like Ctrl-C (the simulated part is
    recorded and reported), with the shells' exit code for SIGTERM."""
    environment = {**os.environ, "ROS_DOMAIN_ID": str(random.SystemRandom().randint(100, 200))}
    output = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "mav_bringup.graph.runner", "--duration", "600", "--quiet",
         "--output-dir", str(output)], env=environment, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60.0
        while not (output / "bag").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(4.0)  # some seconds of flight
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 143, errors[-2000:]
    assert "terminated: closing the bag" in errors
    summary = json.loads((output / "report" / "summary.json").read_text())
    assert 0.0 < summary["sim_time_s"] < 600.0
    with Reader(output / "bag") as reader:  # closed: metadata written, readable
        assert reader.message_count > 0


def test_an_unset_ros_domain_is_picked_per_process_and_a_set_one_is_kept(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert isolation.run_domain_id() == (42, False)
    monkeypatch.delenv("ROS_DOMAIN_ID")
    domain, picked = isolation.run_domain_id()
    assert picked
    low, high = isolation.AUTOMATIC_DOMAINS
    assert low <= domain <= high
    assert domain == low + os.getpid() % (high - low + 1)


def test_an_output_directory_being_written_is_refused_even_with_overwrite(tmp_path):
    output = tmp_path / "run"
    with isolation.OutputLock(output), pytest.raises(FileExistsError,
                                                    match=f"pid {os.getpid()}"):
        run(RunOptions(duration_s=1.0, output_dir=output, overwrite=True, record=False,
                       report=False, progress=False))
    assert not (output / isolation.LOCK_NAME).exists()  # released
