"""Throughput of the live estimator node over real DDS on a real log: how far ahead of real
time a companion computer's estimator can run on the autopilot's streams.

Usage: python bench/bench_estimator_node.py [--log LOG] [--params-file YAML] [--stop S]
                                            [--repeats K] [--output-dir DIR]

The log is imported with trident-import (not timed). Its IMU, GNSS, barometer and
magnetometer messages are then published, serialized, in bag order on the ``ros``
profile's topics to an estimator node (the log's parameter file, ``input_queue_depth``
deep enough to lose nothing; private context, isolated domain), in batches of ``BATCH``:
after each batch this thread spins the node's executor until it has taken them all. The
node publishes its odometry, /tf and /diagnostics as in flight.

Reported: messages per second and the log's real-time factor (log span over wall time)
with the executor of the node's ``main`` (``estimator_node.EXECUTOR``), against the same
with rclpy's SingleThreadedExecutor and against trident-replay in this process (the same
session without ROS; it writes its output bag): what the executor, and rclpy with DDS,
cost per message. Output: estimator_node.{json,md}.
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_replay import import_log, replay_in_process
from harness import Result, append_and_show, write_report

from mav_ros_common.testing import private_context, wait_for
from trident_ekf.tools.bag_reader import BagReader

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOG = ROOT / "data" / "ardupilot" / "log171.bin"
DEFAULT_PARAMETERS = ROOT / "config" / "replay" / "log171.yaml"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
INPUT_TOPICS = ("/imu/data", "/gnss/fix", "/gnss/vel", "/barometer/pressure",
                "/magnetic_field")
BATCH = 200
"""Messages published before waiting for the node (under QUEUE_DEPTH of any one topic)."""
QUEUE_DEPTH = 1000
"""The node's ``input_queue_depth`` here: a batch never overflows it."""
WAIT_S = 60.0


def _message_class(msgtype: str) -> Any:
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def _taken(node: Any) -> int:
    """Input messages the node has taken (malformed ones included)."""
    session = node.session
    return sum(session.received.values()) + sum(
        count for key, count in session.rejected.items() if key.endswith("_malformed"))


def node_run(bag: Path, parameters: Path, stop_s: float, executor_class: Any
             ) -> tuple[int, float, float]:
    """(messages, log span s, wall s) of one run of the node on the bag's inputs."""
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data

    from trident_ekf.ros.estimator_node import EstimatorNode

    reader = BagReader(bag)
    everything = list(reader.raw([t for t in INPUT_TOPICS if t in reader.topics]))
    imu = [stamp for topic, _, stamp, _ in everything if topic == "/imu/data"]
    limit = max(stamp for stamp in imu if (stamp - imu[0]) * 1e-9 <= stop_s)
    timed = [(topic, msgtype, data) for topic, msgtype, stamp, data in everything
             if stamp <= limit]
    span = (limit - imu[0]) * 1e-9
    with private_context() as context:
        node = EstimatorNode(context=context, cli_args=[
            "--ros-args", "--params-file", str(parameters),
            "-p", f"input_queue_depth:={QUEUE_DEPTH}"])
        peer = Node("bench_feed", context=context)
        types = dict((topic, msgtype) for topic, msgtype, _ in timed)
        publishers = {topic: peer.create_publisher(_message_class(msgtype), topic,
                                                   qos_profile_sensor_data)
                      for topic, msgtype in types.items()}
        wait_for(lambda: all(p.get_subscription_count() >= 1 for p in publishers.values())
                 and all(node.count_publishers(t) >= 1 for t in publishers), "discovery",
                 WAIT_S)
        executor = executor_class(context=context)
        executor.add_node(node)
        try:
            start = time.perf_counter()
            for index in range(0, len(timed), BATCH):
                batch = timed[index:index + BATCH]
                for topic, _, data in batch:
                    publishers[topic].publish(data)
                sent, deadline = index + len(batch), time.monotonic() + WAIT_S
                while _taken(node) < sent:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the node took {_taken(node)} of {sent} messages")
                    executor.spin_once(timeout_sec=0.1)
            wall = time.perf_counter() - start
        finally:
            executor.shutdown()
            node.destroy_node()
            peer.destroy_node()
    return len(timed), span, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG,
                        help=f"log trident-import reads (default {DEFAULT_LOG.name})")
    parser.add_argument("--params-file", type=Path, default=DEFAULT_PARAMETERS,
                        help="the estimator's parameter file for the log (default "
                             f"config/replay/{DEFAULT_PARAMETERS.name})")
    parser.add_argument("--stop", type=float, default=120.0,
                        help="seconds of the log after its first IMU sample (> 0, default 120)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (best, >= 1)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.stop <= 0.0 or args.repeats < 1:
        parser.error("--stop and --repeats must be positive")
    from rclpy.executors import SingleThreadedExecutor

    from trident_ekf.ros.estimator_node import EXECUTOR

    def best(executor_class: Any) -> tuple[int, float, float]:
        return min((node_run(bag, args.params_file, args.stop, executor_class)
                    for _ in range(args.repeats)), key=lambda run: run[2])

    with tempfile.TemporaryDirectory() as work:
        bag = import_log(args.log, Path(work))
        count, span, wall = best(EXECUTOR)
        single = best(SingleThreadedExecutor)[2]
        baseline = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            replay_in_process(bag, Path(work) / "replayed", "--params-file",
                              str(args.params_file), "--stop", str(args.stop))
            baseline.append(time.perf_counter() - start)
    replay_wall = min(baseline)
    name = f"{args.log.name} ({span:.0f} s, {count} input messages)"
    results = [Result(f"node ({EXECUTOR.__name__}) vs node (SingleThreadedExecutor), {name}",
                      count, wall, single),
               Result(f"node ({EXECUTOR.__name__}) vs trident-replay in process, {name}",
                      count, wall, replay_wall)]
    _, markdown = write_report(results, "estimator node: real log over DDS",
                               "the other run", args.output_dir, "estimator_node")
    append_and_show(markdown, ["", "| run | messages per second | real-time factor |",
                               "|---|---:|---:|"] + [
        f"| {label} | {count / seconds:.0f} | {span / seconds:.1f}x |"
        for label, seconds in ((f"node, {EXECUTOR.__name__}", wall),
                               ("node, SingleThreadedExecutor", single),
                               ("trident-replay in process", replay_wall))])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
