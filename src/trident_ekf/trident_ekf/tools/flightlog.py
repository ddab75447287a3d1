"""Autopilot logs as ROS-convention arrays, and their export to a rosbag2 (MCAP).

A ``FlightLog`` holds everything in ENU/FLU, SI units and seconds of the log clock:
IMU (rate and specific force), GNSS fixes (ellipsoidal height, ENU velocity, receiver
accuracies), barometer (static pressure), magnetometer (tesla, calibrated as the autopilot
uses it) and the autopilot's own estimate as the reference. Rows that cannot be used are
dropped and counted in ``import_report`` (see ``reference_sanitizer``), never silently.
"""

from __future__ import annotations

import calendar
import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import pymap3d
from numpy.typing import NDArray
from pyulog import ULog

from mav_geometry import quaternion
from trident_ekf.tools import bagio, log_damage
from trident_ekf.tools.frames import attitude_ned_frd_to_enu_flu, frd_to_flu, ned_to_enu
from trident_ekf.tools.reference_sanitizer import (
    REFERENCE_REASONS,
    px4_local_to_geodetic,
    screen_reference,
    screen_series,
)

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]
_Record = dict[str, Any]
"""One DataFlash message as pymavlink's ``to_dict()`` gives it (untyped): field -> value."""
Report = dict[str, int | str]
MIN_SPEED_SIGMA = 0.05  # m/s: floor for receivers that report zero speed accuracy
GAUSS = 1e-4  # T
MILLIGAUSS = 1e-7  # T
# ISA troposphere: p = P0 (1 - k h)^n, h in m above mean sea level.
ISA_SEA_LEVEL_PRESSURE = 101325.0  # Pa
ISA_HEIGHT_FACTOR = 2.25577e-5  # 1/m
ISA_EXPONENT = 5.25588
GPS_EPOCH = calendar.timegm((1980, 1, 6, 0, 0, 0))  # POSIX s
SECONDS_PER_WEEK = 604800
# GPS - UTC in s from each UTC date on (the leap seconds since the GPS epoch, IERS).
LEAP_SECONDS = ((1999, 1, 1, 13), (2006, 1, 1, 14), (2009, 1, 1, 15), (2012, 7, 1, 16),
                (2015, 7, 1, 17), (2017, 1, 1, 18))
MAX_INSTANCES = 10  # ULog multi_id values searched for a sensor topic
SENSORS = ("imu", "gnss", "baro", "mag")


class LogReadError(ValueError):
    """A flight log that cannot be read, or lacks what an import needs; the message names
    the file and the problem."""


def _empty(*shape: int) -> Array:
    return np.zeros((0, *shape))


@dataclass(frozen=True)
class FlightLog:
    """IMU (FLU), GNSS and reference (ENU, relative to the geodetic ``datum``) series, plus
    barometer and magnetometer when the log has them (empty arrays otherwise)."""

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
    baro_time: Array = field(default_factory=_empty)  # s
    baro_pressure: Array = field(default_factory=_empty)  # Pa, static pressure
    baro_temperature: Array = field(default_factory=_empty)  # deg C, NaN if unknown
    mag_time: Array = field(default_factory=_empty)  # s
    mag_field: Array = field(default_factory=lambda: _empty(3))  # T, FLU body axes
    utc_start: float | None = None  # POSIX s (UTC) of the first GNSS fix, if the log says
    import_report: Report = field(default_factory=dict)  # dropped rows by reason, sources
    source_log: str = ""  # file or folder name of the log
    damage: tuple[str, ...] = ()  # what a truncated or corrupt log lost, one line each


class _Gnss(NamedTuple):
    time: Array
    geodetic: Array
    velocity: Array
    sigma: Array


class _Reference(NamedTuple):
    time: Array
    position: Array
    velocity: Array
    attitude: Array  # scalar-last, FLU -> ENU


_NO_REFERENCE = _Reference(_empty(), _empty(3), _empty(3), _empty(4))


def _assemble(path: Path, report: Report, imu: tuple[Array, Array, Array], gnss: _Gnss,
              reference: _Reference, datum: tuple[float, float, float],
              baro: tuple[Array, Array, Array], mag: tuple[Array, Array],
              utc_start: float | None) -> FlightLog:
    """The ``FlightLog`` of an autopilot log: IMU rows screened (and counted) here, the
    other series as their readers screened them."""
    imu_time, gyro, accel = imu
    keep = _screen("imu", report, imu_time, gyro, accel)
    return FlightLog(
        imu_time=imu_time[keep], gyro=gyro[keep], accel=accel[keep], gnss_time=gnss.time,
        gnss_geodetic=gnss.geodetic, gnss_velocity_enu=gnss.velocity, gnss_sigma=gnss.sigma,
        reference_time=reference.time, reference_position_enu=reference.position,
        reference_velocity_enu=reference.velocity, reference_attitude=reference.attitude,
        datum=datum, baro_time=baro[0], baro_pressure=baro[1], baro_temperature=baro[2],
        mag_time=mag[0], mag_field=mag[1], utc_start=utc_start, import_report=report,
        source_log=path.name)


def isa_pressure(height_m: Array) -> Array:
    """ISA static pressure (Pa) at a height above mean sea level (m)."""
    pressure: Array = ISA_SEA_LEVEL_PRESSURE * (1.0 - ISA_HEIGHT_FACTOR * height_m) ** ISA_EXPONENT
    return pressure


def isa_height(pressure_pa: Array) -> Array:
    """Inverse of ``isa_pressure``: height above mean sea level (m) of a static pressure."""
    height: Array = ((1.0 - (pressure_pa / ISA_SEA_LEVEL_PRESSURE) ** (1.0 / ISA_EXPONENT))
                     / ISA_HEIGHT_FACTOR)
    return height


def gps_to_utc(week: int, milliseconds: float) -> float:
    """POSIX seconds (UTC) of a GPS week and time of week, leap seconds removed."""
    gps = GPS_EPOCH + week * SECONDS_PER_WEEK + milliseconds * 1e-3
    for year, month, day, offset in reversed(LEAP_SECONDS):
        if gps - offset >= calendar.timegm((year, month, day, 0, 0, 0)):
            return gps - offset
    return gps - LEAP_SECONDS[0][3]  # before 1999: not expected in a flight log


