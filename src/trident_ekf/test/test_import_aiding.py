"""trident-import keeps what real logs carry and drops what they should not: barometer and
magnetometer of the real ArduPilot flight and the PX4 SITL ULog (checked against GNSS height,
the onboard attitude and the World Magnetic Model), UTC start time, and the reference
sanitising (corrupt row, in-flight origin change, rows flagged invalid) on a genuine PX4 ULog
edited with pyulog, and on synthetic arrays. Also: the new bag topics and the summary."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pytest
from pyulog import ULog

from mav_geometry import quaternion
from trident_ekf.tools import bagio, import_cli
from trident_ekf.tools.flightlog import (
    FlightLog,
    gps_to_utc,
    isa_height,
    isa_pressure,
    read_log,
    write_bag,
)
from trident_ekf.tools.frames import euler_enu
from trident_ekf.tools.reference_sanitizer import (
    PX4_EARTH_RADIUS,
    JumpLimits,
    drop_jumps,
    origin_changes,
    px4_local_to_geodetic,
    screen_reference,
)

DATA = Path(__file__).resolve().parents[3] / "data"
ULOG = DATA / "px4_sitl" / "sample_px4_events.ulg"
DATAFLASH = DATA / "ardupilot" / "log171.bin"
REASONS = ("invalid", "no_origin", "nonfinite", "out_of_order", "jump")
# World Magnetic Model field elements at the logs' place and date (NOAA calculator values):
# declination deg (east +), inclination deg (down +), total intensity T.
WMM_CANBERRA_2015_9 = (12.39, -65.96, 58.2e-6)  # WMM-2015, -35.362 N 149.166 E, 2015-11-21
WMM_ZURICH_2024_2 = (3.43, 63.49, 48.3e-6)  # WMM-2020, 47.398 N 8.546 E, 2024-03-18


# ----- synthetic arrays: the reference screen ---------------------------------------------
def _track(n: int = 200, speed: float = 10.0) -> tuple[np.ndarray, ...]:
    """A straight 10 Hz track east at ``speed`` m/s, level, identity attitude."""
    time = np.arange(n) * 0.1
    position = np.stack([speed * time, np.zeros(n), np.full(n, 20.0)], axis=-1)
    velocity = np.tile([speed, 0.0, 0.0], (n, 1))
    return time, position, velocity, np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))


def test_a_single_corrupt_row_is_dropped_and_the_rows_after_it_are_kept():
    time, position, velocity, attitude = _track()
    position[60, 0] += 512.0
    screen = screen_reference(time, position, velocity, attitude)
    assert np.flatnonzero(~screen.keep).tolist() == [60]
    assert screen.report["reference_rows_jump"] == 1
    assert screen.report["reference_rows_kept"] == 199
    assert screen.report["reference_origin_changes"] == 0
    assert set(screen.segment[screen.keep]) == {0}


def test_a_short_corrupt_stretch_is_dropped_not_taken_for_a_new_place():
    time, position, velocity, attitude = _track()
    position[60:63, 0] += 512.0  # three rows agree, but fewer than confirm_rows
    screen = screen_reference(time, position, velocity, attitude)
    assert np.flatnonzero(~screen.keep).tolist() == [60, 61, 62]
    assert screen.report["reference_origin_changes"] == 0


def test_a_corrupt_first_row_does_not_drop_the_flight():
    time, position, velocity, attitude = _track()
    position[0] = [512.0, -300.0, 90.0]
    screen = screen_reference(time, position, velocity, attitude)
    assert np.flatnonzero(~screen.keep).tolist() == [0]
    assert screen.report["reference_origin_changes"] == 0


def test_a_consistent_move_to_a_new_place_is_an_unlogged_origin_change():
    """An origin change that was not logged: every row from 120 on is 300 m away, so after
    ``confirm_rows`` consistent rows the new place is accepted as a new segment. Nothing is
    dropped, and the change is counted."""
    time, position, velocity, attitude = _track()
    position[120:] += [300.0, -40.0, 0.0]
    screen = screen_reference(time, position, velocity, attitude)
    assert screen.keep.all()
    assert screen.report["reference_origin_changes"] == 1
    assert screen.report["reference_origin_changes_unlogged"] == 1
    assert screen.segment.tolist() == [0] * 120 + [1] * 80


def test_speed_limit_and_reach_grow_with_the_gap():
    time, position, velocity, _ = _track()
    velocity[30] = [150.0, 0.0, 0.0]  # faster than any multirotor
    position[100:] += [50.0, 0.0, 0.0]  # 50 m in 0.1 s: a jump...
    time[100:] += 1.0  # ...unless 1.1 s have passed (100 m/s * 1.1 s + 5 m > 51 m)
    segment, relocations = drop_jumps(time, position, velocity, JumpLimits())
    assert np.flatnonzero(segment < 0).tolist() == [30]
    assert relocations == 0


def test_every_reason_is_counted_once_and_the_counts_add_up():
    time, position, velocity, attitude = _track()
    invalid = np.zeros(time.size, dtype=bool)
    invalid[[3, 4]] = True
    no_origin = np.zeros(time.size, dtype=bool)
    no_origin[[4, 5]] = True  # row 4 counts as invalid only: the first reason wins
    position[10, 1] = np.nan
    attitude[11] = np.inf
    time[21] = time[20]  # a repeated stamp
    position[40, 2] -= 400.0
    screen = screen_reference(time, position, velocity, attitude, invalid=invalid,
                              no_origin=no_origin)
    report = screen.report
    assert [report[f"reference_rows_{reason}"] for reason in REASONS] == [2, 1, 2, 1, 1]
    assert report["reference_rows_total"] == report["reference_rows_kept"] + sum(
        report[f"reference_rows_{reason}"] for reason in REASONS) == 200
    assert np.flatnonzero(~screen.keep).tolist() == [3, 4, 5, 10, 11, 21, 40]


def test_logged_origin_changes_are_counted_between_consecutive_rows():
    origin = np.tile([47.0, 8.0, 400.0], (6, 1))
    origin[2:] += [0.001, 0.0, 0.0]
    origin[5:] += [0.0, 0.0, 1.5]
    assert origin_changes(origin).tolist() == [False, False, True, False, False, True]
    time, position, velocity, attitude = _track(6)
    report = screen_reference(time, position, velocity, attitude, origin=origin).report
    assert report["reference_origin_changes"] == 2
    assert report["reference_origin_changes_unlogged"] == 0


# ----- PX4's local projection ---------------------------------------------------------------
def _px4_project(lat_lon: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Forward azimuthal equidistant projection on PX4's sphere (north, east m): the inverse
    of what the importer applies, written independently here."""
    lat, lon = np.radians(lat_lon).T
    lat0, lon0 = np.radians(origin).T
    cos_arc = np.clip(np.sin(lat0) * np.sin(lat) + np.cos(lat0) * np.cos(lat)
                      * np.cos(lon - lon0), -1.0, 1.0)
    arc = np.arccos(cos_arc)
    scale = np.where(arc > 0.0, arc / np.sin(np.where(arc > 0.0, arc, 1.0)), 1.0)
    north = scale * (np.cos(lat0) * np.sin(lat) - np.sin(lat0) * np.cos(lat) * np.cos(lon - lon0))
    east = scale * np.cos(lat) * np.sin(lon - lon0)
    return PX4_EARTH_RADIUS * np.stack([north, east], axis=-1)


