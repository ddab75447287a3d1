"""trident-replay: run the estimator over a rosbag2 as fast as possible and record its output.

The output bag has the live node's topics: /trident_ekf/odometry, the biases and
diagnostics at 1 Hz of stamp time, in every phase, on /diagnostics
(``mav_ros_common.diagnostics.DIAGNOSTICS_TOPIC``, the estimator node's topic).

Inputs (``--inputs``, ``trident_ekf.adapters``): ``ros`` (default) reads the standard
topics /imu/data, /gnss/fix, /gnss/vel (``--imu-topic`` ...); ``mavros`` and ``px4`` read
the topics the live node subscribes for that profile (under ``--mavros-namespace``,
``--px4-namespace``) through the same converters and ``deliver``, so a bag recorded from
MAVROS or from PX4's uXRCE-DDS bridge replays as the node would have run on it. Types that
are not standard ROS 2 messages (px4_msgs) are read with the definitions the bag carries.
A message a converter cannot read is counted as ``<kind>_malformed`` (as the node does).

Aiding: every source of ``trident_ekf.inputs`` whose topic is in the bag (barometer,
magnetometer, external pose) is fused unless ``--no-aid`` says otherwise; sources without
a topic (zero velocity) with ``--aid``. Source settings come from ``--set``. An import
summary that trident-import wrote into the bag (dropped reference rows, the flight date for
the World Magnetic Model) goes into the report.

Streaming: messages are read, fused and written one at a time; only the report keeps a
series, decimated to at most ``REPORT_RATE`` Hz. The high-rate messages (IMU and reference
odometry in, odometry and biases out) go through ``cdr`` rather than rosbags' objects.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.settings import configure
from mav_ros_common.exit_codes import EXIT_OK, EXIT_PARTIAL
from mav_ros_common.plot_workers import PlotWorkers
from mav_ros_common.topic_names import DIAGNOSTICS_TOPIC
from trident_ekf.adapters import (
    MALFORMED,
    PROFILE_NAMES,
    Fix,
    Input,
    InputOptions,
    Sample,
    Velocity,
    build_profile,
    deliver,
)
from trident_ekf.adapters import ros as ros_adapter
from trident_ekf.adapters.base import absolute
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth_field import decimal_year
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import REGISTRY, build_sources
from trident_ekf.core.measurements.gnss import GnssConfig
from trident_ekf.core.measurements.magnetometer import MagnetometerConfig
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.core.yaw_estimator import YawEstimatorConfig
from trident_ekf.inputs import MESSAGE_INPUTS, MessageInput
from trident_ekf.tools import bagio, cdr
from trident_ekf.tools.bag_reader import BagReader
from trident_ekf.tools.command import UsageError, check_writable, fail, run_command
from trident_ekf.tools.report import ReportSeries, report_workers, write_report

PROG = "trident-replay"

REPORT_RATE = 10.0  # Hz
DIAGNOSTICS_RATE = 1.0  # Hz of stamp time, in every phase (the node's default rate)


@dataclass(frozen=True)
class Topics:
    imu: str = "/imu/data"
    fix: str = "/gnss/fix"
    vel: str = "/gnss/vel"
    reference: str = "/reference/odometry"
    aiding: dict[str, str] = field(default_factory=dict)  # source -> topic (default /<topic>)

    def aiding_topic(self, message_input: MessageInput) -> str:
        return self.aiding.get(message_input.source, f"/{message_input.topic}")


@dataclass(frozen=True)
class Aiding:
    """What to fuse besides GNSS: sources to add or leave out, their settings (source ->
    field -> value, ``gnss`` for the GNSS noise model) and a GNSS outage to simulate
    (start s after the first IMU sample, duration s)."""

    enable: tuple[str, ...] = ()
    disable: tuple[str, ...] = ()
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    gnss_outage: tuple[float, float] | None = None
    stop: float = math.inf  # s after the first IMU sample: the replay ends there
    start: float = 0.0  # s after the first IMU sample: the estimator sees nothing before
    evaluate_from: float = 0.0  # s after the first IMU sample: compare from there on


class ReplaySession:
    """Translates bag messages into an ``EstimationSession`` and writes its outputs."""

    def __init__(self, session: EstimationSession, writer: bagio.BagWriter | None,
                 output_rate: float, gnss_outage: tuple[float, float] | None = None,
                 start: float = 0.0) -> None:
        self.session = session
        self.filter = session.filter
        self.writer = writer
        self.schedule = OutputSchedule(output_rate)
        self.series = ReportSeries(session.filter.config.history_length)
        self._last_report = -math.inf
        self._outage = gnss_outage
        self._start = start
        self._first_imu = math.nan
        self._next_diagnostics = -math.inf
        self.first_fix_time = math.nan  # s: stamp of the first fix with a fix
        self.outage_dropped = 0  # GNSS messages left out by ``gnss_outage``

    # ----- inputs -------------------------------------------------------------------------
    def imu(self, sample: cdr.ImuSample) -> None:
        stamp, gyro, accel = sample
        if math.isnan(self._first_imu):
            self._first_imu = stamp * 1e-9
        if self.before_start(stamp):
            return
        if self.session.imu(stamp, gyro, accel):
            self._outputs(stamp * 1e-9, stamp)
        self._diagnostics(stamp)

    def before_start(self, stamp: int) -> bool:
        """True for a message stamped before ``start`` s after the first IMU sample (and
        for every message before the first IMU sample when starting later)."""
        if self._start <= 0.0:
            return False
        return not stamp * 1e-9 >= self._first_imu + self._start

    def in_outage(self, stamp: int) -> bool:
        """True (and counted) for a GNSS message inside the simulated outage."""
        if self._outage is None or math.isnan(self._first_imu):
            return False
        start = self._first_imu + self._outage[0]
        inside = start <= stamp * 1e-9 < start + self._outage[1]
        self.outage_dropped += inside
        return inside

    def past(self, bag_time_ns: int, stop: float) -> bool:
        """True once the bag time is ``stop`` s after the first IMU sample."""
        return bag_time_ns * 1e-9 >= self._first_imu + stop  # False while NaN

    def outage_window(self) -> tuple[float, float] | None:
        """The simulated outage in stamp seconds (None without one or before any IMU)."""
        if self._outage is None or math.isnan(self._first_imu):
            return None
        start = self._first_imu + self._outage[0]
        return start, start + self._outage[1]

    def sample(self, sample: Sample) -> None:
        """A sample of the adapter layer with the bookkeeping of the handlers here:
        ``start``, the simulated GNSS outage, the first fix."""
        if isinstance(sample, cdr.ImuSample):
            self.imu(sample)
            return
        if self.before_start(sample.stamp_ns):
            return
        if isinstance(sample, Fix | Velocity):
            if self.in_outage(sample.stamp_ns):
                return
            if (isinstance(sample, Fix) and math.isnan(self.first_fix_time)
                    and sample.status >= 0):
                self.first_fix_time = sample.stamp_ns * 1e-9
        deliver(self.session, sample)
        self._write_updates()

    def message(self, item: Input, data: Any,
                decode: Callable[[Any], Any] | None = None) -> None:
        """A bag message of a profile input (``decode`` makes the converter's message of
        ``data``; None: it takes ``data``, e.g. the CDR bytes of a ``raw`` input) converted
        as the node converts it; one that cannot be read is counted as
        ``<kind>_malformed``."""
        try:
            samples = item.convert(data if decode is None else decode(data))
        except MALFORMED:
            key = f"{item.kind}_malformed"
            self.session.rejected[key] = self.session.rejected.get(key, 0) + 1
            return
        for sample in samples:
            self.sample(sample)

    def aiding(self, message_input: MessageInput, message: Any) -> None:
        try:
            stamp, fields_ = message_input.arguments(message)
        except (ValueError, TypeError, AttributeError):
            self.session.rejected[f"{message_input.source}_malformed"] += 1
            return
        if self.before_start(stamp):
            return
        self.session.aid(message_input.source, stamp, **fields_)
        self._write_updates()

    def fix(self, message: Any) -> None:
        """sensor_msgs/NavSatFix."""
        for sample in ros_adapter.navsatfix(message):
            self.sample(sample)

    def velocity(self, message: Any) -> None:
        """geometry_msgs/TwistWithCovarianceStamped."""
        for sample in ros_adapter.twist_with_covariance(message):
            self.sample(sample)

    def reference(self, stamp: int, values: FloatArray, evaluate_from: float = 0.0) -> None:
        """nav_msgs/Odometry as ``cdr.decode_odometry`` gives it; compared from
        ``evaluate_from`` s after the first IMU sample on."""
        t = stamp * 1e-9
        if not self.session.started or not t >= self._first_imu + evaluate_from:
            return
        if t - self._last_report < 1.0 / REPORT_RATE:
            return
        self._last_report = t
        q = values[cdr.ORIENTATION]
        v_enu = quaternion.rotate(q, values[cdr.LINEAR])
        self.series.add_reference(t, values[cdr.POSITION], v_enu, q, self.session.estimate(),
                                  self.outage_window())

    # ----- outputs ------------------------------------------------------------------------
    def finish(self) -> None:
        """At the end of the bag: the updates applied since the last message."""
        self._write_updates()

    def _write_updates(self) -> None:
        """Every update into the report."""
        for update in self.session.drain_updates():
            self.series.add_update(update, self.session.filter.time)

    def _diagnostics(self, stamp: int) -> None:
        """/diagnostics at ``DIAGNOSTICS_RATE`` of IMU stamp time, whatever the phase."""
        t = stamp * 1e-9
        if self.writer is None or t < self._next_diagnostics:
            return
        self._next_diagnostics = max(self._next_diagnostics + 1.0 / DIAGNOSTICS_RATE, t)
        self._write_updates()
        level, summary, values = self.session.diagnostics()
        self.writer.write(DIAGNOSTICS_TOPIC, bagio.DIAGNOSTICS, stamp,
                          bagio.diagnostics_message(stamp, "trident_ekf", level, summary,
                                                    values))

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


def import_summary(bag: Path | BagReader, types: dict[str, tuple[str, int]]) -> dict[str, str]:
    """The key/values trident-import wrote into the bag (empty for other bags)."""
    if bagio.IMPORT_SUMMARY_TOPIC not in types:
        return {}
    for _, _, message in bagio.read_messages(bag, [bagio.IMPORT_SUMMARY_TOPIC]):
        return {item.key: item.value for status in message.status for item in status.values}
    return {}


def build_session(filter_name: str, config: FilterConfig, initializer: Initializer,
                  aiding: Aiding, available: list[str],
                  summary: dict[str, str]) -> EstimationSession:
    """The session with the enabled sources: the ``available`` message sources not
    disabled, plus ``aiding.enable``. The magnetometer takes the flight date from the
    import summary when its ``model_year`` is not set; the map datum is the import's (the
    reference odometry's origin), else the first fix."""
    names = [n for n in available if n not in aiding.disable]
    names += [n for n in aiding.enable if n not in names]
    configs = {}
    for name in names:
        config_class = REGISTRY[name].config
        source_config = configure(config_class, aiding.settings.get(name, {}))
        utc_start = summary.get("utc_start", "")
        if (isinstance(source_config, MagnetometerConfig) and utc_start
                and math.isnan(source_config.model_year)):
            source_config = replace(source_config, model_year=decimal_year(float(utc_start)))
        configs[name] = source_config
    filter_ = (TridentEKF if filter_name == "trident" else BaselineESKF)(
        config, build_sources(configs))
    gnss_receiver = configure(GnssConfig, aiding.settings.get("gnss", {}))
    yaw_estimator = configure(YawEstimatorConfig, aiding.settings.get("yaw_estimator", {}))
    datum = None
    if all(f"datum_{key}" in summary for key in ("latitude_deg", "longitude_deg", "height_m")):
        datum = (float(summary["datum_latitude_deg"]), float(summary["datum_longitude_deg"]),
                 float(summary["datum_height_m"]))
    return EstimationSession(filter_, initializer, datum, gnss_receiver=gnss_receiver,
                             yaw_estimator=yaw_estimator)