def new_report() -> Report:
    """Every reason with a zero count and no sensor source: what a reader fills in."""
    report: Report = {"reference_rows_total": 0, "reference_rows_kept": 0}
    report.update({f"reference_rows_{reason}": 0 for reason in REFERENCE_REASONS})
    report.update(reference_origin_changes=0, reference_origin_changes_unlogged=0,
                  gnss_rows_no_3d_fix=0)
    for sensor in SENSORS:
        report.update({f"{sensor}_rows_nonfinite": 0, f"{sensor}_rows_out_of_order": 0})
    report.update(reference_source="none", baro_source="none", mag_source="none")
    return report


def _screen(name: str, report: Report, time: Array, *values: Array) -> BoolArray:
    """Finite rows with increasing stamps of a sensor series; counts the others."""
    keep, counts = screen_series(name, time, *values)
    report.update(counts)
    return keep


def _columns(data: dict[str, np.ndarray], names: list[str]) -> Array:
    return np.stack([np.asarray(data[n], dtype=float) for n in names], axis=-1)


def _geodetic_to_enu(geodetic: Array, datum: tuple[float, float, float]) -> Array:
    """ENU (m) at ``datum`` of WGS-84 points (lat deg, lon deg, ellipsoidal height m), via
    ECEF."""
    east, north, up = pymap3d.geodetic2enu(geodetic[:, 0], geodetic[:, 1], geodetic[:, 2],
                                           *datum)
    return np.stack([east, north, up], axis=-1)


def _gnss_offset(time: Array, position: Array, gnss_time: Array, gnss_enu: Array) -> Array:
    """Median offset from a reference track to the GNSS fixes in its time span (all fixes
    if none falls in it)."""
    inside = (gnss_time >= time[0]) & (gnss_time <= time[-1])
    if np.any(inside):
        gnss_time, gnss_enu = gnss_time[inside], gnss_enu[inside]
    nearest = np.clip(np.searchsorted(time, gnss_time), 0, time.size - 1)
    offset: Array = np.nanmedian(gnss_enu - position[nearest], axis=0)
    return offset


def _aligned_to_gnss(position: Array, time: Array, segment: IntArray, gnss_time: Array,
                     gnss_enu: Array) -> Array:
    """Shift each segment of a reference track whose origin is not logged onto the GNSS
    track (median offset): a new segment starts at each unlogged origin change."""
    aligned = position.copy()
    for s in np.unique(segment):
        rows = segment == s
        aligned[rows] += _gnss_offset(time[rows], position[rows], gnss_time, gnss_enu)
    return aligned


def _attitude(q_wxyz: Array) -> Array:
    """Scalar-first FRD->NED quaternions with zero-norm rows (corrupt) set to NaN, so that
    the reference screen counts them as non-finite."""
    q = np.array(q_wxyz, dtype=float)
    q[np.linalg.norm(q, axis=1) < 0.5] = np.nan
    return q


# ----- PX4: ULog and ulog2csv folders --------------------------------------------------------
class TopicReader(Protocol):
    """A uORB topic's fields by name and instance (ULog multi_id), or None if not logged."""

    def __call__(self, name: str, instance: int = 0) -> dict[str, np.ndarray] | None: ...


class _UlogTopics:
    """The topics of a ULog (a ``TopicReader``) and whether pyulog found it corrupt."""

    def __init__(self, path: Path) -> None:
        # pyulog prints its warnings, and leaves a file it opened itself open on an error.
        with contextlib.redirect_stdout(io.StringIO()), path.open("rb") as stream:
            ulog = ULog(stream)
        self.corrupt = ulog.file_corruption
        self._datasets = {(d.name, d.multi_id): d.data for d in ulog.data_list}

    def __call__(self, name: str, instance: int = 0) -> dict[str, np.ndarray] | None:
        return self._datasets.get((name, instance))


def _csv_topics(directory: Path) -> TopicReader:
    """Topics exported by ulog2csv: ``<directory>/<topic>_<instance>.csv`` with a header
    row."""

    def read(name: str, instance: int = 0) -> dict[str, np.ndarray] | None:
        path = directory / f"{name}_{instance}.csv"
        if not path.is_file():
            return None
        header = path.read_text().split("\n", 1)[0].strip().split(",")
        values = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1))
        return {column: values[:, i] for i, column in enumerate(header)}

    return read


def _required(topics: TopicReader, name: str, path: Path) -> dict[str, np.ndarray]:
    data = topics(name)
    if data is None:
        raise LogReadError(f"{path}: the log has no '{name}' topic")
    return data


def _sample_time(data: dict[str, np.ndarray]) -> Array:
    """Stamps (s) of a sensor topic: when it was sampled (``timestamp_sample``) if logged,
    else when it was published."""
    stamps = data.get("timestamp_sample", data["timestamp"])
    return np.asarray(stamps, dtype=float) * 1e-6


def _flags(data: dict[str, np.ndarray], *names: str) -> BoolArray:
    """Rows where every named flag is set; a flag the log does not have counts as set."""
    n = len(data["timestamp"])
    flags = np.ones(n, dtype=bool)
    for name in names:
        if name in data:
            flags &= np.asarray(data[name]) != 0
    return flags


def _device_id(data: dict[str, np.ndarray] | None, name: str) -> int | None:
    """The sensor device id a selection topic last named, if it has one."""
    if data is None or name not in data or len(data[name]) == 0:
        return None
    return int(data[name][-1])


def _device_label(data: dict[str, np.ndarray], name: str) -> str:
    device = _device_id(data, name)
    return "" if device is None else f", device {device}"


