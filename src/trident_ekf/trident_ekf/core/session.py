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

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray, FloatVector
from mav_geometry.kernels import load_kernels
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
from trident_ekf.core.initialization import (
    Initializer,
    MotionAttitude,
    wrap,
    yaw_of,
)
from trident_ekf.core.input_clock import InputClock, stamp_fault
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.measurements.gnss import GnssConfig, GnssPosition, GnssVelocity
from trident_ekf.core.measurements.magnetometer import Magnetometer
from trident_ekf.core.measurements.zero_velocity import StillnessDetector, ZeroVelocity
from trident_ekf.core.plausibility import fix_fault, imu_fault, valid_covariance
from trident_ekf.core.yaw_estimator import YawEstimator, YawEstimatorConfig

_kernels = load_kernels("trident_ekf.core._kernels")  # None: the numpy reference

GNSS_PAIRING = 0.05  # s: a fix and a velocity closer than this form one measurement
YAW_OBSERVABLE_SIGMA = math.radians(5.0)  # yaw sigma below which yaw counts as observed
AHRS_SETTLE = 5.0  # s of IMU before the yaw estimator's tilt may start the filter in motion
# The filter's yaw is reset to the yaw estimator's after this many GNSS velocity updates in a
# row fail the gate, when the two yaws differ by more than YAW_RESET_ANGLE and 3 sigma and
# no magnetometer heading has passed its gate within MAGNETOMETER_TRUSTED s.
YAW_RESET_REJECTIONS = 10
MAGNETOMETER_TRUSTED = 1.0
YAW_RESET_ANGLE = math.radians(15.0)
PHASES = ("waiting_for_data", "aligning", "running")
# Diagnostics level (diagnostic_msgs/DiagnosticStatus: 0 OK, 1 WARN, 2 ERROR) per status.
STATUS_LEVEL = {FilterStatus.NOMINAL: 0, FilterStatus.UNINITIALIZED: 1, FilterStatus.OUTAGE: 1,
                FilterStatus.DIVERGED: 2}
GNSS_ALARM_LEVEL = 2  # suspected GNSS spoofing: the position is inertial only, and why
# Inputs the session itself rejects (the filter counts the rest, by source); each optional
# source adds ``{source}_before_start`` and ``{source}_malformed``.
REJECTION_REASONS = (
    "imu_malformed",  # undecodable message
    "imu_nonfinite", "imu_saturated",  # core.plausibility
    "imu_out_of_order", "imu_duplicate", "imu_stamp_jump",  # core.input_clock
    "fix_no_fix", "fix_nonfinite", "fix_out_of_range", "fix_bad_covariance", "fix_superseded",
    "velocity_nonfinite", "velocity_bad_covariance", "velocity_without_fix",
    "velocity_unpaired",
)
INPUTS = ("imu", "fix", "velocity")
GNSS_SOURCES = (GnssPosition.name, GnssVelocity.name)
_POSE_INDEX = np.ix_([6, 7, 8, 0, 1, 2], [6, 7, 8, 0, 1, 2])  # position, attitude
# Truth-minus-estimate signs of the pose covariance: the position error of S is p_hat - p.
_POSE_SIGNS = np.block([[np.ones((3, 3)), -np.ones((3, 3))], [-np.ones((3, 3)), np.ones((3, 3))]])
_RATE_DIAGONAL = (np.arange(3, 6), np.arange(3, 6))  # the angular rate's in a twist covariance
_ATT_POS = np.ix_([0, 1, 2, 6, 7, 8], [0, 1, 2, 6, 7, 8])  # attitude, position
_VELOCITY_AND_BIASES = np.ix_([3, 4, 5, *range(9, 15)], [3, 4, 5, *range(9, 15)])


