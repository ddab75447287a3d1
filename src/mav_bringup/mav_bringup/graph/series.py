"""Time series of a recorded run, read back from its bag (truth, estimate, reference, GNSS,
barometer, magnetometer, diagnostics), as numpy arrays on the message stamps (s)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pymap3d
from numpy.typing import NDArray
from rosbags.rosbag2 import Reader

from mav_bringup.graph.recorder import TYPESTORE
from mav_geometry.arrays import FloatArray
from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC
from mav_ros_common.stamps import to_seconds

TRUTH = "/ground_truth/odometry"
ESTIMATE = "/trident_ekf/odometry"
REFERENCE = "/controller/reference"
FIX = "/gnss/fix"
BAROMETER = "/barometer/pressure"
MAGNETOMETER = "/magnetic_field"


@dataclass
class OdometrySeries:
    """Odometry samples: stamps (s), position (m, parent frame), attitude [x,y,z,w] (child to
    parent), body velocity (m/s, child frame) and the pose/twist covariance diagonals."""

    time: FloatArray
    position: FloatArray
    attitude: FloatArray
    velocity_body: FloatArray
    pose_variance: FloatArray
    twist_variance: FloatArray

    @classmethod
    def from_messages(cls, messages: list[Any]) -> OdometrySeries:
        rows = [(to_seconds(m.header.stamp),
                 (m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z),
                 (m.pose.pose.orientation.x, m.pose.pose.orientation.y,
                  m.pose.pose.orientation.z, m.pose.pose.orientation.w),
                 (m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z),
                 np.diag(np.reshape(m.pose.covariance, (6, 6))),
                 np.diag(np.reshape(m.twist.covariance, (6, 6))))
                for m in messages]
        if not rows:
            empty = np.zeros((0, 3))
            return cls(np.zeros(0), empty, np.zeros((0, 4)), empty, np.zeros((0, 6)),
                       np.zeros((0, 6)))
        columns = list(zip(*rows, strict=True))
        return cls(*(np.array(c, dtype=float) for c in columns))

    def __len__(self) -> int:
        return len(self.time)


@dataclass
class SensorSamples:
    """Readings of one sensor: stamps (s) and values, one row per reading (barometer: static
    pressure, Pa, shape (n,); magnetometer: flux density, T, imu_link axes, shape (n, 3))."""

    time: FloatArray
    values: FloatArray

    @classmethod
    def empty(cls, width: int = 0) -> SensorSamples:
        """No readings (the sensor is disabled or was not recorded); ``width`` 0: scalars."""
        return cls(np.zeros(0), np.zeros((0, width)) if width else np.zeros(0))

    def __len__(self) -> int:
        return len(self.time)


@dataclass(frozen=True)
class SensorSite:
    """What the sensor figures need that the bag does not carry: the map datum (deg, deg, m
    WGS-84 ellipsoidal height), the simulator's Earth field (north, east, down, T; None:
    unknown, e.g. no magnetometer) and the IMU mount (imu_link in base_link, [x, y, z, w]):
    the magnetometer reads in imu_link axes."""

    datum: tuple[float, float, float] = (0.0, 0.0, 0.0)
    earth_field_ned_T: tuple[float, float, float] | None = None  # noqa: N815 (SI unit T)
    imu_mount_rotation_xyzw: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)


@dataclass
class RunSeries:
    """Everything the report plots, from one bag."""

    truth: OdometrySeries
    estimate: OdometrySeries
    reference: OdometrySeries
    fix_time: FloatArray
    fix_enu: FloatArray
    fix_valid: NDArray[np.bool_]
    diagnostics: dict[str, dict[str, tuple[FloatArray, FloatArray]]] = field(default_factory=dict)
    """status name -> key -> (stamps s, values) for every numeric diagnostic value."""
    topic_counts: dict[str, int] = field(default_factory=dict)
    barometer: SensorSamples = field(default_factory=SensorSamples.empty)
    """``/barometer/pressure`` (Pa); empty when the barometer is off."""
    magnetometer: SensorSamples = field(default_factory=lambda: SensorSamples.empty(3))
    """``/magnetic_field`` (T, imu_link axes); empty when the magnetometer is off."""
    site: SensorSite = field(default_factory=SensorSite)


def read_run(bag: Path, datum: tuple[float, float, float],
             earth_field_ned_T: tuple[float, float, float] | None = None,
             imu_mount_rotation_xyzw: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0),
             namespace: str = "") -> RunSeries:
    """Read a run's bag; GNSS fixes are converted to ENU at ``datum`` (deg, deg, m). The
    simulator's Earth field (NED, T) and IMU mount go into ``RunSeries.site`` for the
    magnetometer's heading check. ``namespace``: the vehicle of a multi-vehicle run
    (``uav2``): its topics, and its nodes' statuses under their plain names (``simulator``,
    ``trident_ekf``)."""
    prefix = f"/{namespace}" if namespace else ""
    truth, estimate, reference, fix_topic, barometer, magnetometer = (
        prefix + topic for topic in (TRUTH, ESTIMATE, REFERENCE, FIX, BAROMETER, MAGNETOMETER))
    odometry: dict[str, list[Any]] = defaultdict(list)
    fixes: list[tuple[float, float, float, float, bool]] = []
    pressures: list[tuple[float, float]] = []
    magnetic: list[tuple[float, float, float, float]] = []
    diagnostics: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        wanted = [c for c in reader.connections
                  if c.topic in (truth, estimate, reference, fix_topic, barometer, magnetometer,
                                 DIAGNOSTICS_TOPIC)]
        for connection, _, raw in reader.messages(connections=wanted):
            message: Any = TYPESTORE.deserialize_cdr(raw, connection.msgtype)
            if connection.topic == fix_topic:
                fixes.append((to_seconds(message.header.stamp), message.latitude, message.longitude,
                              message.altitude, message.status.status >= 0))
            elif connection.topic == barometer:
                pressures.append((to_seconds(message.header.stamp), message.fluid_pressure))
            elif connection.topic == magnetometer:
                vector = message.magnetic_field
                magnetic.append((to_seconds(message.header.stamp), vector.x, vector.y, vector.z))
            elif connection.topic == DIAGNOSTICS_TOPIC:
                _collect_diagnostics(message, diagnostics, namespace)
            else:
                odometry[connection.topic].append(message)
    if fixes:
        t, lat, lon, alt, valid = (np.array(c) for c in zip(*fixes, strict=True))
        east, north, up = pymap3d.geodetic2enu(lat, lon, alt, *datum)
        fix_enu = np.column_stack([east, north, up])
    else:
        t, fix_enu, valid = np.zeros(0), np.zeros((0, 3)), np.zeros(0, dtype=bool)
    return RunSeries(
        truth=OdometrySeries.from_messages(odometry[truth]),
        estimate=OdometrySeries.from_messages(odometry[estimate]),
        reference=OdometrySeries.from_messages(odometry[reference]),
        fix_time=t.astype(float), fix_enu=fix_enu, fix_valid=valid.astype(bool),
        diagnostics={name: {key: (np.array([p[0] for p in points]),
                                  np.array([p[1] for p in points]))
                            for key, points in values.items()}
                     for name, values in diagnostics.items()},
        topic_counts=counts,
        barometer=_samples(pressures, 0),
        magnetometer=_samples(magnetic, 3),
        site=SensorSite(datum, earth_field_ned_T, imu_mount_rotation_xyzw),
    )


def _samples(rows: Sequence[tuple[float, ...]], width: int) -> SensorSamples:
    """Readings ``(stamp, value...)`` sorted by stamp (the bag is in receive order)."""
    if not rows:
        return SensorSamples.empty(width)
    table = np.array(sorted(rows), dtype=float)
    return SensorSamples(table[:, 0], table[:, 1:] if width else table[:, 1])


def _collect_diagnostics(message: Any, into: dict[str, dict[str, list[tuple[float, float]]]],
                         namespace: str = "") -> None:
    """Numeric values by status name; with a ``namespace``, only that vehicle's statuses,
    under their plain names."""
    stamp = to_seconds(message.header.stamp)
    prefix = f"{namespace}/" if namespace else ""
    for status in message.status:
        if prefix and not status.name.startswith(prefix):
            continue
        name = status.name[len(prefix):]
        for pair in status.values:
            try:
                value = float(pair.value)
            except ValueError:
                continue  # text values (status words) are not plotted
            into[name][pair.key].append((stamp, value))
