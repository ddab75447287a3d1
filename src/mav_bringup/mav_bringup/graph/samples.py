"""The samples a run's report compares, as numpy arrays on their stamps (s), without ROS:
odometry series (truth, estimate, reference), sensor readings and what the sensor checks
need to know of the run (``SensorSite``). ``graph.series`` reads them from a bag; the
closed-loop pipeline (``mav_bringup.pipeline``) makes them while it runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mav_geometry.arrays import FloatArray

ODOMETRY_ROW_WIDTH = 23
"""Numbers of an odometry row (``graph.series.odometry_row``): stamp, position, attitude,
body velocity, pose and twist covariance diagonals."""


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
        """Series of nav_msgs/Odometry messages (the message side lives in ``graph.series``,
        imported here only when messages are read: this module needs no ROS)."""
        from mav_bringup.graph.series import odometry_row

        return cls.from_rows([odometry_row(m) for m in messages])

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[float]] | FloatArray) -> OdometrySeries:
        """Series of ``odometry_row`` rows (a sequence or an array of them)."""
        table = np.array(rows, dtype=float).reshape(-1, ODOMETRY_ROW_WIDTH)
        return cls(table[:, 0], table[:, 1:4], table[:, 4:8], table[:, 8:11], table[:, 11:17],
                   table[:, 17:23])

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
