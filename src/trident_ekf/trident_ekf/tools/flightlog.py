"""Autopilot logs as ROS-convention arrays, and their export to a rosbag2 (MCAP).

A ``FlightLog`` holds everything in ENU/FLU, SI units and seconds of the log clock:
IMU (rate and specific force), GNSS fixes (ellipsoidal height, ENU velocity, receiver
accuracies) and the autopilot's own estimate as the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pymavlink import mavutil
from pyulog import ULog

from mav_geometry import quaternion
from trident_ekf.core.earth import ecef_to_enu, enu_to_ecef_rotation, geodetic_to_ecef
from trident_ekf.tools import bagio
from trident_ekf.tools.frames import attitude_ned_frd_to_enu_flu, frd_to_flu, ned_to_enu

Array = NDArray[np.float64]
_Record = dict[str, Any]
"""One DataFlash message as pymavlink's ``to_dict()`` gives it (untyped): field -> value."""
MIN_SPEED_SIGMA = 0.05  # m/s: floor for receivers that report zero speed accuracy


@dataclass(frozen=True)
class FlightLog:
    """IMU (FLU), GNSS and reference (ENU, relative to the geodetic ``datum``) series."""

    imu_time: Array  # s
    gyro: Array  # rad/s, FLU
    accel: Array  # m/s^2 specific force, FLU
    gnss_time: Array  # s
    gnss_geodetic: Array  # (lat deg, lon deg, ellipsoidal height m)
    gnss_velocity_enu: Array  # m/s
    gnss_sigma: Array  # (horizontal m, vertical m, speed m/s)
    reference_time: Array  # s
    reference_position_enu: Array  # m, relative to datum
    reference_velocity_enu: Array  # m/s
    reference_attitude: Array  # scalar-last q, FLU body -> ENU
    datum: tuple[float, float, float]  # first GNSS fix (lat deg, lon deg, height m)


def _columns(data: dict[str, np.ndarray], names: list[str]) -> Array:
    return np.stack([np.asarray(data[n], dtype=float) for n in names], axis=-1)


TopicReader = Callable[[str], "dict[str, np.ndarray] | None"]


def _ulog_topics(path: Path) -> TopicReader:
    ulog = ULog(str(path))
    datasets = {d.name: d.data for d in ulog.data_list if d.multi_id == 0}
    return datasets.get


def _csv_topics(directory: Path) -> TopicReader:
    """Topics exported by ulog2csv: ``<directory>/<topic>_0.csv`` with a header row."""

    def read(name: str) -> dict[str, np.ndarray] | None:
        path = directory / f"{name}_0.csv"
        if not path.is_file():
            return None
        header = path.read_text().split("\n", 1)[0].strip().split(",")
        values = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1))
        return {column: values[:, i] for i, column in enumerate(header)}

    return read


def _required(topics: TopicReader, name: str, path: Path) -> dict[str, np.ndarray]:
    data = topics(name)
    if data is None:
        raise ValueError(f"{path}: the log has no '{name}' topic")
    return data


def _local_ned_to_datum_enu(position_ned: Array, reference: tuple[float, float, float],
                            datum: tuple[float, float, float]) -> Array:
    """PX4 local NED (tangent plane at ``reference``) to ENU at ``datum`` via ECEF."""
    origin = geodetic_to_ecef(*reference)
    ecef = origin + ned_to_enu(position_ned) @ enu_to_ecef_rotation(*reference[:2]).T
    return ecef_to_enu(ecef, datum)


