"""Barometric height with an estimated offset (docs/theory/trident-ekf.md §5.11).

Static pressure becomes a height with the ICAO standard atmosphere (troposphere). That
pressure altitude differs from the ellipsoidal height by the geoid, the day's sea-level
pressure and temperature. The offset is b0 + b: b0 (m), fixed at the first reading minus
the predicted height, holds the part that is tens of metres and constant for a flight; the
state b (m) is its slow change, a first-order Gauss-Markov process around zero, so that
barometer and GNSS heights may disagree slowly while the barometer holds the height through
a GNSS outage. The reading is h_baro = h(p_imu) + b0 + b + noise. (A Gauss-Markov state
holding the whole offset would decay towards zero: 3 m in a 30 s outage for a 64 m offset
and a 600 s correlation time.)

Rotor downwash raises the static pressure near the ground (the barometer reads low): with
``ground_effect_dead_zone_m`` > 0, while the estimate is within ``ground_effect_height_m``
of the start height, a reading up to that much below the prediction counts as no innovation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from mav_geometry.settings import check_settings, setting
from trident_ekf.core.earth import LocalGeodetic
from trident_ekf.core.measurements.base import (
    AidingSource,
    AugmentedState,
    Linearization,
    Measurement,
)

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter

# ICAO standard atmosphere, troposphere (below 11 km).
SEA_LEVEL_PRESSURE = 101325.0  # Pa
SEA_LEVEL_TEMPERATURE = 288.15  # K
LAPSE_RATE = 0.0065  # K/m
EXPONENT = 0.190263  # R L / (g M) of the standard atmosphere
POS = slice(6, 9)


def pressure_altitude(pressure_pa: float) -> float:
    """Standard-atmosphere height (m) of a static pressure (Pa)."""
    return float(SEA_LEVEL_TEMPERATURE / LAPSE_RATE * (
        1.0 - (pressure_pa / SEA_LEVEL_PRESSURE) ** EXPONENT))


def altitude_pressure(height_m: float) -> float:
    """The inverse: static pressure (Pa) at a standard-atmosphere height (m)."""
    return float(SEA_LEVEL_PRESSURE * (1.0 - LAPSE_RATE * height_m / SEA_LEVEL_TEMPERATURE) ** (
        1.0 / EXPONENT))


def height_per_pascal(pressure_pa: float) -> float:
    """|dh/dp| of ``pressure_altitude`` (m/Pa), for turning a pressure variance into m^2."""
    return float(SEA_LEVEL_TEMPERATURE / LAPSE_RATE * EXPONENT / SEA_LEVEL_PRESSURE
                 * (pressure_pa / SEA_LEVEL_PRESSURE) ** (EXPONENT - 1.0))


@dataclass(frozen=True)
class BarometerConfig:
    noise_sigma_m: float = setting(
        1.0, "height noise of one reading when the message has no variance", "m", 1e-3, 100.0)
    offset_sigma_m: float = setting(
        5.0, "stationary sigma of the slow change of the baro-minus-ellipsoidal-height "
        "offset from its value at the first reading", "m", 1e-3, 1000.0)
    offset_correlation_time_s: float = setting(
        600.0, "correlation time of that offset", "s", 1.0, 1e6)
    delay_s: float = setting(
        0.0, "how much older a reading is than its stamp (sensor filtering, bus and driver "
        "latency; applied through the filter history, so at most history_length)", "s", 0.0,
        1.0)
    ground_effect_dead_zone_m: float = setting(
        0.0, "near the ground, readings up to this far below the prediction are not used as "
        "innovation (rotor downwash); 0 = off", "m", 0.0, 50.0)
    ground_effect_height_m: float = setting(
        1.5, "height above the start height below which the dead zone applies", "m", 0.0,
        100.0)

    def __post_init__(self) -> None:
        check_settings(self)


class Barometer(AidingSource):
    """Barometric height (m); ``measurement`` takes a static pressure or a height."""

    name: ClassVar[str] = "barometer"
    dof = 1
    config: BarometerConfig

    def __init__(self, config: BarometerConfig | None = None) -> None:
        super().__init__(config or BarometerConfig())
        self.start_height = math.nan
        self.reference_offset = 0.0  # b0, m: set by the first reading after ``initialize``
        self._geodetic = LocalGeodetic()

    @property
    def augmented(self) -> tuple[AugmentedState, ...]:
        return (AugmentedState.gauss_markov((self.config.offset_sigma_m,),
                                            self.config.offset_correlation_time_s),)

    def measurement(self, time: float, pressure_pa: float | None = None,
                    pressure_variance_pa2: float = 0.0, height_m: float | None = None,
                    height_variance_m2: float = 0.0) -> Measurement:
        """A reading from a static pressure (Pa, variance Pa^2; 0 = unknown) or a pressure
        height (m, variance m^2; 0 = unknown): exactly one of the two."""
        if (pressure_pa is None) == (height_m is None):
            raise ValueError("give exactly one of pressure_pa and height_m")
        default = self.config.noise_sigma_m**2
        if pressure_pa is not None:
            # Below 1 Pa (no flight's pressure) the slope overflows: unusable, as NaN is.
            readable = pressure_pa >= 1.0
            height = pressure_altitude(pressure_pa) if readable else math.nan
            variance = (pressure_variance_pa2 * height_per_pascal(pressure_pa) ** 2
                        if pressure_variance_pa2 > 0.0 and readable else default)
        else:
            assert height_m is not None
            height = float(height_m)
            variance = height_variance_m2 if height_variance_m2 > 0.0 else default
        return Measurement(self.name, float(time), np.array([height]), np.array([[variance]]))

    def start(self, filter_: ErrorStateFilter) -> None:
        self.start_height = self._geodetic(filter_.nominal()[2])[2]

    def first_value(self, filter_: ErrorStateFilter, m: Measurement) -> tuple[float, ...]:
        """b0 from the first reading (reading minus predicted height); the state b starts
        at zero."""
        self.reference_offset = float(m.value[0]) - self._geodetic(filter_.nominal()[2])[2]
        return (0.0,)

    def offset(self, filter_: ErrorStateFilter) -> float:
        """The estimated barometer-minus-ellipsoidal-height offset b0 + b, m."""
        return self.reference_offset + filter_.augmented[self.name][0]

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        """dh/dp = u_up^T (ellipsoid normal), so h_hat - h = u_up^T N dx_pos with N the
        filter's ``navigation_error_block``; the offset enters with +1."""
        _, _, p = filter_.nominal()
        height = self._geodetic(p)[2]
        up = self._geodetic.axes[:, 2]
        H = np.zeros((1, filter_.state_dim))
        H[0, POS] = up @ filter_.navigation_error_block(filter_.attitude_matrix())
        offset_slice = filter_.state_slice(self.name)
        H[0, offset_slice] = 1.0
        predicted = height + self.offset(filter_)
        residual = predicted - float(m.value[0])
        dead_zone = self.config.ground_effect_dead_zone_m
        if dead_zone > 0.0 and height - self.start_height < self.config.ground_effect_height_m:
            # Reading low by up to dead_zone: residual in [0, dead_zone] is taken as none.
            residual = residual - min(max(residual, 0.0), dead_zone)
        return Linearization(np.array([residual]), H, m.covariance)
