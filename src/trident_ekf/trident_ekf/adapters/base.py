"""What an input profile is made of: the samples a message becomes, the subscriptions that
carry them, and how a sample reaches ``EstimationSession``.

A converter turns one message into a tuple of samples (one for most messages; a PX4
``SensorGps`` is a fix and a velocity). Samples hold exactly the arguments of one session
call, already in the session's conventions: stamps in integer ns, IMU and body-frame
vectors in FLU axes, local-level vectors in ENU, SI units. Nothing here imports ROS: the
node maps ``Qos`` to rclpy, trident-replay feeds rosbags' messages to the same converters.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from trident_ekf.core.session import EstimationSession
from trident_ekf.inputs import stamp_ns as stamp_ns  # header stamp in ns
from trident_ekf.tools.cdr import ImuSample

Vector3 = tuple[float, float, float]
NS_PER_US = 1000

# sensor_msgs/NavSatStatus.status values.
STATUS_NO_FIX, STATUS_FIX, STATUS_SBAS_FIX, STATUS_GBAS_FIX = -1, 0, 1, 2
# sensor_msgs/NavSatFix.position_covariance_type values.
COVARIANCE_TYPE_UNKNOWN = 0

MALFORMED: tuple[type[Exception], ...] = (ValueError, TypeError, AttributeError, IndexError,
                                          struct.error)
"""What a converter raises for a message it cannot read (counted as ``<kind>_malformed``)."""


class Fix(NamedTuple):
    """The arguments of ``EstimationSession.fix``."""

    stamp_ns: int
    status: int  # sensor_msgs/NavSatStatus: < 0 is no fix
    latitude_deg: float
    longitude_deg: float
    height_m: float  # above the WGS-84 ellipsoid
    covariance_enu: Sequence[float] | NDArray[np.float64]  # 9 row-major or 3x3, m^2
    covariance_known: bool


class Velocity(NamedTuple):
    """The arguments of ``EstimationSession.velocity``."""

    stamp_ns: int
    velocity_enu: Vector3  # m/s
    covariance_enu: NDArray[np.float64]  # 3x3 m^2/s^2; all zeros: not reported


class Aid(NamedTuple):
    """The arguments of ``EstimationSession.aid``: a sample of an optional source."""

    source: str
    stamp_ns: int
    fields: dict[str, Any]


Sample = ImuSample | Fix | Velocity | Aid
Converter = Callable[[Any], tuple[Sample, ...]]


def deliver(session: EstimationSession, sample: Sample) -> bool:
    """Make the session call a sample stands for; its result (True: used)."""
    if isinstance(sample, ImuSample):
        return session.imu(sample.stamp_ns, sample.gyro, sample.accel)
    if isinstance(sample, Fix):
        return session.fix(*sample)
    if isinstance(sample, Velocity):
        return session.velocity(*sample)
    return session.aid(sample.source, sample.stamp_ns, **sample.fields)


@dataclass(frozen=True)
class Qos:
    """A subscription's QoS in plain words, as the publisher needs it (the node builds the
    rclpy profile, keep last ``input_queue_depth`` messages)."""

    reliability: str = "best_effort"  # best_effort | reliable
    durability: str = "volatile"  # volatile | transient_local


SENSOR_QOS = Qos()
"""Sensor streams of ROS drivers, MAVROS and the PX4 bridge: best effort (it also takes
reliable publishers), volatile."""


@dataclass(frozen=True)
class Input:
    """One subscription of a profile: topic (relative names resolve in the node's
    namespace; trident-replay reads ``/<topic>``), ROS 2 type name, the converter, QoS,
    whether the converter takes the serialized CDR bytes (``raw``: the IMU fast path), the
    optional aiding source it feeds (subscribed only when that source is enabled; None:
    always) and ``kind``, the prefix of its ``<kind>_malformed`` rejection counter."""

    topic: str
    msgtype: str
    convert: Converter
    kind: str
    qos: Qos = SENSOR_QOS
    raw: bool = False
    source: str | None = None


@dataclass(frozen=True)
class Profile:
    """The inputs one kind of vehicle interface publishes."""

    name: str
    inputs: tuple[Input, ...]

    def selected(self, sources: Iterable[str]) -> list[Input]:
        """The inputs to subscribe with these optional sources enabled."""
        enabled = set(sources)
        return [i for i in self.inputs if i.source is None or i.source in enabled]

    def topics(self) -> dict[str, Input]:
        """Input by absolute topic, as a bag names it."""
        return {absolute(i.topic): i for i in self.inputs}


VELOCITY_TYPES = ("TwistWithCovarianceStamped", "TwistStamped")
"""geometry_msgs types a ROS GNSS driver may publish its ENU velocity as."""
_TOKEN = r"[A-Za-z_][A-Za-z0-9_]*"
_NAMESPACE = re.compile(rf"/?({_TOKEN}(/{_TOKEN})*)?")


@dataclass(frozen=True)
class InputOptions:
    """How the node and trident-replay pick their inputs (the ``inputs`` parameters).

    profile: ``ros`` (standard drivers), ``mavros`` or ``px4``; mavros_namespace and
    px4_namespace: where MAVROS and the PX4 uXRCE-DDS bridge publish (relative names
    resolve in the node's namespace); velocity_type: the GNSS velocity message of the
    ``ros`` profile (MAVROS always publishes a TwistStamped); velocity_sigma_mps: the
    sigma per axis given to velocities that carry no covariance (TwistStamped), NaN for
    none (the receiver model's default then applies)."""

    profile: str = "ros"
    mavros_namespace: str = "/mavros"
    px4_namespace: str = "/fmu"
    velocity_type: str = VELOCITY_TYPES[0]
    velocity_sigma_mps: float = math.nan

    def __post_init__(self) -> None:
        for name in ("mavros_namespace", "px4_namespace"):
            value = getattr(self, name)
            object.__setattr__(self, name, namespace(value, name))
        if self.velocity_type not in VELOCITY_TYPES:
            raise ValueError(f"velocity_type {self.velocity_type!r} is not one of "
                             f"{list(VELOCITY_TYPES)}")
        sigma = self.velocity_sigma_mps
        if not (math.isnan(sigma) or (math.isfinite(sigma) and sigma > 0.0)):
            raise ValueError(f"velocity_sigma_mps must be > 0 m/s or NaN, got {sigma!r}")


def namespace(value: str, what: str = "namespace") -> str:
    """A ROS namespace without its trailing slash ('' for the root): name tokens separated
    by single slashes, absolute (leading slash) or relative to the node's namespace;
    ValueError otherwise."""
    stripped = value.rstrip("/")
    if not _NAMESPACE.fullmatch(stripped):
        raise ValueError(f"{what} {value!r} is not a ROS namespace (e.g. /mavros)")
    return stripped


def join(namespace_: str, name: str) -> str:
    """``name`` inside a namespace from ``namespace``."""
    return f"{namespace_}/{name}" if namespace_ else f"/{name}"


def absolute(topic: str) -> str:
    """``/<topic>`` for a relative name (how a bag recorded in the root namespace names
    it)."""
    return topic if topic.startswith("/") else f"/{topic}"


def positive(value: float) -> bool:
    """A reported accuracy that can be used: finite and > 0."""
    return math.isfinite(value) and value > 0.0