def _px4_instance(topics: TopicReader, name: str,
                  device: int | None) -> tuple[str, dict[str, np.ndarray]] | None:
    """The instance of a raw sensor topic that the autopilot selected: the one whose
    device_id is ``device`` if any is, else instance 0 (or the lowest logged). Returns a
    label for the import report and the data."""
    instances = {i: data for i in range(MAX_INSTANCES) if (data := topics(name, i)) is not None}
    if not instances:
        return None
    for i, data in instances.items():
        if device is not None and np.any(np.asarray(data.get("device_id", [])) == device):
            return f"{name}[{i}] (device {device}, the selected one)", data
    first = min(instances)
    return f"{name}[{first}] (no selected device id to match)", instances[first]


def _px4_baro(topics: TopicReader, report: Report) -> tuple[Array, Array, Array]:
    """(time s, static pressure Pa, temperature deg C) of the barometer PX4 selected:
    ``vehicle_air_data``, else the matching ``sensor_baro`` instance."""
    air = topics("vehicle_air_data")
    if air is not None and "baro_pressure_pa" in air:
        report["baro_source"] = "vehicle_air_data[0] (the selected baro" + _device_label(
            air, "baro_device_id") + ")"
        pressure = np.asarray(air["baro_pressure_pa"], dtype=float)
        temperature = air.get("baro_temp_celcius")
        time = _sample_time(air)
    else:
        found = _px4_instance(topics, "sensor_baro", _device_id(air, "baro_device_id"))
        if found is None:
            return _empty(), _empty(), _empty()
        report["baro_source"], raw = found
        pressure = np.asarray(raw["pressure"], dtype=float)
        if np.nanmedian(pressure) < 2000.0:  # PX4 before v1.13 logged millibar
            pressure = pressure * 100.0
        temperature = raw.get("temperature")
        time = _sample_time(raw)
    temperature = (np.full(time.size, np.nan) if temperature is None
                   else np.asarray(temperature, dtype=float))
    keep = _screen("baro", report, time, pressure)
    return time[keep], pressure[keep], temperature[keep]


def _px4_mag(topics: TopicReader, report: Report) -> tuple[Array, Array]:
    """(time s, field T FLU): ``vehicle_magnetometer`` (the selected magnetometer, calibrated,
    Gauss FRD), else the matching ``sensor_mag`` instance (Gauss FRD, not calibrated)."""
    selected = topics("vehicle_magnetometer")
    if selected is not None and "magnetometer_ga[0]" in selected:
        report["mag_source"] = ("vehicle_magnetometer[0] (the selected magnetometer, "
                                "calibrated" + _device_label(selected, "device_id") + ")")
        time = _sample_time(selected)
        gauss = _columns(selected, [f"magnetometer_ga[{i}]" for i in range(3)])
    else:
        found = _px4_instance(topics, "sensor_mag", _device_id(selected, "device_id"))
        if found is None:
            return _empty(), _empty(3)
        label, raw = found
        report["mag_source"] = f"{label}, not calibrated"
        time, gauss = _sample_time(raw), _columns(raw, ["x", "y", "z"])
    keep = _screen("mag", report, time, gauss)
    return time[keep], frd_to_flu(gauss[keep] * GAUSS)


def _px4_gnss(gps: dict[str, np.ndarray], path: Path,
              report: Report) -> tuple[_Gnss, float, float | None]:
    """3D fixes of vehicle_gps_position, the geoid height (ellipsoid minus MSL, m) and the
    UTC (POSIX s) of the first fix if the receiver gave it."""
    if "latitude_deg" in gps:  # PX4 >= 1.14 field names
        geodetic = _columns(gps, ["latitude_deg", "longitude_deg", "altitude_ellipsoid_m"])
        msl = np.asarray(gps["altitude_msl_m"], dtype=float)
    else:  # older logs: 1e-7 deg and mm
        geodetic = _columns(gps, ["lat", "lon", "alt_ellipsoid"]) * np.array([1e-7, 1e-7, 1e-3])
        msl = np.asarray(gps["alt"], dtype=float) * 1e-3
    time = np.asarray(gps["timestamp"], dtype=float) * 1e-6
    velocity = ned_to_enu(_columns(gps, ["vel_n_m_s", "vel_e_m_s", "vel_d_m_s"]))
    sigma = np.stack([np.asarray(gps["eph"], dtype=float), np.asarray(gps["epv"], dtype=float),
                      np.maximum(np.asarray(gps["s_variance_m_s"], dtype=float),
                                 MIN_SPEED_SIGMA)], axis=-1)
    fix = np.asarray(gps["fix_type"]) >= 3
    report["gnss_rows_no_3d_fix"] = int(np.count_nonzero(~fix))
    keep = np.flatnonzero(fix)[_screen("gnss", report, time[fix], geodetic[fix], velocity[fix],
                                       sigma[fix])]
    if keep.size == 0:
        raise LogReadError(f"{path}: no 3D GNSS fix in vehicle_gps_position")
    utc = float(np.asarray(gps.get("time_utc_usec", np.zeros(time.size)), dtype=float)[keep[0]])
    geoid = float(np.median(geodetic[keep, 2] - msl[keep]))
    gnss = _Gnss(time[keep], geodetic[keep], velocity[keep], sigma[keep])
    return gnss, geoid, (utc * 1e-6 if utc > 0.0 else None)


