"""QoS profiles of the suite's topics (docs/conventions.md), one definition for every node.

- ``SENSOR_DATA``: IMU, GNSS and other sensor streams (best effort, keep last 5).
- ``RELIABLE_10``: outputs meant for rviz and recording, commands, /clock, /diagnostics
  (reliable, volatile, keep last 10).
- ``TF``: ``/tf`` (reliable, volatile, keep last 100).
- ``TF_STATIC``: ``/tf_static`` (reliable, transient local, keep last 1: all static
  transforms in one message, kept for late joiners).
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

SENSOR_DATA: QoSProfile = qos_profile_sensor_data
"""Sensor streams: best effort, keep last 5."""
RELIABLE_10 = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
"""Outputs for rviz and recording, commands, /clock, /diagnostics."""
TF = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
"""``/tf``."""
TF_STATIC = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""``/tf_static``: all static transforms in one message, kept for late joiners."""
