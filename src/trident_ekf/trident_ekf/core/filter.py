"""Shared error-state EKF machinery: time handling, input checks, covariance, updates.

Subclasses (the trident filter and the conventional baseline) supply the nominal
state, its propagation, the error dynamics F, how position and velocity errors enter
a measurement (``_navigation_error_block``) and the injection of an estimated error.
Everything else (sample bookkeeping, decimated covariance propagation, the GNSS,
magnetometer and barometer models, one Joseph-form update with NIS gating for all
three sensors, the bounded history that applies delayed measurements at their own
stamps, counters and status) is common, so the two filters see identical inputs and
differ only in their error parametrization.

With ``FilterConfig.gnss_bias_sigma_*`` > 0 the base also carries, for both filters, a
first-order Gauss-Markov GNSS position bias (error states 15-17, ENU axes at the
``initialize`` position): same F and H blocks, same injection, in either convention.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import chi2

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray, FloatVector
from mav_geometry.scalar import Vector3
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.earth import (
    OMEGA_ECEF,
    ecef_to_geodetic,
    enu_to_ecef_rotation,
    ned_to_ecef,
)

STATE_DIM = 15  # error states without the GNSS bias
NAV = slice(0, 9)
ATT, VEL, POS, BG, BA = (slice(i, i + 3) for i in range(0, 15, 3))
GNSS_BIAS = slice(STATE_DIM, STATE_DIM + 3)  # only with FilterConfig.gnss_bias_states
MAX_PENDING = 64  # measurements (all sensors) waiting for the IMU to reach their stamps


class FilterStatus(Enum):
    """UNINITIALIZED until ``initialize``; OUTAGE when no GNSS update was accepted within
    ``outage_timeout``; DIVERGED when the covariance is non-finite or too large, or GNSS
    was rejected ``max_consecutive_rejections`` times in a row. With ``reset_on_divergence``
    the filter then resets position and velocity to the fix and reads DIVERGED until its
    next accepted GNSS update; without it DIVERGED is sticky until re-initialized.
    """

    UNINITIALIZED = "uninitialized"
    NOMINAL = "nominal"
    OUTAGE = "outage"
    DIVERGED = "diverged"


@dataclass
class Counters:
    """Inputs accepted and rejected, by sensor and reason (``{sensor}_{reason}``).

    late: older than the history (or stamped inside an IMU gap); gated: failed the NIS
    gate; overflow: the pending queue was full; delayed: applied in the past by a rewind.
    """

    imu_accepted: int = 0
    imu_nonfinite: int = 0
    imu_out_of_order: int = 0
    imu_duplicate: int = 0
    imu_gap: int = 0
    gnss_accepted: int = 0
    gnss_nonfinite: int = 0
    gnss_late: int = 0
    gnss_duplicate: int = 0
    gnss_gated: int = 0
    gnss_overflow: int = 0
    gnss_resets: int = 0
    gnss_delayed: int = 0
    magnetometer_accepted: int = 0
    magnetometer_nonfinite: int = 0
    magnetometer_late: int = 0
    magnetometer_duplicate: int = 0
    magnetometer_gated: int = 0
    magnetometer_overflow: int = 0
    magnetometer_delayed: int = 0
    barometer_accepted: int = 0
    barometer_nonfinite: int = 0
    barometer_late: int = 0
    barometer_duplicate: int = 0
    barometer_gated: int = 0
    barometer_overflow: int = 0
    barometer_delayed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class GnssMeasurement:
    """Antenna ECEF position (m) and velocity (m/s, or None) with 3x3 covariances."""

    sensor: ClassVar[str] = "gnss"
    time: float
    position: NDArray[np.float64]
    position_covariance: NDArray[np.float64]
    velocity: NDArray[np.float64] | None
    velocity_covariance: NDArray[np.float64] | None


@dataclass(frozen=True)
class MagnetometerMeasurement:
    """Calibrated magnetic flux density in body axes (T) with its 3x3 covariance (T^2)."""

    sensor: ClassVar[str] = "magnetometer"
    time: float
    field: NDArray[np.float64]
    covariance: NDArray[np.float64]


@dataclass(frozen=True)
class BarometerMeasurement:
    """Barometric height (m, see ``FilterConfig.barometer_height_offset``), variance m^2."""

    sensor: ClassVar[str] = "barometer"
    time: float
    height: float
    variance: float


Measurement = GnssMeasurement | MagnetometerMeasurement | BarometerMeasurement


@dataclass(frozen=True)
class GnssUpdateResult:
    """One GNSS epoch: residual (estimate - measurement, ECEF), NIS, its dof, accepted?"""

    time: float
    residual: NDArray[np.float64]
    nis: float
    dof: int
    accepted: bool


def skew(a: FloatVector) -> NDArray[np.float64]:
    """[a x]: skew(a) @ b == cross(a, b) (a plain 3x3 build; SO3.hat is batch-oriented)."""
    x, y, z = a
    return np.array(((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0)))


def skew_flat_indices(row: int, col: int, dim: int) -> list[int]:
    """Flat indices in a dim x dim matrix of the six off-diagonal entries of a 3x3 skew block."""
    return [(row + r) * dim + col + c
            for r, c in ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))]


def skew_flat_values(x: float, y: float, z: float) -> list[float]:
    """The entries of [a x] at ``skew_flat_indices`` for a = (x, y, z)."""
    return [-z, y, z, -x, -y, x]


def block_flat_indices(row: int, col: int, dim: int) -> list[int]:
    """Flat indices in a dim x dim matrix of a full 3x3 block, row-major."""
    return [(row + r) * dim + col + c for r in range(3) for c in range(3)]


def _vector(value: ArrayLike, name: str, size: int = 3) -> NDArray[np.float64]:
    array = np.asarray(value, dtype=float).reshape(-1)
    if array.size != size:
        raise ValueError(f"{name} must have {size} elements, got shape {np.shape(value)}")
    return array


def _covariance(value: ArrayLike, name: str) -> NDArray[np.float64]:
    matrix = np.asarray(value, dtype=float)
    if matrix.shape == (3,):
        matrix = np.diag(matrix)
    if matrix.shape != (3, 3):
        raise ValueError(f"{name} must be 3x3 or a 3-vector of variances, got {matrix.shape}")
    return matrix


def _usable(values: Sequence[ArrayLike], covariances: Sequence[FloatArray]) -> bool:
    """All values finite and every covariance finite with a positive diagonal."""
    return all(np.all(np.isfinite(v)) for v in (*values, *covariances)) and all(
        np.all(np.diag(c) > 0.0) for c in covariances)


class ErrorStateFilter:
    """Base class; see the module docstring. Times are seconds on any monotonic clock."""

    def __init__(self, config: FilterConfig | None = None) -> None:
        self.config = config or FilterConfig()
        self._gnss_bias_states = self.config.gnss_bias_states
        self.state_dim = STATE_DIM + 3 if self._gnss_bias_states else STATE_DIM
        dim = self.state_dim
        self.counters = Counters()
        self.time = math.nan
        self.covariance = np.zeros((dim, dim))
        self.gyro_bias: Vector3 = (0.0, 0.0, 0.0)
        self.accel_bias: Vector3 = (0.0, 0.0, 0.0)
        # GNSS position bias (m, ENU axes at the initialize position), with the bias states;
        # like the covariance it is propagated (decays) at each ``flush``.
        self.gnss_bias: Vector3 = (0.0, 0.0, 0.0)
        self._bias_axes = np.eye(3)  # ENU -> ECEF of those axes; set by ``initialize``
        self._bias_covariance_ecef = np.zeros((3, 3))  # stationary, m^2; set by ``initialize``
        self.last_omega: Vector3 = (0.0, 0.0, 0.0)  # bias-corrected body rate, rad/s
        self.last_nis = math.nan
        self._initialized = False
        self._diverged = False
        self._consecutive_rejections = 0
        self._last_accepted_gnss = math.nan
        self._pending: list[Measurement] = []
        self._updates: list[GnssUpdateResult] = []
        # Delayed-measurement history: raw IMU samples, state snapshots, applied
        # measurements of every sensor (with their outcome).
        self._imu_history: deque[tuple[float, Vector3, Vector3]] = deque()
        self._snapshots: deque[dict[str, Any]] = deque()
        self._applied: deque[tuple[Measurement, bool]] = deque()
        self._magnetic_field_ecef: FloatArray | None = None  # T; set by ``initialize``
        self._replaying = False
        self._sample_index = 0
        self._lever = tuple(float(c) for c in self.config.lever_arm)
        self._gate = {dof: self._threshold(dof) for dof in (1, 3, 6)}
        densities = np.diag(self.config.continuous_noise())
        self._q_error = np.zeros(dim)  # diagonal of B Q_c B^T (both filters: isotropic)
        self._q_error[ATT] = densities[0:3]
        self._q_error[VEL] = densities[3:6]
        self._q_error[BG] = densities[6:9]
        self._q_error[BA] = densities[9:12]
        self._eye = np.eye(dim)
        self._F = np.zeros((dim, dim))
        if self._gnss_bias_states:
            # db/dt = -b / tau + w with E[w w^T] = 2 sigma^2 / tau: stationary variance sigma^2.
            tau = self.config.gnss_bias_correlation_time
            self._q_error[GNSS_BIAS] = 2.0 * self.config.gnss_bias_variance() / tau
            self._F[GNSS_BIAS, GNSS_BIAS] = -np.eye(3) / tau
        self._reset_accumulator()

    _STATE_MODEL_FIELDS = ("gnss_bias_sigma_horizontal", "gnss_bias_sigma_vertical",
                           "gnss_bias_correlation_time", "magnetic_field_ned",
                           "magnetic_datum")
    """FilterConfig fields the state and its model are built from (``set_config`` keeps)."""

    def set_config(self, config: FilterConfig) -> None:
        """Run with ``config`` from the next sample on: noise densities, lever arm, gate,
        decimation, timeouts, divergence, history and barometer settings. The state and the
        estimate stay; the fields of ``_STATE_MODEL_FIELDS`` must not change (ValueError)."""
        changed = [name for name in self._STATE_MODEL_FIELDS
                   if getattr(config, name) != getattr(self.config, name)]
        if changed:
            raise ValueError(f"set_config: {changed} shape the state and cannot change")
        self.config = config
        self._lever = tuple(float(c) for c in config.lever_arm)
        self._gate = {dof: self._threshold(dof) for dof in (1, 3, 6)}
        densities = np.diag(config.continuous_noise())
        self._q_error[ATT] = densities[0:3]
        self._q_error[VEL] = densities[3:6]
        self._q_error[BG] = densities[6:9]
        self._q_error[BA] = densities[9:12]

    # ----- subclass interface -------------------------------------------------------------
    _NOMINAL_FIELDS: tuple[str, ...] = ()  # attributes holding the (immutable) nominal state
    _SNAPSHOT_FIELDS = ("time", "gyro_bias", "accel_bias", "gnss_bias", "last_omega", "last_nis",
                        "_diverged", "_consecutive_rejections", "_last_accepted_gnss",
                        "_acc_time", "_acc_count")

    def _set_nominal(self, q: FloatArray, v: FloatArray, p: FloatArray) -> None:
        raise NotImplementedError

    def nominal(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(q body->ECEF scalar-last, ECEF velocity m/s, ECEF position m) as arrays."""
        raise NotImplementedError

    def _step(self, omega: Vector3, force: Vector3, dt: float) -> None:
        raise NotImplementedError

    def _fill_error_dynamics(self, F: FloatArray, omega: Vector3, force: Vector3) -> None:
        """Write the navigation entries of F (state_dim square) for the mean bias-corrected
        rate (rad/s) and force (m/s^2); the constant blocks are set once in ``__init__``."""
        raise NotImplementedError

    def _navigation_error_block(self, rotation: FloatArray) -> FloatArray:
        """d(position)/d(position error) = d(velocity)/d(velocity error) in this convention."""
        raise NotImplementedError

    def _gnss_model(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Predicted fix position, velocity (ECEF) and H (6 x state_dim), rows position then
        velocity.

        Lever arm per trident-ekf.md §5.5 and §5.8; the filters differ only in how the position
        and velocity errors enter (``_navigation_error_block``). With the bias states the
        fix is the antenna position plus the bias A b (A: ENU -> ECEF of the bias axes), so
        the bias error b_hat - b enters the position rows as A.
        """
        q, v, p = self.nominal()
        C = quaternion.to_matrix(q)
        lever = np.array(self._lever)
        omega_eb = np.array(self.last_omega) - C.T @ OMEGA_ECEF
        lever_skew = skew(lever)
        H = np.zeros((6, self.state_dim))
        H[0:3, ATT] = C @ lever_skew
        H[0:3, POS] = self._navigation_error_block(C)
        H[3:6, ATT] = C @ skew(np.cross(omega_eb, lever)) - C @ lever_skew @ skew(C.T @ OMEGA_ECEF)
        H[3:6, VEL] = H[0:3, POS]
        H[3:6, BG] = -C @ lever_skew
        fix = p + C @ lever
        if self._gnss_bias_states:
            H[0:3, GNSS_BIAS] = self._bias_axes
            fix = fix + self._bias_axes @ np.array(self.gnss_bias)
        return fix, v + C @ np.cross(omega_eb, lever), H

    def _magnetometer_model(self) -> tuple[FloatArray, FloatArray]:
        """Predicted body-axes field C_hat^T m^e (T) and H (3 x state_dim), trident-ekf.md §5.11.

        Both filters right-multiply the attitude error (C = C_hat (I + [phi x])), so
        C^T m^e = C_hat^T m^e + [(C_hat^T m^e) x] phi and the residual C_hat^T m^e - m^b
        has H = [-[(C_hat^T m^e) x], 0, 0, 0, 0] in either convention.
        """
        field = self._magnetic_field_ecef
        # Set by ``initialize`` whenever magnetic_field_ned is (process_magnetometer needs it).
        assert field is not None
        C = quaternion.to_matrix(self.nominal()[0])
        predicted = C.T @ field
        H = np.zeros((3, self.state_dim))
        H[:, ATT] = -skew(predicted)
        return predicted, H

    def _barometer_model(self) -> tuple[float, FloatArray]:
        """Predicted reading h(p_hat) - offset (m) and H (1 x state_dim), IMU-origin height.

        dh/dp = u_up^T (ellipsoid normal, ECEF), so the residual h_hat - h is
        u_up^T (p_hat - p) = u_up^T N dx_pos with N = ``_navigation_error_block``: the
        trident row -u_up^T C_hat of trident-ekf.md §5.11, the baseline row +u_up^T.
        """
        q, _, p = self.nominal()
        latitude, longitude, height = ecef_to_geodetic(p)
        up = enu_to_ecef_rotation(latitude, longitude)[:, 2]
        H = np.zeros((1, self.state_dim))
        H[0, POS] = up @ self._navigation_error_block(quaternion.to_matrix(q))
        return height - self.config.barometer_height_offset, H

    def _inject(self, dx: Sequence[float]) -> None:
        """Apply the navigation part (9 floats) of an estimated error to the nominal state."""
        raise NotImplementedError

    def _navigation_error(self, q: ArrayLike, v: ArrayLike, p: ArrayLike) -> FloatArray:
        """This filter's attitude, velocity and position error (9) relative to a true state."""
        raise NotImplementedError

    def conventional_jacobian(self) -> FloatArray:
        """J with [phi^b, v_hat - v, p_hat - p, db_g, db_a (, db_gnss)] = J dx (J orthogonal,
        identity on the bias states)."""
        raise NotImplementedError

    # ----- public API ---------------------------------------------------------------------
    def initialize(self, time: float, attitude: ArrayLike, velocity: ArrayLike,
                   position: ArrayLike, covariance: ArrayLike,
                   gyro_bias: ArrayLike = (0, 0, 0), accel_bias: ArrayLike = (0, 0, 0)) -> None:
        """Start at ``time`` s with q body->ECEF, ECEF velocity (m/s) and position (m).

        ``covariance`` is 15x15 in this filter's error convention, or a 15-vector of
        standard deviations (rad, m/s, m, rad/s, m/s^2) in body/ECEF-agnostic form.
        Biases use the paper's sign: truth = reading + bias. With the GNSS bias states it may
        also be state_dim square or state_dim sigmas (the last three in m, ENU axes at
        ``position``); a 15-state one gets the bias's stationary covariance, uncorrelated.
        The GNSS bias estimate starts at zero.
        """
        values = {
            "time": np.array([time], dtype=float),
            "attitude": _vector(attitude, "attitude", 4),
            "velocity": _vector(velocity, "velocity"),
            "position": _vector(position, "position"),
            "gyro_bias": _vector(gyro_bias, "gyro_bias"),
            "accel_bias": _vector(accel_bias, "accel_bias"),
        }
        for name, value in values.items():
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{name} must be finite, got {value}")
        cov = np.asarray(covariance, dtype=float)
        if cov.ndim == 1:
            cov = np.diag(np.square(cov))
        dim = self.state_dim
        if cov.shape == (STATE_DIM, STATE_DIM) and dim > STATE_DIM:
            cov = np.block([[cov, np.zeros((STATE_DIM, 3))],
                            [np.zeros((3, STATE_DIM)), np.diag(self.config.gnss_bias_variance())]])
        if cov.shape != (dim, dim) or not np.all(np.isfinite(cov)):
            raise ValueError(f"covariance must be finite {dim}x{dim} or {dim} sigmas, "
                             f"got {np.shape(covariance)}")
        if np.any(np.linalg.eigvalsh(0.5 * (cov + cov.T)) <= 0.0):
            raise ValueError("covariance must be symmetric positive definite")
        q = values["attitude"] / np.linalg.norm(values["attitude"])
        self._set_nominal(q, values["velocity"], values["position"])
        bg, ba = values["gyro_bias"], values["accel_bias"]  # 3 elements each (``_vector``)
        self.gyro_bias = (float(bg[0]), float(bg[1]), float(bg[2]))
        self.accel_bias = (float(ba[0]), float(ba[1]), float(ba[2]))
        if self._gnss_bias_states:
            self.gnss_bias = (0.0, 0.0, 0.0)
            A = enu_to_ecef_rotation(*ecef_to_geodetic(values["position"])[:2])
            self._bias_axes = A
            self._bias_covariance_ecef = (A * self.config.gnss_bias_variance()) @ A.T
        self.covariance = 0.5 * (cov + cov.T)
        self.time = float(time)
        self._last_accepted_gnss = float(time)
        if self.config.magnetic_field_ned is not None:
            datum = self.config.magnetic_datum or ecef_to_geodetic(values["position"])[:2]
            self._magnetic_field_ecef = ned_to_ecef(self.config.magnetic_field_ned, *datum)
        self._initialized = True
        self._diverged = False
        self._consecutive_rejections = 0
        self._pending.clear()
        self._imu_history.clear()
        self._snapshots.clear()
        self._applied.clear()
        self._reset_accumulator()

    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def status(self) -> FilterStatus:
        if not self._initialized:
            return FilterStatus.UNINITIALIZED
        if self._diverged:
            return FilterStatus.DIVERGED
        if self.time - self._last_accepted_gnss > self.config.outage_timeout:
            return FilterStatus.OUTAGE
        return FilterStatus.NOMINAL

    def process_imu(self, time: float, gyro: FloatVector, accel: FloatVector) -> bool:
        """Integrate one IMU sample: body rate (rad/s) and specific force (m/s^2) at ``time``.

        The sample stands for the interval since the previous sample. Queued measurements
        (any sensor) stamped inside the interval are applied at their own stamps.
        Returns False (and counts why) when the sample is rejected.
        """
        gx, gy, gz = (float(c) for c in gyro)
        ax, ay, az = (float(c) for c in accel)
        t = float(time)
        if not (math.isfinite(t) and math.isfinite(gx + gy + gz) and math.isfinite(ax + ay + az)):
            self.counters.imu_nonfinite += 1
            return False
        if not self._initialized:
            return False
        dt = t - self.time
        if dt <= 0.0:
            if dt == 0.0:
                self.counters.imu_duplicate += 1
            else:
                self.counters.imu_out_of_order += 1
            return False
        if self.config.history_length > 0.0:
            self._remember(t, (gx, gy, gz), (ax, ay, az))
        if not self._replaying:  # a replayed sample was counted the first time
            self.counters.imu_accepted += 1
        if dt > self.config.max_imu_interval:
            if not self._replaying:
                self.counters.imu_gap += 1
            self._drop_measurements_inside_gap(t)
            self.time = t
            return True
        pending = self._pending
        while True:
            bg, ba = self.gyro_bias, self.accel_bias  # re-read: an update changes them
            omega = (gx + bg[0], gy + bg[1], gz + bg[2])
            force = (ax + ba[0], ay + ba[1], az + ba[2])
            self.last_omega = omega
            if not (pending and pending[0].time <= t):
                break
            measurement = pending.pop(0)
            self._propagate(omega, force, measurement.time - self.time)
            self._update(measurement)
        self._propagate(omega, force, t - self.time)
        return True

    def process_gnss(self, time: float, position: ArrayLike, position_covariance: ArrayLike,
                     velocity: ArrayLike | None = None,
                     velocity_covariance: ArrayLike | None = None) -> bool:
        """Queue (or apply, if stamped at the filter time) one GNSS antenna fix.

        position: ECEF m; velocity: ECEF m/s or None; covariances: 3x3 (m^2, m^2/s^2) or
        3-vectors of variances. A fix older than the filter time but inside
        ``history_length`` is applied at its stamp by rewinding and re-running the stored
        IMU samples (measurements of every sensor applied since are re-applied; fixes are
        reported again by ``drain_updates``). Older, duplicate and non-finite fixes are
        rejected and counted; returns False then. With the GNSS bias states the position
        covariance is read as the receiver's white + correlated one (see
        ``FilterConfig.gnss_covariance_includes_bias``).
        """
        p = _vector(position, "position")
        rp = _covariance(position_covariance, "position_covariance")
        v = rv = None
        if velocity is not None:
            v = _vector(velocity, "velocity")
            if velocity_covariance is None:
                raise ValueError("velocity_covariance is required with velocity")
            rv = _covariance(velocity_covariance, "velocity_covariance")
        covariances = [rp] + ([rv] if rv is not None else [])
        values: list[float | FloatArray] = [time, p]
        if v is not None:
            values.append(v)
        if not _usable(values, covariances):
            self.counters.gnss_nonfinite += 1
            return False
        if not self._initialized:
            return False
        return self._submit(GnssMeasurement(float(time), p, rp, v, rv))

    def process_magnetometer(self, time: float, field_body_T: ArrayLike,
                             covariance: ArrayLike) -> bool:
        """Queue (or apply) one magnetometer sample, handled in time like a GNSS fix.

        field_body_T: calibrated (hard/soft-iron corrected) flux density in body axes, T;
        covariance: 3x3 (T^2) or 3 variances. Compared with ``FilterConfig.magnetic_field_ned``
        rotated to body axes; the update only feeds the filter (it never drives the GNSS
        outage or divergence status). Returns False, counting why, when rejected.
        """
        if self.config.magnetic_field_ned is None:
            raise ValueError("process_magnetometer needs FilterConfig.magnetic_field_ned")
        field = _vector(field_body_T, "field_body_T")
        R = _covariance(covariance, "covariance")
        if not _usable([time, field], [R]):
            self.counters.magnetometer_nonfinite += 1
            return False
        if not self._initialized:
            return False
        return self._submit(MagnetometerMeasurement(float(time), field, R))

    def process_barometer(self, time: float, height_m: float, variance: float) -> bool:
        """Queue (or apply) one barometric height (m) with its variance (m^2).

        The reading plus ``FilterConfig.barometer_height_offset`` is the ellipsoidal height
        of the IMU origin; there is no baro bias state, so a drifting offset biases the
        height by as much. Returns False, counting why, when rejected.
        """
        R = np.array([[float(variance)]])
        if not _usable([time, height_m], [R]):
            self.counters.barometer_nonfinite += 1
            return False
        if not self._initialized:
            return False
        return self._submit(BarometerMeasurement(float(time), float(height_m), R[0, 0]))

    def drain_updates(self) -> list[GnssUpdateResult]:
        """GNSS update results since the last call (accepted and gated)."""
        updates, self._updates = self._updates, []
        return updates

    def flush(self) -> None:
        """Propagate the covariance over any IMU samples not yet folded into it."""
        T = self._acc_time
        if T <= 0.0:
            return
        w, f = self._acc_w, self._acc_f
        F = self._F
        self._fill_error_dynamics(F, (w[0] / T, w[1] / T, w[2] / T),
                                  (f[0] / T, f[1] / T, f[2] / T))
        A = F * T
        phi = A @ A
        phi *= 0.5
        phi += A
        phi += self._eye
        q = self._q_error * T
        # Q_d = Q T + (F Q + Q F^T) T^2 / 2: keeps the velocity-position noise coupling.
        fq = A * q
        fq *= 0.5
        P = phi @ self.covariance @ phi.T
        P += fq
        P += fq.T
        P += np.diag(q)
        self.covariance = P
        if self._gnss_bias_states:
            decay = math.exp(-T / self.config.gnss_bias_correlation_time)
            b = self.gnss_bias
            self.gnss_bias = (b[0] * decay, b[1] * decay, b[2] * decay)
        self._reset_accumulator()
        self._check_covariance()

    def conventional_covariance(self) -> FloatArray:
        """Covariance of [phi^b, v_hat - v (ECEF), p_hat - p (ECEF), db_g, db_a], then with
        the bias states db_gnss (ENU bias axes)."""
        J = self.conventional_jacobian()
        return J @ self.covariance @ J.T

    def error_from_truth(self, q: ArrayLike, v: ArrayLike, p: ArrayLike,
                         gyro_bias: ArrayLike, accel_bias: ArrayLike,
                         gnss_bias: ArrayLike | None = None) -> FloatArray:
        """This filter's error (state_dim) of the estimate relative to a true state.

        Navigation part in this filter's convention; bias errors estimate - truth.
        gnss_bias: the true GNSS position bias (m, ENU bias axes), None for zero; ignored
        without the bias states.
        """
        parts = [self._navigation_error(q, v, p),
                 np.array(self.gyro_bias) - np.asarray(gyro_bias, dtype=float),
                 np.array(self.accel_bias) - np.asarray(accel_bias, dtype=float)]
        if self._gnss_bias_states:
            truth = np.zeros(3) if gnss_bias is None else _vector(gnss_bias, "gnss_bias")
            parts.append(np.array(self.gnss_bias) - truth)
        return np.concatenate(parts)

    # ----- internals ----------------------------------------------------------------------
    def _submit(self, m: Measurement) -> bool:
        """Apply a validated measurement now, queue it for its stamp, or rewind the history
        to apply it in the past; rejects (and counts) duplicates, late ones and overflow.
        Measurements sharing a stamp are applied in arrival order."""
        if any(other.time == m.time and other.sensor == m.sensor
               for other in (*self._pending, *(applied for applied, _ in self._applied))):
            self._count(m.sensor, "duplicate")
            return False
        if m.time < self.time:
            if not (self._snapshots and self._snapshots[0]["time"] <= m.time):
                self._count(m.sensor, "late")
                return False
            self._rewind_and_apply(m)
            return True
        if m.time == self.time:
            self._update(m)
            return True
        if len(self._pending) >= MAX_PENDING:
            self._count(m.sensor, "overflow")
            return False
        self._pending.insert(bisect.bisect(self._pending, m.time, key=lambda x: x.time), m)
        return True

    def _count(self, sensor: str, reason: str, step: int = 1) -> None:
        name = f"{sensor}_{reason}"
        setattr(self.counters, name, getattr(self.counters, name) + step)

    def _threshold(self, dof: int) -> float:
        probability = self.config.gate_probability
        return math.inf if probability == 0.0 else float(chi2.ppf(probability, dof))

    def _reset_accumulator(self) -> None:
        self._acc_time = 0.0
        self._acc_count = 0
        self._acc_w = [0.0, 0.0, 0.0]
        self._acc_f = [0.0, 0.0, 0.0]

    def _propagate(self, omega: Vector3, force: Vector3, dt: float) -> None:
        if dt <= 0.0:
            return
        self._step(omega, force, dt)
        self.time += dt
        w, f = self._acc_w, self._acc_f
        w[0] += omega[0] * dt
        w[1] += omega[1] * dt
        w[2] += omega[2] * dt
        f[0] += force[0] * dt
        f[1] += force[1] * dt
        f[2] += force[2] * dt
        self._acc_time += dt
        self._acc_count += 1
        if self._acc_count >= self.config.covariance_decimation:
            self.flush()

    def _drop_measurements_inside_gap(self, t: float) -> None:
        """After an IMU gap the state is held; measurements stamped inside it are dropped."""
        self.flush()
        while self._pending and self._pending[0].time <= t:
            self._count(self._pending.pop(0).sensor, "late")

    def _linearize(self, m: Measurement) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Residual z = predicted - measured, its H and R for any sensor."""
        if isinstance(m, MagnetometerMeasurement):
            predicted, H = self._magnetometer_model()
            return predicted - m.field, H, m.covariance
        if isinstance(m, BarometerMeasurement):
            height, H = self._barometer_model()
            return np.array([height - m.height]), H, np.array([[m.variance]])
        pred_p, pred_v, H = self._gnss_model()
        position_covariance = self._white_position_covariance(m.position_covariance)
        if m.velocity is None:
            return pred_p - m.position, H[:3], position_covariance
        R = np.zeros((6, 6))
        R[:3, :3] = position_covariance
        R[3:, 3:] = m.velocity_covariance
        return np.concatenate([pred_p - m.position, pred_v - m.velocity]), H, R

    def _white_position_covariance(self, reported: FloatArray) -> FloatArray:
        """R of a fix's position, m^2 (ECEF): the reported covariance, except with the bias
        states and ``gnss_covariance_includes_bias``, where the reported covariance is white
        plus correlated: then the bias's stationary covariance is subtracted and the
        eigenvalues floored at ``gnss_white_sigma_floor``^2 (kept positive definite)."""
        if not (self._gnss_bias_states and self.config.gnss_covariance_includes_bias):
            return reported
        white = reported - self._bias_covariance_ecef
        eigenvalues, vectors = np.linalg.eigh(0.5 * (white + white.T))
        floored = np.maximum(eigenvalues, self.config.gnss_white_sigma_floor**2)
        result: FloatArray = (vectors * floored) @ vectors.T
        return result

    def _update(self, m: Measurement) -> None:
        """NIS-gate one measurement and, if it passes, apply the Joseph-form update."""
        self.flush()
        z, H, R = self._linearize(m)
        P = self.covariance
        PHt = P @ H.T
        S = H @ PHt + R
        S_inv = np.linalg.inv(S)
        nis = float(z @ S_inv @ z)
        accepted = nis <= self._gate[z.size]
        if self.config.history_length > 0.0:
            self._applied.append((m, bool(accepted)))
        self._count(m.sensor, "accepted" if accepted else "gated")
        if isinstance(m, GnssMeasurement):
            self._gnss_outcome(m, z, nis, accepted)
        if not accepted:
            return
        K = PHt @ S_inv
        dx = K @ z
        IKH = self._eye - K @ H
        P = IKH @ P @ IKH.T + K @ R @ K.T
        self.covariance = 0.5 * (P + P.T)
        self._correct(dx.tolist())  # plain floats: numpy scalars slow the scalar hot path 3x
        self._check_covariance()

    def _correct(self, dx: list[float]) -> None:
        """Remove an estimated error (this filter's convention) from the state."""
        self._inject(dx[NAV])
        bg, ba = self.gyro_bias, self.accel_bias
        self.gyro_bias = (bg[0] - dx[9], bg[1] - dx[10], bg[2] - dx[11])
        self.accel_bias = (ba[0] - dx[12], ba[1] - dx[13], ba[2] - dx[14])
        if self._gnss_bias_states:
            b = self.gnss_bias
            self.gnss_bias = (b[0] - dx[15], b[1] - dx[16], b[2] - dx[17])

    def _gnss_outcome(self, m: GnssMeasurement, z: FloatArray, nis: float, accepted: bool) -> None:
        """Only GNSS drives the reported NIS and the outage / divergence status."""
        self.last_nis = nis
        self._updates.append(GnssUpdateResult(m.time, z, nis, z.size, accepted))
        if accepted:
            if self.config.reset_on_divergence:
                self._diverged = False
            self._consecutive_rejections = 0
            self._last_accepted_gnss = m.time
            return
        self._consecutive_rejections += 1
        if self._consecutive_rejections >= self.config.max_consecutive_rejections:
            self._diverged = True
            if self.config.reset_on_divergence:
                self._reset_to_gnss(m)

    def _snapshot(self) -> dict[str, Any]:
        names = self._SNAPSHOT_FIELDS + self._NOMINAL_FIELDS
        state = {name: getattr(self, name) for name in names}
        state.update(covariance=self.covariance.copy(), _acc_w=list(self._acc_w),
                     _acc_f=list(self._acc_f))
        return state

    def _restore(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        # The snapshot stays in the history: give the filter its own mutable copies.
        self.covariance = state["covariance"].copy()
        self._acc_w, self._acc_f = list(state["_acc_w"]), list(state["_acc_f"])

    def _remember(self, t: float, gyro: Vector3, accel: Vector3) -> None:
        """Snapshot the state before every ``covariance_decimation``-th sample, keep the
        sample, and forget what is older than ``history_length``."""
        if self._sample_index % self.config.covariance_decimation == 0:
            self._snapshots.append(self._snapshot())
        self._sample_index += 1
        if not self._replaying:
            self._imu_history.append((t, gyro, accel))
        horizon = t - self.config.history_length
        snapshots = self._snapshots
        while len(snapshots) > 1 and snapshots[1]["time"] <= horizon:
            snapshots.popleft()
        oldest = snapshots[0]["time"]
        while self._imu_history and self._imu_history[0][0] <= oldest:
            self._imu_history.popleft()
        while self._applied and self._applied[0][0].time < oldest:
            self._applied.popleft()

    def _rewind_and_apply(self, measurement: Measurement) -> None:
        """Go back to the last snapshot before a delayed measurement, then re-run the stored
        IMU samples with it (and the measurements applied since) at their own stamps."""
        while len(self._snapshots) > 1 and self._snapshots[-1]["time"] > measurement.time:
            self._snapshots.pop()
        snapshot = self._snapshots.pop()  # re-taken by the first replayed sample
        start = snapshot["time"]
        samples = [record for record in self._imu_history if record[0] > start]
        replayed = [item for item in self._applied if item[0].time > start]
        requeue = [m for m, _ in replayed]
        for m, accepted in replayed:  # counted again when re-applied
            self._count(m.sensor, "accepted" if accepted else "gated", -1)
        self._applied = deque(item for item in self._applied if item[0].time <= start)
        self._restore(snapshot)
        self._sample_index = 0
        self._pending = sorted([*self._pending, *requeue, measurement], key=lambda m: m.time)
        self._replaying = True
        try:
            for t, gyro, accel in samples:
                self.process_imu(t, gyro, accel)
        finally:
            self._replaying = False
        self._count(measurement.sensor, "delayed")

    def _reset_to_gnss(self, m: GnssMeasurement) -> None:
        """Move position (and velocity) to the fix, keep attitude; their covariance becomes
        the fix's, uncorrelated with the rest. With the bias states the position is the fix
        minus the bias estimate, so its error also carries the bias error (kept)."""
        q, v, _ = self.nominal()
        C = quaternion.to_matrix(q)
        lever = np.array(self._lever)
        omega_eb = np.array(self.last_omega) - C.T @ OMEGA_ECEF
        J = self.conventional_jacobian()
        P = J @ self.covariance @ J.T
        P[NAV.start + 3:NAV.stop, :] = 0.0
        P[:, NAV.start + 3:NAV.stop] = 0.0
        P[POS, POS] = self._white_position_covariance(m.position_covariance)
        position = m.position - C @ lever
        if self._gnss_bias_states:
            # p_hat - p = white noise - A (b_hat - b).
            A = self._bias_axes
            position = position - A @ np.array(self.gnss_bias)
            cross = -A @ P[GNSS_BIAS, GNSS_BIAS]
            P[POS, POS] -= cross @ A.T
            P[POS, GNSS_BIAS] = cross
            P[GNSS_BIAS, POS] = cross.T
        if m.velocity is not None:
            v = m.velocity - C @ np.cross(omega_eb, lever)
            P[VEL, VEL] = m.velocity_covariance
        else:
            P[VEL, VEL] = np.eye(3)  # 1 m/s: unknown after a divergence
        self._set_nominal(q, v, position)
        self.covariance = J.T @ P @ J
        self._consecutive_rejections = 0
        self.counters.gnss_resets += 1

    def _check_covariance(self) -> None:
        diagonal = self.covariance.diagonal()
        lowest = float(diagonal.min())
        position_variance = float(diagonal[POS].max())
        healthy = lowest >= 0.0 and math.isfinite(float(diagonal.sum()))
        if not healthy or position_variance > self.config.divergence_position_sigma**2:
            self._diverged = True
