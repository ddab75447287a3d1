"""The closed loop of ``mav-sim`` stepped in one Python loop: the same simulator, estimator
and flight-control cores the nodes run (``cores``), with the same parameter files
(``node_parameters``), and no rclpy, DDS, messages or bag.

Each pass does what one lock-step boundary of the graph does, in the order the graph's
executor delivers it: the simulator steps to the next boundary (``lockstep_period_s``); each
reading that falls due goes to the estimator at once (``sensor_feed``), and an IMU sample
the session used may make an odometry output (``OutputSchedule``, as the node decimates);
the controller takes each odometry (the estimate's, made after the boundary's clock reached
it, at the boundary's time; the ground truth's, published before that clock, at the
previous boundary's), then ticks at the boundary and its command holds over the next pass.
So for a seed the pipeline flies the trajectory ``mav-sim`` flies.

A run stops early when the vehicle crashes: it hits the ground (a touchdown faster than
``CRASH_SPEED_MPS``), or the truth leaves the reference by more than ``DIVERGED_M`` (or
stops being finite).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mav_bringup.graph.shortcuts import shortcut_parameters
from mav_bringup.pipeline.cores import Cores, build_cores
from mav_bringup.pipeline.loop_record import LoopRecord
from mav_bringup.pipeline.node_parameters import (
    GraphParameters,
    read_graph_parameters,
)
from mav_bringup.pipeline.run_metrics import (
    EstimateComparison,
    run_metrics,
    time_series,
    update_table,
)
from trident_ekf.adapters import ImuSample, deliver

DIVERGED_M = 100.0
"""Distance from the reference beyond which the vehicle is lost (a crash), m."""
CRASH_SPEED_MPS = 1.0
"""Downward speed at a touchdown from which it is a crash, m/s: at the start of the climb
a vehicle whose thrust just passes its weight may lift a few millimetres and settle back,
which is no crash."""
PROGRESS_EVERY_S = 1.0
"""Sim time between two ``progress`` calls, s."""


@dataclass(frozen=True)
class LoopOptions:
    """One run: the ``mav-sim`` options of one vehicle. ``overrides``: node
    (``simulator``, ``controller``, ``trident_ekf``) -> parameter -> value, applied after the
    parameter files and these options, exactly like ``mav-sim --set NODE.PARAM=VALUE``."""

    vehicle: str = "quadrotor_x.yaml"
    scenario: str | None = None
    """A name in config/scenarios/ or a path; None: the simulator parameter file's."""
    trajectory: str = "figure_eight"
    odometry_source: str = "estimate"
    seed: int = 0
    duration_s: float = 60.0
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def node_overrides(self) -> dict[str, dict[str, Any]]:
        """Per node: what the options set (as ``mav-sim``'s do), then ``overrides``."""
        nodes = shortcut_parameters(
            vehicle=self.vehicle, trajectory=self.trajectory,
            odometry_source=self.odometry_source, seed=self.seed, duration_s=self.duration_s,
            scenario=self.scenario)
        for node, values in self.overrides.items():
            nodes.setdefault(node, {}).update(values)
        return nodes


@dataclass
class LoopResult:
    """A run's figures of merit (flat, JSON-able; names carry units), its time series
    (equal-length 1-D columns at the series rate) and its measurement updates (one row per
    update: t_s, source, nis, dof, accepted)."""

    metrics: dict[str, float | int | bool | str]
    series: dict[str, np.ndarray]
    updates: dict[str, np.ndarray]


def run_closed_loop(options: LoopOptions, *, series_rate_hz: float = 10.0,
                    progress: Callable[[float], None] | None = None) -> LoopResult:
    """Fly ``options`` to ``duration_s`` of sim time (or a crash); ``progress`` gets the sim
    time (s) every ``PROGRESS_EVERY_S``. ValueError for bad options: an unknown vehicle,
    scenario, node or parameter, or an invalid value (the message names it)."""
    if not (math.isfinite(series_rate_hz) and series_rate_hz > 0.0):
        raise ValueError(f"series rate must be a finite number > 0 Hz, got {series_rate_hz!r}")
    parameters = read_graph_parameters(options.node_overrides())
    duration_s = parameters.simulator.values["duration_s"]
    if not duration_s > 0.0:  # the simulator's 0 runs forever
        raise ValueError(f"duration must be > 0 s, got {duration_s!r} (simulator.duration_s)")
    cores = build_cores(parameters)
    record = LoopRecord()
    start = time.perf_counter()
    _fly(cores, parameters, record, series_rate_hz, progress)
    record.wall_time_s = time.perf_counter() - start
    record.touchdowns = cores.simulator.plant.touchdowns
    record.counts = cores.session.counts()
    record.resets = dict(cores.session.resets)
    compared = EstimateComparison(record)
    return LoopResult(run_metrics(record, compared), time_series(record, compared),
                      update_table(record))


