"""Replay throughput of the trident-quaternion EKF against the conventional baseline ESKF.

Usage: python bench/bench_ekf.py [--duration S] [--repeats K] [--output-dir DIR]
                                 [--replay-log LOG] [--kernels-only]

Both filters replay the same simulated log (200 Hz IMU, 5 Hz GNSS position and
velocity, manoeuvring trajectory, white noise) from the same initial state, in the
same process, for several covariance decimations; then, with 18 error states (GNSS
position bias, ``FilterConfig.gnss_bias_sigma_*``), the same log with a Gauss-Markov
GNSS error added (0.2 m horizontal, 0.4 m vertical). Before timing, both runs must end
within 3 sigma of the truth and within one sigma of each other. The report gives the
time per IMU sample (covariance propagation and GNSS updates included) and the
real-time factor next to the harness's ratio table.

End to end, ``trident-replay`` runs over a bag that ``trident-import`` makes of a real
log (default: the PX4 SITL EKF2 replay data, 250 Hz IMU), writing its output bag, with
the baseline filter as the baseline; and the replay's CDR decoding of the IMU and
reference messages is timed against rosbags' decoder on the same bytes (the values must
be identical). The report gives the end-to-end real-time factor.

Compiled kernels (core/_kernels.c) against their numpy/Python reference, same run
(``ekf_kernels.{json,md}``; ``--kernels-only`` stops after it): the cost per IMU sample
of the same log replayed by the compiled and the reference filter (GNSS updates
included, and the IMU alone), covariance every sample and every 4th; the compiled floor,
the bare C covariance step of 15 states (``_kernels.covariance_step``) against the peer,
filterpy's ``KalmanFilter.predict()`` on the same 15-state Phi and Q_d ('peer not
installed' without filterpy); and the full per-sample cost over that floor (issue 16:
at most about 3x).

The barometer and magnetometer models need the geodetic position at every update:
``LocalGeodetic`` along a flight-like random walk against pymap3d's exact conversion at
every point (heights within 1 mm).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pymap3d
from harness import Case, Result, append_and_show, run, write_report

from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import LocalGeodetic, geodetic_to_ecef
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.simulation import SensorModel, SimulatedData, Trajectory, simulate
from trident_ekf.tools import bagio, cdr, import_cli
from trident_ekf.tools import replay as replay_tool

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
DEFAULT_REPLAY_LOG = (Path(__file__).resolve().parents[1] / "data" / "px4_sitl"
                      / "test_replay_data_ekf_gsf_reset.csv")  # the repository's data/
IMU_RATE, GNSS_RATE = 200.0, 5.0
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)
GNSS_BIAS_SIGMA = (0.2, 0.4)  # m, horizontal and vertical: simulated and estimated


def _stream(data: SimulatedData) -> list[tuple]:
    """The log as a time-ordered list of plain records, as a bag reader would yield them."""
    rp = data.gnss_position_covariance
    rv = (data.sensors.gnss_velocity_sigma**2,) * 3
    records = [(t, "imu", tuple(g), tuple(a))
               for t, g, a in zip(data.imu_time[1:], data.gyro[1:], data.accel[1:], strict=True)]
    records += [(t, "gnss", tuple(p), rp, tuple(v), rv) for t, p, v in
                zip(data.gnss_time, data.gnss_position, data.gnss_velocity, strict=True)]
    records.sort(key=lambda r: (r[0], r[1] == "imu"))  # a fix before the IMU sample at its stamp
    return records


def replay(cls: type[ErrorStateFilter], config: FilterConfig, data: SimulatedData,
           records: list[tuple], compiled: bool = True) -> ErrorStateFilter:
    """Initialize at the truth and run the whole log (with the compiled kernels, or the
    numpy/Python reference); returns the filter at the end."""
    filter_ = cls(config)
    filter_.compiled = filter_.compiled and compiled
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
             data.accel_bias[-1], data.gnss_bias[-1])

    def check(trident: ErrorStateFilter, baseline: ErrorStateFilter) -> bool:
        sigma = np.sqrt(np.diag(baseline.conventional_covariance()))
        conventional = [f.conventional_jacobian() @ f.error_from_truth(*final)
                        for f in (trident, baseline)]
        within_truth = all(np.all(np.abs(e[:9]) < 3.0 * sigma[:9]) for e in conventional)
        within_each_other = np.all(np.abs(conventional[0][:9] - conventional[1][:9]) < sigma[:9])
        return bool(within_truth and within_each_other)

    return check


def cases(duration: float, seed: int = 0) -> list[Case]:
    horizontal, vertical = GNSS_BIAS_SIGMA
    white = SensorModel()
    # Same seed: the same IMU and white GNSS noise, the correlated error drawn last.
    correlated = SensorModel(gnss_correlated_sigma_horizontal=horizontal,
                             gnss_correlated_sigma_vertical=vertical)
    runs = [(white, {}, (1, 4, 10)),
            (correlated, {"gnss_bias_sigma_horizontal": horizontal,
                          "gnss_bias_sigma_vertical": vertical}, (1, 4))]
    result = []
    for sensors, bias_settings, decimations in runs:
        data = simulate(Trajectory(), sensors, duration, imu_rate=IMU_RATE,
                        gnss_rate=GNSS_RATE, rng=np.random.default_rng(seed))
        records = _stream(data)
        samples = data.imu_time.size - 1
        for decimation in decimations:
            config = FilterConfig(covariance_decimation=decimation, **bias_settings)
            states = TridentEKF(config).state_dim
            result.append(Case(
                f"replay {IMU_RATE:.0f} Hz IMU + {GNSS_RATE:.0f} Hz GNSS, covariance every "
                f"{decimation} sample(s), {states} error states", samples,
                lambda c=config, d=data, r=records: replay(TridentEKF, c, d, r),
                lambda c=config, d=data, r=records: replay(BaselineESKF, c, d, r),
                _agree(data)))
    return result


def _same_estimate(ours: ErrorStateFilter, reference: ErrorStateFilter) -> bool:
    """Compiled and reference runs end with the same state and covariance (1e-9)."""
    same_state = all(np.linalg.norm(a - b) <= 1e-9 * np.linalg.norm(b)
                     for a, b in zip(ours.nominal(), reference.nominal(), strict=True))
    scale = np.sqrt(np.outer(np.diag(reference.covariance), np.diag(reference.covariance)))
    return same_state and bool(np.max(np.abs(ours.covariance - reference.covariance) / scale)
                               < 1e-9)


def kernel_cases(duration: float, seed: int = 0) -> list[Case]:
    """Compiled vs reference per IMU sample: the simulated log with its GNSS updates, and
    its IMU samples alone."""
    data = simulate(Trajectory(), SensorModel(), duration, imu_rate=IMU_RATE,
                    gnss_rate=GNSS_RATE, rng=np.random.default_rng(seed))
    records = _stream(data)
    imu_only = [r for r in records if r[1] == "imu"]
    samples = data.imu_time.size - 1
    result = []
    for cls in (TridentEKF, BaselineESKF):
        for decimation in (1, 4):
            config = FilterConfig(covariance_decimation=decimation)
            for what, stream in (("IMU + GNSS", records), ("IMU alone", imu_only)):
                result.append(Case(
                    f"{cls.__name__} per IMU sample ({what}), covariance every {decimation}, "
                    "compiled vs reference", samples,
                    lambda k=cls, c=config, r=stream: replay(k, c, data, r),
                    lambda k=cls, c=config, r=stream: replay(k, c, data, r, compiled=False),
                    _same_estimate))
    return result


def _floor_model() -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """P, F, the continuous noise densities and T of one 15-state covariance step, from
    the trident filter at rest (the F its flush builds)."""
    filter_ = TridentEKF(FilterConfig(covariance_decimation=1))
    filter_.initialize(0.0, (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0),
                       geodetic_to_ecef(47.4, 8.5, 500.0), SIGMAS)
    T = 1.0 / IMU_RATE
    filter_.process_imu(T, (0.01, -0.02, 0.03), (0.1, 0.2, 9.8))
    return filter_.covariance.copy(), filter_._F.copy(), filter_._q_error.copy(), T


def floor_cases() -> list[Case]:
    """The compiled floor (bare C covariance step, 15 states) against filterpy's predict on
    the same Phi and Q_d; [] without the kernels."""
    kernels = load_kernels("trident_ekf.core._kernels")
    if kernels is None:
        print("trident_ekf.core._kernels not built (or MAV_KERNELS=reference): no floor")
        return []
    try:
        from filterpy.kalman import KalmanFilter
    except ImportError:
        print("filterpy: peer not installed")
        return []
    P, F, q, T = _floor_model()
    A = F * T
    phi = np.eye(15) + A + 0.5 * A @ A
    Q = 0.5 * (A * q * T + (A * q * T).T) + np.diag(q * T)
    ours = P.copy()
    peer = KalmanFilter(dim_x=15, dim_z=3)
    peer.F, peer.Q, peer.P = phi, Q, P.copy()

    def step() -> FloatArray:
        kernels.covariance_step(ours, F, q, T, 0.0, 0.0)
        return ours

    def predict() -> FloatArray:
        peer.predict()
        return np.asarray(peer.P)

    def agree(a: FloatArray, b: FloatArray) -> bool:
        return bool(np.max(np.abs(a - b)) < 1e-12 * np.max(np.abs(b)))

    return [Case("compiled floor: bare C covariance step (15 states) vs filterpy "
                 "KalmanFilter.predict()", 1, step, predict, agree)]


def kernel_summary(results: list[Result]) -> list[str]:
    """Per-sample costs, the compiled floor and the issue's ratio (full / floor <= ~3)."""
    floor = next((r for r in results if r.name.startswith("compiled floor")), None)
    lines = ["", "| case | compiled per IMU sample | reference | compiled / reference |"
             + (" compiled / floor |" if floor else ""),
             "|---|---:|---:|---:|" + ("---:|" if floor else "")]
    for r in results:
        if r is floor:
            continue
        row = (f"| {r.name.replace(', compiled vs reference', '')} | "
               f"{r.ours_s / r.size * 1e6:.1f} us | {r.baseline_s / r.size * 1e6:.1f} us | "
               f"{r.ratio:.3f} |")
        lines.append(row + (f" {r.ours_s / r.size / floor.ours_s:.1f}x |" if floor else ""))
    if floor is None:
        return [*lines, "", "No compiled floor: filterpy peer not installed or kernels not built."]
    return [*lines, "",
            f"Compiled floor (bare C covariance step, 15 states): {floor.ours_s * 1e6:.2f} us; "
            f"filterpy KalmanFilter.predict() on the same Phi and Q_d: "
            f"{floor.baseline_s * 1e6:.2f} us (floor / filterpy {floor.ratio:.2f}). "
            "Issue 16 target: at most about 3x the floor per IMU sample."]


