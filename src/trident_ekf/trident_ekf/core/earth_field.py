"""The Earth's magnetic field for magnetometer aiding: World Magnetic Model and field elements.

Units and frames:
- fields are in **tesla** (the World Magnetic Model and its tables use nanotesla; 1 nT = 1e-9 T),
  as 3-vectors in the local **north/east/down** (NED) frame of the geodetic position;
- angles are in degrees: declination positive east of true north, inclination (dip) positive
  down (northern hemisphere); strength is the total intensity ``|B|``;
- positions are WGS-84 geodetic latitude and longitude (degrees) and height above the WGS-84
  ellipsoid in metres (the GNSS height; pymap3d's ``alt``), not above mean sea level;
- dates are decimal years in UTC (``decimal_year`` converts POSIX seconds).

Model: the US/UK World Magnetic Model (NOAA NCEI and the British Geological Survey), evaluated
by the pure-Python library pygeomag, a port of NOAA's reference ``geomag`` C program, with the
coefficient files that library ships. Each model is valid for the five years after its epoch,
and ``wmm_field_ned`` picks the one whose life span covers the date:

======================  =============
date (decimal year)     coefficients
======================  =============
2010.0 <= t < 2015.0    WMM-2010
2015.0 <= t < 2020.0    WMM-2015v2 (the out-of-cycle 2018 release that replaced WMM-2015)
2020.0 <= t < 2025.0    WMM-2020
2025.0 <= t <= 2030.0   WMM-2025
======================  =============

A date outside 2010.0-2030.0 is refused: the linear secular-variation terms are not meant to be
extrapolated. For such a date, or without a position, give the field elements instead
(declination, inclination and strength, e.g. from a newer model or a survey) to
``field_from_elements``. The model is valid from 1 km below to 850 km above the ellipsoid.

What the model is not: it describes the main (core) field only, spherical harmonic degree 12,
wavelengths above about 3000 km. Crustal anomalies (typically hundreds of nT, locally degrees of
declination), ionospheric and magnetospheric fields (storms: up to a few hundred nT), and the
vehicle's own fields (motors, currents, steel; hard and soft iron) are not in it. The error
models published with WMM-2020 and WMM-2025 put the 1-sigma error, crustal and external fields
included (the vehicle's not), at about 90-160 nT per component and
sqrt(0.26^2 + (5600 nT / H)^2) deg of declination (about 0.4 deg where the horizontal field H
is 20 uT). Near the magnetic poles, where H is below 2000 nT (the "blackout zones"), the
declination is meaningless for heading even though the vector is still the model's.
"""

from __future__ import annotations

import calendar
import importlib
import math
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.arrays import FloatArray

NANOTESLA = 1e-9  # T per nT
MAX_FIELD_STRENGTH = 1e-4  # T: bound on a typed-in strength (the Earth's is 22-67 uT)
MIN_YEAR = 2010.0
MAX_YEAR = 2030.0
MIN_HEIGHT = -1000.0  # m above the ellipsoid: the WMM's validity
MAX_HEIGHT = 850e3  # m


@dataclass(frozen=True)
class _Model:
    name: str  # as in the coefficient file's header
    module: str  # pygeomag's Python copy of the coefficient file
    attribute: str
    start: float  # epoch, decimal year; valid for [start, start + 5]


# Oldest first; the 2015 epoch uses the 2018 re-release (WMM-2015v2) rather than WMM-2015.
_MODELS = (
    _Model("WMM-2010", "pygeomag.wmm.wmm_2010", "WMM_2010", 2010.0),
    _Model("WMM-2015v2", "pygeomag.wmm.wmm_2015v2", "WMM_2015v2", 2015.0),
    _Model("WMM-2020", "pygeomag.wmm.wmm_2020", "WMM_2020", 2020.0),
    _Model("WMM-2025", "pygeomag.wmm.wmm_2025", "WMM_2025", 2025.0),
)

# GeoMag objects per model name, built on first use (they load and normalise the coefficients).
# pygeomag's GeoMag.calculate reuses arrays of the object as scratch space, so calls are
# serialised by the lock.
_GEOMAGS: dict[str, Any] = {}
_LOCK = threading.Lock()


