"""Physical plausibility of raw inputs: what a sensor can report at all.

An IMU reading is only trusted inside the sensor's declared full-scale range: at the range
the sensor clips, so the true value is unknown beyond a lower bound, and a finite value far
beyond it (1e6 m/s^2) is a corrupted message, not a measurement. Either way no finite noise
describes the error, so such a sample is rejected rather than de-weighted; the filter then
spans the missing interval as it does any missing sample (``FilterConfig.max_imu_interval``,
``max_bridged_gap``). The range is per sensor axis, so the check runs on the reading in the
IMU's own frame, before any mounting rotation.

A GNSS fix must be a place on or near the Earth: WGS-84 latitude and longitude in their
ranges, an ellipsoidal height between the deepest land depression and the edge of space with
a margin (a receiver's height is never outside; a corrupted or spoofed message can be), and
a position covariance that is a covariance (symmetric positive definite).
"""

from __future__ import annotations

import math

import numpy as np

from mav_geometry.arrays import FloatArray, FloatVector

LATITUDE_RANGE = (-90.0, 90.0)  # deg
LONGITUDE_RANGE = (-180.0, 180.0)  # deg
HEIGHT_RANGE = (-1000.0, 100_000.0)  # m above the WGS-84 ellipsoid
SYMMETRY_TOLERANCE = 1e-6  # largest |C - C^T| relative to the largest |C| entry


def imu_fault(gyro: FloatVector, accel: FloatVector, gyro_range: float,
              accel_range: float) -> str | None:
    """``nonfinite``, ``saturated`` (an axis at or beyond its range: rate rad/s, specific
    force m/s^2) or None for a usable raw IMU reading."""
    x, y, z = map(abs, map(float, gyro))
    u, v, w = map(abs, map(float, accel))
    if not math.isfinite(x + y + z + u + v + w):
        return "nonfinite"
    if max(x, y, z) >= gyro_range or max(u, v, w) >= accel_range:
        return "saturated"
    return None


def fix_fault(latitude_deg: float, longitude_deg: float, height_m: float) -> str | None:
    """``nonfinite``, ``out_of_range`` or None for a fix position (WGS-84 deg, ellipsoidal
    height m)."""
    if not math.isfinite(latitude_deg + longitude_deg + height_m):
        return "nonfinite"
    ranges = (LATITUDE_RANGE, LONGITUDE_RANGE, HEIGHT_RANGE)
    values = (latitude_deg, longitude_deg, height_m)
    if not all(low <= value <= high for value, (low, high) in zip(values, ranges, strict=True)):
        return "out_of_range"
    return None


def valid_covariance(covariance: FloatArray) -> bool:
    """Finite, symmetric (to float32 rounding: drivers publish float32 sources) and positive
    definite: a usable measurement noise."""
    if not np.all(np.isfinite(covariance)):
        return False
    scale = float(np.abs(covariance).max())
    if float(np.abs(covariance - covariance.T).max()) > SYMMETRY_TOLERANCE * scale:
        return False
    try:
        np.linalg.cholesky(0.5 * (covariance + covariance.T))
    except np.linalg.LinAlgError:
        return False
    return True
