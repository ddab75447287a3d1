"""Static-pressure sensor (MS5611 / BMP388 class) on the flight controller, in ``base_link``.

Model (pressures in Pa, heights in m, times in s). The vehicle's ellipsoidal (WGS-84)
height is ``datum_height_m + position_enu[2]`` (flat Earth over the flight area); its
height above mean sea level is that minus ``geoid_height_m``. The true static pressure is
the ICAO troposphere (valid below 11 km) of the day::

    p_true(H) = p0 (1 - L H / T0) ** (g0 / (R L))

with ``p0 = sea_level_pressure_pa``, ``T0 = sea_level_temperature_k``, the standard lapse
rate ``L = 0.0065 K/m``, ``g0 = 9.80665 m/s^2`` and ``R = 287.05287 J/(kg K)``; ``H`` is
used as a geopotential height, as the estimator does (the two differ by ``H^2 / 6371 km``:
0.04 m at 500 m). On a standard day (101325 Pa, 288.15 K) the standard pressure altitude of
``p_true`` is exactly ``ellipsoidal height - geoid_height_m``; another day shifts it by
tens of metres (about 8.2 m per hPa of sea-level pressure) and a sea-level temperature off
the standard scales the height above sea level by about ``288.15 / T0`` (a 15 K warmer day:
-22 m at 441 m), so the offset also changes slowly with height.
The reading is::

    p = p_true + drift + ground_effect + faults + noise

- ``drift``: first-order Gauss-Markov pressure error (stationary sigma ``drift_sigma_pa``,
  correlation time ``drift_correlation_time_s``; thermal drift of the die and the slow
  local weather), discretised exactly over the actual interval between readings and drawn
  from its stationary law at the first reading after construction or ``reset``;
- ``ground_effect``: rotor downwash raises the static pressure under a hovering vehicle
  near the ground, so the barometer reads HIGH pressure, i.e. LOW height:
  ``ground_effect_pa * rotor_load * w(h)``, with ``h`` the height of base_link above the
  ground and ``w(h) = (1 - h / ground_effect_height_m)^2`` below ``ground_effect_height_m``
  (1 at the ground, 0 from that height on; ``near_ground_weight``);
- ``faults``: ``offset_pa`` (one number, Pa) added while the fault is active;
- ``noise``: white, ``noise_sigma_pa`` per reading.

The sensor's offset from base_link (a few cm) is not modelled.

What the estimator sees: ``barometer/pressure`` (``sensor_msgs/FluidPressure``, frame
``base_link``): ``fluid_pressure`` in Pa and ``variance = noise_sigma_pa^2`` in Pa^2 (the
white noise only: drift and ground effect are errors the estimator models itself, as its
offset state and ground-effect dead zone). It converts the pressure into a standard
pressure altitude and estimates the offset between that and the ellipsoidal height;
``report_values()["offset_m"]`` is the true value of that offset for the last reading.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mav_geometry.settings import check_settings, setting
from variational_sim.sensors.base import Output, Sensor, SensorTruth, stamp
from variational_sim.sensors.noise import StandardNormalStream, gauss_markov_coefficients

STANDARD_GRAVITY = 9.80665
"""g0 of the standard atmosphere (m/s^2)."""
AIR_GAS_CONSTANT = 287.05287
"""Specific gas constant of dry air, R* / M (J/(kg K))."""
LAPSE_RATE = 0.0065
"""Temperature lapse rate of the ICAO troposphere (K/m)."""
STANDARD_SEA_LEVEL_PRESSURE = 101325.0
"""ICAO sea-level pressure (Pa)."""
STANDARD_SEA_LEVEL_TEMPERATURE = 288.15
"""ICAO sea-level temperature (K)."""
_EXPONENT = STANDARD_GRAVITY / (AIR_GAS_CONSTANT * LAPSE_RATE)  # 5.25588


def near_ground_weight(height_m: float, extent_m: float) -> float:
    """Weight of an effect that is full at the ground and gone at ``extent_m`` (m) above it:
    ``(1 - h / extent)^2`` for ``0 <= h < extent``, 1 below the ground, 0 at or above
    ``extent_m`` (and always 0 when ``extent_m <= 0``)."""
    if extent_m <= 0.0 or height_m >= extent_m:
        return 0.0
    if height_m <= 0.0:
        return 1.0
    remaining = 1.0 - height_m / extent_m
    return remaining * remaining


def troposphere_pressure(
        height_m: float, sea_level_pressure_pa: float = STANDARD_SEA_LEVEL_PRESSURE,
        sea_level_temperature_k: float = STANDARD_SEA_LEVEL_TEMPERATURE) -> float:
    """Static pressure (Pa) at ``height_m`` (m above mean sea level, geopotential) in an ICAO
    troposphere with the given sea-level pressure (Pa) and temperature (K); 0 where the
    formula's temperature would reach 0 K."""
    base = 1.0 - LAPSE_RATE * height_m / sea_level_temperature_k
    return sea_level_pressure_pa * math.pow(base, _EXPONENT) if base > 0.0 else 0.0


