"""The interface every simulated sensor implements, and the truth it reads.

A sensor is one module: its configuration (rate, latency, noise, frame), its model
(``measure`` on the truth at a sample time, seeded by the generator it is given), its
fault hooks (``inject`` a timed ``Fault`` of a kind it declares), what it reports about
itself (``report_values``: true errors a report compares the estimator with), and how a
reading becomes ROS messages (``outputs`` and ``fill``). ``fill`` writes the fields of
message objects the ROS shell created once (their frame set), by attribute, so this package
imports no ROS and the shell publishes the same objects again (no per-message
construction).

``VehicleSimulator`` schedules every sensor alike: a reading every ``1 / rate_hz`` s of sim
time, delivered ``latency_s`` later (both on the physics grid), and builds new sensors
from the configuration at a reset (the same seed repeats a run exactly).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

Vector3 = tuple[float, float, float]
Matrix3 = tuple[Vector3, Vector3, Vector3]


class SensorTruth(Protocol):
    """The vehicle's true state at the current physics node, as a sensor reads it."""

    @property
    def time_s(self) -> float:
        """Sim time (s)."""

    @property
    def rotation_rows(self) -> Matrix3:
        """Rows of the base_link -> map (ENU) rotation matrix."""

    @property
    def position_enu(self) -> Vector3:
        """base_link origin in map (m)."""

    @property
    def velocity_enu(self) -> Vector3:
        """base_link origin velocity in map (m/s)."""

    @property
    def angular_velocity_body(self) -> Vector3:
        """Body rates (rad/s, base_link)."""

    def accelerations(self) -> tuple[Vector3, Vector3]:
        """Body angular acceleration (rad/s^2) and ENU acceleration of O (m/s^2)."""

    @property
    def gravity_enu(self) -> Vector3:
        """Gravity (m/s^2, ENU) the plant uses."""

    @property
    def height_above_ground_m(self) -> float:
        """Height of base_link above the ground plane (m)."""

    @property
    def rotor_load(self) -> float:
        """Mean of (rotor speed / its maximum)^2 over the rotors, 0..1: a proxy for the motor
        currents and the rotor downwash."""


@dataclass(frozen=True)
class Fault:
    """A fault of ``kind`` active while ``start_s <= t < end_s`` (sim s; ``end_s`` inf:
    until the end of the run), with the kind's ``value`` (units by kind)."""

    kind: str
    start_s: float
    end_s: float
    value: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.start_s) or not self.end_s > self.start_s:
            raise ValueError(f"fault {self.kind!r}: needs a finite start and end > start, "
                             f"got [{self.start_s!r}, {self.end_s!r})")
        if not all(math.isfinite(v) for v in self.value):
            raise ValueError(f"fault {self.kind!r}: value {self.value!r} must be finite")

    def active(self, time_s: float) -> bool:
        return self.start_s <= time_s < self.end_s


@dataclass(frozen=True)
class Output:
    """One message a sensor publishes: topic (relative to the vehicle's namespace), ROS
    type name (``package/msg/Type``) and header frame (prefixed with the vehicle's name when
    the simulator carries several)."""

    topic: str
    msgtype: str
    frame_id: str


class Sensor(ABC):
    """Base of the simulated sensors; see the module docstring."""

    name: ClassVar[str]
    """The config block and the diagnostics prefix (``imu``, ``gnss``, ``barometer``...)."""
    fault_kinds: ClassVar[dict[str, int]] = {}
    """Fault kinds this sensor honours -> the length of their ``value``."""

    _config: Any
    """The sensor's configuration: ``rate_hz`` and, unless it is 0, ``latency_s``."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []

    @property
    def config(self) -> Any:
        """The configuration in use (``set_error_model`` replaces it)."""
        return self._config

    @property
    def rate_hz(self) -> float:
        """Readings per second of sim time."""
        return float(self._config.rate_hz)

    @property
    def latency_s(self) -> float:
        """Delay from a reading's stamp to its delivery (s)."""
        return float(getattr(self._config, "latency_s", 0.0))

    @property
    @abstractmethod
    def outputs(self) -> tuple[Output, ...]:
        """The messages a reading becomes, in ``fill`` order."""

    @abstractmethod
    def measure(self, truth: SensorTruth) -> Any:
        """A reading at ``truth.time_s`` (an object with a ``time_s`` attribute)."""

    @abstractmethod
    def fill(self, reading: Any, messages: Sequence[Any]) -> tuple[bool, ...]:
        """Write ``reading`` into the message objects of ``outputs`` (same order); return
        which of them to publish."""

    def report_values(self) -> dict[str, float]:
        """True internal errors worth reporting (key: quantity with its unit)."""
        return {}

    def inject(self, fault: Fault) -> None:
        """Add a timed fault of a kind this sensor declares (ValueError otherwise)."""
        size = self.fault_kinds.get(fault.kind)
        if size is None:
            raise ValueError(f"{self.name}: unknown fault kind {fault.kind!r}; this sensor "
                             f"has {sorted(self.fault_kinds)}")
        if len(fault.value) != size:
            raise ValueError(f"{self.name} fault {fault.kind!r}: value needs {size} "
                             f"number(s), got {list(fault.value)}")
        self.faults.append(fault)

    def active_faults(self, time_s: float, kind: str) -> list[Fault]:
        """The faults of ``kind`` active at ``time_s``."""
        return [f for f in self.faults if f.kind == kind and f.active(time_s)]


def stamp(header: Any, time_s: float) -> None:
    """Set the stamp of a std_msgs/Header (duck-typed) to ``time_s`` (s, >= 0). The frame is
    the ROS shell's: it sets ``frame_id`` (``Output.frame_id``, with the vehicle's prefix)
    once on the message it reuses."""
    nanoseconds = round(time_s * 1e9)
    header.stamp.sec, header.stamp.nanosec = divmod(nanoseconds, 1_000_000_000)


def rotate_transpose(rows: Matrix3, v: Sequence[float]) -> Vector3:
    """``R^T v`` for a rotation given by its rows (map vector -> body axes)."""
    (a, b, c), (d, e, f), (g, h, i) = rows
    x, y, z = v
    return (a * x + d * y + g * z, b * x + e * y + h * z, c * x + f * y + i * z)
