"""trident-import and trident-replay end to end on the 31 s PX4 SITL ULog of the repository's
data/ (see data/README.md); their output bags (rosbag2 layout, no silent overwrite) and the
diagnostics topic they share with the live estimator node."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rosbags.highlevel import AnyReader

from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC as DIAGNOSTICS
from trident_ekf.core.earth import ecef_to_enu, geodetic_to_ecef
from trident_ekf.ros.estimator_node import EstimatorNode
from trident_ekf.tools import bagio, cdr, import_cli, replay, report
from trident_ekf.tools.flightlog import read_log
from trident_ekf.tools.frames import attitude_ned_frd_to_enu_flu, euler_enu

DATA = Path(__file__).resolve().parents[3] / "data"
ULOG = DATA / "px4_sitl" / "sample_px4_events.ulg"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    bag = tmp_path_factory.mktemp("import") / "sitl"
    assert import_cli.main([str(ULOG), "--output", str(bag)]) == 0
    return bag


def test_px4_attitude_converts_to_enu_flu():
    # PX4: yaw 90 deg in NED (nose east), level -> ENU yaw 0 (nose east).
    q_wxyz = [np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)]
    assert np.allclose(euler_enu(attitude_ned_frd_to_enu_flu(q_wxyz)), 0.0, atol=1e-12)
    # Nose up in FRD/NED (positive pitch) stays nose up in FLU/ENU (negative ENU pitch about
    # the left axis means nose up): check the nose vector's up component instead.
    pitch_up = [np.cos(0.1), 0.0, np.sin(0.1), 0.0]
    q = attitude_ned_frd_to_enu_flu(pitch_up)
    nose_up = -np.sin(euler_enu(q)[1])
    assert nose_up == pytest.approx(np.sin(0.2), abs=1e-12)


def test_import_writes_standard_topics_in_ros_conventions(imported):
    counts = bagio.topic_counts(imported)
    assert counts["/imu/data"] == 7783
    assert counts["/gnss/fix"] == counts["/gnss/vel"] > 100
    assert counts["/reference/odometry"] > 100
    stamps, accel = [], []
    for _, _, message in bagio.read_messages(imported, ["/imu/data"]):
        stamps.append(bagio.stamp_ns(message))
        a = message.linear_acceleration
        accel.append((a.x, a.y, a.z))
        if len(accel) == 200:
            break
    assert np.all(np.diff(stamps) > 0)
    assert np.mean(accel, axis=0)[2] == pytest.approx(9.8, abs=0.3)  # REP-145: +g up, FLU
    fix = next(m for _, _, m in bagio.read_messages(imported, ["/gnss/fix"]))
    assert fix.position_covariance_type == 2
    assert fix.position_covariance[0] > 0.0
    odometry = next(m for _, _, m in bagio.read_messages(imported, ["/reference/odometry"]))
    assert odometry.header.frame_id == "map"
    assert odometry.child_frame_id == "base_link"


def test_replay_tracks_the_autopilot_and_writes_bag_and_report(imported, tmp_path):
    output, report = tmp_path / "out", tmp_path / "report"
    assert replay.main([str(imported), "--output", str(output), "--report", str(report),
                        "--yaw", "90"]) == 0
    summary = json.loads((report / "report.json").read_text())
    assert summary["status"] == "nominal"
    assert summary["reference_samples"] > 50
    assert summary["rmse_position_m"] < 1.0
    assert summary["rmse_velocity_m_s"] < 0.2
    assert max(summary["rmse_roll_pitch_deg"]) < 1.0
    assert summary["rmse_yaw_deg"] < 5.0
    assert summary["nis_gated"] == 0
    for name in ("report.md", "trajectory.png", "errors.png", "biases.png", "nis.png"):
        assert (report / name).stat().st_size > 0
    counts = bagio.topic_counts(output)
    assert counts["/trident_ekf/odometry"] > 500
    # /diagnostics at 1 Hz of stamp time, in every phase (the node's default rate).
    assert abs(counts[DIAGNOSTICS] - summary["log_duration_s"]) <= 2.5
    assert [topic for topic in counts if "diagnostics" in topic] == [DIAGNOSTICS]
    odometry = next(m for _, _, m in bagio.read_messages(output, ["/trident_ekf/odometry"]))
    covariance = np.asarray(odometry.pose.covariance).reshape(6, 6)
    assert np.all(np.diag(covariance) > 0.0)
    assert np.allclose(covariance, covariance.T)


def test_the_report_figures_drawn_by_workers_are_those_drawn_here(imported, tmp_path,
                                                                    monkeypatch):
    """A reported replay hands its figures to worker processes (``report_workers``): the
    same files as drawn in this process."""
    made: list[tuple[report.ReportSeries, dict]] = []
    monkeypatch.setattr(replay, "_write_report_staged",
                        lambda series, summary, directory, workers: made.append((series, summary)))
    assert replay.main([str(imported), "--report", str(tmp_path / "unused"), "--yaw", "90"]) == 0
    (series, summary), = made
    here, there = tmp_path / "here", tmp_path / "there"
    report.write_report(series, summary, here)
    with report.report_workers(2) as workers:
        assert workers.parallel
        report.write_report(series, summary, there, workers)
    for name in report.PLOTS:
        assert (here / name).read_bytes() == (there / name).read_bytes(), name
    assert (here / "report.md").read_text() == (there / "report.md").read_text()


def test_replay_rejects_a_bag_without_the_imu_topic(imported, tmp_path, capsys):
    assert replay.main([str(imported), "--imu-topic", "/nope"]) == 1
    assert "no imu topic '/nope'" in capsys.readouterr().err
    assert replay.main([str(imported), "--imu-topic", "/gnss/fix"]) == 1
    assert "is sensor_msgs/msg/NavSatFix, not sensor_msgs/msg/Imu" in capsys.readouterr().err


def test_fast_decoding_of_the_imported_bag_matches_rosbags(imported):
    """Replay reads IMU and reference odometry with ``cdr``: same values as rosbags."""
    for topic, msgtype, _, raw in bagio.read_raw(imported, ["/imu/data"]):
        message = bagio.TYPESTORE.deserialize_cdr(raw, msgtype)
        w, a = message.angular_velocity, message.linear_acceleration
        assert cdr.decode_imu(raw) == (bagio.stamp_ns(message), (w.x, w.y, w.z),
                                       (a.x, a.y, a.z)), topic
    for _, msgtype, _, raw in bagio.read_raw(imported, ["/reference/odometry"]):
        message = bagio.TYPESTORE.deserialize_cdr(raw, msgtype)
        stamp, values = cdr.decode_odometry(raw)
        pose = message.pose.pose
        assert stamp == bagio.stamp_ns(message)
        assert values[cdr.POSITION].tolist() == [pose.position.x, pose.position.y,
                                                 pose.position.z]
        assert values[cdr.ORIENTATION].tolist() == [pose.orientation.x, pose.orientation.y,
                                                    pose.orientation.z, pose.orientation.w]
        linear = message.twist.twist.linear
        assert values[cdr.LINEAR].tolist() == [linear.x, linear.y, linear.z]


def test_import_rejects_unsupported_logs(tmp_path, capsys):
    log = tmp_path / "flight.txt"
    log.write_text("not a log")
    assert import_cli.main([str(log), "--output", str(tmp_path / "bag")]) == 1
    assert "unsupported log" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()
    with pytest.raises(SystemExit):  # argparse: missing file
        import_cli.main([str(tmp_path / "missing.ulg"), "--output", str(tmp_path / "bag")])


def test_dataflash_import_is_consistent_with_the_onboard_estimate():
    """ArduPilot log171: GNSS velocity and position agree with the EKF1 estimate in ENU
    (NED->ENU, vertical sign, datum alignment). Roll/pitch are not compared at rest: the
    onboard estimate carries a board trim of a few degrees that the raw IMU does not."""
    log = read_log(DATA / "ardupilot" / "log171.bin")
    nearest = np.clip(np.searchsorted(log.reference_time, log.gnss_time), 0,
                      log.reference_time.size - 1)
    velocity_difference = log.gnss_velocity_enu - log.reference_velocity_enu[nearest]
    assert np.median(np.linalg.norm(velocity_difference[:, :2], axis=1)) < 0.5
    vertical = np.corrcoef(log.gnss_velocity_enu[:, 2], log.reference_velocity_enu[nearest, 2])
    assert vertical[0, 1] > 0.3  # the receiver's vertical speed is noisy, but its sign is up
    assert np.max(np.linalg.norm(log.gnss_velocity_enu[:, :2], axis=1)) > 5.0  # it did fly
    gnss_enu = ecef_to_enu([geodetic_to_ecef(*g) for g in log.gnss_geodetic], log.datum)
    position_difference = gnss_enu - log.reference_position_enu[nearest]
    assert np.median(np.linalg.norm(position_difference, axis=1)) < 3.0
    assert np.ptp(log.reference_position_enu[:, 2]) > 5.0  # climbed: the up sign matters
    climb = np.corrcoef(gnss_enu[:, 2], log.reference_position_enu[nearest, 2])[0, 1]
    assert climb > 0.8


def test_replay_of_the_manoeuvring_px4_sitl_log_meets_the_attitude_targets(tmp_path,
                                                                           replay_pool):
    """PX4 EKF2 replay data (Gazebo iris, hovers, then moves at up to 3.3 m/s) started with a
    45 deg yaw error: roll/pitch stay under 1 deg RMS against EKF2 (which also has a
    magnetometer) and yaw is under 3 deg once the manoeuvres have made it observable. With the
    log's magnetometer (fused by default) yaw is right during the hover too. The two replays
    run side by side in the pool."""
    bag, report, aided_report = tmp_path / "bag", tmp_path / "report", tmp_path / "aided"
    log = DATA / "px4_sitl" / "test_replay_data_ekf_gsf_reset.csv"
    assert import_cli.main([str(log), "--output", str(bag)]) == 0
    unaided_run = replay_pool.submit(replay.main, [
        str(bag), "--report", str(report), "--yaw", "45",
        "--no-aid", "magnetometer", "--no-aid", "barometer"])
    aided_run = replay_pool.submit(replay.main,
                                   [str(bag), "--report", str(aided_report), "--yaw", "45"])
    assert unaided_run.result() == 0
    assert aided_run.result() == 0
    summary = json.loads((report / "report.json").read_text())
    assert summary["reference_samples"] > 100
    assert max(summary["rmse_roll_pitch_deg"]) < 1.0
    assert summary["rmse_yaw_deg"] > 20.0  # wrong while hovering: not observable
    assert summary["rmse_yaw_deg_last_fifth"] < 3.0
    assert summary["rmse_position_m"] < 2.5
    aided = json.loads((aided_report / "report.json").read_text())
    assert aided["aiding"] == ["barometer", "gnss_position", "gnss_velocity", "magnetometer"]
    assert aided["rmse_yaw_deg"] < 5.0
    assert max(aided["rmse_roll_pitch_deg"]) < 1.5


# ----- output bags: rosbag2 layout, no silent overwrite ------------------------------------
def _bag_files(directory: Path) -> set[str]:
    return {path.name for path in directory.iterdir()}


def test_import_writes_the_rosbag2_layout_and_strips_an_mcap_suffix(tmp_path, capsys):
    """``--output flight.mcap`` makes flight/flight_0.mcap + flight/metadata.yaml (as
    ``ros2 bag record`` would), says so, and rosbags' AnyReader reads it back."""
    assert import_cli.main([str(ULOG), "--output", str(tmp_path / "flight.mcap")]) == 0
    assert "writing " + str(tmp_path / "flight") in capsys.readouterr().err
    bag = tmp_path / "flight"
    assert _bag_files(tmp_path) == {"flight"}  # no flight.mcap, no staging left over
    assert _bag_files(bag) == {"flight_0.mcap", "metadata.yaml"}
    metadata = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["storage_identifier"] == "mcap"
    assert metadata["relative_file_paths"] == ["flight_0.mcap"]
    with AnyReader([bag], default_typestore=bagio.TYPESTORE) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts["/imu/data"] == 7783
        connection = next(c for c in reader.connections if c.topic == "/gnss/fix")
        _, _, raw = next(reader.messages(connections=[connection]))
        fix = reader.deserialize(raw, connection.msgtype)
    assert fix.latitude == pytest.approx(47.3977, abs=1e-3)  # PX4 SITL home, Zurich
    # trident-replay takes the bag by the name it was asked for, or by its MCAP file.
    for name in ("flight.mcap", "flight/flight_0.mcap"):
        args = replay.parse_args([str(tmp_path / name)])
        assert args.bag == bag


