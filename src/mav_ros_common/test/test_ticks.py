"""``mav_ros_common.ticks``: the tick schedule on a jumping clock, and the ticker over real
DDS on sim time (one tick per period of /clock, after the messages that the ones before the
clock caused) and on wall time."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import pytest
import rclpy
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Int64

from mav_ros_common.qos import RELIABLE_10
from mav_ros_common.testing import private_context
from mav_ros_common.ticks import TOLERANCE_NS, TickSchedule, create_ticker

MS = 1_000_000
WAIT_S = 10.0


def _ticks(schedule: TickSchedule, times_ns: list[int]) -> list[int]:
    return [t for t in times_ns if schedule.due(t)]


def test_a_clock_on_the_grid_ticks_once_per_period_from_one_period_after_the_start() -> None:
    assert _ticks(TickSchedule(10 * MS, 0), list(range(0, 101 * MS, 5 * MS))) == list(
        range(10 * MS, 101 * MS, 10 * MS))


def test_the_grid_is_the_start_plus_whole_periods() -> None:
    assert _ticks(TickSchedule(10 * MS, 3 * MS), [5 * MS, 12 * MS, 13 * MS, 22 * MS,
                                                 23 * MS]) == [13 * MS, 23 * MS]


def test_a_jump_over_several_periods_ticks_once_and_keeps_the_grid() -> None:
    schedule = TickSchedule(10 * MS, 0)
    assert _ticks(schedule, [10 * MS, 47 * MS, 49 * MS, 50 * MS, 60 * MS]) == [
        10 * MS, 47 * MS, 50 * MS, 60 * MS]


def test_a_clock_rounded_just_below_a_grid_time_reaches_it() -> None:
    schedule = TickSchedule(10 * MS, 0)
    assert schedule.due(10 * MS - TOLERANCE_NS)
    assert not schedule.due(20 * MS - TOLERANCE_NS - 1)
    assert schedule.due(20 * MS)


def test_a_clock_going_back_restarts_the_grid_one_period_later() -> None:
    schedule = TickSchedule(10 * MS, 0)
    assert _ticks(schedule, [10 * MS, 20 * MS, 3 * MS, 10 * MS, 13 * MS, 20 * MS, 23 * MS]) == [
        10 * MS, 20 * MS, 13 * MS, 23 * MS]


def test_a_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period"):
        TickSchedule(0, 0)


@pytest.fixture
def context() -> Iterator[rclpy.Context]:
    with private_context() as context:
        yield context


def _spin_until(executor: Executor, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        executor.spin_once(timeout_sec=0.01)


@pytest.mark.parametrize("executor_class", [SingleThreadedExecutor, EventsExecutor])
def test_on_sim_time_it_ticks_per_clock_period_after_what_the_boundary_caused(
        context: rclpy.Context, executor_class: Callable[..., Executor]) -> None:
    """Every 5 ms of sim time a simulator publishes a sample, then /clock; a relay node on
    the same executor answers the sample with a message to the ticked node (as the estimator
    answers the IMU with odometry for the controller). The 10 ms ticker runs once per 10 ms
    with the clock's value; on the EventsExecutor (``mav-sim``'s) after the answer of its
    boundary, which is queued behind the clock: a tick run in the clock's callback would come
    first. The SingleThreadedExecutor runs tasks before ready messages, so no order is
    promised there."""
    node = Node("ticked", context=context,
                parameter_overrides=[Parameter("use_sim_time", value=True)])
    events: list[tuple[str, int]] = []
    node.create_subscription(Int64, "answer", lambda m: events.append(("answer", m.data)),
                             RELIABLE_10)
    create_ticker(node, 0.01, lambda now_ns: events.append(("tick", now_ns)))
    relay = Node("relay", context=context)
    answer = relay.create_publisher(Int64, "answer", RELIABLE_10)
    relay.create_subscription(Int64, "sample", answer.publish, RELIABLE_10)
    peer = Node("simulator", context=context)
    sample = peer.create_publisher(Int64, "sample", RELIABLE_10)
    clock = peer.create_publisher(Clock, "/clock", RELIABLE_10)
    executor = executor_class(context=context)
    for member in (node, relay, peer):
        executor.add_node(member)
    try:
        _spin_until(executor, lambda: clock.get_subscription_count() >= 2
                    and sample.get_subscription_count() >= 1
                    and answer.get_subscription_count() >= 1, "the subscriptions")
        boundaries = list(range(5 * MS, 101 * MS, 5 * MS))
        for stamp_ns in boundaries:
            sample.publish(Int64(data=stamp_ns))
            message = Clock()
            message.clock.sec, message.clock.nanosec = divmod(stamp_ns, 10**9)
            clock.publish(message)
            _spin_until(executor, lambda s=stamp_ns: ("answer", s) in events,
                        f"the answer of {stamp_ns} ns")
        _spin_until(executor, lambda: ("tick", 100 * MS) in events, "the last tick")
    finally:
        executor.shutdown()
        for member in (node, relay, peer):
            member.destroy_node()
    ticks = [t for kind, t in events if kind == "tick"]
    assert ticks == list(range(10 * MS, 101 * MS, 10 * MS))
    if executor_class is EventsExecutor:
        for tick in ticks:
            assert events.index(("answer", tick)) < events.index(("tick", tick))


@pytest.mark.parametrize("executor_class", [SingleThreadedExecutor, EventsExecutor])
def test_on_wall_time_it_is_a_timer(context: rclpy.Context,
                                    executor_class: Callable[..., Executor]) -> None:
    node = Node("ticked", context=context)
    ticks: list[int] = []
    create_ticker(node, 0.01, ticks.append)
    executor = executor_class(context=context)
    executor.add_node(node)
    try:
        _spin_until(executor, lambda: len(ticks) >= 5, "five ticks")
    finally:
        executor.shutdown()
        node.destroy_node()
    assert all(b > a for a, b in itertools.pairwise(ticks))
    assert (ticks[-1] - ticks[0]) / (len(ticks) - 1) >= 0.5 * 10 * MS  # not faster than 10 ms
    assert abs(ticks[-1] - time.time_ns()) < 5 * 10**9  # the system clock's time