def _px4_reference(local: dict[str, np.ndarray], attitude: dict[str, np.ndarray],
                   datum: tuple[float, float, float], geoid: float,
                   report: Report) -> _Reference:
    """EKF2's vehicle_local_position (with vehicle_attitude) in ENU at ``datum``. Rows the
    EKF flags invalid or that have no global origin are dropped; each row is placed with
    its own origin (``ref_lat``/``ref_lon``/``ref_alt`` can change in flight), through PX4's
    projection to geodetic and then ECEF, so segments with different origins line up."""
    time = np.asarray(local["timestamp"], dtype=float) * 1e-6
    ned = _columns(local, ["x", "y", "z"])
    origin = _columns(local, ["ref_lat", "ref_lon", "ref_alt"])
    attitude_time = np.asarray(attitude["timestamp"], dtype=float) * 1e-6
    latest = np.clip(np.searchsorted(attitude_time, time, side="right") - 1, 0, None)
    q_wxyz = _attitude(_columns(attitude, ["q[0]", "q[1]", "q[2]", "q[3]"])[latest])
    invalid = ~_flags(local, "xy_valid", "z_valid", "v_xy_valid", "v_z_valid")
    no_origin = ~_flags(local, "xy_global", "z_global") | ~np.all(np.isfinite(origin), axis=1)
    placed = ~invalid & ~no_origin
    position = np.full((time.size, 3), np.nan)
    geodetic = np.column_stack([px4_local_to_geodetic(ned[placed, :2], origin[placed, :2]),
                                origin[placed, 2] + geoid - ned[placed, 2]])
    position[placed] = _geodetic_to_enu(geodetic, datum)
    velocity = ned_to_enu(_columns(local, ["vx", "vy", "vz"]))
    screen = screen_reference(time, position, velocity, q_wxyz, invalid=invalid,
                              no_origin=no_origin, origin=origin)
    report.update(screen.report)
    report["reference_source"] = "vehicle_local_position[0] and vehicle_attitude[0] (EKF2)"
    keep = screen.keep
    return _Reference(time[keep], position[keep], velocity[keep],
                      attitude_ned_frd_to_enu_flu(q_wxyz[keep]))


def read_px4(path: Path) -> FlightLog:
    """PX4 ULog (.ulg) or a ulog2csv export folder: sensor_combined, vehicle_gps_position
    (3D fixes), the selected barometer and magnetometer (``_px4_baro``, ``_px4_mag``) and,
    when present, EKF2 vehicle_attitude and vehicle_local_position as the reference."""
    topics = _csv_topics(path) if path.is_dir() else _UlogTopics(path)
    imu = _required(topics, "sensor_combined", path)
    report = new_report()
    gnss, geoid, utc_start = _px4_gnss(_required(topics, "vehicle_gps_position", path), path,
                                       report)
    datum = (float(gnss.geodetic[0, 0]), float(gnss.geodetic[0, 1]),
             float(gnss.geodetic[0, 2]))
    attitude, local = topics("vehicle_attitude"), topics("vehicle_local_position")
    reference = (_NO_REFERENCE if local is None or attitude is None
                 else _px4_reference(local, attitude, datum, geoid, report))
    imu_time = np.asarray(imu["timestamp"], dtype=float) * 1e-6
    gyro = frd_to_flu(_columns(imu, ["gyro_rad[0]", "gyro_rad[1]", "gyro_rad[2]"]))
    accel = frd_to_flu(_columns(imu, [f"accelerometer_m_s2[{i}]" for i in range(3)]))
    log = _assemble(path, report, (imu_time, gyro, accel), gnss, reference, datum,
                    _px4_baro(topics, report), _px4_mag(topics, report), utc_start)
    if not isinstance(topics, _UlogTopics):
        return log
    return replace(log, damage=_ulog_damage(path, topics.corrupt, log))


def _series_gaps(log: FlightLog) -> tuple[str, ...]:
    """The holes a corrupt block left in each sensor series of ``log``."""
    series = (("IMU", log.imu_time), ("GNSS", log.gnss_time), ("barometer", log.baro_time),
              ("magnetometer", log.mag_time))
    return tuple(line for name, time in series
                 if (line := log_damage.series_gaps(name, time)) is not None)


def _lost_after(log: FlightLog) -> str:
    last = f"{log.imu_time[-1]:.1f} s" if log.imu_time.size else "its start"
    return f"whatever the log held after {last} of the log clock is lost"


def _ulog_damage(path: Path, corrupt: bool, log: FlightLog) -> tuple[str, ...]:
    """What a ULog lost: corrupt records (pyulog skips them) and the holes they left, or a
    last record cut short."""
    if corrupt:
        return (f"{path.name} is corrupt: damaged records were skipped", *_series_gaps(log))
    cut = log_damage.ulog_cut_at(path)
    if cut is None:
        return ()
    return (f"{path.name} ends inside a record at byte {cut} of {path.stat().st_size}: it "
            f"was cut short, and {_lost_after(log)}",)


# ----- PX4 EKF2 replay CSV -------------------------------------------------------------------
_REPLAY_WIDTHS = {"imu": 7, "gps": 7, "baro": 2, "mag": 4}  # t_us and the values


def _replay_rows(path: Path) -> dict[str, Array]:
    rows: dict[str, list[list[float]]] = {kind: [] for kind in _REPLAY_WIDTHS}
    for line in path.read_text().splitlines():
        fields_ = line.split(",")
        if len(fields_) > 2 and fields_[1] in rows:
            rows[fields_[1]].append([float(fields_[0]), *map(float, fields_[2:])])
    return {kind: np.array(values, dtype=float).reshape(-1, _REPLAY_WIDTHS[kind])
            for kind, values in rows.items()}


def _replay_reference(path: Path, gnss_time: Array, gnss_enu: Array,
                      report: Report) -> _Reference:
    """EKF2 states of the ``test_change_indication_*.csv`` next to a replay input, aligned to
    the GNSS track (EKF2's origin is not logged)."""
    states_path = path.with_name(path.name.replace("test_replay_data_",
                                                   "test_change_indication_"))
    if states_path == path or not states_path.is_file():
        return _NO_REFERENCE
    states = np.atleast_2d(np.loadtxt(states_path, delimiter=",", skiprows=1))
    time, q_wxyz = states[:, 0] * 1e-6, _attitude(states[:, 1:5])
    position, velocity = ned_to_enu(states[:, 8:11]), ned_to_enu(states[:, 5:8])
    # EKF2 starts from zero states and aligns its height later: the states before the first
    # one within 10 m of the GNSS track are not a valid estimate yet.
    aligned = position + _gnss_offset(time, position, gnss_time, gnss_enu)
    nearest = np.clip(np.searchsorted(gnss_time, time), 0, gnss_time.size - 1)
    close = np.linalg.norm(aligned - gnss_enu[nearest], axis=1) < 10.0
    start = int(np.argmax(close)) if np.any(close) else time.size
    screen = screen_reference(time, position, velocity, q_wxyz,
                              invalid=np.arange(time.size) < start)
    report.update(screen.report)
    report["reference_source"] = f"{states_path.name} (EKF2 states, aligned to GNSS)"
    keep = screen.keep
    return _Reference(time[keep], _aligned_to_gnss(position[keep], time[keep],
                                                   screen.segment[keep], gnss_time, gnss_enu),
                      velocity[keep], attitude_ned_frd_to_enu_flu(q_wxyz[keep]))


