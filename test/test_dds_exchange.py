"""Two processes exchange sensor_msgs/Imu and tf2_msgs/TFMessage over real DDS (loopback).

The publisher and subscriber are separate interpreters (test/dds_peer.py), so
this covers serialisation, type support loading (including the locally built
tf2_msgs), discovery and QoS matching exactly as two ROS nodes would see them.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # conftest is not importable at run time under --import-mode=importlib
    from conftest import PeerProcess

PEER_SCRIPT = Path(__file__).with_name("dds_peer.py")
COUNT = 50
# Every step is bounded; these are generous for a loaded 2-core CI machine.
STARTUP_TIMEOUT_S = 15.0
EXCHANGE_TIMEOUT_S = 15.0
# Best-effort Imu: loss is allowed by the QoS, but not much of it on loopback.
MIN_SENSOR_FRACTION = 0.8

pytestmark = pytest.mark.timeout(60)


def _load_peer_module() -> ModuleType:
    # By path: the workspace runs pytest with --import-mode=importlib, so test/
    # is not on sys.path; dds_peer imports no ROS module at load time.
    spec = importlib.util.spec_from_file_location("dds_peer", PEER_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer = _load_peer_module()


def _exchange(
    spawn_peer: Callable[[str, list[str]], PeerProcess], tmp_path: Path, imu_qos: str
) -> dict[str, list[dict[str, Any]]]:
    """Run one publisher and one subscriber process; return what the subscriber got."""
    # A missing capability is a failure, not a skip: tools/bootstrap provides both.
    if importlib.util.find_spec("rclpy") is None:
        pytest.fail("rclpy is not importable: run tools/bootstrap (ROS 2 wheels)")
    if importlib.util.find_spec("tf2_msgs") is None:
        pytest.fail("tf2_msgs is not importable: run tools/bootstrap (it builds tf2_msgs)")
    out = tmp_path / "received.json"
    common = ["--count", str(COUNT), "--imu-qos", imu_qos, "--timeout", "25"]
    # Both start at once: interpreter start-up and rclpy import overlap.
    sub = spawn_peer("subscriber", [str(PEER_SCRIPT), "sub", *common, "--out", str(out)])
    pub = spawn_peer("publisher", [str(PEER_SCRIPT), "pub", *common])
    sub.expect("READY", STARTUP_TIMEOUT_S)
    # Discovery both ways before any sample is sent, so best effort loses
    # nothing to a reader that has not matched the writer yet.
    pub.expect("MATCHED", STARTUP_TIMEOUT_S)
    sub.expect("MATCHED", STARTUP_TIMEOUT_S)
    pub.send("GO")
    pub.expect("PUBLISHED", EXCHANGE_TIMEOUT_S)
    # The publisher stays up until the subscriber is done (see dds_peer).
    sub.send("STOP")
    sub.expect("DONE", EXCHANGE_TIMEOUT_S)
    received: dict[str, list[dict[str, Any]]] = json.loads(out.read_text())
    counts = {topic: len(messages) for topic, messages in received.items()}
    assert sub.wait(EXCHANGE_TIMEOUT_S) == 0, f"received {counts}; {sub.stderr_text()}"
    pub.send("EXIT")
    assert pub.wait(EXCHANGE_TIMEOUT_S) == 0, pub.stderr_text()
    return received


def _assert_exact(
    received: list[dict[str, Any]],
    index_of: Callable[[dict[str, Any]], int],
    expected: Callable[[int], dict[str, Any]],
    min_count: int,
) -> None:
    """Each received message equals the one sent with its index; order kept; enough arrived."""
    indices = [index_of(m) for m in received]
    assert len(received) >= min_count, f"only {len(received)} of {COUNT} arrived: {indices}"
    assert indices == sorted(set(indices)), f"duplicated or reordered: {indices}"
    assert all(0 <= i < COUNT for i in indices), indices
    for message in received:
        # Exact comparison: float64 fields and JSON (repr) round trips are lossless.
        assert message == expected(index_of(message))


def test_reliable_exchange_delivers_every_message_exactly(
    spawn_peer: Callable[[str, list[str]], PeerProcess], tmp_path: Path
) -> None:
    received = _exchange(spawn_peer, tmp_path, imu_qos="reliable")

    _assert_exact(received["imu"], peer.imu_index, peer.expected_imu, min_count=COUNT)
    _assert_exact(received["tf"], peer.tf_index, peer.expected_tf, min_count=COUNT)
    assert [peer.imu_index(m) for m in received["imu"]] == list(range(COUNT))
    assert [peer.tf_index(m) for m in received["tf"]] == list(range(COUNT))
    # Spot checks that make a failure message readable, beyond the dict equality.
    first_imu = received["imu"][0]
    assert first_imu["frame_id"] == "imu_link"
    assert first_imu["orientation_covariance"][0] == -1.0
    assert received["imu"][7]["stamp"] == [peer.BASE_SEC + 7, 7 * 37_000_001]
    last_tf = received["tf"][-1]["transforms"]
    assert [t["child_frame_id"] for t in last_tf] == ["base_link", f"imu_link_{COUNT - 1}"]


def test_sensor_qos_imu_arrives_mostly_and_exactly(
    spawn_peer: Callable[[str, list[str]], PeerProcess], tmp_path: Path
) -> None:
    # qos_profile_sensor_data (best effort, depth 5) as the nodes use it for
    # IMU streams: tolerate a little loss, but whatever arrives is exact.
    received = _exchange(spawn_peer, tmp_path, imu_qos="sensor")

    min_imu = int(MIN_SENSOR_FRACTION * COUNT)
    _assert_exact(received["imu"], peer.imu_index, peer.expected_imu, min_count=min_imu)
    # /tf stays reliable, so it is still complete.
    _assert_exact(received["tf"], peer.tf_index, peer.expected_tf, min_count=COUNT)
