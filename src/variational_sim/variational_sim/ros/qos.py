"""QoS profiles of the contract (CONVENTIONS.md): sensors, outputs, /tf and /tf_static."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

SENSOR_DATA = qos_profile_sensor_data
"""IMU and GNSS streams: best effort, keep last 5."""
RELIABLE_10 = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
"""Outputs for rviz and recording, /clock, commands, diagnostics."""
TF = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
TF_STATIC = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""All static transforms in one message, kept for late joiners."""