def read_px4_replay_csv(path: Path) -> FlightLog:
    """PX4 EKF2 replay inputs (``t_us,kind,values`` rows: ``imu`` accel then gyro, FRD;
    ``gps`` alt mm, lon and lat 1e-7 deg, NED velocity m/s; ``baro`` a barometric altitude
    in m, no pressure: converted to static pressure with the ISA standard atmosphere,
    ``isa_pressure``, temperature unknown; ``mag`` Gauss, FRD, as EKF2 fuses it) plus, when
    present next to it, the matching ``test_change_indication_*.csv`` EKF2 states as the
    reference (origin aligned to the GNSS track; the states before EKF2 first comes within
    10 m of it count as invalid). No receiver accuracy, fix type or UTC time is logged: every
    gps row is a fix, with the defaults of docs/theory/trident-ekf.md §5.5."""
    rows = _replay_rows(path)
    if rows["imu"].size == 0 or rows["gps"].size == 0:
        raise LogReadError(f"{path}: no imu or gps rows (PX4 EKF2 replay CSV expected)")
    report = new_report()
    imu, gps, baro, mag = (rows[kind] for kind in ("imu", "gps", "baro", "mag"))
    gps = gps[_screen("gnss", report, gps[:, 0], gps[:, 1:])]
    if gps.size == 0:
        raise LogReadError(f"{path}: no usable gps rows")
    gnss_time = gps[:, 0] * 1e-6
    geodetic = np.stack([gps[:, 3] * 1e-7, gps[:, 2] * 1e-7, gps[:, 1] * 1e-3], axis=-1)
    datum = (float(geodetic[0, 0]), float(geodetic[0, 1]), float(geodetic[0, 2]))
    reference = _replay_reference(path, gnss_time, _geodetic_to_enu(geodetic, datum), report)
    imu = imu[_screen("imu", report, imu[:, 0], imu[:, 1:])]
    baro = baro[_screen("baro", report, baro[:, 0], baro[:, 1:])]
    mag = mag[_screen("mag", report, mag[:, 0], mag[:, 1:])]
    if baro.size:
        report["baro_source"] = "baro rows (altitude m, converted to pressure with the ISA)"
    if mag.size:
        report["mag_source"] = "mag rows (Gauss, FRD)"
    return FlightLog(
        imu_time=imu[:, 0] * 1e-6, gyro=frd_to_flu(imu[:, 4:7]), accel=frd_to_flu(imu[:, 1:4]),
        gnss_time=gnss_time, gnss_geodetic=geodetic, gnss_velocity_enu=ned_to_enu(gps[:, 4:7]),
        gnss_sigma=np.tile([2.5, 4.0, 0.3], (len(gps), 1)), reference_time=reference.time,
        reference_position_enu=reference.position, reference_velocity_enu=reference.velocity,
        reference_attitude=reference.attitude, datum=datum, baro_time=baro[:, 0] * 1e-6,
        baro_pressure=isa_pressure(baro[:, 1]), baro_temperature=np.full(len(baro), np.nan),
        mag_time=mag[:, 0] * 1e-6, mag_field=frd_to_flu(mag[:, 1:4] * GAUSS),
        import_report=report, source_log=path.name)


# ----- ArduPilot DataFlash -------------------------------------------------------------------
_DATAFLASH_KINDS = ["IMU", "GPS", "UBX3", "EKF1", "BARO", "BAR2", "BAR3", "MAG", "MAG2", "MAG3",
                    "PARM"]


@contextlib.contextmanager
def _quiet_file_descriptor(descriptor: int) -> Iterator[None]:
    """Discard what is written to a file descriptor: pymavlink's indexer (C) prints a line
    per byte it skips in a corrupt log straight to stderr. The damage is reported from its
    index instead (``_dataflash_damage``)."""
    saved = os.dup(descriptor)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), descriptor)
        yield
    finally:
        os.dup2(saved, descriptor)
        os.close(saved)


STDERR_DESCRIPTOR = 2  # the process's, whatever ``sys.stderr`` is (pytest replaces it)


class _Index(NamedTuple):
    """Where pymavlink's index of a DataFlash log ends, and how many bytes it skipped."""

    size: int  # bytes in the file
    end: int  # end of the last indexed message (beyond ``size``: the file ends inside it)
    skipped: int  # bytes before ``end`` that no indexed message covers


def _dataflash_index(connection: Any) -> _Index:
    # The indexer notes an unknown type's offset before it stops there: no length to add.
    lengths = {mtype: connection.formats[mtype].len for mtype in range(len(connection.offsets))
               if connection.offsets[mtype] and mtype in connection.formats}
    if not lengths:
        return _Index(connection.data_len, 0, 0)
    end = max(connection.offsets[mtype][-1] + length for mtype, length in lengths.items())
    covered = sum(connection.counts[mtype] * length for mtype, length in lengths.items())
    return _Index(connection.data_len, end, max(end - covered, 0))


def _dataflash_messages(path: Path, kinds: list[str]) -> tuple[dict[str, list[_Record]], _Index]:
    """The rows of each message kind, and the extent of pymavlink's index of the file."""
    if path.stat().st_size == 0:  # pymavlink cannot map it, and keeps the file open
        raise LogReadError(f"{path}: the file is empty")
    from pymavlink import mavutil  # on use: a ULog import or --help does not need it (start-up)

    sys.stderr.flush()
    with _quiet_file_descriptor(STDERR_DESCRIPTOR), contextlib.redirect_stdout(io.StringIO()):
        connection = mavutil.mavlink_connection(str(path))
    messages: dict[str, list[_Record]] = {kind: [] for kind in kinds}
    try:
        while (message := connection.recv_match(type=kinds)) is not None:
            messages[message.get_type()].append(message.to_dict())
        index = _dataflash_index(connection)
    finally:
        connection.close()
    for kind in ("IMU", "GPS", "EKF1"):
        if not messages[kind]:
            raise LogReadError(f"{path}: no {kind} messages (ArduCopter DataFlash expected)")
    return messages, index