def _replay_bag(bag: Path, workdir: Path, filter_name: str) -> dict:
    """trident-replay with its defaults, writing a fresh output bag (removed afterwards)."""
    output = Path(tempfile.mkdtemp(dir=workdir)) / "out"
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # progress lines
            return replay_tool.run(replay_tool.parse_args(
                [str(bag), "--output", str(output), "--filter", filter_name]))
    finally:
        shutil.rmtree(output.parent)


def _decode_fast(raw_messages: list[tuple[str, bytes]]) -> list:
    return [cdr.decode_imu(raw) if msgtype == bagio.IMU else cdr.decode_odometry(raw)[1].tolist()
            for msgtype, raw in raw_messages]


def _decode_rosbags(raw_messages: list[tuple[str, bytes]]) -> list:
    """The same fields through rosbags' message objects (the previous replay path)."""
    result = []
    for msgtype, raw in raw_messages:
        message = bagio.TYPESTORE.deserialize_cdr(raw, msgtype)
        if msgtype == bagio.IMU:
            w, a = message.angular_velocity, message.linear_acceleration
            result.append((bagio.stamp_ns(message), (w.x, w.y, w.z), (a.x, a.y, a.z)))
        else:
            pose, twist = message.pose, message.twist
            p, q = pose.pose.position, pose.pose.orientation
            result.append([p.x, p.y, p.z, q.x, q.y, q.z, q.w, *pose.covariance,
                           *(getattr(twist.twist.linear, c) for c in "xyz"),
                           *(getattr(twist.twist.angular, c) for c in "xyz"),
                           *twist.covariance])
    return result


