"""Three-axis magnetometer in the IMU package: flux density (T) in ``imu_link`` axes.

Model (T; frames REP-103/105: map ENU, base_link FLU). The Earth field is a constant vector
``earth_field_ned_T`` (north, east, down), turned into map ENU ``(east, north, -down)``. Near
the ground a local disturbance (steel, rebar) ``ground_disturbance_T`` (map ENU axes) is
added in full at the ground and faded with ``near_ground_weight``:
``(1 - h / ground_disturbance_height_m)^2`` for the height ``h`` of base_link above the
ground, 0 from that height on. The sum is turned into base_link with the vehicle attitude
(``R^T``, ``truth.rotation_rows``) and into imu_link with the IMU mount (``M^T``, the
rotation of imu_link in base_link, as ``imu.py`` does), then::

    m = S (M^T R^T (e + w(h) g)) + b_hi + rotor_load k + faults + noise

with ``S`` the 3x3 soft-iron matrix (``soft_iron``, row-major), ``b_hi`` the hard iron
(``hard_iron_T``), ``k`` the field of the motor currents at full rotor load
(``motor_interference_T``; the rotor load is the mean squared relative rotor speed, a proxy
for the currents), the ``field_offset_T`` faults (3 numbers, T, sensor frame) while active,
and white noise ``noise_sigma_T`` per axis. The last four are in imu_link axes.

Default Earth field: World Magnetic Model 2025 at the default datum (47.3977 N, 8.5456 E,
488 m ellipsoidal) for 2026.0: N 21.523 uT, E 1.334 uT, D 43.290 uT (declination +3.55 deg,
inclination 63.5 deg, 48.4 uT). The estimator is configured with the same vector.

What the estimator sees: ``magnetic_field`` (``sensor_msgs/MagneticField``, frame
``imu_link``): ``magnetic_field`` in T and ``magnetic_field_covariance`` (row-major 3x3,
diagonal ``noise_sigma_T^2``: the white noise only). It rotates the sample with its IMU
attitude (the estimator's ``body_frame`` sources are in IMU axes), models a hard iron in
"3d" mode and rejects samples whose strength or inclination departs from its model.
``report_values()`` gives the size of everything added to the true Earth field in the last
reading and the heading error that addition alone would cause.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from mav_geometry import scalar
from mav_geometry.settings import check_settings, setting
from variational_sim.sensors._validation import require_unit_quaternion
from variational_sim.sensors.barometer import near_ground_weight
from variational_sim.sensors.base import (
    Matrix3,
    Output,
    Sensor,
    SensorTruth,
    Vector3,
    rotate_transpose,
    stamp,
)
from variational_sim.sensors.noise import StandardNormalStream

WMM2025_DEFAULT_SITE_NED_T = (2.1523e-05, 1.3340e-06, 4.3290e-05)
"""World Magnetic Model 2025 at 47.3977 N, 8.5456 E, 488 m, epoch 2026.0 (T, NED)."""
_IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


def _vector(name: str, value: Sequence[float]) -> Vector3:
    if len(value) != 3:
        raise ValueError(f"{name} must be 3 numbers, got {value!r}")
    return (float(value[0]), float(value[1]), float(value[2]))


@dataclass(frozen=True)
class MagnetometerConfig:
    """Magnetometer rate, Earth field, distortions and noise (see the module docstring).

    Noise default 0.3 uT per axis: IST8310 / LIS3MDL class at 50 Hz, about 0.8 deg of
    heading per sample at the default site (horizontal field 21.6 uT).
    """

    rate_hz: float = setting(50.0, "readings per second", "Hz", 0.1, 1000.0)
    latency_s: float = setting(
        0.0, "delay from a reading's stamp to its delivery", "s", 0.0, 1.0)
    earth_field_ned_T: tuple[float, float, float] = setting(  # noqa: N815 (SI unit T)
        WMM2025_DEFAULT_SITE_NED_T,
        "Earth field north/east/down at the site (default: WMM2025 at 47.3977 N, 8.5456 E, "
        "488 m for 2026.0, declination 3.55 deg, inclination 63.5 deg, 48.4 uT; give the "
        "estimator the same vector)", "T", -1e-4, 1e-4)
    noise_sigma_T: float = setting(  # noqa: N815 (SI unit T)
        3e-7, "white noise per axis (reported as the message's covariance; 0 reports an "
        "all-zero covariance, which the estimator reads as unknown)", "T", 0.0, 1e-4)
    hard_iron_T: tuple[float, float, float] = setting(  # noqa: N815 (SI unit T)
        (0.0, 0.0, 0.0), "constant offset in the sensor frame (imu_link)", "T", -1e-3, 1e-3)
    soft_iron: tuple[float, ...] = setting(
        _IDENTITY, "3x3 soft-iron matrix S, row-major (9 numbers): reading = S field + hard "
        "iron; identity = none", "1", -10.0, 10.0)
    motor_interference_T: tuple[float, float, float] = setting(  # noqa: N815 (SI unit T)
        (0.0, 0.0, 0.0), "field of the motor currents at full rotor load, sensor frame "
        "(imu_link); scaled by the rotor load", "T", -1e-3, 1e-3)
    ground_disturbance_T: tuple[float, float, float] = setting(  # noqa: N815 (SI unit T)
        (0.0, 0.0, 0.0), "local disturbance at the ground (steel, rebar), map ENU axes "
        "(east, north, up); fades to zero at ground_disturbance_height_m", "T", -1e-3, 1e-3)
    ground_disturbance_height_m: float = setting(
        2.0, "height of base_link above the ground where the ground disturbance has faded "
        "to zero ((1 - h / this)^2 below it)", "m", 0.0, 100.0)

    def __post_init__(self) -> None:
        check_settings(self)
        for name in ("earth_field_ned_T", "hard_iron_T", "motor_interference_T",
                     "ground_disturbance_T"):
            _vector(name, getattr(self, name))
        if len(self.soft_iron) != 9:
            raise ValueError(f"soft_iron must be 9 numbers (3x3 row-major), got "
                             f"{self.soft_iron!r}")
        determinant = float(np.linalg.det(np.reshape(self.soft_iron, (3, 3))))
        if not determinant > 1e-6:
            raise ValueError(f"soft_iron must have a positive determinant (a distortion, not "
                             f"a reflection or a collapse), got {self.soft_iron!r} "
                             f"(determinant {determinant:.3g})")


@dataclass(frozen=True, slots=True)
class MagnetometerReading:
    """One reading valid at ``time_s`` (s): flux density (T, imu_link axes) and the diagonal
    of its reported covariance (T^2)."""

    time_s: float
    field_T: Vector3  # noqa: N815 (SI unit T)
    covariance_diagonal_T2: Vector3  # noqa: N815 (SI unit T)


class Magnetometer(Sensor):
    """Flux density in imu_link axes (``MagnetometerReading``); ``mount_rotation_xyzw`` is the
    unit quaternion [x, y, z, w] of imu_link in base_link (the IMU's mount)."""

    name: ClassVar[str] = "magnetometer"
    fault_kinds: ClassVar[dict[str, int]] = {"field_offset_T": 3}
    FRAME_ID: ClassVar[str] = "imu_link"

    def __init__(self, config: MagnetometerConfig, rng: np.random.Generator,
                 mount_rotation_xyzw: Sequence[float]) -> None:
        super().__init__()
        mount = [float(c) for c in mount_rotation_xyzw]
        require_unit_quaternion("Magnetometer", "mount_rotation_xyzw", mount)
        # Rows of the imu_link -> base_link rotation (readings go back with its transpose).
        self._mount_rows: Matrix3 = scalar.to_matrix(mount)
        self._outputs = (Output("magnetic_field", "sensor_msgs/msg/MagneticField",
                                self.FRAME_ID),)
        self._use(config)
        self._normals = StandardNormalStream(rng, 3, block_rows=256)
        self.reset()

    @property
    def outputs(self) -> tuple[Output, ...]:
        return self._outputs

    def set_error_model(self, config: MagnetometerConfig) -> None:
        """Field, distortions and noise of ``config`` from the next reading on (the noise
        stream goes on). The rate and the latency are the schedule's: they must not change
        (ValueError)."""
        kept = ("rate_hz", "latency_s")
        changed = [name for name in kept if getattr(config, name) != getattr(self._config, name)]
        if changed:
            raise ValueError(f"Magnetometer.set_error_model: {changed} cannot change")
        self._use(config)

    def _use(self, config: MagnetometerConfig) -> None:
        """Precompute the per-reading constants of ``config`` as Python floats."""
        self._config = config
        north, east, down = _vector("earth_field_ned_T", config.earth_field_ned_T)
        self._earth_enu: Vector3 = (east, north, -down)
        self._ground = _vector("ground_disturbance_T", config.ground_disturbance_T)
        self._ground_on = any(self._ground) and config.ground_disturbance_height_m > 0.0
        self._hard_iron = _vector("hard_iron_T", config.hard_iron_T)
        self._motor = _vector("motor_interference_T", config.motor_interference_T)
        s = [float(c) for c in config.soft_iron]
        self._soft_iron: Matrix3 = ((s[0], s[1], s[2]), (s[3], s[4], s[5]),
                                    (s[6], s[7], s[8]))
        self._soft_iron_on = tuple(s) != _IDENTITY
        variance = config.noise_sigma_T**2
        self._covariance_diagonal: Vector3 = (variance, variance, variance)
        self._message_diagonal: Vector3 = self._covariance_diagonal
        self._covariance_message: NDArray[np.float64] = np.diag(variance * np.ones(3)).reshape(9)

    def reset(self, rng: np.random.Generator | None = None) -> None:
        """Power cycle: faults dropped, nothing remembered of earlier readings. Noise from
        ``rng`` from now on (None: the current generator continues)."""
        if rng is not None:
            self._normals = StandardNormalStream(rng, 3, block_rows=256)
        self.faults = []
        self._last: tuple[Matrix3, Vector3, Vector3] | None = None

    def measure(self, truth: SensorTruth) -> MagnetometerReading:
        """The reading at ``truth.time_s``."""
        rows = truth.rotation_rows
        mount = self._mount_rows
        earth = rotate_transpose(mount, rotate_transpose(rows, self._earth_enu))
        ex, ey, ez = earth
        fx, fy, fz = earth
        if self._ground_on:
            weight = near_ground_weight(truth.height_above_ground_m,
                                        self._config.ground_disturbance_height_m)
            if weight > 0.0:
                ge, gn, gu = self._ground
                gx, gy, gz = rotate_transpose(
                    mount, rotate_transpose(rows, (weight * ge, weight * gn, weight * gu)))
                fx, fy, fz = fx + gx, fy + gy, fz + gz
        if self._soft_iron_on:
            (a, b, c), (d, e, f), (g, h, i) = self._soft_iron
            fx, fy, fz = (a * fx + b * fy + c * fz, d * fx + e * fy + f * fz,
                          g * fx + h * fy + i * fz)
        hx, hy, hz = self._hard_iron
        load = truth.rotor_load
        kx, ky, kz = self._motor
        fx, fy, fz = fx + hx + load * kx, fy + hy + load * ky, fz + hz + load * kz
        if self.faults:
            for fault in self.active_faults(truth.time_s, "field_offset_T"):
                ox, oy, oz = fault.value
                fx, fy, fz = fx + ox, fy + oy, fz + oz
        self._last = (rows, (ex, ey, ez), (fx - ex, fy - ey, fz - ez))
        sigma = self._config.noise_sigma_T
        n = self._normals.next_row()
        return MagnetometerReading(
            truth.time_s, (fx + sigma * n[0], fy + sigma * n[1], fz + sigma * n[2]),
            self._covariance_diagonal)

    def fill(self, reading: Any, messages: Sequence[Any]) -> tuple[bool, ...]:
        """``sensor_msgs/MagneticField``: header, ``magnetic_field`` (T), and
        ``magnetic_field_covariance`` (9 floats, row-major, diagonal from the reading)."""
        message = messages[0]
        stamp(message.header, reading.time_s)
        field = message.magnetic_field
        field.x, field.y, field.z = (float(c) for c in reading.field_T)
        diagonal = reading.covariance_diagonal_T2
        if diagonal != self._message_diagonal:  # a new array only when the variances change
            self._message_diagonal = diagonal
            self._covariance_message = np.diag(np.array(diagonal, dtype=float)).reshape(9)
        message.magnetic_field_covariance = self._covariance_message
        return (True,)

    def report_values(self) -> dict[str, float]:
        """For the last reading (NaN before the first): ``disturbance_T``, the magnitude (T) of
        everything the noise-free reading adds to the true Earth field in imu_link (soft and
        hard iron, motors, ground disturbance, faults); ``heading_error_deg``, the heading
        error (deg) that addition would cause a heading fusion at the true attitude: the
        angle about up from the levelled horizontal reading to the true horizontal field
        (the estimator's heading residual sign; positive: yaw estimate pulled
        counter-clockwise)."""
        if self._last is None:
            return {"disturbance_T": math.nan, "heading_error_deg": math.nan}
        rows, earth, added = self._last
        magnitude = math.sqrt(added[0] ** 2 + added[1] ** 2 + added[2] ** 2)
        mount = self._mount_rows
        true_map = _rotate(rows, _rotate(mount, earth))
        read_map = _rotate(rows, _rotate(mount, (earth[0] + added[0], earth[1] + added[1],
                                                 earth[2] + added[2])))
        angle = (math.atan2(true_map[1], true_map[0])
                 - math.atan2(read_map[1], read_map[0]))
        angle = (angle + math.pi) % (2.0 * math.pi) - math.pi
        return {"disturbance_T": magnitude, "heading_error_deg": math.degrees(angle)}


def _rotate(rows: Matrix3, v: Sequence[float]) -> Vector3:
    """``R v`` for a rotation given by its rows."""
    (a, b, c), (d, e, f), (g, h, i) = rows
    x, y, z = v
    return (a * x + b * y + c * z, d * x + e * y + f * z, g * x + h * y + i * z)