def replay(bag: Path, output: Path | None, topics: Topics, filter_name: str,
           config: FilterConfig, initializer: Initializer, output_rate: float,
           report: Path | None, overwrite: bool = False,
           aiding: Aiding | None = None,
           options: InputOptions | None = None) -> dict[str, Any]:
    """Run one bag through the filter; returns the summary (and writes bag and report).
    ``output`` is a rosbag2 directory (``bagio.BagWriter``, replaced only with
    ``overwrite``). ``options`` picks the input profile (default ``ros``: the topics of
    ``topics``); ValueError if the bag lacks the IMU or fix topic, a topic has another type
    or a type cannot be read, or the estimator never started (then nothing is written).
    A damaged bag is read as far as it can be (``BagReader``): the summary's
    ``input_loss`` says what was lost (empty: nothing)."""
    aiding = aiding or Aiding()
    options = options or InputOptions()
    reader = BagReader(bag)
    if reader.salvaged:
        print(f"note: {bag}: rosbags cannot read it ({reader.note}); reading every complete "
              "record", file=sys.stderr)
    types = reader.topics
    items = profile_inputs(options, topics)
    for item in items:
        if item.source is None and item.kind in ("imu", "fix") and item.topic not in types:
            hint = "" if options.profile == "ros" else (
                f"; --inputs {options.profile} reads {[i.topic for i in items]}")
            raise ValueError(f"the bag has no {item.kind} topic '{item.topic}' "
                             f"(has: {sorted(types)}){hint}")
    for topic, msgtype in ((topics.reference, bagio.ODOMETRY),
                           *((i.topic, i.msgtype) for i in items)):
        if topic in types and types[topic][0] != msgtype:
            raise ValueError(f"topic '{topic}' is {types[topic][0]}, not {msgtype}")
    inputs = {i.topic: i for i in items if i.topic in types and i.source not in aiding.disable}
    store = bagio.bag_typestore(reader, {i.msgtype for i in inputs.values() if not i.raw})
    imported = import_summary(reader, types)
    present = {i.source for i in inputs.values() if i.source is not None}
    session = build_session(filter_name, config, initializer, aiding,
                            [s for s in MESSAGE_INPUTS if s in present],  # every profile's order
                            imported)
    filter_ = session.filter
    workers = report_workers() if report is not None else None  # matplotlib loads meanwhile
    try:
        read = [topics.reference, *inputs]
        total = sum(types[t][1] for t in read if t in types)
        started = time.perf_counter()
        writer = bagio.BagWriter(output, overwrite) if output is not None else None
        with writer if writer is not None else _NullContext():
            replayer = ReplaySession(session, writer, output_rate, aiding.gnss_outage,
                                     aiding.start)
            for n, (topic, msgtype, bag_time, raw) in enumerate(reader.raw(read)):
                if replayer.past(bag_time, aiding.stop):
                    break
                entry = inputs.get(topic)
                if entry is None:
                    replayer.reference(*cdr.decode_odometry(raw), aiding.evaluate_from)
                else:
                    replayer.message(entry, raw, None if entry.raw else
                                     partial(store.deserialize_cdr, typename=msgtype))
                if n % 20000 == 0:
                    print(f"\rreplay: {100.0 * n / max(total, 1):5.1f} %", end="", file=sys.stderr,
                          flush=True)
            replayer.finish()
            if not session.started:  # raised inside the writer: the output bag is discarded
                raise ValueError(f"{bag}: the estimator never started ({session.received['imu']} "
                                 f"IMU samples, {session.received['fix']} fixes read); nothing "
                                 "written")
        print("\rreplay: 100.0 %", file=sys.stderr)
        elapsed = time.perf_counter() - started
        summary = replayer.series.summary()
        if "first_estimate_time_s" in summary:
            summary["first_output_after_fix_s"] = (summary["first_estimate_time_s"]
                                                   - replayer.first_fix_time)
        summary.update({
            "bag": str(bag), "inputs": options.profile, "filter": filter_name,
            "status": filter_.status.value,
            "aiding": sorted(filter_.sources),
            "sources": {name: status.summary() for name, status in filter_.aid_status.items()},
            "counters": session.counts(), "wall_time_s": elapsed,
            "imu_messages": session.received["imu"],
            "log_duration_s": session.duration,
            "real_time_factor": session.duration / elapsed if elapsed > 0 else math.inf,
            "datum": session.datum.geodetic if session.datum else None,
            "import": imported, "alignment": session.alignment, "yaw_source": session.yaw_source,
            "resets": dict(session.resets), "events": list(session.events),
            "input_loss": reader.loss(),
        })
        magnetometer = filter_.sources.get("magnetometer")
        if magnetometer is not None:
            summary["magnetic_field_model"] = getattr(magnetometer, "field_origin", "")
        if aiding.gnss_outage is not None:
            summary["gnss_outage_s"] = list(aiding.gnss_outage)
            summary["gnss_outage_dropped_messages"] = replayer.outage_dropped
        if report is not None:
            _write_report_staged(replayer.series, summary, report, workers)
        return summary
    finally:
        if workers is not None:
            workers.close()