def test_import_refuses_an_existing_output_with_exit_2(tmp_path, capsys):
    existing = tmp_path / "bag"
    existing.mkdir()
    (existing / "metadata.yaml").write_text("kept\n")
    assert import_cli.main([str(ULOG), "--output", str(existing)]) == 2
    error = capsys.readouterr().err
    assert "already exists" in error
    assert "--force" in error
    assert (existing / "metadata.yaml").read_text() == "kept\n"
    # --force never deletes what is not a bag (no metadata.yaml, not empty).
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine\n")
    assert import_cli.main([str(ULOG), "--output", str(other), "--force"]) == 2
    assert "not a rosbag2 directory" in capsys.readouterr().err
    assert (other / "todo.txt").read_text() == "mine\n"
    # trident-replay's --output follows the same rule (argparse usage error: exit 2).
    with pytest.raises(SystemExit) as exit_info:
        replay.parse_args([str(tmp_path), "--output", str(existing)])
    assert exit_info.value.code == 2
    assert "already exists" in capsys.readouterr().err


def test_import_with_force_replaces_an_existing_bag(tmp_path):
    bag = tmp_path / "bag"
    log = DATA / "px4_sitl" / "test_replay_data_iris_gps.csv"
    assert import_cli.main([str(log), "--output", str(bag)]) == 0
    (bag / "stale.txt").write_text("from the previous run\n")
    assert import_cli.main([str(ULOG), "--output", str(bag), "--force"]) == 0
    assert _bag_files(bag) == {"bag_0.mcap", "metadata.yaml"}
    assert bagio.topic_counts(bag)["/imu/data"] == 7783  # the ULog's, not the CSV's
    assert _bag_files(tmp_path) == {"bag"}  # the old bag and the staging are gone
    assert import_cli.main([str(ULOG), "--output", str(tmp_path / "empty"), "--force"]) == 0


