"""One side of the two-process DDS exchange in ``test_dds_exchange.py``.

Run as ``python dds_peer.py {pub,sub} --count N [--imu-qos {reliable,sensor}]``.
The publisher sends N ``sensor_msgs/Imu`` on ``/imu/data`` and N
``tf2_msgs/TFMessage`` on ``/tf`` whose contents are a pure function of the
message index (``expected_imu`` / ``expected_tf``); the subscriber writes
what it received, in arrival order, as JSON (``--out``). Floats survive the
JSON round trip exactly (``repr``), so the test can compare with ``==``.

Handshake with the test over stdin/stdout, one line each, so that nothing
depends on fixed sleeps:

- ``sub`` prints ``READY`` once subscribed and ``MATCHED`` once it has matched
  a publisher on both topics.
- ``pub`` prints ``MATCHED`` once both publishers have a subscriber, waits for
  ``GO``, publishes everything, prints ``PUBLISHED`` and stays alive until
  ``EXIT``: a reliable writer that left early could take unsent or unrepaired
  samples with it, and waiting for acknowledgements instead costs a heartbeat
  period (3 s in Fast DDS).
- After ``STOP`` the subscriber leaves as soon as it holds all N TFMessages
  (reliable) and all N Imu, or, with best-effort Imu, once no Imu arrived for
  a short idle time; at the latest at its deadline. It writes ``--out`` and
  prints ``DONE``; the test then sends ``EXIT`` to the publisher.

Only the standard library is imported at module level so that the test can
load the message builders without initialising ROS.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

IMU_TOPIC = "/imu/data"
TF_TOPIC = "/tf"
# Distinct, known stamps: second BASE_SEC + i, nanoseconds spread over [0, 1e9).
BASE_SEC = 1_700_000_000
TF_SEC_OFFSET = 500_000
# Lossy (best-effort) runs pace the publisher so the depth-5 reader history
# of qos_profile_sensor_data is not overrun by a burst.
SENSOR_PUBLISH_PERIOD_S = 0.002
# After STOP, a best-effort Imu subscriber keeps spinning until no Imu arrived
# for this long (samples still in flight on loopback land within milliseconds).
DRAIN_IDLE_S = 0.3

ImuDict = dict[str, Any]
TfDict = dict[str, Any]


def _stamp(i: int, offset_sec: int = 0) -> list[int]:
    """Stamp of message i as [sec, nanosec]."""
    return [BASE_SEC + offset_sec + i, (i * 37_000_001) % 1_000_000_000]


def _axis_angle_quaternion(axis: tuple[float, float, float], angle: float) -> list[float]:
    """Unit quaternion [x, y, z, w] (scalar last, Hamilton) for a rotation of angle rad."""
    norm = math.sqrt(sum(a * a for a in axis))
    s = math.sin(angle / 2.0) / norm
    return [axis[0] * s, axis[1] * s, axis[2] * s, math.cos(angle / 2.0)]


def expected_imu(i: int) -> ImuDict:
    """Contents of the i-th Imu: SI units, FLU sensor frame, specific force (REP-145)."""
    orientation_cov = [i + k / 8.0 for k in range(9)]
    if i == 0:
        orientation_cov[0] = -1.0  # "orientation absent" convention travels too
    return {
        "stamp": _stamp(i),
        "frame_id": "imu_link",
        "orientation": _axis_angle_quaternion((1.0, 2.0, 3.0), 0.01 * i),
        "orientation_covariance": orientation_cov,
        "angular_velocity": [0.1 * i, -0.2 * i, 0.3 + i / 1024.0],  # rad/s
        "angular_velocity_covariance": [(i + k) * 1e-4 for k in range(9)],
        "linear_acceleration": [0.01 * i, -0.02 * i, 9.80665 + i / 4096.0],  # m/s^2
        "linear_acceleration_covariance": [(i * k + 1) * 1e-3 for k in range(9)],
    }


def expected_tf(i: int) -> TfDict:
    """Contents of the i-th TFMessage: map->base_link and base_link->imu_link (metres)."""
    return {
        "transforms": [
            {
                "stamp": _stamp(i, TF_SEC_OFFSET),
                "frame_id": "map",
                "child_frame_id": "base_link",
                "translation": [0.5 * i, -0.25 * i, 10.0 + i / 3.0],
                "rotation": _axis_angle_quaternion((0.0, 0.0, 1.0), 0.05 * i),
            },
            {
                "stamp": _stamp(i, TF_SEC_OFFSET),
                "frame_id": "base_link",
                "child_frame_id": f"imu_link_{i}",
                "translation": [0.01, -0.02, 0.03 + i * 1e-3],
                "rotation": _axis_angle_quaternion((1.0, 0.0, 0.0), math.pi - 0.001 * i),
            },
        ]
    }


def imu_index(received: ImuDict) -> int:
    """Index i of a received Imu dict (from its stamp)."""
    return int(received["stamp"][0]) - BASE_SEC


def tf_index(received: TfDict) -> int:
    """Index i of a received TFMessage dict (from its first transform's stamp)."""
    return int(received["transforms"][0]["stamp"][0]) - BASE_SEC - TF_SEC_OFFSET


# --------------------------------------------------------------------------- ROS side
# Everything below needs rclpy and the message packages; imported lazily.


def _xyz(v: Any) -> list[float]:
    return [v.x, v.y, v.z]


def _xyzw(q: Any) -> list[float]:
    return [q.x, q.y, q.z, q.w]


def _set_xyz(v: Any, values: list[float]) -> None:
    v.x, v.y, v.z = values


def _set_xyzw(q: Any, values: list[float]) -> None:
    q.x, q.y, q.z, q.w = values


def _set_stamp(stamp: Any, values: list[int]) -> None:
    stamp.sec, stamp.nanosec = values


def imu_to_msg(d: ImuDict) -> Any:
    """sensor_msgs/Imu built from an ``expected_imu`` dict."""
    from sensor_msgs.msg import Imu

    msg = Imu()
    _set_stamp(msg.header.stamp, d["stamp"])
    msg.header.frame_id = d["frame_id"]
    _set_xyzw(msg.orientation, d["orientation"])
    msg.orientation_covariance = d["orientation_covariance"]
    _set_xyz(msg.angular_velocity, d["angular_velocity"])
    msg.angular_velocity_covariance = d["angular_velocity_covariance"]
    _set_xyz(msg.linear_acceleration, d["linear_acceleration"])
    msg.linear_acceleration_covariance = d["linear_acceleration_covariance"]
    return msg


def imu_to_dict(msg: Any) -> ImuDict:
    """Inverse of ``imu_to_msg``: plain Python values, comparable with ``==``."""
    return {
        "stamp": [msg.header.stamp.sec, msg.header.stamp.nanosec],
        "frame_id": msg.header.frame_id,
        "orientation": _xyzw(msg.orientation),
        "orientation_covariance": [float(c) for c in msg.orientation_covariance],
        "angular_velocity": _xyz(msg.angular_velocity),
        "angular_velocity_covariance": [float(c) for c in msg.angular_velocity_covariance],
        "linear_acceleration": _xyz(msg.linear_acceleration),
        "linear_acceleration_covariance": [float(c) for c in msg.linear_acceleration_covariance],
    }


def tf_to_msg(d: TfDict) -> Any:
    """tf2_msgs/TFMessage built from an ``expected_tf`` dict."""
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage

    transforms = []
    for t in d["transforms"]:
        ts = TransformStamped()
        _set_stamp(ts.header.stamp, t["stamp"])
        ts.header.frame_id = t["frame_id"]
        ts.child_frame_id = t["child_frame_id"]
        _set_xyz(ts.transform.translation, t["translation"])
        _set_xyzw(ts.transform.rotation, t["rotation"])
        transforms.append(ts)
    return TFMessage(transforms=transforms)


def tf_to_dict(msg: Any) -> TfDict:
    """Inverse of ``tf_to_msg``."""
    return {
        "transforms": [
            {
                "stamp": [t.header.stamp.sec, t.header.stamp.nanosec],
                "frame_id": t.header.frame_id,
                "child_frame_id": t.child_frame_id,
                "translation": _xyz(t.transform.translation),
                "rotation": _xyzw(t.transform.rotation),
            }
            for t in msg.transforms
        ]
    }


def _qos(imu_qos: str) -> tuple[Any, Any]:
    """(Imu QoS, /tf QoS) per docs/conventions.md; 'reliable' makes the Imu stream lossless."""
    from rclpy.qos import (
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,
        qos_profile_sensor_data,
    )

    tf_qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=100,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )
    if imu_qos == "sensor":
        return qos_profile_sensor_data, tf_qos
    # Depth 100 on both ends: a burst of up to 100 never overwrites unacknowledged samples.
    return tf_qos, tf_qos


