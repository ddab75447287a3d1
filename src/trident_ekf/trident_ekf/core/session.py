"""One estimation run fed from sensor streams: the logic trident-replay and the node share.

``EstimationSession`` takes plain values (stamps in ns, SI units, ENU GNSS as a ROS driver
publishes it), checks them, feeds the ``Initializer`` until it can start the filter and then
the filter, pairs GNSS fixes with velocities, and gives the estimate in an ENU ``map`` frame
at a geodetic datum with covariances, plus diagnostics. It never imports ROS or messages:
the replay tool and the node only translate their messages to these calls.

Frames: body = the IMU frame rotated by ``imu_rotation`` (FLU ``base_link``); world outputs
in ENU at the datum; the filter itself works in ECEF.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray, FloatVector
from mav_geometry.scalar import multiply, to_matrix
from trident_ekf.core.earth import OMEGA_ECEF, enu_to_ecef_rotation, geodetic_to_ecef
from trident_ekf.core.filter import (
    ATT,
    BG,
    POS,
    VEL,
    ErrorStateFilter,
    FilterStatus,
    UpdateResult,
)
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.measurements.gnss import GnssConfig, GnssPosition, GnssVelocity
from trident_ekf.core.measurements.zero_velocity import StillnessDetector, ZeroVelocity

GNSS_PAIRING = 0.05  # s: a fix and a velocity closer than this form one measurement
YAW_OBSERVABLE_SIGMA = math.radians(5.0)  # yaw sigma below which yaw counts as observed
# Diagnostics level (diagnostic_msgs/DiagnosticStatus: 0 OK, 1 WARN, 2 ERROR) per status.
STATUS_LEVEL = {FilterStatus.NOMINAL: 0, FilterStatus.UNINITIALIZED: 1, FilterStatus.OUTAGE: 1,
                FilterStatus.DIVERGED: 2}
# Inputs the session itself rejects (the filter counts the rest, by source); each optional
# source adds ``{source}_before_start`` and ``{source}_malformed``.
REJECTION_REASONS = (
    "imu_malformed",  # undecodable message
    "imu_nonfinite", "imu_out_of_order", "imu_duplicate",  # before initialization
    "fix_no_fix", "fix_nonfinite", "fix_bad_covariance", "fix_superseded",
    "velocity_nonfinite", "velocity_bad_covariance", "velocity_without_fix",
    "velocity_unpaired",
)
INPUTS = ("imu", "fix", "velocity")
GNSS_SOURCES = (GnssPosition.name, GnssVelocity.name)
_POSE_INDEX = np.ix_([6, 7, 8, 0, 1, 2], [6, 7, 8, 0, 1, 2])  # position, attitude
_DIAGONAL_3 = np.arange(3)


class Datum:
    """ENU 'map' frame at a geodetic point: ECEF <-> ENU for positions, vectors, covariances."""

    def __init__(self, latitude: float, longitude: float, height: float) -> None:
        self.geodetic = (latitude, longitude, height)
        self.origin = geodetic_to_ecef(latitude, longitude, height)
        self.enu_to_ecef = enu_to_ecef_rotation(latitude, longitude)
        x, y, z, w = quaternion.from_matrix(self.enu_to_ecef)
        self._ecef_to_enu_quaternion = (-x, -y, -z, w)

    def attitude_enu(self, q_body_to_ecef: FloatArray) -> FloatArray:
        """q body->ENU with a non-negative scalar part (a quaternion product: converting the
        rotation matrix back costs more than the rest of an output)."""
        q = np.array(multiply(self._ecef_to_enu_quaternion, q_body_to_ecef.tolist()))
        return -q if q[3] < 0.0 else q

    def position_enu(self, p_ecef: FloatArray) -> FloatArray:
        """ENU coordinates (m): the tangent-plane rotation of p - origin (as ecef2enu)."""
        result: FloatArray = self.enu_to_ecef.T @ (np.asarray(p_ecef, dtype=float) - self.origin)
        return result


class OutputSchedule:
    """Decimates outputs on IMU stamps: one at the first stamp of each new slot of
    ``1 / rate_hz`` (the stamp clock divided into periods), from the second stamp on, so
    with a regular IMU whose stamps hit the slot edges every output stamp is a multiple of
    the output period."""

    def __init__(self, rate_hz: float) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0.0):
            raise ValueError(f"output rate must be finite and > 0 Hz, got {rate_hz!r}")
        self.period_ns = max(1, round(1e9 / rate_hz))
        self._last_slot: int | None = None

    def due(self, stamp_ns: int) -> bool:
        """True when ``stamp_ns`` is the first stamp seen in a slot after an earlier one."""
        slot = stamp_ns // self.period_ns
        last = self._last_slot
        if last is None or slot > last:
            self._last_slot = slot
        return last is not None and slot > last


@dataclass
class _PendingGnss:
    """A fix or velocity waiting for its partner: stamp s, ECEF value and 3x3 covariance,
    and the IMU time after which it stops waiting (s)."""

    time: float
    value: FloatArray
    covariance: FloatArray
    deadline: float


class EstimationSession:
    """Initializer, then filter, fed with validated plain inputs; ENU estimate and diagnostics.

    datum: (latitude deg, longitude deg, ellipsoidal height m) of the ENU ``map`` origin, or
    None for the first valid fix. imu_rotation: 3x3 rotation taking IMU-frame vectors to
    the body frame, or None when the IMU frame is the body frame (gyro, accelerometer and
    body-frame aiding inputs such as the magnetometer are rotated). gnss_receiver: how
    reported GNSS accuracies become noise. Optional aiding sources are the filter's
    (``filter_.sources``); with a ``zero_velocity`` source the session runs its stillness
    detector on the IMU.
    """

    def __init__(self, filter_: ErrorStateFilter, initializer: Initializer,
                 datum: tuple[float, float, float] | None = None,
                 imu_rotation: ArrayLike | None = None,
                 gnss_receiver: GnssConfig | None = None) -> None:
        self.filter = filter_
        self.initializer = initializer
        self.gnss_receiver = gnss_receiver or GnssConfig()
        self.datum = Datum(*datum) if datum is not None else None
        self._local_rotation = self.datum.enu_to_ecef if self.datum is not None else None
        self._rotation = None if imu_rotation is None else np.asarray(imu_rotation, dtype=float)
        optional = [name for name in filter_.sources if name not in GNSS_SOURCES]
        self.received = dict.fromkeys((*INPUTS, *optional), 0)
        self.rejected = dict.fromkeys(
            (*REJECTION_REASONS, *(f"{name}_{reason}" for name in optional
                                   for reason in ("before_start", "malformed"))), 0)
        zero_velocity = filter_.sources.get(ZeroVelocity.name)
        self._stillness = (StillnessDetector(zero_velocity.config)
                           if isinstance(zero_velocity, ZeroVelocity) else None)
        self._last_zero_velocity = -math.inf
        self._fix: _PendingGnss | None = None
        self._velocity: _PendingGnss | None = None
        self._updates: list[UpdateResult] = []
        self.last_update: UpdateResult | None = None  # latest GNSS position update
        self._first_imu = math.nan
        self._last_imu = -math.inf  # latest accepted IMU stamp, s
        self._imu_interval = math.nan  # latest IMU interval, s
        # Error-state rotation to ENU axes (estimate()); extra filter states stay as they are.
        self._to_enu = np.eye(filter_.covariance.shape[0])

    @property
    def duration(self) -> float:
        """Span of the accepted IMU stamps so far, s."""
        return 0.0 if math.isnan(self._first_imu) else self._last_imu - self._first_imu

    @property
    def started(self) -> bool:
        """True once the initializer has started the filter."""
        return self.filter.initialized

    # ----- inputs -------------------------------------------------------------------------
    def imu(self, stamp_ns: int, gyro: FloatVector, accel: FloatVector) -> bool:
        """One IMU sample: stamp ns, rate rad/s and specific force m/s^2 (IMU axes, REP-145).

        Returns True when the running filter integrated it (then an output may be due).
        """
        t = stamp_ns * 1e-9
        self.received["imu"] += 1
        if self._rotation is not None:
            gyro, accel = self._rotation @ gyro, self._rotation @ accel
        if self._fix or self._velocity:
            self._flush_gnss(t)
        if self.filter.initialized:
            if not self.filter.process_imu(t, gyro, accel):
                return False
            self._detect_stillness(t, gyro, accel)
        elif self._initializer_accepts(t, gyro, accel):
            self.initializer.add_imu(t, gyro, accel)
        else:
            return False
        if self._last_imu == -math.inf:
            self._first_imu = t
        self._imu_interval = t - self._last_imu
        self._last_imu = t
        return self.filter.initialized

    def fix(self, stamp_ns: int, status: int, latitude_deg: float, longitude_deg: float,
            height_m: float, covariance_enu: ArrayLike, covariance_known: bool = True) -> bool:
        """One NavSatFix: status (< 0 is NO_FIX), WGS-84 degrees, ellipsoidal height m, ENU
        covariance (3x3 or 9 row-major, m^2; ``covariance_known`` False uses a default).
        Returns False, counting why, when it is not used."""
        self.received["fix"] += 1
        if status < 0:  # NO_FIX must not be fused
            self.rejected["fix_no_fix"] += 1
            return False
        if not (math.isfinite(latitude_deg + longitude_deg + height_m)
                and abs(latitude_deg) <= 90.0):
            self.rejected["fix_nonfinite"] += 1
            return False
        covariance_enu = self.gnss_receiver.position(
            np.asarray(covariance_enu, dtype=float).reshape(3, 3) if covariance_known else None)
        if not _valid_covariance(covariance_enu):
            self.rejected["fix_bad_covariance"] += 1
            return False
        t = stamp_ns * 1e-9 - self.gnss_receiver.delay_s  # when the fix was valid
        if self.datum is None:
            self.datum = Datum(latitude_deg, longitude_deg, height_m)
        self._flush_gnss(t)
        rotation = enu_to_ecef_rotation(latitude_deg, longitude_deg)
        self._local_rotation = rotation
        if self._fix is not None:  # a second fix of the same epoch replaces the first
            self.rejected["fix_superseded"] += 1
        position = geodetic_to_ecef(latitude_deg, longitude_deg, height_m)
        self._fix = _PendingGnss(t, position, rotation @ covariance_enu @ rotation.T,
                                 self._deadline(t))
        self._pair()
        return True

    def velocity(self, stamp_ns: int, velocity_enu: Sequence[float],
                 covariance_enu: ArrayLike) -> bool:
        """One GNSS velocity: stamp ns, ENU m/s, 3x3 ENU covariance m^2/s^2 (all zeros: a
        default). Paired with the fix of the same epoch. Returns False, counting why, when
        it is not used."""
        self.received["velocity"] += 1
        covariance = np.asarray(covariance_enu, dtype=float).reshape(3, 3)
        covariance = self.gnss_receiver.velocity(covariance if np.any(covariance) else None)
        if not all(math.isfinite(c) for c in velocity_enu):
            self.rejected["velocity_nonfinite"] += 1
            return False
        if not _valid_covariance(covariance):
            self.rejected["velocity_bad_covariance"] += 1
            return False
        rotation = self._local_rotation  # ENU at the latest fix
        if rotation is None:
            self.rejected["velocity_without_fix"] += 1
            return False
        t = stamp_ns * 1e-9 - self.gnss_receiver.delay_s
        self._velocity = _PendingGnss(t, rotation @ np.asarray(velocity_enu, dtype=float),
                                      rotation @ covariance @ rotation.T, self._deadline(t))
        self._pair()
        return True

    def aid(self, source: str, stamp_ns: int, **fields: Any) -> bool:
        """One sample of the filter's optional aiding source ``source``: ``fields`` are the
        keyword arguments of that source's ``measurement`` (e.g. the barometer's
        ``pressure_pa``). Body-frame sources (``body_frame``) are rotated from the IMU frame;
        map-frame ones (``needs_datum``) get the datum. Returns False, counting why, when it
        is not used (a KeyError names an unknown source)."""
        aiding = self.filter.sources[source]
        self.received[source] += 1
        if not self.filter.initialized or (aiding.needs_datum and self.datum is None):
            self.rejected[f"{source}_before_start"] += 1
            return False
        if aiding.needs_datum:
            fields["datum"] = self.datum
        try:
            m: Measurement = aiding.measurement(stamp_ns * 1e-9, **fields)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            self.rejected[f"{source}_malformed"] += 1
            return False
        if aiding.body_frame and self._rotation is not None:
            m = replace(m, value=self._rotation @ m.value,
                        covariance=self._rotation @ m.covariance @ self._rotation.T)
        return self.filter.process(m)

    def drain_updates(self) -> list[UpdateResult]:
        """Update results of every source (accepted and rejected) since the last call."""
        updates, self._updates = self._updates, []
        updates += self.filter.drain_updates()
        for update in updates:
            if update.source == GnssPosition.name:
                self.last_update = update
        return updates

    # ----- input checks and GNSS pairing ---------------------------------------------------
    def _initializer_accepts(self, t: float, gyro: FloatVector, accel: FloatVector) -> bool:
        """The filter's IMU checks (finite, stamps increasing), counted, before it runs."""
        if not (math.isfinite(t) and all(math.isfinite(c) for c in (*gyro, *accel))):
            self.rejected["imu_nonfinite"] += 1
            return False
        if t <= self._last_imu:
            self.rejected["imu_duplicate" if t == self._last_imu else "imu_out_of_order"] += 1
            return False
        return True

    def _detect_stillness(self, t: float, gyro: FloatVector, accel: FloatVector) -> None:
        """Zero-velocity updates at the source's rate while the IMU is still."""
        detector = self._stillness
        if detector is None or not detector.add(t, gyro, accel):
            return
        if t - self._last_zero_velocity >= 1.0 / detector.config.rate_hz:
            self._last_zero_velocity = t
            zero_velocity = self.filter.sources[ZeroVelocity.name]
            assert isinstance(zero_velocity, ZeroVelocity)
            self.filter.process(zero_velocity.measurement(t))
            self._updates += self.filter.drain_updates()

    def _deadline(self, t: float) -> float:
        """IMU time after which a waiting fix or velocity goes on alone (or is dropped): the
        pairing window from its stamp, or from its arrival when it arrives late."""
        return max(t, self._last_imu) + GNSS_PAIRING

    def _pair(self) -> None:
        fix, velocity = self._fix, self._velocity
        if fix and velocity and abs(fix.time - velocity.time) < GNSS_PAIRING:
            self._fix = self._velocity = None
            self._submit(fix, velocity)

    def _flush_gnss(self, t: float) -> None:
        """A fix left without a velocity past its deadline goes alone; such a velocity is
        dropped (a velocity alone would leave the position unconstrained)."""
        if self._fix and t > self._fix.deadline:
            fix, self._fix = self._fix, None
            self._submit(fix, None)
        if self._velocity and t > self._velocity.deadline:
            self._velocity = None
            self.rejected["velocity_unpaired"] += 1

    def _submit(self, fix: _PendingGnss, velocity: _PendingGnss | None) -> None:
        v, v_cov = (velocity.value, velocity.covariance) if velocity else (None, None)
        if self.filter.initialized:
            self.filter.process_gnss(fix.time, fix.value, fix.covariance, v, v_cov)
            self._updates += self.filter.drain_updates()
            return
        if self.initializer.add_gnss(fix.time, fix.value, v):
            start = self.initializer.result
            assert start is not None  # add_gnss returned True: the initial state is set
            self.filter.initialize(start.time, start.attitude, start.velocity, start.position,
                                   start.sigmas, start.gyro_bias)

    # ----- outputs ------------------------------------------------------------------------
    def estimate(self) -> dict[str, FloatArray]:
        """The estimate at the filter time in the ENU ``map`` frame, with covariances.

        position (m), velocity (m/s) ENU; attitude q body->ENU [x, y, z, w]; position_cov,
        velocity_cov, attitude_cov 3x3 (attitude: rotation-vector error about the ENU axes,
        rad^2); pose_cov 6x6 ordered (x, y, z, rot x, rot y, rot z) with the cross terms of
        the truth-minus-estimate error; linear_body (m/s) and angular_body (rad/s, relative
        to the Earth) in body axes with twist_cov 6x6; gyro_bias (rad/s), accel_bias (m/s^2)
        in the paper's sign (truth = reading + bias) and their sigmas ``bias_sigma`` (6).
        """
        filter_ = self.filter
        filter_.flush()
        q_e, v_e, p_e = filter_.nominal()
        datum = self.datum
        if datum is None:
            raise RuntimeError("no estimate before the first GNSS fix sets the ENU datum")
        R = datum.enu_to_ecef
        C_eb = np.array(to_matrix(tuple(q_e)))
        C_nb = R.T @ C_eb
        # One congruence gives every block: the conventional error [phi^b, v_hat - v,
        # p_hat - p, biases] with attitude and ECEF vectors turned to ENU axes.
        to_enu = self._to_enu
        to_enu[ATT, ATT] = C_nb
        to_enu[VEL, VEL] = to_enu[POS, POS] = R.T
        M = to_enu @ filter_.conventional_jacobian()
        S = M @ filter_.covariance @ M.T
        # Pose error truth minus estimate: phi already is (C = C_hat (I + [phi x])), the
        # position error p_hat - p changes sign, which flips the cross blocks.
        pose_cov = S[_POSE_INDEX]
        pose_cov[:3, 3:] *= -1.0
        pose_cov[3:, :3] *= -1.0
        twist_cov = np.zeros((6, 6))
        twist_cov[:3, :3] = C_nb.T @ S[VEL, VEL] @ C_nb
        # The rate is a reading plus the bias estimate: bias variance plus the white noise
        # of one sample (density^2 / interval).
        interval = self._imu_interval if self._imu_interval > 0.0 else 0.01
        twist_cov[3:, 3:] = S[BG, BG]
        twist_cov[_DIAGONAL_3 + 3, _DIAGONAL_3 + 3] += filter_.config.gyro_noise**2 / interval
        return {
            "position": datum.position_enu(p_e), "velocity": R.T @ v_e,
            "attitude": datum.attitude_enu(q_e),
            "position_cov": S[POS, POS], "velocity_cov": S[VEL, VEL],
            "attitude_cov": S[ATT, ATT], "pose_cov": pose_cov,
            "linear_body": C_eb.T @ v_e,
            "angular_body": np.array(filter_.last_omega) - C_eb.T @ OMEGA_ECEF,
            "twist_cov": twist_cov,
            "gyro_bias": np.array(filter_.gyro_bias), "accel_bias": np.array(filter_.accel_bias),
            "bias_sigma": np.sqrt(S.diagonal()[9:15]),
        }

    def counts(self) -> dict[str, int]:
        """Every input counter: the filter's (accepted and rejected by reason) and the
        session's own rejections, by ``{input}_{reason}``."""
        result = self.filter.counts()
        for reason, count in self.rejected.items():
            result[reason] = result.get(reason, 0) + count
        return result

    def diagnostics(self, update: UpdateResult | None = None
                    ) -> tuple[int, str, dict[str, str]]:
        """(level 0 OK / 1 WARN / 2 ERROR, summary, key/values) describing the session:
        status, the GNSS update ``update`` (default the latest), biases and sigmas, yaw
        sigma (yaw observability), every counter and the messages received per input."""
        status = self.filter.status
        update = update or self.last_update
        values = {"status": status.value}
        if update is not None:
            values.update(nis=f"{update.nis:.3f}", dof=str(update.dof),
                          accepted=str(update.accepted).lower())
        if self.filter.initialized:
            estimate = self.estimate()
            sigma = estimate["bias_sigma"]
            for axis, name in enumerate("xyz"):
                values[f"gyro_bias_{name}_rad_s"] = f"{estimate['gyro_bias'][axis]:.3e}"
                values[f"accel_bias_{name}_m_s2"] = f"{estimate['accel_bias'][axis]:.3e}"
                values[f"gyro_bias_sigma_{name}_rad_s"] = f"{sigma[axis]:.3e}"
                values[f"accel_bias_sigma_{name}_m_s2"] = f"{sigma[3 + axis]:.3e}"
            yaw_sigma = math.sqrt(estimate["attitude_cov"][2, 2])
            values["yaw_sigma_deg"] = f"{math.degrees(yaw_sigma):.3f}"
            values["yaw_observable"] = str(yaw_sigma < YAW_OBSERVABLE_SIGMA).lower()
        for name, aid in self.filter.aid_status.items():
            values[f"{name}_nis_mean"] = f"{aid.nis_mean:.3f}"
            values[f"{name}_last_test_ratio"] = f"{aid.last_test_ratio:.3f}"
        values.update({name: str(count) for name, count in self.counts().items()})
        values.update({f"{name}_messages": str(count) for name, count in self.received.items()})
        summary = status.value if self.filter.initialized else "initializing"
        return STATUS_LEVEL[status], summary, values


def _valid_covariance(covariance: FloatArray) -> bool:
    """Finite with a positive diagonal (a usable measurement noise)."""
    return bool(np.all(np.isfinite(covariance)) and np.all(np.diag(covariance) > 0.0))