def test_px4_local_to_geodetic_inverts_px4s_projection():
    rng = np.random.default_rng(3)
    origin = np.column_stack([rng.uniform(-70, 70, 500), rng.uniform(-180, 180, 500)])
    lat_lon = origin + rng.uniform(-0.05, 0.05, (500, 2))  # up to about 8 km away
    recovered = px4_local_to_geodetic(_px4_project(lat_lon, origin), origin)
    assert np.max(np.abs(recovered - lat_lon)) < 1e-10  # deg: well under a millimetre
    # One arc-kilometre north is 1000 / R rad of latitude on PX4's sphere.
    north = px4_local_to_geodetic(np.array([[1000.0, 0.0]]), np.array([[47.0, 8.0]]))
    assert north[0] == pytest.approx([47.0 + np.degrees(1000.0 / PX4_EARTH_RADIUS), 8.0],
                                     abs=1e-12)
    assert px4_local_to_geodetic(np.zeros((1, 2)), np.array([[47.0, 8.0]]))[0] == (
        pytest.approx([47.0, 8.0], abs=1e-12))


# ----- units: ISA and GPS time --------------------------------------------------------------
def test_isa_pressure_and_height():
    assert isa_pressure(np.array(0.0)) == pytest.approx(101325.0)
    assert isa_pressure(np.array(1000.0)) == pytest.approx(89874.6, abs=0.5)  # ISA table
    heights = np.array([-100.0, 0.0, 488.0, 3000.0])
    assert isa_height(isa_pressure(heights)) == pytest.approx(heights, abs=1e-6)


