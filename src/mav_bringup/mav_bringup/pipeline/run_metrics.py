"""A closed-loop run's figures of merit, time series and update table, from its
``LoopRecord``.

The estimate is compared with the truth as the ``mav-sim`` report compares them
(``graph.metrics``: ``estimate_errors`` for the errors and the fraction inside 3 sigma,
``tracking_error`` for the truth against the controller's reference), on the same samples
its bag holds. On top: errors truth minus estimate in ENU with the full covariances of
``EstimationSession.estimate()`` (position, velocity, and the attitude as the rotation
vector phi of ``C_true = (I + [phi x]) C_hat``), their NEES (3 dof each), and the updates'
NIS per source.
"""

from __future__ import annotations

import math

import numpy as np

from mav_bringup.campaign.columns import (
    ACCEPTED,
    DOF,
    ERROR_KINDS,
    ESTIMATE_POSITION_COLUMNS,
    NIS,
    SOURCE,
    TIME,
    TRACKING_COLUMNS,
    TRUTH_POSITION_COLUMNS,
    UPDATE_TIME,
    error_column,
    nees_column,
    sigma_column,
)
from mav_bringup.graph.metrics import AXES, estimate_errors, tracking_error
from mav_bringup.pipeline.loop_record import LoopRecord, position_series
from mav_geometry.arrays import FloatArray

Metrics = dict[str, float | int | bool | str]


class EstimateComparison:
    """Every estimator output against the truth at its stamp: errors (n, 3) per kind,
    sigmas (n, 3) and NEES (n,)."""

    def __init__(self, record: LoopRecord) -> None:
        estimates = record.estimates
        self.time = np.array([row[0] for row in estimates.rows])
        report = estimate_errors(estimates.series(), estimates.truth_series())
        self.inside = report.inside_three_sigma()  # the mav-sim report's figure
        covariances = estimates.covariance_array()
        self.errors = {
            "position": -report.position,  # the report's errors are estimate minus truth
            "velocity": estimates.truth_velocity_enu() - estimates.velocity_array(),
            "attitude": -report.attitude,
        }
        self.sigmas = {kind: np.sqrt(np.maximum(np.diagonal(covariances[:, k], axis1=1,
                                                            axis2=2), 0.0))
                       for k, kind in enumerate(ERROR_KINDS)}
        self.nees = {kind: nees(self.errors[kind], covariances[:, k])
                     for k, kind in enumerate(ERROR_KINDS)}

    def __len__(self) -> int:
        return len(self.time)


def nees(errors: FloatArray, covariances: FloatArray) -> FloatArray:
    """``e^T P^-1 e`` per row of errors (n, d) and covariances (n, d, d)."""
    if not len(errors):
        return np.zeros(0)
    solved = np.linalg.solve(covariances, errors[..., None])[..., 0]
    result: FloatArray = np.einsum("ij,ij->i", errors, solved)
    return result


def _rms(values: FloatArray) -> float:
    return float(np.sqrt(np.mean(values**2))) if len(values) else math.nan


