"""``diagnostic_msgs`` for the suite's nodes: levels, key/values and the ``/diagnostics`` topic.

Every node publishes one ``DiagnosticStatus`` per period on ``DIAGNOSTICS_TOPIC`` (reliable,
keep last 10) named after the node. Values are text as the message requires; numbers are
written so that ``float(value)`` reads them back exactly (``repr``), booleans as ``true`` /
``false``; numpy scalars are written as the Python numbers they hold. Units belong in the
key names (``odometry_age_s``, ``energy_error_J``).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import (
    DiagnosticArray,
    DiagnosticStatus,
    KeyValue,
)
from rclpy.node import Node
from rclpy.publisher import Publisher

from mav_ros_common.qos import RELIABLE_10
from mav_ros_common.topic_names import DIAGNOSTICS_TOPIC as DIAGNOSTICS_TOPIC

OK: bytes = DiagnosticStatus.OK
WARN: bytes = DiagnosticStatus.WARN
ERROR: bytes = DiagnosticStatus.ERROR
STALE: bytes = DiagnosticStatus.STALE
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR", STALE: "STALE"}


def level(value: int | bytes) -> bytes:
    """A level as the message holds it (one byte) from an int (0 OK, 1 WARN, 2 ERROR,
    3 STALE) or the ``DiagnosticStatus`` constant."""
    result = bytes([value]) if isinstance(value, int) else bytes(value)
    if result not in LEVEL_NAMES:
        raise ValueError(f"diagnostic level {value!r} is not one of OK, WARN, ERROR, STALE")
    return result


def format_value(value: object) -> str:
    """A value as diagnostics text: strings as they are, booleans ``true``/``false``,
    integers in decimal, other numbers with ``repr`` (exact round trip, ``nan``, ``inf``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return str(value)


def key_values(values: Mapping[str, object]) -> list[Any]:
    """``diagnostic_msgs/KeyValue`` list of ``values`` in their order (``format_value``)."""
    return [KeyValue(key=key, value=format_value(value)) for key, value in values.items()]


def status(name: str, level_: int | bytes, message: str,
           values: Mapping[str, object] | None = None, hardware_id: str = "") -> Any:
    """One ``DiagnosticStatus``: ``name`` (the node), level, one-line ``message`` and values;
    ``hardware_id`` defaults to ``name``."""
    return DiagnosticStatus(level=level(level_), name=name, message=message,
                            hardware_id=hardware_id or name,
                            values=key_values(values or {}))


def status_name(node: Any) -> str:
    """The status name of a node: its name, after its namespace when it has one
    (``trident_ekf``, ``uav1/trident_ekf``), so that the nodes of several vehicles differ."""
    return str(node.get_fully_qualified_name()).lstrip("/")


def diagnostic_array(stamp: Any, *statuses: Any) -> Any:
    """A ``DiagnosticArray`` stamped ``stamp`` (``builtin_interfaces/Time``) holding
    ``statuses``."""
    message = DiagnosticArray(status=list(statuses))
    message.header.stamp = stamp
    return message


def create_publisher(node: Node) -> Publisher[Any]:
    """The node's ``/diagnostics`` publisher (reliable, keep last 10)."""
    return node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, RELIABLE_10)
