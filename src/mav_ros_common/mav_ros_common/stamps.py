"""``builtin_interfaces/Time`` <-> seconds (float) and nanoseconds (int).

A stamp is ``sec`` (int32) + ``nanosec`` (0 <= nanosec < 1e9); times before the epoch have
a negative ``sec`` and a positive ``nanosec``, as rclpy writes them. Seconds are rounded to
the nanosecond. The ``fill_*`` forms write into an existing stamp: the high-rate publishers
refill one message instead of building a new one.
"""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time

NANOSECONDS_PER_SECOND = 1_000_000_000


def to_ns(stamp: Any) -> int:
    """A ``Time`` (or anything with ``sec`` and ``nanosec``) as integer nanoseconds."""
    return int(stamp.sec) * NANOSECONDS_PER_SECOND + int(stamp.nanosec)


def to_seconds(stamp: Any) -> float:
    """A ``Time`` as seconds (float; exact to the nanosecond within about 104 days)."""
    return to_ns(stamp) * 1e-9


def seconds_to_ns(seconds: float) -> int:
    """Seconds rounded to integer nanoseconds."""
    return round(seconds * NANOSECONDS_PER_SECOND)


def fill_ns(stamp: Any, nanoseconds: int) -> None:
    """Write integer nanoseconds into ``stamp``."""
    stamp.sec, stamp.nanosec = divmod(int(nanoseconds), NANOSECONDS_PER_SECOND)


def fill_seconds(stamp: Any, seconds: float) -> None:
    """Write seconds, rounded to the nanosecond, into ``stamp``."""
    fill_ns(stamp, seconds_to_ns(seconds))


def from_ns(nanoseconds: int) -> Any:
    """A new ``Time`` of integer nanoseconds."""
    stamp = Time()
    fill_ns(stamp, nanoseconds)
    return stamp


def from_seconds(seconds: float) -> Any:
    """A new ``Time`` of seconds, rounded to the nanosecond."""
    return from_ns(seconds_to_ns(seconds))
