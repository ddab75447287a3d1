"""trident-replay --inputs px4|mavros gives the replay of the standard bag.

The bags are those of test_autopilot_bags.py (a 20 s slice of the ArduCopter log written as
the standard, PX4 uXRCE-DDS and MAVROS topics, every bag holding the same numbers), each
autopilot bag completed with the standard bag's reference odometry and import summary so
that the replay's comparison and datum are the same. The PX4 bag is replayed with rosbags'
standard types only: its px4_msgs types come from the definitions stored in the bag.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rosbags.typesys import Stores, get_typestore

from mav_ros_common.testing import module_from_file
from trident_ekf.tools import bagio, replay
from trident_ekf.tools.flightlog import read_log, write_bag

HERE = Path(__file__).resolve().parent
COPIED = ("/reference/odometry", bagio.IMPORT_SUMMARY_TOPIC)  # from the standard bag
TUNING = [  # the log's tuning, as test_autopilot_bags.TUNING
    "--gyro-noise", "5e-3", "--accel-noise", "0.22", "--gyro-bias-walk", "1e-4",
    "--accel-bias-walk", "1e-3",
    "--set", "gnss.delay_s=0.2", "--set", "gnss.accuracy_scale=0.25",
    "--set", "gnss.speed_accuracy_scale=0.3", "--set", "gnss.horizontal_floor_m=0.05",
    "--set", "gnss.vertical_floor_m=0.1", "--set", "gnss.speed_floor_mps=0.03",
    "--set", "barometer.noise_sigma_m=0.25", "--set", "magnetometer.heading_sigma_deg=4.5"]
STANDARD = ("/imu/data", "/gnss/fix", "/gnss/vel", bagio.BAROMETER_TOPIC,
            bagio.MAGNETOMETER_TOPIC)
PX4: dict[str, str | None] = dict(zip(STANDARD, (
    "/fmu/out/sensor_combined", "/fmu/out/vehicle_gps_position", None,
    "/fmu/out/vehicle_air_data", "/fmu/out/vehicle_magnetometer"), strict=True))
MAVROS: dict[str, str | None] = dict(zip(STANDARD, (
    "/mavros/imu/data_raw", "/mavros/global_position/raw/fix",
    "/mavros/global_position/raw/gps_vel", "/mavros/imu/static_pressure", "/mavros/imu/mag"),
    strict=True))
SAME = ("status", "imu_messages", "counters", "sources", "aiding", "alignment", "yaw_source",
        "datum", "resets", "events", "log_duration_s", "first_output_after_fix_s",
        "gnss_outage_dropped_messages", "rmse_position_m", "rmse_velocity_m_s",
        "rmse_roll_pitch_deg", "rmse_yaw_deg", "nis_mean")


def autopilot_bags() -> ModuleType:
    """test_autopilot_bags.py, whose bag writers these tests use."""
    return module_from_file(HERE / "test_autopilot_bags.py", "autopilot_bag_writers")


def completed(bag: Path, standard: Path, counterparts: dict[str, str | None],
              output: Path) -> Path:
    """``bag`` in the order of the ``standard`` bag, with its ``COPIED`` topics: each
    standard message is replaced by the next message of its counterpart topic in ``bag``
    (None: left out, e.g. /gnss/vel that PX4's SensorGps carries)."""
    queues: dict[str, deque[tuple[str, bytes]]] = {}
    for topic, msgtype, _, raw in bagio.read_raw(bag, list(bagio.topic_types(bag))):
        queues.setdefault(topic, deque()).append((msgtype, raw))
    with bagio.BagWriter(output) as writer:
        for topic, msgtype, time, raw in bagio.read_raw(standard,
                                                         [*COPIED, *counterparts]):
            target = topic if topic in COPIED else counterparts[topic]
            if target is not None:
                if target != topic:
                    msgtype, raw = queues[target].popleft()
                writer.write_cdr(target, msgtype, time, raw)
    assert not any(queues.values())  # every message of ``bag`` is in the output
    return output


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The slice as the standard bag and as complete PX4 and MAVROS bags."""
    module = autopilot_bags()
    view = module.autopilot_view(read_log(module.LOG))
    directory = tmp_path_factory.mktemp("replay_inputs")
    paths = {"ros": directory / "ros"}
    write_bag(view, paths["ros"])
    module.write_px4_bag(view, directory / "px4_only")  # skips without px4_msgs definitions
    module.write_mavros_bag(view, directory / "mavros_only")
    for name, counterparts in (("px4", PX4), ("mavros", MAVROS)):
        paths[name] = completed(directory / f"{name}_only", paths["ros"], counterparts,
                                directory / name)
    return paths


def run(bag: Path, *arguments: str) -> dict[str, Any]:
    return replay.run(replay.parse_args([str(bag), *TUNING, *arguments]))


def assert_same(summary: dict[str, Any], standard: dict[str, Any]) -> None:
    assert summary["imu_messages"] > 700  # 789 from --start 4 on
    assert summary["counters"]["gnss_position_accepted"] > 45  # 59 with the start and outage
    for key in SAME:
        assert (key in summary) == (key in standard), key
        if key not in standard:
            continue
        value, expected = summary[key], standard[key]
        if isinstance(expected, float) and math.isfinite(expected):
            assert value == pytest.approx(expected, rel=0.0, abs=1e-9), key
        else:
            assert value == expected, key


@pytest.mark.parametrize("extra", [[], ["--start", "4", "--gnss-outage", "8", "3"]],
                         ids=["whole", "start_and_outage"])
def test_autopilot_bags_replay_as_the_standard_bag(bags: dict[str, Path], extra: list[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    standard = run(bags["ros"], *extra)
    assert standard["inputs"] == "ros"
    assert {"rmse_position_m", "rmse_yaw_deg"} <= set(standard)
    assert {"barometer", "magnetometer"} <= set(standard["aiding"])
    mavros = run(bags["mavros"], "--inputs", "mavros", "--gnss-velocity-sigma", "0.25", *extra)
    assert mavros["inputs"] == "mavros"
    assert_same(mavros, standard)
    # Only rosbags' standard types: px4_msgs come from the bag's message definitions.
    monkeypatch.setattr(bagio, "TYPESTORE", get_typestore(Stores.ROS2_JAZZY))
    px4 = run(bags["px4"], "--inputs", "px4", *extra)
    assert px4["inputs"] == "px4"
    assert_same(px4, standard)
    if extra:
        assert standard["gnss_outage_dropped_messages"] > 0


def test_px4_types_come_from_the_bag(bags: dict[str, Path],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bagio, "TYPESTORE", get_typestore(Stores.ROS2_JAZZY))
    store = bagio.bag_typestore(bags["px4"], ["px4_msgs/msg/SensorGps", bagio.IMU])
    assert store is not bagio.TYPESTORE
    assert "px4_msgs/msg/SensorGps" in store.fielddefs
    assert "px4_msgs/msg/SensorGps" not in bagio.TYPESTORE.fielddefs
    assert bagio.bag_typestore(bags["ros"], [bagio.IMU]) is bagio.TYPESTORE
    with pytest.raises(ValueError, match=r"cannot read px4_msgs/msg/Unknown: not a standard"):
        bagio.bag_typestore(bags["px4"], ["px4_msgs/msg/Unknown"])


def test_a_bag_without_the_profile_imu_topic_exits_1(bags: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert replay.main([str(bags["ros"]), "--inputs", "mavros"]) == 1
    error = capsys.readouterr().err
    assert "the bag has no imu topic '/mavros/imu/data_raw'" in error
    assert "'/imu/data'" in error  # what the bag has
    assert "Traceback" not in error
    assert replay.main([str(bags["mavros"]), "--inputs", "px4", "--px4-namespace",
                        "/uav1/fmu"]) == 1
    assert "'/uav1/fmu/out/sensor_combined'" in capsys.readouterr().err


def test_standard_topic_options_are_for_the_ros_profile(bags: dict[str, Path]) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.parse_args([str(bags["px4"]), "--inputs", "px4", "--imu-topic", "/imu"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit):
        replay.parse_args([str(bags["px4"]), "--inputs", "px4", "--px4-namespace", "a//b"])