DATAFLASH_TAIL_BYTES = 528
"""Unreadable bytes at the end of a DataFlash log that are normal (block logs pad their last
page; pymavlink's own tolerance)."""


def _dataflash_damage(path: Path, index: _Index, log: FlightLog) -> tuple[str, ...]:
    """What a DataFlash log lost: a last message cut short, bytes skipped between messages,
    and a stretch pymavlink cannot read (an unknown message type), where its index and so
    the import stop."""
    if index.end > index.size:
        return (f"{path.name} ends inside a message at byte {index.size}: it was cut short, "
                f"and {_lost_after(log)}",)
    lines = []
    if index.skipped:
        lines.append(f"{path.name} is corrupt: {index.skipped} bytes skipped between messages")
    if index.size - index.end > DATAFLASH_TAIL_BYTES:
        lines.append(f"{path.name} cannot be read past byte {index.end} of {index.size}: "
                     f"{_lost_after(log)}")
    # Holes in the series are the skipped bytes' (reading resumed after them).
    return (*lines, *(_series_gaps(log) if index.skipped else ()))


def _field(rows: list[_Record], *names: str) -> Array:
    return np.array([[row[n] for n in names] for row in rows], dtype=float).reshape(-1, len(names))


def _seconds(rows: list[_Record]) -> Array:
    """Boot time (s) of DataFlash rows: ``TimeUS`` (newer logs) or ``TimeMS``."""
    if rows and "TimeUS" in rows[0]:
        return _field(rows, "TimeUS")[:, 0] * 1e-6
    return _field(rows, "TimeMS")[:, 0] * 1e-3


def _dataflash_instance(messages: dict[str, list[_Record]], names: tuple[str, ...],
                        params: dict[str, float],
                        selectors: tuple[str, ...]) -> tuple[str, list[_Record]]:
    """Rows of the sensor instance the autopilot uses (its primary parameter, default 0):
    newer logs put all instances in one message type with an ``I`` field, older ones use one
    type per instance (BARO, BAR2, ... or MAG, MAG2, ...)."""
    instance = next((int(params[name]) for name in selectors if name in params), 0)
    first = messages[names[0]]
    if first and "I" in first[0]:
        return f"{names[0]}[I={instance}]", [row for row in first if row["I"] == instance]
    name = names[instance] if instance < len(names) else names[0]
    return name, messages[name]


def _dataflash_baro(messages: dict[str, list[_Record]], params: dict[str, float],
                    report: Report) -> tuple[Array, Array, Array]:
    """(time s, static pressure Pa, temperature deg C) of the primary barometer."""
    label, rows = _dataflash_instance(messages, ("BARO", "BAR2", "BAR3"), params,
                                      ("BARO_PRIMARY", "GND_PRIMARY"))
    if not rows:
        return _empty(), _empty(), _empty()
    report["baro_source"] = f"{label} (primary barometer)"
    time = _seconds(rows)
    pressure, temperature = _field(rows, "Press", "Temp").T
    keep = _screen("baro", report, time, pressure)
    return time[keep], pressure[keep], temperature[keep]


def _dataflash_mag(messages: dict[str, list[_Record]], params: dict[str, float],
                   report: Report) -> tuple[Array, Array]:
    """(time s, field T FLU) of the primary compass. ArduPilot logs ``MagX/Y/Z`` in
    milligauss, FRD body axes, with its offsets (``OfsX/Y/Z``, COMPASS_OFS_*) already
    applied: in log171 the logged field's magnitude varies by 14 mG (2 %) over the flight,
    and by about 100 mG with the offsets added or removed again."""
    label, rows = _dataflash_instance(messages, ("MAG", "MAG2", "MAG3"), params,
                                      ("COMPASS_PRIMARY",))
    if not rows:
        return _empty(), _empty(3)
    report["mag_source"] = f"{label} (primary compass, offsets applied onboard)"
    time, milligauss = _seconds(rows), _field(rows, "MagX", "MagY", "MagZ")
    keep = _screen("mag", report, time, milligauss)
    return time[keep], frd_to_flu(milligauss[keep] * MILLIGAUSS)


def _dataflash_utc(fix: _Record) -> float | None:
    """UTC (POSIX s) of a GPS row: GPS week and ms of week are ``GWk``/``GMS`` in newer logs,
    ``Week``/``TimeMS`` in older ones (where ``T`` is the boot time)."""
    week, milliseconds = ((fix.get("GWk"), fix.get("GMS")) if "GWk" in fix
                          else (fix.get("Week"), fix.get("TimeMS")))
    if not week or milliseconds is None:
        return None
    return gps_to_utc(int(week), float(milliseconds))


def _dataflash_gnss(messages: dict[str, list[_Record]], path: Path,
                    report: Report) -> tuple[_Gnss, float | None]:
    """3D fixes of the GPS messages (MSL altitude) with UBX3 accuracies, and the UTC of the
    first."""
    fixes = [row for row in messages["GPS"] if row["Status"] >= 3]
    report["gnss_rows_no_3d_fix"] = len(messages["GPS"]) - len(fixes)
    time = (_field(fixes, "T")[:, 0] * 1e-3 if fixes and "T" in fixes[0]
            else _seconds(fixes))
    geodetic = _field(fixes, "Lat", "Lng", "Alt")
    speed, course, down = _field(fixes, "Spd", "GCrs", "VZ").T
    course = np.radians(course)
    velocity = ned_to_enu(np.stack([speed * np.cos(course), speed * np.sin(course), down], -1))
    sigma = np.tile([2.5, 4.0, 0.3], (len(fixes), 1))  # trident-ekf.md §5.5 without UBX3
    if messages["UBX3"]:
        accuracy_time = _field(messages["UBX3"], "TimeMS")[:, 0] * 1e-3
        accuracy = _field(messages["UBX3"], "hAcc", "vAcc", "sAcc")
        latest = np.clip(np.searchsorted(accuracy_time, time, side="right") - 1, 0, None)
        sigma = np.maximum(accuracy[latest], [0.3, 0.5, MIN_SPEED_SIGMA])
    keep = np.flatnonzero(_screen("gnss", report, time, geodetic, velocity, sigma))
    if keep.size == 0:
        raise LogReadError(f"{path}: no 3D GNSS fix in the GPS messages")
    return (_Gnss(time[keep], geodetic[keep], velocity[keep], sigma[keep]),
            _dataflash_utc(fixes[keep[0]]))


