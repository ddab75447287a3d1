"""The report of a run computed while its bag streams past, in memory bounded whatever the
run's length.

Every estimate, barometer and magnetometer sample is compared with the ground truth, and
every truth sample with the reference, by the functions of ``graph.metrics`` applied a chunk
at a time: a sample waits until the stream it is compared with has a later sample (or has
ended), and each such stream is kept over a short window (its last ``RETAIN_S`` s, and back
to the oldest waiting sample). The figures of merit go into ``RunningStats`` and the plotted
series into ``MinMaxDecimator``s (``mav_ros_common.streams``); the full-rate data stays in
the bag. Applied to a whole ``RunSeries`` at once (``from_series``) it gives the batch
metrics; streamed (``accumulate_bag``), the same numbers to round-off.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from rosbags.rosbag2 import Reader

from mav_bringup.graph.metrics import (
    barometer_height_error,
    estimate_errors,
    magnetometer_heading_error,
    tracking_error,
)
from mav_bringup.graph.series import (
    OdometrySeries,
    RunSeries,
    SensorSamples,
    SensorSite,
    fixes_enu,
    run_messages,
    run_topics,
    sensor_samples,
)
from mav_geometry.arrays import FloatArray
from mav_ros_common.streams import PLOT_BUCKETS, MinMaxDecimator, RunningStats

RETAIN_S = 2.0
"""Stamp time (s) a compared-with stream is kept behind its latest sample: a sample stamped
earlier than that when it arrives is not compared. Twice the simulator's largest barometer
or magnetometer latency (1 s); the truth, estimate and reference carry their publication
time."""
FLUSH_MESSAGES = 5000
"""Messages read from the bag between two updates of the statistics (a vectorised chunk)."""

Samples = TypeVar("Samples", OdometrySeries, SensorSamples)


def _select(samples: Samples, index: Any) -> Samples:
    return type(samples)(*(getattr(samples, f.name)[index] for f in fields(samples)))


def _join(first: Samples, second: Samples) -> Samples:
    return type(first)(*(np.concatenate([getattr(first, f.name), getattr(second, f.name)])
                         for f in fields(first)))


class _Anchor:
    """A stream others are compared with (the truth, the reference): its recent samples and
    whether it has ended."""

    def __init__(self) -> None:
        self.window = OdometrySeries.from_rows([])
        self.ended = False

    def ready(self, waiting: Samples) -> tuple[Samples, Samples]:
        """(the samples that can be compared now, those that still wait): a sample can once
        the anchor has a later one, or has ended."""
        if self.ended:
            return waiting, _select(waiting, slice(0, 0))
        latest = self.window.time[-1] if len(self.window) else -np.inf
        now = waiting.time < latest
        return _select(waiting, now), _select(waiting, ~now)

    def prune(self, waiting: list[FloatArray]) -> None:
        """Keep the last ``RETAIN_S`` s, and back to the sample before the oldest waiting
        one (its left neighbour)."""
        if not len(self.window):
            return
        oldest = min((float(t.min()) for t in waiting if len(t)),
                     default=self.window.time[-1] - RETAIN_S)
        oldest = min(oldest, self.window.time[-1] - RETAIN_S)
        first = max(int(np.searchsorted(self.window.time, oldest)) - 1, 0)
        self.window = _select(self.window, slice(first, None))


class _Diagnostic:
    """One numeric diagnostic value of one status: statistics, last value and, if plotted,
    its series (stamp s, value)."""

    def __init__(self, plotted: bool, buckets: int) -> None:
        self.stats = RunningStats()
        self.last = np.nan
        self.series = MinMaxDecimator(2, buckets) if plotted else None

    def add(self, stamps: FloatArray, values: FloatArray) -> None:
        if len(values):
            self.stats.add(values)
            self.last = float(values[-1])
            if self.series is not None:
                self.series.add(np.column_stack([stamps, values]))

    def columns(self) -> tuple[FloatArray, ...]:
        """(stamps s, values) of a plotted value, decimated."""
        if self.series is None:
            raise LookupError("a diagnostic value the RunAccumulator was not told to plot")
        return self.series.columns()


class RunAccumulator:
    """Statistics and plot series of one vehicle's run (``site``: what the sensor checks
    need; ``plotted``: the (status, key) diagnostics whose series are kept, None: all of
    them). Feed it chunks in any order within ``RETAIN_S`` of stamp time, call ``settle``
    between batches of chunks and ``finish`` at the end."""

    def __init__(self, site: SensorSite, plotted: Collection[tuple[str, str]] | None = None,
                 buckets: int = PLOT_BUCKETS) -> None:
        self.site = site
        self.plotted = None if plotted is None else frozenset(plotted)
        self.buckets = buckets
        self.topic_counts: dict[str, int] = {}
        self._truth, self._reference = _Anchor(), _Anchor()
        self._estimates = OdometrySeries.from_rows([])
        self._tracked = OdometrySeries.from_rows([])  # truth waiting for the reference
        self._barometer = SensorSamples.empty()
        self._magnetometer = SensorSamples.empty(3)
        # figures of merit
        self.estimate_error = RunningStats(9)  # errors: position, velocity, attitude x y z
        self.inside = RunningStats(9)  # 1 where |error| <= 3 sigma
        self.tracking = RunningStats()  # |truth - reference| (m)
        self.barometer_readings = 0
        self.barometer_error = RunningStats()  # pressure altitude - true height (m)
        self.magnetometer_readings = 0
        self.heading_error = RunningStats()  # magnetometer yaw error (rad)
        self.gnss_fixes = 0
        self.gnss_no_fix = 0
        self.diagnostics: dict[str, dict[str, _Diagnostic]] = defaultdict(dict)
        # plotted series (time first)
        self.paths = {name: MinMaxDecimator(4, buckets)  # t, x, y, z (m)
                      for name in ("truth", "estimate", "reference", "fixes")}
        self.error_series = [MinMaxDecimator(3, buckets)  # t, error, sigma; per ERROR column
                             for _ in range(9)]
        self.tracking_series = MinMaxDecimator(5, buckets)  # t, error x y z, norm (m)
        self.barometer_series = MinMaxDecimator(2, buckets)  # t, height error (m)
        self.heading_series = MinMaxDecimator(2, buckets)  # t, yaw error (rad)

    # ----- input ------------------------------------------------------------------------------
    def add_truth(self, chunk: OdometrySeries) -> None:
        self._truth.window = _join(self._truth.window, chunk)
        self._tracked = _join(self._tracked, chunk)
        self._path("truth", chunk)

    def add_estimate(self, chunk: OdometrySeries) -> None:
        self._estimates = _join(self._estimates, chunk)
        self._path("estimate", chunk)

    def add_reference(self, chunk: OdometrySeries) -> None:
        self._reference.window = _join(self._reference.window, chunk)
        self._path("reference", chunk)

    def add_fixes(self, time: FloatArray, enu: FloatArray, valid: Any) -> None:
        self.gnss_fixes += len(time)
        self.gnss_no_fix += int(np.count_nonzero(~valid))
        self.paths["fixes"].add(np.column_stack([time, enu])[valid])

    def add_barometer(self, chunk: SensorSamples) -> None:
        self.barometer_readings += len(chunk)
        self._barometer = _join(self._barometer, chunk)

    def add_magnetometer(self, chunk: SensorSamples) -> None:
        self.magnetometer_readings += len(chunk)
        self._magnetometer = _join(self._magnetometer, chunk)

    def add_diagnostic(self, name: str, key: str, stamps: FloatArray,
                       values: FloatArray) -> None:
        """Samples of one numeric value of the status ``name``, in stamp order."""
        values_of = self.diagnostics[name]
        if key not in values_of:
            plotted = self.plotted is None or (name, key) in self.plotted
            values_of[key] = _Diagnostic(plotted, self.buckets)
        values_of[key].add(stamps, values)

    def _path(self, name: str, chunk: OdometrySeries) -> None:
        self.paths[name].add(np.column_stack([chunk.time, chunk.position]))

    @property
    def held(self) -> int:
        """Samples held for comparisons now (windows and waiting samples)."""
        return (len(self._truth.window) + len(self._reference.window) + len(self._estimates)
                + len(self._tracked) + len(self._barometer) + len(self._magnetometer))

    # ----- comparison -------------------------------------------------------------------------
    def settle(self) -> None:
        """Compare every sample whose neighbours in the compared-with stream are known, and
        drop what no later sample needs."""
        truth = self._truth
        now, self._estimates = truth.ready(self._estimates)
        self._compare_estimates(now)
        now_baro, self._barometer = truth.ready(self._barometer)
        self._compare_barometer(now_baro)
        now_mag, self._magnetometer = truth.ready(self._magnetometer)
        self._compare_magnetometer(now_mag)
        now_tracked, self._tracked = self._reference.ready(self._tracked)
        self._compare_tracking(now_tracked)
        truth.prune([self._estimates.time, self._barometer.time, self._magnetometer.time])
        self._reference.prune([self._tracked.time])

    def end(self, truth: bool, reference: bool) -> None:
        """Say which compared-with streams have no more samples (their waiting samples are
        then compared with what there is)."""
        self._truth.ended |= truth
        self._reference.ended |= reference

    def finish(self) -> RunAccumulator:
        """The streams have ended: compare what is left."""
        self.end(truth=True, reference=True)
        self.settle()
        return self

    def _compare_estimates(self, estimates: OdometrySeries) -> None:
        errors = estimate_errors(estimates, self._truth.window)
        quantities = ("position", "velocity", "attitude")
        error = np.hstack([getattr(errors, name) for name in quantities])
        sigma = np.hstack([getattr(errors, f"{name}_sigma") for name in quantities])
        self.estimate_error.add(error)
        self.inside.add(np.abs(error) <= 3.0 * sigma)
        for k, series in enumerate(self.error_series):
            series.add(np.column_stack([errors.time, error[:, k], sigma[:, k]]))

    def _compare_tracking(self, truth: OdometrySeries) -> None:
        time, error = tracking_error(truth, self._reference.window)
        norm = np.linalg.norm(error, axis=1)
        self.tracking.add(norm)
        self.tracking_series.add(np.column_stack([time, error, norm]))

    def _compare_barometer(self, readings: SensorSamples) -> None:
        time, error = barometer_height_error(readings, self._truth.window, self.site.datum[2])
        self.barometer_error.add(error)
        self.barometer_series.add(np.column_stack([time, error]))

    def _compare_magnetometer(self, readings: SensorSamples) -> None:
        field = self.site.earth_field_ned_T
        if field is None:
            return
        time, error = magnetometer_heading_error(readings, self._truth.window, field,
                                                 self.site.imu_mount_rotation_xyzw)
        self.heading_error.add(error)
        self.heading_series.add(np.column_stack([time, error]))

    # ----- whole series -----------------------------------------------------------------------
    @classmethod
    def from_series(cls, series: RunSeries, plotted: Collection[tuple[str, str]] | None = None,
                    buckets: int = PLOT_BUCKETS) -> RunAccumulator:
        """The accumulator of a run read whole (``read_run``)."""
        accumulator = cls(series.site, plotted, buckets)
        accumulator.topic_counts = dict(series.topic_counts)
        accumulator.add_truth(series.truth)
        accumulator.add_estimate(series.estimate)
        accumulator.add_reference(series.reference)
        accumulator.add_fixes(series.fix_time, series.fix_enu, series.fix_valid)
        accumulator.add_barometer(series.barometer)
        accumulator.add_magnetometer(series.magnetometer)
        for name, values in series.diagnostics.items():
            for key, (stamps, samples) in values.items():
                accumulator.add_diagnostic(name, key, stamps, samples)
        return accumulator.finish()


def accumulate_bag(bag: Path, site: SensorSite, namespace: str = "",
                   plotted: Collection[tuple[str, str]] | None = None,
                   buckets: int = PLOT_BUCKETS) -> RunAccumulator:
    """Stream a run's bag (``namespace``: one vehicle of a multi-vehicle run, as in
    ``read_run``) through a ``RunAccumulator``: at most ``FLUSH_MESSAGES`` messages are
    held at a time."""
    accumulator = RunAccumulator(site, plotted, buckets)
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        accumulator.topic_counts = counts
        # messages of the compared-with streams still to come: at 0 they have ended
        left = {kind: sum(counts.get(topic, 0) for topic, k in run_topics(namespace).items()
                          if k == kind) for kind in ("truth", "reference")}
        rows: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for held, (kind, row) in enumerate(run_messages(reader, namespace), start=1):
            rows[kind].append(row)
            if kind in left:
                left[kind] -= 1
            if held % FLUSH_MESSAGES == 0:
                _feed(accumulator, rows, site, left)
    _feed(accumulator, rows, site, left)
    return accumulator.finish()


def _feed(accumulator: RunAccumulator, rows: dict[str, list[tuple[Any, ...]]],
          site: SensorSite, left: dict[str, int]) -> None:
    """The rows read since the last feed into the accumulator, then forgotten; then settle
    (``left``: messages of the truth and the reference still in the bag)."""
    adders: dict[str, Callable[[list[tuple[Any, ...]]], None]] = {
        "truth": lambda r: accumulator.add_truth(OdometrySeries.from_rows(r)),
        "estimate": lambda r: accumulator.add_estimate(OdometrySeries.from_rows(r)),
        "reference": lambda r: accumulator.add_reference(OdometrySeries.from_rows(r)),
        "fix": lambda r: accumulator.add_fixes(*fixes_enu(r, site.datum)),
        "barometer": lambda r: accumulator.add_barometer(sensor_samples(r, 0)),
        "magnetometer": lambda r: accumulator.add_magnetometer(sensor_samples(r, 3)),
        "diagnostics": lambda r: _feed_diagnostics(accumulator, r),
    }
    for kind, chunk in rows.items():
        adders[kind](chunk)
    rows.clear()
    accumulator.end(truth=left["truth"] <= 0, reference=left["reference"] <= 0)
    accumulator.settle()


def _feed_diagnostics(accumulator: RunAccumulator, rows: list[tuple[Any, ...]]) -> None:
    by_key: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for name, key, stamp, value in rows:
        by_key[name, key].append((stamp, value))
    for (name, key), points in by_key.items():
        table = np.array(points, dtype=float)
        accumulator.add_diagnostic(name, key, table[:, 0], table[:, 1])