def _mean(values: FloatArray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def run_metrics(record: LoopRecord, compared: EstimateComparison) -> Metrics:
    """The run's figures of merit (see ``LoopResult``; units in the names)."""
    position, velocity = compared.errors["position"], compared.errors["velocity"]
    attitude = compared.errors["attitude"]
    distance = np.linalg.norm(position, axis=1)
    metrics: Metrics = {
        "sim_time_s": record.sim_time_s,
        "wall_time_s": record.wall_time_s,
        "real_time_factor": (record.sim_time_s / record.wall_time_s if record.wall_time_s > 0
                             else math.inf),
        "filter_started": bool(len(compared)),
        "start_time_s": float(compared.time[0]) if len(compared) else math.nan,
        "crashed": record.crashed,
        "touchdowns": record.touchdowns,
        "position_rms_m": _rms(distance),
        "position_max_m": float(distance.max()) if len(distance) else math.nan,
        "horizontal_rms_m": _rms(np.linalg.norm(position[:, :2], axis=1)),
        "vertical_rms_m": _rms(position[:, 2]),
        "velocity_rms_mps": _rms(np.linalg.norm(velocity, axis=1)),
        "attitude_rms_deg": math.degrees(_rms(np.linalg.norm(attitude, axis=1))),
        "yaw_rms_deg": math.degrees(_rms(attitude[:, 2])),
        "inside_three_sigma": min(compared.inside.values()),
        **{f"inside_three_sigma_{key}": value for key, value in compared.inside.items()},
        **{f"nees_{kind}_mean": _mean(compared.nees[kind]) for kind in ERROR_KINDS},
        **_tracking(record),
        **_update_metrics(record),
        **{f"estimator_{key}": count for key, count in sorted(record.counts.items())},
        **{f"resets_{kind}": count for kind, count in sorted(record.resets.items())},
    }
    return metrics


def _tracking(record: LoopRecord) -> Metrics:
    """RMS and largest distance of the truth from the reference (``graph.metrics``)."""
    _, error = tracking_error(position_series(record.truth), position_series(record.reference))
    distance = np.linalg.norm(error, axis=1)
    return {"tracking_rms_m": _rms(distance),
            "tracking_max_m": float(distance.max()) if len(distance) else math.nan}


def _update_metrics(record: LoopRecord) -> Metrics:
    """Per source: mean NIS of the accepted updates (the filter's own ``nis_mean``), and the
    accepted and rejected update counts."""
    metrics: Metrics = {}
    updates = list(record.updates.values())
    for source in sorted({row[1] for row in updates}):
        rows = [row for row in updates if row[1] == source]
        accepted = np.array([row[2] for row in rows if row[4]])
        metrics[f"nis_mean_{source}"] = _mean(accepted)
        metrics[f"accepted_{source}"] = len(accepted)
        metrics[f"rejected_{source}"] = len(rows) - len(accepted)
    return metrics


def time_series(record: LoopRecord, compared: EstimateComparison) -> dict[str, FloatArray]:
    """Columns at the series instants (the first lock-step boundary at or after each
    multiple of the series period: the multiples themselves when the series rate divides the
    lock-step rate): ``t_s``; truth and estimate position e/n/u (m);
    per kind the errors truth minus estimate (ENU) and their sigmas; the NEES; the tracking
    error (reference minus truth). Estimate columns are NaN before the filter starts."""
    rows = np.array(record.series_rows, dtype=float).reshape(-1, 8)
    index = rows[:, 7].astype(int)
    estimates = record.estimates.series()

    def at_outputs(values: FloatArray) -> FloatArray:
        """Values of the outputs at the series instants (NaN where there is none)."""
        taken = np.full((len(index), *values.shape[1:]), np.nan)
        taken[index >= 0] = values[index[index >= 0]]
        return taken

    columns: dict[str, FloatArray] = {TIME: rows[:, 0]}
    estimate_position = at_outputs(estimates.position)
    for k in range(3):
        columns[TRUTH_POSITION_COLUMNS[k]] = rows[:, 1 + k]
        columns[ESTIMATE_POSITION_COLUMNS[k]] = estimate_position[:, k]
    for kind in ERROR_KINDS:
        errors, sigmas = at_outputs(compared.errors[kind]), at_outputs(compared.sigmas[kind])
        for k, axis in enumerate(AXES):
            columns[error_column(kind, axis)] = errors[:, k]
            columns[sigma_column(kind, axis)] = sigmas[:, k]
    for kind in ERROR_KINDS:
        columns[nees_column(kind)] = at_outputs(compared.nees[kind])
    for k, name in enumerate(TRACKING_COLUMNS):
        columns[name] = rows[:, 4 + k] - rows[:, 1 + k]
    return columns


def update_table(record: LoopRecord) -> dict[str, np.ndarray]:
    """One row per measurement update: ``t_s`` (its measurement time, s), ``source``,
    ``nis``, ``dof``, ``accepted``."""
    updates = list(record.updates.values())
    return {
        UPDATE_TIME: np.array([row[0] for row in updates], dtype=float),
        SOURCE: np.array([row[1] for row in updates], dtype=str),
        NIS: np.array([row[2] for row in updates], dtype=float),
        DOF: np.array([row[3] for row in updates], dtype=int),
        ACCEPTED: np.array([row[4] for row in updates], dtype=bool),
    }
