"""Update-side cost of the trident EKF: each aiding source's model, the GNSS divergence
screen's fix record, the session's estimate (the outputs with their covariances) and the
yaw estimator's bank, compiled (core/_kernels.c) against the numpy reference.

Usage: python bench/bench_updates.py [--duration S] [--repeats K] [--output-dir DIR]

A simulated flight (200 Hz IMU, 5 Hz GNSS position and velocity, 10 Hz barometer and
magnetometer, 0.3 m lever arm) runs through both filters; at its end, the same filter in
the same state is timed per call with its compiled kernels and with ``compiled = False``
(the reference, as with MAV_KERNELS=reference), after checking that both give the same
linearisation (1e-12) or fix record; the session's estimate likewise (1e-12). Then the
whole log, per IMU sample, with every source (compiled vs reference, same final estimate
to 1e-9), and the yaw estimator fed the log's IMU and GNSS velocities (same yaw and
weights to 1e-9). Output: updates.{json,md}.
Without the compiled extension there is nothing to compare: it says so and exits 0.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from harness import Case, Result, append_and_show, run, write_report

from mav_geometry.kernels import load_kernels
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF, session, yaw_estimator
from trident_ekf.core.divergence import FixRecord, fix_record
from trident_ekf.core.earth import ecef_to_geodetic, enu_to_ecef_rotation
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements.barometer import Barometer
from trident_ekf.core.measurements.base import Linearization, Measurement
from trident_ekf.core.measurements.magnetometer import Magnetometer, MagnetometerConfig
from trident_ekf.core.simulation import SensorModel, SimulatedData, Trajectory, simulate
from trident_ekf.core.simulation import run as feed

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
LEVER = (0.1, -0.05, 0.3)  # m
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)


def _filter(cls: type[ErrorStateFilter], data: SimulatedData, compiled: bool
            ) -> ErrorStateFilter:
    magnetometer = Magnetometer(MagnetometerConfig(field_ned_T=data.sensors.magnetic_field_ned))
    filter_ = cls(FilterConfig(lever_arm=LEVER), [Barometer(), magnetometer])
    filter_.compiled = filter_.compiled and compiled
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS)
    return filter_


def _whole_run(cls: type[ErrorStateFilter], data: SimulatedData, compiled: bool
               ) -> ErrorStateFilter:
    filter_ = _filter(cls, data, compiled)
    feed(filter_, data, magnetometer=True, barometer=True, record_every=10**9)
    filter_.flush()
    return filter_


def _same_estimate(ours: ErrorStateFilter, reference: ErrorStateFilter) -> bool:
    return ours.counts() == reference.counts() and all(
        np.linalg.norm(a - b) <= 1e-9 * np.linalg.norm(b)
        for a, b in zip(ours.nominal(), reference.nominal(), strict=True))


def _without_kernels(module: ModuleType, call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with ``module``'s compiled kernels off (its numpy reference)."""
    def reference() -> Any:
        saved = module._kernels  # type: ignore[attr-defined]
        module._kernels = None  # type: ignore[attr-defined]
        try:
            return call()
        finally:
            module._kernels = saved  # type: ignore[attr-defined]
    return reference


def _same_outputs(ours: dict[str, Any], reference: dict[str, Any]) -> bool:
    return ours.keys() == reference.keys() and all(
        np.max(np.abs(ours[k] - v)) <= 1e-12 * max(np.max(np.abs(v)), 1e-300)
        for k, v in reference.items())


def _yaw_feed(data: SimulatedData) -> yaw_estimator.YawEstimator:
    """The yaw estimator over the log: every IMU sample, the GNSS velocities in ENU."""
    estimator = yaw_estimator.YawEstimator()
    trajectory = Trajectory()
    to_enu = enu_to_ecef_rotation(trajectory.latitude_deg, trajectory.longitude_deg).T
    velocities = data.gnss_velocity @ to_enu.T
    gyro, accel, time = data.gyro.tolist(), data.accel.tolist(), data.imu_time
    fix = 0
    for k in range(1, time.size):
        estimator.imu(time[k] - time[k - 1], gyro[k], accel[k])
        while fix < data.gnss_time.size and data.gnss_time[fix] <= time[k]:
            estimator.velocity(velocities[fix], 0.1)
            fix += 1
    return estimator


def _same_yaw(ours: yaw_estimator.YawEstimator, reference: yaw_estimator.YawEstimator) -> bool:
    return (abs(ours.yaw - reference.yaw) <= 1e-9
            and bool(np.max(np.abs(ours.weights - reference.weights)) <= 1e-9))