def _ekf1_reference(ekf: list[_Record], gnss_time: Array, gnss_enu: Array,
                    report: Report) -> _Reference:
    """EKF1 estimate: NED position from an unlogged origin, aligned to the GNSS track per
    segment (a new segment at each unlogged origin change the screen finds)."""
    time = _seconds(ekf)
    roll, pitch, yaw = np.radians(_field(ekf, "Roll", "Pitch", "Yaw")).T
    q_ned_frd = quaternion.multiply(
        quaternion.from_rotation_vector(np.outer(yaw, [0.0, 0.0, 1.0])),
        quaternion.multiply(quaternion.from_rotation_vector(np.outer(pitch, [0.0, 1.0, 0.0])),
                            quaternion.from_rotation_vector(np.outer(roll, [1.0, 0.0, 0.0]))))
    q_wxyz = np.concatenate([q_ned_frd[:, 3:], q_ned_frd[:, :3]], axis=-1)
    position = ned_to_enu(_field(ekf, "PN", "PE", "PD"))
    velocity = ned_to_enu(_field(ekf, "VN", "VE", "VD"))
    screen = screen_reference(time, position, velocity, q_wxyz)
    report.update(screen.report)
    report["reference_source"] = "EKF1 (aligned to GNSS)"
    keep = screen.keep
    return _Reference(time[keep], _aligned_to_gnss(position[keep], time[keep],
                                                   screen.segment[keep], gnss_time, gnss_enu),
                      velocity[keep], attitude_ned_frd_to_enu_flu(q_wxyz[keep]))


def read_dataflash(path: Path) -> FlightLog:
    """ArduPilot DataFlash (.bin): IMU, GPS (3D fixes) with UBX3 accuracies, the primary
    barometer and compass, EKF1 reference.

    GPS altitude is above mean sea level (no ellipsoidal height in these logs) and EKF1
    positions are relative to an origin that is not logged: the reference is aligned to
    the GNSS track by the median offset between the two (so a constant reference offset
    does not show in its errors; its shape, velocity and attitude do). ``utc_start`` comes
    from the GPS week and time of week minus the GPS-UTC leap seconds of that date.
    """
    messages, index = _dataflash_messages(path, _DATAFLASH_KINDS)
    params = {str(row["Name"]): float(row["Value"]) for row in messages["PARM"]}
    report = new_report()
    gnss, utc_start = _dataflash_gnss(messages, path, report)
    datum = (float(gnss.geodetic[0, 0]), float(gnss.geodetic[0, 1]),
             float(gnss.geodetic[0, 2]))
    reference = _ekf1_reference(messages["EKF1"], gnss.time,
                                _geodetic_to_enu(gnss.geodetic, datum), report)
    imu = messages["IMU"]
    imu_time = _seconds(imu)
    gyro = frd_to_flu(_field(imu, "GyrX", "GyrY", "GyrZ"))
    accel = frd_to_flu(_field(imu, "AccX", "AccY", "AccZ"))
    log = _assemble(path, report, (imu_time, gyro, accel), gnss, reference, datum,
                    _dataflash_baro(messages, params, report),
                    _dataflash_mag(messages, params, report), utc_start)
    return replace(log, damage=_dataflash_damage(path, index, log))


def _reader(path: Path) -> tuple[Callable[[Path], FlightLog], str]:
    """The reader of a log and its format, as in "cannot be read as <format>"."""
    suffix = path.suffix.lower()
    if path.is_dir():
        return read_px4, "a PX4 ulog2csv folder"
    if suffix == ".ulg":
        return read_px4, "a PX4 ULog"
    if suffix == ".bin":
        return read_dataflash, "an ArduPilot DataFlash log"
    if suffix == ".csv" and path.name.startswith("test_replay_data_"):
        return read_px4_replay_csv, "a PX4 EKF2 replay CSV"
    raise LogReadError(f"unsupported log '{path}': PX4 .ulg, ulog2csv folder, EKF2 replay "
                       "test_replay_data_*.csv or ArduPilot .bin")


def read_log(path: Path) -> FlightLog:
    """Dispatch: .ulg (PX4 ULog), a folder (PX4 ulog2csv export), .bin (ArduPilot). A log
    that is damaged but readable comes back with ``damage`` saying what it lost; one that
    cannot be read at all raises ``LogReadError`` naming it and the problem."""
    reader, kind = _reader(path)
    try:
        log = reader(path)
    except LogReadError:
        raise
    except Exception as error:  # the log parsers raise any type on damaged bytes
        raise LogReadError(f"{path}: cannot be read as {kind} ({type(error).__name__}: "
                           f"{error})") from error
    if log.imu_time.size == 0:
        raise LogReadError(f"{path}: no usable IMU sample")
    return log


# ----- import report and rosbag2 export ------------------------------------------------------
_NOT_DROPPED = ("reference_rows_total", "reference_rows_kept", "gnss_rows_no_3d_fix")


def dropped_rows(report: Report) -> dict[str, int]:
    """The reasons rows were dropped, with their non-zero counts. GNSS rows without a 3D fix
    are left out: a receiver without a fix is normal (before lock), not faulty data."""
    return {key: value for key, value in report.items()
            if "_rows_" in key and key not in _NOT_DROPPED and isinstance(value, int)
            and value > 0}


