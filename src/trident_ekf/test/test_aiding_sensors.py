"""Magnetometer and barometer updates on simulated data (their H is checked against finite
differences in test_linearization.py): yaw in hover, height in a GNSS outage, input checks,
gating and delayed samples."""

from __future__ import annotations

import copy
import dataclasses
import math
from functools import cache

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, FilterStatus, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic, enu_to_ecef_rotation
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.simulation import (
    SensorModel,
    SimulatedData,
    Trajectory,
    events,
    run,
    simulate,
)

FILTERS = [TridentEKF, BaselineESKF]
SENSORS = SensorModel()
BARO_OFFSET = 14.0  # m: readings fed as ellipsoidal height minus this (an MSL-like reading)
CONFIG = FilterConfig(magnetic_field_ned=SENSORS.magnetic_field_ned,
                      barometer_height_offset=BARO_OFFSET)
SIGMAS = np.array([0.03, 0.03, math.radians(40.0), *[0.3] * 3, *[2.0] * 3, *[0.01] * 3,
                   *[SENSORS.accel_bias_sigma] * 3])
R_MAG = np.full(3, SENSORS.magnetometer_sigma**2)
R_BARO = SENSORS.barometer_sigma**2


@cache
def _data(hover_time: float, duration: float, seed: int,
          magnetometer_rate: float = 10.0) -> SimulatedData:
    data = simulate(Trajectory(hover_time=hover_time), SENSORS, duration, imu_rate=100.0,
                    rng=np.random.default_rng(seed), magnetometer_rate=magnetometer_rate)
    return dataclasses.replace(data, barometer_height=data.barometer_height - BARO_OFFSET)


def _started(cls: type[ErrorStateFilter], data: SimulatedData,
             yaw_error: float = 0.0, config: FilterConfig = CONFIG) -> ErrorStateFilter:
    """Initialized at the truth with the true biases, then yawed by ``yaw_error`` rad."""
    filter_ = cls(config)
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       data.gyro_bias[0], data.accel_bias[0])
    filter_._inject([0.0, 0.0, -yaw_error, *[0.0] * 6])
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
def test_magnetometer_makes_yaw_converge_in_hover(cls):
    """60 s hover, initial yaw error 30 deg (sigma 40 deg): GNSS alone leaves yaw
    unobservable; the magnetometer pins it within seconds."""
    data = _data(60.0, 60.0, 5)
    results = {}
    for magnetometer in (False, True):
        filter_ = _started(cls, data, yaw_error=math.radians(30.0))
        results[magnetometer] = run(filter_, data, magnetometer=magnetometer)
        accepted = filter_.counters.magnetometer_accepted
        # The first samples are gated: a 30 deg error is far outside the linear model.
        assert accepted > 0.9 * data.magnetometer_time.size if magnetometer else accepted == 0
    settled = results[True]["time"] > 10.0
    sigma_without = np.degrees(results[False]["sigma"][:, 2])
    sigma_with = np.degrees(results[True]["sigma"][settled, 2])
    error_with = np.degrees(np.abs(results[True]["error"][settled, 2]))
    assert sigma_without.min() > 10.0
    assert sigma_with.max() < 0.5
    assert error_with.max() < max(1.0, 3.0 * sigma_with.max())
    assert np.degrees(np.abs(results[False]["error"][-1, 2])) > 10.0


def _vertical(filter_: ErrorStateFilter, data: SimulatedData) -> tuple[float, float]:
    """Height error (estimate - truth, m) and its sigma at the last sample."""
    filter_.flush()
    truth = data.truth
    error = filter_.conventional_jacobian() @ filter_.error_from_truth(
        truth["q"][-1], truth["v"][-1], truth["p"][-1], data.gyro_bias[-1], data.accel_bias[-1])
    latitude, longitude, _ = ecef_to_geodetic(filter_.nominal()[2])
    up = enu_to_ecef_rotation(latitude, longitude)[:, 2]
    covariance = filter_.conventional_covariance()[6:9, 6:9]
    return float(up @ error[6:9]), math.sqrt(up @ covariance @ up)


@pytest.mark.parametrize("cls", FILTERS)
def test_barometer_bounds_the_vertical_error_in_a_gnss_outage(cls):
    """Manoeuvres, GNSS lost for the last 30 s of 60 s: without the barometer the height
    drifts with a growing sigma; with it both stay at the barometer's level."""
    data = _data(0.0, 60.0, 6)
    vertical = {}
    for barometer in (False, True):
        filter_ = _started(cls, data)
        run(filter_, data, skip_gnss=(30.0, 61.0), barometer=barometer)
        assert filter_.status is FilterStatus.OUTAGE  # only GNSS ends an outage
        vertical[barometer] = _vertical(filter_, data)
    (error_without, sigma_without), (error_with, sigma_with) = vertical[False], vertical[True]
    assert sigma_without > 2.0
    assert abs(error_without) > 1.0
    assert sigma_with < 0.25
    assert abs(error_with) < 3.0 * sigma_with
    assert sigma_without > 10.0 * sigma_with