def _fly(cores: Cores, parameters: GraphParameters, record: LoopRecord,
         series_rate_hz: float, progress: Callable[[float], None] | None) -> None:
    """The lock-step passes to the end of the run (see the module)."""
    simulator, session, schedule, feed, flight = (cores.simulator, cores.session,
                                                  cores.schedule, cores.feed, cores.flight)
    settings = parameters.simulator.settings
    boundary_every, truth_every = settings.boundary_every, settings.truth_every
    step_ns = round(simulator.step_size * 1e9)
    last_step = math.ceil(parameters.simulator.values["duration_s"] / simulator.step_size
                          - 1e-9)
    on_estimate = parameters.controller.values["odometry_source"] == "estimate"
    telemetry_every = parameters.controller.settings.telemetry_every
    series_every_ns = max(1, round(1e9 / series_rate_hz))
    estimates = record.estimates
    next_series_ns = series_every_ns  # a row at the first boundary at or after each multiple
    next_progress = PROGRESS_EVERY_S
    previous_ns = 0
    control_ticks = 0
    while simulator.steps < last_step:
        boundary_ns = min(simulator.steps + boundary_every, last_step) * step_ns
        output_index = -1
        while simulator.steps * step_ns < boundary_ns:
            for sensor, reading in simulator.step().readings:
                for sample in feed.samples(sensor, reading):
                    used = deliver(session, sample)
                    if isinstance(sample, ImuSample) and used and schedule.due(sample.stamp_ns):
                        estimate = session.estimate()
                        output_index = len(estimates.rows)
                        estimates.add(sample.stamp_ns, estimate, simulator)
                        if on_estimate:
                            flight.odometry(sample.stamp_ns, boundary_ns, estimate["attitude"],
                                            estimate["position"], np.concatenate(
                                                [estimate["angular_body"],
                                                 estimate["linear_body"]]))
            if simulator.steps % truth_every == 0:
                plant = simulator.plant
                stamp_ns = simulator.steps * step_ns
                record.truth.append((stamp_ns * 1e-9, *plant.position))
                if not on_estimate:
                    flight.odometry(stamp_ns, previous_ns, plant.orientation, plant.position,
                                    plant.twist)
        record.add_updates(session.drain_updates())
        tick = flight.tick(boundary_ns)
        if tick.reference is not None:
            control_ticks += 1
            if (control_ticks - 1) % telemetry_every == 0:
                record.reference.append((boundary_ns * 1e-9, *tick.reference.position.tolist()))
        simulator.set_command(tick.rotor_speeds,
                              tick.tilt_angles if tick.tilt_angles.size else None)
        if boundary_ns >= next_series_ns:
            record.add_series_row(boundary_ns * 1e-9, simulator, tick.reference, output_index)
            next_series_ns = (boundary_ns // series_every_ns + 1) * series_every_ns
        previous_ns = boundary_ns
        record.sim_time_s = simulator.time_s
        if _crashed(simulator, tick.reference):
            record.crashed = True
            break
        if progress is not None and record.sim_time_s >= next_progress:
            next_progress += PROGRESS_EVERY_S
            progress(record.sim_time_s)
    if progress is not None:
        progress(record.sim_time_s)


def _crashed(simulator: Any, reference: Any) -> bool:
    """A touchdown faster than ``CRASH_SPEED_MPS``, a non-finite truth, or the truth farther
    than ``DIVERGED_M`` from the reference."""
    plant = simulator.plant
    position = plant.position
    if plant.impact_speed_mps > CRASH_SPEED_MPS or not all(map(math.isfinite, position)):
        return True
    return reference is not None and math.dist(position, reference.position) > DIVERGED_M
