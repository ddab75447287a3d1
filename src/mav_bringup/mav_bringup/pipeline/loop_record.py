"""What a closed-loop run keeps while it runs: the ground truth at the simulator's truth
rate, every odometry output of the estimator with its covariances and the truth at the same
instant, the controller's reference at its telemetry rate (the samples ``mav-sim``'s bag
holds for its report), the instants of the run's time series, and every measurement
update."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mav_bringup.graph.samples import ODOMETRY_ROW_WIDTH, OdometrySeries
from mav_geometry.arrays import FloatArray
from trident_ekf.core.filter import UpdateResult
from variational_sim.vehicle_sim.simulator import VehicleSimulator

NAN3 = (np.nan,) * 3


def position_series(rows: list[tuple[float, float, float, float]]) -> OdometrySeries:
    """An odometry series of (stamp s, x, y, z m) rows: what a tracking comparison reads
    (the other columns NaN)."""
    table = np.full((len(rows), ODOMETRY_ROW_WIDTH), np.nan)
    if rows:
        table[:, :4] = rows
    return OdometrySeries.from_rows(table)


@dataclass
class EstimateRecord:
    """Per estimator output: its odometry row (as the node's message carries it: pose and
    twist covariance diagonals), ENU velocity, the 3x3 position, velocity and attitude
    covariances, and the truth at its stamp (position, ENU velocity, attitude)."""

    rows: list[tuple[float, ...]] = field(default_factory=list)
    velocity_enu: list[FloatArray] = field(default_factory=list)
    covariances: list[FloatArray] = field(default_factory=list)  # (3, 3, 3): p, v, attitude
    truth: list[tuple[float, ...]] = field(default_factory=list)  # p, v ENU, q [x y z w]

    def add(self, stamp_ns: int, estimate: dict[str, FloatArray],
            simulator: VehicleSimulator) -> None:
        pose_variance = estimate["pose_cov"].diagonal()
        twist_variance = estimate["twist_cov"].diagonal()
        self.rows.append((stamp_ns * 1e-9, *estimate["position"].tolist(),
                          *estimate["attitude"].tolist(), *estimate["linear_body"].tolist(),
                          *pose_variance.tolist(), *twist_variance.tolist()))
        self.velocity_enu.append(estimate["velocity"])
        self.covariances.append(np.stack([estimate["position_cov"], estimate["velocity_cov"],
                                          estimate["attitude_cov"]]))
        plant = simulator.plant
        self.truth.append((*plant.position, *plant.velocity_enu, *plant.orientation))

    def series(self) -> OdometrySeries:
        return OdometrySeries.from_rows(self.rows)

    def truth_series(self) -> OdometrySeries:
        """The truth at the output stamps, as a truth odometry series (no covariances)."""
        table = np.zeros((len(self.rows), ODOMETRY_ROW_WIDTH))
        if self.rows:
            truth = np.array(self.truth)
            table[:, 0] = np.array(self.rows)[:, 0]
            table[:, 1:4], table[:, 4:8] = truth[:, 0:3], truth[:, 6:10]
        return OdometrySeries.from_rows(table)

    def truth_velocity_enu(self) -> FloatArray:
        return np.array(self.truth).reshape(-1, 10)[:, 3:6]

    def velocity_array(self) -> FloatArray:
        return np.array(self.velocity_enu).reshape(-1, 3)

    def covariance_array(self) -> FloatArray:
        return np.array(self.covariances).reshape(-1, 3, 3, 3)


@dataclass
class LoopRecord:
    """Everything ``run_metrics`` needs of a run."""

    truth: list[tuple[float, float, float, float]] = field(default_factory=list)
    reference: list[tuple[float, float, float, float]] = field(default_factory=list)
    estimates: EstimateRecord = field(default_factory=EstimateRecord)
    series_rows: list[tuple[float, ...]] = field(default_factory=list)
    """(t s, truth e n u, reference e n u, index of the estimate output at t or -1)."""
    updates: dict[tuple[str, float], tuple[float, str, float, int, bool]] = field(
        default_factory=dict)
    """(source, measurement time s) -> (time, source, NIS, dof, accepted) of its last
    application: a delayed fix makes the filter re-apply the later measurements, whose
    new result replaces the first (as trident-replay's report settles them)."""
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    crashed: bool = False
    touchdowns: int = 0
    """Ground contacts after lifting off (a crash, or a harmless settle at the climb's start)."""
    counts: dict[str, int] = field(default_factory=dict)
    resets: dict[str, int] = field(default_factory=dict)

    def add_updates(self, updates: list[UpdateResult]) -> None:
        for u in updates:
            self.updates[u.source, u.time] = (u.time, u.source, u.nis, u.dof, u.accepted)

    def add_series_row(self, time_s: float, simulator: VehicleSimulator,
                       reference: Any, estimate_index: int) -> None:
        """A row of the time series at ``time_s``: truth now, the tick's reference (None:
        idle) and the output at this instant (-1: none)."""
        position = reference.position.tolist() if reference is not None else NAN3
        self.series_rows.append((time_s, *simulator.plant.position, *position,
                                 estimate_index))
