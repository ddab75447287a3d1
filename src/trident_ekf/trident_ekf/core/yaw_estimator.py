"""Gaussian-sum yaw estimator: yaw from an IMU and GNSS velocity, with no magnetometer.

Theory, tuning and limits: docs/theory/yaw-estimator.md.

A bank of ``models`` hypotheses starts with yaws spread evenly over the circle. Each one
has its own attitude (gyro-propagated, tilt held by the accelerometer) and a three-state
EKF over (v_east, v_north, yaw): the specific force, rotated to ENU by that hypothesis's
attitude, predicts the horizontal velocity, and the GNSS velocity corrects velocity and
yaw. Each hypothesis is weighted by how well it predicted the GNSS velocity (the Gaussian
likelihood of its innovation); the output yaw is the weighted circular mean.

Conventions: body FLU, world ENU, yaw about up from east, counter-clockwise (rad),
quaternions ``[x, y, z, w]`` body -> ENU, accelerometer specific force as
``sensor_msgs/Imu`` gives it (about +9.8 m/s^2 on body +z when level at rest), gyro
bias as in the rest of the project (truth = reading + bias).

Speed: every hypothesis sees the same IMU samples, so ``imu`` only accumulates, in plain
Python floats, the rotation and the velocity change of the body over a short window
(``WINDOW_S``); the bank (numpy arrays over the hypotheses) advances once per window and
before every ``velocity`` update.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.settings import check_settings, setting

_kernels = load_kernels("trident_ekf.core._kernels")  # None: the numpy reference
GRAVITY = 9.80665  # m/s^2
MAX_IMU_DT = 0.5  # s: longer IMU intervals are rejected
WINDOW_S = 0.02  # s: IMU time accumulated before the bank is advanced
REORTHONORMALIZE_EVERY = 500  # bank advances between attitude re-orthonormalizations
HISTORY = 32  # GNSS velocities kept for differencing
TURN_MEMORY_S = 3.0  # s of yaw turns kept to bring a GNSS acceleration up to date
MAX_GYRO_BIAS = 0.05  # rad/s, bound of each attitude's gyro-bias estimate
SMALL_TURN_SHARE = 0.02  # below this tilt-correction share the rotations are tiny
_IDENTITY = np.eye(3)
# Rotation vector (row) @ _GENERATORS, reshaped to 3 x 3: its skew-symmetric matrix.
_GENERATORS = np.array([[0, 0, 0, 0, 0, -1, 0, 1, 0], [0, 0, 1, 0, 0, 0, -1, 0, 0],
                        [0, -1, 0, 1, 0, 0, 0, 0, 0]], dtype=np.float64)


@dataclass(frozen=True)
class YawEstimatorConfig:
    """Settings of ``YawEstimator`` (tuning: docs/theory/yaw-estimator.md §5).

    models: count, yaw hypotheses spread evenly over [-pi, pi) at the start (2-64).
    gyro_noise: rad/s, 1-sigma of one gyro sample as the yaw process noise sees it: each
        IMU sample adds ``(gyro_noise * dt)**2`` rad^2 to every hypothesis's yaw variance.
        It also stands for the bias about the vertical, which nothing here estimates.
    accel_noise: m/s^2, 1-sigma of the horizontal specific-force error that persists over
        a GNSS interval (tilt error times g, vibration): each velocity update first adds
        ``(accel_noise * interval)**2`` (m/s)^2 per horizontal axis, ``interval`` in s
        since the previous update.
    tilt_gain: 1/s, rate at which the accelerometer pulls each attitude's tilt (the
        complementary filter's crossover; 1 / tilt_gain is its time constant).
    gyro_bias_gain: 1/s^2, integral gain of the same correction: each attitude's gyro-bias
        estimate (bounded to 0.05 rad/s per axis) grows by this times its tilt error (rad) per
        second; 0 turns it off. It learns the bias about the horizontal body axes.
    min_speed_mps: m/s, horizontal GNSS speed below which a velocity update (with the
        previous one also below) leaves the weights alone; it still corrects each EKF.
        At rest every hypothesis predicts the same velocity and weighting them would only
        accumulate noise.
    converged_sigma_rad: rad, ``converged`` needs ``yaw_sigma`` below this.
    min_weight_updates: count, weight updates (velocity updates while moving) needed
        before ``converged`` can be true.
    weight_floor: dimensionless, lower bound of each weight after normalisation, so that a
        hypothesis can come back; below 0.5 / models.
    innovation_gate: sigma, velocity innovations longer than this (Mahalanobis) are
        shortened to it before they correct an EKF; the weights use the full innovation.
    accel_baseline_s: s, shortest time over which GNSS velocities are differenced into the
        horizontal acceleration that each attitude's expected specific force includes.
    max_velocity_gap_s: s, GNSS velocities further apart than this (IMU time) are not
        differenced; the acceleration is then unknown and taken as zero.
    align_time_s: s, once the GNSS velocities received span ``accel_baseline_s`` the tilts
        re-align quickly (a running mean of the accelerometer error instead of the
        complementary gain) with the acceleration known; the EKFs start this long after.
    velocity_delay_s: s, latency of the GNSS velocity: it is compared with each
        hypothesis's velocity this long before the latest IMU sample (at most 1 s; NaN:
        the session's GNSS delay, 0 when the estimator is used alone).
    """

    models: int = setting(5, "yaw hypotheses, spread evenly over the circle at the start",
                          "count", 2, 64)
    gyro_noise: float = setting(0.25, "gyro error per IMU sample in the yaw process noise "
                                "(also covers the unestimated vertical gyro bias)", "rad/s",
                                1e-6, 10.0)
    accel_noise: float = setting(0.7, "horizontal specific-force error persisting over a "
                                 "GNSS interval (tilt error x g, vibration)", "m/s^2", 1e-6,
                                 100.0)
    tilt_gain: float = setting(0.2, "AHRS tilt correction rate from the accelerometer", "1/s",
                               1e-6, 10.0)
    gyro_bias_gain: float = setting(0.01, "AHRS integral gain learning the horizontal gyro "
                                    "bias (0: off)", "1/s^2", 0.0, 10.0)
    min_speed_mps: float = setting(0.5, "horizontal GNSS speed below which the weights are "
                                   "left alone", "m/s", 0.0, 100.0)
    converged_sigma_rad: float = setting(math.radians(15.0), "yaw sigma below which the yaw "
                                         "counts as converged", "rad", 1e-6, math.pi)
    min_weight_updates: int = setting(10, "weight updates (moving) needed before "
                                      "convergence", "count", 0, 10**6)
    weight_floor: float = setting(1e-5, "lower bound of each normalised weight (below "
                                  "0.5 / models)", "", 0.0, 0.25)
    innovation_gate: float = setting(5.0, "velocity innovations are shortened to this before "
                                     "they correct a hypothesis", "sigma", 1e-3, 1000.0)
    accel_baseline_s: float = setting(0.5, "shortest span of GNSS velocities differenced into "
                                      "the horizontal acceleration", "s", 0.0, 60.0)
    max_velocity_gap_s: float = setting(1.5, "GNSS velocities further apart are not "
                                        "differenced (at least accel_baseline_s)", "s", 0.0,
                                        60.0)
    align_time_s: float = setting(2.0, "fast tilt re-alignment once the acceleration is "
                                  "known; the hypotheses start this long after", "s", 0.0,
                                  600.0)
    velocity_delay_s: float = setting(math.nan, "GNSS velocity latency; NaN: the estimator's "
                                      "gnss.delay_s (0 when used alone)", "s", 0.0, 1.0,
                                      allow_nan=True)

    def __post_init__(self) -> None:
        check_settings(self)
        for name in ("models", "min_weight_updates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer count, got {value!r}")
        if not self.weight_floor < 0.5 / self.models:
            raise ValueError(f"weight_floor must be below 0.5 / models = "
                             f"{0.5 / self.models:g}, got {self.weight_floor!r}")
        if not self.max_velocity_gap_s >= self.accel_baseline_s:
            raise ValueError(f"max_velocity_gap_s must be at least accel_baseline_s "
                             f"({self.accel_baseline_s} s), got {self.max_velocity_gap_s!r}")


def _vector(value: ArrayLike, name: str, unit: str) -> tuple[float, float, float]:
    """Three floats from a 3-vector, or ValueError."""
    # Plain floats from an array: much faster to unpack than numpy scalars.
    items = cast("Iterable[float]", value.tolist() if isinstance(value, np.ndarray) else value)
    try:
        x, y, z = items
        return float(x), float(y), float(z)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 3 numbers ({unit}), got {value!r}") from None


class YawEstimator:
    """Bank of ``config.models`` yaw hypotheses fed by ``imu`` and ``velocity`` calls.

    Call ``imu`` for every IMU sample and ``velocity`` for every GNSS velocity, in time
    order; a velocity belongs to the time of the latest IMU sample minus
    ``config.velocity_delay_s``. The outputs (``yaw``, ``yaw_sigma``, ``converged``,
    ``attitude``, ``weights``) can be read at any time; until ``converged`` the yaw is only
    as good as ``yaw_sigma`` says (at the start about 108 degrees with 5 models: unknown).

    ``rejected`` counts the ignored inputs by reason: ``imu_dt`` (dt not finite, <= 0 or
    > 0.5 s), ``imu_nonfinite``, ``velocity_nonfinite``, ``velocity_sigma`` (sigma not
    finite or <= 0).
    """

    def __init__(self, config: YawEstimatorConfig = YawEstimatorConfig()) -> None:
        self.config = config
        delay = config.velocity_delay_s
        self._delay = delay if math.isfinite(delay) else 0.0  # s
        self.rejected: dict[str, int] = {"imu_dt": 0, "imu_nonfinite": 0,
                                         "velocity_nonfinite": 0, "velocity_sigma": 0}
        n = config.models
        self._rotation = np.empty((n, 3, 3))  # body FLU -> ENU, per hypothesis
        self._gyro_bias = np.zeros((n, 3))  # rad/s, body axes, per attitude
        self._velocity = np.zeros((n, 2))  # m/s, (east, north)
        self._covariance = np.zeros((n, 3, 3))  # of (v_east m/s, v_north m/s, yaw rad)
        self._weights = np.empty(n)
        self._jacobian = np.tile(np.eye(3), (n, 1, 1))
        self._yaw_noise = np.zeros((3, 3))
        self._yaw_noise[2, 2] = config.gyro_noise ** 2  # rad^2/s^2, times sum(dt^2)
        self._recent: deque[tuple[float, FloatArray]] = deque()  # (clock s, dv (n, 2) m/s)
        self._history: deque[tuple[float, float, float]] = deque(maxlen=HISTORY)
        self._turns: deque[tuple[float, float]] = deque()  # (clock s, yaw turned rad)
        # The IMU window: quaternion [x, y, z, w] body now -> body at its start; integral
        # of the specific force (m/s, body axes at its start); duration (s); sum of dt^2.
        self._window_q: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
        self._window_dv: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self._window_time = 0.0
        self._window_dt2 = 0.0
        self.reset()

    def reset(self) -> None:
        """Forget everything but ``rejected``: hypotheses spread again, equal weights, the
        tilt levelled again from the next accelerometer samples."""
        n = self.config.models
        yaws = -math.pi + 2.0 * math.pi * np.arange(n) / n
        c, s = np.cos(yaws), np.sin(yaws)
        self._rotation[:] = 0.0
        self._rotation[:, 0, 0] = self._rotation[:, 1, 1] = c
        self._rotation[:, 1, 0], self._rotation[:, 0, 1] = s, -s
        self._rotation[:, 2, 2] = 1.0
        self._gyro_bias[:] = 0.0
        self._velocity[:] = 0.0
        self._covariance[:] = 0.0
        self._covariance[:, 2, 2] = (math.pi / n) ** 2  # 1 sigma: half the spacing
        self._weights[:] = 1.0 / n
        self._recent.clear()
        self._history.clear()
        self._turns.clear()
        self._levelled = False  # tilt set from a first window of specific force
        self._aligning = False  # tilts re-aligning with the GNSS acceleration known
        self._ekf_started = False  # velocities set from a GNSS velocity
        self._clock = 0.0  # s, sum of the accepted IMU intervals
        self._aligned_at = 0.0  # s (clock) of the last (re-)alignment of the tilts
        self._updated_at = 0.0  # s (clock) of the last EKF update
        self._advances = 0
        self._weight_updates = 0
        self._last_speed = 0.0  # m/s
        self._acceleration = (0.0, 0.0)  # m/s^2 (east, north), from GNSS velocities
        self._start_window()

    # ----- inputs ------------------------------------------------------------------------
    def imu(self, dt: float, gyro: ArrayLike, accel: ArrayLike) -> None:
        """One IMU sample: interval ``dt`` (s) since the previous one, body (FLU) rate
        ``gyro`` (rad/s) and specific force ``accel`` (m/s^2), both means over the
        interval. Non-finite values or ``dt`` outside (0, 0.5] s are ignored and counted;
        anything but 3 numbers for ``gyro`` or ``accel`` raises ValueError."""
        wx, wy, wz = _vector(gyro, "gyro", "rad/s")
        fx, fy, fz = _vector(accel, "accel", "m/s^2")
        if not (math.isfinite(dt) and 0.0 < dt <= MAX_IMU_DT):
            self.rejected["imu_dt"] += 1
            return
        if not all(map(math.isfinite, (wx, wy, wz, fx, fy, fz))):
            self.rejected["imu_nonfinite"] += 1
            return
        self._clock += dt
        # Specific force at mid-interval, in the body axes at the sample's start ...
        h = 0.5 * dt
        fx, fy, fz = (fx + h * (wy * fz - wz * fy), fy + h * (wz * fx - wx * fz),
                      fz + h * (wx * fy - wy * fx))
        # ... then in those at the window's start: rotated by the window quaternion.
        qx, qy, qz, qw = self._window_q
        tx, ty, tz = 2.0 * (qy * fz - qz * fy), 2.0 * (qz * fx - qx * fz), 2.0 * (qx * fy - qy * fx)
        vx, vy, vz = self._window_dv
        self._window_dv = (vx + dt * (fx + qw * tx + qy * tz - qz * ty),
                           vy + dt * (fy + qw * ty + qz * tx - qx * tz),
                           vz + dt * (fz + qw * tz + qx * ty - qy * tx))
        # Window quaternion times exp(rate * dt / 2).
        angle = math.sqrt(wx * wx + wy * wy + wz * wz) * dt
        scale = 0.5 * dt * (math.sin(0.5 * angle) / (0.5 * angle) if angle > 1e-9 else 1.0)
        px, py, pz, pw = wx * scale, wy * scale, wz * scale, math.cos(0.5 * angle)
        self._window_q = (qw * px + qx * pw + qy * pz - qz * py,
                          qw * py - qx * pz + qy * pw + qz * px,
                          qw * pz + qx * py - qy * px + qz * pw,
                          qw * pw - qx * px - qy * py - qz * pz)
        self._window_time += dt
        self._window_dt2 += dt * dt
        if self._window_time >= WINDOW_S:
            self._advance()

    def velocity(self, velocity_enu: ArrayLike, sigma_mps: float) -> None:
        """A GNSS velocity (ENU, m/s; only east and north are used) with its 1-sigma per
        axis (m/s). Non-finite values or a sigma <= 0 are ignored and counted."""
        measured = np.asarray(velocity_enu, dtype=np.float64).reshape(-1)
        if measured.size < 2:
            raise ValueError(f"velocity_enu needs east and north (m/s), got {measured!r}")
        if not np.isfinite(measured[:2]).all():
            self.rejected["velocity_nonfinite"] += 1
            return
        if not (math.isfinite(sigma_mps) and sigma_mps > 0.0):
            self.rejected["velocity_sigma"] += 1
            return
        east, north = float(measured[0]), float(measured[1])
        self._advance()
        self._track_acceleration(east, north)
        speed = math.hypot(east, north)
        moving = max(speed, self._last_speed) >= self.config.min_speed_mps
        self._last_speed = speed
        if not self._ekf_started:
            span = self._clock - self._history[0][0]
            if not self._aligning:
                if self._levelled and len(self._history) > 1 and (
                        span >= self.config.accel_baseline_s):
                    # Re-align the tilts quickly now that the acceleration is known.
                    self._aligning, self._aligned_at = True, self._clock
            elif self._clock - self._aligned_at >= self.config.align_time_s:
                self._start_ekf(east, north, sigma_mps ** 2)
            return
        self._update(np.array([east, north]), sigma_mps ** 2, moving)

    # ----- outputs -----------------------------------------------------------------------
    @property
    def weights(self) -> FloatArray:
        """Weight of each hypothesis (dimensionless, sums to 1), a copy."""
        return self._weights.copy()

    @property
    def yaw(self) -> float:
        """Combined ENU yaw (rad, in (-pi, pi]): the weighted circular mean."""
        return self._mean(self._yaws())

    @property
    def yaw_sigma(self) -> float:
        """1-sigma of ``yaw`` (rad): each hypothesis's own yaw variance plus its squared,
        wrapped distance from the mean, weighted."""
        yaws = self._yaws()
        spread = _wrap(yaws - self._mean(yaws))
        variance = self._weights @ (self._covariance[:, 2, 2] + spread * spread)
        return math.sqrt(float(variance))

    @property
    def converged(self) -> bool:
        """``yaw_sigma`` below ``converged_sigma_rad`` after at least ``min_weight_updates``
        velocity updates while moving."""
        return (self._weight_updates >= self.config.min_weight_updates
                and self.yaw_sigma < self.config.converged_sigma_rad)

    def attitude(self) -> FloatArray:
        """Body (FLU) -> ENU quaternion ``[x, y, z, w]``: the weighted tilt of the
        hypotheses with the combined ``yaw``; for aligning a navigation filter in motion."""
        up = (self._weights @ self._rotation[:, 2, :]) @ self._window_rotation()
        roll = math.atan2(float(up[1]), float(up[2]))
        pitch = math.atan2(-float(up[0]), math.hypot(float(up[1]), float(up[2])))
        q = quaternion.multiply(
            quaternion.from_rotation_vector([0.0, 0.0, self.yaw]),
            quaternion.multiply(quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                                quaternion.from_rotation_vector([roll, 0.0, 0.0])))
        return quaternion.canonical(q)

    # ----- internals: attitudes ----------------------------------------------------------
    def _start_window(self) -> None:
        self._window_q = (0.0, 0.0, 0.0, 1.0)
        self._window_dv = (0.0, 0.0, 0.0)
        self._window_time = 0.0
        self._window_dt2 = 0.0

    def _window_rotation(self) -> FloatArray:
        """Rotation matrix of the window: body axes now -> body axes at its start."""
        x, y, z, w = self._window_q
        return np.array([
            [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w)],
            [2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w)],
            [2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)]])

    def _yaws(self) -> FloatArray:
        """ZYX yaw (rad) of each hypothesis's attitude at the latest IMU sample."""
        first_column = self._rotation[:, :2, :] @ self._window_rotation()[:, 0]
        return np.arctan2(first_column[:, 1], first_column[:, 0])

    def _mean(self, yaws: FloatArray) -> float:
        mean = math.atan2(float(self._weights @ np.sin(yaws)),
                          float(self._weights @ np.cos(yaws)))
        return math.pi if mean <= -math.pi else mean

    def _advance(self) -> None:
        """Move the bank over the IMU window: tilt correction, EKF prediction, rotation."""
        duration = self._window_time
        if duration <= 0.0:
            return
        dv = np.array(self._window_dv)
        force_norm = math.sqrt(float(dv @ dv)) / duration  # m/s^2, mean over the window
        direction = dv / (force_norm * duration)
        tilt = False
        if not self._levelled:
            if force_norm > 0.5 * GRAVITY:
                self._level(direction)
        else:
            self._turn_acceleration()
            tilt = 0.5 * GRAVITY < force_norm < 1.5 * GRAVITY  # else no use for the tilt
        if _kernels is not None:
            self._advance_compiled(_kernels, direction, duration, tilt)
        else:
            window = self._window_rotation()
            if tilt:
                window = self._tilt_correction(direction, duration) @ window
            if self._ekf_started:
                self._predict(self._rotation @ dv)
            self._rotation[:] = self._rotation @ window
        self._advances += 1
        if self._advances % REORTHONORMALIZE_EVERY == 0:
            u, _, vt = np.linalg.svd(self._rotation)
            self._rotation[:] = u @ vt
        self._start_window()

    def _level(self, up_body: FloatArray) -> None:
        """Tilt every hypothesis so that ``up_body`` (unit, body axes) points up; yaws
        stay as spread."""
        x, y, z = (float(c) for c in up_body)
        roll, pitch = math.atan2(y, z), math.atan2(-x, math.hypot(y, z))
        cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
        tilt = np.array([[cp, sp * sr, sp * cr], [0.0, cr, -sr], [-sp, cp * sr, cp * cr]])
        self._rotation[:] = self._rotation @ tilt  # Rz(yaw) Ry(pitch) Rx(roll)
        self._levelled, self._aligned_at = True, self._clock

    def _tilt_correction(self, direction: FloatArray, duration: float) -> FloatArray:
        """Rotation matrices (body axes at the window's start, one per hypothesis) that
        apply the gyro-bias estimate over the window and turn each attitude so that the
        specific force it expects (gravity plus the GNSS acceleration, rotated into body
        axes by that attitude) moves towards the measured ``direction`` (unit, body axes)
        by the complementary filter's share of the error; the bias integrates the error."""
        expected, share, bias_gain = self._tilt_terms(duration)
        predicted = np.array(expected) @ self._rotation
        x, y, z = (float(c) for c in direction)
        # Rows: direction x predicted; turning about it moves predicted towards direction.
        axis = predicted @ np.array([[0.0, z, -y], [-z, 0.0, x], [y, -x, 0.0]])
        sine = np.sqrt(np.einsum("ij,ij->i", axis, axis))
        angle = np.arctan2(sine, predicted @ direction)
        error = axis * (angle / np.maximum(sine, 1e-12))[:, None]  # rad, rotation vectors
        phi = share * error + self._gyro_bias * duration
        if bias_gain > 0.0:
            self._gyro_bias += bias_gain * error
            np.clip(self._gyro_bias, -MAX_GYRO_BIAS, MAX_GYRO_BIAS, out=self._gyro_bias)
        skew = (phi @ _GENERATORS).reshape(-1, 3, 3)
        if share < SMALL_TURN_SHARE:  # |phi| well below 0.01 rad: exp to second order
            small: FloatArray = _IDENTITY + skew + 0.5 * (skew @ skew)
            return small
        turn = np.sqrt(np.einsum("ij,ij->i", phi, phi))  # rad
        safe = np.maximum(turn, 1e-12)
        a = (np.sin(turn) / safe)[:, None, None]
        b = ((1.0 - np.cos(turn)) / (safe * safe))[:, None, None]
        rotation: FloatArray = _IDENTITY + a * skew + b * (skew @ skew)  # Rodrigues
        return rotation

    def _tilt_terms(self, duration: float) -> tuple[tuple[float, float, float], float, float]:
        """(expected specific force, unit ENU: gravity plus the GNSS acceleration when a
        recent velocity gives it; the correction's share of the error: a running mean at
        first, then the complementary filter's gain; the gyro-bias gain over ``duration``,
        0 during the quick alignment)."""
        recent = bool(self._history) and (
            self._clock - self._history[-1][0] <= self.config.max_velocity_gap_s)
        east, north = self._acceleration if recent else (0.0, 0.0)
        size = math.sqrt(east * east + north * north + GRAVITY * GRAVITY)
        age = self._clock - self._aligned_at
        share = min(1.0, max(self.config.tilt_gain * duration, duration / max(age, duration)))
        learning = age * self.config.tilt_gain >= 1.0
        bias_gain = self.config.gyro_bias_gain * duration if learning else 0.0
        return (east / size, north / size, GRAVITY / size), share, bias_gain

    def _advance_compiled(self, kernels: ModuleType, direction: FloatArray, duration: float,
                          tilt: bool) -> None:
        """The tilt correction, EKF prediction and rotation of ``_advance`` in one call."""
        expected, share, bias_gain = self._tilt_terms(duration) if tilt else (
            (0.0, 0.0, 1.0), 0.0, 0.0)
        dv_enu = np.empty((self.config.models, 3))
        kernels.yaw_bank_advance(
            self._rotation, self._gyro_bias, self._velocity, self._covariance, dv_enu,
            self._window_q, self._window_dv, duration, expected, direction.tolist(), share,
            bias_gain, self._yaw_noise[2, 2] * self._window_dt2,
            (1 if tilt else 0) | (2 if self._ekf_started else 0))
        if self._ekf_started:
            self._remember_change(dv_enu)

    def _turn_acceleration(self) -> None:
        """Turn the GNSS acceleration with the yaw the vehicle turns over the window (the
        weighted up axis in body axes dotted with the window's rotation vector) and keep
        that angle for ``_track_acceleration``."""
        qx, qy, qz, _ = self._window_q
        up = self._weights @ self._rotation[:, 2, :]
        turned = 2.0 * float(up[0] * qx + up[1] * qy + up[2] * qz)
        self._turns.append((self._clock, turned))
        while self._turns[0][0] < self._clock - TURN_MEMORY_S:
            self._turns.popleft()
        c, s = math.cos(turned), math.sin(turned)
        east, north = self._acceleration
        self._acceleration = (c * east - s * north, s * east + c * north)

    def _rotate_yaw(self, angles: FloatArray) -> None:
        """Left-multiply each attitude by a rotation of ``angles`` (rad) about ENU up."""
        c, s = np.cos(angles)[:, None], np.sin(angles)[:, None]
        east_row = self._rotation[:, 0, :].copy()
        north_row = self._rotation[:, 1, :].copy()
        self._rotation[:, 0, :] = c * east_row - s * north_row
        self._rotation[:, 1, :] = s * east_row + c * north_row

    # ----- internals: GNSS and the EKFs --------------------------------------------------
    def _track_acceleration(self, east: float, north: float) -> None:
        """Horizontal acceleration (m/s^2) from this GNSS velocity and the newest earlier one
        at least ``accel_baseline_s`` older (else the oldest one kept); zero (unknown)
        after a gap."""
        now, history = self._clock, self._history
        if history and now - history[-1][0] > self.config.max_velocity_gap_s:
            history.clear()
        if history and now > history[-1][0]:
            then, east0, north0 = history[0]
            for sample in reversed(history):
                if now - sample[0] >= self.config.accel_baseline_s:
                    then, east0, north0 = sample
                    break
            span = now - then
            # The difference belongs to the middle of the span, ``lag`` ago: turn it by
            # the yaw the vehicle turned since (the acceleration of a coordinated turn).
            lag = self._delay + 0.5 * span
            turned = sum(angle for stamp, angle in self._turns if stamp > now - lag)
            c, s = math.cos(turned), math.sin(turned)
            east_rate, north_rate = (east - east0) / span, (north - north0) / span
            self._acceleration = (c * east_rate - s * north_rate, s * east_rate + c * north_rate)
        elif not history:
            self._acceleration = (0.0, 0.0)
        history.append((now, east, north))

    def _start_ekf(self, east: float, north: float, variance: float) -> None:
        """Velocities from a GNSS velocity (m/s, variance (m/s)^2), yaw variances kept."""
        self._velocity[:] = (east, north)
        self._covariance[:, :2, :] = 0.0
        self._covariance[:, :, :2] = 0.0
        self._covariance[:, 0, 0] = self._covariance[:, 1, 1] = variance
        self._ekf_started = True
        self._updated_at = self._clock
        self._recent.clear()

    def _predict(self, dv_enu: FloatArray) -> None:
        """EKF prediction of every hypothesis over the window, from its ENU velocity change
        (m/s, (n, 3)); the yaw itself moves with the attitude."""
        east, north = dv_enu[:, 0], dv_enu[:, 1]
        self._velocity[:, 0] += east
        self._velocity[:, 1] += north
        jacobian = self._jacobian  # d(velocity change)/d(yaw) in the last column
        jacobian[:, 0, 2], jacobian[:, 1, 2] = -north, east
        self._covariance[:] = (jacobian @ self._covariance @ jacobian.transpose(0, 2, 1)
                               + self._yaw_noise * self._window_dt2)
        self._remember_change(dv_enu)

    def _remember_change(self, dv_enu: FloatArray) -> None:
        """Keep this window's horizontal velocity changes for the latency of the GNSS
        velocity (``_update``)."""
        delay = self._delay
        if delay > 0.0:
            recent = self._recent
            recent.append((self._clock, dv_enu[:, :2].copy()))
            while recent and recent[0][0] <= self._clock - delay:
                recent.popleft()

    def _update(self, measured: FloatArray, variance: float, moving: bool) -> None:
        """EKF update of every hypothesis with a GNSS horizontal velocity (m/s, variance
        (m/s)^2 per axis) and, when ``moving``, the Bayesian weight update.

        With a latency, the measurement is compared with ``v - d``, ``d`` the velocity
        change over the last ``velocity_delay_s``; ``d`` turns with the yaw, hence the yaw
        column of H."""
        p = self._covariance
        interval = self._clock - self._updated_at
        self._updated_at = self._clock
        p[:, 0, 0] += (self.config.accel_noise * interval) ** 2
        p[:, 1, 1] += (self.config.accel_noise * interval) ** 2
        n = len(p)
        h = np.zeros((n, 2, 3))
        h[:, 0, 0] = h[:, 1, 1] = 1.0
        innovation = measured - self._velocity  # (n, 2)
        if self._recent:
            kept = np.array([dv for _, dv in self._recent])  # (windows, n, 2)
            change = kept.sum(axis=0)
            innovation += change
            h[:, 0, 2], h[:, 1, 2] = change[:, 1], -change[:, 0]
        ph = p @ h.transpose(0, 2, 1)  # (n, 3, 2)
        cov = h @ ph  # innovation covariance S
        cov[:, 0, 0] += variance
        cov[:, 1, 1] += variance
        det = cov[:, 0, 0] * cov[:, 1, 1] - cov[:, 0, 1] * cov[:, 1, 0]
        inverse = np.empty((n, 2, 2))
        inverse[:, 0, 0], inverse[:, 1, 1] = cov[:, 1, 1] / det, cov[:, 0, 0] / det
        inverse[:, 0, 1], inverse[:, 1, 0] = -cov[:, 0, 1] / det, -cov[:, 1, 0] / det
        whitened = np.einsum("nij,nj->ni", inverse, innovation)
        distance2 = np.einsum("ni,ni->n", innovation, whitened)  # squared Mahalanobis
        shrink = np.minimum(1.0, self.config.innovation_gate
                            / np.sqrt(np.maximum(distance2, 1e-300)))
        gain = ph @ inverse  # (n, 3, 2)
        correction = np.einsum("nij,nj->ni", gain, innovation * shrink[:, None])
        self._velocity += correction[:, :2]
        self._rotate_yaw(correction[:, 2])
        if self._recent:  # the velocity changes kept turn with the yaw too
            c, s = np.cos(correction[:, 2]), np.sin(correction[:, 2])
            east, north = kept[:, :, 0].copy(), kept[:, :, 1]
            kept[:, :, 0] = c * east - s * north
            kept[:, :, 1] = s * east + c * north
            self._recent = deque(zip((stamp for stamp, _ in self._recent), kept, strict=True))
        p -= gain @ (h @ p)
        p[:] = 0.5 * (p + p.transpose(0, 2, 1))
        if moving:
            log_likelihood = -0.5 * (distance2 + np.log(det))
            weights = self._weights * np.exp(log_likelihood - log_likelihood.max())
            weights = np.maximum(weights / weights.sum(), self.config.weight_floor)
            self._weights[:] = weights / weights.sum()
            self._weight_updates += 1


def _wrap(angles: FloatArray) -> FloatArray:
    """Angles (rad) wrapped to [-pi, pi)."""
    wrapped: FloatArray = (angles + math.pi) % (2.0 * math.pi) - math.pi
    return wrapped
