"""trident-replay: run the estimator over a rosbag2 as fast as possible and record its output.

The output bag has the live node's topics: /trident_ekf/odometry, the biases and the
per-update diagnostics on /diagnostics (``mav_ros_common.diagnostics.DIAGNOSTICS_TOPIC``,
the estimator node's topic).

Streaming: messages are read, fused and written one at a time; only the report keeps a
series, decimated to at most ``REPORT_RATE`` Hz. The high-rate messages (IMU and reference
odometry in, odometry and biases out) go through ``cdr`` rather than rosbags' objects.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_ros_common.diagnostics import DIAGNOSTICS_TOPIC
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.tools import bagio, cdr
from trident_ekf.tools.report import ReportSeries, write_report

REPORT_RATE = 10.0  # Hz


@dataclass(frozen=True)
class Topics:
    imu: str = "/imu/data"
    fix: str = "/gnss/fix"
    vel: str = "/gnss/vel"
    reference: str = "/reference/odometry"


class ReplaySession:
    """Translates bag messages into an ``EstimationSession`` and writes its outputs."""

    def __init__(self, filter_: ErrorStateFilter, initializer: Initializer,
                 writer: bagio.BagWriter | None, output_rate: float) -> None:
        self.session = EstimationSession(filter_, initializer)
        self.filter = filter_
        self.writer = writer
        self.schedule = OutputSchedule(output_rate)
        self.series = ReportSeries()
        self._last_report = -math.inf

    # ----- inputs -------------------------------------------------------------------------
    def imu(self, sample: cdr.ImuSample) -> None:
        stamp, gyro, accel = sample
        if self.session.imu(stamp, gyro, accel):
            self._outputs(stamp * 1e-9, stamp)

    def fix(self, message: Any) -> None:
        self.session.fix(bagio.stamp_ns(message), message.status.status, message.latitude,
                         message.longitude, message.altitude, message.position_covariance,
                         message.position_covariance_type != 0)  # 0: COVARIANCE_TYPE_UNKNOWN
        self._write_updates()

    def velocity(self, message: Any) -> None:
        linear = message.twist.twist.linear
        covariance = np.asarray(message.twist.covariance, dtype=float).reshape(6, 6)[:3, :3]
        self.session.velocity(bagio.stamp_ns(message), (linear.x, linear.y, linear.z),
                              covariance)
        self._write_updates()

    def reference(self, stamp: int, values: FloatArray) -> None:
        """nav_msgs/Odometry as ``cdr.decode_odometry`` gives it."""
        if not self.session.started:
            return
        t = stamp * 1e-9
        if t - self._last_report < 1.0 / REPORT_RATE:
            return
        self._last_report = t
        q = values[cdr.ORIENTATION]
        v_enu = quaternion.rotate(q, values[cdr.LINEAR])
        self.series.add_reference(t, values[cdr.POSITION], v_enu, q, self.session.estimate())

    # ----- outputs ------------------------------------------------------------------------
    def _write_updates(self) -> None:
        """NIS of every GNSS update into the report, and a diagnostics message per update."""
        for update in self.session.drain_updates():
            self.series.add_nis(update.time, update.nis, update.dof, update.accepted)
            if self.writer is not None:
                stamp = round(update.time * 1e9)
                level, summary, values = self.session.diagnostics(update)
                self.writer.write(DIAGNOSTICS_TOPIC, bagio.DIAGNOSTICS, stamp,
                                  bagio.diagnostics_message(stamp, "trident_ekf", level,
                                                            summary, values))

    def _outputs(self, t: float, stamp: int) -> None:
        """Odometry at the output rate; biases and the report series at ``REPORT_RATE``."""
        due_output = self.writer is not None and self.schedule.due(stamp)
        due_report = t - self.series.last_estimate_time >= 1.0 / REPORT_RATE
        if not (due_output or due_report):
            return
        estimate = self.session.estimate()
        if due_report:
            self.series.add_estimate(t, estimate)
            if self.writer is not None:
                for name in ("gyro_bias", "accel_bias"):
                    self.writer.write_cdr(f"/trident_ekf/{name}", bagio.VECTOR, stamp,
                                          cdr.encode_stamped(stamp, ("base_link",),
                                                             estimate[name]))
        if not due_output or self.writer is None:
            return
        self.writer.write_cdr("/trident_ekf/odometry", bagio.ODOMETRY, stamp,
                              cdr.encode_odometry(stamp, "map", "base_link", estimate))


def replay(bag: Path, output: Path | None, topics: Topics, filter_name: str,
           config: FilterConfig, initializer: Initializer, output_rate: float,
           report: Path | None, overwrite: bool = False) -> dict[str, Any]:
    """Run one bag through the filter; returns the summary (and writes bag and report).
    ``output`` is a rosbag2 directory (``bagio.BagWriter``, replaced only with
    ``overwrite``)."""
    types = bagio.topic_types(bag)
    for name, topic in (("imu", topics.imu), ("fix", topics.fix)):
        if topic not in types:
            raise ValueError(f"the bag has no {name} topic '{topic}' (has: {sorted(types)})")
    for topic, msgtype in ((topics.imu, bagio.IMU), (topics.reference, bagio.ODOMETRY)):
        if topic in types and types[topic][0] != msgtype:
            raise ValueError(f"topic '{topic}' is {types[topic][0]}, not {msgtype}")
    filter_ = (TridentEKF if filter_name == "trident" else BaselineESKF)(config)
    total = sum(types[t][1] for t in (topics.imu, topics.fix, topics.vel, topics.reference)
                if t in types)
    started = time.perf_counter()
    writer = bagio.BagWriter(output, overwrite) if output is not None else None
    with writer if writer is not None else _NullContext():
        session = ReplaySession(filter_, initializer, writer, output_rate)
        handlers = {topics.fix: session.fix, topics.vel: session.velocity}
        for n, (topic, msgtype, _, raw) in enumerate(
                bagio.read_raw(bag, [topics.imu, topics.reference, *handlers])):
            if topic == topics.imu:
                session.imu(cdr.decode_imu(raw))
            elif topic == topics.reference:
                session.reference(*cdr.decode_odometry(raw))
            else:
                handlers[topic](bagio.TYPESTORE.deserialize_cdr(raw, msgtype))
            if n % 20000 == 0:
                print(f"\rreplay: {100.0 * n / max(total, 1):5.1f} %", end="", file=sys.stderr,
                      flush=True)
    print("\rreplay: 100.0 %", file=sys.stderr)
    elapsed = time.perf_counter() - started
    summary = session.series.summary()
    summary.update({
        "bag": str(bag), "filter": filter_name, "status": filter_.status.value,
        "counters": session.session.counts(), "wall_time_s": elapsed,
        "imu_messages": session.session.received["imu"],
        "log_duration_s": session.session.duration,
        "real_time_factor": session.session.duration / elapsed if elapsed > 0 else math.inf,
        "datum": session.session.datum.geodetic if session.session.datum else None,
    })
    if report is not None:
        write_report(session.series, summary, report)
    return summary


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of trident-replay (exits with a usage error on bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="trident-replay",
        description="Run the trident-quaternion EKF over a rosbag2 (IMU + GNSS) as fast as "
                    "possible; write /trident_ekf/odometry (ENU 'map' at the first GNSS fix, "
                    "FLU body, covariances filled), /trident_ekf/gyro_bias, "
                    f"/trident_ekf/accel_bias and {DIAGNOSTICS_TOPIC} (as the live node), and "
                    "optionally a Markdown/JSON report with PNG plots against the reference "
                    "odometry. Exit status: 0 done, 1 the bag lacks a needed topic, 2 usage "
                    "error or the output exists.")
    parser.add_argument("bag", type=Path,
                        help="input rosbag2 directory (e.g. from trident-import); its "
                             "NAME_0.mcap file, or NAME.mcap for NAME/, are accepted too")
    parser.add_argument("--output", type=Path, metavar="BAG",
                        help="output rosbag2 directory to create: BAG/BAG_0.mcap + "
                             "metadata.yaml (BAG.mcap is read as BAG); must not exist unless "
                             "--force")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing --output bag (a directory with "
                             "metadata.yaml, or an empty one)")
    parser.add_argument("--imu-topic", default=Topics.imu, help="sensor_msgs/Imu topic")
    parser.add_argument("--fix-topic", default=Topics.fix, help="sensor_msgs/NavSatFix topic")
    parser.add_argument("--vel-topic", default=Topics.vel,
                        help="geometry_msgs/TwistWithCovarianceStamped ENU velocity topic")
    parser.add_argument("--reference-topic", default=Topics.reference,
                        help="nav_msgs/Odometry reference (ENU 'map' at the first fix)")
    parser.add_argument("--filter", choices=["trident", "baseline"], default="trident",
                        help="estimator: the trident EKF (default) or the conventional ESKF")
    parser.add_argument("--yaw", type=float, default=None,
                        help="initial ENU yaw, deg (default: GNSS course once faster than "
                             "3 m/s; yaw 0 with a 180 deg sigma if not moving within 10 s)")
    parser.add_argument("--level-duration", type=float, default=1.0,
                        help="static levelling window at the start, s (default 1)")
    parser.add_argument("--output-rate", type=float, default=50.0,
                        help="odometry output rate, Hz (default 50; at most one per IMU "
                             "sample; biases are written at 10 Hz, diagnostics per fix)")
    parser.add_argument("--gyro-noise", type=float, default=5e-3,
                        help="gyro white noise, rad/s/sqrt(Hz) (default 5e-3: a vibrating "
                             "multirotor, several times the datasheet value)")
    parser.add_argument("--accel-noise", type=float, default=0.3,
                        help="accelerometer white noise, m/s^2/sqrt(Hz) (default 0.3)")
    parser.add_argument("--gyro-bias-walk", type=float, default=1e-4,
                        help="gyro bias random walk, rad/s/sqrt(s) (default 1e-4)")
    parser.add_argument("--accel-bias-walk", type=float, default=1e-3,
                        help="accelerometer bias random walk, m/s^2/sqrt(s) (default 1e-3)")
    parser.add_argument("--lever-arm", type=float, nargs=3, default=(0.0, 0.0, 0.0),
                        metavar=("X", "Y", "Z"),
                        help="IMU to GNSS antenna in FLU body axes, m (default 0 0 0)")
    parser.add_argument("--report", type=Path,
                        help="directory for the report (Markdown, JSON, PNG)")
    args = parser.parse_args(argv)
    bag = bagio.bag_input(args.bag)
    if bag is None:
        parser.error(f"{args.bag} is not a rosbag2 directory (make one from a flight log "
                     "with trident-import)" if args.bag.exists() else f"no such bag: {args.bag}")
    if bag != args.bag:
        print(f"note: reading the rosbag2 directory {bag}", file=sys.stderr)
        args.bag = bag
    if args.output is not None:
        output = bagio.bag_directory(args.output)
        if output != args.output:
            print(f"note: --output names a rosbag2 directory; writing {output}/ "
                  f"({bagio.storage_file(output).name} and metadata.yaml)", file=sys.stderr)
            args.output = output
        try:
            bagio.check_output(args.output, args.force)
        except bagio.OutputExistsError as error:
            parser.error(str(error))
    if not args.output_rate > 0.0:
        parser.error(f"--output-rate must be > 0 Hz, got {args.output_rate}")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Replay as ``args`` (from ``parse_args``) say; returns the summary."""
    initializer = Initializer(level_duration=args.level_duration,
                              yaw=None if args.yaw is None else math.radians(args.yaw))
    config = FilterConfig(gyro_noise=args.gyro_noise, accel_noise=args.accel_noise,
                          gyro_bias_walk=args.gyro_bias_walk,
                          accel_bias_walk=args.accel_bias_walk,
                          lever_arm=tuple(args.lever_arm))
    return replay(args.bag, args.output, Topics(args.imu_topic, args.fix_topic,
                                                args.vel_topic, args.reference_topic),
                  args.filter, config, initializer, args.output_rate, args.report,
                  args.force)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = run(args)
    except bagio.OutputExistsError as error:  # appeared while replaying
        print(f"trident-replay: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"trident-replay: {error}", file=sys.stderr)
        return 1
    print(f"status {summary['status']}, {summary['imu_messages']} IMU messages in "
          f"{summary['wall_time_s']:.2f} s")
    for key in ("rmse_position_m", "rmse_velocity_m_s", "rmse_roll_pitch_deg", "rmse_yaw_deg",
                "nis_mean"):
        if key in summary:
            print(f"  {key}: {summary[key]}")
    if args.report:
        print(f"report: {args.report / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
