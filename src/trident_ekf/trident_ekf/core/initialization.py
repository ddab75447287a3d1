"""Initial state from static accelerometer levelling plus the first GNSS fix.

Theory: docs/theory/trident-ekf.md §5.10.

Yaw comes from a parameter, or from the GNSS course over ground once the horizontal
speed exceeds a threshold (a coarse heading: a multirotor may fly sideways, so its
sigma stays large and the filter refines it after manoeuvres). A vehicle that does
not move within ``course_timeout`` starts with yaw 0 and a yaw sigma of 180 degrees.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray, FloatVector
from trident_ekf.core.earth import OMEGA_ECEF, ecef_to_geodetic, enu_to_ecef_rotation


@dataclass(frozen=True)
class InitialState:
    """Arguments for ``ErrorStateFilter.initialize`` (sigmas in rad, m/s, m, rad/s, m/s^2)."""

    time: float
    attitude: NDArray[np.float64]
    velocity: NDArray[np.float64]
    position: NDArray[np.float64]
    gyro_bias: NDArray[np.float64]
    sigmas: NDArray[np.float64]


def level_attitude(mean_accel: FloatVector) -> tuple[float, float]:
    """(roll, pitch) rad of a static FLU body from its mean specific force (m/s^2)."""
    fx, fy, fz = (float(c) for c in mean_accel)
    return math.atan2(fy, fz), math.atan2(-fx, math.hypot(fy, fz))


def attitude_ecef(roll: float, pitch: float, yaw: float, position: ArrayLike) -> FloatArray:
    """q body(FLU)->ECEF of ENU Euler angles (rad, yaw from east, CCW) at an ECEF position."""
    lat, lon, _ = ecef_to_geodetic(position)
    q_nb = quaternion.multiply(
        quaternion.from_rotation_vector([0.0, 0.0, yaw]),
        quaternion.multiply(quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                            quaternion.from_rotation_vector([roll, 0.0, 0.0])),
    )
    return quaternion.multiply(quaternion.from_matrix(enu_to_ecef_rotation(lat, lon)), q_nb)


class Initializer:
    """Collects static IMU samples and GNSS fixes until an initial state can be formed.

    level_duration: static averaging window, s. yaw: ENU yaw (rad) or None for GNSS course.
    course_speed: horizontal GNSS speed above which the course gives yaw, m/s.
    course_timeout: time after levelling without such speed before yaw falls back to 0, s.
    yaw_sigma: initial yaw sigma (rad); tilt_sigma, position_sigma, velocity_sigma,
    gyro_bias_sigma (rad/s), accel_bias_sigma (m/s^2) complete the initial covariance.
    """

    def __init__(self, level_duration: float = 1.0, yaw: float | None = 0.0,
                 course_speed: float = 3.0, course_timeout: float = 10.0,
                 yaw_sigma: float = math.radians(60.0), tilt_sigma: float = math.radians(3.0),
                 position_sigma: float = 3.0, velocity_sigma: float = 0.5,
                 gyro_bias_sigma: float = math.radians(0.5), accel_bias_sigma: float = 0.1) -> None:
        for name, value in {"level_duration": level_duration, "course_speed": course_speed,
                            "course_timeout": course_timeout,
                            "yaw_sigma": yaw_sigma, "tilt_sigma": tilt_sigma,
                            "position_sigma": position_sigma, "velocity_sigma": velocity_sigma,
                            "gyro_bias_sigma": gyro_bias_sigma,
                            "accel_bias_sigma": accel_bias_sigma}.items():
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if yaw is not None and not math.isfinite(yaw):
            raise ValueError(f"yaw must be finite (rad) or None, got {yaw!r}")
        self.level_duration = level_duration
        self.yaw = yaw
        self.course_speed = course_speed
        self.course_timeout = course_timeout
        self._sigmas = np.repeat(
            [tilt_sigma, velocity_sigma, position_sigma, gyro_bias_sigma, accel_bias_sigma], 3
        )
        self._sigmas[2] = yaw_sigma  # body z; near level this is yaw
        self._start = math.nan
        self._gyro_sum = np.zeros(3)
        self._recent: deque[tuple[float, FloatArray]] = deque()
        self._recent_sum = np.zeros(3)
        self._count = 0
        self._levelled = False
        self._levelled_at = math.nan
        self.result: InitialState | None = None

    def add_imu(self, time: float, gyro: ArrayLike, accel: ArrayLike) -> None:
        """Take one IMU sample (rad/s, m/s^2); ignores non-finite ones.

        The first ``level_duration`` s (static) give the gyro bias; the latest
        ``level_duration`` s give roll and pitch when the initial state is formed, so a
        start that waits for motion levels on recent (steady-flight) specific force.
        """
        if self.result is not None:
            return
        gyro, accel = np.asarray(gyro, dtype=float), np.asarray(accel, dtype=float)
        if not (math.isfinite(time) and np.all(np.isfinite(gyro)) and np.all(np.isfinite(accel))):
            return
        if math.isnan(self._start):
            self._start = time
        if not self._levelled:
            self._gyro_sum += gyro
            self._count += 1
            self._levelled = time - self._start >= self.level_duration
            self._levelled_at = time
        self._recent.append((time, accel))
        self._recent_sum += accel
        while self._recent[0][0] < time - self.level_duration:
            self._recent_sum -= self._recent.popleft()[1]

    def add_gnss(self, time: float, position: ArrayLike, velocity: ArrayLike | None) -> bool:
        """Offer a fix (ECEF m, m/s); returns True once ``result`` holds the initial state."""
        if not self._levelled or self.result is not None:
            return self.result is not None
        p = np.asarray(position, dtype=float)
        v = np.zeros(3) if velocity is None else np.asarray(velocity, dtype=float)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(v))):
            return False
        yaw = self.yaw
        sigmas = self._sigmas.copy()
        if yaw is None:
            lat, lon, _ = ecef_to_geodetic(p)
            east, north, _ = enu_to_ecef_rotation(lat, lon).T @ v
            if math.hypot(east, north) >= self.course_speed:
                yaw = math.atan2(north, east)
            elif time - self._levelled_at > self.course_timeout:
                yaw, sigmas[2] = 0.0, math.pi
            else:
                return False
        roll, pitch = level_attitude(self._recent_sum / len(self._recent))
        q = attitude_ecef(roll, pitch, yaw, p)
        # Paper sign: truth = reading + bias, and a static gyro reads C_e^b Omega.
        earth_body = quaternion.rotate(quaternion.conjugate(q), OMEGA_ECEF)
        gyro_bias = earth_body - self._gyro_sum / self._count
        self.result = InitialState(time, q, v, p, gyro_bias, sigmas)
        return True