def _same_linearization(ours: Linearization, reference: Linearization) -> bool:
    return all(np.max(np.abs(a - b), initial=0.0) <= 1e-12 * max(np.max(np.abs(b)), 1.0)
               for a, b in ((ours.residual, reference.residual), (ours.H, reference.H)))


def _same_record(ours: FixRecord, reference: FixRecord) -> bool:
    return all(np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b))
               for a, b in zip(ours.drift, reference.drift, strict=True))


def _measurements(filter_: ErrorStateFilter, data: SimulatedData) -> dict[str, Measurement]:
    """The log's last sample of each source, re-stamped at the filter's time."""
    _, v, p = filter_.nominal()
    barometer = filter_.sources["barometer"]
    magnetometer = filter_.sources["magnetometer"]
    return {
        "gnss_position": Measurement("gnss_position", filter_.time, p + 1.0, np.eye(3) * 2.0),
        "gnss_velocity": Measurement("gnss_velocity", filter_.time, v + 0.1,
                                     np.eye(3) * 0.01),
        "barometer": barometer.measurement(  # type: ignore[attr-defined]
            filter_.time, height_m=float(data.barometer_height[-1])),
        "magnetometer": magnetometer.measurement(  # type: ignore[attr-defined]
            filter_.time, data.magnetometer_field[-1]),
    }


def cases(duration: float) -> list[Case]:
    sensors = SensorModel(lever_arm=LEVER)
    data = simulate(Trajectory(), sensors, duration, rng=np.random.default_rng(0))
    result = []
    for cls in (TridentEKF, BaselineESKF):
        compiled = _whole_run(cls, data, True)
        reference = copy.deepcopy(compiled)
        reference.compiled = False
        ms = _measurements(compiled, data)
        for name in ("gnss_position", "gnss_velocity", "barometer", "magnetometer"):
            def model(f: ErrorStateFilter, n: str = name, m: Measurement = ms[name]) -> Any:
                source = f.sources[n]
                source.check(f, m)
                return source.linearize(f, m)
            result.append(_pair(f"{cls.__name__} {name}: check + linearize", compiled,
                                reference, model, _same_linearization))
        fix, velocity = ms["gnss_position"], ms["gnss_velocity"]
        result.append(_pair(f"{cls.__name__} divergence fix record", compiled, reference,
                            lambda f, m=fix, w=velocity: fix_record(f, m, m.value, w),
                            _same_record))
        outputs = session.EstimationSession(copy.deepcopy(compiled), Initializer(),
                                            datum=ecef_to_geodetic(compiled.nominal()[2]))
        result.append(Case(f"{cls.__name__} session estimate (outputs and covariances)", 1,
                           outputs.estimate, _without_kernels(session, outputs.estimate),
                           _same_outputs))
        samples = data.imu_time.size - 1
        result.append(Case(
            f"{cls.__name__} whole log per IMU sample (GNSS 5 Hz, barometer and "
            "magnetometer 10 Hz)", samples,
            lambda k=cls: _whole_run(k, data, True),
            lambda k=cls: _whole_run(k, data, False), _same_estimate))
    result.append(Case("yaw estimator per IMU sample (bank of 5, GNSS velocity 5 Hz)",
                       data.imu_time.size - 1, lambda: _yaw_feed(data),
                       _without_kernels(yaw_estimator, lambda: _yaw_feed(data)), _same_yaw))
    return result


def _pair(name: str, compiled: ErrorStateFilter, reference: ErrorStateFilter,
          call: Callable[[ErrorStateFilter], Any], agree: Callable[[Any, Any], bool]) -> Case:
    return Case(name, 1, lambda: call(compiled), lambda: call(reference), agree)


def summary(results: list[Result]) -> list[str]:
    lines = ["", "| case | compiled | reference | compiled / reference |", "|---|---:|---:|---:|"]
    lines += [f"| {r.name} | {r.ours_s / r.size * 1e6:.1f} us | "
              f"{r.baseline_s / r.size * 1e6:.1f} us | {r.ratio:.2f} |" for r in results]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0,
                        help="simulated flight, s (> 0; default 20)")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.duration <= 0.0 or args.repeats < 1:
        parser.error("--duration and --repeats must be positive")
    if load_kernels("trident_ekf.core._kernels") is None:
        print("trident_ekf.core._kernels not built (or MAV_KERNELS=reference): nothing to "
              "compare")
        return 0
    results = run(cases(args.duration), args.repeats)
    _, markdown = write_report(results, "trident EKF updates: compiled vs reference",
                               "reference", args.output_dir, "updates")
    append_and_show(markdown, summary(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