def decimal_year(posix_seconds: float) -> float:
    """The UTC decimal year of a POSIX time (seconds since 1970-01-01T00:00:00Z).

    ``year + (time since 1 January 00:00 UTC) / (length of that year)``, continuous in time
    (NOAA's software uses the day of the year, which agrees at each midnight UTC). Leap seconds
    are ignored, as POSIX time does.
    """
    seconds = float(posix_seconds)
    if not math.isfinite(seconds):
        raise ValueError(f"posix_seconds must be finite, got {posix_seconds!r}")
    try:
        year = datetime.fromtimestamp(seconds, tz=UTC).year
    except (OverflowError, OSError, ValueError) as error:
        raise ValueError(f"posix_seconds {seconds!r} is not a representable date") from error
    start = calendar.timegm((year, 1, 1, 0, 0, 0))
    end = calendar.timegm((year + 1, 1, 1, 0, 0, 0))
    return year + (seconds - start) / (end - start)


def wmm_model_name(year: float) -> str:
    """Name of the World Magnetic Model used for a decimal year (``"WMM-2020"``, ...).

    Each model covers [epoch, epoch + 5): a new epoch starts the next model; 2030.0 itself
    belongs to WMM-2025. Raises ValueError outside 2010.0-2030.0.
    """
    return _model_for(year).name


def _model_for(year: float) -> _Model:
    value = float(year)
    if not (math.isfinite(value) and MIN_YEAR <= value <= MAX_YEAR):
        raise ValueError(
            f"year {year!r} is outside the World Magnetic Model's span {MIN_YEAR:.1f}-"
            f"{MAX_YEAR:.1f} (WMM-2010 to WMM-2025, five years each); give the field's "
            "declination, inclination and strength instead (field_from_elements)"
        )
    chosen = _MODELS[0]
    for model in _MODELS:
        if value >= model.start:
            chosen = model
    return chosen


def _geomag(model: _Model) -> Any:
    geomag = _GEOMAGS.get(model.name)
    if geomag is None:
        # Imported on first use: importing this module does not load the model library.
        from pygeomag import GeoMag

        coefficients = getattr(importlib.import_module(model.module), model.attribute)
        header = coefficients[0]
        if header[0] != model.start or header[1] != model.name:
            raise RuntimeError(f"pygeomag's {model.module} holds {header}, expected "
                               f"{model.name} with epoch {model.start}")
        geomag = GeoMag(coefficients_data=coefficients)
        _GEOMAGS[model.name] = geomag
    return geomag


def wmm_field_ned(latitude_deg: float, longitude_deg: float, height_m: float,
                  year: float) -> FloatArray:
    """The World Magnetic Model's main field at a place and date: (3,) NED in tesla.

    Args:
        latitude_deg: WGS-84 **geodetic** latitude in degrees, [-90, 90] (pygeomag takes the
            geodetic latitude and converts it to geocentric itself).
        longitude_deg: longitude in degrees, east positive (any finite value; wrapped).
        height_m: height above the **WGS-84 ellipsoid** in metres, -1 km to 850 km. pygeomag
            takes kilometres and, as NOAA's geomag program, uses the value as the ellipsoidal
            height in its geodetic-to-geocentric conversion (its docstring's "or MSL" only means
            that the geoid undulation, at most about 100 m, changes the field by a few nT,
            far below the model's error).
        year: UTC decimal year (``decimal_year``), 2010.0 to 2030.0; the model whose
            five-year life span covers it is used (``wmm_model_name``).

    Returns:
        ``[north, east, down]`` in T (pygeomag's X, Y, Z in nT times 1e-9). At a geographic
        pole, north and east follow the meridian of ``longitude_deg``.

    Raises:
        ValueError: a non-finite input, a latitude or height outside its range, or a year
            outside 2010.0-2030.0.
    """
    model = _model_for(year)
    latitude = float(latitude_deg)
    longitude = float(longitude_deg)
    height = float(height_m)
    if not (math.isfinite(latitude) and -90.0 <= latitude <= 90.0):
        raise ValueError(f"latitude_deg must be finite and in [-90, 90] deg, got {latitude_deg!r}")
    if not math.isfinite(longitude):
        raise ValueError(f"longitude_deg must be finite (deg), got {longitude_deg!r}")
    if not (math.isfinite(height) and MIN_HEIGHT <= height <= MAX_HEIGHT):
        raise ValueError(
            f"height_m must be finite and in [{MIN_HEIGHT:.0f}, {MAX_HEIGHT:.0f}] m above the "
            f"WGS-84 ellipsoid (the World Magnetic Model's validity), got {height_m!r}"
        )
    longitude = (longitude + 180.0) % 360.0 - 180.0
    with _LOCK:
        result = _geomag(model).calculate(
            glat=latitude, glon=longitude, alt=height / 1000.0, time=float(year)
        )
    return np.array([result.x, result.y, result.z], dtype=np.float64) * NANOTESLA


