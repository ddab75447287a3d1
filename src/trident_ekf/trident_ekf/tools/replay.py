"""trident-replay: run the estimator over a rosbag2 as fast as possible and record its output.

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
from numpy.typing import NDArray

from mav_geometry import quaternion
from mav_geometry.scalar import multiply, to_matrix
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import (
    OMEGA_ECEF,
    enu_to_ecef_rotation,
    geodetic_to_ecef,
)
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.tools import bagio, cdr
from trident_ekf.tools.report import ReportSeries, write_report

REPORT_RATE = 10.0  # Hz
GNSS_PAIRING = 0.05  # s: a fix and a velocity closer than this form one measurement
# Used when a message carries no covariance (notes 5.5 starting values): ENU m^2, m^2/s^2.
DEFAULT_FIX_COVARIANCE = np.diag([2.5**2, 2.5**2, 5.0**2])
DEFAULT_VELOCITY_COVARIANCE = np.eye(3) * 0.2**2


@dataclass(frozen=True)
class Topics:
    imu: str = "/imu/data"
    fix: str = "/gnss/fix"
    vel: str = "/gnss/vel"
    reference: str = "/reference/odometry"


class Datum:
    """ENU 'map' frame at a geodetic point: ECEF <-> ENU for positions, vectors, covariances."""

    def __init__(self, latitude: float, longitude: float, height: float) -> None:
        self.geodetic = (latitude, longitude, height)
        self.origin = geodetic_to_ecef(latitude, longitude, height)
        self.enu_to_ecef = enu_to_ecef_rotation(latitude, longitude)
        x, y, z, w = quaternion.from_matrix(self.enu_to_ecef)
        self._ecef_to_enu_quaternion = (-x, -y, -z, w)

    def attitude_enu(self, q_body_to_ecef: NDArray) -> NDArray:
        """q body->ENU with a non-negative scalar part (a quaternion product: converting the
        rotation matrix back costs more than the rest of an output)."""
        q = np.array(multiply(self._ecef_to_enu_quaternion, q_body_to_ecef))
        return -q if q[3] < 0.0 else q

    def position_enu(self, p_ecef: NDArray) -> NDArray:
        """ENU coordinates (m): the tangent-plane rotation of p - origin (as ecef2enu)."""
        return self.enu_to_ecef.T @ (np.asarray(p_ecef, dtype=float) - self.origin)


class ReplaySession:
    """Feeds messages to the initializer, then to the filter, and writes its outputs."""

    def __init__(self, filter_: ErrorStateFilter, initializer: Initializer,
                 writer: bagio.BagWriter | None, output_rate: float) -> None:
        self.filter = filter_
        self.initializer = initializer
        self.writer = writer
        self.output_period = 1.0 / output_rate
        self.datum: Datum | None = None
        self._local_rotation = np.eye(3)
        self.series = ReportSeries()
        self._last_output = -math.inf
        self._last_report = -math.inf
        self._fix: tuple[float, NDArray, NDArray] | None = None
        self._velocity: tuple[float, NDArray, NDArray] | None = None
        self.imu_count = 0
        self._first_imu = math.nan
        self._last_imu = math.nan

    @property
    def duration(self) -> float:
        """Span of the IMU stamps seen so far, s."""
        return 0.0 if self.imu_count < 2 else self._last_imu - self._first_imu

    # ----- inputs -------------------------------------------------------------------------
    def imu(self, sample: cdr.ImuSample) -> None:
        stamp, gyro, accel = sample
        t = stamp * 1e-9
        self.imu_count += 1
        if self.imu_count == 1:
            self._first_imu = t
        self._last_imu = t
        self._flush_gnss(t)
        if not self.filter.initialized:
            self.initializer.add_imu(t, gyro, accel)
            return
        if self.filter.process_imu(t, gyro, accel):
            self._outputs(t, stamp)

    def fix(self, message: Any) -> None:
        if message.status.status < 0:  # NO_FIX must not be fused
            return
        t = bagio.stamp_ns(message) * 1e-9
        if self.datum is None:
            self.datum = Datum(message.latitude, message.longitude, message.altitude)
        self._flush_gnss(t)
        rotation = enu_to_ecef_rotation(message.latitude, message.longitude)
        self._local_rotation = rotation
        covariance_enu = np.asarray(message.position_covariance, dtype=float).reshape(3, 3)
        if message.position_covariance_type == 0:  # COVARIANCE_TYPE_UNKNOWN
            covariance_enu = DEFAULT_FIX_COVARIANCE
        covariance = rotation @ covariance_enu @ rotation.T
        position = geodetic_to_ecef(message.latitude, message.longitude, message.altitude)
        self._fix = (t, position, covariance)
        self._pair()

    def velocity(self, message: Any) -> None:
        if self.datum is None:
            return
        t = bagio.stamp_ns(message) * 1e-9
        linear = message.twist.twist.linear
        rotation = self._local_rotation  # ENU at the latest fix
        covariance = np.asarray(message.twist.covariance, dtype=float).reshape(6, 6)[:3, :3]
        if not np.any(covariance):
            covariance = DEFAULT_VELOCITY_COVARIANCE
        self._velocity = (t, rotation @ np.array([linear.x, linear.y, linear.z]),
                          rotation @ covariance @ rotation.T)
        self._pair()

    def reference(self, stamp: int, values: NDArray) -> None:
        """nav_msgs/Odometry as ``cdr.decode_odometry`` gives it."""
        if not self.filter.initialized or self.datum is None:
            return
        t = stamp * 1e-9
        if t - self._last_report < 1.0 / REPORT_RATE:
            return
        self._last_report = t
        q = values[cdr.ORIENTATION]
        v_enu = quaternion.rotate(q, values[cdr.LINEAR])
        self.series.add_reference(t, values[cdr.POSITION], v_enu, q, self._estimate_enu())

    # ----- GNSS pairing -------------------------------------------------------------------
    def _pair(self) -> None:
        if self._fix and self._velocity and abs(self._fix[0] - self._velocity[0]) < GNSS_PAIRING:
            fix, velocity = self._fix, self._velocity
            self._fix = self._velocity = None
            self._submit(fix[0], fix[1], fix[2], velocity[1], velocity[2])

    def _flush_gnss(self, t: float) -> None:
        """A fix left without a velocity for longer than the pairing window goes alone."""
        if self._fix and t - self._fix[0] > GNSS_PAIRING:
            fix, self._fix = self._fix, None
            self._submit(fix[0], fix[1], fix[2], None, None)
        if self._velocity and t - self._velocity[0] > GNSS_PAIRING:
            self._velocity = None

    def _submit(self, t: float, position: NDArray, position_cov: NDArray,
                velocity: NDArray | None, velocity_cov: NDArray | None) -> None:
        if not self.filter.initialized:
            if self.initializer.add_gnss(t, position, velocity):
                start = self.initializer.result
                self.filter.initialize(start.time, start.attitude, start.velocity,
                                       start.position, start.sigmas, start.gyro_bias)
            return
        self.filter.process_gnss(t, position, position_cov, velocity, velocity_cov)
        for update in self.filter.drain_updates():
            self.series.add_nis(update.time, update.nis, update.dof, update.accepted)
            if self.writer is not None:
                stamp = round(update.time * 1e9)
                self.writer.write("/trident_ekf/diagnostics", bagio.DIAGNOSTICS, stamp,
                                  self._diagnostics(stamp, update))

    # ----- outputs ------------------------------------------------------------------------
    def _estimate_enu(self) -> dict[str, NDArray]:
        """The estimate in the ENU map frame with its covariances (and ECEF helpers)."""
        q_e, v_e, p_e = self.filter.nominal()
        datum = self.datum
        R = datum.enu_to_ecef
        C_eb = np.array(to_matrix(tuple(q_e)))
        C_nb = R.T @ C_eb
        P = self.filter.conventional_covariance()
        return {
            "position": datum.position_enu(p_e), "velocity": R.T @ v_e,
            "attitude": datum.attitude_enu(q_e),
            "position_cov": R.T @ P[6:9, 6:9] @ R, "velocity_cov": R.T @ P[3:6, 3:6] @ R,
            "attitude_cov": C_nb @ P[0:3, 0:3] @ C_nb.T,
            "gyro_bias": np.array(self.filter.gyro_bias),
            "accel_bias": np.array(self.filter.accel_bias),
            "bias_sigma": np.sqrt(np.diag(P)[9:15]),
            "C_eb": C_eb, "v_ecef": v_e, "P_vel_ecef": P[3:6, 3:6],
        }

    def _outputs(self, t: float, stamp: int) -> None:
        """Odometry at the output rate; biases and the report series at ``REPORT_RATE``."""
        due_output = self.writer is not None and t - self._last_output >= self.output_period
        due_report = t - self.series.last_estimate_time >= 1.0 / REPORT_RATE
        if not (due_output or due_report):
            return
        self.filter.flush()
        estimate = self._estimate_enu()
        if due_report:
            self.series.add_estimate(t, estimate)
            if self.writer is not None:
                for name in ("gyro_bias", "accel_bias"):
                    self.writer.write_cdr(f"/trident_ekf/{name}", bagio.VECTOR, stamp,
                                          cdr.encode_stamped(stamp, ("base_link",),
                                                             estimate[name]))
        if not due_output:
            return
        self._last_output = t
        # Odometry fields in message order, the 6x6 covariances as views into the buffer.
        values = np.zeros(cdr.ODOMETRY_DOUBLES)
        values[cdr.POSITION] = estimate["position"]
        values[cdr.ORIENTATION] = estimate["attitude"]
        pose_cov = values[cdr.POSE_COVARIANCE].reshape(6, 6)
        pose_cov[:3, :3] = estimate["position_cov"]
        pose_cov[3:, 3:] = estimate["attitude_cov"]
        C = estimate["C_eb"]
        values[cdr.LINEAR] = C.T @ estimate["v_ecef"]
        values[cdr.ANGULAR] = np.array(self.filter.last_omega) - C.T @ OMEGA_ECEF
        twist_cov = values[cdr.TWIST_COVARIANCE].reshape(6, 6)
        twist_cov[:3, :3] = C.T @ estimate["P_vel_ecef"] @ C
        twist_cov[3:, 3:] = np.eye(3) * self.filter.config.gyro_noise**2
        self.writer.write_cdr("/trident_ekf/odometry", bagio.ODOMETRY, stamp,
                              cdr.encode_stamped(stamp, ("map", "base_link"), values))

    def _diagnostics(self, stamp: int, update: Any) -> Any:
        status = self.filter.status
        level = {"nominal": 0, "outage": 1}.get(status.value, 2)
        values = {"nis": f"{update.nis:.3f}", "dof": str(update.dof),
                  "accepted": str(update.accepted).lower(), "status": status.value}
        values.update({k: str(v) for k, v in self.filter.counters.as_dict().items()})
        return bagio.diagnostics_message(stamp, "trident_ekf", level, status.value, values)


def replay(bag: Path, output: Path | None, topics: Topics, filter_name: str,
           config: FilterConfig, initializer: Initializer, output_rate: float,
           report: Path | None) -> dict:
    """Run one bag through the filter; returns the summary (and writes bag and report)."""
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
    writer = bagio.BagWriter(output) if output is not None else None
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
        "counters": filter_.counters.as_dict(), "wall_time_s": elapsed,
        "imu_messages": session.imu_count, "log_duration_s": session.duration,
        "real_time_factor": session.duration / elapsed if elapsed > 0 else math.inf,
        "datum": session.datum.geodetic if session.datum else None,
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
                    "FLU body, covariances filled), bias and diagnostics topics, and optionally "
                    "a Markdown/JSON report with PNG plots against the reference odometry.")
    parser.add_argument("bag", type=Path, help="input rosbag2 directory (e.g. from trident-import)")
    parser.add_argument("--output", type=Path, help="output rosbag2 (MCAP) directory to create")
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
    if not args.bag.exists():
        parser.error(f"no such bag: {args.bag}")
    if not args.output_rate > 0.0:
        parser.error(f"--output-rate must be > 0 Hz, got {args.output_rate}")
    return args


def run(args: argparse.Namespace) -> dict:
    """Replay as ``args`` (from ``parse_args``) say; returns the summary."""
    initializer = Initializer(level_duration=args.level_duration,
                              yaw=None if args.yaw is None else math.radians(args.yaw))
    config = FilterConfig(gyro_noise=args.gyro_noise, accel_noise=args.accel_noise,
                          gyro_bias_walk=args.gyro_bias_walk,
                          accel_bias_walk=args.accel_bias_walk,
                          lever_arm=tuple(args.lever_arm))
    return replay(args.bag, args.output, Topics(args.imu_topic, args.fix_topic,
                                                args.vel_topic, args.reference_topic),
                  args.filter, config, initializer, args.output_rate, args.report)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = run(args)
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
