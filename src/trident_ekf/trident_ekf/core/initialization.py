"""Alignment: the initial state, from data the vehicle gives wherever it is started.

Theory: docs/theory/trident-ekf.md §5.10.

The initializer keeps a window of IMU samples (``level_duration``) and forms the initial
state when a GNSS fix arrives, in one of two ways:

- **static**: the window is still (accelerometer and gyro spread and the mean rate under
  thresholds) and the GNSS speed is small: roll and pitch from the mean specific force, the
  gyro bias from the mean rate (minus the Earth rate);
- **in motion**: otherwise, the attitude of the yaw estimator's AHRS (its tilt is corrected
  with the GNSS-derived acceleration), once the session offers one; the gyro bias stays at
  its prior. A levelling taken while moving never seeds the gyro bias.

Yaw, in this order: the configured ``yaw``; the magnetometer (tilt-compensated heading of
the latest sample against the Earth field model) when samples come; the yaw estimator once
it has converged; otherwise, only for a static start, yaw 0 with a 180 deg sigma (the
session resets it from the yaw estimator as soon as the vehicle has moved). A moving
vehicle without a yaw source waits. ``EstimationSession.set_pose`` is the third way in.
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

MAGNETOMETER_AGE = 0.5  # s: a magnetometer sample older than this is not used for yaw


@dataclass(frozen=True)
class InitialState:
    """Arguments for ``ErrorStateFilter.initialize`` (sigmas in rad, m/s, m, rad/s, m/s^2),
    how the state was aligned ("static" or "in_motion") and where its yaw came from
    ("parameter", "magnetometer", "yaw_estimator" or "unknown")."""

    time: float
    attitude: NDArray[np.float64]
    velocity: NDArray[np.float64]
    position: NDArray[np.float64]
    gyro_bias: NDArray[np.float64]
    sigmas: NDArray[np.float64]
    alignment: str
    yaw_source: str


@dataclass(frozen=True)
class MotionAttitude:
    """The yaw estimator's attitude offered for an in-motion start: q body->ENU [x, y, z, w]
    (tilt from its AHRS) and the sigma of its yaw (rad; infinite before it converges)."""

    attitude: NDArray[np.float64]
    yaw_sigma: float


def level_attitude(mean_accel: FloatVector) -> tuple[float, float]:
    """(roll, pitch) rad of a static FLU body from its mean specific force (m/s^2)."""
    fx, fy, fz = (float(c) for c in mean_accel)
    return math.atan2(fy, fz), math.atan2(-fx, math.hypot(fy, fz))


def euler_enu(roll: float, pitch: float, yaw: float) -> FloatArray:
    """q body(FLU)->ENU of Euler angles (rad; yaw from east, counter-clockwise)."""
    return quaternion.multiply(
        quaternion.from_rotation_vector([0.0, 0.0, yaw]),
        quaternion.multiply(quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                            quaternion.from_rotation_vector([roll, 0.0, 0.0])))


def attitude_ecef(roll: float, pitch: float, yaw: float, position: ArrayLike) -> FloatArray:
    """q body(FLU)->ECEF of ENU Euler angles (rad, yaw from east, CCW) at an ECEF position."""
    return enu_to_ecef(euler_enu(roll, pitch, yaw), position)


def enu_to_ecef(q_enu: ArrayLike, position: ArrayLike) -> FloatArray:
    """q body->ECEF of a q body->ENU at an ECEF position."""
    lat, lon, _ = ecef_to_geodetic(position)
    return quaternion.multiply(quaternion.from_matrix(enu_to_ecef_rotation(lat, lon)),
                               np.asarray(q_enu, dtype=float))


def yaw_of(q_enu: ArrayLike) -> float:
    """ENU yaw (rad) of q body->ENU: the heading of the body x axis (Z-Y-X Euler yaw)."""
    C = quaternion.to_matrix(np.asarray(q_enu, dtype=float))
    return math.atan2(float(C[1, 0]), float(C[0, 0]))


def turn_yaw(q_enu: ArrayLike, angle: float) -> FloatArray:
    """q body->ENU turned by ``angle`` (rad) about the ENU up axis."""
    return quaternion.multiply(quaternion.from_rotation_vector([0.0, 0.0, angle]),
                               np.asarray(q_enu, dtype=float))


def wrap(angle: float) -> float:
    """Angle in [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def magnetic_yaw_turn(q_enu: ArrayLike, field_body: ArrayLike, field_enu: ArrayLike) -> float:
    """Turn about up (rad) that brings the horizontal part of a body-frame field sample,
    seen through the attitude ``q_enu``, onto the model field's (both ENU)."""
    measured = quaternion.to_matrix(np.asarray(q_enu, dtype=float)) @ np.asarray(field_body)
    model = np.asarray(field_enu, dtype=float)
    return wrap(math.atan2(model[1], model[0]) - math.atan2(measured[1], measured[0]))


class Initializer:
    """Forms the initial state from a window of IMU samples, the latest magnetometer sample
    and a GNSS fix (see the module docstring).

    level_duration: IMU window for the stillness test and the static levelling, s.
    yaw: configured ENU yaw (rad) with ``yaw_sigma``, or None (magnetometer, yaw estimator).
    still_gyro: largest rate spread and mean rate of a still window, rad/s.
    still_accel: largest specific-force spread of a still window, m/s^2.
    static_speed: largest GNSS speed of a static start, m/s.
    magnetic_yaw_sigma: yaw sigma of a magnetometer heading, rad (covers hard iron).
    motion_tilt_sigma: roll/pitch sigma of an in-motion start, rad.
    tilt_sigma, position_sigma, velocity_sigma, gyro_bias_sigma (rad/s), accel_bias_sigma
    (m/s^2): the rest of the initial covariance (gyro_bias_sigma is the prior).
    """

    def __init__(self, level_duration: float = 1.0, yaw: float | None = None,
                 yaw_sigma: float = math.radians(60.0), tilt_sigma: float = math.radians(3.0),
                 position_sigma: float = 3.0, velocity_sigma: float = 0.5,
                 gyro_bias_sigma: float = math.radians(0.5), accel_bias_sigma: float = 0.1,
                 still_gyro: float = 0.05, still_accel: float = 1.0,
                 static_speed: float = 0.3, magnetic_yaw_sigma: float = math.radians(15.0),
                 motion_tilt_sigma: float = math.radians(5.0)) -> None:
        for name, value in {"level_duration": level_duration, "yaw_sigma": yaw_sigma,
                            "tilt_sigma": tilt_sigma, "position_sigma": position_sigma,
                            "velocity_sigma": velocity_sigma,
                            "gyro_bias_sigma": gyro_bias_sigma,
                            "accel_bias_sigma": accel_bias_sigma, "still_gyro": still_gyro,
                            "still_accel": still_accel, "static_speed": static_speed,
                            "magnetic_yaw_sigma": magnetic_yaw_sigma,
                            "motion_tilt_sigma": motion_tilt_sigma}.items():
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if yaw is not None and not math.isfinite(yaw):
            raise ValueError(f"yaw must be finite (rad) or None, got {yaw!r}")
        self.level_duration = level_duration
        self.yaw = yaw
        self.yaw_sigma = yaw_sigma
        self.still_gyro = still_gyro
        self.still_accel = still_accel
        self.static_speed = static_speed
        self.magnetic_yaw_sigma = magnetic_yaw_sigma
        self.tilt_sigma = tilt_sigma
        self.motion_tilt_sigma = motion_tilt_sigma
        self._sigmas = np.repeat(
            [tilt_sigma, velocity_sigma, position_sigma, gyro_bias_sigma, accel_bias_sigma], 3)
        self._window: deque[tuple[float, FloatArray]] = deque()  # t, [gyro, accel]
        self._first = math.nan  # stamp of the first sample, s
        self._magnetometer: tuple[float, FloatArray] | None = None
        self.result: InitialState | None = None

    def add_imu(self, time: float, gyro: ArrayLike, accel: ArrayLike) -> None:
        """Take one IMU sample (rad/s, m/s^2, body axes); ignores non-finite ones."""
        sample = np.concatenate([np.asarray(gyro, dtype=float), np.asarray(accel, dtype=float)])
        if self.result is not None or not (math.isfinite(time) and np.all(np.isfinite(sample))):
            return
        window = self._window
        if math.isnan(self._first):
            self._first = time
        window.append((time, sample))
        while window[0][0] < time - self.level_duration:
            window.popleft()

    def add_magnetometer(self, time: float, field_body: ArrayLike) -> None:
        """Take one magnetometer sample (body axes, T) for the initial yaw."""
        field = np.asarray(field_body, dtype=float)
        if math.isfinite(time) and np.all(np.isfinite(field)) and np.any(field):
            self._magnetometer = (time, field)

    @property
    def sigmas(self) -> FloatArray:
        """The 15 initial sigmas (attitude, velocity, position, gyro bias, accel bias) with
        the configured yaw sigma."""
        sigmas = self._sigmas.copy()
        sigmas[2] = self.yaw_sigma
        return sigmas

    @property
    def window_full(self) -> bool:
        """True once samples have come for ``level_duration`` (at least five of them)."""
        window = self._window
        return len(window) >= 5 and window[-1][0] - self._first >= self.level_duration

    def _window_statistics(self) -> tuple[FloatArray, FloatArray]:
        samples = np.array([sample for _, sample in self._window])
        return samples.mean(axis=0), samples.std(axis=0)

    def still(self) -> bool:
        """True when the IMU window is still: rate spread and mean rate under
        ``still_gyro``, specific-force spread under ``still_accel`` (norms over the axes)."""
        if not self.window_full:
            return False
        mean, spread = self._window_statistics()
        return bool(np.linalg.norm(spread[:3]) < self.still_gyro
                    and np.linalg.norm(mean[:3]) < self.still_gyro
                    and np.linalg.norm(spread[3:]) < self.still_accel)

    def add_gnss(self, time: float, position: ArrayLike, velocity: ArrayLike | None,
                 motion: MotionAttitude | None = None,
                 earth_field_ecef: ArrayLike | None = None) -> bool:
        """Offer a fix (ECEF m, m/s; time s), the yaw estimator's attitude (None while its
        AHRS settles) and the Earth field (ECEF T) for a magnetometer heading; returns True
        once ``result`` holds the initial state."""
        if self.result is not None:
            return True
        if not self.window_full:
            return False
        p = np.asarray(position, dtype=float)
        v = np.zeros(3) if velocity is None else np.asarray(velocity, dtype=float)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(v))):
            return False
        sigmas = self._sigmas.copy()
        gyro_bias = np.zeros(3)
        mean, _ = self._window_statistics()
        if self.still() and float(np.linalg.norm(v)) < self.static_speed:
            alignment = "static"
            q_enu = euler_enu(*level_attitude(mean[3:]), 0.0)
        elif motion is not None:
            alignment = "in_motion"
            q_enu = np.asarray(motion.attitude, dtype=float)
            sigmas[:2] = self.motion_tilt_sigma
        else:
            return False
        yaw = self._yaw(time, q_enu, p, motion, earth_field_ecef, alignment)
        if yaw is None:
            return False
        q_enu, sigmas[2], yaw_source = yaw
        q = enu_to_ecef(q_enu, p)
        if alignment == "static":
            # Paper sign: truth = reading + bias, and a static gyro reads C_e^b Omega.
            earth_body = quaternion.rotate(quaternion.conjugate(q), OMEGA_ECEF)
            gyro_bias = earth_body - mean[:3]
        self.result = InitialState(time, q, v, p, gyro_bias, sigmas, alignment, yaw_source)
        return True

    def _yaw(self, time: float, q_enu: FloatArray, position: FloatArray,
             motion: MotionAttitude | None, earth_field_ecef: ArrayLike | None,
             alignment: str) -> tuple[FloatArray, float, str] | None:
        """(attitude with its yaw set, yaw sigma, yaw source), or None to wait."""
        if self.yaw is not None:
            return turn_yaw(q_enu, wrap(self.yaw - yaw_of(q_enu))), self.yaw_sigma, "parameter"
        sample = self._magnetometer
        if (sample is not None and earth_field_ecef is not None
                and abs(time - sample[0]) <= MAGNETOMETER_AGE):
            lat, lon, _ = ecef_to_geodetic(position)
            field_enu = enu_to_ecef_rotation(lat, lon).T @ np.asarray(earth_field_ecef)
            turn = magnetic_yaw_turn(q_enu, sample[1], field_enu)
            return turn_yaw(q_enu, turn), self.magnetic_yaw_sigma, "magnetometer"
        if motion is not None and math.isfinite(motion.yaw_sigma):
            turn = wrap(yaw_of(motion.attitude) - yaw_of(q_enu))
            return turn_yaw(q_enu, turn), motion.yaw_sigma, "yaw_estimator"
        if alignment == "static":
            return q_enu, math.pi, "unknown"
        return None