def field_from_elements(declination_deg: float, inclination_deg: float,
                        strength_T: float) -> FloatArray:
    """The field vector (3,) NED in T from its elements; no datum or date needed.

    ``north = F cos I cos D``, ``east = F cos I sin D``, ``down = F sin I``.

    Args:
        declination_deg: D, degrees east of true north, [-180, 180].
        inclination_deg: I (dip), degrees below the horizontal, [-90, 90].
        strength_T: total intensity F in **tesla**, in (0, 1e-4) (the Earth's is 22-67 uT;
            48 uT is 4.8e-5 T, not 48000).

    Raises:
        ValueError: naming the parameter and its unit.
    """
    declination = float(declination_deg)
    inclination = float(inclination_deg)
    strength = float(strength_T)
    if not (math.isfinite(declination) and -180.0 <= declination <= 180.0):
        raise ValueError(
            f"declination_deg must be finite and in [-180, 180] deg, got {declination_deg!r}"
        )
    if not (math.isfinite(inclination) and -90.0 <= inclination <= 90.0):
        raise ValueError(
            f"inclination_deg must be finite and in [-90, 90] deg, got {inclination_deg!r}"
        )
    if not (math.isfinite(strength) and 0.0 < strength < MAX_FIELD_STRENGTH):
        raise ValueError(
            f"strength_T must be finite, > 0 and < {MAX_FIELD_STRENGTH:g} T (tesla; the "
            f"Earth's field is 2.2e-5 to 6.7e-5 T), got {strength_T!r}"
        )
    d = math.radians(declination)
    i = math.radians(inclination)
    horizontal = strength * math.cos(i)
    return np.array(
        [horizontal * math.cos(d), horizontal * math.sin(d), strength * math.sin(i)],
        dtype=np.float64,
    )


def field_elements(field_ned: ArrayLike) -> tuple[float, float, float]:
    """Declination (deg, (-180, 180]), inclination (deg) and strength (T) of a NED field.

    The inverse of ``field_from_elements``. With no horizontal component the declination is
    undefined and 0 is returned.

    Raises:
        ValueError: ``field_ned`` not a finite, non-zero 3-vector.
    """
    field = np.asarray(field_ned, dtype=np.float64)
    if field.shape != (3,):
        raise ValueError(f"field_ned must be a 3-vector (north, east, down) in T, got shape "
                         f"{field.shape}")
    if not np.all(np.isfinite(field)):
        raise ValueError(f"field_ned must be finite, got {field.tolist()}")
    north, east, down = (float(v) for v in field)
    horizontal = math.hypot(north, east)
    strength = math.hypot(horizontal, down)
    if strength == 0.0:
        raise ValueError("field_ned must not be zero: its direction is undefined")
    declination = math.degrees(math.atan2(east, north)) if horizontal > 0.0 else 0.0
    if declination <= -180.0:  # atan2(-0.0, x < 0): keep (-180, 180]
        declination += 360.0
    inclination = math.degrees(math.atan2(down, horizontal))
    return declination, inclination, strength
