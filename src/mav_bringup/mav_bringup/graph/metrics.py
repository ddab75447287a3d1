"""Figures of merit of a closed-loop run: tracking of the reference by the ground truth, and
the estimate's errors against the ground truth with the fraction inside its 3-sigma bounds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mav_bringup.graph.series import OdometrySeries
from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray

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