def read_px4(path: Path) -> FlightLog:
    """PX4 ULog (.ulg) or a ulog2csv export folder: sensor_combined, vehicle_gps_position
    (3D fixes) and, when present, EKF2 vehicle_attitude and vehicle_local_position."""
    topics = _csv_topics(path) if path.is_dir() else _ulog_topics(path)
    imu = _required(topics, "sensor_combined", path)
    gps = _required(topics, "vehicle_gps_position", path)
    attitude = topics("vehicle_attitude")
    local = topics("vehicle_local_position")

    if "latitude_deg" in gps:  # PX4 >= 1.14 field names
        geodetic = _columns(gps, ["latitude_deg", "longitude_deg", "altitude_ellipsoid_m"])
        msl = np.asarray(gps["altitude_msl_m"], dtype=float)
    else:  # older logs: 1e-7 deg and mm
        geodetic = _columns(gps, ["lat", "lon", "alt_ellipsoid"]) * np.array([1e-7, 1e-7, 1e-3])
        msl = np.asarray(gps["alt"], dtype=float) * 1e-3
    good = np.asarray(gps["fix_type"]) >= 3
    if not np.any(good):
        raise ValueError(f"{path}: no 3D GNSS fix in vehicle_gps_position")
    gnss_time = np.asarray(gps["timestamp"], dtype=float)[good] * 1e-6
    geodetic = geodetic[good]
    velocity = ned_to_enu(_columns(gps, ["vel_n_m_s", "vel_e_m_s", "vel_d_m_s"])[good])
    sigma = np.stack([np.asarray(gps["eph"], dtype=float)[good],
                      np.asarray(gps["epv"], dtype=float)[good],
                      np.maximum(np.asarray(gps["s_variance_m_s"], dtype=float)[good],
                                 MIN_SPEED_SIGMA)], axis=-1)
    datum = (float(geodetic[0, 0]), float(geodetic[0, 1]), float(geodetic[0, 2]))
    geoid = float(np.median(geodetic[:, 2] - msl[good]))  # ellipsoid minus MSL height

    if local is None or attitude is None:  # no onboard estimate in the log
        local_time, position, velocity_ref = np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3))
        quaternions = np.zeros((0, 4))
    else:
        local_time = np.asarray(local["timestamp"], dtype=float) * 1e-6
        reference = (float(local["ref_lat"][-1]), float(local["ref_lon"][-1]),
                     float(local["ref_alt"][-1]) + geoid)
        position = _local_ned_to_datum_enu(_columns(local, ["x", "y", "z"]), reference, datum)
        velocity_ref = ned_to_enu(_columns(local, ["vx", "vy", "vz"]))
        attitude_time = np.asarray(attitude["timestamp"], dtype=float) * 1e-6
        latest = np.clip(np.searchsorted(attitude_time, local_time, side="right") - 1, 0, None)
        quaternions = _columns(attitude, ["q[0]", "q[1]", "q[2]", "q[3]"])[latest]

    return FlightLog(
        imu_time=np.asarray(imu["timestamp"], dtype=float) * 1e-6,
        gyro=frd_to_flu(_columns(imu, ["gyro_rad[0]", "gyro_rad[1]", "gyro_rad[2]"])),
        accel=frd_to_flu(_columns(imu, [f"accelerometer_m_s2[{i}]" for i in range(3)])),
        gnss_time=gnss_time, gnss_geodetic=geodetic, gnss_velocity_enu=velocity,
        gnss_sigma=sigma, reference_time=local_time, reference_position_enu=position,
        reference_velocity_enu=velocity_ref,
        reference_attitude=attitude_ned_frd_to_enu_flu(quaternions), datum=datum)


def _dataflash_messages(path: Path, kinds: list[str]) -> dict[str, list[_Record]]:
    connection = mavutil.mavlink_connection(str(path))
    messages: dict[str, list[_Record]] = {kind: [] for kind in kinds}
    while (message := connection.recv_match(type=kinds)) is not None:
        messages[message.get_type()].append(message.to_dict())
    for kind in ("IMU", "GPS", "EKF1"):
        if not messages[kind]:
            raise ValueError(f"{path}: no {kind} messages (ArduCopter DataFlash expected)")
    return messages


def _field(rows: list[_Record], *names: str) -> Array:
    return np.array([[row[n] for n in names] for row in rows], dtype=float)


def _aligned_to_gnss(position: Array, time: Array, gnss_time: Array, gnss_enu: Array) -> Array:
    """Shift a reference track whose origin is not logged onto the GNSS track (median)."""
    nearest = np.clip(np.searchsorted(time, gnss_time), 0, time.size - 1)
    return position + np.median(gnss_enu - position[nearest], axis=0)


