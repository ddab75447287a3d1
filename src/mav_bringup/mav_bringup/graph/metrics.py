"""Figures of merit of a closed-loop run: tracking of the reference by the ground truth, the
estimate's errors against the ground truth with the fraction inside its 3-sigma bounds, the
barometer's and the magnetometer's readings checked against the ground truth, and the
estimator's final per-source counters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_bringup.graph.samples import OdometrySeries, SensorSamples
from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.sensors.barometer import (
    AIR_GAS_CONSTANT,
    LAPSE_RATE,
    STANDARD_GRAVITY,
    STANDARD_SEA_LEVEL_PRESSURE,
    STANDARD_SEA_LEVEL_TEMPERATURE,
)

MATCH_TOLERANCE_S = 2.5e-3
"""Largest stamp difference at which an estimate and a truth sample are compared, s."""
AXES = ("x", "y", "z")


@dataclass(frozen=True)
class EstimateErrors:
    """Estimate minus truth at matched stamps, with the estimate's own sigmas.

    position: ENU m; velocity: body m/s; attitude: rotation vector of ``q_est q_truth^-1``
    (rad, map frame, the frame of the pose covariance of nav_msgs/Odometry).
    """

    time: FloatArray
    position: FloatArray
    position_sigma: FloatArray
    velocity: FloatArray
    velocity_sigma: FloatArray
    attitude: FloatArray
    attitude_sigma: FloatArray

    def inside_three_sigma(self) -> dict[str, float]:
        """Fraction of samples with |error| <= 3 sigma, per quantity and axis."""
        fractions = {}
        for name in ("position", "velocity", "attitude"):
            error = getattr(self, name)
            sigma = getattr(self, f"{name}_sigma")
            inside = np.abs(error) <= 3.0 * sigma
            for axis, column in zip(AXES, inside.T, strict=True):
                fractions[f"{name}_{axis}"] = float(column.mean()) if len(column) else float("nan")
        return fractions

    def rms(self) -> dict[str, float]:
        """RMS error per quantity and axis (m, m/s, rad)."""
        return {f"{name}_{axis}": (float(np.sqrt(np.mean(column**2))) if len(column)
                                   else float("nan"))
                for name in ("position", "velocity", "attitude")
                for axis, column in zip(AXES, getattr(self, name).T, strict=True)}


IndexArray = NDArray[np.int_]


def match(estimate: OdometrySeries, truth: OdometrySeries) -> tuple[IndexArray, IndexArray]:
    """Index pairs (estimate, truth) whose stamps differ by at most ``MATCH_TOLERANCE_S``."""
    if not len(estimate) or not len(truth):
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    right = np.clip(np.searchsorted(truth.time, estimate.time), 1, len(truth) - 1)
    left = right - 1
    nearest = np.where(np.abs(truth.time[left] - estimate.time)
                       <= np.abs(truth.time[right] - estimate.time), left, right)
    if len(truth) == 1:
        nearest = np.zeros(len(estimate), dtype=int)
    close = np.abs(truth.time[nearest] - estimate.time) <= MATCH_TOLERANCE_S
    return np.flatnonzero(close), nearest[close]


def estimate_errors(estimate: OdometrySeries, truth: OdometrySeries) -> EstimateErrors:
    """Errors of the estimate at the stamps both series share."""
    e, t = match(estimate, truth)
    relative = Q.multiply(estimate.attitude[e], Q.conjugate(truth.attitude[t]))
    return EstimateErrors(
        time=estimate.time[e],
        position=estimate.position[e] - truth.position[t],
        position_sigma=np.sqrt(np.maximum(estimate.pose_variance[e, :3], 0.0)),
        velocity=estimate.velocity_body[e] - truth.velocity_body[t],
        velocity_sigma=np.sqrt(np.maximum(estimate.twist_variance[e, :3], 0.0)),
        attitude=Q.to_rotation_vector(Q.canonical(relative)),
        attitude_sigma=np.sqrt(np.maximum(estimate.pose_variance[e, 3:6], 0.0)),
    )


def tracking_error(truth: OdometrySeries,
                   reference: OdometrySeries) -> tuple[FloatArray, FloatArray]:
    """(stamps, truth minus reference position in m) over the span of the reference, with the
    reference interpolated linearly at the truth stamps."""
    if len(reference) < 2 or not len(truth):
        return np.zeros(0), np.zeros((0, 3))
    inside = (truth.time >= reference.time[0]) & (truth.time <= reference.time[-1])
    time = truth.time[inside]
    interpolated = np.column_stack([np.interp(time, reference.time, reference.position[:, k])
                                    for k in range(3)])
    return time, truth.position[inside] - interpolated


# ----- barometer and magnetometer against the ground truth ------------------------------------
def standard_pressure_altitude(pressure_pa: ArrayLike) -> FloatArray:
    """Height (m) of static pressures (Pa) in the ICAO standard atmosphere, element-wise:
    ``T0 / L (1 - (p / p0) ** (R L / g0))``, i.e. ``44330.77 (1 - (p / 101325) ** 0.190263)``
    (the array form of ``variational_sim.sensors.barometer.standard_pressure_altitude``, the
    estimator's conversion); NaN for a pressure <= 0."""
    pressure = np.asarray(pressure_pa, dtype=float)
    ratio = np.where(pressure > 0.0, pressure, np.nan) / STANDARD_SEA_LEVEL_PRESSURE
    exponent = AIR_GAS_CONSTANT * LAPSE_RATE / STANDARD_GRAVITY
    result: FloatArray = STANDARD_SEA_LEVEL_TEMPERATURE / LAPSE_RATE * (
        1.0 - np.power(ratio, exponent))
    return result


def _inside(times: FloatArray, truth: OdometrySeries) -> NDArray[np.bool_]:
    if not len(truth):
        return np.zeros(len(times), dtype=bool)
    inside: NDArray[np.bool_] = (times >= truth.time[0]) & (times <= truth.time[-1])
    return inside


def barometer_height_error(barometer: SensorSamples, truth: OdometrySeries,
                           datum_height_m: float) -> tuple[FloatArray, FloatArray]:
    """(stamps, standard pressure altitude of each reading minus the true WGS-84 ellipsoidal
    height ``datum_height_m + up``, m) over the span of the truth, interpolated linearly at
    the reading stamps. The difference holds the geoid height, the day's atmosphere, the
    drift, ground effect, faults and noise: all the errors the estimator's offset state and
    noise model must cover."""
    inside = _inside(barometer.time, truth)
    time = barometer.time[inside]
    height = datum_height_m + np.interp(time, truth.time, truth.position[:, 2])
    return time, standard_pressure_altitude(barometer.values[inside]) - height


def interpolate_attitude(truth: OdometrySeries, times: FloatArray) -> FloatArray:
    """Truth attitudes [x, y, z, w] at ``times`` (s, inside the truth's span): the rotation
    between the two neighbouring samples at constant rate (slerp)."""
    if not len(times) or len(truth) == 1:
        return np.tile(truth.attitude[0] if len(truth) else [0.0, 0.0, 0.0, 1.0],
                       (len(times), 1))
    right = np.clip(np.searchsorted(truth.time, times, side="right"), 1, len(truth) - 1)
    left = right - 1
    span = truth.time[right] - truth.time[left]
    fraction = np.clip((times - truth.time[left]) / np.where(span > 0.0, span, 1.0), 0.0, 1.0)
    start = truth.attitude[left]
    step = Q.to_rotation_vector(Q.multiply(Q.conjugate(start), truth.attitude[right]))
    return Q.multiply(start, Q.from_rotation_vector(fraction[:, None] * step))


def declination(earth_field_ned_t: Sequence[float]) -> float:
    """Declination (rad, positive east of true north) of a field (north, east, down)."""
    return math.atan2(earth_field_ned_t[1], earth_field_ned_t[0])


def wrap_angle(angle: ArrayLike) -> FloatArray:
    """Angles (rad) wrapped to [-pi, pi)."""
    result: FloatArray = (np.asarray(angle, dtype=float) + np.pi) % (2.0 * np.pi) - np.pi
    return result


def magnetometer_heading_error(
        magnetometer: SensorSamples, truth: OdometrySeries,
        earth_field_ned_t: Sequence[float],
        imu_mount_rotation_xyzw: Sequence[float] = (0.0, 0.0, 0.0, 1.0),
) -> tuple[FloatArray, FloatArray]:
    """(stamps, yaw error of the magnetometer as a compass, rad) over the span of the truth.

    Each reading (imu_link) is turned into base_link with the IMU mount and levelled with the
    TRUE roll and pitch (interpolated at its stamp); the direction of its horizontal part in
    the levelled body frame gives the yaw the reading implies once the declination of the
    simulator's field is applied, and the error is that yaw minus the true yaw (ENU, positive
    counter-clockwise, wrapped to [-pi, pi)). Written in the map frame this is the angle
    from the horizontal reading (fully rotated with the true attitude) to magnetic north,
    ``90 deg - declination``: the sign of the simulator's ``magnetometer_heading_error_deg``
    (positive: a compass pulls the yaw counter-clockwise). Zero for a clean field; noise,
    disturbances and faults show up here."""
    inside = _inside(magnetometer.time, truth)
    time = magnetometer.time[inside]
    attitude = interpolate_attitude(truth, time)
    body = Q.rotate(np.asarray(imu_mount_rotation_xyzw, dtype=float),
                    magnetometer.values[inside])
    in_map = Q.rotate(attitude, body)
    magnetic_north = math.atan2(earth_field_ned_t[0], earth_field_ned_t[1])  # ENU angle
    return time, wrap_angle(magnetic_north - np.arctan2(in_map[:, 1], in_map[:, 0]))


# ----- the estimator's own counters -----------------------------------------------------------
SOURCE_STATISTICS = ("nis_mean", "last_test_ratio")
"""Per-source diagnostics of the estimator that are not counts."""


def estimator_sources(values: dict[str, tuple[FloatArray, FloatArray]]
                      ) -> dict[str, dict[str, float]]:
    """The final value of every per-source counter of the estimator's diagnostics.

    Aiding sources are the names ``S`` of its ``S_nis_mean`` keys (gnss_position, barometer,
    ...); each numeric key ``S_<counter>`` goes to the longest such ``S`` (e.g.
    ``barometer_accepted`` -> ``barometer: {accepted: ...}``); the last sample is the
    final count (an int; the statistics of ``SOURCE_STATISTICS`` stay floats)."""
    suffix = "_nis_mean"
    sources = sorted((key[:-len(suffix)] for key in values if key.endswith(suffix)),
                     key=len, reverse=True)
    result: dict[str, dict[str, float]] = {source: {} for source in sorted(sources)}
    for key, (_, samples) in values.items():
        if not len(samples):
            continue
        source = next((s for s in sources if key.startswith(f"{s}_")), None)
        if source is not None:
            name, value = key[len(source) + 1:], float(samples[-1])
            count = name not in SOURCE_STATISTICS and value.is_integer()
            result[source][name] = int(value) if count else value
    return result