def import_warning(report: Report) -> str | None:
    """One line on the rows dropped and origins re-anchored, or None if there were none."""
    dropped = dropped_rows(report)
    changes = int(report.get("reference_origin_changes", 0))
    parts = []
    if dropped:
        reasons = ", ".join(f"{key} {count}" for key, count in dropped.items())
        parts.append(f"{sum(dropped.values())} rows dropped ({reasons})")
    if changes:
        unlogged = report.get("reference_origin_changes_unlogged", 0)
        parts.append(f"reference re-anchored at {changes} origin changes ({unlogged} not "
                     "logged)")
    return "; ".join(parts) or None


def import_summary(log: FlightLog) -> str:
    """One line: what the log gave, for the summary message and the CLI."""
    kept = log.import_report.get("reference_rows_kept", 0)
    total = log.import_report.get("reference_rows_total", 0)
    return (f"{log.source_log}: {log.imu_time.size} IMU, {log.gnss_time.size} GNSS, "
            f"{log.baro_time.size} baro, {log.mag_time.size} mag samples; reference "
            f"{kept} of {total} rows kept")


def _summary_message(log: FlightLog, stamp: int) -> Any:
    """The ``/trident_import/summary`` DiagnosticArray: WARN if rows were dropped, the
    reference re-anchored or the log damaged; every report entry, UTC start, source, datum
    and ``data_loss`` (what a damaged log lost, facts separated by " | "; empty if
    nothing) as key/values."""
    values = {key: str(value) for key, value in log.import_report.items()}
    latitude, longitude, height = (repr(float(value)) for value in log.datum)
    values.update(utc_start="" if log.utc_start is None else repr(float(log.utc_start)),
                  source_log=log.source_log, datum_latitude_deg=latitude,
                  datum_longitude_deg=longitude, datum_height_m=height,
                  data_loss=" | ".join(log.damage))
    warning = "; ".join(filter(None, (import_warning(log.import_report),
                                      "the log is damaged: " + values["data_loss"]
                                      if log.damage else "")))
    message = import_summary(log) + (f"; {warning}" if warning else "")
    return bagio.diagnostics_message(stamp, "trident_import", 1 if warning else 0, message,
                                     values)


TOPICS = ("/imu/data", "/gnss/fix", "/gnss/vel", "/reference/odometry", bagio.BAROMETER_TOPIC,
          bagio.MAGNETOMETER_TOPIC, bagio.IMPORT_SUMMARY_TOPIC)


class _Stream(NamedTuple):
    topic: str
    msgtype: str
    time: Array
    message: Callable[[int, int], Any]  # (row, stamp ns) -> message


def _streams(log: FlightLog) -> list[_Stream]:
    """The topics of the bag; at equal stamps they are written in this order."""
    no_twist = np.zeros((6, 6))

    def fix(i: int, stamp: int) -> Any:
        horizontal, vertical, _ = log.gnss_sigma[i]
        latitude, longitude, height = log.gnss_geodetic[i]
        return bagio.navsatfix_message(stamp, latitude, longitude, height,
                                       np.diag([horizontal**2, horizontal**2, vertical**2]))

    def odometry(i: int, stamp: int) -> Any:
        q = log.reference_attitude[i]
        body_velocity = quaternion.rotate(quaternion.conjugate(q), log.reference_velocity_enu[i])
        return bagio.odometry_message(stamp, log.reference_position_enu[i], q, no_twist,
                                      body_velocity, (0.0, 0.0, 0.0), no_twist)

    return [
        _Stream("/gnss/fix", bagio.NAVSATFIX, log.gnss_time, fix),
        _Stream("/gnss/vel", bagio.TWIST, log.gnss_time, lambda i, stamp: bagio.twist_message(
            stamp, log.gnss_velocity_enu[i], np.eye(3) * log.gnss_sigma[i, 2]**2)),
        _Stream("/reference/odometry", bagio.ODOMETRY, log.reference_time, odometry),
        _Stream("/imu/data", bagio.IMU, log.imu_time,
                lambda i, stamp: bagio.imu_message(stamp, log.gyro[i], log.accel[i])),
        _Stream(bagio.BAROMETER_TOPIC, bagio.FLUID_PRESSURE, log.baro_time,
                lambda i, stamp: bagio.fluid_pressure_message(stamp, log.baro_pressure[i])),
        _Stream(bagio.MAGNETOMETER_TOPIC, bagio.MAGNETIC_FIELD, log.mag_time,
                lambda i, stamp: bagio.magnetic_field_message(stamp, log.mag_field[i])),
    ]


def write_bag(log: FlightLog, output: Path,
              progress: Callable[[float], None] = lambda fraction: None,
              overwrite: bool = False) -> dict[str, int]:
    """Write /imu/data, /gnss/fix, /gnss/vel, /reference/odometry, /barometer/pressure
    (FluidPressure, Pa, variance 0 = unknown), /magnetic_field (MagneticField, T, FLU,
    covariance 0 = unknown) and one /trident_import/summary (DiagnosticArray with the import
    report, at the first stamp) into the rosbag2 directory ``output`` (``bagio.BagWriter``:
    replaced only with ``overwrite``); returns the message counts per topic."""
    streams = _streams(log)
    times = np.concatenate([s.time for s in streams])
    kinds = np.concatenate([np.full(s.time.size, k) for k, s in enumerate(streams)])
    rows = np.concatenate([np.arange(s.time.size) for s in streams])
    order = np.lexsort((rows, kinds, times))  # by time, then stream, then row
    stamps = np.round(times * 1e9).astype(np.int64)
    counts = dict.fromkeys(TOPICS, 0) | {bagio.IMPORT_SUMMARY_TOPIC: 1}
    with bagio.BagWriter(output, overwrite) as writer:
        first = int(stamps[order[0]]) if order.size else 0
        writer.write(bagio.IMPORT_SUMMARY_TOPIC, bagio.DIAGNOSTICS, first,
                     _summary_message(log, first))
        for n, event in enumerate(order):
            stream, stamp = streams[kinds[event]], int(stamps[event])
            writer.write(stream.topic, stream.msgtype, stamp,
                         stream.message(int(rows[event]), stamp))
            counts[stream.topic] += 1
            if n % 5000 == 0:
                progress(n / order.size)
    progress(1.0)
    return counts
