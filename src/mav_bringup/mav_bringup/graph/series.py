"""Time series of a recorded run, read back from its bag (truth, estimate, reference, GNSS,
barometer, magnetometer, diagnostics), as numpy arrays on the message stamps (s)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pymap3d
from numpy.typing import NDArray
from rosbags.rosbag2 import Reader

from mav_bringup.graph.recorder import TYPESTORE
from mav_bringup.graph.samples import OdometrySeries as OdometrySeries  # also read from here
from mav_bringup.graph.samples import SensorSamples as SensorSamples
from mav_bringup.graph.samples import SensorSite as SensorSite
from mav_geometry.arrays import FloatArray
from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC
from mav_ros_common.stamps import to_seconds

TRUTH = "/ground_truth/odometry"
ESTIMATE = "/trident_ekf/odometry"
REFERENCE = "/controller/reference"
FIX = "/gnss/fix"
BAROMETER = "/barometer/pressure"
MAGNETOMETER = "/magnetic_field"


def odometry_row(message: Any) -> tuple[float, ...]:
    """A nav_msgs/Odometry as the numbers the report uses: stamp (s), position (3),
    orientation [x, y, z, w], linear twist (3), pose and twist covariance diagonals (6 each)."""
    pose, twist = message.pose.pose, message.twist.twist
    return (to_seconds(message.header.stamp),
            pose.position.x, pose.position.y, pose.position.z,
            pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w,
            twist.linear.x, twist.linear.y, twist.linear.z,
            *message.pose.covariance[::7].tolist(),  # the diagonal of a row-major 6x6
            *message.twist.covariance[::7].tolist())


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
    """Read a run's bag whole (the report streams it instead: ``graph.accumulator``); GNSS
    fixes are converted to ENU at ``datum`` (deg, deg, m). The simulator's Earth field (NED,
    T) and IMU mount go into ``RunSeries.site`` for the magnetometer's heading check.
    ``namespace``: the vehicle of a multi-vehicle run (``uav2``): its topics, and its nodes'
    statuses under their plain names (``simulator``, ``trident_ekf``)."""
    rows: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        for kind, row in run_messages(reader, namespace):
            rows[kind].append(row)
    diagnostics: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for name, key, stamp, value in rows["diagnostics"]:
        diagnostics[name][key].append((stamp, value))
    fix_time, fix_enu, fix_valid = fixes_enu(rows["fix"], datum)
    return RunSeries(
        truth=OdometrySeries.from_rows(rows["truth"]),
        estimate=OdometrySeries.from_rows(rows["estimate"]),
        reference=OdometrySeries.from_rows(rows["reference"]),
        fix_time=fix_time, fix_enu=fix_enu, fix_valid=fix_valid,
        diagnostics={name: {key: (np.array([p[0] for p in points]),
                                  np.array([p[1] for p in points]))
                            for key, points in values.items()}
                     for name, values in diagnostics.items()},
        topic_counts=counts,
        barometer=sensor_samples(rows["barometer"], 0),
        magnetometer=sensor_samples(rows["magnetometer"], 3),
        site=SensorSite(datum, earth_field_ned_T, imu_mount_rotation_xyzw),
    )


def run_messages(reader: Reader, namespace: str = "") -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The report's numbers of the bag's messages, in bag order, as ``(kind, row)``: kinds
    ``truth``, ``estimate``, ``reference`` (``odometry_row``), ``fix`` (stamp s, latitude,
    longitude, altitude, has a fix), ``barometer`` (stamp, Pa), ``magnetometer`` (stamp,
    x, y, z T) and ``diagnostics`` (status name, key, stamp, value: one row per numeric
    value). ``namespace``: one vehicle's topics and statuses (see ``read_run``)."""
    kinds = run_topics(namespace)
    wanted = [c for c in reader.connections if c.topic in kinds]
    for connection, _, raw in reader.messages(connections=wanted):
        message: Any = TYPESTORE.deserialize_cdr(raw, connection.msgtype)
        kind = kinds[connection.topic]
        if kind == "diagnostics":
            for row in _diagnostic_rows(message, namespace):
                yield kind, row
        else:
            yield kind, _ROWS[kind](message)


def run_topics(namespace: str = "") -> dict[str, str]:
    """Topic -> kind (see ``run_messages``) of the report's topics of one vehicle."""
    prefix = f"/{namespace}" if namespace else ""
    kinds = {prefix + topic: kind for kind, topic in (
        ("truth", TRUTH), ("estimate", ESTIMATE), ("reference", REFERENCE), ("fix", FIX),
        ("barometer", BAROMETER), ("magnetometer", MAGNETOMETER))}
    kinds[DIAGNOSTICS_TOPIC] = "diagnostics"
    return kinds


def fixes_enu(rows: Sequence[tuple[Any, ...]], datum: tuple[float, float, float]
              ) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """(stamps s, ENU m at ``datum``, has a fix) of ``fix`` rows of ``run_messages``."""
    if not rows:
        return np.zeros(0), np.zeros((0, 3)), np.zeros(0, dtype=bool)
    t, lat, lon, alt, valid = (np.array(c) for c in zip(*rows, strict=True))
    east, north, up = pymap3d.geodetic2enu(lat, lon, alt, *datum)
    return t.astype(float), np.column_stack([east, north, up]), valid.astype(bool)


def sensor_samples(rows: Sequence[tuple[float, ...]], width: int) -> SensorSamples:
    """Readings ``(stamp, value...)`` sorted by stamp (the bag is in receive order)."""
    if not rows:
        return SensorSamples.empty(width)
    table = np.array(sorted(rows), dtype=float)
    return SensorSamples(table[:, 0], table[:, 1:] if width else table[:, 1])


_ROWS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    "truth": odometry_row, "estimate": odometry_row, "reference": odometry_row,
    "fix": lambda m: (to_seconds(m.header.stamp), m.latitude, m.longitude, m.altitude,
                      m.status.status >= 0),
    "barometer": lambda m: (to_seconds(m.header.stamp), m.fluid_pressure),
    "magnetometer": lambda m: (to_seconds(m.header.stamp), m.magnetic_field.x,
                               m.magnetic_field.y, m.magnetic_field.z),
}


def _diagnostic_rows(message: Any, namespace: str = "") -> Iterator[tuple[str, str, float, float]]:
    """(status name, key, stamp s, value) of every numeric value; with a ``namespace``, only
    that vehicle's statuses, under their plain names."""
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
            yield name, pair.key, stamp, value