def test_a_failed_import_or_write_leaves_no_partial_bag(tmp_path, capsys):
    log = tmp_path / "test_replay_data_broken.csv"
    log.write_text("4000,baro,1.0\n")  # neither imu nor gps rows
    assert import_cli.main([str(log), "--output", str(tmp_path / "bag")]) == 1
    assert "no imu or gps rows" in capsys.readouterr().err
    # An error in the middle of writing discards the staged bag and keeps the old one.
    old = tmp_path / "old"
    old.mkdir()
    (old / "metadata.yaml").write_text("kept\n")
    def interrupted_write() -> None:
        with bagio.BagWriter(old, overwrite=True) as writer:
            writer.write("/imu/data", bagio.IMU, 1,
                         bagio.imu_message(1, (0, 0, 0), (0, 0, 9.8)))
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        interrupted_write()
    assert _bag_files(tmp_path) == {log.name, "old"}
    assert _bag_files(old) == {"metadata.yaml"}


# ----- diagnostics: trident-replay writes where the live node publishes --------------------
@pytest.fixture
def estimator_node() -> Iterator[EstimatorNode]:
    """The live node with its default parameters, in a private rclpy context on a random
    localhost-only DDS domain (nothing is exchanged: only its publishers are inspected)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        patch.delenv("ROS_STATIC_PEERS", raising=False)
        context = Context()
        rclpy.init(context=context)
        node = EstimatorNode(context=context)
        try:
            yield node
        finally:
            node.destroy_node()
            rclpy.try_shutdown(context=context)


def test_replay_diagnostics_topic_is_the_live_nodes(estimator_node):
    published = {publisher.topic_name for publisher in estimator_node.publishers
                 if publisher.msg_type is DiagnosticArray}
    assert published == {DIAGNOSTICS}
    assert replay.DIAGNOSTICS_TOPIC is DIAGNOSTICS
