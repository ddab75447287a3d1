"""The floor under ``mav-sim``'s real-time factor (issue 16): the graph's own message traffic
passed through rclpy and Fast DDS in one process with no computation, against the ``mav-sim``
run that produced it.

Usage: python bench/bench_graph_floor.py [--duration S] [--repeats K] [--output-dir DIR]

- baseline: ``mav-sim`` (the default demo, recorded, no report) for ``--duration`` s of sim
  time; wall time of its lock-step loop. Its bag holds every message the graph published,
  each stamped with the sim time at which the recorder took it.
- floor: in a fresh context, one publisher per topic of that bag (the graph's QoS), one raw
  subscription per (node, topic) the graph subscribes to (the graph's nodes are built, not
  run, to read them; the callbacks only count) and the product's ``BagRecorder`` on every
  topic, on one EventsExecutor as in ``mav-sim``. The bag's messages are published
  serialized, one sim-time stamp at a time in bag order, and the executor spins until every
  subscription has taken them before the next stamp's go out. That is the lock-step's
  cadence without its causal chain (fewer executor wake-ups than the graph has), and no
  message is built, deserialized or computed on: what the graph would cost if its nodes
  cost nothing. Once more without the recorder: what recording adds to it.
- cores: ``bench_pipeline.pipeline``, the same simulator, estimator and controller cores in
  one Python loop without ROS.

Each figure is the least wall time per sim second over ``--repeats`` rounds. The ceiling of
this design is one over (floor + cores) per sim second: the real-time factor ``mav-sim``
would have if every node's ROS shell were free. Output: graph_floor.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench_graph import _isolated_dds
from bench_pipeline import pipeline
from harness import Result, append_and_show, write_report

from mav_bringup.graph.components import default_graph_file, load_graph
from mav_bringup.graph.recorder import BagRecorder, TopicSpec, message_class, topic_specs
from mav_bringup.graph.runner import RunOptions, _create_nodes, run

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
TARGET = 15.0  # issue 16: mav-sim default demo, recorded
SPIN_TIMEOUT_S = 0.05
GROUP_TIMEOUT_S = 10.0  # a stamp's messages not all taken by then: the floor run is broken

Group = list[tuple[str, bytes]]


def baseline_run(duration_s: float, output_dir: Path) -> tuple[float, float, Path]:
    """(sim s, wall s of the lock-step loop, bag) of one recorded ``mav-sim`` run."""
    result = run(RunOptions(duration_s=duration_s, output_dir=output_dir, overwrite=True,
                            record=True, report=False, progress=False))
    assert result.bag is not None
    return result.sim_time_s, result.wall_time_s, result.bag


def graph_topics() -> tuple[list[TopicSpec], Counter[str]]:
    """The topics the default graph's nodes publish, and how many subscriptions each topic
    has among them (the nodes are built in a private context, then destroyed)."""
    import rclpy

    options = RunOptions(duration_s=1.0)
    parameters = options.node_parameters()
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    try:
        nodes = {}
        for component in load_graph(default_graph_file()):
            nodes.update(_create_nodes(component, options, parameters, context))
        specs = topic_specs(nodes.values())
        consumers = Counter(subscription.topic_name for node in nodes.values()
                            for subscription in node.subscriptions)
        for node in nodes.values():
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return specs, consumers


def stamp_groups(bag: Path) -> tuple[list[Group], float]:
    """The bag's messages grouped by bag time (one lock-step boundary each), in bag order,
    and the sim time they span (s)."""
    from rosbags.rosbag2 import Reader

    groups: list[Group] = []
    first = last = None
    with Reader(bag) as reader:
        for connection, stamp, data in reader.messages():
            if stamp != last:
                groups.append([])
                first = stamp if first is None else first
                last = stamp
            groups[-1].append((connection.topic, bytes(data)))
    if first is None or last is None:
        raise RuntimeError(f"bag {bag} holds no message")
    return groups, (last - first) * 1e-9


def floor_run(groups: list[Group], specs: list[TopicSpec], consumers: Counter[str],
              workdir: Path, record: bool = True) -> float:
    """Wall time (s) to pass every group through the floor graph (see the module); without
    ``record``, no recorder: only the graph's own subscriptions take the messages."""
    import rclpy
    from rclpy.experimental.events_executor import EventsExecutor
    from rclpy.node import Node

    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    taken = [0]

    def count(_data: bytes) -> None:
        taken[0] += 1

    try:
        nodes = [Node(name, context=context, start_parameter_services=False)
                 for name in ("floor_source", "floor_sink", "recorder")]
        source, sink, recorder_node = nodes
        publishers: dict[str, Any] = {}
        for spec in specs:
            cls = message_class(spec.msgtype)
            publishers[spec.topic] = source.create_publisher(cls, spec.topic,
                                                             spec.subscription_qos())
            for _ in range(consumers[spec.topic]):
                sink.create_subscription(cls, spec.topic, count, spec.subscription_qos(),
                                         raw=True)
        recorder = BagRecorder(recorder_node, workdir / "floor_bag") if record else None
        if recorder is not None:
            recorder.record(specs)

        def received() -> int:
            return taken[0] + (sum(recorder.counts.values()) if recorder is not None else 0)

        executor = EventsExecutor(context=context)
        for node in nodes:
            executor.add_node(node)
        expected = {topic: consumers[topic] + record for topic in publishers}
        _spin_until(executor, lambda: all(publisher.get_subscription_count() >= expected[topic]
                                          for topic, publisher in publishers.items()))
        start = time.perf_counter()
        for group in groups:
            due = received()
            for topic, data in group:
                publishers[topic].publish(data)
                due += expected[topic]
            _spin_until(executor, lambda due=due: received() >= due)
        wall = time.perf_counter() - start
        if recorder is not None:
            recorder.close()
        for node in nodes:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return wall


