"""The magnetometer's World Magnetic Model date when the stamps carry none (sim time, boot time):
today at 00:00 UTC, so two replays of such a log on one day give the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.earth_field import decimal_year
from trident_ekf.core.measurements import magnetometer
from trident_ekf.core.measurements.magnetometer import Magnetometer, MagnetometerConfig

ZURICH = geodetic_to_ecef(47.3977, 8.5456, 488.0)
NOON = 1795780800.0  # 2026-11-27T12:00:00Z
BOOT_TIME_S = 123.4  # a stamp that is not a POSIX time


def field_at_wall_clock(monkeypatch: pytest.MonkeyPatch, wall_s: float,
                        source: Magnetometer) -> tuple[np.ndarray, str]:
    monkeypatch.setattr(magnetometer.wall_clock, "time", lambda: wall_s)
    return source.earth_field(np.asarray(ZURICH), BOOT_TIME_S)


def test_undated_stamps_use_midnight_utc_of_today(monkeypatch):
    source = Magnetometer()
    morning, described = field_at_wall_clock(monkeypatch, NOON - 11 * 3600.0, source)
    evening = field_at_wall_clock(monkeypatch, NOON + 11 * 3600.0, source)[0]
    assert np.array_equal(morning, evening)
    midnight = decimal_year(NOON - 12 * 3600.0)
    assert described.endswith(f"at {midnight:.2f}")
    explicit = Magnetometer(MagnetometerConfig(model_year=midnight))
    assert np.array_equal(morning, explicit.earth_field(np.asarray(ZURICH), BOOT_TIME_S)[0])


def test_the_next_day_moves_the_field_by_the_secular_variation_only(monkeypatch):
    source = Magnetometer()
    today = field_at_wall_clock(monkeypatch, NOON, source)[0]
    tomorrow = field_at_wall_clock(monkeypatch, NOON + 86400.0, source)[0]
    change = float(np.linalg.norm(tomorrow - today))
    assert 0.0 < change < 1e-9  # T: tens of nT per year, a fraction of a nT per day


def test_posix_stamps_keep_their_own_time(monkeypatch):
    source = Magnetometer()
    monkeypatch.setattr(magnetometer.wall_clock, "time", lambda: NOON)
    at_stamp = source.earth_field(np.asarray(ZURICH), NOON - 3600.0)[1]
    assert at_stamp.endswith(f"at {decimal_year(NOON - 3600.0):.2f}")
