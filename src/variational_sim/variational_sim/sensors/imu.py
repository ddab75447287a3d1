"""Six-axis strapdown IMU model: gyro and accelerometer in ``imu_link``.

Truth comes from the simulator in the map frame (ENU, REP-103), which is fixed to the
Earth; the model adds what a real sensor there senses on top of it:

- the Earth's rotation on the gyro (``R^T w_ie``), since the estimator mechanises in
  ECEF and expects inertial rates; optionally the Coriolis specific force
  ``2 w_ie x v`` on the accelerometer when the caller passes the velocity;
- the lever arm of ``imu_link`` from the ``base_link`` origin (``alpha x r + w x (w x r)``);
- the mount rotation of ``imu_link`` in ``base_link``;
- per axis: bias = turn-on constant + first-order Gauss-Markov (bias instability) +
  random walk, all exactly discretised at the sample period; white noise of standard
  deviation ``density * sqrt(rate)``; fault spikes; saturation (clip and flag).

Bias sign as the estimator's (trident_ekf, "truth = reading + bias"):
``reading = truth - bias + noise``, so ``gyro_bias``/``accel_bias`` compare directly
with the estimated biases. The accelerometer reads specific force (REP-145: +g on the
up axis at rest). Per-sample arithmetic is on Python floats (``mav_geometry.scalar``):
numpy's per-call overhead would dominate 3-vector maths at 200 Hz.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_geometry import scalar
from mav_geometry.arrays import FloatVector
from mav_geometry.kernels import load_kernels
from variational_sim.sensors._validation import (
    require_finite_vector,
    require_in_range,
    require_non_negative,
    require_positive,
    require_unit_quaternion,
)
from variational_sim.sensors.base import Output, Sensor, SensorTruth, stamp
from variational_sim.sensors.noise import StandardNormalStream, gauss_markov_coefficients

_kernels = load_kernels("variational_sim.integrators._kernels")

EARTH_RATE_RAD_S = 7.292115e-5
"""WGS-84 rotation rate of the Earth about its polar axis (rad/s)."""

# WGS-84 normal gravity (Somigliana with the second-order height correction; Groves,
# Principles of GNSS, Inertial and Multisensor Navigation, 2nd ed., eqs. 2.134 and 2.139).
_EQUATORIAL_GRAVITY = 9.7803253359  # m/s^2
_SOMIGLIANA_K = 1.931852652458e-3
_ECCENTRICITY_SQUARED = 6.69437999014e-3
_SEMI_MAJOR_AXIS_M = 6378137.0
_FLATTENING = 1.0 / 298.257223563
_GRAVITY_RATIO_M = 3.44978650684e-3  # omega^2 a^2 b / GM

Vector3 = tuple[float, float, float]
MatrixLike: TypeAlias = Sequence[Sequence[float]] | NDArray[np.float64]
"""A 3x3 matrix as rows of Python floats or a float array."""


def earth_rate_enu(latitude_deg: float) -> NDArray[np.float64]:
    """Earth rotation rate vector ``w_ie`` (rad/s) in ENU axes at a geodetic latitude (deg).

    The polar axis lies in the north-up plane: ``Omega (0, cos(lat), sin(lat))``.
    """
    require_in_range("earth_rate_enu", "latitude_deg", latitude_deg, -90.0, 90.0)
    latitude = math.radians(latitude_deg)
    return np.array(
        [0.0, EARTH_RATE_RAD_S * math.cos(latitude), EARTH_RATE_RAD_S * math.sin(latitude)]
    )


def normal_gravity_enu(latitude_deg: float, height_m: float) -> NDArray[np.float64]:
    """WGS-84 normal gravity (m/s^2, gravitation plus centrifugal) in ENU at a geodetic
    latitude (deg) and ellipsoidal height (m): ``(0, 0, -gamma)``, along the ellipsoid normal.

    The Earth model an ECEF estimator uses; a constant standard gravity instead differs by
    up to 0.03 m/s^2 with latitude, which the estimator would take for an accel bias.
    """
    require_in_range("normal_gravity_enu", "latitude_deg", latitude_deg, -90.0, 90.0)
    require_in_range("normal_gravity_enu", "height_m", height_m, -1.0e4, 1.0e5)
    sin_squared = math.sin(math.radians(latitude_deg)) ** 2
    surface = (_EQUATORIAL_GRAVITY * (1.0 + _SOMIGLIANA_K * sin_squared)
               / math.sqrt(1.0 - _ECCENTRICITY_SQUARED * sin_squared))
    ratio = height_m / _SEMI_MAJOR_AXIS_M
    linear = 2.0 * (1.0 + _FLATTENING + _GRAVITY_RATIO_M - 2.0 * _FLATTENING * sin_squared)
    return np.array([0.0, 0.0, -surface * (1.0 - linear * ratio + 3.0 * ratio**2)])


@dataclass(frozen=True)
class ImuConfig:
    """IMU error model and mounting. Units: rad, m, s; densities per sqrt(Hz), walks per sqrt(s).

    ``gyro_bias_instability``/``accel_bias_instability`` are the stationary standard
    deviations of the Gauss-Markov bias part (correlation time ``bias_correlation_time_s``);
    ``*_turn_on_sigma`` that of the constant drawn at power-on; ``*_range`` the saturation
    limits per axis. ``mount_rotation_xyzw`` is the orientation of ``imu_link`` in
    ``base_link`` (maps imu_link vectors into base_link), ``mount_position_m`` its origin
    in ``base_link``.
    """

    rate_hz: float = 200.0
    gyro_noise_density: float = 1e-3
    accel_noise_density: float = 2e-2
    gyro_bias_walk: float = 1e-5
    accel_bias_walk: float = 1e-4
    gyro_turn_on_sigma: float = 2e-3
    accel_turn_on_sigma: float = 0.03
    gyro_bias_instability: float = 5e-4
    accel_bias_instability: float = 5e-3
    bias_correlation_time_s: float = 300.0
    gyro_range: float = 34.9
    accel_range: float = 156.9
    mount_rotation_xyzw: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    mount_position_m: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in ("rate_hz", "bias_correlation_time_s", "gyro_range", "accel_range"):
            require_positive(owner, name, getattr(self, name))
        for name in (
            "gyro_noise_density", "accel_noise_density", "gyro_bias_walk", "accel_bias_walk",
            "gyro_turn_on_sigma", "accel_turn_on_sigma", "gyro_bias_instability",
            "accel_bias_instability",
        ):
            require_non_negative(owner, name, getattr(self, name))
        require_unit_quaternion(owner, "mount_rotation_xyzw", self.mount_rotation_xyzw)
        require_finite_vector(owner, "mount_position_m", self.mount_position_m, 3)


@dataclass(frozen=True)
class ImuSample:
    """One IMU reading in ``imu_link``: ``gyro`` rad/s, ``accel`` specific force m/s^2.

    ``saturated`` is True when any axis of either sensor was clipped to its range;
    ``time_s`` the sim time it was sampled at (s).
    """

    gyro: NDArray[np.float64]
    accel: NDArray[np.float64]
    saturated: bool
    time_s: float = 0.0


class _BiasProcess:
    """Three-axis bias: turn-on constant + Gauss-Markov + random walk (sensor units).

    Written out per axis: this runs twice per IMU sample.
    """

    __slots__ = ("_instability", "_markov", "_markov_drive", "_phi", "_turn_on",
                 "_turn_on_sigma", "_walk", "_walk_step")

    def __init__(self, turn_on_sigma: float, instability: float, walk_density: float,
                 interval_s: float, correlation_time_s: float) -> None:
        self.tune(turn_on_sigma, instability, walk_density, interval_s, correlation_time_s)
        self._turn_on: Vector3 = (0.0, 0.0, 0.0)
        self._markov: Vector3 = (0.0, 0.0, 0.0)
        self._walk: Vector3 = (0.0, 0.0, 0.0)

    def tune(self, turn_on_sigma: float, instability: float, walk_density: float,
             interval_s: float, correlation_time_s: float) -> None:
        """Set the error law; the current bias stays (the turn-on sigma counts at the next
        ``power_on``)."""
        self._turn_on_sigma = turn_on_sigma
        self._instability = instability
        self._phi, drive = gauss_markov_coefficients(interval_s, correlation_time_s)
        self._markov_drive = instability * drive
        self._walk_step = walk_density * math.sqrt(interval_s)

    def power_on(self, normals: Sequence[float]) -> None:
        """New turn-on constant (``normals[0:3]``), Gauss-Markov part from its stationary law
        (``normals[3:6]``), zero random walk."""
        s, g = self._turn_on_sigma, self._instability
        self._turn_on = (s * normals[0], s * normals[1], s * normals[2])
        self._markov = (g * normals[3], g * normals[4], g * normals[5])
        self._walk = (0.0, 0.0, 0.0)

    def advance(self, normals: Sequence[float], start: int) -> Vector3:
        """Step by one sample period with ``normals[start:start + 6]`` (Gauss-Markov drive,
        then random-walk drive); return the new total bias."""
        phi, drive, step = self._phi, self._markov_drive, self._walk_step
        m0, m1, m2 = self._markov
        w0, w1, w2 = self._walk
        m0 = phi * m0 + drive * normals[start]
        m1 = phi * m1 + drive * normals[start + 1]
        m2 = phi * m2 + drive * normals[start + 2]
        w0 += step * normals[start + 3]
        w1 += step * normals[start + 4]
        w2 += step * normals[start + 5]
        self._markov = (m0, m1, m2)
        self._walk = (w0, w1, w2)
        return self.total()

    def total(self) -> Vector3:
        """Current total bias per axis."""
        (c0, c1, c2), (m0, m1, m2), (w0, w1, w2) = self._turn_on, self._markov, self._walk
        return (c0 + m0 + w0, c1 + m1 + w1, c2 + m2 + w2)


def _components(vector: FloatVector) -> Sequence[float]:
    """A vector as Python floats: numpy scalars are slow in scalar arithmetic."""
    if isinstance(vector, np.ndarray):
        components: list[float] = vector.tolist()
        return components
    return vector


def _rows(matrix: MatrixLike) -> Sequence[Sequence[float]]:
    """A matrix as rows of Python floats (see ``_components``)."""
    if isinstance(matrix, np.ndarray):
        rows: list[list[float]] = matrix.tolist()
        return rows
    return matrix


def _transpose_apply(rows: Sequence[Sequence[float]], v: Sequence[float]) -> Vector3:
    """``M^T v`` for a 3x3 matrix given by its rows."""
    (a, b, c), (d, e, f), (g, h, i) = rows
    x, y, z = v
    return (a * x + d * y + g * z, b * x + e * y + h * z, c * x + f * y + i * z)


def _diagonal(variance: float) -> list[float]:
    """Row-major 3x3 covariance with ``variance`` on the diagonal."""
    return [variance, 0.0, 0.0, 0.0, variance, 0.0, 0.0, 0.0, variance]


def _clip(x: float, y: float, z: float, limit: float) -> tuple[Vector3, bool]:
    """``(x, y, z)`` clipped to ``[-limit, limit]`` and whether any axis was clipped."""
    if -limit <= x <= limit and -limit <= y <= limit and -limit <= z <= limit:
        return (x, y, z), False
    return (min(max(x, -limit), limit), min(max(y, -limit), limit),
            min(max(z, -limit), limit)), True


class ImuModel(Sensor):
    """Samples an IMU from rigid-body truth once per period ``1 / config.rate_hz``.

    Noise comes from ``rng`` in fixed blocks (``StandardNormalStream``), so a seed
    reproduces every sample and bias. ``earth_rate_enu`` is ``w_ie`` in ENU (rad/s,
    see ``earth_rate_enu()``); zero models a non-rotating Earth.
    """

    # Standard normals per sample: white gyro (0:3), white accel (3:6), gyro bias drives
    # (6:12, Gauss-Markov then random walk), accel bias drives (12:18).
    _NORMALS_PER_SAMPLE = 18
    name: ClassVar[str] = "imu"
    fault_kinds: ClassVar[dict[str, int]] = {"spike": 6, "saturation": 2}
    """``spike``: gyro (rad/s) and accel (m/s^2) added to every sample in the window;
    ``saturation``: gyro (rad/s) and accel (m/s^2) ranges lowered to these in the window."""

    def __init__(self, config: ImuConfig, rng: np.random.Generator,
                 earth_rate_enu: ArrayLike = (0.0, 0.0, 0.0)) -> None:
        earth_rate = np.asarray(earth_rate_enu, dtype=float).reshape(-1).tolist()
        require_finite_vector("ImuModel", "earth_rate_enu", earth_rate, 3)
        super().__init__()
        self._config = config
        self._rng = rng
        self._earth_rate: Vector3 = tuple(earth_rate)
        interval = 1.0 / config.rate_hz
        sqrt_rate = math.sqrt(config.rate_hz)
        self._gyro_white = config.gyro_noise_density * sqrt_rate
        self._accel_white = config.accel_noise_density * sqrt_rate
        self._gyro_bias = _BiasProcess(
            config.gyro_turn_on_sigma, config.gyro_bias_instability, config.gyro_bias_walk,
            interval, config.bias_correlation_time_s)
        self._accel_bias = _BiasProcess(
            config.accel_turn_on_sigma, config.accel_bias_instability, config.accel_bias_walk,
            interval, config.bias_correlation_time_s)
        # Rows of the imu_link -> base_link rotation (readings go back with its transpose).
        self._mount_rows = scalar.to_matrix(config.mount_rotation_xyzw)
        lever_x, lever_y, lever_z = config.mount_position_m  # 3 numbers (ImuConfig checks)
        self._lever: Vector3 = (float(lever_x), float(lever_y), float(lever_z))
        self._kernel_constants: tuple[float, ...] = ()
        self._normals = StandardNormalStream(rng, self._NORMALS_PER_SAMPLE)
        self._spike: tuple[Vector3, Vector3] | None = None
        self._ranges = (config.gyro_range, config.accel_range)
        self._covariance_stale = True
        self._pack_kernel_constants()
        self.reset()

    def _pack_kernel_constants(self) -> None:
        """The constants of the compiled reading, in its layout: w_ie (ENU), lever arm,
        mount rows, white gyro and accelerometer sigmas."""
        self._kernel_constants = (*self._earth_rate, *self._lever,
                                  *(value for row in self._mount_rows for value in row),
                                  self._gyro_white, self._accel_white)

    def set_error_model(self, config: ImuConfig) -> None:
        """Noise densities, bias walks and instabilities, correlation time and ranges of
        ``config`` from the next sample on; the biases keep their current values and the
        noise stream goes on (turn-on sigmas count at the next ``reset``). The rate and the
        mount are the model's own: they must not change (ValueError)."""
        kept = ("rate_hz", "mount_rotation_xyzw", "mount_position_m")
        changed = [name for name in kept if getattr(config, name) != getattr(self._config, name)]
        if changed:
            raise ValueError(f"ImuModel.set_error_model: {changed} cannot change")
        self._config = config
        self._ranges = (config.gyro_range, config.accel_range)
        interval = 1.0 / config.rate_hz
        sqrt_rate = math.sqrt(config.rate_hz)
        self._gyro_white = config.gyro_noise_density * sqrt_rate
        self._accel_white = config.accel_noise_density * sqrt_rate
        self._pack_kernel_constants()
        self._gyro_bias.tune(config.gyro_turn_on_sigma, config.gyro_bias_instability,
                             config.gyro_bias_walk, interval, config.bias_correlation_time_s)
        self._accel_bias.tune(config.accel_turn_on_sigma, config.accel_bias_instability,
                              config.accel_bias_walk, interval, config.bias_correlation_time_s)
        self._covariance_stale = True

    @property
    def outputs(self) -> tuple[Output, ...]:
        return (Output("imu/data", "sensor_msgs/msg/Imu", "imu_link"),)

    def measure(self, truth: SensorTruth) -> ImuSample:
        angular_acceleration, acceleration = truth.accelerations()
        time_s = truth.time_s
        if self.faults:
            self._apply_faults(time_s)
        return self.sample(truth.rotation_rows, truth.angular_velocity_body,
                           angular_acceleration, acceleration, truth.gravity_enu,
                           truth.velocity_enu, time_s)

    def _apply_faults(self, time_s: float) -> None:
        """Spikes of the active faults on this sample; the ranges of the active saturation
        faults (the configured ones otherwise)."""
        for fault in self.active_faults(time_s, "spike"):
            self.inject_spike(fault.value[:3], fault.value[3:])
        limits = [f.value for f in self.active_faults(time_s, "saturation")]
        self._ranges = (min([self._config.gyro_range, *(v[0] for v in limits)]),
                        min([self._config.accel_range, *(v[1] for v in limits)]))

    def fill(self, reading: ImuSample, messages: Sequence[Any]) -> tuple[bool, ...]:
        (message,) = messages
        stamp(message.header, reading.time_s)
        rate, force = message.angular_velocity, message.linear_acceleration
        rate.x, rate.y, rate.z = reading.gyro.tolist()
        force.x, force.y, force.z = reading.accel.tolist()
        if self._covariance_stale:  # REP-145: no orientation; white-noise variances
            gyro_variance, accel_variance = self.white_variances()
            message.orientation_covariance = [-1.0] + [0.0] * 8
            message.angular_velocity_covariance = _diagonal(gyro_variance)
            message.linear_acceleration_covariance = _diagonal(accel_variance)
            self._covariance_stale = False
        return (True,)

    def white_variances(self) -> tuple[float, float]:
        """White-noise variances of one gyro and accelerometer sample: density^2 * rate."""
        config = self._config
        return (config.gyro_noise_density**2 * config.rate_hz,
                config.accel_noise_density**2 * config.rate_hz)

    def report_values(self) -> dict[str, float]:
        (gx, gy, gz), (ax, ay, az) = self._gyro_bias.total(), self._accel_bias.total()
        return {"gyro_bias_x_rad_s": gx, "gyro_bias_y_rad_s": gy, "gyro_bias_z_rad_s": gz,
                "accel_bias_x_m_s2": ax, "accel_bias_y_m_s2": ay, "accel_bias_z_m_s2": az}

    @property
    def gyro_bias(self) -> NDArray[np.float64]:
        """True total gyro bias (rad/s, imu_link) of the latest sample."""
        return np.array(self._gyro_bias.total())

    @property
    def accel_bias(self) -> NDArray[np.float64]:
        """True total accelerometer bias (m/s^2, imu_link) of the latest sample."""
        return np.array(self._accel_bias.total())

    def reset(self) -> None:
        """Power cycle: redraw turn-on biases and the Gauss-Markov state, zero the random walk,
        drop pending spikes. The generator continues (no reseeding)."""
        normals = self._rng.standard_normal(12).tolist()
        self._gyro_bias.power_on(normals[0:6])
        self._accel_bias.power_on(normals[6:12])
        self._spike = None

    def inject_spike(self, gyro: ArrayLike, accel: ArrayLike) -> None:
        """Add ``gyro`` (rad/s) and ``accel`` (m/s^2), imu_link, to the next sample only.

        Spikes injected before the same sample add up; they pass through saturation.
        """
        gyro_spike = np.asarray(gyro, dtype=float).reshape(-1)
        accel_spike = np.asarray(accel, dtype=float).reshape(-1)
        require_finite_vector("ImuModel.inject_spike", "gyro", gyro_spike.tolist(), 3)
        require_finite_vector("ImuModel.inject_spike", "accel", accel_spike.tolist(), 3)
        if self._spike is not None:
            gyro_spike = gyro_spike + self._spike[0]
            accel_spike = accel_spike + self._spike[1]
        self._spike = (tuple(gyro_spike.tolist()), tuple(accel_spike.tolist()))

    def sample(self, rotation: MatrixLike, angular_velocity_body: FloatVector,
               angular_acceleration_body: FloatVector, acceleration_enu: FloatVector,
               gravity_enu: FloatVector, velocity_enu: FloatVector | None = None,
               time_s: float = 0.0) -> ImuSample:
        """Advance the biases by one period and return the reading at this instant.

        ``rotation``: 3x3 ``base_link -> ENU``; ``angular_velocity_body`` (rad/s) and
        ``angular_acceleration_body`` (rad/s^2) of base_link relative to the map frame, in
        base_link; ``acceleration_enu`` (m/s^2) of the base_link origin relative to the map
        frame; ``gravity_enu`` (m/s^2) the gravity acting there (e.g. ``(0, 0, -9.81)``).
        ``velocity_enu`` (m/s), optional: adds the Coriolis term ``2 w_ie x v``.
        ``time_s`` (s) is stored in the sample.
        Inputs are trusted simulator truth: they are not validated here (hot path).
        The reading is computed in ``integrators/_kernels.c`` when built (the code below is
        its reference; the biases and normals are drawn here either way).
        """
        if _kernels is not None:
            n = self._normals.next_row()
            spike = self._spike
            self._spike = None
            gyro, accel, clipped = _kernels.imu_reading(
                self._kernel_constants, rotation, angular_velocity_body,
                angular_acceleration_body, acceleration_enu, gravity_enu, velocity_enu, n[:6],
                self._gyro_bias.advance(n, 6), self._accel_bias.advance(n, 12),
                None if spike is None else (*spike[0], *spike[1]), *self._ranges)
            return ImuSample(np.array(gyro), np.array(accel), clipped, time_s)
        rows = _rows(rotation)
        wx, wy, wz = omega = _components(angular_velocity_body)
        ae, an, au = _components(acceleration_enu)
        ge, gn, gu = _components(gravity_enu)
        fe, fn, fu = ae - ge, an - gn, au - gu  # gravitation is not felt
        if velocity_enu is not None:
            ce, cn, cu = scalar.cross(self._earth_rate, _components(velocity_enu))
            fe, fn, fu = fe + 2.0 * ce, fn + 2.0 * cn, fu + 2.0 * cu
        fx, fy, fz = _transpose_apply(rows, (fe, fn, fu))
        # The sensor point moves on a circle about the base_link origin; the Earth rate's
        # share of that (|w_ie|^2 r < 1e-8 m/s^2 per metre) is left out.
        lever = self._lever
        tx, ty, tz = scalar.cross(_components(angular_acceleration_body), lever)
        cx, cy, cz = scalar.cross(omega, scalar.cross(omega, lever))
        ex, ey, ez = _transpose_apply(rows, self._earth_rate)
        mount = self._mount_rows
        gx, gy, gz = _transpose_apply(mount, (wx + ex, wy + ey, wz + ez))
        px, py, pz = _transpose_apply(mount, (fx + tx + cx, fy + ty + cy, fz + tz + cz))

        n = self._normals.next_row()
        bgx, bgy, bgz = self._gyro_bias.advance(n, 6)
        bax, bay, baz = self._accel_bias.advance(n, 12)
        gw, aw = self._gyro_white, self._accel_white
        gx, gy, gz = gx - bgx + gw * n[0], gy - bgy + gw * n[1], gz - bgz + gw * n[2]
        px, py, pz = px - bax + aw * n[3], py - bay + aw * n[4], pz - baz + aw * n[5]
        if self._spike is not None:
            (sgx, sgy, sgz), (sax, say, saz) = self._spike
            gx, gy, gz = gx + sgx, gy + sgy, gz + sgz
            px, py, pz = px + sax, py + say, pz + saz
            self._spike = None

        gyro_range, accel_range = self._ranges
        gyro, gyro_clipped = _clip(gx, gy, gz, gyro_range)
        accel, accel_clipped = _clip(px, py, pz, accel_range)
        return ImuSample(np.array(gyro), np.array(accel), gyro_clipped or accel_clipped, time_s)