def read_px4_replay_csv(path: Path) -> FlightLog:
    """PX4 EKF2 replay inputs (``t_us,kind,values`` rows: ``imu`` accel then gyro, FRD;
    ``gps`` alt mm, lon and lat 1e-7 deg, NED velocity m/s) plus, when present next to it,
    the matching ``test_change_indication_*.csv`` EKF2 states as the reference (origin
    aligned to the GNSS track). No receiver accuracy is logged: defaults as in
    docs/theory/trident-ekf.md §5.5."""
    rows: dict[str, list[list[float]]] = {"imu": [], "gps": []}
    for line in path.read_text().splitlines():
        fields_ = line.split(",")
        if len(fields_) > 2 and fields_[1] in rows:
            rows[fields_[1]].append([float(fields_[0]), *map(float, fields_[2:])])
    if not rows["imu"] or not rows["gps"]:
        raise ValueError(f"{path}: no imu or gps rows (PX4 EKF2 replay CSV expected)")
    imu, gps = np.array(rows["imu"]), np.array(rows["gps"])
    gnss_time = gps[:, 0] * 1e-6
    geodetic = np.stack([gps[:, 3] * 1e-7, gps[:, 2] * 1e-7, gps[:, 1] * 1e-3], axis=-1)
    datum = (float(geodetic[0, 0]), float(geodetic[0, 1]), float(geodetic[0, 2]))
    states_path = path.with_name(path.name.replace("test_replay_data_",
                                                   "test_change_indication_"))
    if states_path != path and states_path.is_file():
        states = np.loadtxt(states_path, delimiter=",", skiprows=1)
        reference_time = states[:, 0] * 1e-6
        gnss_enu = ecef_to_enu(np.array([geodetic_to_ecef(*g) for g in geodetic]), datum)
        position = _aligned_to_gnss(ned_to_enu(states[:, 8:11]), reference_time, gnss_time,
                                    gnss_enu)
        # EKF2 starts from zero states and aligns its height later: keep the reference from
        # the first state within 10 m of the GNSS track.
        nearest = np.clip(np.searchsorted(gnss_time, reference_time), 0, gnss_time.size - 1)
        start = int(np.argmax(np.linalg.norm(position - gnss_enu[nearest], axis=1) < 10.0))
        reference_time, position, states = reference_time[start:], position[start:], states[start:]
        velocity, attitude = ned_to_enu(states[:, 5:8]), attitude_ned_frd_to_enu_flu(states[:, 1:5])
    else:
        reference_time, position, velocity = np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3))
        attitude = np.zeros((0, 4))
    return FlightLog(
        imu_time=imu[:, 0] * 1e-6, gyro=frd_to_flu(imu[:, 4:7]), accel=frd_to_flu(imu[:, 1:4]),
        gnss_time=gnss_time, gnss_geodetic=geodetic, gnss_velocity_enu=ned_to_enu(gps[:, 4:7]),
        gnss_sigma=np.tile([2.5, 4.0, 0.3], (len(gps), 1)), reference_time=reference_time,
        reference_position_enu=position, reference_velocity_enu=velocity,
        reference_attitude=attitude, datum=datum)


def read_dataflash(path: Path) -> FlightLog:
    """ArduPilot DataFlash (.bin): IMU, GPS (3D fixes) with UBX3 accuracies, EKF1 reference.

    GPS altitude is above mean sea level (no ellipsoidal height in these logs) and EKF1
    positions are relative to an origin that is not logged: the reference is aligned to
    the GNSS track by the median offset between the two (so a constant reference offset
    does not show in its errors; its shape, velocity and attitude do).
    """
    messages = _dataflash_messages(path, ["IMU", "GPS", "UBX3", "EKF1"])
    imu, ekf = messages["IMU"], messages["EKF1"]
    gps = [row for row in messages["GPS"] if row["Status"] >= 3]
    if not gps:
        raise ValueError(f"{path}: no 3D GNSS fix in the GPS messages")
    gnss_time = _field(gps, "T")[:, 0] * 1e-3
    geodetic = _field(gps, "Lat", "Lng", "Alt")
    speed, course, down = _field(gps, "Spd", "GCrs", "VZ").T
    course = np.radians(course)
    velocity = ned_to_enu(np.stack([speed * np.cos(course), speed * np.sin(course), down], -1))
    sigma = np.tile([2.5, 4.0, 0.3], (len(gps), 1))  # trident-ekf.md §5.5 defaults without UBX3
    if messages["UBX3"]:
        accuracy_time = _field(messages["UBX3"], "TimeMS")[:, 0] * 1e-3
        accuracy = _field(messages["UBX3"], "hAcc", "vAcc", "sAcc")
        latest = np.clip(np.searchsorted(accuracy_time, gnss_time, side="right") - 1, 0, None)
        sigma = np.maximum(accuracy[latest], [0.3, 0.5, MIN_SPEED_SIGMA])
    datum = (float(geodetic[0, 0]), float(geodetic[0, 1]), float(geodetic[0, 2]))
    gnss_enu = ecef_to_enu(np.array([geodetic_to_ecef(*g) for g in geodetic]), datum)

    ekf_time = _field(ekf, "TimeMS")[:, 0] * 1e-3
    position = _aligned_to_gnss(ned_to_enu(_field(ekf, "PN", "PE", "PD")), ekf_time,
                                gnss_time, gnss_enu)
    roll, pitch, yaw = np.radians(_field(ekf, "Roll", "Pitch", "Yaw")).T
    q_ned_frd = quaternion.multiply(
        quaternion.from_rotation_vector(np.outer(yaw, [0.0, 0.0, 1.0])),
        quaternion.multiply(quaternion.from_rotation_vector(np.outer(pitch, [0.0, 1.0, 0.0])),
                            quaternion.from_rotation_vector(np.outer(roll, [1.0, 0.0, 0.0]))))
    q_wxyz = np.concatenate([q_ned_frd[:, 3:], q_ned_frd[:, :3]], axis=-1)
    return FlightLog(
        imu_time=_field(imu, "TimeMS")[:, 0] * 1e-3,
        gyro=frd_to_flu(_field(imu, "GyrX", "GyrY", "GyrZ")),
        accel=frd_to_flu(_field(imu, "AccX", "AccY", "AccZ")),
        gnss_time=gnss_time, gnss_geodetic=geodetic, gnss_velocity_enu=velocity,
        gnss_sigma=sigma, reference_time=ekf_time, reference_position_enu=position,
        reference_velocity_enu=ned_to_enu(_field(ekf, "VN", "VE", "VD")),
        reference_attitude=attitude_ned_frd_to_enu_flu(q_wxyz), datum=datum)