def _same_quality(ours: dict, baseline: dict) -> bool:
    """Both filters end nominal with roll/pitch within 1.5 deg RMS of the autopilot (1.1 deg
    measured on the PX4 SITL log since the estimate starts at the first fix, 7 s earlier
    than before the start-anywhere work) and within 0.1 deg RMS of each other."""
    return all(s["status"] == "nominal" and max(s["rmse_roll_pitch_deg"]) < 1.5
               for s in (ours, baseline)) and bool(np.allclose(
                   ours["rmse_roll_pitch_deg"], baseline["rmse_roll_pitch_deg"], atol=0.1))


def replay_cases(log: Path, workdir: Path) -> tuple[list[Case], float]:
    """End-to-end replay and decoding cases on ``log`` imported into ``workdir``; also
    returns the log's IMU span (s) for the real-time factor."""
    bag = workdir / "input"
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        if import_cli.main([str(log), "--output", str(bag)]) != 0:
            raise RuntimeError(f"trident-import failed on {log}")
    duration = _replay_bag(bag, workdir, "trident")["log_duration_s"]
    raw_messages = [(msgtype, raw) for _, msgtype, _, raw in
                    bagio.read_raw(bag, ["/imu/data", "/reference/odometry"])]
    imu_count = bagio.topic_counts(bag)["/imu/data"]
    return [
        Case(f"trident-replay end to end on {log.name} (vs --filter baseline)", imu_count,
             lambda: _replay_bag(bag, workdir, "trident"),
             lambda: _replay_bag(bag, workdir, "baseline"), _same_quality),
        Case("IMU + reference odometry decoding: cdr vs rosbags messages", len(raw_messages),
             lambda: _decode_fast(raw_messages), lambda: _decode_rosbags(raw_messages),
             lambda ours, baseline: ours == baseline),
    ], duration


