"""trident-import: convert a PX4 ULog or ArduPilot DataFlash log into a rosbag2 (MCAP)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trident_ekf.tools.flightlog import read_log, write_bag

DESCRIPTION = """Convert a PX4 ULog (.ulg, or a folder of its ulog2csv export), a PX4 EKF2
replay CSV (test_replay_data_*.csv) or an ArduPilot DataFlash (.bin) log into a rosbag2 MCAP
with /imu/data (sensor_msgs/Imu, FLU body, rad/s and specific force m/s^2), /gnss/fix
(NavSatFix, degrees, ellipsoidal height m, ENU covariance m^2 from the receiver accuracy),
/gnss/vel (TwistWithCovarianceStamped, ENU m/s) and /reference/odometry (the autopilot's own
estimate as nav_msgs/Odometry in an ENU 'map' frame whose datum is the first 3D GNSS fix,
FLU body). Stamps are the log clock (s since boot). DataFlash and EKF2 replay logs have no
ellipsoidal height (MSL is used) and no estimator origin (the reference is aligned to the
GNSS track)."""


def _progress(fraction: float) -> None:
    print(f"\rwriting: {100.0 * fraction:5.1f} %", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trident-import", description=DESCRIPTION)
    parser.add_argument("log", type=Path,
                        help="flight log (.ulg, .bin, ulog2csv folder or EKF2 replay .csv)")
    parser.add_argument("--output", type=Path, required=True,
                        help="rosbag2 directory to create (must not exist)")
    args = parser.parse_args(argv)
    if not args.log.exists():
        parser.error(f"no such log: {args.log}")
    try:
        log = read_log(args.log)
        counts = write_bag(log, args.output, _progress)
    except ValueError as error:
        print(f"\ntrident-import: {error}", file=sys.stderr)
        return 1
    print(file=sys.stderr)
    duration = log.imu_time[-1] - log.imu_time[0]
    if log.reference_time.size == 0:
        print("note: the log has no onboard estimate; no /reference/odometry written")
    print(f"{args.output}: {duration:.1f} s of log, datum {log.datum[0]:.7f} deg, "
          f"{log.datum[1]:.7f} deg, {log.datum[2]:.2f} m")
    for topic, count in counts.items():
        print(f"  {topic}: {count} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