def standard_pressure_altitude(pressure_pa: float) -> float:
    """Height (m) of a static pressure (Pa, > 0) in the ICAO standard atmosphere (the
    estimator's conversion)."""
    return STANDARD_SEA_LEVEL_TEMPERATURE / LAPSE_RATE * (
        1.0 - math.pow(pressure_pa / STANDARD_SEA_LEVEL_PRESSURE, 1.0 / _EXPONENT))


@dataclass(frozen=True)
class BarometerConfig:
    """Barometer rate, error model and the day's atmosphere (see the module docstring).

    Noise default: 3 Pa, an MS5611 at oversampling 1024 (2.5 Pa RMS, the setting that allows
    50 Hz) with some airflow on top; about 0.26 m of height at the default site (1 Pa is
    0.087 m at 488 m). Drift: 10 Pa (0.9 m) over 300 s, thermal drift of the sensor during
    a flight. Ground effect: 20 Pa at full rotor load, i.e. about 8 Pa (0.7 m low) for a
    hover at 40 % load, gone 1 m above the ground.
    """

    rate_hz: float = setting(50.0, "readings per second", "Hz", 0.1, 1000.0)
    latency_s: float = setting(
        0.0, "delay from a reading's stamp to its delivery", "s", 0.0, 1.0)
    noise_sigma_pa: float = setting(
        3.0, "white noise of one reading (reported as the message's variance; 3 Pa is "
        "about 0.26 m; 0 reports variance 0, which the estimator reads as unknown)", "Pa",
        0.0, 1000.0)
    sea_level_pressure_pa: float = setting(
        101325.0, "the day's pressure at mean sea level (QNH); the estimator assumes "
        "101325 Pa, so other values give it a height offset of about 8.2 m per hPa", "Pa",
        85000.0, 110000.0)
    sea_level_temperature_k: float = setting(
        288.15, "the day's temperature at mean sea level (the estimator assumes 288.15 K)",
        "K", 220.0, 330.0)
    geoid_height_m: float = setting(
        47.0, "height of the geoid above the WGS-84 ellipsoid at the site (pressure "
        "altitude = ellipsoidal height - this on a standard day; 47 m: Zurich)", "m",
        -120.0, 100.0)
    drift_sigma_pa: float = setting(
        10.0, "stationary sigma of the slowly varying (first-order Gauss-Markov) pressure "
        "error", "Pa", 0.0, 10000.0)
    drift_correlation_time_s: float = setting(
        300.0, "correlation time of that drift", "s", 0.01, 1e7)
    ground_effect_pa: float = setting(
        20.0, "pressure rise at the ground under rotor downwash at full rotor load (scaled "
        "by the rotor load; the barometer reads high, i.e. the height low)", "Pa", 0.0,
        1000.0)
    ground_effect_height_m: float = setting(
        1.0, "height of base_link above the ground where the ground effect has faded to "
        "zero ((1 - h / this)^2 below it)", "m", 0.0, 100.0)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True, slots=True)
class BarometerReading:
    """One reading valid at ``time_s`` (s): static pressure (Pa) and its reported variance
    (Pa^2)."""

    time_s: float
    pressure_pa: float
    variance_pa2: float