def geodetic_case(points: int = 20_000, seed: int = 0) -> Case:
    """Geodetic positions along a random walk of 0.1 m steps (10 m/s at 100 updates/s)."""
    steps = np.random.default_rng(seed).normal(0.0, 0.1 / np.sqrt(3.0), (points, 3))
    path = geodetic_to_ecef(47.3977, 8.5456, 488.0) + np.cumsum(steps, axis=0)

    def local() -> list[tuple[float, float, float]]:
        convert = LocalGeodetic()
        return [convert(p) for p in path]

    def exact() -> list[tuple[float, float, float]]:
        return [pymap3d.ecef2geodetic(*p) for p in path]

    def agree(ours: list, baseline: list) -> bool:
        return bool(np.max(np.abs(np.array(ours)[:, 2] - np.array(baseline)[:, 2])) < 1e-3)

    return Case("geodetic position for the baro/mag models: LocalGeodetic vs pymap3d",
                points, local, exact, agree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0,
                        help="simulated log length, s (default 60)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    parser.add_argument("--kernels-only", action="store_true",
                        help="only the compiled-vs-reference and floor/peer timings")
    parser.add_argument("--replay-log", type=Path, default=DEFAULT_REPLAY_LOG,
                        help="log for the end-to-end trident-replay case (any format "
                             f"trident-import reads; default {DEFAULT_REPLAY_LOG})")
    args = parser.parse_args(argv)
    if args.duration <= 0.0 or args.repeats < 1:
        parser.error("--duration and --repeats must be positive")
    if not args.replay_log.exists():
        parser.error(f"no such log: {args.replay_log}")
    kernel_results = run([*kernel_cases(args.duration), *floor_cases()], args.repeats)
    _, kernel_markdown = write_report(kernel_results, "trident EKF kernels: compiled vs "
                                      "reference (floor: vs filterpy)", "reference",
                                      args.output_dir, "ekf_kernels")
    append_and_show(kernel_markdown, kernel_summary(kernel_results))
    if args.kernels_only:
        return 0
    filter_cases = cases(args.duration)
    with tempfile.TemporaryDirectory() as workdir:
        end_to_end, log_duration = replay_cases(args.replay_log, Path(workdir))
        results = run([*filter_cases, *end_to_end, geodetic_case()], args.repeats)
    filter_results = results[:len(filter_cases)]
    replay_result, decoding_result, _ = results[len(filter_cases):]
    _, markdown = write_report(results, "trident EKF vs conventional ESKF: log replay",
                               "baseline ESKF", args.output_dir, "ekf")
    lines = ["", "| case | trident per IMU sample | baseline per IMU sample | "
             "trident real-time factor |", "|---|---:|---:|---:|"]
    for r in filter_results:
        per_sample = r.ours_s / r.size
        lines.append(f"| {r.name} | {per_sample * 1e6:.1f} us | "
                     f"{r.baseline_s / r.size * 1e6:.1f} us | "
                     f"{1.0 / (per_sample * IMU_RATE):.0f}x |")
    lines += ["", f"End to end ({args.replay_log.name}, {log_duration:.1f} s, "
              f"{replay_result.size} IMU samples; input decoding, filter and output bag):", "",
              "| filter | wall time | per IMU sample | real-time factor |", "|---|---:|---:|---:|"]
    for name, seconds in (("trident", replay_result.ours_s),
                          ("baseline", replay_result.baseline_s)):
        lines.append(f"| {name} | {seconds * 1e3:.0f} ms | "
                     f"{seconds / replay_result.size * 1e6:.1f} us | "
                     f"{log_duration / seconds:.0f}x |")
    lines += ["", f"Decoding {decoding_result.size} IMU and reference messages: "
              f"{decoding_result.ours_s / decoding_result.size * 1e6:.2f} us each with cdr, "
              f"{decoding_result.baseline_s / decoding_result.size * 1e6:.2f} us with rosbags."]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