@cache
def _short_run(cls: type[ErrorStateFilter]) -> ErrorStateFilter:
    """5 s of manoeuvres with GNSS only (no aiding sample applied at the last stamp)."""
    filter_ = _started(cls, _data(0.0, 5.0, 7))
    run(filter_, _data(0.0, 5.0, 7))
    filter_.flush()
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
def test_bad_aiding_inputs_are_rejected_and_counted(cls):
    filter_ = copy.deepcopy(_short_run(cls))
    data = _data(0.0, 5.0, 7)
    t = filter_.time
    field, height = data.magnetometer_field[-1], data.barometer_height[-1]
    assert not filter_.process_magnetometer(t + 0.01, [math.nan, 0.0, 0.0], R_MAG)
    assert not filter_.process_magnetometer(math.inf, field, R_MAG)
    assert not filter_.process_magnetometer(t + 0.01, field, [-1e-14, 1e-14, 1e-14])
    assert not filter_.process_magnetometer(t - 3.0, field, R_MAG)  # older than the history
    assert filter_.process_magnetometer(t + 0.05, field, R_MAG)  # queued
    assert not filter_.process_magnetometer(t + 0.05, field, R_MAG)  # duplicate stamp
    assert not filter_.process_barometer(t + 0.01, math.nan, R_BARO)
    assert not filter_.process_barometer(t + 0.01, height, 0.0)
    assert not filter_.process_barometer(t - 3.0, height, R_BARO)
    assert filter_.process_barometer(t + 0.05, height, R_BARO)  # same stamp, other sensor
    assert not filter_.process_barometer(t + 0.05, height, R_BARO)
    counters = filter_.counters
    assert (counters.magnetometer_nonfinite, counters.magnetometer_late,
            counters.magnetometer_duplicate) == (3, 1, 1)
    assert (counters.barometer_nonfinite, counters.barometer_late,
            counters.barometer_duplicate) == (2, 1, 1)
    assert counters.gnss_duplicate == 0
    with pytest.raises(ValueError, match="field_body_T must have 3 elements"):
        filter_.process_magnetometer(t + 0.2, [1e-5, 0.0], R_MAG)
    trajectory = Trajectory()
    at_datum = _started(cls, data, config=dataclasses.replace(
        CONFIG, magnetic_datum=(trajectory.latitude_deg, trajectory.longitude_deg)))
    # Default datum: the initial position, here the trajectory origin.
    assert np.allclose(at_datum._magnetic_field_ecef, filter_._magnetic_field_ecef,
                       rtol=0.0, atol=1e-12)
    without_field = _started(cls, data, config=FilterConfig())
    with pytest.raises(ValueError, match="magnetic_field_ned"):
        without_field.process_magnetometer(0.1, field, R_MAG)
    with pytest.raises(ValueError, match="magnetic_field_ned"):
        FilterConfig(magnetic_field_ned=(0.0, 0.0, 0.0))


@pytest.mark.parametrize("cls", FILTERS)
def test_aiding_outliers_are_gated_without_touching_the_gnss_status(cls):
    filter_ = copy.deepcopy(_short_run(cls))
    data = _data(0.0, 5.0, 7)
    state, covariance = filter_.nominal(), filter_.covariance.copy()
    t = filter_.time
    field = data.magnetometer_field[-1]
    rotated = np.array([-field[1], field[0], field[2]])  # 90 deg of yaw
    assert filter_.process_magnetometer(t, rotated, R_MAG)  # applied now: stamped at t
    assert filter_.process_barometer(t, data.barometer_height[-1] + 20.0, R_BARO)
    counters = filter_.counters
    assert (counters.magnetometer_gated, counters.magnetometer_accepted) == (1, 0)
    assert (counters.barometer_gated, counters.barometer_accepted) == (1, 0)
    for before, after in zip(state, filter_.nominal(), strict=True):
        assert np.array_equal(before, after)
    assert np.array_equal(covariance, filter_.covariance)
    assert filter_.status is FilterStatus.NOMINAL
    assert filter_._consecutive_rejections == 0


@pytest.mark.parametrize("cls", FILTERS)
def test_delayed_aiding_samples_are_applied_at_their_own_stamps(cls):
    """Magnetometer and barometer samples delivered 0.3 s late (after GNSS fixes and later
    samples were applied) end where on-time delivery ends, via the shared history.

    The held samples share no stamp with another sensor: updates at one stamp are applied
    in arrival order, and a late sample arrives last."""
    data = _data(0.0, 3.0, 8, magnetometer_rate=25.0)
    on_time, delayed = _started(cls, data), _started(cls, data)
    feeds = {
        "gnss": lambda f, j: f.process_gnss(
            data.gnss_time[j], data.gnss_position[j], np.full(3, SENSORS.gnss_position_sigma**2),
            data.gnss_velocity[j], np.full(3, SENSORS.gnss_velocity_sigma**2)),
        "magnetometer": lambda f, j: f.process_magnetometer(
            data.magnetometer_time[j], data.magnetometer_field[j], R_MAG),
        "barometer": lambda f, j: f.process_barometer(
            data.barometer_time[j], data.barometer_height[j], R_BARO),
    }
    stamps = {"magnetometer": data.magnetometer_time, "barometer": data.barometer_time}
    held = {("magnetometer", 32), ("barometer", 14)}  # stamps 1.32 s and 1.5 s
    late: list[tuple[float, str, int]] = []
    for kind, index in events(data):
        if kind == "imu":
            t = data.imu_time[index]
            on_time.process_imu(t, data.gyro[index], data.accel[index])
            delayed.process_imu(t, data.gyro[index], data.accel[index])
            while late and t >= late[0][0] + 0.3:
                _, late_kind, late_index = late.pop(0)
                assert feeds[late_kind](delayed, late_index)
            continue
        feeds[kind](on_time, index)
        if (kind, index) in held:
            late.append((stamps[kind][index], kind, index))
        else:
            feeds[kind](delayed, index)
    for a, b in zip(on_time.nominal(), delayed.nominal(), strict=True):
        assert np.allclose(a, b, rtol=0.0, atol=1e-9)
    assert np.allclose(on_time.covariance, delayed.covariance, rtol=1e-9, atol=1e-15)
    assert (delayed.counters.magnetometer_delayed, delayed.counters.barometer_delayed) == (1, 1)
    for name in ("gnss_accepted", "magnetometer_accepted", "barometer_accepted"):
        assert getattr(delayed.counters, name) == getattr(on_time.counters, name)
