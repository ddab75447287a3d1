"""Record every topic the graph's nodes publish to a rosbag2 MCAP bag (no ROS install needed).

Subscriptions are raw (serialized CDR, as rosbag2 stores it): deserializing each message
in Python would cost more than the simulation. The topics come from the nodes' own
publishers (``topic_specs``), so nothing depends on DDS discovery timing. Bag time is the
reception time on a given clock (the runner passes the simulator's time, as
``ros2 bag record --use-sim-time`` would record, without a /clock subscription). The
recorder lives in the simulation's process: a separate recording process was measured
slower here (every message then crosses a process boundary).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosTime
from rosbags.interfaces import QosReliability as BagReliability
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)
_NEVER = QosTime(sec=0, nsec=0)
NOT_RECORDED = ("/rosout", "/parameter_events")
"""Infrastructure topics every node has; they say nothing about the flight."""


def type_name(message_class: type) -> str:
    """``sensor_msgs/msg/Imu`` for the rclpy class ``sensor_msgs.msg.Imu``."""
    package = message_class.__module__.split(".")[0]
    return f"{package}/msg/{message_class.__name__}"


def message_class(name: str) -> type:
    """The rclpy class of ``package/msg/Type``."""
    package, _, message = name.split("/")
    cls: type = getattr(importlib.import_module(f"{package}.msg"), message)
    return cls


@dataclass(frozen=True)
class TopicSpec:
    """One recorded topic: name, ``package/msg/Type`` and the publisher's QoS."""

    topic: str
    msgtype: str
    depth: int
    best_effort: bool
    transient_local: bool

    def subscription_qos(self) -> QoSProfile:
        """A QoS that matches the publisher and keeps up to 100 messages in hand."""
        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=max(self.depth, 100),
            reliability=(ReliabilityPolicy.BEST_EFFORT if self.best_effort
                         else ReliabilityPolicy.RELIABLE),
            durability=(DurabilityPolicy.TRANSIENT_LOCAL if self.transient_local
                        else DurabilityPolicy.VOLATILE))

    def bag_qos(self) -> Qos:
        """The publisher's QoS as rosbag2 metadata (so that ``ros2 bag play`` latches
        /tf_static)."""
        return Qos(
            history=QosHistory.KEEP_LAST, depth=self.depth,
            reliability=BagReliability.BEST_EFFORT if self.best_effort else BagReliability.RELIABLE,
            durability=(QosDurability.TRANSIENT_LOCAL if self.transient_local
                        else QosDurability.VOLATILE),
            deadline=_NEVER, lifespan=_NEVER, liveliness=QosLiveliness.AUTOMATIC,
            liveliness_lease_duration=_NEVER, avoid_ros_namespace_conventions=False)


def topic_specs(nodes: Iterable[Node]) -> list[TopicSpec]:
    """Every topic the nodes publish (infrastructure topics aside), sorted by name."""
    specs: dict[str, TopicSpec] = {}
    for node in nodes:
        for publisher in node.publishers:
            name = publisher.topic_name
            if name in specs or name in NOT_RECORDED:
                continue
            profile = publisher.qos_profile
            specs[name] = TopicSpec(
                name, type_name(publisher.msg_type), profile.depth,
                profile.reliability == ReliabilityPolicy.BEST_EFFORT,
                profile.durability == DurabilityPolicy.TRANSIENT_LOCAL)
    return [specs[name] for name in sorted(specs)]


class BagRecorder:
    """Raw subscriptions of ``node`` to the given topics, written to the MCAP bag ``path``
    stamped with ``now_ns()`` (ns; default: the node's clock)."""

    def __init__(self, node: Node, path: Path, now_ns: Callable[[], int] | None = None) -> None:
        if path.exists():
            raise FileExistsError(f"bag {path} already exists (choose another output directory "
                                  "or pass --overwrite)")
        self.path = path
        self.node = node
        self._now_ns = now_ns or (lambda: node.get_clock().now().nanoseconds)
        self.counts: Counter[str] = Counter()
        self._writer = Writer(path, version=8, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._closed = False

    def record(self, specs: Iterable[TopicSpec]) -> list[str]:
        """Subscribe to every topic of ``specs``; returns their names."""
        names = []
        for spec in specs:
            self._subscribe(spec)
            names.append(spec.topic)
        return names

    def _subscribe(self, spec: TopicSpec) -> None:
        connection = self._writer.add_connection(
            spec.topic, spec.msgtype, typestore=TYPESTORE, offered_qos_profiles=[spec.bag_qos()])
        now_ns = self._now_ns
        topic = spec.topic

        def write(data: bytes) -> None:
            if self._closed:
                return
            self._writer.write(connection, now_ns(), data)
            self.counts[topic] += 1

        self.node.create_subscription(message_class(spec.msgtype), topic, write,
                                      spec.subscription_qos(), raw=True)

    def close(self) -> None:
        """Finish the bag (idempotent)."""
        if not self._closed:
            self._closed = True
            self._writer.close()
