"""Time series of a recorded run, read back from its bag (truth, estimate, reference, GNSS,
simulator diagnostics), as numpy arrays on the message stamps (s)."""

from __future__ import annotations

from collections import defaultdict
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


def read_run(bag: Path, datum: tuple[float, float, float]) -> RunSeries:
    """Read a run's bag; GNSS fixes are converted to ENU at ``datum`` (deg, deg, m)."""
    odometry: dict[str, list[Any]] = defaultdict(list)
    fixes: list[tuple[float, float, float, float, bool]] = []
    diagnostics: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        wanted = [c for c in reader.connections
                  if c.topic in (TRUTH, ESTIMATE, REFERENCE, FIX, DIAGNOSTICS_TOPIC)]
        for connection, _, raw in reader.messages(connections=wanted):
            message: Any = TYPESTORE.deserialize_cdr(raw, connection.msgtype)
            if connection.topic == FIX:
                fixes.append((to_seconds(message.header.stamp), message.latitude, message.longitude,
                              message.altitude, message.status.status >= 0))
            elif connection.topic == DIAGNOSTICS_TOPIC:
                _collect_diagnostics(message, diagnostics)
            else:
                odometry[connection.topic].append(message)
    if fixes:
        t, lat, lon, alt, valid = (np.array(c) for c in zip(*fixes, strict=True))
        east, north, up = pymap3d.geodetic2enu(lat, lon, alt, *datum)
        fix_enu = np.column_stack([east, north, up])
    else:
        t, fix_enu, valid = np.zeros(0), np.zeros((0, 3)), np.zeros(0, dtype=bool)
    return RunSeries(
        truth=OdometrySeries.from_messages(odometry[TRUTH]),
        estimate=OdometrySeries.from_messages(odometry[ESTIMATE]),
        reference=OdometrySeries.from_messages(odometry[REFERENCE]),
        fix_time=t.astype(float), fix_enu=fix_enu, fix_valid=valid.astype(bool),
        diagnostics={name: {key: (np.array([p[0] for p in points]),
                                  np.array([p[1] for p in points]))
                            for key, points in values.items()}
                     for name, values in diagnostics.items()},
        topic_counts=counts,
    )


def _collect_diagnostics(message: Any,
                         into: dict[str, dict[str, list[tuple[float, float]]]]) -> None:
    stamp = to_seconds(message.header.stamp)
    for status in message.status:
        for pair in status.values:
            try:
                value = float(pair.value)
            except ValueError:
                continue  # text values (status words) are not plotted
            into[status.name][pair.key].append((stamp, value))
