"""GNSS receiver model: antenna position and velocity fixes with realistic errors.

Each fix reports the antenna (``antenna_position_m`` in base_link) in the map frame (ENU
at ``datum``, REP-105) and as WGS-84 geodetic coordinates (degrees, ellipsoidal height,
as ``sensor_msgs/NavSatFix``). Position error = white noise + a first-order Gauss-Markov
error (slowly varying atmosphere and multipath), horizontal and vertical sigmas apart;
velocity error is white. The Gauss-Markov part is discretised exactly over the actual
interval between calls, so irregular calls (or none during an outage) keep its law.

``time_s`` of a fix is the epoch it is valid at; a receiver delivers it ``latency_s``
later, which the caller applies. Inside an outage (scheduled in the config or injected)
a fix has ``fix=False``, NaN position and velocity and all-zero covariances (ROS:
unknown); consumers must honour the flag (docs/conventions.md §2.4: NO_FIX).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pymap3d
from numpy.typing import ArrayLike, NDArray

from mav_geometry import scalar
from mav_geometry.kernels import load_kernels
from variational_sim.sensors._validation import (
    require_finite_vector,
    require_in_range,
    require_non_negative,
    require_positive,
)
from variational_sim.sensors.base import Fault, Output, Sensor, SensorTruth, stamp
from variational_sim.sensors.noise import StandardNormalStream, gauss_markov_coefficients

Datum = tuple[float, float, float]
_kernels = load_kernels("variational_sim.integrators._kernels")
_WGS84 = pymap3d.Ellipsoid.from_name("wgs84")
# sensor_msgs/NavSatStatus and NavSatFix constants (fill writes plain numbers).
STATUS_NO_FIX, STATUS_FIX, SERVICE_GPS, COVARIANCE_TYPE_DIAGONAL_KNOWN = -1, 0, 1, 2


def enu_to_geodetic(position_enu: ArrayLike, datum: Datum) -> tuple[float, float, float]:
    """(latitude deg, longitude deg, ellipsoidal height m) of an ENU point (m) about ``datum``
    (latitude deg, longitude deg, ellipsoidal height m), WGS-84."""
    east, north, up = np.asarray(position_enu, dtype=float).tolist()
    if _kernels is not None:  # the same arithmetic without numpy's per-call cost (~0.5 ms)
        return _kernels.enu_to_geodetic(  # type: ignore[no-any-return]
            east, north, up, *datum, _WGS84.semimajor_axis, _WGS84.semiminor_axis)
    latitude, longitude, height = pymap3d.enu2geodetic(east, north, up, *datum)
    return float(latitude), float(longitude), float(height)


def geodetic_to_enu(latitude_deg: float, longitude_deg: float, height_m: float,
                    datum: Datum) -> NDArray[np.float64]:
    """ENU coordinates (m) about ``datum`` of a WGS-84 geodetic point (deg, deg, m)."""
    return np.array(
        [float(c) for c in pymap3d.geodetic2enu(latitude_deg, longitude_deg, height_m, *datum)]
    )


@dataclass(frozen=True)
class GnssConfig:
    """GNSS error model, antenna mount, map datum and outage schedule (units: m, s, Hz, deg).

    ``rate_hz`` and ``latency_s`` are for the caller's scheduling: it measures every
    ``1 / rate_hz`` s and delivers each fix ``latency_s`` after its ``time_s``.

    ``horizontal_sigma_m``/``vertical_sigma_m``: white position noise per axis;
    ``correlated_*_sigma_m``: stationary sigma of the Gauss-Markov position error with
    correlation time ``correlation_time_s``; ``velocity_sigma_mps``: white velocity noise
    per axis; ``antenna_position_m``: antenna in base_link; ``datum``: latitude (deg),
    longitude (deg) and ellipsoidal height (m) of the ENU map origin; ``outages``:
    ``((start_s, end_s), ...)`` in time order, non-overlapping, outage while
    ``start_s <= t < end_s``; ``publish_during_outage``: fixes flagged no-fix (True) or
    none (False, the caller checks ``GnssModel.in_outage``).
    """

    rate_hz: float = 10.0
    latency_s: float = 0.05
    horizontal_sigma_m: float = 0.5
    vertical_sigma_m: float = 1.0
    correlated_horizontal_sigma_m: float = 0.1
    correlated_vertical_sigma_m: float = 0.2
    correlation_time_s: float = 60.0
    velocity_sigma_mps: float = 0.05
    antenna_position_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    datum: Datum = (47.3977, 8.5456, 488.0)
    outages: tuple[tuple[float, float], ...] = ()
    publish_during_outage: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        require_positive(owner, "rate_hz", self.rate_hz)
        require_positive(owner, "correlation_time_s", self.correlation_time_s)
        for name in ("latency_s", "horizontal_sigma_m", "vertical_sigma_m",
                     "correlated_horizontal_sigma_m", "correlated_vertical_sigma_m",
                     "velocity_sigma_mps"):
            require_non_negative(owner, name, getattr(self, name))
        require_finite_vector(owner, "antenna_position_m", self.antenna_position_m, 3)
        require_finite_vector(owner, "datum", self.datum, 3)
        require_in_range(owner, "datum[0] (latitude_deg)", self.datum[0], -90.0, 90.0)
        require_in_range(owner, "datum[1] (longitude_deg)", self.datum[1], -180.0, 180.0)
        if not isinstance(self.publish_during_outage, bool):
            raise ValueError(f"{owner}.publish_during_outage = {self.publish_during_outage!r} "
                             "is invalid: allowed True or False")
        previous_end = -math.inf
        for index, window in enumerate(self.outages):
            field = f"outages[{index}]"
            require_finite_vector(owner, field, window, 2)
            start, end = window
            if not end > start:
                raise ValueError(f"{owner}.{field} = {window!r} is invalid: allowed end > start")
            if start < previous_end:
                raise ValueError(f"{owner}.{field} = {window!r} is invalid: allowed start >= "
                                 f"the previous outage's end {previous_end} (time order, "
                                 "no overlap)")
            previous_end = end


@dataclass(frozen=True)
class GnssFix:
    """One receiver output, valid at ``time_s`` (s).

    Geodetic WGS-84 antenna position (deg, deg, ellipsoidal m), the same point in the map
    frame ``position_enu`` (m), ``velocity_enu`` (m/s), and the 3x3 ENU covariances the
    receiver reports (m^2, (m/s)^2: white plus correlated variances). ``fix`` False: no
    fix, NaN values and zero (unknown) covariances; ``published`` False: the receiver says
    nothing (an outage with ``publish_during_outage`` off).
    """

    time_s: float
    latitude_deg: float
    longitude_deg: float
    height_m: float
    position_enu: NDArray[np.float64]
    velocity_enu: NDArray[np.float64]
    position_covariance_enu: NDArray[np.float64]
    velocity_covariance_enu: NDArray[np.float64]
    fix: bool
    published: bool = True


class GnssModel(Sensor):
    """Produces fixes (``GnssFix``) from rigid-body truth, called at increasing times."""

    # Standard normals per fix: correlated drive (0:3), white position (3:6), velocity (6:9).
    _NORMALS_PER_FIX = 9
    name: ClassVar[str] = "gnss"
    fault_kinds: ClassVar[dict[str, int]] = {"outage": 0, "no_fix": 0, "position_offset": 3,
                                             "accuracy_scale": 1}
    """``outage``: no fix (published as NO_FIX or not at all, ``publish_during_outage``);
    ``no_fix``: NO_FIX messages; ``position_offset``: ENU offset (m) added to the position
    (spoofing: the reported accuracy is unchanged); ``accuracy_scale``: white and correlated
    position sigmas and the reported covariance times this factor (> 0)."""

    def __init__(self, config: GnssConfig, rng: np.random.Generator) -> None:
        super().__init__()
        self._config = config
        self._normals = StandardNormalStream(rng, self._NORMALS_PER_FIX, block_rows=64)
        self._use_sigmas(config)
        self._antenna = tuple(float(c) for c in config.antenna_position_m)
        self.reset()

    def set_error_model(self, config: GnssConfig) -> None:
        """White, correlated and velocity sigmas, correlation time, outage schedule and
        ``publish_during_outage`` of ``config`` from the next fix on; the correlated error
        keeps its current value. The antenna and the datum are the model's own: they must
        not change (ValueError)."""
        kept = ("antenna_position_m", "datum")
        changed = [name for name in kept if getattr(config, name) != getattr(self._config, name)]
        if changed:
            raise ValueError(f"GnssModel.set_error_model: {changed} cannot change")
        self._config = config
        self._use_sigmas(config)

    def _use_sigmas(self, config: GnssConfig) -> None:
        """Per-axis white and correlated sigmas and the covariances reported with a fix."""
        horizontal, vertical = config.horizontal_sigma_m, config.vertical_sigma_m
        self._white_sigma = (horizontal, horizontal, vertical)
        correlated_h = config.correlated_horizontal_sigma_m
        self._correlated_sigma = (correlated_h, correlated_h, config.correlated_vertical_sigma_m)
        self._position_covariance = np.diag(
            [w * w + c * c for w, c in zip(self._white_sigma, self._correlated_sigma,
                                           strict=True)])
        self._velocity_covariance = np.eye(3) * config.velocity_sigma_mps**2

    @property
    def correlated_error_enu(self) -> NDArray[np.float64]:
        """Current Gauss-Markov position error (m, ENU); zero before the first fix."""
        return np.array(self._correlated)

    def reset(self) -> None:
        """Forget the correlated error (redrawn from its stationary law at the next fix), the
        last fix time and injected faults; the generator continues."""
        self._correlated = [0.0, 0.0, 0.0]
        self._last_time_s: float | None = None
        self.faults = []

    def inject_outage(self, start_s: float, duration_s: float) -> None:
        """No fix from ``start_s`` (s) for ``duration_s`` (s), on top of the scheduled ones."""
        if not math.isfinite(start_s):
            raise ValueError(f"GnssModel.inject_outage: start_s = {start_s!r} must be finite")
        require_positive("GnssModel.inject_outage", "duration_s", duration_s)
        self.inject(Fault("outage", start_s, start_s + duration_s))

    def in_outage(self, time_s: float) -> bool:
        """Whether ``time_s`` (s) falls in a scheduled or injected outage."""
        return (any(start <= time_s < end for start, end in self._config.outages)
                or bool(self.active_faults(time_s, "outage")))

    @property
    def outputs(self) -> tuple[Output, ...]:
        return (Output("gnss/fix", "sensor_msgs/msg/NavSatFix", "gnss_link"),
                Output("gnss/vel", "geometry_msgs/msg/TwistWithCovarianceStamped", "gnss_link"))

    def measure(self, truth: SensorTruth) -> GnssFix:
        return self.measure_at(truth.time_s, truth.rotation_rows, truth.position_enu,
                               truth.velocity_enu, truth.angular_velocity_body)

    def fill(self, reading: GnssFix, messages: Sequence[Any]) -> tuple[bool, ...]:
        """NavSatFix (WGS-84 deg, ellipsoid m, diagonal ENU covariance, NO_FIX without a fix)
        and, with a fix, the ENU velocity with its covariance in the linear block."""
        fix_message, velocity_message = messages
        stamp(fix_message.header, reading.time_s)
        fix_message.status.status = STATUS_FIX if reading.fix else STATUS_NO_FIX
        fix_message.status.service = SERVICE_GPS
        fix_message.latitude = reading.latitude_deg
        fix_message.longitude = reading.longitude_deg
        fix_message.altitude = reading.height_m
        fix_message.position_covariance = _row_major(reading.position_covariance_enu)
        fix_message.position_covariance_type = COVARIANCE_TYPE_DIAGONAL_KNOWN
        if not reading.fix:
            return (reading.published, False)
        stamp(velocity_message.header, reading.time_s)
        linear = velocity_message.twist.twist.linear
        linear.x, linear.y, linear.z = reading.velocity_enu.tolist()
        covariance = np.zeros((6, 6))
        covariance[:3, :3] = reading.velocity_covariance_enu
        velocity_message.twist.covariance = covariance.ravel().tolist()
        return (True, True)

    def report_values(self) -> dict[str, float]:
        east, north, up = self._correlated
        return {"correlated_error_east_m": east, "correlated_error_north_m": north,
                "correlated_error_up_m": up}

    def measure_at(self, time_s: float, rotation: ArrayLike, position_enu: ArrayLike,
                   velocity_enu: ArrayLike, angular_velocity_body: ArrayLike) -> GnssFix:
        """The fix at ``time_s`` (s) for base_link truth: ``rotation`` 3x3 base_link -> ENU,
        ``position_enu`` (m) and ``velocity_enu`` (m/s) of the base_link origin,
        ``angular_velocity_body`` (rad/s, base_link). Raises ValueError if time goes back.
        """
        interval_s = self._interval_since_last_fix(time_s)
        n = self._normals.next_row()
        self._advance_correlated(interval_s, n[0:3])
        self._last_time_s = time_s
        if self.in_outage(time_s):
            return self._no_fix(time_s, self._config.publish_during_outage)
        if self.faults and self.active_faults(time_s, "no_fix"):
            return self._no_fix(time_s, True)
        scale = math.prod(f.value[0] for f in self.active_faults(time_s, "accuracy_scale"))
        R = np.asarray(rotation, dtype=float)
        antenna = self._antenna
        omega = np.asarray(angular_velocity_body, dtype=float).tolist()
        lever_velocity = scalar.cross(omega, antenna)
        antenna_position = np.asarray(position_enu, dtype=float) + R @ antenna
        antenna_velocity = np.asarray(velocity_enu, dtype=float) + R @ lever_velocity
        position = antenna_position + scale * (np.array(self._correlated)
                                               + np.multiply(self._white_sigma, n[3:6]))
        for fault in self.active_faults(time_s, "position_offset"):
            position = position + fault.value
        velocity = antenna_velocity + self._config.velocity_sigma_mps * np.array(n[6:9])
        latitude, longitude, height = enu_to_geodetic(position, self._config.datum)
        return GnssFix(time_s, latitude, longitude, height, position, velocity,
                       scale * scale * self._position_covariance,
                       self._velocity_covariance.copy(), True)

    def _interval_since_last_fix(self, time_s: float) -> float | None:
        """Seconds since the previous call (None for the first); rejects bad times."""
        if not math.isfinite(time_s):
            raise ValueError(f"GnssModel.measure: time_s = {time_s!r} must be finite")
        if self._last_time_s is None:
            return None
        if time_s < self._last_time_s:
            raise ValueError(f"GnssModel.measure: time_s = {time_s} s is before the previous "
                             f"fix at {self._last_time_s} s (times must not decrease)")
        return time_s - self._last_time_s

    def _advance_correlated(self, interval_s: float | None, drive: list[float]) -> None:
        """Step the Gauss-Markov error over ``interval_s`` (s) with standard normals ``drive``;
        ``None`` draws it from the stationary law (first fix after construction or reset)."""
        if interval_s is None:
            phi, scale = 0.0, 1.0
        else:
            phi, scale = gauss_markov_coefficients(interval_s, self._config.correlation_time_s)
        self._correlated = [phi * e + scale * sigma * d for e, sigma, d in
                            zip(self._correlated, self._correlated_sigma, drive, strict=True)]

    @staticmethod
    def _no_fix(time_s: float, published: bool) -> GnssFix:
        unknown = np.full(3, math.nan)
        return GnssFix(time_s, math.nan, math.nan, math.nan, unknown, unknown.copy(),
                       np.zeros((3, 3)), np.zeros((3, 3)), False, published)


def _row_major(matrix: NDArray[np.float64]) -> list[float]:
    values: list[float] = matrix.ravel().tolist()
    return values
