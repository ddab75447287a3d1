"""Magnetometer: the Earth field in body axes, three-axis or heading only (trident-ekf.md
§5.11), with hard-iron bias states and a disturbance check.

Earth field: ``field_ned_T`` when given, otherwise the World Magnetic Model
(``core.earth_field``) at the start position and the flight's date (``model_year``, or
the stamps' date when they are POSIX times, or today). It is held constant in ECEF.

Both filters right-multiply the attitude error (C = C_hat (I + [phi x])), so the models
depend only on the attitude rows and hold for either error convention:
- "3d": m^b = C^T m^e + b_hi + noise; residual C_hat^T m^e + b_hat - m^b has
  H = [-[(C_hat^T m^e) x] on phi, I on the hard-iron error b_hat - b].
- "heading": the field, turned to the local level frame with the estimated attitude, gives
  the heading error about the local up axis u: the residual is the angle from that
  horizontal field to the model's, about u: u^T C_hat phi + tan(I) h^T C_hat phi to first
  order (one row; h the unit horizontal model field, I the inclination; the row is taken
  at the model field, so it does not depend on the sample's noise). A field distorted in
  strength does not enter at all.

A sample whose (hard-iron corrected) strength or inclination differs from the model by
more than the tolerances is rejected as ``disturbed`` (motors, steel, power lines)
instead of being fused.
"""

from __future__ import annotations

import math
import time as wall_clock
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.settings import check_settings, setting
from trident_ekf.core.earth import (
    LocalGeodetic,
    ecef_to_geodetic,
    ned_to_ecef,
)
from trident_ekf.core.earth_field import decimal_year, wmm_field_ned, wmm_model_name
from trident_ekf.core.measurements.base import (
    AidingSource,
    AugmentedState,
    Linearization,
    Measurement,
    as_covariance,
    as_vector,
)
from trident_ekf.core.skew import skew

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter

ATT = slice(0, 3)
POSIX_2000 = 946684800.0  # s: stamps later than this are taken as POSIX times
DAY_S = 86400.0


def _today_utc() -> float:
    """Midnight UTC of today (POSIX s): the date of a flight whose stamps carry none. Not the
    current second, so that every replay of such a log on one day gives the same numbers."""
    return math.floor(wall_clock.time() / DAY_S) * DAY_S
NAN3 = (math.nan, math.nan, math.nan)
_kernels = load_kernels("trident_ekf.core._kernels")  # None: the numpy reference


@dataclass(frozen=True)
class MagnetometerConfig:
    mode: str = setting("heading", "fuse the heading only (robust to a distorted field) or "
                        "all three axes (with hard-iron states)", choices=("heading", "3d"))
    field_ned_T: tuple[float, float, float] = setting(  # noqa: N815 (SI unit T)
        NAN3, "Earth field north/east/down at the site; NaN = World Magnetic Model at the "
        "start position", "T", -1e-4, 1e-4, allow_nan=True)
    model_year: float = setting(
        math.nan, "decimal year for the World Magnetic Model; NaN = the stamps' date if they "
        "are POSIX times, else today (at 00:00 UTC)", "year", 2010.0, 2030.0, allow_nan=True)
    noise_sigma_T: float = setting(  # noqa: N815 (SI unit T)
        1e-6, "noise per axis when the message has no covariance", "T", 1e-10, 1e-4)
    heading_sigma_deg: float = setting(5.0, "heading noise (heading mode)", "deg", 0.01, 90.0)
    delay_s: float = setting(
        0.0, "how much older a reading is than its stamp (sensor filtering, bus and driver "
        "latency; applied through the filter history, so at most history_length)", "s", 0.0,
        1.0)
    hard_iron_sigma_T: float = setting(  # noqa: N815 (SI unit T)
        5e-6, "initial sigma of each hard-iron bias state (3d mode)", "T", 1e-9, 1e-4)
    hard_iron_walk: float = setting(
        1e-8, "hard-iron bias random walk", "T/sqrt(s)", 0.0, 1e-5)
    strength_tolerance: float = setting(
        0.25, "reject as disturbed when |strength / model - 1| exceeds this", "", 0.01, 10.0)
    inclination_tolerance_deg: float = setting(
        10.0, "reject as disturbed when the inclination differs from the model by more",
        "deg", 0.1, 180.0)

    def __post_init__(self) -> None:
        check_settings(self)
        finite = [math.isfinite(c) for c in self.field_ned_T]
        if any(finite) and not (all(finite) and any(self.field_ned_T)):
            raise ValueError("field_ned_T must be three finite numbers (T, not all zero) or "
                             f"all NaN, got {self.field_ned_T!r}")


def _inclination(field_enu: FloatArray) -> float:
    """Inclination (rad, positive down) of a field in ENU axes."""
    return math.atan2(-float(field_enu[2]), math.hypot(float(field_enu[0]), float(field_enu[1])))