class Barometer(Sensor):
    """Static pressure of the vehicle's height (``BarometerReading``), called at increasing
    times; ``datum_height_m`` is the ellipsoidal height (m) of the map origin."""

    name: ClassVar[str] = "barometer"
    fault_kinds: ClassVar[dict[str, int]] = {"offset_pa": 1}
    FRAME_ID: ClassVar[str] = "base_link"

    # Standard normals per reading: drift drive (0), white noise (1).
    _NORMALS_PER_READING = 2

    def __init__(self, config: BarometerConfig, rng: np.random.Generator,
                 datum_height_m: float) -> None:
        super().__init__()
        if not math.isfinite(datum_height_m):
            raise ValueError(f"Barometer: datum_height_m = {datum_height_m!r} must be finite")
        self._datum_height = float(datum_height_m)
        self._config = config
        self._outputs = (Output("barometer/pressure", "sensor_msgs/msg/FluidPressure",
                                self.FRAME_ID),)
        self._normals = StandardNormalStream(rng, self._NORMALS_PER_READING, block_rows=256)
        self._step_key = (math.nan, math.nan)  # (interval s, correlation time s) of _step
        self._step = (1.0, 0.0)  # Gauss-Markov (phi, drive) over that interval
        self.reset()

    @property
    def outputs(self) -> tuple[Output, ...]:
        return self._outputs

    def set_error_model(self, config: BarometerConfig) -> None:
        """Noise, drift, ground-effect and atmosphere of ``config`` from the next reading on
        (a new sea-level pressure is a step in the weather); the drift keeps its current
        value and the noise stream goes on. The rate and the latency are the schedule's:
        they must not change (ValueError)."""
        kept = ("rate_hz", "latency_s")
        changed = [name for name in kept if getattr(config, name) != getattr(self._config, name)]
        if changed:
            raise ValueError(f"Barometer.set_error_model: {changed} cannot change")
        self._config = config

    def reset(self, rng: np.random.Generator | None = None) -> None:
        """Power cycle: faults dropped, the drift redrawn from its stationary law at the next
        reading, which may be earlier than the last one. Noise from ``rng`` from now on
        (None: the current generator continues)."""
        if rng is not None:
            self._normals = StandardNormalStream(rng, self._NORMALS_PER_READING,
                                                 block_rows=256)
        self.faults = []
        self._drift = 0.0
        self._last_time_s: float | None = None
        self._ground_effect = 0.0
        self._fault = 0.0
        self._height = math.nan  # ellipsoidal height of the last reading (m)
        self._biased = math.nan  # noise-free pressure of the last reading (Pa)

    def measure(self, truth: SensorTruth) -> BarometerReading:
        """The reading at ``truth.time_s``; ValueError if time goes back."""
        time_s = truth.time_s
        config = self._config
        last = self._last_time_s
        n = self._normals.next_row()
        if last is None:
            self._drift = config.drift_sigma_pa * n[0]
        else:
            if time_s < last:
                raise ValueError(f"Barometer.measure: time_s = {time_s} s is before the "
                                 f"previous reading at {last} s")
            key = (time_s - last, config.drift_correlation_time_s)
            if key != self._step_key:  # the schedule's interval repeats: reuse exp()
                self._step_key = key
                self._step = gauss_markov_coefficients(*key)
            phi, drive = self._step
            self._drift = phi * self._drift + drive * config.drift_sigma_pa * n[0]
        self._last_time_s = time_s

        height = self._datum_height + truth.position_enu[2]
        pressure = troposphere_pressure(height - config.geoid_height_m,
                                        config.sea_level_pressure_pa,
                                        config.sea_level_temperature_k)
        ground_effect = 0.0
        if config.ground_effect_pa > 0.0:
            weight = near_ground_weight(truth.height_above_ground_m,
                                        config.ground_effect_height_m)
            if weight > 0.0:
                ground_effect = config.ground_effect_pa * truth.rotor_load * weight
        fault = 0.0
        if self.faults:
            fault = sum(f.value[0] for f in self.active_faults(time_s, "offset_pa"))
        biased = pressure + self._drift + ground_effect + fault
        self._ground_effect, self._fault = ground_effect, fault
        self._height, self._biased = height, biased
        sigma = config.noise_sigma_pa
        return BarometerReading(time_s, biased + sigma * n[1], sigma * sigma)

    def fill(self, reading: Any, messages: Sequence[Any]) -> tuple[bool, ...]:
        """``sensor_msgs/FluidPressure``: header, ``fluid_pressure`` (Pa), ``variance``
        (Pa^2)."""
        message = messages[0]
        stamp(message.header, reading.time_s)
        message.fluid_pressure = float(reading.pressure_pa)
        message.variance = float(reading.variance_pa2)
        return (True,)

    def report_values(self) -> dict[str, float]:
        """True errors of the last reading (NaN before the first): ``drift_pa``,
        ``ground_effect_pa``, ``fault_pa`` (Pa), and ``offset_m``: standard pressure altitude
        of the noise-free reading minus the ellipsoidal height (m), the quantity the
        estimator's barometer offset estimates."""
        if self._last_time_s is None:
            return {"drift_pa": math.nan, "ground_effect_pa": math.nan, "fault_pa": math.nan,
                    "offset_m": math.nan}
        offset = (standard_pressure_altitude(self._biased) - self._height
                  if self._biased > 0.0 else math.nan)
        return {"drift_pa": self._drift, "ground_effect_pa": self._ground_effect,
                "fault_pa": self._fault, "offset_m": offset}
