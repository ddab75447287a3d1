"""Replay throughput of the trident-quaternion EKF against the conventional baseline ESKF.

Usage: python bench/bench_ekf.py [--duration S] [--repeats K] [--output-dir DIR]

Both filters replay the same simulated log (200 Hz IMU, 5 Hz GNSS position and
velocity, manoeuvring trajectory, white noise) from the same initial state, in the
same process, for several covariance decimations. Before timing, both runs must end
within 3 sigma of the truth and within one sigma of each other. The report gives the
time per IMU sample (covariance propagation and GNSS updates included) and the
real-time factor next to the harness's ratio table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from harness import Case, run, write_report

from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.simulation import SensorModel, SimulatedData, Trajectory, simulate

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
IMU_RATE, GNSS_RATE = 200.0, 5.0
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)


def _stream(data: SimulatedData) -> list[tuple]:
    """The log as a time-ordered list of plain records, as a bag reader would yield them."""
    sensors = data.sensors
    rp = (sensors.gnss_position_sigma**2,) * 3
    rv = (sensors.gnss_velocity_sigma**2,) * 3
    records = [(t, "imu", tuple(g), tuple(a))
               for t, g, a in zip(data.imu_time[1:], data.gyro[1:], data.accel[1:], strict=True)]
    records += [(t, "gnss", tuple(p), rp, tuple(v), rv) for t, p, v in
                zip(data.gnss_time, data.gnss_position, data.gnss_velocity, strict=True)]
    records.sort(key=lambda r: (r[0], r[1] == "imu"))  # a fix before the IMU sample at its stamp
    return records


def replay(cls: type[ErrorStateFilter], config: FilterConfig, data: SimulatedData,
           records: list[tuple]) -> ErrorStateFilter:
    """Initialize at the truth and run the whole log; returns the filter at the end."""
    filter_ = cls(config)
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS)
    for record in records:
        if record[1] == "imu":
            filter_.process_imu(record[0], record[2], record[3])
        else:
            filter_.process_gnss(record[0], record[2], record[3], record[4], record[5])
    filter_.flush()
    return filter_


def _agree(data: SimulatedData):
    truth = data.truth
    final = (truth["q"][-1], truth["v"][-1], truth["p"][-1], data.gyro_bias[-1],
             data.accel_bias[-1])

    def check(trident: ErrorStateFilter, baseline: ErrorStateFilter) -> bool:
        sigma = np.sqrt(np.diag(baseline.conventional_covariance()))
        conventional = [f.conventional_jacobian() @ f.error_from_truth(*final)
                        for f in (trident, baseline)]
        within_truth = all(np.all(np.abs(e[:9]) < 3.0 * sigma[:9]) for e in conventional)
        within_each_other = np.all(np.abs(conventional[0][:9] - conventional[1][:9]) < sigma[:9])
        return bool(within_truth and within_each_other)

    return check


def cases(duration: float, seed: int = 0) -> list[Case]:
    data = simulate(Trajectory(), SensorModel(), duration, imu_rate=IMU_RATE,
                    gnss_rate=GNSS_RATE, rng=np.random.default_rng(seed))
    records = _stream(data)
    samples = data.imu_time.size - 1
    result = []
    for decimation in (1, 4, 10):
        config = FilterConfig(covariance_decimation=decimation)
        result.append(Case(
            f"replay {IMU_RATE:.0f} Hz IMU + {GNSS_RATE:.0f} Hz GNSS, covariance every "
            f"{decimation} sample(s)", samples,
            lambda c=config: replay(TridentEKF, c, data, records),
            lambda c=config: replay(BaselineESKF, c, data, records),
            _agree(data)))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0,
                        help="simulated log length, s (default 60)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.duration <= 0.0 or args.repeats < 1:
        parser.error("--duration and --repeats must be positive")
    results = run(cases(args.duration), args.repeats)
    _, markdown = write_report(results, "trident EKF vs conventional ESKF: log replay",
                               "baseline ESKF", args.output_dir, "ekf")
    lines = ["", "| case | trident per IMU sample | baseline per IMU sample | "
             "trident real-time factor |", "|---|---:|---:|---:|"]
    for r in results:
        per_sample = r.ours_s / r.size
        lines.append(f"| {r.name} | {per_sample * 1e6:.1f} us | "
                     f"{r.baseline_s / r.size * 1e6:.1f} us | "
                     f"{1.0 / (per_sample * IMU_RATE):.0f}x |")
    with markdown.open("a") as handle:
        handle.write("\n".join(lines) + "\n")
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
