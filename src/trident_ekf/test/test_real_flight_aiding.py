"""Barometer and magnetometer aiding on a real flight (ArduCopter log171.bin, data/README.md)
against the autopilot's own EKF1.

The replay stops at the crash (``Log171.crash``); errors are compared from the time EKF1's
yaw becomes true heading on (``Log171.magnetic_reference_until``). The log's tuning is in
``conftest.Log171``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from trident_ekf.tools.replay import Aiding, Topics, replay

OUTAGE = (100.0, 30.0)  # s after the first IMU sample: in the air
Log171 = Any  # conftest.Log171 (conftest modules are not importable under importlib mode)


def _replay(log: Log171, **aiding: Any) -> dict[str, Any]:
    options = {"settings": log.settings, "stop": log.crash,
               "evaluate_from": log.magnetic_reference_until, **aiding}
    return replay(log.bag, None, Topics(), "trident", log.config, log.initializer(), 50.0, None,
                  aiding=Aiding(**options))


@pytest.fixture(scope="module")
def aided(log171: Log171) -> dict[str, Any]:
    return _replay(log171)


def test_barometer_and_magnetometer_are_fused(aided: dict[str, Any]) -> None:
    assert aided["aiding"] == ["barometer", "gnss_position", "gnss_velocity", "magnetometer"]
    assert aided["magnetic_field_model"].startswith("WMM-2015v2 at 2015.8")  # flight date
    for name in ("barometer", "magnetometer"):
        assert aided["sources"][name]["accepted"] > 1000


def test_errors_against_the_autopilot(aided: dict[str, Any]) -> None:
    assert aided["rmse_horizontal_m"] < 1.5
    assert aided["rmse_vertical_m"] < 1.0
    assert aided["rmse_yaw_deg"] < 5.0


def test_every_fused_measurement_is_consistent(aided: dict[str, Any]) -> None:
    for name, source in aided["sources"].items():
        ratio = source["nis_mean"] / source["dof"]
        assert 0.5 <= ratio <= 2.0, (name, ratio)


def test_the_barometer_holds_the_height_through_a_gnss_outage(log171: Log171) -> None:
    with_baro = _replay(log171, gnss_outage=OUTAGE)
    without = _replay(log171, gnss_outage=OUTAGE, disable=("barometer",))
    assert with_baro["gnss_outage_dropped_messages"] == 2 * 5 * OUTAGE[1]  # fix + vel, 5 Hz
    # Measured: 4.1 m with the barometer, 55 m without (drift from the map offset of the
    # aided flight; the tilt drift of the 49 Hz-sampled gyro shows in the vertical too).
    assert with_baro["outage_max_vertical_error_m"] < 4.5
    assert without["outage_max_vertical_error_m"] > 5.0 * with_baro["outage_max_vertical_error_m"]
    assert math.isfinite(with_baro["outage_max_horizontal_error_m"])
