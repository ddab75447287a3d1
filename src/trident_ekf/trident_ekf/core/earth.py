"""WGS-84 Earth model: rotation rate, J2 plumb-bob gravity in ECEF, local-level frames.

Scalar functions take and return plain floats (the per-IMU-sample hot path);
``gravity_ecef`` is the array form. Geodetic conversions use pymap3d.
"""

from __future__ import annotations

import math

import numpy as np
import pymap3d
from numpy.typing import ArrayLike, NDArray

from mav_geometry.arrays import FloatArray, FloatVector

EARTH_RATE = 7.292115e-5  # rad/s, about ECEF z
GM = 3.986004418e14  # m^3/s^2
SEMI_MAJOR_AXIS = 6378137.0  # m
J2 = 1.082627e-3
OMEGA_ECEF = np.array([0.0, 0.0, EARTH_RATE])

_J2_FACTOR = 1.5 * J2 * SEMI_MAJOR_AXIS**2
_OMEGA_SQUARED = EARTH_RATE**2


def gravity_xyz(x: float, y: float, z: float) -> tuple[float, float, float]:
    """Plumb-bob gravity gamma^e (m/s^2) at ECEF point (x, y, z) m.

    J2 gravitation (Groves eq. 2.142) plus the centrifugal term ``-Omega x (Omega x p)``,
    as (20) of the paper requires (the printed g-bar is this gamma).
    """
    r2 = x * x + y * y + z * z
    r = math.sqrt(r2)
    k = -GM / (r2 * r)
    j = _J2_FACTOR / r2
    s = 5.0 * z * z / r2
    horizontal = k * (1.0 + j * (1.0 - s))
    return (
        horizontal * x + _OMEGA_SQUARED * x,
        horizontal * y + _OMEGA_SQUARED * y,
        k * (1.0 + j * (3.0 - s)) * z,
    )


def gravity_ecef(position: ArrayLike) -> NDArray[np.float64]:
    """Plumb-bob gravity (m/s^2) at ECEF positions of shape (..., 3) m."""
    p = np.asarray(position, dtype=float)
    r2 = np.sum(p * p, axis=-1)
    r = np.sqrt(r2)
    k = -GM / (r2 * r)
    j = _J2_FACTOR / r2
    s = 5.0 * p[..., 2] ** 2 / r2
    result = np.empty_like(p)
    horizontal = k * (1.0 + j * (1.0 - s)) + _OMEGA_SQUARED
    result[..., 0] = horizontal * p[..., 0]
    result[..., 1] = horizontal * p[..., 1]
    result[..., 2] = k * (1.0 + j * (3.0 - s)) * p[..., 2]
    return result


def gravity_gradient(position: FloatVector) -> NDArray[np.float64]:
    """Gamma = d gamma / d p (1/s^2) at one ECEF position: point-mass term plus centrifugal.

    The J2 part of the gradient is below 1e-8 1/s^2 and is left out
    (docs/theory/trident-ekf.md §4.5).
    """
    x, y, z = (float(c) for c in position)
    r2 = x * x + y * y + z * z
    k = -GM / (r2 * math.sqrt(r2))
    m = -3.0 * k / r2  # outer-product coefficient
    return np.array((
        (k + m * x * x + _OMEGA_SQUARED, m * x * y, m * x * z),
        (m * x * y, k + m * y * y + _OMEGA_SQUARED, m * y * z),
        (m * x * z, m * y * z, k + m * z * z),
    ))


def enu_to_ecef_rotation(latitude_deg: float, longitude_deg: float) -> NDArray[np.float64]:
    """C_n^e: columns are the east, north and up unit vectors in ECEF."""
    lat = math.radians(latitude_deg)
    lon = math.radians(longitude_deg)
    sl, cl = math.sin(lat), math.cos(lat)
    so, co = math.sin(lon), math.cos(lon)
    return np.array([[-so, -sl * co, cl * co], [co, -sl * so, cl * so], [0.0, cl, sl]])


def ned_to_ecef(vector_ned: FloatVector, latitude_deg: float,
                longitude_deg: float) -> FloatArray:
    """A north/east/down vector at a geodetic point, in ECEF axes (same units)."""
    north, east, down = (float(c) for c in vector_ned)
    result: FloatArray = (enu_to_ecef_rotation(latitude_deg, longitude_deg)
                          @ np.array([east, north, -down]))
    return result


def geodetic_to_ecef(latitude_deg: float, longitude_deg: float, height_m: float) -> FloatArray:
    """ECEF position (m) of a WGS-84 geodetic point (degrees, ellipsoidal height m)."""
    return np.array(pymap3d.geodetic2ecef(latitude_deg, longitude_deg, height_m))


def ecef_to_geodetic(position: ArrayLike) -> tuple[float, float, float]:
    """(latitude deg, longitude deg, ellipsoidal height m) of an ECEF point (m)."""
    x, y, z = (float(c) for c in np.asarray(position, dtype=float))
    lat, lon, h = pymap3d.ecef2geodetic(x, y, z)
    return float(lat), float(lon), float(h)


class LocalGeodetic:
    """``ecef_to_geodetic`` for a point that moves little between calls (a measurement
    model at the filter's position): exact conversion only when the point has left a
    sphere of ``radius_m`` around the last exactly converted one, the anchor.

    Inside it, latitude and longitude are the anchor's, off by at most radius / R (8e-6 rad
    for 50 m: nothing to the local axes or the field model), and the height is the
    anchor's plus the displacement along its ellipsoid normal, off by at most
    radius^2 / (2 R) (0.2 mm for 50 m). The exact conversion costs about as much as a
    barometer update itself.

    ``axes``: ``enu_to_ecef_rotation`` at the latitude and longitude of the latest call (the
    anchor's), kept so that the models need not rebuild it at every update.
    """

    def __init__(self, radius_m: float = 50.0) -> None:
        self.radius_m = radius_m
        self._anchor: FloatArray | None = None
        self._geodetic = (0.0, 0.0, 0.0)
        self._up = np.zeros(3)
        self.axes = np.eye(3)

    def __call__(self, position: ArrayLike) -> tuple[float, float, float]:
        """(latitude deg, longitude deg, ellipsoidal height m) of an ECEF point (m)."""
        p = np.asarray(position, dtype=float)
        if self._anchor is not None:
            offset = p - self._anchor
            if float(offset @ offset) <= self.radius_m**2:
                latitude, longitude, height = self._geodetic
                return latitude, longitude, height + float(self._up @ offset)
        self._anchor = p.copy()
        self._geodetic = ecef_to_geodetic(p)
        self.axes = enu_to_ecef_rotation(*self._geodetic[:2])
        self._up = self.axes[:, 2]
        return self._geodetic


def ecef_to_enu(position: ArrayLike, datum: tuple[float, float, float]) -> FloatArray:
    """ENU coordinates (m) of ECEF points (..., 3) relative to a geodetic datum."""
    p = np.asarray(position, dtype=float)
    e, n, u = pymap3d.ecef2enu(p[..., 0], p[..., 1], p[..., 2], *datum)
    return np.stack([np.asarray(e), np.asarray(n), np.asarray(u)], axis=-1)
