"""The flight logs of the repository's data/: every file listed in data/README.md is there
with its licence, the folder stays small, and the real flights (PX4 per-topic CSVs,
ArduPilot DataFlash) go through trident-import with physically sensible values."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from trident_ekf.core.earth import ecef_to_enu, geodetic_to_ecef
from trident_ekf.tools import bagio, import_cli
from trident_ekf.tools.flightlog import FlightLog, read_log

DATA = Path(__file__).resolve().parents[3] / "data"
MAX_TOTAL_BYTES = 20_000_000  # keep the clone light: 20 MB for the whole folder
NOT_DATA = {"README.md", "LICENSE", ".gitattributes"}
GRAVITY = 9.80  # m/s^2, within a few mm/s^2 of normal gravity at both flights' latitudes


def listed_files() -> list[str]:
    """Paths (relative to data/) in the first column of the table under "## Files" in
    data/README.md."""
    text = (DATA / "README.md").read_text()
    section = text.split("\n## Files\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)
    assert rows, "data/README.md lists no file"
    return rows


def test_every_listed_file_is_there_with_its_licence_and_the_folder_stays_small():
    listed = listed_files()
    assert len(listed) == len(set(listed))
    for name in listed:
        path = DATA / name
        assert path.is_file(), f"{name} is listed in data/README.md but missing"
        assert path.stat().st_size > 0, name
        licence = path.parent / "LICENSE"
        assert licence.is_file(), f"no LICENSE beside {name}"
        assert path.name in licence.read_text(), f"{licence} does not name {path.name}"
    on_disk = {str(p.relative_to(DATA)) for p in DATA.rglob("*")
               if p.is_file() and p.name not in NOT_DATA}
    assert on_disk == set(listed), "every data file is described (and licensed) in the README"
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < MAX_TOTAL_BYTES, f"data/ holds {total / 1e6:.1f} MB"


# ----- physical checks of the real flights ---------------------------------------------------
def _columns(path: Path) -> dict[str, np.ndarray]:
    table = np.genfromtxt(path, delimiter=",", names=True)
    return {name: np.asarray(table[name], dtype=float) for name in table.dtype.names}


def _gnss_enu(log: FlightLog) -> np.ndarray:
    return ecef_to_enu(np.array([geodetic_to_ecef(*g) for g in log.gnss_geodetic]), log.datum)


def _check_stamps_and_gnss(log: FlightLog) -> None:
    """Strictly increasing stamps; fixes within a few km of each other; the reported GNSS
    velocity (ENU) is the derivative of the reported positions (signs and axes right)."""
    for stamps in (log.imu_time, log.gnss_time, log.reference_time):
        assert np.all(np.diff(stamps) > 0.0)
    enu = _gnss_enu(log)
    assert np.max(np.linalg.norm(enu[:, :2], axis=1)) < 2000.0
    assert np.all(np.abs(log.gnss_geodetic[:, 2] - log.datum[2]) < 500.0)
    dt = np.diff(log.gnss_time)
    consecutive = dt < 0.5  # skip the receiver's dropouts
    differenced = np.diff(enu, axis=0)[consecutive] / dt[consecutive, None]
    reported = 0.5 * (log.gnss_velocity_enu[1:] + log.gnss_velocity_enu[:-1])[consecutive]
    for axis in range(3):
        assert np.corrcoef(differenced[:, axis], reported[:, axis])[0, 1] > 0.85, axis


def _check_at_rest(accel: np.ndarray, gyro: np.ndarray) -> None:
    """On the ground the IMU measures gravity as specific force up (+z FLU, REP-145), about
    9.8 m/s^2 (within 3 %: these accelerometers are not scale-calibrated), and no rotation."""
    norm = np.linalg.norm(accel, axis=1)
    assert np.median(norm) == pytest.approx(GRAVITY, rel=0.03)
    mean = np.mean(accel, axis=0)
    assert mean[2] / np.linalg.norm(mean) > 0.99  # level within about 8 deg, +z up
    assert np.max(np.abs(np.mean(gyro, axis=0))) < 0.02  # rad/s


@pytest.fixture(scope="module")
def px4_real() -> FlightLog:
    return read_log(DATA / "px4_real")


@pytest.fixture(scope="module")
def ardupilot() -> FlightLog:
    return read_log(DATA / "ardupilot" / "log171.bin")


def test_real_px4_flight_imports_with_physical_values(px4_real, tmp_path):
    """PX4 log_376 (ulog2csv folder): 250 Hz IMU, 5 Hz GNSS, no onboard estimate logged."""
    log = px4_real
    _check_stamps_and_gnss(log)
    assert np.median(np.diff(log.imu_time)) == pytest.approx(0.004, abs=1e-4)
    assert np.median(np.diff(log.gnss_time)) == pytest.approx(0.2, abs=0.03)
    assert log.reference_time.size == 0
    landed = _columns(DATA / "px4_real" / "vehicle_land_detected_0.csv")
    state = np.searchsorted(landed["timestamp"] * 1e-6, log.imu_time, side="right") - 1
    on_ground = (state >= 0) & (landed["landed"][np.clip(state, 0, None)] == 1)
    assert 1000 < np.count_nonzero(on_ground) < 0.5 * log.imu_time.size
    _check_at_rest(log.accel[on_ground], log.gyro[on_ground])
    assert np.count_nonzero(~on_ground) > 100 * 250  # over 100 s of flight
    height = log.gnss_geodetic[:, 2]
    assert np.ptp(height) > 5.0  # it climbed
    assert np.max(np.linalg.norm(log.gnss_velocity_enu[:, :2], axis=1)) > 1.0  # and moved
    # The barometer (for the coming baro aiding) follows the GNSS height changes.
    air = _columns(DATA / "px4_real" / "vehicle_air_data_0.csv")
    baro_time, baro_height = air["timestamp"] * 1e-6, air["baro_alt_meter"]
    gnss_height = np.interp(baro_time, log.gnss_time, height)
    assert np.corrcoef(baro_height, gnss_height)[0, 1] > 0.9

    bag = tmp_path / "px4_real"
    assert import_cli.main([str(DATA / "px4_real"), "--output", str(bag)]) == 0
    counts = bagio.topic_counts(bag)
    assert counts["/imu/data"] == log.imu_time.size
    assert counts["/gnss/fix"] == counts["/gnss/vel"] == log.gnss_time.size
    assert counts.get("/reference/odometry", 0) == 0


def test_ardupilot_log_imports_with_physical_values(ardupilot, tmp_path):
    """ArduCopter log171 (DataFlash): 50 Hz IMU, 5 Hz GPS, EKF1 reference; on the ground
    and still for its first 10 s."""
    log = ardupilot
    _check_stamps_and_gnss(log)
    assert np.median(np.diff(log.imu_time)) == pytest.approx(0.02, abs=1e-3)
    still = log.imu_time < log.imu_time[0] + 10.0
    assert np.std(np.linalg.norm(log.accel[still], axis=1)) < 0.1  # really at rest
    _check_at_rest(log.accel[still], log.gyro[still])
    assert np.max(np.linalg.norm(log.gnss_velocity_enu[:, :2], axis=1)) > 5.0

    bag = tmp_path / "log171"
    assert import_cli.main([str(DATA / "ardupilot" / "log171.bin"), "--output", str(bag)]) == 0
    counts = bagio.topic_counts(bag)
    assert counts["/imu/data"] == log.imu_time.size
    assert counts["/gnss/fix"] == log.gnss_time.size
    assert counts["/reference/odometry"] == log.reference_time.size > 1000