class Magnetometer(AidingSource):
    """Calibrated flux density in body axes (T)."""

    name: ClassVar[str] = "magnetometer"
    reasons: ClassVar[tuple[str, ...]] = ("disturbed",)
    body_frame: ClassVar[bool] = True  # sampled in the IMU frame
    config: MagnetometerConfig

    def __init__(self, config: MagnetometerConfig | None = None) -> None:
        super().__init__(config or MagnetometerConfig())
        self.three_axis = self.config.mode == "3d"
        self.dof = 3 if self.three_axis else 1
        self.field_ecef = np.zeros(3)
        self.field_origin = ""  # where the Earth field came from (for reports)
        self._geodetic = LocalGeodetic()

    @property
    def augmented(self) -> tuple[AugmentedState, ...]:
        if not self.three_axis:
            return ()
        config = self.config
        return (AugmentedState.random_walk((config.hard_iron_sigma_T,) * 3,
                                           (config.hard_iron_walk,) * 3),)

    def measurement(self, time: float, field_T: FloatArray,
                    covariance_T2: FloatArray | None = None) -> Measurement:
        """A sample (body axes, T) with its 3x3 covariance (None or all zeros: the default)."""
        field = as_vector(field_T, 3, "field_T")
        if covariance_T2 is None or not np.any(covariance_T2):
            covariance = np.eye(3) * self.config.noise_sigma_T**2
        else:
            covariance = as_covariance(covariance_T2, 3, "covariance_T2")
        return Measurement(self.name, float(time), field, covariance)

    def start(self, filter_: ErrorStateFilter) -> None:
        self.field_ecef, self.field_origin = self.earth_field(filter_.nominal()[2],
                                                              filter_.time)

    def earth_field(self, position_ecef: FloatArray, time: float) -> tuple[FloatArray, str]:
        """(Earth field in ECEF axes (T), where it came from) at a position and a time (s)."""
        latitude, longitude, height = ecef_to_geodetic(position_ecef)
        given = self.config.field_ned_T
        if all(math.isfinite(c) for c in given):
            return ned_to_ecef(np.array(given), latitude, longitude), "configured field_ned_T"
        year = self.config.model_year
        if not math.isfinite(year):
            year = decimal_year(time if time > POSIX_2000 else _today_utc())
        field_ned = wmm_field_ned(latitude, longitude, height, year)
        return (ned_to_ecef(field_ned, latitude, longitude),
                f"{wmm_model_name(year)} at {year:.2f}")

    def _corrected(self, filter_: ErrorStateFilter, m: Measurement) -> FloatArray:
        """The sample minus the hard-iron estimate (3d mode)."""
        if not self.three_axis:
            return m.value
        result: FloatArray = m.value - np.array(filter_.augmented[self.name])
        return result

    def check(self, filter_: ErrorStateFilter, m: Measurement) -> str | None:
        q, _, p = filter_.nominal()
        reference = float(np.linalg.norm(self.field_ecef))
        field = self._corrected(filter_, m)
        if abs(float(np.linalg.norm(field)) / reference - 1.0) > self.config.strength_tolerance:
            return "disturbed"
        self._geodetic(p)
        if _kernels is not None and filter_.compiled:  # one C call; numpy: the reference
            _, measured, model = _kernels.magnetometer_level(q, self._geodetic.axes,
                                                             self.field_ecef, field, np.empty(3))
        else:
            to_enu = self._geodetic.axes.T
            measured = _inclination(to_enu @ quaternion.to_matrix(q) @ field)
            model = _inclination(to_enu @ self.field_ecef)
        if abs(measured - model) > math.radians(self.config.inclination_tolerance_deg):
            return "disturbed"
        return None

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        q, _, p = filter_.nominal()
        H = np.zeros((self.dof, filter_.state_dim))
        sigma = math.radians(self.config.heading_sigma_deg)
        if not self.three_axis and _kernels is not None and filter_.compiled:
            self._geodetic(p)  # one C call; the numpy code below is the reference
            residual, _, _ = _kernels.magnetometer_level(q, self._geodetic.axes,
                                                         self.field_ecef, m.value, H[0, ATT])
            return Linearization(np.array([residual]), H, np.array([[sigma * sigma]]))
        C = filter_.attitude_matrix()
        if self.three_axis:
            predicted = C.T @ self.field_ecef
            H[:, ATT] = -skew(predicted)
            H[:, filter_.state_slice(self.name)] = np.eye(3)
            hard_iron = np.array(filter_.augmented[self.name])
            return Linearization(predicted + hard_iron - m.value, H, m.covariance)
        self._geodetic(p)
        to_ecef = self._geodetic.axes
        measured = to_ecef.T @ C @ m.value
        model = to_ecef.T @ self.field_ecef
        angle = math.atan2(model[1], model[0]) - math.atan2(measured[1], measured[0])
        residual = (angle + math.pi) % (2.0 * math.pi) - math.pi
        # With theta = C_hat phi (ECEF axes), C_hat m^b turns by -theta, so the residual is
        # u^T theta - m_up h^T theta / |h|^2 (h: horizontal part of the levelled field). H is
        # taken at the model field, not the sample: a row built from the noisy sample is
        # correlated with the residual's noise, and through the tan(dip) term that bias
        # tilted the estimate steadily (2.5 deg in 60 s of hover at 63 deg dip).
        h = np.array([model[0], model[1], 0.0])
        H[0, ATT] = (np.array([0.0, 0.0, 1.0]) - model[2] * h / (h @ h)) @ to_ecef.T @ C
        return Linearization(np.array([residual]), H, np.array([[sigma * sigma]]))