class Datum:
    """ENU 'map' frame at a geodetic point: ECEF <-> ENU for positions, vectors, covariances."""

    def __init__(self, latitude: float, longitude: float, height: float) -> None:
        self.geodetic = (latitude, longitude, height)
        self.origin = geodetic_to_ecef(latitude, longitude, height)
        self.enu_to_ecef = enu_to_ecef_rotation(latitude, longitude)
        x, y, z, w = quaternion.from_matrix(self.enu_to_ecef)
        self.ecef_to_enu_quaternion = (-x, -y, -z, w)

    def attitude_enu(self, q_body_to_ecef: FloatArray) -> FloatArray:
        """q body->ENU with a non-negative scalar part (a quaternion product: converting the
        rotation matrix back costs more than the rest of an output)."""
        q = np.array(multiply(self.ecef_to_enu_quaternion, q_body_to_ecef.tolist()))
        return -q if q[3] < 0.0 else q

    def attitude_ecef(self, q_body_to_enu: FloatArray) -> FloatArray:
        """q body->ECEF of a q body->ENU in this map frame (the inverse of attitude_enu)."""
        x, y, z, w = self.ecef_to_enu_quaternion
        return np.array(multiply((-x, -y, -z, w), q_body_to_enu.tolist()))

    def position_enu(self, p_ecef: FloatArray) -> FloatArray:
        """ENU coordinates (m): the tangent-plane rotation of p - origin (as ecef2enu)."""
        result: FloatArray = self.enu_to_ecef.T @ (np.asarray(p_ecef, dtype=float) - self.origin)
        return result