def read_log(path: Path) -> FlightLog:
    """Dispatch: .ulg (PX4 ULog), a folder (PX4 ulog2csv export), .bin (ArduPilot)."""
    suffix = path.suffix.lower()
    if suffix == ".ulg" or path.is_dir():
        return read_px4(path)
    if suffix == ".bin":
        return read_dataflash(path)
    if suffix == ".csv" and path.name.startswith("test_replay_data_"):
        return read_px4_replay_csv(path)
    raise ValueError(f"unsupported log '{path}': PX4 .ulg, ulog2csv folder, EKF2 replay "
                     "test_replay_data_*.csv or ArduPilot .bin")


def write_bag(log: FlightLog, output: Path,
              progress: Callable[[float], None] = lambda fraction: None,
              overwrite: bool = False) -> dict[str, int]:
    """Write /imu/data, /gnss/fix, /gnss/vel and /reference/odometry into the rosbag2
    directory ``output`` (``bagio.BagWriter``: replaced only with ``overwrite``); returns
    the message counts."""
    events = sorted(
        [(t, 0, i) for i, t in enumerate(log.gnss_time)]
        + [(t, 1, i) for i, t in enumerate(log.reference_time)]
        + [(t, 2, i) for i, t in enumerate(log.imu_time)])
    counts = {"/imu/data": 0, "/gnss/fix": 0, "/gnss/vel": 0, "/reference/odometry": 0}
    no_twist = np.zeros((6, 6))
    with bagio.BagWriter(output, overwrite) as writer:
        for n, (t, kind, i) in enumerate(events):
            stamp = round(t * 1e9)
            if kind == 2:
                writer.write("/imu/data", bagio.IMU, stamp,
                             bagio.imu_message(stamp, log.gyro[i], log.accel[i]))
                counts["/imu/data"] += 1
            elif kind == 0:
                horizontal, vertical, speed = log.gnss_sigma[i]
                latitude, longitude, height = log.gnss_geodetic[i]
                writer.write("/gnss/fix", bagio.NAVSATFIX, stamp, bagio.navsatfix_message(
                    stamp, latitude, longitude, height,
                    np.diag([horizontal**2, horizontal**2, vertical**2])))
                writer.write("/gnss/vel", bagio.TWIST, stamp, bagio.twist_message(
                    stamp, log.gnss_velocity_enu[i], np.eye(3) * speed**2))
                counts["/gnss/fix"] += 1
                counts["/gnss/vel"] += 1
            else:
                q = log.reference_attitude[i]
                body_velocity = quaternion.rotate(quaternion.conjugate(q),
                                                  log.reference_velocity_enu[i])
                writer.write("/reference/odometry", bagio.ODOMETRY, stamp,
                             bagio.odometry_message(stamp, log.reference_position_enu[i], q,
                                                    no_twist, body_velocity, (0.0, 0.0, 0.0),
                                                    no_twist))
                counts["/reference/odometry"] += 1
            if n % 5000 == 0:
                progress(n / len(events))
    progress(1.0)
    return counts
