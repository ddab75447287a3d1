"""Peak memory of mav-sim's report step against the length of the run (issue: item 6 of the
robustness issue, "the report step of a 600 s run peaks at 642 MB and grows with run length").

Usage: python bench/bench_report_memory.py [--short S] [--long S] [--output-dir DIR]

A synthetic run bag is written for ``--short`` and ``--long`` s of sim time with the rates of
the default demo (truth and estimate odometry 100 Hz, reference 50 Hz, GNSS 10 Hz,
barometer and magnetometer 50 Hz, diagnostics 1 Hz). Each report is made in a fresh process
(peak RSS is per process) in two ways, in this run:

- ours: ``report.write_bag_report``, the bag streamed through ``graph.accumulator`` (the
  runner's report);
- baseline: ``report.write_report(read_run(...))``, the bag read whole first.

Both must give the same summary.json (to 1e-9, relative). Printed: the peak RSS increase of
the report step (MB) and the ratio long / short for each way; bounded memory is a ratio of
about 1, the baseline's grows with the run.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from mav_bringup.graph.recorder import TYPESTORE
from mav_bringup.graph.report import write_bag_report, write_report
from mav_bringup.graph.series import (
    BAROMETER,
    ESTIMATE,
    FIX,
    MAGNETOMETER,
    REFERENCE,
    TRUTH,
    SensorSite,
    read_run,
)
from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
SITE = SensorSite((47.3977, 8.5456, 488.0), (2.1523e-05, 1.3340e-06, 4.3290e-05))
RATES_HZ = {TRUTH: 100.0, ESTIMATE: 100.0, REFERENCE: 50.0, FIX: 10.0, BAROMETER: 50.0,
            MAGNETOMETER: 50.0, DIAGNOSTICS_TOPIC: 1.0}
TYPES = {TRUTH: "nav_msgs/msg/Odometry", ESTIMATE: "nav_msgs/msg/Odometry",
         REFERENCE: "nav_msgs/msg/Odometry", FIX: "sensor_msgs/msg/NavSatFix",
         BAROMETER: "sensor_msgs/msg/FluidPressure", MAGNETOMETER: "sensor_msgs/msg/MagneticField",
         DIAGNOSTICS_TOPIC: "diagnostic_msgs/msg/DiagnosticArray"}
SIMULATOR_KEYS = ("energy_error_J", "momentum_error_Ns", "barometer_offset_m",
                  "barometer_drift_pa", "magnetometer_disturbance_T",
                  *(f"gnss_correlated_error_{axis}_m" for axis in ("east", "north", "up")))
ESTIMATOR_KEYS = ("gnss_position_accepted", "gnss_position_nis_mean", "barometer_accepted",
                  "barometer_nis_mean")
M = TYPESTORE.types


def _header(t: float) -> Any:
    sec = math.floor(t)
    stamp = M["builtin_interfaces/msg/Time"](sec=sec, nanosec=round((t - sec) * 1e9))
    return M["std_msgs/msg/Header"](stamp=stamp, frame_id="map")


def _odometry(t: float, position: np.ndarray, sigma: float) -> Any:
    yaw = 0.3 * t
    pose = M["geometry_msgs/msg/Pose"](
        position=M["geometry_msgs/msg/Point"](x=position[0], y=position[1], z=position[2]),
        orientation=M["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=math.sin(yaw / 2),
                                                      w=math.cos(yaw / 2)))
    vector = M["geometry_msgs/msg/Vector3"]
    twist = M["geometry_msgs/msg/Twist"](linear=vector(x=1.0, y=0.0, z=0.0),
                                         angular=vector(x=0.0, y=0.0, z=0.3))
    covariance = np.diag(np.full(6, sigma**2)).ravel()
    return M["nav_msgs/msg/Odometry"](
        header=_header(t), child_frame_id="base_link",
        pose=M["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=covariance),
        twist=M["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=covariance))


def _message(topic: str, t: float, rng: np.random.Generator) -> Any:
    """One synthetic message of ``topic`` at ``t`` s: a figure-eight with noisy sensors."""
    truth = np.array([10.0 * math.sin(0.2 * t), 5.0 * math.sin(0.4 * t), 5.0])
    if topic == TRUTH:
        return _odometry(t, truth, 0.0)
    if topic == ESTIMATE:
        return _odometry(t, truth + rng.normal(0.0, 0.1, 3), 0.1)
    if topic == REFERENCE:
        return _odometry(t, truth + 0.05, 0.0)
    if topic == FIX:
        return M["sensor_msgs/msg/NavSatFix"](
            header=_header(t), status=M["sensor_msgs/msg/NavSatStatus"](status=0, service=1),
            latitude=47.3977 + 1e-6 * rng.normal(), longitude=8.5456, altitude=493.0,
            position_covariance=np.zeros(9), position_covariance_type=0)
    if topic == BAROMETER:
        return M["sensor_msgs/msg/FluidPressure"](
            header=_header(t), fluid_pressure=95000.0 + rng.normal(0.0, 3.0), variance=9.0)
    if topic == MAGNETOMETER:
        return M["sensor_msgs/msg/MagneticField"](
            header=_header(t), magnetic_field=M["geometry_msgs/msg/Vector3"](
                x=2e-5, y=1e-6 * rng.normal(), z=-4.3e-5), magnetic_field_covariance=np.zeros(9))
    value = M["diagnostic_msgs/msg/KeyValue"]
    statuses = [M["diagnostic_msgs/msg/DiagnosticStatus"](
        level=0, name=name, message="ok", hardware_id="",
        values=[value(key=key, value=f"{rng.normal():.6g}") for key in keys])
        for name, keys in (("simulator", SIMULATOR_KEYS), ("trident_ekf", ESTIMATOR_KEYS))]
    return M["diagnostic_msgs/msg/DiagnosticArray"](header=_header(t), status=statuses)


def write_synthetic_run(bag: Path, duration_s: float, seed: int = 0) -> int:
    """A run bag of ``duration_s`` s with the report's topics at ``RATES_HZ``; messages."""
    rng = np.random.default_rng(seed)
    events = sorted((k / rate, topic) for topic, rate in RATES_HZ.items()
                    for k in range(1, int(duration_s * rate) + 1))
    with Writer(bag, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {topic: writer.add_connection(topic, msgtype, typestore=TYPESTORE)
                       for topic, msgtype in TYPES.items()}
        for t, topic in events:
            data = TYPESTORE.serialize_cdr(_message(topic, t, rng), TYPES[topic])
            writer.write(connections[topic], round(t * 1e9), data)
    return len(events)


def measure(bag: Path, way: str, output: Path) -> dict[str, float]:
    """Peak RSS increase (MB) of one report step, in this (fresh) process."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if way == "ours":
        write_bag_report(bag, output, {}, SITE)
    else:
        write_report(read_run(bag, SITE.datum, SITE.earth_field_ned_T), output, {})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"report_step_MB": (peak - before) / 1024.0}  # ru_maxrss is in KiB on Linux


def _in_fresh_process(bag: Path, way: str, output: Path) -> float:
    completed = subprocess.run(
        [sys.executable, __file__, "--measure", str(bag), way, str(output)],
        check=True, capture_output=True, text=True)
    return float(json.loads(completed.stdout.splitlines()[-1])["report_step_MB"])


def _same_summary(first: Path, second: Path) -> bool:
    a = json.loads((first / "summary.json").read_text())
    b = json.loads((second / "summary.json").read_text())

    def close(x: Any, y: Any) -> bool:
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
        if isinstance(x, list):
            return len(x) == len(y) and all(map(close, x, y))
        if isinstance(x, float):
            return bool(np.isclose(x, y, rtol=1e-9, atol=0.0, equal_nan=True))
        return bool(x == y)

    return close(a, b)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        print(json.dumps(measure(Path(argv[1]), argv[2], Path(argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=float, default=60.0, help="short run, s (default 60)")
    parser.add_argument("--long", type=float, default=600.0, help="long run, s (default 600)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if not 0.0 < args.short < args.long:
        parser.error("need 0 < --short < --long")
    peaks: dict[str, dict[float, float]] = {"ours": {}, "baseline": {}}
    messages = {}
    with tempfile.TemporaryDirectory() as workdir:
        for duration in (args.short, args.long):
            bag = Path(workdir) / f"run{duration:g}"
            messages[duration] = write_synthetic_run(bag, duration)
            reports = {way: Path(workdir) / f"{way}{duration:g}" for way in peaks}
            for way, output in reports.items():
                peaks[way][duration] = _in_fresh_process(bag, way, output)
                print(f"{duration:g} s, {way}: report step +{peaks[way][duration]:.1f} MB")
            if not _same_summary(reports["ours"], reports["baseline"]):
                raise AssertionError(f"{duration:g} s: the streamed summary differs")
    ratio = {way: peaks[way][args.long] / peaks[way][args.short] for way in peaks}
    rows = [{"way": way, "short_s": args.short, "long_s": args.long,
             "short_MB": peaks[way][args.short], "long_MB": peaks[way][args.long],
             "ratio": ratio[way]} for way in peaks]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report_memory.json").write_text(json.dumps(
        {"title": "report step peak memory against run length", "messages": messages,
         "python": platform.python_version(), "results": rows}, indent=2))
    lines = ["# mav-sim report step: peak RSS increase against run length", "",
             "Ratio = long run / short run (bounded memory: about 1).", "",
             f"| way | {args.short:g} s | {args.long:g} s | ratio |", "|---|---:|---:|---:|",
             *(f"| {r['way']} | {r['short_MB']:.1f} MB | {r['long_MB']:.1f} MB | "
               f"{r['ratio']:.2f} |" for r in rows), "",
             "ours: streamed (`write_bag_report`); baseline: bag read whole (`read_run`).", ""]
    markdown = args.output_dir / "report_memory.md"
    markdown.write_text("\n".join(lines))
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