def _spin_until(executor: Any, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"messages not taken within {GROUP_TIMEOUT_S} s")
        executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)


def _rounds(repeats: int) -> Iterator[int]:
    for k in range(repeats):
        print(f"round {k + 1}/{repeats}", file=sys.stderr)
        yield k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0,
                        help="sim time of the mav-sim run, s (default 20, > 0)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds (default 2, >= 1)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if not args.duration > 0.0 or args.repeats < 1:
        parser.error("--duration must be > 0 s and --repeats >= 1")
    _isolated_dds()
    specs, consumers = graph_topics()
    best = dict.fromkeys(("mav-sim", "floor", "floor, unrecorded", "cores"), math.inf)
    messages, span, rates = 0, 0.0, Counter[str]()
    with tempfile.TemporaryDirectory() as workdir:
        for k in _rounds(args.repeats):
            sim, wall, bag = baseline_run(args.duration, Path(workdir) / f"mav_sim_{k}")
            best["mav-sim"] = min(best["mav-sim"], wall / sim)
            groups, span = stamp_groups(bag)
            rates = Counter(topic for group in groups for topic, _ in group)
            messages = sum(rates.values())
            floor = floor_run(groups, specs, consumers, Path(workdir) / f"floor_{k}")
            best["floor"] = min(best["floor"], floor / span)
            floor = floor_run(groups, specs, consumers, Path(workdir), record=False)
            best["floor, unrecorded"] = min(best["floor, unrecorded"], floor / span)
            sim, wall = pipeline(args.duration)
            best["cores"] = min(best["cores"], wall / sim)
    ceiling = best["floor"] + best["cores"]
    results = [Result(f"{name}, per sim s", messages, best[name], best["mav-sim"])
               for name in ("floor", "cores")]
    results.append(Result("floor + cores (the ceiling), per sim s", messages, ceiling,
                          best["mav-sim"]))
    json_path, markdown = write_report(
        results, "mav-sim against its floor: the graph's messages alone, and the cores alone",
        "mav-sim, recorded", args.output_dir, "graph_floor",
        statistic="wall time per sim second, least of the rounds")
    factors = {"mav-sim, recorded": 1.0 / best["mav-sim"], "floor (messages only)":
               1.0 / best["floor"], "floor without the recorder":
               1.0 / best["floor, unrecorded"], "cores only (pipeline)": 1.0 / best["cores"],
               "ceiling (floor + cores)": 1.0 / ceiling}
    report = json.loads(json_path.read_text())
    report.update(real_time_factors=factors, target=TARGET, messages=messages,
                  messages_per_sim_s={topic: n / span for topic, n in sorted(rates.items())},
                  subscriptions={spec.topic: consumers[spec.topic] + 1 for spec in specs})
    json_path.write_text(json.dumps(report, indent=2))
    lines = ["", f"n = messages in the bag ({messages} over {args.duration:g} s of sim time; "
             "each is taken by the graph's subscriptions of its topic and the recorder).", "",
             "| case | real-time factor |", "|---|---:|"]
    lines += [f"| {name} | {factor:.2f}x |" for name, factor in factors.items()]
    lines += ["", f"Issue 16 target for mav-sim, recorded: >= {TARGET:g}x.", "",
              "| topic | messages per sim s | subscriptions (with the recorder) |",
              "|---|---:|---:|"]
    lines += [f"| {spec.topic} | {rates[spec.topic] / span:.0f} | "
              f"{consumers[spec.topic] + 1} |" for spec in specs]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
