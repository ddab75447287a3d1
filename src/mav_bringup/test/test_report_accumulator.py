"""The report computed while a run streams past (``graph.accumulator``): it gives the numbers
of the whole-run computation, and the samples it holds do not grow with the run's length."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import numpy as np
import pytest

from mav_bringup.graph.accumulator import RETAIN_S, RunAccumulator
from mav_bringup.graph.report import summarize, summary_of
from mav_bringup.graph.series import OdometrySeries, RunSeries, SensorSamples, SensorSite
from mav_geometry import quaternion as Q
from variational_sim.sensors import barometer as baro

SITE = SensorSite((47.3977, 8.5456, 488.0), (2.1523e-05, 1.3340e-06, 4.3290e-05))
STEP_S = 0.5  # stamp time of each chunk fed
LAG_S = 0.3  # the sensors' and estimate's chunks arrive this much later than the truth's
TRUTH_HZ = 100.0


def _odometry(time: np.ndarray, rng: np.random.Generator, noise: float) -> OdometrySeries:
    n = len(time)
    position = np.column_stack([np.sin(time), np.cos(0.5 * time), 2.0 + 0.1 * time])
    attitude = Q.from_rotation_vector(np.column_stack([np.zeros((n, 2)), 0.3 * time])
                                      + rng.normal(0.0, noise, (n, 3)))
    variance = np.full((n, 6), max(noise, 1e-3) ** 2)
    return OdometrySeries(time, position + rng.normal(0.0, noise, (n, 3)), attitude,
                          rng.normal(0.0, noise, (n, 3)), variance, variance)


def _run(duration_s: float) -> RunSeries:
    """Truth at 100 Hz, the estimate 1 ms later with noise, the reference at 50 Hz, barometer
    and magnetometer readings off the truth's grid, 1 Hz simulator diagnostics."""
    rng = np.random.default_rng(7)
    truth_time = np.arange(0.0, duration_s, 1.0 / TRUTH_HZ)
    sensor_time = np.arange(0.005, duration_s, 0.02)
    up = np.interp(sensor_time, truth_time, 2.0 + 0.1 * truth_time)
    pressure = np.array([baro.troposphere_pressure(SITE.datum[2] + z + 1.5) for z in up])
    pressure += rng.normal(0.0, 3.0, len(up))
    field = rng.normal(0.0, 1e-6, (len(sensor_time), 3)) + np.array([2e-5, 0.0, -4e-5])
    stamps = np.arange(1.0, duration_s, 1.0)
    simulator = {key: (stamps, rng.normal(size=len(stamps)))
                 for key in ("energy_error_J", "barometer_offset_m", "barometer_drift_pa",
                             "magnetometer_disturbance_T", "gnss_correlated_error_east_m",
                             "gnss_correlated_error_north_m", "gnss_correlated_error_up_m")}
    return RunSeries(
        truth=_odometry(truth_time, rng, 0.0),
        estimate=_odometry(truth_time + 1e-3, rng, 0.05),
        reference=_odometry(np.arange(0.0, duration_s, 0.02), rng, 0.02),
        fix_time=np.zeros(0), fix_enu=np.zeros((0, 3)), fix_valid=np.zeros(0, dtype=bool),
        diagnostics={"simulator": simulator},
        barometer=SensorSamples(sensor_time, pressure),
        magnetometer=SensorSamples(sensor_time, field), site=SITE)


def _window(samples: Any, start: float, end: float) -> Any:
    inside = (samples.time >= start) & (samples.time < end)
    return type(samples)(*(getattr(samples, f.name)[inside] for f in fields(samples)))


def _stream(series: RunSeries) -> Iterator[RunAccumulator]:
    """Feed ``series`` in chunks of STEP_S s, the estimate and sensors LAG_S s behind the
    truth and reference, settling after each; yields the accumulator after each chunk."""
    accumulator = RunAccumulator(SITE)
    duration = float(series.truth.time[-1]) + 1.0
    for start in np.arange(0.0, duration + LAG_S, STEP_S):
        accumulator.add_truth(_window(series.truth, start, start + STEP_S))
        accumulator.add_reference(_window(series.reference, start, start + STEP_S))
        late = (start - LAG_S, start + STEP_S - LAG_S)
        accumulator.add_estimate(_window(series.estimate, *late))
        accumulator.add_barometer(_window(series.barometer, *late))
        accumulator.add_magnetometer(_window(series.magnetometer, *late))
        for key, (stamps, values) in series.diagnostics["simulator"].items():
            inside = (stamps >= start) & (stamps < start + STEP_S)
            accumulator.add_diagnostic("simulator", key, stamps[inside], values[inside])
        accumulator.settle()
        yield accumulator
    yield accumulator.finish()


def _assert_same(streamed: Any, whole: Any, path: str = "") -> None:
    if isinstance(whole, dict):
        assert streamed.keys() == whole.keys(), path
        for key in whole:
            _assert_same(streamed[key], whole[key], f"{path}/{key}")
    elif isinstance(whole, list):
        assert len(streamed) == len(whole), path
        for k, (a, b) in enumerate(zip(streamed, whole, strict=True)):
            _assert_same(a, b, f"{path}[{k}]")
    elif isinstance(whole, float) and not math.isnan(whole):
        assert streamed == pytest.approx(whole, rel=1e-9, abs=1e-12), path
    elif isinstance(whole, float):
        assert math.isnan(streamed), path
    else:
        assert streamed == whole, path


def test_the_streamed_summary_is_the_whole_run_one():
    series = _run(30.0)
    *_, streamed = _stream(series)
    whole = summarize(series, {})
    assert whole["estimate_samples"] == len(series.estimate)  # every estimate was matched
    assert whole["barometer"]["compared"] == len(series.barometer)
    assert whole["tracking_rms_m"] > 0.0
    _assert_same(summary_of(streamed, {}), whole)


def test_the_samples_held_do_not_grow_with_the_run():
    """Ten times the run, the same most samples held at once: the truth's RETAIN_S window,
    a chunk, and what waits for it (a 5 s run holds about 300)."""
    most = {}
    for duration in (5.0, 50.0):
        most[duration] = max(accumulator.held for accumulator in _stream(_run(duration)))
    per_second = TRUTH_HZ + 50.0 + 100.0 + TRUTH_HZ + 2 * 50.0  # every compared stream
    for held in most.values():
        assert held <= (RETAIN_S + STEP_S + LAG_S + 1.0) * per_second
    assert most[50.0] <= most[5.0] + 2  # chunk edges aside, the same
