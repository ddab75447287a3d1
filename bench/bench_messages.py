"""Publishing the graph's high-rate messages (issue 16): serialized templates against message
objects, per publication, in the same run.

Usage: python bench/bench_messages.py [--repeats K] [--output-dir DIR]

Each case publishes on a real rclpy publisher (Fast DDS, no subscriber: the cost of building
and serializing the message and handing it to DDS):

- estimator output (``trident_ekf.ros.convert.EstimateMessages``: odometry with both 6x6
  covariances, and /tf) against the node's previous path: the odometry CDR encoded per
  output (``trident_ekf.tools.cdr.encode_odometry``) and a /tf message object built per
  output;
- simulator ground truth (``variational_sim.ros.convert.OdometryMessages`` and
  ``TransformMessages``) against refilling one Odometry and one TFMessage object each.

Before timing, both sides of a case must read back as the same messages.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from geometry_msgs.msg import TransformStamped
from harness import Case, append_and_show, run, write_report
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from tf2_msgs.msg import TFMessage

from mav_ros_common.stamps import fill_ns, fill_seconds
from trident_ekf.ros.convert import EstimateMessages
from trident_ekf.tools import cdr
from variational_sim.ros.convert import OdometryMessages, TransformMessages

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
STAMP_NS = 12_345_000_000
TIME_S = 12.345
MAP, BASE, TRUTH = "map", "base_link", "base_link_ground_truth"


def _as_messages(published: list[Any]) -> list[Any]:
    """(odometry, tf) published as bytes or objects -> message objects."""
    odometry, tf = published
    if isinstance(odometry, bytes):
        odometry = deserialize_message(odometry, Odometry)
    if isinstance(tf, bytes):
        tf = deserialize_message(tf, TFMessage)
    return [odometry, tf]


def _agree(ours: list[Any], baseline: list[Any]) -> bool:
    return bool(_as_messages(ours) == _as_messages(baseline))


def _estimate() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"position": rng.normal(size=3), "attitude": rng.normal(size=4),
            "pose_cov": rng.normal(size=(6, 6)), "linear_body": rng.normal(size=3),
            "angular_body": rng.normal(size=3), "twist_cov": rng.normal(size=(6, 6))}


def estimator_case(node: Node) -> Case:
    odometry_pub = node.create_publisher(Odometry, "bench/odometry", 10)
    tf_pub = node.create_publisher(TFMessage, "bench/tf", 10)
    estimate = _estimate()
    outputs = EstimateMessages(MAP, BASE)

    def ours() -> list[Any]:
        outputs.fill(estimate)
        published = [outputs.odometry.stamped(STAMP_NS), outputs.transform.stamped(STAMP_NS)]
        odometry_pub.publish(published[0])
        tf_pub.publish(published[1])
        return published

    def previous() -> list[Any]:
        odometry = cdr.encode_odometry(STAMP_NS, MAP, BASE, estimate)
        transform = TransformStamped()
        fill_ns(transform.header.stamp, STAMP_NS)
        transform.header.frame_id, transform.child_frame_id = MAP, BASE
        t, r = transform.transform.translation, transform.transform.rotation
        t.x, t.y, t.z = estimate["position"].tolist()
        r.x, r.y, r.z, r.w = estimate["attitude"].tolist()
        tf = TFMessage(transforms=[transform])
        odometry_pub.publish(odometry)
        tf_pub.publish(tf)
        return [odometry, tf]

    return Case("estimator output: odometry + /tf", 1, ours, previous, _agree)


def truth_case(node: Node) -> Case:
    odometry_pub = node.create_publisher(Odometry, "bench/truth", 10)
    tf_pub = node.create_publisher(TFMessage, "bench/truth_tf", 10)
    rng = np.random.default_rng(4)
    position, orientation, twist = rng.normal(size=3), rng.normal(size=4), rng.normal(size=6)
    odometry_messages = OdometryMessages(MAP, TRUTH)
    tf_messages = TransformMessages(MAP, TRUTH)
    odometry = Odometry()
    odometry.header.frame_id, odometry.child_frame_id = MAP, TRUTH
    transform = TransformStamped()
    transform.header.frame_id, transform.child_frame_id = MAP, TRUTH
    tf = TFMessage(transforms=[transform])

    def ours() -> list[Any]:
        published = [odometry_messages.fill(TIME_S, position, orientation, twist),
                     tf_messages.fill(TIME_S, position, orientation)]
        odometry_pub.publish(published[0])
        tf_pub.publish(published[1])
        return published

    def refilled() -> list[Any]:
        fill_seconds(odometry.header.stamp, TIME_S)
        p, q = odometry.pose.pose.position, odometry.pose.pose.orientation
        p.x, p.y, p.z = position.tolist()
        q.x, q.y, q.z, q.w = orientation.tolist()
        w, v = odometry.twist.twist.angular, odometry.twist.twist.linear
        w.x, w.y, w.z = twist[:3].tolist()
        v.x, v.y, v.z = twist[3:].tolist()
        fill_seconds(transform.header.stamp, TIME_S)
        t, r = transform.transform.translation, transform.transform.rotation
        t.x, t.y, t.z = position.tolist()
        r.x, r.y, r.z, r.w = orientation.tolist()
        odometry_pub.publish(odometry)
        tf_pub.publish(tf)
        return [odometry, tf]

    return Case("simulator ground truth: odometry + /tf", 1, ours, refilled, _agree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timing loops (default 7)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    try:
        node = Node("bench_messages", context=context)
        results = run([estimator_case(node), truth_case(node)], args.repeats)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    _, markdown = write_report(results, "Publishing the graph's high-rate messages",
                               "message objects (previous path)", args.output_dir, "messages")
    append_and_show(markdown, ["", "Per publication of both messages on rclpy publishers "
                                   "(Fast DDS, no subscriber)."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
