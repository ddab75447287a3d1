"""Barometer and magnetometer aiding on a real flight (ArduCopter log171.bin, data/README.md)
against the autopilot's own EKF1.

The replay stops just before the vehicle hits the ground (``Log171.crash``, 225.5 of the
log's 243 s); errors are compared from the time EKF1's
yaw becomes true heading on (``Log171.magnetic_reference_until``). The log's tuning is in
``conftest.Log171``.
"""

from __future__ import annotations

from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import pytest

from trident_ekf.tools.replay import Aiding, Topics, replay

OUTAGE = (100.0, 30.0)  # s after the first IMU sample: in the air
Log171 = Any  # conftest.Log171 (conftest modules are not importable under importlib mode)
Summary = dict[str, Any]


def _replay(pool: ProcessPoolExecutor, log: Log171, **aiding: Any) -> Future[Summary]:
    options = {"settings": log.settings, "stop": log.crash,
               "evaluate_from": log.magnetic_reference_until, **aiding}
    return pool.submit(replay, log.bag, None, Topics(), "trident", log.config,
                       log.initializer(), 50.0, None, aiding=Aiding(**options))


@pytest.fixture(scope="module")
def replays(log171: Log171, replay_pool: ProcessPoolExecutor) -> dict[str, Future[Summary]]:
    """The module's replays, submitted at once so that they run side by side in the pool."""
    return {
        "aided": _replay(replay_pool, log171),
        "outage": _replay(replay_pool, log171, gnss_outage=OUTAGE),
        "outage_without_barometer": _replay(replay_pool, log171, gnss_outage=OUTAGE,
                                            disable=("barometer",)),
        "hover": _replay(replay_pool, log171, stop=60.0, evaluate_from=0.0),
    }


@pytest.fixture(scope="module")
def aided(replays: dict[str, Future[Summary]]) -> Summary:
    return replays["aided"].result()


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


@pytest.fixture(scope="module")
def outage(replays: dict[str, Future[Summary]]) -> Summary:
    return replays["outage"].result()


def test_the_barometer_holds_the_height_through_a_gnss_outage(
        replays: dict[str, Future[Summary]], outage: Summary) -> None:
    with_baro = outage
    without = replays["outage_without_barometer"].result()
    assert with_baro["gnss_outage_dropped_messages"] == 2 * 5 * OUTAGE[1]  # fix + vel, 5 Hz
    # Measured: 1.7 m with the barometer (4.1 m while the barometer offset state held the
    # whole 64 m offset and decayed), 73 m without.
    assert with_baro["outage_max_vertical_error_m"] < 3.0
    assert without["outage_max_vertical_error_m"] > 5.0 * with_baro["outage_max_vertical_error_m"]


def test_the_horizontal_bound_holds_the_drift_through_a_gnss_outage(
        outage: dict[str, Any]) -> None:
    """The drift from the outage start stays inside 3 sigma throughout. The error itself is
    outside in the first 0.6 s only, where the aided estimate is already 0.5 m from EKF1
    (itself an estimate) against a 3 sigma of 0.2 m. The same tuning without the sampling
    noise (k = 0): 36 % inside, 313 m. Before the trident filter re-expressed its body-frame
    velocity and position covariance after each attitude correction (previous tuning): 33 %,
    179 m, as barometer updates took horizontal position sigma for vertical information."""
    result = outage
    # Measured: drift 100 %, error 98 %, largest error 170 m.
    assert result["outage_horizontal_drift_inside_3sigma"] == 1.0
    assert result["outage_horizontal_inside_3sigma"] > 0.97
    assert result["outage_max_horizontal_error_m"] < 200.0


def test_the_yaw_in_the_hover_is_true_heading(replays: dict[str, Future[Summary]]) -> None:
    """Before ``magnetic_reference_until`` EKF1's yaw is magnetic heading: on the ground
    until 60 s the estimate's yaw differs from it by the declination of the World Magnetic
    Model at the site (12.39 deg east, the NOAA calculator's value for the log's place and
    date), steadily (measured 12.27 +- 0.44 deg). With EKF1 turned to true heading the hover
    is inside the 5 deg of the flight."""
    hover = replays["hover"].result()
    assert hover["reference_samples"] > 150
    for window in ("", "_second_half", "_last_fifth"):  # steady, not a noisy yaw
        assert hover[f"rmse_yaw_deg{window}"] == pytest.approx(12.39, abs=1.0)
