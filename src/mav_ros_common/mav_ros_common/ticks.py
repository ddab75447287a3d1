"""A periodic callback on the node clock that keeps its period on sim time.

On sim time (``use_sim_time``) a node's clock moves only when /clock says so. Under rclpy's
EventsExecutor (9.1.2) a sim-time timer now and then fires twice for one /clock value and
then skips a period; a lock-stepped simulator waiting for the command of the skipped tick
stalls for its ``lockstep_timeout_s`` and goes on without it. ``create_ticker`` therefore
drives the callback from /clock itself on sim time: once per period, on the grid a timer
created at the same moment would have (``TickSchedule``), with the /clock value as its time,
and queued behind what the executor already holds (an executor task), where a timer's event
lands too: on the EventsExecutor (``mav-sim``'s, whose queue is in arrival order) the
messages caused by those that came before this /clock value are taken before the tick. On
wall time it is an ordinary timer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from mav_ros_common.stamps import NANOSECONDS_PER_SECOND, to_ns

TOLERANCE_NS = 1000
"""A /clock value this close below a grid time reaches it: simulators round float seconds."""
CLOCK_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.BEST_EFFORT)
"""Best effort takes /clock from reliable and best-effort publishers alike (rclpy's own time
source subscribes so)."""


class TickSchedule:
    """When a periodic tick falls due on a clock that jumps (sim time).

    The grid is ``start_ns + k * period_ns``, as for a timer created at ``start_ns``. A jump
    over several grid times gives one tick (the missed ones are not made up); a clock going
    backwards (a simulator reset) restarts the grid one period after the new time.
    """

    def __init__(self, period_ns: int, start_ns: int) -> None:
        if period_ns <= 0:
            raise ValueError(f"tick period must be > 0 ns, got {period_ns}")
        self.period_ns = period_ns
        self._next_ns = start_ns + period_ns
        self._latest_ns = start_ns

    def due(self, now_ns: int) -> bool:
        """Whether the clock, now at ``now_ns``, reached the next tick (then the one after
        becomes the next)."""
        if now_ns < self._latest_ns:
            self._latest_ns, self._next_ns = now_ns, now_ns + self.period_ns
            return False
        self._latest_ns = now_ns
        late_ns = now_ns + TOLERANCE_NS - self._next_ns
        if late_ns < 0:
            return False
        self._next_ns += (late_ns // self.period_ns + 1) * self.period_ns
        return True


def create_ticker(node: Node, period_s: float, callback: Callable[[int], None]) -> None:
    """Call ``callback(now_ns)`` every ``period_s`` of the node clock: from /clock when the
    node's ``use_sim_time`` is set at this call, from a timer otherwise."""
    if not node.get_parameter("use_sim_time").value:
        clock = node.get_clock()
        node.create_timer(period_s, lambda: callback(clock.now().nanoseconds))
        return
    schedule = TickSchedule(round(period_s * NANOSECONDS_PER_SECOND),
                            node.get_clock().now().nanoseconds)
    due: deque[int] = deque()

    def run_due() -> None:
        while due:
            callback(due.popleft())

    def on_clock(message: Any) -> None:
        now_ns = to_ns(message.clock)
        if schedule.due(now_ns):
            due.append(now_ns)
            # Guard conditions would do, but rclpy's EventsExecutor refuses them.
            node.executor.create_task(run_due)  # type: ignore[union-attr]

    node.create_subscription(Clock, "/clock", on_clock, CLOCK_QOS)
