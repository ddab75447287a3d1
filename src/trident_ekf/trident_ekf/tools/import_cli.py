"""trident-import: convert a PX4 ULog or ArduPilot DataFlash log into a rosbag2 (MCAP), with
a report of every row it dropped and why."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from mav_ros_common.exit_codes import EXIT_OK, EXIT_PARTIAL
from trident_ekf.tools import bagio
from trident_ekf.tools.command import check_writable, fail, run_command
from trident_ekf.tools.flightlog import FlightLog, import_warning, read_log, write_bag

PROG = "trident-import"

DESCRIPTION = """\
Convert a PX4 ULog (.ulg, or a folder of its ulog2csv export), a PX4 EKF2 replay CSV
(test_replay_data_*.csv) or an ArduPilot DataFlash (.bin) log into a rosbag2 bag (MCAP
storage) with
  /imu/data            sensor_msgs/Imu, FLU body, rad/s and specific force m/s^2
  /gnss/fix            NavSatFix, degrees, ellipsoidal height m, ENU covariance m^2 from
                       the receiver accuracy
  /gnss/vel            TwistWithCovarianceStamped, ENU m/s
  /barometer/pressure  sensor_msgs/FluidPressure, static pressure Pa of the barometer the
                       autopilot selected (variance 0: unknown); an EKF2 replay CSV logs
                       a barometric altitude, converted with the ISA standard atmosphere
  /magnetic_field      sensor_msgs/MagneticField, tesla, FLU body ('imu_link'), calibrated
                       as the autopilot uses it (covariance 0: unknown)
  /reference/odometry  the autopilot's own estimate as nav_msgs/Odometry in an ENU 'map'
                       frame whose datum is the first 3D GNSS fix, FLU body
  /trident_import/summary  one diagnostic_msgs/DiagnosticArray at the first stamp: the
                       import report (rows dropped by reason, sensor instances used),
                       utc_start (POSIX s of the first fix, empty if the log has no UTC),
                       source_log, the datum and data_loss (what a damaged log lost);
                       level WARN if rows were dropped, the reference was re-anchored or
                       the log is damaged
Stamps are the log clock (s since boot). Reference rows the autopilot flags invalid, with
non-finite values or physically impossible jumps are dropped; a logged change of the
estimator's origin is re-anchored to the datum. The import report lists every reason,
also with a zero count. DataFlash and EKF2 replay logs have no ellipsoidal height (MSL is
used) and no estimator origin (the reference is aligned to the GNSS track)."""

EPILOG = """output layout (as ros2 bag record writes it):
  --output BAG      writes the directory BAG/ with BAG/BAG_0.mcap and BAG/metadata.yaml;
                    give BAG to ros2 bag play/info or trident-replay.
  --output BAG.mcap is read as --output BAG (a note says so): the output is a directory.
  The bag is written next to BAG under a hidden name and moved into place when complete.

damaged logs:
  A ULog or DataFlash log that was cut short (its last record incomplete) or corrupted
  (records skipped, reading stopped early) is imported as far as it can be read; a warning
  says what was lost (from when, holes per sensor stream with the samples missing) and
  the bag's summary keeps it (data_loss). The exit status is then 3, unless
  --allow-partial.

exit status:
  0    bag written (with --allow-partial also from a damaged log)
  1    the log cannot be read (unsupported format, not a log, missing topics, no 3D GNSS
       fix) or the bag cannot be written
  2    usage error, or the output exists (without --force, or not a bag directory) or
       cannot be created
  3    bag written from a truncated or corrupt log: what was readable, with a warning
  130  interrupted (Ctrl-C), 143 stopped by SIGTERM: no bag is left behind"""


def _progress(fraction: float) -> None:
    print(f"\rwriting: {100.0 * fraction:5.1f} %", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trident-import", description=DESCRIPTION,
                                     epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path,
                        help="flight log (.ulg, .bin, ulog2csv folder or EKF2 replay .csv)")
    parser.add_argument("--output", type=Path, required=True, metavar="BAG",
                        help="rosbag2 directory to create (BAG/BAG_0.mcap + metadata.yaml); "
                             "must not exist unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output bag (a directory with metadata.yaml, "
                             "or an empty one); anything else is never deleted")
    parser.add_argument("--allow-partial", action="store_true",
                        help="exit 0 after importing a truncated or corrupt log (the warning "
                             "stays); default: exit 3")
    args = parser.parse_args(argv)
    if not args.log.exists():
        fail(PROG, f"no such log: {args.log}")
    output = bagio.bag_directory(args.output)
    if output != args.output:
        print(f"note: --output names a rosbag2 directory; writing {output}/ "
              f"({bagio.storage_file(output).name} and metadata.yaml)", file=sys.stderr)
    return run_command(PROG, lambda: _import(args.log, output, args.force, args.allow_partial))


def _import(path: Path, output: Path, force: bool, allow_partial: bool) -> int:
    bagio.check_output(output, force)
    check_writable(output, "--output")
    log = read_log(path)
    counts = write_bag(log, output, _progress, overwrite=force)
    print(file=sys.stderr)
    duration = log.imu_time[-1] - log.imu_time[0]
    if log.reference_time.size == 0:
        print("note: the log has no onboard estimate; no /reference/odometry written")
    print(f"{output}: {duration:.1f} s of log, datum {log.datum[0]:.7f} deg, "
          f"{log.datum[1]:.7f} deg, {log.datum[2]:.2f} m")
    for topic, count in counts.items():
        print(f"  {topic}: {count} messages")
    _print_report(log)
    if not log.damage:
        return EXIT_OK
    print(f"{PROG}: WARNING: {log.source_log} is damaged; the bag holds what could be read:",
          file=sys.stderr)
    for line in log.damage:
        print(f"  {line}", file=sys.stderr)
    return EXIT_OK if allow_partial else EXIT_PARTIAL


def _print_report(log: FlightLog) -> None:
    """Every reason of the import report (zero or not), and a warning if rows were dropped
    or the reference re-anchored."""
    utc = "unknown" if log.utc_start is None else (
        datetime.fromtimestamp(log.utc_start, UTC).isoformat(timespec="seconds"))
    print(f"import report (first GNSS fix at UTC {utc}):")
    for key, value in log.import_report.items():
        print(f"  {key}: {value}")
    warning = import_warning(log.import_report)
    if warning is not None:
        print(f"WARNING: {warning}")


if __name__ == "__main__":
    sys.exit(main())