class OutputSchedule:
    """Decimates outputs on IMU stamps: one at the first stamp of each new slot of
    ``1 / rate_hz`` (the stamp clock divided into periods), from the second stamp on, so
    with a regular IMU whose stamps hit the slot edges every output stamp is a multiple of
    the output period. A slot before the latest one (the input clock stepped back: the
    session only integrates increasing stamps otherwise) is a new slot too."""

    def __init__(self, rate_hz: float) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0.0):
            raise ValueError(f"output rate must be finite and > 0 Hz, got {rate_hz!r}")
        self.period_ns = max(1, round(1e9 / rate_hz))
        self._last_slot: int | None = None

    def due(self, stamp_ns: int) -> bool:
        """True when ``stamp_ns`` is the first stamp seen in a slot after another one."""
        slot = stamp_ns // self.period_ns
        last = self._last_slot
        self._last_slot = slot
        return last is not None and slot != last


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
    detector on the IMU. yaw_estimator: the Gaussian-sum yaw estimator's settings; it runs on
    every IMU sample and GNSS velocity, gives the yaw of an in-motion start and resets the
    filter's yaw when the GNSS velocity innovations show it is wrong (``yaw_resets``).

    Phases (``phase``): waiting_for_data (no IMU sample or no fix yet), aligning (the
    initializer collects data), running (the filter runs). ``reset`` goes back to the start,
    ``set_pose`` starts (or restarts) the filter at a given pose, ``set_datum`` moves the map
    origin. ``events`` lists what a user should hear about (resets), for the node to log.
    """

    def __init__(self, filter_: ErrorStateFilter, initializer: Initializer,
                 datum: tuple[float, float, float] | None = None,
                 imu_rotation: ArrayLike | None = None,
                 gnss_receiver: GnssConfig | None = None,
                 yaw_estimator: YawEstimatorConfig | None = None) -> None:
        self.filter = filter_
        self._initializer_settings = copy.deepcopy(initializer)  # for ``reset``
        self.initializer = initializer
        self.gnss_receiver = gnss_receiver or GnssConfig()
        # The yaw estimator gets the velocity when the session pairs it: receiver-latency old.
        yaw_config = yaw_estimator or YawEstimatorConfig()
        if math.isnan(yaw_config.velocity_delay_s):
            yaw_config = replace(yaw_config, velocity_delay_s=self.gnss_receiver.delay_s)
        self.yaw_estimator = YawEstimator(yaw_config)
        self.datum = Datum(*datum) if datum is not None else None
        self.alignment = ""  # how the running filter started: static, in_motion, external
        self.yaw_source = ""  # where its initial yaw came from
        self._yaw_unknown = False  # started without a yaw: the yaw estimator sets it
        self._velocity_rejections = 0  # GNSS velocity updates failing the gate in a row
        self.resets = {"reset": 0, "set_pose": 0, "set_datum": 0, "yaw": 0}
        self.events: list[str] = []
        self._gnss_alarm_raised = False  # the filter's spoofing alarm, as last reported
        self._local_rotation = self.datum.enu_to_ecef if self.datum is not None else None
        self._fix_seen = False  # a usable fix has come (phase)
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
        self.input_clock = InputClock()  # stamp faults, clock changes, blackouts
        # Error-state rotation to ENU axes (estimate()); extra filter states stay as they are.
        self._to_enu = np.eye(filter_.covariance.shape[0])
        self._to_enu_datum: Datum | None = None  # the datum whose axes _to_enu holds

    @property
    def duration(self) -> float:
        """Span of the accepted IMU stamps so far, s."""
        return 0.0 if math.isnan(self._first_imu) else self._last_imu - self._first_imu

    @property
    def started(self) -> bool:
        """True once the initializer (or ``set_pose``) has started the filter."""
        return self.filter.initialized

    @property
    def phase(self) -> str:
        """waiting_for_data, aligning or running (see the class docstring)."""
        if self.filter.initialized:
            return "running"
        if self._last_imu == -math.inf or not self._fix_seen:
            return "waiting_for_data"
        return "aligning"

    # ----- commands -----------------------------------------------------------------------
    def reset(self) -> None:
        """Drop the state: back to waiting for data (the datum stays)."""
        self.filter.reset()
        self.initializer = copy.deepcopy(self._initializer_settings)
        self.yaw_estimator.reset()
        self._fix = self._velocity = None
        self._yaw_unknown = False
        self._velocity_rejections = 0
        self._last_imu = -math.inf
        self._first_imu = math.nan
        self.alignment = self.yaw_source = ""
        self.resets["reset"] += 1
        self.events.append("reset: waiting for data")

    def set_pose(self, stamp_ns: int, position_enu: ArrayLike, attitude_xyzw: ArrayLike,
                 covariance: ArrayLike, velocity_enu: ArrayLike | None = None) -> None:
        """Start (or restart) the filter at a pose in the ENU map frame: position (m),
        attitude q body->ENU, covariance 6x6 of (x, y, z, rot x, rot y, rot z) with the
        rotation error about the ENU axes (rad^2), velocity ENU (m/s; default: the running
        estimate, else zero). The bias estimates of a running filter stay. ValueError (with
        a message for the caller) when refused."""
        datum = self.datum
        if datum is None:
            raise ValueError("no map datum yet: set one (set_datum or the datum parameters) "
                             "or wait for the first GNSS fix")
        p_enu = np.asarray(position_enu, dtype=float).reshape(-1)
        q_enu = np.asarray(attitude_xyzw, dtype=float).reshape(-1)
        cov = np.asarray(covariance, dtype=float)
        if p_enu.shape != (3,) or q_enu.shape != (4,) or cov.size != 36:
            raise ValueError("set_pose needs a 3-vector position, an [x, y, z, w] quaternion "
                             "and a 6x6 covariance")
        cov = cov.reshape(6, 6)
        if not (np.all(np.isfinite(p_enu)) and np.all(np.isfinite(q_enu))
                and np.all(np.isfinite(cov)) and np.linalg.norm(q_enu) > 0.5):
            raise ValueError("set_pose values must be finite and the quaternion non-zero")
        if np.any(np.linalg.eigvalsh(0.5 * (cov + cov.T)) <= 0.0):
            raise ValueError("set_pose covariance must be symmetric positive definite")
        filter_ = self.filter
        R = datum.enu_to_ecef
        running = filter_.initialized
        if velocity_enu is not None:
            v = R @ np.asarray(velocity_enu, dtype=float).reshape(3)
        else:
            v = filter_.nominal()[1] if running else np.zeros(3)
        kept = _VELOCITY_AND_BIASES
        previous = filter_.conventional_covariance()[kept] if running else None
        t = stamp_ns * 1e-9
        if running:
            t = max(t, filter_.time)  # a pose for the past applies now: no rewind over it
        position = datum.origin + R @ p_enu
        q_enu = q_enu / np.linalg.norm(q_enu)
        filter_.initialize(t, datum.attitude_ecef(q_enu), v, position,
                           self.initializer.sigmas, filter_.gyro_bias, filter_.accel_bias)
        P = filter_.conventional_covariance()
        if previous is not None:
            P[kept] = previous
        # Rotation error about ENU axes -> phi^b; p_hat - p is minus (truth - estimate).
        T = np.zeros((6, 6))
        T[:3, 3:] = np.asarray(to_matrix(tuple(q_enu))).T
        T[3:, :3] = -R
        pose = T @ cov @ T.T
        P[_ATT_POS] = pose
        J = filter_.conventional_jacobian()
        filter_.covariance = J.T @ P @ J
        self.initializer.result = None
        self.alignment, self.yaw_source = "external", "external"
        self._yaw_unknown = False
        self.resets["set_pose"] += 1
        self.events.append("set_pose: filter (re)started at the given pose")

    def set_datum(self, latitude_deg: float, longitude_deg: float, height_m: float) -> None:
        """Move the ENU map origin (WGS-84 degrees, ellipsoidal m); ValueError when out of
        range. The estimate itself (ECEF) does not change, only its map coordinates."""
        values = (latitude_deg, longitude_deg, height_m)
        if not all(math.isfinite(c) for c in values):
            raise ValueError(f"datum must be finite, got {values}")
        if not (abs(latitude_deg) <= 90.0 and -180.0 <= longitude_deg <= 360.0
                and -1e4 <= height_m <= 1e5):
            raise ValueError("datum out of range: latitude [-90, 90] deg, longitude "
                             f"[-180, 360] deg, height [-10000, 100000] m; got {values}")
        self.datum = Datum(latitude_deg, longitude_deg, height_m)
        self.resets["set_datum"] += 1
        self.events.append(f"set_datum: map origin at ({latitude_deg:.7f}, "
                           f"{longitude_deg:.7f}, {height_m:.2f})")

    # ----- inputs -------------------------------------------------------------------------
    def imu(self, stamp_ns: int, gyro: FloatVector, accel: FloatVector) -> bool:
        """One IMU sample: stamp ns, rate rad/s and specific force m/s^2 (IMU axes, REP-145).

        Rejected (and counted) when a reading is non-finite or saturated (``core.plausibility``,
        in the IMU's own axes) or its stamp is not after the latest sample's or jumps ahead
        (``core.input_clock``), unless it completes a clock change: then the estimate (or the
        alignment) continues on the new time base. Returns True when the running filter
        integrated it (then an output may be due).
        """
        t = stamp_ns * 1e-9
        self.received["imu"] += 1
        config = self.filter.config
        reading = imu_fault(gyro, accel, config.gyro_range, config.accel_range)
        if reading is not None:
            self.rejected[f"imu_{reading}"] += 1
            self.input_clock.unusable(t, reading == "saturated", config.max_imu_stamp_jump)
            return False
        if self._rotation is not None:
            gyro, accel = self._rotation @ gyro, self._rotation @ accel
        running = self.filter.initialized
        latest = self.filter.time if running else self._last_imu
        stamp = None if latest == -math.inf else stamp_fault(t - latest,
                                                             config.max_imu_stamp_jump)
        if stamp is not None and not self._clock_changed(t, stamp):
            self.rejected[f"imu_{stamp}"] += 1
            return False
        if self._fix or self._velocity:
            self._flush_gnss(t)
        if running:
            self.filter.process_imu(t, gyro, accel)  # checked above: integrated
            self._detect_stillness(t, gyro, accel)
        else:
            self.initializer.add_imu(t, gyro, accel)
        if self._last_imu == -math.inf:
            self._first_imu = t
        else:
            self.yaw_estimator.imu(t - self._last_imu, gyro, accel)
        self._imu_interval = t - self._last_imu
        self._last_imu = t
        self.input_clock.usable(t)
        return running

    def _clock_changed(self, t: float, stamp: str) -> bool:
        """Whether a sample rejected for its ``stamp`` completes a clock change; if so the
        filter (or the alignment, restarted) continues on the new time base, to take it."""
        config = self.filter.config
        if stamp == "duplicate" or not self.input_clock.stamp_rejected(
                t, config.max_imu_interval, config.clock_change_samples):
            return False
        running = self.filter.initialized
        start = self.input_clock.change(self.filter.time if running else self._last_imu)
        step = self.input_clock.last_step
        if running:
            self.filter.restart_clock(start)
        else:  # the levelling window is on the old base: level again
            self.initializer = copy.deepcopy(self._initializer_settings)
        if self._stillness is not None:  # its window is on the old base
            self._stillness = StillnessDetector(self._stillness.config)
        self._last_zero_velocity = -math.inf
        self._first_imu += step
        self._last_imu = start
        self.events.append(f"IMU clock stepped {step:+.3f} s: continuing on the new time "
                           "base")
        return True

    def fix(self, stamp_ns: int, status: int, latitude_deg: float, longitude_deg: float,
            height_m: float, covariance_enu: ArrayLike, covariance_known: bool = True) -> bool:
        """One NavSatFix: status (< 0 is NO_FIX), WGS-84 degrees, ellipsoidal height m, ENU
        covariance (3x3 or 9 row-major, m^2; ``covariance_known`` False uses a default).
        Returns False, counting why, when it is not used."""
        self.received["fix"] += 1
        if status < 0:  # NO_FIX must not be fused
            self.rejected["fix_no_fix"] += 1
            return False
        position_fault = fix_fault(latitude_deg, longitude_deg, height_m)
        if position_fault is not None:  # core.plausibility
            self.rejected[f"fix_{position_fault}"] += 1
            return False
        covariance_enu = self.gnss_receiver.position(
            np.asarray(covariance_enu, dtype=float).reshape(3, 3) if covariance_known else None)
        if not valid_covariance(covariance_enu):
            self.rejected["fix_bad_covariance"] += 1
            return False
        t = stamp_ns * 1e-9 - self.gnss_receiver.delay_s  # when the fix was valid
        if self.datum is None:
            self.datum = Datum(latitude_deg, longitude_deg, height_m)
        self._flush_gnss(t)
        rotation = enu_to_ecef_rotation(latitude_deg, longitude_deg)
        self._local_rotation = rotation
        self._fix_seen = True
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
        if not valid_covariance(covariance):
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
        if not self.filter.initialized and isinstance(aiding, Magnetometer):
            return self._align_with_magnetometer(stamp_ns, fields)
        if not self.filter.initialized or (aiding.needs_datum and self.datum is None):
            self.rejected[f"{source}_before_start"] += 1
            return False
        if aiding.needs_datum:
            fields["datum"] = self.datum
        try:
            m: Measurement = aiding.measurement(  # type: ignore[attr-defined]
                stamp_ns * 1e-9 - aiding.delay_s, **fields)
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

    def _align_with_magnetometer(self, stamp_ns: int, fields: dict[str, Any]) -> bool:
        """A magnetometer sample before the start goes to the initializer (initial yaw)."""
        source = self.filter.sources[Magnetometer.name]
        try:
            m: Measurement = source.measurement(stamp_ns * 1e-9, **fields)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            self.rejected[f"{source.name}_malformed"] += 1
            return False
        field = m.value if self._rotation is None else self._rotation @ m.value
        self.initializer.add_magnetometer(m.time, field)
        return True

    # ----- input checks and GNSS pairing ---------------------------------------------------
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
        if v is not None and v_cov is not None and self._local_rotation is not None:
            to_enu = self._local_rotation.T
            horizontal = (to_enu @ v_cov @ to_enu.T)[:2, :2]
            self.yaw_estimator.velocity(to_enu @ v, math.sqrt(float(np.trace(horizontal)) / 2))
        if self.filter.initialized:
            self.filter.process_gnss(fix.time, fix.value, fix.covariance, v, v_cov)
            updates = self.filter.drain_updates()
            self._updates += updates
            self._check_yaw(updates)
            self._note_gnss_alarm()
            return
        if self.initializer.add_gnss(fix.time, fix.value, v, self._motion_attitude(),
                                     self._earth_field(fix.value, fix.time)):
            start = self.initializer.result
            assert start is not None  # add_gnss returned True: the initial state is set
            # The fix is older than the IMU (receiver latency): carry it to the latest IMU
            # stamp, where the attitude is, so that no IMU interval is skipped.
            lag = max(0.0, self._last_imu - start.time)
            self.filter.initialize(start.time + lag, start.attitude, start.velocity,
                                   start.position + lag * start.velocity, start.sigmas,
                                   start.gyro_bias)
            self.alignment, self.yaw_source = start.alignment, start.yaw_source
            self._yaw_unknown = start.yaw_source == "unknown"
            self._velocity_rejections = 0
            self.events.append(f"started: {start.alignment} alignment, yaw from "
                               f"{start.yaw_source}")

    def _note_gnss_alarm(self) -> None:
        """An event when the filter's spoofing alarm is raised or cleared."""
        alarm = self.filter.gnss_alarm
        if bool(alarm) == self._gnss_alarm_raised:
            return
        self._gnss_alarm_raised = bool(alarm)
        self.events.append(f"t={self.filter.time:.2f} s: " + (
            alarm or "GNSS position consistent again: spoofing alarm cleared, fixes fused"))

    def _motion_attitude(self) -> MotionAttitude | None:
        """The yaw estimator's attitude once its AHRS has settled (yaw sigma infinite until
        its yaw has converged)."""
        if self.duration < AHRS_SETTLE:
            return None
        estimator = self.yaw_estimator
        sigma = estimator.yaw_sigma if estimator.converged else math.inf
        return MotionAttitude(estimator.attitude(), sigma)

    def _earth_field(self, position: FloatArray, time: float) -> FloatArray | None:
        """The Earth field (ECEF, T) for a magnetometer heading, with a magnetometer."""
        source = self.filter.sources.get(Magnetometer.name)
        if not isinstance(source, Magnetometer):
            return None
        return source.earth_field(position, time)[0]

    def _yaw_sigma(self) -> float:
        """The filter's yaw sigma (rad): its attitude error about the local vertical."""
        q, _, p = self.filter.nominal()
        up = quaternion.to_matrix(q).T @ (p / np.linalg.norm(p))
        P = self.filter.conventional_covariance()[ATT, ATT]
        return math.sqrt(float(up @ P @ up))

    def _magnetometer_trusted(self) -> bool:
        """True while magnetometer updates pass their gate (then yaw is observed)."""
        status = self.filter.aid_status.get(Magnetometer.name)
        return (status is not None and self.filter.time - status.last_time <= MAGNETOMETER_TRUSTED
                and status.last_test_ratio <= 1.0)

    def _check_yaw(self, updates: list[UpdateResult]) -> None:
        """Reset the filter's yaw to the converged yaw estimator's when the filter started
        without a yaw, or when its GNSS velocity innovations keep failing the gate while
        the two yaws disagree."""
        for update in updates:
            if update.source == GnssVelocity.name:
                self._velocity_rejections = 0 if update.accepted else (
                    self._velocity_rejections + 1)
        estimator = self.yaw_estimator
        if not estimator.converged:
            return
        q = self.filter.nominal()[0]
        datum = self.datum
        assert datum is not None  # running: the first fix has set it
        difference = wrap(estimator.yaw - yaw_of(datum.attitude_enu(q)))
        disagree = abs(difference) > max(YAW_RESET_ANGLE, 3.0 * estimator.yaw_sigma)
        failing = (self._velocity_rejections >= YAW_RESET_REJECTIONS and disagree
                   and not self._magnetometer_trusted())
        if self._yaw_unknown and not disagree and self._yaw_sigma() < estimator.yaw_sigma:
            self._yaw_unknown = False  # the filter has found the yaw itself, and agrees
        if not (self._yaw_unknown or failing):
            return
        self.filter.reset_yaw(difference, estimator.yaw_sigma)
        self._yaw_unknown = False
        self._velocity_rejections = 0
        self.resets["yaw"] += 1
        self.events.append(f"t={self.filter.time:.2f} s: yaw reset by "
                           f"{math.degrees(difference):+.1f} deg to the yaw "
                           f"estimator's {math.degrees(estimator.yaw):.1f} +- "
                           f"{math.degrees(estimator.yaw_sigma):.1f} deg")

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
        # The rate is a reading plus the bias estimate: bias variance plus the white noise
        # of one sample (density^2 / interval).
        interval = self._imu_interval if self._imu_interval > 0.0 else 0.01
        rate_variance = filter_.config.gyro_noise**2 / interval
        if _kernels is not None:
            return _compiled_estimate(_kernels, filter_, q_e, v_e, p_e, datum, rate_variance)
        R = datum.enu_to_ecef
        C_eb = np.array(to_matrix(tuple(q_e)))
        C_nb = R.T @ C_eb
        # One congruence gives every block: the conventional error [phi^b, v_hat - v,
        # p_hat - p, biases] with attitude and ECEF vectors turned to ENU axes.
        to_enu = self._to_enu
        to_enu[ATT, ATT] = C_nb
        if self._to_enu_datum is not datum:
            to_enu[VEL, VEL] = to_enu[POS, POS] = R.T
            self._to_enu_datum = datum
        M = to_enu @ filter_.conventional_jacobian()
        S = M @ filter_.covariance @ M.T
        # Pose error truth minus estimate: phi already is (C = C_hat (I + [phi x])), the
        # position error p_hat - p changes sign, which flips the cross blocks.
        pose_cov = S[_POSE_INDEX] * _POSE_SIGNS
        twist_cov = np.zeros((6, 6))
        twist_cov[:3, :3] = C_nb.T @ S[VEL, VEL] @ C_nb
        twist_cov[3:, 3:] = S[BG, BG]
        twist_cov[_RATE_DIAGONAL] += rate_variance
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
        result["imu_clock_changes"] = self.input_clock.changes
        return result

    def diagnostics(self, update: UpdateResult | None = None, imu_silence_s: float = 0.0
                    ) -> tuple[int, str, dict[str, str]]:
        """(level 0 OK / 1 WARN / 2 ERROR, summary, key/values) describing the session:
        status, the GNSS update ``update`` (default the latest), biases and sigmas, yaw
        sigma (yaw observability), every counter and the messages received per input.
        An IMU input fault (``core.input_clock``: blackout, clock change, saturation) raises
        the level and leads the summary; ``imu_silence_s`` is the caller's own clock since
        the last usable IMU sample (the node's: a blackout without any message)."""
        status = self.filter.status
        update = update or self.last_update
        estimator = self.yaw_estimator
        values = {"status": status.value, "phase": self.phase, "alignment": self.alignment,
                  "yaw_source": self.yaw_source,
                  "yaw_estimator_yaw_deg": f"{math.degrees(estimator.yaw):.2f}",
                  "yaw_estimator_sigma_deg": f"{math.degrees(estimator.yaw_sigma):.2f}",
                  "yaw_estimator_converged": str(estimator.converged).lower()}
        values.update({f"resets_{kind}": str(count) for kind, count in self.resets.items()})
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
        summary = status.value if self.filter.initialized else self.phase.replace("_", " ")
        level = STATUS_LEVEL[status]
        clock = self.input_clock
        fault = clock.fault(self.filter.config.imu_timeout, imu_silence_s)
        values.update(input_fault=fault.reason if fault else "",
                      imu_blackout_s=f"{max(clock.blackout, imu_silence_s):.3f}",
                      imu_last_clock_step_s=f"{clock.last_step:.3f}")
        if fault is not None:
            level = max(level, fault.level)
            summary = f"{fault.reason}; {summary}"
        alarm = self.filter.gnss_alarm if self.filter.initialized else ""
        values["gnss_alarm"] = alarm  # suspected spoofing (core.divergence), "" if none
        if alarm:
            level = max(level, GNSS_ALARM_LEVEL)
            summary = f"{alarm}; {summary}"
        return level, summary, values


def _compiled_estimate(kernels: ModuleType, filter_: ErrorStateFilter, q_e: FloatArray,
                       v_e: FloatArray, p_e: FloatArray, datum: Datum,
                       rate_variance: float) -> dict[str, FloatArray]:
    """``EstimationSession.estimate`` in one kernel call: every array is a view of one
    fresh buffer (an estimate a caller keeps is not overwritten by the next)."""
    out = np.empty(kernels.ESTIMATE_SIZE)
    kernels.estimate_outputs(filter_.covariance, q_e, v_e, p_e, datum.enu_to_ecef, datum.origin,
                             datum.ecef_to_enu_quaternion, filter_.last_omega, rate_variance,
                             filter_.body_axis_errors, out)
    return {
        "position": out[0:3], "velocity": out[3:6], "attitude": out[6:10],
        "linear_body": out[10:13], "angular_body": out[13:16],
        "position_cov": out[16:25].reshape(3, 3), "velocity_cov": out[25:34].reshape(3, 3),
        "attitude_cov": out[34:43].reshape(3, 3), "pose_cov": out[43:79].reshape(6, 6),
        "twist_cov": out[79:115].reshape(6, 6),
        "gyro_bias": np.array(filter_.gyro_bias), "accel_bias": np.array(filter_.accel_bias),
        "bias_sigma": out[115:121],
    }
