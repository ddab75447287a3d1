"""Shared error-state EKF machinery: time handling, input checks, covariance, updates.

Subclasses (the trident filter and the conventional baseline) supply the nominal state, its
propagation, the error dynamics F, how position and velocity errors enter a measurement
(``navigation_error_block``) and the injection of an estimated error. Everything else is
common, so the two filters see identical inputs and differ only in their error
parametrization: sample bookkeeping, decimated covariance propagation, the aiding sources
(``core.measurements``: each gives its model, Jacobian and noise; the filter NIS-gates and
applies them in one Joseph-form update and keeps each source's ``AidStatus``), the extra
error states the sources own, and the bounded history that applies delayed measurements at
their own stamps.

Error state: the 15 navigation and IMU-bias states, then each source's augmented states in
the order the sources were given (the GNSS position bias first, with
``FilterConfig.gnss_bias_sigma_*`` > 0: error states 15-17, ENU axes at the ``initialize``
position).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray, FloatVector
from mav_geometry.kernels import load_kernels
from mav_geometry.scalar import Vector3
from trident_ekf.core import chi_square
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.divergence import FixTrack, fix_record
from trident_ekf.core.earth import OMEGA_ECEF, gravity_xyz
from trident_ekf.core.input_clock import stamp_fault
from trident_ekf.core.measurements.base import (
    AidingSource,
    Measurement,
    as_covariance,
    as_vector,
    usable,
)
from trident_ekf.core.measurements.gnss import GnssPosition, GnssVelocity

STATE_DIM = 15  # error states without the augmented ones
NAV = slice(0, 9)
ATT, VEL, POS, BG, BA = (slice(i, i + 3) for i in range(0, 15, 3))
GNSS_BIAS = slice(STATE_DIM, STATE_DIM + 3)  # only with FilterConfig.gnss_bias_states
MAX_PENDING = 64  # measurements (all sources) waiting for the IMU to reach their stamps
IMU_REASONS = ("accepted", "nonfinite", "out_of_order", "duplicate", "stamp_jump", "gap")
RESET_VELOCITY_AGE = 0.1  # s: a GNSS velocity this close to a reset fix resets velocity too
# Automatic outage timeout (FilterConfig.outage_timeout NaN): the nominal GNSS period is the
# median of the latest GNSS_PERIOD_WINDOW fix intervals, once GNSS_PERIOD_MIN_INTERVALS are
# measured; before that the largest interval seen, at least ASSUMED_GNSS_PERIOD (the
# slowest common receiver rate, 1 Hz), so a slow receiver does not read OUTAGE at start.
GNSS_PERIOD_WINDOW = 15
GNSS_PERIOD_MIN_INTERVALS = 3
ASSUMED_GNSS_PERIOD = 1.0  # s
SNAPSHOT_SPACING = 0.02
"""Least time between two history snapshots, s. A rewind restarts from the last snapshot
before the delayed stamp and re-runs the same arithmetic from there, so the result does not
depend on it: wider spacing saves a snapshot per IMU sample at high rates and costs each
rewind up to this much more re-run IMU data."""
# Covariance accumulators (ErrorStateFilter._acc, one float64 array the compiled kernels
# update in place): the rate (3) and force (3) integrals over the samples not yet folded
# into the covariance, their time, and the sampling-noise variances (attitude, velocity).
ACC_TIME, ACC_SAMPLING, ACC_SIZE = 6, slice(7, 9), 9

# The per-sample hot path in C (core/_kernels.c), None for the numpy/Python reference
# (MAV_KERNELS=reference): read when a filter is built.
_kernels = load_kernels("trident_ekf.core._kernels")


class FilterStatus(Enum):
    """UNINITIALIZED until ``initialize``; OUTAGE when no GNSS position update was accepted
    within the outage timeout (``ErrorStateFilter.outage_threshold``: ``outage_timeout``, or
    automatically a few nominal GNSS periods measured from the fix stamps), NOMINAL again at
    the next accepted one: a gap shorter than the timeout (a late, skipped or gated fix)
    leaves the status as it is; DIVERGED when the covariance is non-finite or too large, or
    GNSS position was gated ``max_consecutive_rejections`` times in a row (fixes the GNSS
    velocity and the IMU contradict are inconsistent, not gated: ``core.divergence``). With
    ``reset_on_divergence`` the filter then resets position and velocity to the fix, once
    the rejected fixes form a coherent track (``FixTrack.ready_to_reset``), and reads
    DIVERGED until its next accepted GNSS update; without it DIVERGED is sticky until
    re-initialized.
    """

    UNINITIALIZED = "uninitialized"
    NOMINAL = "nominal"
    OUTAGE = "outage"
    DIVERGED = "diverged"


@dataclass(frozen=True)
class UpdateResult:
    """One update of any source: residual (predicted - measured), NIS, its dof, accepted
    (False: gated, or rejected by the source's own check, ``reason``)."""

    source: str
    time: float
    residual: NDArray[np.float64]
    nis: float
    dof: int
    accepted: bool
    reason: str = "accepted"


class _Snapshot(NamedTuple):
    """The state before a sample (delayed-measurement history): the plain fields'
    values, in ``ErrorStateFilter._SNAPSHOT_FIELDS + _NOMINAL_FIELDS`` order, and copies of
    the mutable ones."""

    time: float
    values: tuple[Any, ...]
    covariance: FloatArray
    acc: FloatArray
    augmented: dict[str, tuple[float, ...]]


class ErrorStateFilter:
    """Base class; see the module docstring. Times are seconds on any monotonic clock.

    sources: optional aiding sources (``core.measurements``) besides the GNSS position and
    velocity, which are always present; their names must be unique.
    """

    body_axis_errors = False
    """Whether the velocity and position errors are in body axes (``conventional_jacobian``
    then carries -C on them) rather than ECEF."""

    def __init__(self, config: FilterConfig | None = None,
                 sources: Sequence[AidingSource] = ()) -> None:
        self.config = config or FilterConfig()
        self.gnss = GnssPosition(self.config)
        self.sources: dict[str, AidingSource] = {}
        for source in (self.gnss, GnssVelocity(), *sources):
            if source.name in self.sources:
                raise ValueError(f"aiding source {source.name!r} given twice")
            self.sources[source.name] = source
        # Error-state layout: 15 core states, then each source's augmented states.
        self._slices: dict[str, slice] = {}
        self._augmented_models: list[tuple[str, slice, Any]] = []
        dim = STATE_DIM
        for name, source in self.sources.items():
            for model in source.augmented:
                self._slices[name] = slice(dim, dim + model.size)
                self._augmented_models.append((name, self._slices[name], model))
                dim += model.size
        self.state_dim = dim
        self.imu_counts = dict.fromkeys(IMU_REASONS, 0)
        self.aid_status = {name: source.new_status() for name, source in self.sources.items()}
        self.time = math.nan
        self.covariance = np.zeros((dim, dim))
        self.gyro_bias: Vector3 = (0.0, 0.0, 0.0)
        self.accel_bias: Vector3 = (0.0, 0.0, 0.0)
        # Augmented state estimates by source (immutable tuples); the Gauss-Markov ones
        # decay, like the covariance is propagated, at each ``flush``.
        self.augmented: dict[str, tuple[float, ...]] = {
            name: (0.0,) * (sl.stop - sl.start) for name, sl in self._slices.items()}
        self._used: frozenset[str] = frozenset()  # sources updated since ``initialize``
        self.last_omega: Vector3 = (0.0, 0.0, 0.0)  # bias-corrected body rate, rad/s
        self.last_nis = math.nan
        self._initialized = False
        self._diverged = False
        self._consecutive_rejections = 0
        self._fix_track = FixTrack()  # divergence or spoofing (core.divergence)
        # How far the updates of the sources other than the GNSS position have moved the
        # position, summed (ECEF m): the inertial displacement between two fixes is the
        # estimate's without it (core.divergence).
        self._aiding_shift = np.zeros(3)
        # attitude_matrix's cache: the nominal attitude it was computed for, and the matrix
        self._matrix_key: object = None
        self._matrix = np.eye(3)
        self._last_accepted_gnss = math.nan
        # Nominal GNSS period (automatic outage timeout): intervals between the stamps of the
        # GNSS positions that reach an update, in stamp order. Not part of the snapshots: a
        # rewind re-applies fixes whose stamps are already counted.
        self._fix_intervals: deque[float] = deque(maxlen=GNSS_PERIOD_WINDOW)
        self._last_fix_stamp = math.nan
        self._gnss_period = math.nan
        self._last_gnss_velocity: Measurement | None = None
        # Sampling noise (FilterConfig.gyro/accel_sampling_factor): the previous raw IMU
        # sample, and the attitude and velocity variance per second of the current interval.
        self._previous_sample: tuple[Vector3, Vector3] | None = None
        self._sampling_rates = (0.0, 0.0)
        self._pending: list[Measurement] = []
        self._updates: list[UpdateResult] = []
        # Delayed-measurement history: raw IMU samples, state snapshots, applied
        # measurements of every source (with their outcome and NIS).
        self._imu_history: deque[tuple[float, Vector3, Vector3]] = deque()
        self._snapshots: deque[_Snapshot] = deque()
        self._applied: deque[tuple[Measurement, str, float]] = deque()
        # (stamp, source) of every queued and applied measurement above, kept in step with
        # them: the duplicate check is a look-up, not a scan of the history.
        self._held: Counter[tuple[float, str]] = Counter()
        self._replaying = False
        self._rewinding: list[Measurement] = []  # the delayed ones a rewind applies
        self._next_snapshot = -math.inf  # filter time from which the next one is taken
        self._trim_from = math.inf  # the second snapshot's time: trim once it is past
        self._gate: dict[int, float] = {}
        self._q_error = np.zeros(dim)  # diagonal of B Q_c B^T (both filters: isotropic)
        self._eye = np.eye(dim)
        self._F = np.zeros((dim, dim))
        self._decay: list[tuple[str, float]] = []  # (source, tau) of Gauss-Markov states
        for name, sl, model in self._augmented_models:
            self._q_error[sl] = np.square(model.noise_density)
            if math.isfinite(model.correlation_time):
                self._F[sl, sl] = -np.eye(model.size) / model.correlation_time
                self._decay.append((name, model.correlation_time))
        self._take_noise(self.config)
        self._acc = np.zeros(ACC_SIZE)
        self._acc_count = 0  # samples in the accumulators
        # The C kernels run the hot path (core/_kernels.c) unless they are not loaded
        # (MAV_KERNELS=reference, not built) or the state outgrows their fixed-size scratch.
        self.compiled = dim <= getattr(_kernels, "MAX_STATES", 0)
        """True when the compiled kernels run; set it False to run the numpy/Python
        reference (the same arithmetic, to round-off) in this filter."""
        names = self._SNAPSHOT_FIELDS + self._NOMINAL_FIELDS
        self._snapshot_names = names
        self._snapshot_values = attrgetter(*names)

    _STATE_MODEL_FIELDS = ("gnss_bias_sigma_horizontal", "gnss_bias_sigma_vertical",
                           "gnss_bias_correlation_time")
    """FilterConfig fields the state and its model are built from (``set_config`` keeps)."""

    def set_config(self, config: FilterConfig) -> None:
        """Run with ``config`` from the next sample on: noise densities, lever arm, gate,
        decimation, timeouts, divergence and history settings. The state and the estimate
        stay; the fields of ``_STATE_MODEL_FIELDS`` must not change (ValueError)."""
        changed = [name for name in self._STATE_MODEL_FIELDS
                   if getattr(config, name) != getattr(self.config, name)]
        if changed:
            raise ValueError(f"set_config: {changed} shape the state and cannot change")
        self.config = config
        self._take_noise(config)

    def _take_noise(self, config: FilterConfig) -> None:
        self._gate.clear()
        densities = np.diag(config.continuous_noise())
        self._q_error[ATT] = densities[0:3]
        self._q_error[VEL] = densities[3:6]
        self._q_error[BG] = densities[6:9]
        self._q_error[BA] = densities[9:12]

    def state_slice(self, source: str) -> slice:
        """Where the augmented error states of ``source`` are (KeyError if it has none)."""
        return self._slices[source]

    @property
    def gnss_bias(self) -> Vector3:
        """GNSS position bias estimate (m, ENU axes at the start); zero without its states."""
        b = self.augmented.get(GnssPosition.name, (0.0, 0.0, 0.0))
        return (b[0], b[1], b[2])

    # ----- subclass interface -------------------------------------------------------------
    _NOMINAL_FIELDS: tuple[str, ...] = ()  # attributes holding the (immutable) nominal state
    _SNAPSHOT_FIELDS = ("time", "gyro_bias", "accel_bias", "last_omega", "last_nis",
                        "_diverged", "_consecutive_rejections", "_fix_track", "_aiding_shift",
                        "_last_accepted_gnss",
                        "_last_gnss_velocity", "_used", "_acc_count", "_previous_sample")

    def _set_nominal(self, q: FloatArray, v: FloatArray, p: FloatArray) -> None:
        raise NotImplementedError

    def nominal(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(q body->ECEF scalar-last, ECEF velocity m/s, ECEF position m) as arrays."""
        raise NotImplementedError

    def _step(self, omega: Vector3, force: Vector3, dt: float) -> None:
        """Propagate the nominal state (the reference of ``_advance``)."""
        raise NotImplementedError

    def _advance(self, omega: Vector3, force: Vector3, dt: float) -> None:
        """``_step`` and the covariance accumulators in one compiled call."""
        raise NotImplementedError

    def _flush_compiled(self, position_limit: float) -> bool:
        """The compiled ``flush`` arithmetic (F, Phi, Q_d, P in place; accumulators zeroed):
        True when the covariance is healthy (``_check_covariance``)."""
        raise NotImplementedError

    def _fill_error_dynamics(self, F: FloatArray, omega: Vector3, force: Vector3) -> None:
        """Write the navigation entries of F (state_dim square) for the mean bias-corrected
        rate (rad/s) and force (m/s^2); the constant blocks are set once in ``__init__``."""
        raise NotImplementedError

    def navigation_error_block(self, rotation: FloatArray) -> FloatArray:
        """d(position)/d(position error) = d(velocity)/d(velocity error) in this convention,
        for the body->ECEF ``rotation`` of the estimate (what measurement models use)."""
        raise NotImplementedError

    def _attitude_key(self) -> tuple[float, ...]:
        """The immutable tuple of the nominal state that holds the attitude quaternion in
        its first four entries."""
        raise NotImplementedError

    def attitude_matrix(self) -> FloatArray:
        """C body->ECEF of the nominal attitude, read-only. Computed once per nominal state:
        its tuple is replaced, never changed, so the same tuple has the same matrix (an
        update's models and its correction need it several times)."""
        key = self._attitude_key()
        if key is not self._matrix_key:
            matrix = quaternion.to_matrix(np.array(key[:4]))
            matrix.flags.writeable = False
            self._matrix, self._matrix_key = matrix, key
        return self._matrix

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
        standard deviations (rad, m/s, m, rad/s, m/s^2) in body/ECEF-agnostic form: the
        augmented states then start uncorrelated with each source's initial sigmas. It may
        also be state_dim square or state_dim sigmas. Biases use the paper's sign:
        truth = reading + bias. Augmented estimates start at zero.
        """
        values = {
            "time": np.array([time], dtype=float),
            "attitude": as_vector(attitude, 4, "attitude"),
            "velocity": as_vector(velocity, 3, "velocity"),
            "position": as_vector(position, 3, "position"),
            "gyro_bias": as_vector(gyro_bias, 3, "gyro_bias"),
            "accel_bias": as_vector(accel_bias, 3, "accel_bias"),
        }
        for name, value in values.items():
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{name} must be finite, got {value}")
        cov = np.asarray(covariance, dtype=float)
        if cov.ndim == 1:
            cov = np.diag(np.square(cov))
        dim = self.state_dim
        if cov.shape == (STATE_DIM, STATE_DIM) and dim > STATE_DIM:
            full = np.zeros((dim, dim))
            full[:STATE_DIM, :STATE_DIM] = cov
            for _, sl, model in self._augmented_models:
                full[sl, sl] = np.diag(np.square(model.initial_sigma))
            cov = full
        if cov.shape != (dim, dim) or not np.all(np.isfinite(cov)):
            raise ValueError(f"covariance must be finite {dim}x{dim} or {dim} sigmas, "
                             f"got {np.shape(covariance)}")
        if np.any(np.linalg.eigvalsh(0.5 * (cov + cov.T)) <= 0.0):
            raise ValueError("covariance must be symmetric positive definite")
        q = values["attitude"] / np.linalg.norm(values["attitude"])
        self._set_nominal(q, values["velocity"], values["position"])
        bg, ba = values["gyro_bias"], values["accel_bias"]  # 3 elements each
        self.gyro_bias = (float(bg[0]), float(bg[1]), float(bg[2]))
        self.accel_bias = (float(ba[0]), float(ba[1]), float(ba[2]))
        self.augmented = {name: (0.0,) * len(values_)
                          for name, values_ in self.augmented.items()}
        self._used = frozenset()
        self.covariance = 0.5 * (cov + cov.T)
        self.time = float(time)
        self._last_accepted_gnss = float(time)
        self._last_fix_stamp = math.nan  # the measured period stays: it is the receiver's
        self._last_gnss_velocity = None
        self._previous_sample = None
        self._initialized = True
        self._diverged = False
        self._consecutive_rejections = 0
        self._fix_track = FixTrack(alarms=self._fix_track.alarms)  # a count of the whole run
        self._aiding_shift = np.zeros(3)
        self._pending.clear()
        self._forget_history()
        self._reset_accumulator()
        for source in self.sources.values():
            source.start(self)

    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def status(self) -> FilterStatus:
        if not self._initialized:
            return FilterStatus.UNINITIALIZED
        if self._diverged:
            return FilterStatus.DIVERGED
        if self.time - self._last_accepted_gnss > self.outage_threshold:
            return FilterStatus.OUTAGE
        return FilterStatus.NOMINAL

    @property
    def gnss_period(self) -> float:
        """Nominal GNSS period measured from the fix stamps, s: the median of the latest
        ``GNSS_PERIOD_WINDOW`` intervals; NaN before ``GNSS_PERIOD_MIN_INTERVALS``."""
        return self._gnss_period

    @property
    def outage_threshold(self) -> float:
        """Time without an accepted GNSS position update after which the status reads
        OUTAGE, s: ``outage_timeout``, or when it is NaN ``outage_gnss_periods`` nominal
        periods (``gnss_period``; until measured the largest interval seen, at least
        ``ASSUMED_GNSS_PERIOD``), at least ``outage_timeout_floor``."""
        config = self.config
        if not math.isnan(config.outage_timeout):
            return config.outage_timeout
        period = self._gnss_period
        if math.isnan(period):
            period = max([ASSUMED_GNSS_PERIOD, *self._fix_intervals])
        return max(config.outage_timeout_floor, config.outage_gnss_periods * period)

    def process_imu(self, time: float, gyro: FloatVector, accel: FloatVector) -> bool:
        """Integrate one IMU sample: body rate (rad/s) and specific force (m/s^2) at ``time``.

        The sample stands for the interval since the previous sample. Queued measurements
        (any sensor) stamped inside the interval are applied at their own stamps.
        Returns False (and counts why) when the sample is rejected: an interval longer
        than ``max_imu_stamp_jump`` is a stamp fault, not a gap (``core.input_clock``).
        """
        gx, gy, gz = map(float, gyro)
        ax, ay, az = map(float, accel)
        t = float(time)
        if not (math.isfinite(t) and math.isfinite(gx + gy + gz) and math.isfinite(ax + ay + az)):
            self.imu_counts["nonfinite"] += 1
            return False
        if not self._initialized:
            return False
        dt = t - self.time
        fault = stamp_fault(dt, self.config.max_imu_stamp_jump)
        if fault is not None:
            self.imu_counts[fault] += 1
            return False
        gyro_sample, accel_sample = (gx, gy, gz), (ax, ay, az)
        if self.config.history_length > 0.0:
            self._remember(t, gyro_sample, accel_sample)
        if not self._replaying:  # a replayed sample was counted the first time
            self.imu_counts["accepted"] += 1
        self._sampling_noise(gyro_sample, accel_sample, dt)
        if dt > self.config.max_imu_interval:
            if not self._replaying:
                self.imu_counts["gap"] += 1
            if dt <= self.config.max_bridged_gap:
                self._bridge_gap(t)
            else:
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
            measurement = self._pop_pending()
            self._propagate(omega, force, measurement.time - self.time)
            self._update(measurement)
        self._propagate(omega, force, t - self.time)
        return True

    def restart_clock(self, time: float) -> None:
        """Continue the running estimate at ``time`` s on a new input time base (the input
        clock stepped: ``core.input_clock``). State and covariance stay; the GNSS timing
        (outage age) carries over; the delayed-measurement history, on the old base, is
        dropped, and so are the measurements queued for old-base stamps (counted ``late``:
        they cannot be applied at their stamps any more)."""
        self.flush()
        shift = float(time) - self.time
        self.time = float(time)
        self._last_accepted_gnss += shift
        self._fix_track = self._fix_track.shifted(shift)  # its fixes are on the old base
        self._last_fix_stamp = math.nan
        self._previous_sample = None
        self._drop_measurements_inside_gap(math.inf)
        self._forget_history()

    def _sampling_noise(self, gyro: Vector3, accel: Vector3, dt: float) -> None:
        """Set the sampling-noise variance rates of the interval ending with this sample
        (``FilterConfig.gyro_sampling_factor``, ``accel_sampling_factor``): (k |change of
        the sample| dt)^2 over the interval, spread over its dt. None across a gap."""
        config = self.config
        k_g, k_a = config.gyro_sampling_factor, config.accel_sampling_factor
        previous = self._previous_sample
        self._previous_sample = (gyro, accel)
        if (k_g == 0.0 and k_a == 0.0) or previous is None or dt > config.max_imu_interval:
            self._sampling_rates = (0.0, 0.0)
            return
        (w0, w1, w2), (f0, f1, f2) = previous
        dw2 = (gyro[0] - w0) ** 2 + (gyro[1] - w1) ** 2 + (gyro[2] - w2) ** 2
        df2 = (accel[0] - f0) ** 2 + (accel[1] - f1) ** 2 + (accel[2] - f2) ** 2
        self._sampling_rates = (k_g * k_g * dw2 * dt, k_a * k_a * df2 * dt)

    def process_gnss(self, time: float, position: ArrayLike, position_covariance: ArrayLike,
                     velocity: ArrayLike | None = None,
                     velocity_covariance: ArrayLike | None = None) -> bool:
        """Queue (or apply) one GNSS epoch: antenna position (ECEF m) and optionally velocity
        (ECEF m/s), covariances 3x3 (m^2, m^2/s^2) or 3 variances; the velocity update goes
        first (a divergence reset on the position then takes it). A delayed epoch costs one
        rewind for both. Returns False when the position is not used (see ``process``)."""
        epoch = []
        if velocity is not None:
            if velocity_covariance is None:
                raise ValueError("velocity_covariance is required with velocity")
            epoch.append(Measurement(
                GnssVelocity.name, float(time), as_vector(velocity, 3, "velocity"),
                as_covariance(velocity_covariance, 3, "velocity_covariance")))
        epoch.append(Measurement(
            GnssPosition.name, float(time), as_vector(position, 3, "position"),
            as_covariance(position_covariance, 3, "position_covariance")))
        return self._process_together(epoch)[-1]

    def process(self, m: Measurement) -> bool:
        """Queue (or apply, if stamped at the filter time) one measurement of a source of
        this filter (ValueError for an unknown source).

        A measurement older than the filter time but inside ``history_length`` is applied
        at its stamp by rewinding and re-running the stored IMU samples (measurements
        applied since are re-applied; their results are reported again by
        ``drain_updates``). Older, duplicate and non-finite ones are rejected and counted in
        the source's ``AidStatus``; returns False then (and before ``initialize``).
        """
        if m.source not in self.sources:
            raise ValueError(f"no aiding source {m.source!r} in this filter "
                             f"(has {sorted(self.sources)})")
        return self._process_together([m])[0]

    def _process_together(self, measurements: Sequence[Measurement]) -> list[bool]:
        """``process`` for measurements of this filter's sources submitted together (in
        this order): the delayed ones among them are applied by one rewind."""
        accepted = [True] * len(measurements)
        valid = []
        for i, m in enumerate(measurements):
            if not usable(m):
                self._count(m.source, "nonfinite")
                accepted[i] = False
            elif not self._initialized:
                accepted[i] = False
            else:
                valid.append(i)
        for i, used in zip(valid, self._submit([measurements[i] for i in valid]), strict=True):
            accepted[i] = used
        return accepted

    def drain_updates(self) -> list[UpdateResult]:
        """Update results of every source since the last call (accepted and rejected)."""
        updates, self._updates = self._updates, []
        return updates

    def counts(self) -> dict[str, int]:
        """Every counter as ``{input}_{reason}``: the IMU's and each source's."""
        result = {f"imu_{reason}": n for reason, n in self.imu_counts.items()}
        for name, status in self.aid_status.items():
            result.update({f"{name}_{reason}": n for reason, n in status.counts.items()})
        result[f"{GnssPosition.name}_spoofing_alarms"] = self.spoofing_alarms
        return result

    def flush(self) -> None:
        """Propagate the covariance over any IMU samples not yet folded into it (the
        compiled kernels update ``covariance`` in place)."""
        T = float(self._acc[ACC_TIME])
        if T <= 0.0:
            return
        if self.compiled:
            if not self._flush_compiled(self.config.divergence_position_sigma**2):
                self._diverged = True
        else:
            self._flush_reference(T)
        for name, tau in self._decay:
            decay = math.exp(-T / tau)
            self.augmented[name] = tuple(c * decay for c in self.augmented[name])
        self._acc_count = 0

    def _flush_reference(self, T: float) -> None:
        """``flush``'s covariance step in numpy (what ``_flush_compiled`` computes)."""
        w0, w1, w2, f0, f1, f2, _, sampling_attitude, sampling_velocity = self._acc.tolist()
        F = self._F
        self._fill_error_dynamics(F, (w0 / T, w1 / T, w2 / T), (f0 / T, f1 / T, f2 / T))
        A = F * T
        phi = A @ A
        phi *= 0.5
        phi += A
        phi += self._eye
        q = self._q_error * T
        if sampling_attitude or sampling_velocity:
            q[ATT] += sampling_attitude
            q[VEL] += sampling_velocity
        # Q_d = Q T + (F Q + Q F^T) T^2 / 2: keeps the velocity-position noise coupling.
        fq = A * q
        fq *= 0.5
        P = phi @ self.covariance @ phi.T
        P += fq
        P += fq.T
        P += np.diag(q)
        self.covariance = P
        self._acc[:] = 0.0
        self._check_covariance()

    def reset(self) -> None:
        """Forget the state: the filter is uninitialized until the next ``initialize``
        (counters and aid statuses stay: they describe the whole run)."""
        self._initialized = False
        self._diverged = False
        self._pending.clear()
        self._forget_history()

    def reset_yaw(self, angle: float, sigma: float) -> None:
        """Turn the attitude by ``angle`` (rad) about the local vertical, keeping the world
        velocity and position, and make the yaw error ``sigma`` (rad), uncorrelated with
        everything else (a yaw reset from another yaw source). The history of delayed
        measurements restarts: a rewind must not undo the reset."""
        if not (math.isfinite(angle) and math.isfinite(sigma) and sigma > 0.0):
            raise ValueError(f"yaw reset needs a finite angle and sigma > 0, got "
                             f"{angle!r}, {sigma!r}")
        self.flush()
        q, v, p = self.nominal()
        up = np.asarray(p, dtype=float) / float(np.linalg.norm(p))  # radial: 0.2 deg off
        J = self.conventional_jacobian()
        P = J @ self.covariance @ J.T
        turned = quaternion.multiply(quaternion.from_rotation_vector(angle * up), q)
        self._set_nominal(turned, v, p)
        # The yaw axis in body coordinates (the attitude error is phi^b): project it out of
        # the attitude error, then give it the new variance alone.
        u = quaternion.to_matrix(turned).T @ up
        keep = np.eye(P.shape[0])
        keep[ATT, ATT] -= np.outer(u, u)
        P = keep @ P @ keep.T
        P[ATT, ATT] += sigma * sigma * np.outer(u, u)
        J = self.conventional_jacobian()
        self.covariance = J.T @ P @ J
        self._forget_history()

    def _forget_history(self) -> None:
        self._imu_history.clear()
        self._snapshots.clear()
        self._applied.clear()
        self._next_snapshot = -math.inf
        self._trim_from = math.inf
        self._recount_held()

    def _recount_held(self) -> None:
        """Rebuild ``_held`` after the queue or the history was replaced or cleared."""
        self._held = Counter((m.time, m.source) for m in self._pending)
        self._held.update((m.time, m.source) for m, _, _ in self._applied)

    def _pop_pending(self) -> Measurement:
        """Take the earliest queued measurement."""
        m = self._pending.pop(0)
        self._release(m)
        return m

    def _hold(self, m: Measurement) -> None:
        self._held[m.time, m.source] += 1

    def _release(self, m: Measurement) -> None:
        key = (m.time, m.source)
        if self._held[key] == 1:
            del self._held[key]  # no zero entries: the history's stamps move on
        else:
            self._held[key] -= 1

    def conventional_covariance(self) -> FloatArray:
        """Covariance of [phi^b, v_hat - v (ECEF), p_hat - p (ECEF), db_g, db_a], then with
        the bias states db_gnss (ENU bias axes)."""
        J = self.conventional_jacobian()
        return J @ self.covariance @ J.T

    def error_from_truth(self, q: ArrayLike, v: ArrayLike, p: ArrayLike,
                         gyro_bias: ArrayLike, accel_bias: ArrayLike,
                         gnss_bias: ArrayLike | None = None,
                         augmented: dict[str, ArrayLike] | None = None) -> FloatArray:
        """This filter's error (state_dim) of the estimate relative to a true state.

        Navigation part in this filter's convention; bias errors estimate - truth.
        augmented: true values of sources' augmented states by source (missing: zero);
        gnss_bias: the true GNSS position bias (m, ENU bias axes), the same as
        ``augmented["gnss_position"]``.
        """
        truths = dict(augmented or {})
        if gnss_bias is not None:
            truths[GnssPosition.name] = gnss_bias
        parts = [self._navigation_error(q, v, p),
                 np.array(self.gyro_bias) - np.asarray(gyro_bias, dtype=float),
                 np.array(self.accel_bias) - np.asarray(accel_bias, dtype=float)]
        for name, sl in self._slices.items():
            size = sl.stop - sl.start
            truth = as_vector(truths.get(name, np.zeros(size)), size, name)
            parts.append(np.array(self.augmented[name]) - truth)
        return np.concatenate(parts)

    # ----- internals ----------------------------------------------------------------------
    def _submit(self, measurements: Sequence[Measurement]) -> list[bool]:
        """Apply validated measurements now, queue them for their stamps, or rewind the
        history to apply them in the past; rejects (and counts) duplicates, late ones and
        overflow. Measurements sharing a stamp are applied in arrival order; consecutive
        delayed ones share one rewind (the replay re-takes the snapshots, so each would
        restart from the same state: one replay gives the same result as several)."""
        results = []
        delayed: list[Measurement] = []
        for m in measurements:
            if (m.time, m.source) in self._held or any(
                    other.time == m.time and other.source == m.source for other in delayed):
                self._count(m.source, "duplicate")
                results.append(False)
                continue
            if m.time < self.time:
                late = not (self._snapshots and self._snapshots[0].time < m.time)
                if late:
                    self._count(m.source, "late")
                else:
                    delayed.append(m)
                results.append(not late)
                continue
            if delayed:  # applied before this one, as it arrived before
                self._rewind_and_apply(delayed)
                delayed = []
            results.append(self._apply_or_queue(m))
        if delayed:
            self._rewind_and_apply(delayed)
        return results

    def _apply_or_queue(self, m: Measurement) -> bool:
        """Apply a measurement stamped at the filter time, queue a later one (or count it as
        an overflow)."""
        if m.time == self.time:
            self._update(m)
            return True
        if len(self._pending) >= MAX_PENDING:
            self._count(m.source, "overflow")
            return False
        self._pending.insert(bisect.bisect(self._pending, m.time, key=lambda x: x.time), m)
        self._hold(m)
        return True

    def _count(self, source: str, reason: str, step: int = 1) -> None:
        self.aid_status[source].counts[reason] += step

    def _threshold(self, dof: int) -> float:
        threshold = self._gate.get(dof)
        if threshold is None:
            probability = self.config.gate_probability
            threshold = math.inf if probability == 0.0 else chi_square.quantile(probability, dof)
            self._gate[dof] = threshold
        return threshold

    def _reset_accumulator(self) -> None:
        self._acc[:] = 0.0
        self._acc_count = 0

    def _propagate(self, omega: Vector3, force: Vector3, dt: float) -> None:
        if dt <= 0.0:
            return
        if self.compiled:
            self._advance(omega, force, dt)
        else:
            self._step(omega, force, dt)
            self._accumulate(omega, force, dt)
        self.time += dt
        self._acc_count += 1
        if self._acc_count >= self.config.covariance_decimation:
            self.flush()

    def _accumulate(self, omega: Vector3, force: Vector3, dt: float) -> None:
        """Add one interval to the covariance accumulators (what ``_advance`` does in C)."""
        acc = self._acc
        acc[:ACC_SAMPLING.start] += (omega[0] * dt, omega[1] * dt, omega[2] * dt,
                                     force[0] * dt, force[1] * dt, force[2] * dt, dt)
        rate_attitude, rate_velocity = self._sampling_rates
        if rate_attitude or rate_velocity:
            acc[ACC_SAMPLING] += (rate_attitude * dt, rate_velocity * dt)

    def _bridge_gap(self, t: float) -> None:
        """Cross an IMU gap to ``t`` (``FilterConfig.max_bridged_gap``): the state coasts,
        the measurements stamped inside the gap are applied at their stamps, and the
        covariance grows as for a rate ``gap_rate_sigma`` and an acceleration
        ``gap_accel_sigma`` held over the whole gap (white densities sigma^2 T: over T they
        give the variances sigma^2 T^2 of an unknown constant)."""
        self.flush()
        span = t - self.time
        normal = self._q_error
        self._q_error = normal.copy()
        self._q_error[ATT] = self.config.gap_rate_sigma**2 * span
        self._q_error[VEL] = self.config.gap_accel_sigma**2 * span
        try:
            pending = self._pending
            while pending and pending[0].time <= t:
                measurement = self._pop_pending()
                self._coast(measurement.time)
                self._update(measurement)
            self._coast(t)
        finally:
            self._q_error = normal

    def _coast(self, t: float) -> None:
        """Propagate to ``t`` without IMU data: attitude held in ECEF, velocity constant (the
        specific force that cancels gravity and the Coriolis term), in steps of at most
        ``max_imu_interval``: the covariance step's second-order Q_d is only valid for
        short steps."""
        steps = math.ceil((t - self.time) / self.config.max_imu_interval - 1e-9)
        for k in range(steps, 0, -1):
            q, v, p = self.nominal()
            to_body = quaternion.to_matrix(q).T
            rate = to_body @ OMEGA_ECEF
            force = to_body @ (2.0 * np.cross(OMEGA_ECEF, v)
                               - np.array(gravity_xyz(*(float(c) for c in p))))
            self._propagate((float(rate[0]), float(rate[1]), float(rate[2])),
                            (float(force[0]), float(force[1]), float(force[2])),
                            (t - self.time) / k)
            self.flush()

    def _drop_measurements_inside_gap(self, t: float) -> None:
        """After an IMU gap the state is held; measurements stamped inside it are dropped."""
        self.flush()
        while self._pending and self._pending[0].time <= t:
            dropped = self._pop_pending()
            self._count(dropped.source, "late")
            self._rewinding = [m for m in self._rewinding if m is not dropped]

    def _update(self, m: Measurement) -> None:
        """Let the source check the measurement, NIS-gate it and, if it passes, apply the
        Joseph-form update; record the outcome in the source's ``AidStatus``."""
        self.flush()
        source = self.sources[m.source]
        if m.source not in self._used:
            self._first_use(source, m)
        reason = source.check(self, m)
        nis = math.nan
        if reason is None:
            linear = source.linearize(self, m)
            z, H, R = linear.residual, linear.H, linear.R
            K, dx, S_inv, nis = self._innovation(z, H, R)
            reason = "accepted" if nis <= self._threshold(z.size) else "gated"
            if source.drives_status and self.config.consistency_probability > 0.0:
                # The antenna position after the outcome: a gated fix leaves the prediction
                # (residual z), an update leaves the residual R S^-1 z.
                posterior = z if reason == "gated" else linear.R @ S_inv @ z
                reason = self._screen_fix(m, m.value + posterior, reason)
            self._record(m, z, nis)
        if self.config.history_length > 0.0:
            self._applied.append((m, reason, nis if reason == "accepted" else 0.0))
            self._hold(m)
        self._count(m.source, reason)
        status = self.aid_status[m.source]
        if reason == "accepted":
            status.nis_sum += nis
            status.nis_count += 1
        if reason in ("accepted", "gated", "inconsistent"):  # those have a residual
            self._updates.append(UpdateResult(m.source, m.time, z, nis, z.size,
                                              reason == "accepted", reason))
        else:
            self._updates.append(UpdateResult(m.source, m.time, np.zeros(0), math.nan,
                                              source.dof, False, reason))
        if m.source == GnssVelocity.name:
            self._last_gnss_velocity = m
        if source.drives_status:
            self._gnss_outcome(m, nis, reason)
        if reason != "accepted":
            return
        rotation_before = self.attitude_matrix()
        self._correct(dx.tolist())  # plain floats: numpy scalars slow the scalar hot path 3x
        if not source.drives_status:  # p <- p - (J dx)[POS], the conventional error removed
            self._aiding_shift = (self._aiding_shift
                                  - self.navigation_error_block(rotation_before) @ dx[POS])
        turn = self._correction_turn(rotation_before)
        if self.compiled:
            _kernels.joseph_update(self.covariance, H, R, K, turn)  # type: ignore[union-attr]
        else:
            IKH = self._eye - K @ H
            P = IKH @ self.covariance @ IKH.T + K @ R @ K.T
            if turn is not None:
                M = self._eye.copy()
                M[VEL, VEL] = turn
                M[POS, POS] = turn
                P = M @ P @ M.T
            self.covariance = 0.5 * (P + P.T)
        self._check_covariance()

    def _innovation(self, z: FloatArray, H: FloatArray, R: FloatArray
                    ) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """(gain K, correction dx = K z, S^-1, NIS) of a residual z with Jacobian H and noise
        covariance R."""
        if self.compiled and z.size <= _kernels.MAX_MEASUREMENT:  # type: ignore[union-attr]
            gain = np.empty((self.state_dim, z.size))
            dx = np.empty(self.state_dim)
            inverse = np.empty((z.size, z.size))
            nis = _kernels.innovation(  # type: ignore[union-attr]
                self.covariance, np.ascontiguousarray(H, dtype=float),
                np.ascontiguousarray(R, dtype=float), np.ascontiguousarray(z, dtype=float),
                gain, dx, inverse)
            return gain, dx, inverse, nis
        PHt = self.covariance @ H.T
        S_inv: FloatArray = np.linalg.inv(H @ PHt + R).astype(float, copy=False)
        K = PHt @ S_inv
        return K, K @ z, S_inv, float(z @ S_inv @ z)

    def _correction_turn(self, rotation_before: FloatArray) -> FloatArray | None:
        """Reset: the error left after a correction is unchanged in the conventional (ECEF
        velocity and position) coordinates, not in this filter's if they turn with the
        attitude just corrected (``body_axis_errors``: there the remaining velocity and
        position errors turn by -dtheta). M = J_after^T J_before (J orthogonal) re-expresses
        the covariance; J = blkdiag(I, -C, -C, I, ...), so M turns the velocity and position
        blocks by C_after^T C_before, returned here (3 x 3; ``rotation_before`` =
        C_before); None for the identity (ECEF errors)."""
        if not self.body_axis_errors:
            return None
        turn: FloatArray = self.attitude_matrix().T @ rotation_before
        return turn

    def _record(self, m: Measurement, z: FloatArray, nis: float) -> None:
        status = self.aid_status[m.source]
        status.last_time = m.time
        status.last_innovation = -z  # measured - predicted, as autopilots report it
        status.last_nis = nis
        status.last_test_ratio = nis / self._threshold(z.size)

    def _first_use(self, source: AidingSource, m: Measurement) -> None:
        """A source's first measurement may set its augmented states (``first_value``),
        e.g. the barometer offset to the first reading minus the predicted height."""
        self._used = self._used | {m.source}
        value = source.first_value(self, m)
        if value is not None:
            self.augmented[m.source] = tuple(value)

    def _correct(self, dx: list[float]) -> None:
        """Remove an estimated error (this filter's convention) from the state."""
        self._inject(dx[NAV])
        bg, ba = self.gyro_bias, self.accel_bias
        self.gyro_bias = (bg[0] - dx[9], bg[1] - dx[10], bg[2] - dx[11])
        self.accel_bias = (ba[0] - dx[12], ba[1] - dx[13], ba[2] - dx[14])
        for name, sl in self._slices.items():
            value = self.augmented[name]
            self.augmented[name] = tuple(c - d for c, d in zip(value, dx[sl], strict=True))

    def _gnss_outcome(self, m: Measurement, nis: float, reason: str) -> None:
        """Only the GNSS position drives the reported NIS and the outage/divergence status;
        an inconsistent fix (``core.divergence``) does not count towards divergence."""
        self.last_nis = nis
        self._measure_gnss_period(m.time)
        if reason == "accepted":
            if self.config.reset_on_divergence:
                self._diverged = False
            self._consecutive_rejections = 0
            self._last_accepted_gnss = m.time
            return
        if reason == "inconsistent":
            return
        self._consecutive_rejections += 1
        if self._consecutive_rejections < self.config.max_consecutive_rejections:
            return
        self._diverged = True
        if not self.config.reset_on_divergence:
            return
        screened = self.config.consistency_probability > 0.0
        if screened and not self._fix_track.ready_to_reset(
                self.config.max_consecutive_rejections):
            return
        self._reset_to_gnss(m)
        if screened:  # the reset fix anchors the next tests, at the antenna it reset to
            self._fix_track = self._fix_track.anchored(
                fix_record(self, m, m.value - self._aiding_shift, self._epoch_velocity(m)))

    def _screen_fix(self, m: Measurement, antenna: FloatArray, reason: str) -> str:
        """Divergence or spoofing (``core.divergence``): record the fix at ``antenna`` (the
        filter's antenna position after its outcome, less the other sources' corrections);
        a gated fix that the GNSS velocity and the IMU contradict comes back
        ``inconsistent``."""
        record = fix_record(self, m, antenna - self._aiding_shift, self._epoch_velocity(m))
        if reason == "accepted":
            self._fix_track = self._fix_track.anchored(record)
            return reason
        self._fix_track, inconsistent = self._fix_track.screened(
            record, self.config.consistency_probability, self.outage_threshold)
        return "inconsistent" if inconsistent else reason

    def _epoch_velocity(self, m: Measurement) -> Measurement | None:
        """The GNSS velocity of the fix's epoch (None without one)."""
        velocity = self._last_gnss_velocity
        if velocity is not None and abs(velocity.time - m.time) <= RESET_VELOCITY_AGE:
            return velocity
        return None

    @property
    def gnss_alarm(self) -> str:
        """Why the GNSS position is suspected of spoofing, "" when it is not
        (``core.divergence``); raised until a fix passes the gate again."""
        return self._fix_track.alarm

    @property
    def spoofing_alarms(self) -> int:
        """How many times the spoofing alarm was raised (the whole run)."""
        return self._fix_track.alarms

    def _measure_gnss_period(self, t: float) -> None:
        """Count the interval from the previous GNSS position stamp (accepted or not: the
        receiver's rate); stamps not after it (re-applied after a rewind) are skipped."""
        last = self._last_fix_stamp
        if t <= last:
            return
        self._last_fix_stamp = t
        if math.isnan(last):
            return
        self._fix_intervals.append(t - last)
        if len(self._fix_intervals) >= GNSS_PERIOD_MIN_INTERVALS:
            self._gnss_period = statistics.median(self._fix_intervals)

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(self.time, self._snapshot_values(self), self.covariance.copy(),
                         self._acc.copy(), dict(self.augmented))

    def _restore(self, state: _Snapshot) -> None:
        for name, value in zip(self._snapshot_names, state.values, strict=True):
            setattr(self, name, value)
        # The snapshot stays in the history: give the filter its own mutable copies.
        self.covariance = state.covariance.copy()
        self._acc = state.acc.copy()
        self.augmented = dict(state.augmented)

    def _remember(self, t: float, gyro: Vector3, accel: Vector3) -> None:
        """Snapshot the state before this sample if the last snapshot is
        ``SNAPSHOT_SPACING`` old, keep the sample, and forget what is older than
        ``history_length`` (checked against one stored time: this runs every sample)."""
        snapshots = self._snapshots
        if self.time >= self._next_snapshot:
            snapshots.append(self._snapshot())
            self._next_snapshot = self.time + SNAPSHOT_SPACING
            if len(snapshots) == 2:
                self._trim_from = self.time
        if not self._replaying:
            self._imu_history.append((t, gyro, accel))
        horizon = t - self.config.history_length
        if horizon >= self._trim_from:
            self._trim_history(horizon)

    def _trim_history(self, horizon: float) -> None:
        """Keep the last snapshot at or before ``horizon`` (s) and everything after it."""
        snapshots = self._snapshots
        while len(snapshots) > 1 and snapshots[1].time <= horizon:
            snapshots.popleft()
        self._trim_from = snapshots[1].time if len(snapshots) > 1 else math.inf
        oldest = snapshots[0].time
        while self._imu_history and self._imu_history[0][0] <= oldest:
            self._imu_history.popleft()
        while self._applied and self._applied[0][0].time < oldest:
            self._release(self._applied.popleft()[0])

    def _rewind_and_apply(self, delayed: list[Measurement]) -> None:
        """Go back to the last snapshot before the oldest delayed measurement, then re-run
        the stored IMU samples with them (and the measurements applied since) at their own
        stamps."""
        # Restart strictly before the stamp: a snapshot at it may already hold another
        # update at that stamp (sources measured together), which must be re-applied.
        oldest = min(m.time for m in delayed)
        while len(self._snapshots) > 1 and self._snapshots[-1].time >= oldest:
            self._snapshots.pop()
        snapshot = self._snapshots.pop()  # re-taken by the first replayed sample
        self._next_snapshot = -math.inf
        self._trim_from = self._snapshots[1].time if len(self._snapshots) > 1 else math.inf
        start = snapshot.time
        samples = [record for record in self._imu_history if record[0] > start]
        replayed = [item for item in self._applied if item[0].time > start]
        requeue = [m for m, _, _ in replayed]
        for m, reason, nis in replayed:  # counted again when re-applied
            self._count(m.source, reason, -1)
            self.aid_status[m.source].nis_sum -= nis
            self.aid_status[m.source].nis_count -= reason == "accepted"
        self._applied = deque(item for item in self._applied if item[0].time <= start)
        self._restore(snapshot)
        # Stable sort: a stamp's measurements stay in arrival order, the delayed ones last.
        self._pending = sorted([*self._pending, *requeue, *delayed], key=lambda m: m.time)
        self._recount_held()
        self._rewinding = list(delayed)
        self._replaying = True
        try:
            for t, gyro, accel in samples:
                self.process_imu(t, gyro, accel)
        finally:
            self._replaying = False
        # A measurement the replay dropped (inside a skipped gap) is counted late, not both.
        for m in self._rewinding:
            self._count(m.source, "delayed")
        self._rewinding = []

    def _reset_to_gnss(self, m: Measurement) -> None:
        """Move position (and velocity, with a GNSS velocity of the same epoch) to the fix,
        keep attitude; their covariance becomes the fix's, uncorrelated with the rest. With
        the bias states the position is the fix minus the bias estimate, so its error also
        carries the bias error (kept)."""
        q, v, _ = self.nominal()
        C = quaternion.to_matrix(q)
        lever = np.array(self.config.lever_arm, dtype=float)
        omega_eb = np.array(self.last_omega) - C.T @ OMEGA_ECEF
        J = self.conventional_jacobian()
        P = J @ self.covariance @ J.T
        P[NAV.start + 3:NAV.stop, :] = 0.0
        P[:, NAV.start + 3:NAV.stop] = 0.0
        P[POS, POS] = self.gnss.white_covariance(self, m.covariance)
        position = m.value - C @ lever - self.gnss.bias_offset(self)
        if self.gnss.augmented:
            # p_hat - p = white noise - A (b_hat - b).
            A = self.gnss.axes
            cross = -A @ P[GNSS_BIAS, GNSS_BIAS]
            P[POS, POS] -= cross @ A.T
            P[POS, GNSS_BIAS] = cross
            P[GNSS_BIAS, POS] = cross.T
        velocity = self._epoch_velocity(m)
        if velocity is not None:
            v = velocity.value - C @ np.cross(omega_eb, lever)
            P[VEL, VEL] = velocity.covariance
        else:
            P[VEL, VEL] = np.eye(3)  # 1 m/s: unknown after a divergence
        self._set_nominal(q, v, position)
        self.covariance = J.T @ P @ J
        self._consecutive_rejections = 0
        self._count(m.source, "resets")

    def _check_covariance(self) -> None:
        # Plain floats: a NaN or inf makes the sum non-finite, whatever min and max say.
        diagonal = self.covariance.diagonal().tolist()
        healthy = min(diagonal) >= 0.0 and math.isfinite(sum(diagonal))
        if not healthy or max(diagonal[POS]) > self.config.divergence_position_sigma**2:
            self._diverged = True