def test_gps_to_utc_removes_the_leap_seconds_of_the_date():
    # log171's first fix: GPS week 1871 began on Sunday 2015-11-15; 17 s in late 2015.
    assert datetime.fromtimestamp(gps_to_utc(1871, 603882400), UTC) == datetime(
        2015, 11, 21, 23, 44, 25, 400000, tzinfo=UTC)
    new_year_2017 = datetime(2017, 1, 1, tzinfo=UTC).timestamp()
    gps_seconds = new_year_2017 - datetime(1980, 1, 6, tzinfo=UTC).timestamp()

    def utc_at(gps: float) -> float:
        return gps_to_utc(int(gps // 604800), (gps % 604800) * 1000.0)

    assert utc_at(gps_seconds + 18) == new_year_2017  # 18 s from 2017 on
    assert utc_at(gps_seconds + 16) == new_year_2017 - 1  # 17 s until the end of 2016
    mid_2015 = datetime(2015, 6, 30, 12, tzinfo=UTC).timestamp()
    assert utc_at(mid_2015 - 315964800 + 16) == mid_2015  # 16 s before July 2015


# ----- the real ArduPilot flight ------------------------------------------------------------
@pytest.fixture(scope="module")
def log171() -> FlightLog:
    return read_log(DATAFLASH)


def _airborne(log: FlightLog, time: np.ndarray) -> np.ndarray:
    """More than 2 m above the take-off height by GNSS, after the first fix."""
    height = log.gnss_geodetic[:, 2]
    above = np.interp(time, log.gnss_time, height) - np.median(height[:25])
    return (above > 2.0) & (time > log.gnss_time[0])


def test_dataflash_barometer_follows_the_gnss_height(log171):
    """BARO Press (Pa): plausible, and its ISA height follows the GNSS height in the air
    (measured: correlation 0.96 over 9 m of height changes, 0.6 m RMS, 3.3 m at worst,
    after a constant offset: ISA assumes a standard day, not the weather of that one)."""
    log = log171
    assert log.baro_time.size == 2383
    assert np.all((log.baro_pressure > 80e3) & (log.baro_pressure < 105e3))
    assert np.all((log.baro_temperature > 10.0) & (log.baro_temperature < 50.0))  # deg C
    assert np.all(np.diff(log.baro_time) > 0)
    air = _airborne(log, log.baro_time)
    assert np.count_nonzero(air) > 1000
    baro = isa_height(log.baro_pressure[air])
    gnss = np.interp(log.baro_time[air], log.gnss_time, log.gnss_geodetic[:, 2])
    assert np.ptp(gnss) > 8.0
    assert np.corrcoef(baro, gnss)[0, 1] > 0.9
    difference = baro - gnss - np.mean(baro - gnss)
    assert np.sqrt(np.mean(difference**2)) < 1.5
    assert np.max(np.abs(difference)) < 5.0
    assert log.import_report["baro_source"].startswith("BARO")


def test_dataflash_magnetometer_turns_with_the_onboard_yaw(log171):
    """MAG (mG FRD, offsets applied onboard): Earth-field strength, and the heading of the
    field levelled with EKF1 roll and pitch follows the EKF1 yaw (measured in the air:
    4.7 deg RMS over 420 deg of turns) once a constant offset is removed: the declination
    (measured 12.8 deg east; the World Magnetic Model says 12.4 deg)."""
    log = log171
    strength = np.linalg.norm(log.mag_field, axis=1)
    air = _airborne(log, log.mag_time)
    assert 25e-6 < np.median(strength[air]) < 65e-6
    assert np.median(strength[air]) == pytest.approx(WMM_CANBERRA_2015_9[2], rel=0.15)
    nearest = np.clip(np.searchsorted(log.reference_time, log.mag_time[air]), 0,
                      log.reference_time.size - 1)
    roll, pitch, yaw = euler_enu(log.reference_attitude[nearest]).T
    # Level the body field: undo roll, then pitch (ENU/FLU, ZYX Euler angles).
    level = quaternion.rotate(
        quaternion.multiply(quaternion.from_rotation_vector(np.outer(pitch, [0, 1, 0])),
                            quaternion.from_rotation_vector(np.outer(roll, [1, 0, 0]))),
        log.mag_field[air])
    magnetic_yaw = np.pi / 2 - np.arctan2(level[:, 1], level[:, 0])  # yaw if field = north
    error = np.exp(1j * (magnetic_yaw - yaw))
    declination = np.angle(np.mean(error))
    residual = np.angle(error * np.exp(-1j * declination))
    assert np.degrees(np.ptp(np.unwrap(yaw))) > 360.0  # it turned all the way round
    assert np.degrees(declination) == pytest.approx(WMM_CANBERRA_2015_9[0], abs=2.0)
    assert np.degrees(np.sqrt(np.mean(residual**2))) < 10.0
    # Southern hemisphere: the field points up, as steeply as the model says.
    inclination = np.degrees(np.arctan2(-np.median(level[:, 2]),
                                        np.hypot(*np.median(level[:, :2], axis=0))))
    assert inclination == pytest.approx(WMM_CANBERRA_2015_9[1], abs=5.0)


def test_dataflash_utc_start_is_the_flight_date(log171):
    assert log171.utc_start is not None
    start = datetime.fromtimestamp(log171.utc_start, UTC)
    assert start.date() == date(2015, 11, 21)  # GPS week 1871, 17 leap seconds
    assert log171.import_report["gnss_rows_no_3d_fix"] == 161
    assert log171.import_report["reference_rows_kept"] == 2383


def test_cli_prints_every_reason_and_no_warning_for_a_clean_log(tmp_path, capsys):
    assert import_cli.main([str(DATAFLASH), "--output", str(tmp_path / "bag")]) == 0
    out = capsys.readouterr().out
    for reason in REASONS:
        assert f"  reference_rows_{reason}: 0\n" in out
    assert "  gnss_rows_no_3d_fix: 161\n" in out
    assert "UTC 2015-11-21T23:44:25" in out
    assert "WARNING" not in out
    counts = bagio.topic_counts(tmp_path / "bag")
    assert counts[bagio.BAROMETER_TOPIC] == 2383
    assert counts[bagio.MAGNETOMETER_TOPIC] == 2384


# ----- the PX4 SITL ULog --------------------------------------------------------------------
@pytest.fixture(scope="module")
def sitl() -> FlightLog:
    return read_log(ULOG)


def test_px4_barometer_and_magnetometer(sitl):
    """vehicle_air_data and vehicle_magnetometer (the selected sensors): the simulated baro
    gives the GNSS height through the ISA, the field points where the model says."""
    log = sitl
    assert (log.baro_time.size, log.mag_time.size) == (623, 459)
    after_fix = log.baro_time > log.gnss_time[0]
    gnss = np.interp(log.baro_time[after_fix], log.gnss_time, log.gnss_geodetic[:, 2])
    assert np.median(isa_height(log.baro_pressure[after_fix]) - gnss) == pytest.approx(
        0.0, abs=1.0)
    nearest = np.clip(np.searchsorted(log.reference_time, log.mag_time), 0,
                      log.reference_time.size - 1)
    flying = log.mag_time > log.reference_time[0]
    east, north, up = np.median(quaternion.rotate(log.reference_attitude[nearest[flying]],
                                                  log.mag_field[flying]), axis=0)
    declination, inclination, strength = WMM_ZURICH_2024_2
    assert np.degrees(np.arctan2(east, north)) == pytest.approx(declination, abs=1.0)
    assert np.degrees(np.arctan2(-up, np.hypot(east, north))) == pytest.approx(inclination,
                                                                                abs=1.0)
    assert np.linalg.norm([east, north, up]) == pytest.approx(strength, rel=0.03)
    assert datetime.fromtimestamp(log.utc_start, UTC).date() == date(2024, 3, 18)
    assert "device 6620172" in log.import_report["baro_source"]
    assert "vehicle_magnetometer[0]" in log.import_report["mag_source"]


def test_bag_has_the_aiding_topics_and_the_summary(sitl, tmp_path):
    bag = tmp_path / "bag"
    counts = write_bag(sitl, bag)
    types = bagio.topic_types(bag)
    assert types[bagio.BAROMETER_TOPIC] == (bagio.FLUID_PRESSURE, 623)
    assert types[bagio.MAGNETOMETER_TOPIC] == (bagio.MAGNETIC_FIELD, 459)
    assert types[bagio.IMPORT_SUMMARY_TOPIC] == (bagio.DIAGNOSTICS, 1)
    assert {topic: count for topic, (_, count) in types.items()} == counts
    messages = list(bagio.read_messages(bag, [bagio.BAROMETER_TOPIC, bagio.MAGNETOMETER_TOPIC]))
    baro = [m for topic, _, m in messages if topic == bagio.BAROMETER_TOPIC]
    mag = [m for topic, _, m in messages if topic == bagio.MAGNETOMETER_TOPIC]
    assert [m.fluid_pressure for m in baro] == pytest.approx(sitl.baro_pressure.tolist())
    assert {(m.header.frame_id, m.variance) for m in baro} == {("baro_link", 0.0)}
    field = [(m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z) for m in mag]
    assert np.array(field) == pytest.approx(sitl.mag_field)
    assert {m.header.frame_id for m in mag} == {"imu_link"}
    assert not any(np.any(m.magnetic_field_covariance) for m in mag)
    assert [bagio.stamp_ns(m) for m in mag] == np.round(sitl.mag_time * 1e9).tolist()

    [(_, stamp, summary)] = bagio.read_messages(bag, [bagio.IMPORT_SUMMARY_TOPIC])
    first = min(sitl.imu_time[0], sitl.gnss_time[0], sitl.baro_time[0], sitl.mag_time[0])
    assert stamp == round(first * 1e9)
    [status] = summary.status
    values = {item.key: item.value for item in status.values}
    assert status.name == "trident_import"
    assert status.level == 1  # 98 reference rows before EKF2 was valid were dropped
    assert "98" in status.message
    assert {key: values[key] for key in sitl.import_report} == {
        key: str(value) for key, value in sitl.import_report.items()}
    assert float(values["utc_start"]) == sitl.utc_start
    assert values["source_log"] == ULOG.name
    assert [float(values[f"datum_{k}"]) for k in ("latitude_deg", "longitude_deg",
                                                    "height_m")] == list(sitl.datum)


# ----- a genuine PX4 ULog with a corrupt row, an origin change and an invalid row -----------
CORRUPT_ROW, INVALID_ROW, ORIGIN_CHANGE_ROW = 150, 250, 205
ORIGIN_SHIFT = (0.001, 0.001, 2.0)  # deg, deg, m


def _edit_local_position(path: Path, output: Path) -> None:
    """Rewrite the ULog with vehicle_local_position edited: one corrupt row (x = +512 m), a
    row flagged xy_valid = 0, and from ORIGIN_CHANGE_ROW on an origin moved by ORIGIN_SHIFT
    with x, y, z re-expressed so that the global position stays the same (as PX4 does when
    it resets its origin)."""
    ulog = ULog(str(path))
    [local] = [d for d in ulog.data_list if d.name == "vehicle_local_position"]
    data = local.data
    assert np.all(data["xy_valid"][ORIGIN_CHANGE_ROW - 60:] == 1)  # all valid rows
    later = slice(ORIGIN_CHANGE_ROW, None)
    old_origin = np.column_stack([data["ref_lat"][later], data["ref_lon"][later]])
    north_east = np.column_stack([data["x"][later], data["y"][later]]).astype(float)
    lat_lon = px4_local_to_geodetic(north_east, old_origin)
    data["ref_lat"][later] += ORIGIN_SHIFT[0]
    data["ref_lon"][later] += ORIGIN_SHIFT[1]
    data["ref_alt"][later] += ORIGIN_SHIFT[2]
    data["ref_timestamp"][later] = data["timestamp"][ORIGIN_CHANGE_ROW]
    new_origin = np.column_stack([data["ref_lat"][later], data["ref_lon"][later]])
    data["x"][later], data["y"][later] = _px4_project(lat_lon, new_origin).T
    data["z"][later] += ORIGIN_SHIFT[2]
    data["x"][CORRUPT_ROW] = 512.0
    data["xy_valid"][INVALID_ROW] = 0
    ulog.write_ulog(str(output))


@pytest.fixture(scope="module")
def edited_ulog(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("ulog") / "edited.ulg"
    _edit_local_position(ULOG, output)
    return output


def test_corrupt_row_and_origin_change_in_a_real_ulog(sitl, edited_ulog):
    """Exactly one jump and one origin change are found, the flagged row is dropped, and
    the re-anchored segment lands where the original one was: within 1 cm at every stamp."""
    edited = read_log(edited_ulog)
    report, original = edited.import_report, sitl.import_report
    assert report["reference_rows_jump"] == 1
    assert report["reference_origin_changes"] == 1
    assert report["reference_origin_changes_unlogged"] == 0
    assert report["reference_rows_invalid"] == original["reference_rows_invalid"] + 1
    assert report["reference_rows_kept"] == original["reference_rows_kept"] - 2
    [local] = [d.data for d in ULog(str(edited_ulog)).data_list
               if d.name == "vehicle_local_position"]
    dropped = np.setdiff1d(sitl.reference_time, edited.reference_time)
    assert dropped.tolist() == (local["timestamp"][[CORRUPT_ROW, INVALID_ROW]] * 1e-6).tolist()
    common = np.isin(sitl.reference_time, edited.reference_time)
    difference = edited.reference_position_enu - sitl.reference_position_enu[common]
    assert np.max(np.abs(difference)) < 0.01
    assert np.array_equal(edited.reference_velocity_enu, sitl.reference_velocity_enu[common])
    # The edit really moved the local coordinates: a splice of raw x/y would be 100 m off.
    assert abs(local["x"][ORIGIN_CHANGE_ROW] + 111.0) < 2.0  # 0.001 deg of latitude


def test_cli_warns_about_dropped_and_re_anchored_reference_rows(edited_ulog, tmp_path, capsys):
    bag = tmp_path / "bag"
    assert import_cli.main([str(edited_ulog), "--output", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "  reference_rows_jump: 1\n" in out
    assert "  reference_origin_changes: 1\n" in out
    warning = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert len(warning) == 1
    assert "reference_rows_jump 1" in warning[0]
    assert "re-anchored at 1 origin changes (0 not logged)" in warning[0]
    [(_, _, summary)] = bagio.read_messages(bag, [bagio.IMPORT_SUMMARY_TOPIC])
    values = {item.key: item.value for item in summary.status[0].values}
    assert (values["reference_rows_jump"], values["reference_origin_changes"]) == ("1", "1")
    assert summary.status[0].level == 1


# ----- ulog2csv folders: the real PX4 flight, and the fallback to raw sensor topics ---------
def test_px4_csv_folder_with_air_data_but_no_magnetometer_or_reference(tmp_path):
    log = read_log(DATA / "px4_real")
    assert log.baro_time.size == 10367
    assert np.median(log.baro_pressure) == pytest.approx(99400.0, abs=200.0)  # 160 m MSL
    assert np.median(log.baro_temperature) == pytest.approx(46.0, abs=1.0)  # board heat
    assert log.mag_time.size == log.reference_time.size == 0
    assert log.import_report["mag_source"] == log.import_report["reference_source"] == "none"
    assert datetime.fromtimestamp(log.utc_start, UTC).date() == date(2018, 11, 1)
    counts = write_bag(log, tmp_path / "bag")
    assert counts[bagio.BAROMETER_TOPIC] == 10367
    assert counts[bagio.MAGNETOMETER_TOPIC] == 0
    assert bagio.topic_counts(tmp_path / "bag") == {k: v for k, v in counts.items() if v}


def _write_topic(folder: Path, name: str, columns: dict[str, np.ndarray]) -> None:
    header = ",".join(columns)
    np.savetxt(folder / f"{name}.csv", np.column_stack(list(columns.values())),
               delimiter=",", header=header, comments="", fmt="%.9g")


def test_raw_sensor_instances_follow_the_selected_device(tmp_path):
    """Without calibrated vehicle_* data, the sensor_baro / sensor_mag instance whose
    device_id the selection topic names is used (here instance 1), and the report says so;
    millibar from old PX4 versions become Pa."""
    for name in ("sensor_combined_0.csv", "vehicle_gps_position_0.csv"):
        (tmp_path / name).symlink_to(DATA / "px4_real" / name)
    stamps = np.arange(717.0e6, 718.0e6, 1e5)
    ones = np.ones(stamps.size)
    _write_topic(tmp_path, "vehicle_air_data_0", {"timestamp": stamps, "baro_device_id": 7 * ones,
                                                  "baro_alt_meter": 150 * ones})
    _write_topic(tmp_path, "vehicle_magnetometer_0", {"timestamp": stamps, "device_id": 9 * ones})
    for instance, device in enumerate((5, 7)):
        _write_topic(tmp_path, f"sensor_baro_{instance}", {
            "timestamp": stamps, "device_id": device * ones,
            "pressure": (990.0 + instance) * ones, "temperature": 30 * ones})
    for instance, device in enumerate((8, 9)):
        _write_topic(tmp_path, f"sensor_mag_{instance}", {
            "timestamp": stamps, "device_id": device * ones, "x": 0.2 * ones,
            "y": 0.01 * ones, "z": (0.4 + instance) * ones})
    log = read_log(tmp_path)
    assert log.baro_pressure == pytest.approx(99100.0)  # instance 1, mbar -> Pa
    assert log.baro_time == pytest.approx(stamps * 1e-6)
    assert log.import_report["baro_source"].startswith("sensor_baro[1] (device 7")
    assert log.mag_field[0] == pytest.approx([0.2e-4, -0.01e-4, -1.4e-4])  # G FRD -> T FLU
    assert log.import_report["mag_source"].startswith("sensor_mag[1] (device 9")
    assert "not calibrated" in log.import_report["mag_source"]


# ----- PX4 EKF2 replay CSV ------------------------------------------------------------------
def test_replay_csv_baro_altitude_becomes_isa_pressure_and_mag_tesla():
    path = DATA / "px4_sitl" / "test_replay_data_iris_gps.csv"
    log = read_log(path)
    rows = [line.split(",") for line in path.read_text().splitlines()]
    altitude = np.array([float(r[2]) for r in rows if r[1] == "baro"])
    gauss = np.array([[float(v) for v in r[2:5]] for r in rows if r[1] == "mag"])
    assert isa_height(log.baro_pressure) == pytest.approx(altitude, abs=1e-6)
    assert np.all(np.isnan(log.baro_temperature))
    assert log.mag_field == pytest.approx(gauss * [1e-4, -1e-4, -1e-4])
    assert np.median(np.linalg.norm(log.mag_field, axis=1)) == pytest.approx(48e-6, rel=0.05)
    assert log.utc_start is None