class _StdinLines:
    """Reads stdin lines on a daemon thread so waits on them can be bounded."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for line in sys.stdin:
            with self._cond:
                self._lines.append(line.strip())
                self._cond.notify_all()

    def seen(self, word: str) -> bool:
        with self._cond:
            return word in self._lines

    def wait_for(self, word: str, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: word in self._lines, timeout=timeout_s)


def _say(word: str) -> None:
    print(word, flush=True)


def run_publisher(count: int, imu_qos: str, timeout_s: float) -> int:
    """Publisher side of the handshake (module docstring); returns the exit code."""
    import rclpy
    from sensor_msgs.msg import Imu
    from tf2_msgs.msg import TFMessage

    deadline = time.monotonic() + timeout_s
    stdin = _StdinLines()
    rclpy.init()
    node = rclpy.create_node("dds_peer_publisher")
    try:
        imu_q, tf_q = _qos(imu_qos)
        imu_pub = node.create_publisher(Imu, IMU_TOPIC, imu_q)
        tf_pub = node.create_publisher(TFMessage, TF_TOPIC, tf_q)
        # Discovery: poll the matched-subscription counts (DDS threads do the work).
        while imu_pub.get_subscription_count() == 0 or tf_pub.get_subscription_count() == 0:
            if time.monotonic() > deadline:
                print("publisher: no subscriber matched before the deadline", file=sys.stderr)
                return 2
            time.sleep(0.01)
        _say("MATCHED")
        if not stdin.wait_for("GO", max(0.0, deadline - time.monotonic())):
            print("publisher: no GO from the test before the deadline", file=sys.stderr)
            return 2
        for i in range(count):
            imu_pub.publish(imu_to_msg(expected_imu(i)))
            tf_pub.publish(tf_to_msg(expected_tf(i)))
            if imu_qos == "sensor":
                time.sleep(SENSOR_PUBLISH_PERIOD_S)
        _say("PUBLISHED")
        if not stdin.wait_for("EXIT", max(0.0, deadline - time.monotonic())):
            print("publisher: no EXIT from the test before the deadline", file=sys.stderr)
            return 2
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def run_subscriber(count: int, imu_qos: str, timeout_s: float, out: Path) -> int:
    """Subscriber side of the handshake (module docstring); returns the exit code."""
    import rclpy
    from sensor_msgs.msg import Imu
    from tf2_msgs.msg import TFMessage

    deadline = time.monotonic() + timeout_s
    stdin = _StdinLines()
    received: dict[str, list[dict[str, Any]]] = {"imu": [], "tf": []}
    last_imu_rx = [time.monotonic()]

    def on_imu(msg: Any) -> None:
        received["imu"].append(imu_to_dict(msg))
        last_imu_rx[0] = time.monotonic()

    def on_tf(msg: Any) -> None:
        received["tf"].append(tf_to_dict(msg))

    rclpy.init()
    node = rclpy.create_node("dds_peer_subscriber")
    status = 0
    try:
        imu_q, tf_q = _qos(imu_qos)
        imu_sub = node.create_subscription(Imu, IMU_TOPIC, on_imu, imu_q)
        tf_sub = node.create_subscription(TFMessage, TF_TOPIC, on_tf, tf_q)
        _say("READY")
        matched = False
        stopped = False
        while True:
            rclpy.spin_once(node, timeout_sec=0.02)
            now = time.monotonic()
            if (
                not matched
                and imu_sub.get_publisher_count() > 0
                and tf_sub.get_publisher_count() > 0
            ):
                matched = True
                _say("MATCHED")
            stopped = stopped or stdin.seen("STOP")
            if stopped:
                tf_complete = len(received["tf"]) >= count
                imu_complete = len(received["imu"]) >= count
                # Best effort may lose Imu for good; reliable /tf is always waited for.
                imu_settled = imu_qos == "sensor" and now - last_imu_rx[0] > DRAIN_IDLE_S
                if tf_complete and (imu_complete or imu_settled):
                    break
            if now > deadline:
                print("subscriber: deadline reached before all messages arrived", file=sys.stderr)
                status = 4
                break
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    # Written even on timeout so the test can report what did arrive.
    out.write_text(json.dumps(received))
    _say("DONE")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Publish or subscribe Imu + TFMessage for the two-process DDS test."
    )
    parser.add_argument("role", choices=["pub", "sub"])
    parser.add_argument("--count", type=int, default=50, help="messages per topic (default 50)")
    parser.add_argument(
        "--imu-qos",
        choices=["reliable", "sensor"],
        default="reliable",
        help="Imu QoS: reliable depth 100 (lossless) or qos_profile_sensor_data (best effort)",
    )
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="overall deadline in seconds (default 20)"
    )
    parser.add_argument("--out", type=Path, help="subscriber: JSON file for received messages")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= 100:
        parser.error("--count must be in [1, 100] (QoS depth is 100)")
    if args.role == "pub":
        return run_publisher(args.count, args.imu_qos, args.timeout)
    if args.out is None:
        parser.error("sub needs --out")
    return run_subscriber(args.count, args.imu_qos, args.timeout, args.out)


if __name__ == "__main__":
    sys.exit(main())