def _write_report_staged(series: ReportSeries, summary: dict[str, Any], directory: Path,
                         workers: PlotWorkers | None = None) -> None:
    """``write_report`` (its plots in ``workers`` when given) into a hidden directory next
    to ``directory``, then its files into ``directory`` (report.md last): a report cut
    short leaves nothing behind."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".partial",
                                    dir=directory.parent))
    try:
        write_report(series, summary, staging, workers)
        directory.mkdir(exist_ok=True)
        for file in sorted(staging.iterdir(), key=lambda path: path.name == "report.md"):
            os.replace(file, directory / file.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def profile_inputs(options: InputOptions, topics: Topics) -> list[Input]:
    """The profile's inputs on their bag topics: absolute names, the ``ros`` profile's
    sensors on ``topics.imu``, ``fix``, ``vel``, the aiding topics of ``topics.aiding``."""
    standard = {"imu": topics.imu, "fix": topics.fix, "velocity": topics.vel}
    inputs: list[Input] = []
    for item in build_profile(options).inputs:
        if item.source is not None:
            topic = topics.aiding.get(item.source, absolute(item.topic))
        elif options.profile == "ros":
            topic = standard[item.kind]
        else:
            topic = absolute(item.topic)
        inputs.append(replace(item, topic=topic))
    return inputs


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
                    "possible; write /trident_ekf/odometry (ENU 'map' at the import's datum, "
                    "else the first fix; FLU body; covariances filled), /trident_ekf/gyro_bias, "
                    f"/trident_ekf/accel_bias and {DIAGNOSTICS_TOPIC} (as the live node), and "
                    "optionally a Markdown/JSON report with PNG plots against the reference "
                    "odometry. A bag rosbags cannot read (an MCAP without its footer: a "
                    "recording killed or cut short; no metadata.yaml) is read record by "
                    "record, and a warning says what was lost. Exit status: 0 done, 1 the "
                    "bag cannot be read, lacks a needed topic or a type, or the estimator "
                    "never started (no output is left), 2 usage error or an output exists "
                    "or cannot be created, 3 done on a damaged bag (what was readable; 0 "
                    "with --allow-partial), 130 interrupted, 143 SIGTERM (unfinished "
                    "outputs removed).")
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
    parser.add_argument("--inputs", choices=PROFILE_NAMES, default="ros",
                        help="the vehicle interface the bag was recorded from, as the "
                             "estimator node's 'inputs' parameter: ros (default: standard "
                             "drivers, --imu-topic, --fix-topic, --vel-topic), mavros (the "
                             "MAVROS topics imu/data_raw, global_position/raw/fix, "
                             "global_position/raw/gps_vel, imu/static_pressure, imu/mag under "
                             "--mavros-namespace) or px4 (PX4 uXRCE-DDS out/sensor_combined, "
                             "out/vehicle_gps_position, out/vehicle_air_data, "
                             "out/vehicle_magnetometer under --px4-namespace; px4_msgs types "
                             "are read from the bag's own message definitions)")
    parser.add_argument("--mavros-namespace", default=InputOptions.mavros_namespace,
                        metavar="NS", help="namespace of the MAVROS topics with --inputs "
                                           f"mavros (default {InputOptions.mavros_namespace})")
    parser.add_argument("--px4-namespace", default=InputOptions.px4_namespace, metavar="NS",
                        help="namespace of the PX4 uXRCE-DDS topics with --inputs px4 "
                             f"(default {InputOptions.px4_namespace})")
    parser.add_argument("--gnss-velocity-sigma", type=float, default=math.nan,
                        metavar="M/S",
                        help="sigma per axis, m/s, of GNSS velocities without a covariance "
                             "(MAVROS' TwistStamped), as the node's gnss_velocity_sigma_mps "
                             "(default: none, the GNSS noise model's speed accuracy applies)")
    parser.add_argument("--imu-topic", default=Topics.imu,
                        help=f"sensor_msgs/Imu topic with --inputs ros (default {Topics.imu})")
    parser.add_argument("--fix-topic", default=Topics.fix,
                        help="sensor_msgs/NavSatFix topic with --inputs ros (default "
                             f"{Topics.fix})")
    parser.add_argument("--vel-topic", default=Topics.vel,
                        help="geometry_msgs/TwistWithCovarianceStamped ENU velocity topic "
                             f"with --inputs ros (default {Topics.vel})")
    parser.add_argument("--reference-topic", default=Topics.reference,
                        help="nav_msgs/Odometry reference (ENU 'map' at the first fix)")
    parser.add_argument("--filter", choices=["trident", "baseline"],
                        help="estimator: the trident EKF (default) or the conventional ESKF")
    parser.add_argument("--yaw", type=float, default=None,
                        help="initial ENU yaw, deg (default: from the magnetometer when the "
                             "bag has one, else from the yaw estimator; a static start "
                             "without either runs with yaw unknown until the vehicle moves)")
    parser.add_argument("--level-duration", type=float,
                        help="IMU window of the stillness test and the static levelling, s "
                             "(default 1)")
    parser.add_argument("--output-rate", type=float, default=50.0,
                        help="odometry output rate, Hz (default 50; at most one per IMU "
                             "sample; biases are written at 10 Hz, diagnostics at 1 Hz)")
    parser.add_argument("--params-file", type=Path, metavar="YAML",
                        help="the estimator node's parameter file (trident_ekf: "
                             "ros__parameters: ...), e.g. config/estimator_live.yaml or a "
                             "log's tuning in config/replay/: the filter, noise, "
                             "initialization, GNSS, yaw-estimator and aiding-source "
                             "parameters as the live node takes them (sources it does not "
                             "enable are not fused); the flags below override it when given. "
                             "Checked before the replay: an unknown or invalid parameter is "
                             "a usage error")
    parser.add_argument("--gyro-noise", type=float,
                        help="gyro white noise, rad/s/sqrt(Hz) (default 5e-3: a vibrating "
                             "multirotor, several times the datasheet value)")
    parser.add_argument("--accel-noise", type=float,
                        help="accelerometer white noise, m/s^2/sqrt(Hz) (default 0.3)")
    parser.add_argument("--gyro-bias-walk", type=float,
                        help="gyro bias random walk, rad/s/sqrt(s) (default 1e-4)")
    parser.add_argument("--accel-bias-walk", type=float,
                        help="accelerometer bias random walk, m/s^2/sqrt(s) (default 1e-3)")
    parser.add_argument("--lever-arm", type=float, nargs=3, metavar=("X", "Y", "Z"),
                        help="IMU to GNSS antenna in FLU body axes, m (default 0 0 0)")
    sources = sorted(REGISTRY)
    parser.add_argument("--aid", action="append", default=[], choices=sources, metavar="SOURCE",
                        help="also fuse this aiding source (e.g. zero_velocity: updates while "
                             f"the IMU is still); repeatable; one of {sources}")
    parser.add_argument("--no-aid", action="append", default=[], choices=sources,
                        metavar="SOURCE",
                        help="do not fuse this source although its topic is in the bag "
                             "(default: every one present: "
                             + ", ".join(f"{i.source} on /{i.topic} ({i.msgtype})"
                                         for i in MESSAGE_INPUTS.values())
                             + "; with --inputs mavros or px4 the barometer and magnetometer "
                               "are read from the profile's topics)")
    parser.add_argument("--aid-topic", action="append", default=[], metavar="SOURCE=TOPIC",
                        help="read a source from another topic, e.g. barometer=/baro")
    parser.add_argument("--set", action="append", default=[], metavar="SOURCE.SETTING=VALUE",
                        help="a setting of an aiding source, of the GNSS noise model "
                             "('gnss') or of the yaw estimator ('yaw_estimator'), e.g. "
                             "barometer.noise_sigma_m=0.5, "
                             "magnetometer.mode=heading, gnss.accuracy_scale=0.8, "
                             "magnetometer.field_ned_T=[2e-5,1e-6,4e-5]; units and ranges: "
                             "the estimator node's parameters of the same names")
    parser.add_argument("--gnss-outage", type=float, nargs=2, metavar=("START", "DURATION"),
                        help="leave out GNSS fixes and velocities from START s after the "
                             "first IMU sample for DURATION s (to test dead reckoning and "
                             "the barometer)")
    parser.add_argument("--start", type=float, default=0.0, metavar="S",
                        help="start the estimator S s after the first IMU sample, as if it "
                             "were switched on then (e.g. in flight; default 0)")
    parser.add_argument("--stop", type=float, default=math.inf, metavar="S",
                        help="end the replay S s after the first IMU sample (default: the "
                             "whole bag)")
    parser.add_argument("--evaluate-from", type=float, default=0.0, metavar="S",
                        help="compare with the reference only from S s after the first IMU "
                             "sample (skip a reference's own warm-up; default 0)")
    parser.add_argument("--report", type=Path,
                        help="directory for the report (Markdown, JSON, PNG); its files are "
                             "written when the replay is complete")
    parser.add_argument("--allow-partial", action="store_true",
                        help="exit 0 after replaying a truncated or damaged bag (the warning "
                             "stays); default: exit 3")
    args = parser.parse_args(argv)
    try:
        args.settings = parse_settings(args.set)
        args.parameters = None
        if args.params_file is not None:
            # The node's parameter specifications import rclpy: only for --params-file.
            from trident_ekf.ros.parameters import estimator_settings
            from trident_ekf.tools.parameter_file import read_parameter_file
            args.parameters = read_parameter_file(args.params_file, flag_parameters(args))
            estimator_settings(args.parameters)  # the core's own checks, before the replay
        args.aid_topics = dict(_pair(item, "--aid-topic") for item in args.aid_topic)
        args.input_options = InputOptions(
            args.inputs, args.mavros_namespace, args.px4_namespace,
            velocity_sigma_mps=args.gnss_velocity_sigma)
    except ValueError as error:
        parser.error(str(error))
    if args.inputs != "ros":
        moved = [flag for flag, value, default in (
            ("--imu-topic", args.imu_topic, Topics.imu), ("--fix-topic", args.fix_topic,
                                                          Topics.fix),
            ("--vel-topic", args.vel_topic, Topics.vel)) if value != default]
        if moved:
            parser.error(f"{', '.join(moved)} only apply to --inputs ros; the {args.inputs} "
                         f"topics follow --{args.inputs}-namespace")
    if args.gnss_outage is not None and not (args.gnss_outage[0] >= 0.0
                                             and args.gnss_outage[1] > 0.0):
        parser.error(f"--gnss-outage needs START >= 0 and DURATION > 0 s, "
                     f"got {args.gnss_outage}")
    if not (args.start >= 0.0 and args.start < args.stop):
        parser.error(f"--start must be >= 0 s and before --stop, got {args.start}")
    bag = bagio.bag_input(args.bag)
    if bag is None:
        fail(PROG, f"{args.bag} is not a rosbag2 directory (make one from a flight log "
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
        if args.output is not None:
            bagio.check_output(args.output, args.force)
            check_writable(args.output, "--output")
        if args.report is not None:
            check_writable(args.report, "--report")
    except UsageError as error:
        fail(PROG, str(error))
    if not args.output_rate > 0.0:
        parser.error(f"--output-rate must be > 0 Hz, got {args.output_rate}")
    return args


# Without --params-file: the command's own defaults (a vibrating multirotor's IMU).
REPLAY_DEFAULTS: dict[str, Any] = {"gyro_noise": 5e-3, "accel_noise": 0.3, "gyro_bias_walk": 1e-4,
                                   "accel_bias_walk": 1e-3, "lever_arm": (0.0, 0.0, 0.0),
                                   "level_duration_s": 1.0, "filter": "trident"}


def flag_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The node parameters the command-line flags set (only flags that were given)."""
    flags = {"gyro_noise": args.gyro_noise, "accel_noise": args.accel_noise,
             "gyro_bias_walk": args.gyro_bias_walk, "accel_bias_walk": args.accel_bias_walk,
             "lever_arm": None if args.lever_arm is None else list(args.lever_arm),
             "level_duration_s": args.level_duration, "initial_yaw_deg": args.yaw,
             "filter": args.filter}
    given = {name: value for name, value in flags.items() if value is not None}
    return given | {f"{group_}.{name}": value for group_, settings in args.settings.items()
                    for name, value in settings.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Replay as ``args`` (from ``parse_args``) say; returns the summary."""
    window = {"gnss_outage": None if args.gnss_outage is None else tuple(args.gnss_outage),
              "stop": args.stop, "start": args.start, "evaluate_from": args.evaluate_from}
    if args.parameters is None:
        values: Mapping[str, Any] = REPLAY_DEFAULTS | flag_parameters(args)
        initializer = Initializer(level_duration=values["level_duration_s"],
                                  yaw=None if args.yaw is None else math.radians(args.yaw))
        config = FilterConfig(**{name: values[name] for name in (
            "gyro_noise", "accel_noise", "gyro_bias_walk", "accel_bias_walk")},
            lever_arm=tuple(values["lever_arm"]))
        aiding = Aiding(tuple(args.aid), tuple(args.no_aid), args.settings, **window)
        filter_name = values["filter"]
    else:
        from mav_ros_common.parameters import group
        from trident_ekf.ros.parameters import estimator_settings
        values = args.parameters
        settings = estimator_settings(values)
        config, initializer = settings.filter_config, settings.initializer
        off = tuple(name for name in REGISTRY
                    if not values[f"{name}.enabled"] and name not in args.aid)
        aiding = Aiding((*settings.aiding, *args.aid), (*off, *args.no_aid),
                        {name: group(values, name) for name in aiding_groups()}, **window)
        filter_name = values["filter"]
    return replay(args.bag, args.output, Topics(args.imu_topic, args.fix_topic,
                                                args.vel_topic, args.reference_topic,
                                                args.aid_topics),
                  filter_name, config, initializer, args.output_rate, args.report,
                  args.force, aiding, args.input_options)


def aiding_groups() -> tuple[str, ...]:
    """The setting groups ``--set`` and the parameter file give: the GNSS noise model, the
    yaw estimator and every registered aiding source."""
    return ("gnss", "yaw_estimator", *REGISTRY)


def _pair(item: str, flag: str) -> tuple[str, str]:
    key, equals, value = item.partition("=")
    if not equals or not key or not value:
        raise ValueError(f"{flag} expects KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()


def parse_settings(items: list[str]) -> dict[str, dict[str, Any]]:
    """``SOURCE.SETTING=VALUE`` strings as source -> setting -> value (numbers, lists and
    NaN parsed; anything else kept as a string); ValueError for an unknown source."""
    settings: dict[str, dict[str, Any]] = {}
    for item in items:
        key, text = _pair(item, "--set")
        source, dot, name = key.partition(".")
        if not dot or source not in aiding_groups():
            raise ValueError(f"--set {item!r}: expected SOURCE.SETTING=VALUE with SOURCE one "
                             f"of {sorted(aiding_groups())}")
        settings.setdefault(source, {})[name] = _value(text)
    return settings


def _value(text: str) -> Any:
    """A number (``nan`` allowed), a bracketed list of numbers, true/false, or a string."""
    if text.startswith("[") and text.endswith("]"):
        return [float(c) for c in text[1:-1].split(",")]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(text) if text.lstrip("+-").isdigit() else number


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_command(PROG, lambda: _run_and_print(args))


def _run_and_print(args: argparse.Namespace) -> int:
    summary = run(args)
    _print_summary(summary)
    if args.report:
        print(f"report: {args.report / 'report.md'}")
    if not summary["input_loss"]:
        return EXIT_OK
    print(f"{PROG}: WARNING: {args.bag} is damaged; replayed what could be read:",
          file=sys.stderr)
    for line in summary["input_loss"]:
        print(f"  {line}", file=sys.stderr)
    return EXIT_OK if args.allow_partial else EXIT_PARTIAL


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"status {summary['status']}, {summary['imu_messages']} IMU messages in "
          f"{summary['wall_time_s']:.2f} s")
    for key in ("rmse_position_m", "rmse_velocity_m_s", "rmse_roll_pitch_deg", "rmse_yaw_deg",
                "nis_mean"):
        if key in summary:
            print(f"  {key}: {summary[key]}")
    for name, source in summary["sources"].items():
        print(f"  {name}: {source['accepted']} accepted, {source['rejected']} rejected, "
              f"NIS mean {source['nis_mean']:.2f} (expected {source['dof']})")


if __name__ == "__main__":
    sys.exit(main())
