"""Magnetometer and barometer sources on simulated data (their H is checked against finite
differences in test_linearization.py and test_measurement_sources.py): yaw in hover, height
in a GNSS outage with the barometer offset state absorbing a constant offset, input checks,
gating and delayed samples."""

from __future__ import annotations

import copy
import dataclasses
import math
from functools import cache

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, FilterStatus, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic, enu_to_ecef_rotation, ned_to_ecef
from trident_ekf.core.earth_field import wmm_field_ned
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.measurements import (
    Barometer,
    BarometerConfig,
    Magnetometer,
    MagnetometerConfig,
)
from trident_ekf.core.measurements.base import Measurement
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
CONFIG = FilterConfig()
# The simulated field at the site; hard iron calibrated (the simulated samples have none).
MAGNETOMETER = MagnetometerConfig(mode="3d", field_ned_T=SENSORS.magnetic_field_ned,
                                  hard_iron_sigma_T=1e-9, hard_iron_walk=0.0)
# The simulated offset is constant: a Gauss-Markov offset with a long correlation time.
BAROMETER = BarometerConfig(offset_correlation_time_s=1e6)
SIGMAS = np.array([0.03, 0.03, math.radians(40.0), *[0.3] * 3, *[2.0] * 3, *[0.01] * 3,
                   *[SENSORS.accel_bias_sigma] * 3])
R_MAG = np.eye(3) * SENSORS.magnetometer_sigma**2
R_BARO = SENSORS.barometer_sigma**2


@cache
def _data(hover_time: float, duration: float, seed: int,
          magnetometer_rate: float = 10.0) -> SimulatedData:
    data = simulate(Trajectory(hover_time=hover_time), SENSORS, duration, imu_rate=100.0,
                    rng=np.random.default_rng(seed), magnetometer_rate=magnetometer_rate)
    return dataclasses.replace(data, barometer_height=data.barometer_height - BARO_OFFSET)


def _started(cls: type[ErrorStateFilter], data: SimulatedData, yaw_error: float = 0.0,
             magnetometer: MagnetometerConfig | None = MAGNETOMETER,
             barometer: BarometerConfig | None = BAROMETER) -> ErrorStateFilter:
    """Initialized at the truth with the true biases, then yawed by ``yaw_error`` rad; with
    a magnetometer and a barometer source unless None."""
    sources = ([Magnetometer(magnetometer)] if magnetometer is not None else []) + (
        [Barometer(barometer)] if barometer is not None else [])
    filter_ = cls(CONFIG, sources)
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       data.gyro_bias[0], data.accel_bias[0])
    filter_._inject([0.0, 0.0, -yaw_error, *[0.0] * 6])
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("magnetometer", [
    MAGNETOMETER, MagnetometerConfig(mode="heading", field_ned_T=SENSORS.magnetic_field_ned,
                                     heading_sigma_deg=1.0)], ids=["3d", "heading"])
def test_magnetometer_makes_yaw_converge_in_hover(cls, magnetometer):
    """60 s hover, initial yaw error 30 deg (sigma 40 deg): GNSS alone leaves yaw
    unobservable; the magnetometer (three axes with calibrated hard iron, or heading only)
    pins it within seconds."""
    data = _data(60.0, 60.0, 5)
    results = {}
    for fused in (False, True):
        filter_ = _started(cls, data, yaw_error=math.radians(30.0), magnetometer=magnetometer)
        results[fused] = run(filter_, data, magnetometer=fused)
        counts = filter_.aid_status["magnetometer"].counts
        accepted = counts["accepted"]
        # The first samples may be gated: a 30 deg error is far outside the linear model.
        assert accepted > 0.9 * data.magnetometer_time.size if fused else accepted == 0
        assert counts["disturbed"] == 0  # a yaw error changes neither strength nor dip
    settled = results[True]["time"] > 10.0
    sigma_without = np.degrees(results[False]["sigma"][:, 2])
    sigma_with = np.degrees(results[True]["sigma"][settled, 2])
    error_with = np.degrees(np.abs(results[True]["error"][settled, 2]))
    assert sigma_without.min() > 10.0
    assert sigma_with.max() < 0.5
    assert error_with.max() < max(1.0, 3.0 * sigma_with.max())
    assert np.degrees(np.abs(results[False]["error"][-1, 2])) > 10.0


@pytest.mark.parametrize("field_ned", [(2.1523e-05, 1.334e-06, 4.329e-05),
                                       SENSORS.magnetic_field_ned], ids=["dip+63", "dip-38"])
def test_heading_mode_keeps_the_tilt_consistent_in_hover(field_ned):
    """60 s hover with heading updates at 50 Hz and a tight 0.8 deg sigma: roll and pitch stay
    within 3 sigma, and under 0.5 deg once settled (after 10 s). With the heading row built
    from the noisy sample the tilt drifted to 2.5 deg (3 sigma 0.8 deg) at a 63 deg dip: the
    row's tan(dip) term was correlated with the residual's noise."""
    sensors = dataclasses.replace(SENSORS, magnetic_field_ned=field_ned)
    data = simulate(Trajectory(hover_time=60.0), sensors, 60.0, imu_rate=100.0,
                    rng=np.random.default_rng(5), magnetometer_rate=50.0)
    heading = MagnetometerConfig(mode="heading", field_ned_T=field_ned, heading_sigma_deg=0.8)
    filter_ = TridentEKF(CONFIG, [Magnetometer(heading)])
    truth = data.truth
    sigmas = SIGMAS.copy()
    sigmas[2] = math.radians(10.0)
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], sigmas,
                       data.gyro_bias[0], data.accel_bias[0])
    result = run(filter_, data, magnetometer=True)
    tilt_error = np.abs(result["error"][:, :2])
    assert np.all(tilt_error <= 3.0 * result["sigma"][:, :2])
    assert np.degrees(tilt_error[result["time"] > 10.0].max()) < 0.5
    accepted = filter_.aid_status["magnetometer"].counts["accepted"]
    assert accepted > 0.99 * data.magnetometer_time.size


def _vertical(filter_: ErrorStateFilter, data: SimulatedData) -> tuple[float, float]:
    """Height error (estimate - truth, m) and its sigma at the last sample."""
    filter_.flush()
    truth = data.truth
    augmented = {"barometer": [-BARO_OFFSET]} if "barometer" in filter_.sources else {}
    error = filter_.conventional_jacobian() @ filter_.error_from_truth(
        truth["q"][-1], truth["v"][-1], truth["p"][-1], data.gyro_bias[-1], data.accel_bias[-1],
        augmented=augmented)
    latitude, longitude, _ = ecef_to_geodetic(filter_.nominal()[2])
    up = enu_to_ecef_rotation(latitude, longitude)[:, 2]
    covariance = filter_.conventional_covariance()[6:9, 6:9]
    return float(up @ error[6:9]), math.sqrt(up @ covariance @ up)


@pytest.mark.parametrize("cls", FILTERS)
def test_barometer_bounds_the_vertical_error_in_a_gnss_outage(cls):
    """Manoeuvres, GNSS lost for the last 30 s of 60 s: without the barometer the height
    drifts with a growing sigma; with it both stay at the barometer's level. The readings
    are 14 m below the ellipsoidal height: the offset state (no configured offset any more)
    absorbs that, learnt from GNSS before the outage."""
    data = _data(0.0, 60.0, 6)
    vertical = {}
    for barometer in (False, True):
        filter_ = _started(cls, data, barometer=BAROMETER if barometer else None)
        run(filter_, data, skip_gnss=(30.0, 61.0), barometer=barometer)
        assert filter_.status is FilterStatus.OUTAGE  # only GNSS ends an outage
        vertical[barometer] = _vertical(filter_, data)
        if barometer:
            offset = filter_.state_slice("barometer")
            offset_sigma = math.sqrt(filter_.covariance[offset, offset][0, 0])
            assert filter_.sources["barometer"].offset(filter_) == pytest.approx(
                -BARO_OFFSET, abs=3.0 * offset_sigma)
            assert offset_sigma < 0.25
            assert filter_.aid_status["barometer"].counts["accepted"] > 0.95 * (
                data.barometer_time.size)
    (error_without, sigma_without), (error_with, sigma_with) = vertical[False], vertical[True]
    assert sigma_without > 2.0
    assert abs(error_without) > 1.0
    assert sigma_with < 0.25
    assert abs(error_with) < 3.0 * sigma_with
    assert sigma_without > 10.0 * sigma_with


@cache
def _short_run(cls: type[ErrorStateFilter]) -> ErrorStateFilter:
    """5 s of manoeuvres with GNSS, magnetometer and barometer."""
    filter_ = _started(cls, _data(0.0, 5.0, 7))
    run(filter_, _data(0.0, 5.0, 7), magnetometer=True, barometer=True)
    filter_.flush()
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
def test_bad_aiding_inputs_are_rejected_and_counted(cls):
    filter_ = copy.deepcopy(_short_run(cls))
    magnetometer, barometer = filter_.sources["magnetometer"], filter_.sources["barometer"]
    before = filter_.counts()
    data = _data(0.0, 5.0, 7)
    t = filter_.time
    field, height = data.magnetometer_field[-1], data.barometer_height[-1]
    assert not filter_.process(magnetometer.measurement(t + 0.01, [math.nan, 0.0, 0.0], R_MAG))
    assert not filter_.process(magnetometer.measurement(math.inf, field, R_MAG))
    assert not filter_.process(magnetometer.measurement(
        t + 0.01, field, np.diag([-1e-14, 1e-14, 1e-14])))
    assert not filter_.process(magnetometer.measurement(t - 3.0, field, R_MAG))  # too old
    assert filter_.process(magnetometer.measurement(t + 0.05, field, R_MAG))  # queued
    assert not filter_.process(magnetometer.measurement(t + 0.05, field, R_MAG))  # duplicate
    assert not filter_.process(barometer.measurement(t + 0.01, height_m=math.nan,
                                                     height_variance_m2=R_BARO))
    assert not filter_.process(barometer.measurement(t + 0.01, pressure_pa=-5.0))
    assert not filter_.process(barometer.measurement(t - 3.0, height_m=height,
                                                     height_variance_m2=R_BARO))
    assert filter_.process(barometer.measurement(  # same stamp, other source
        t + 0.05, height_m=height, height_variance_m2=R_BARO))
    assert not filter_.process(barometer.measurement(t + 0.05, height_m=height,
                                                     height_variance_m2=R_BARO))
    counts = filter_.aid_status["magnetometer"].counts
    assert (counts["nonfinite"], counts["late"], counts["duplicate"]) == (3, 1, 1)
    counts = filter_.aid_status["barometer"].counts
    assert (counts["nonfinite"], counts["late"], counts["duplicate"]) == (2, 1, 1)
    after = filter_.counts()
    assert after["gnss_position_duplicate"] == before["gnss_position_duplicate"] == 0
    assert after["gnss_velocity_duplicate"] == 0
    # A variance of 0 means "not reported": the configured noise; a zero variance given
    # directly to the filter is refused.
    unknown = barometer.measurement(t + 0.2, height_m=height, height_variance_m2=0.0)
    assert unknown.covariance[0, 0] == BAROMETER.noise_sigma_m**2
    assert not filter_.process(Measurement("barometer", t + 0.3, np.array([height]),
                                           np.zeros((1, 1))))
    assert filter_.aid_status["barometer"].counts["nonfinite"] == 3
    with pytest.raises(ValueError, match="3"):  # two components, not three
        magnetometer.measurement(t + 0.2, [1e-5, 0.0], R_MAG)
    with pytest.raises(ValueError, match="no aiding source 'range_finder'"):
        filter_.process(Measurement("range_finder", t + 0.2, np.zeros(1), np.eye(1)))


@pytest.mark.parametrize("cls", FILTERS)
def test_earth_field_is_the_configured_one_or_the_world_magnetic_model(cls):
    """The magnetometer's reference field (fixed in ECEF at ``initialize``): the configured
    NED field turned at the start position, or the World Magnetic Model there."""
    data = _data(0.0, 5.0, 7)
    trajectory = Trajectory()
    configured = _started(cls, data).sources["magnetometer"]
    expected = ned_to_ecef(SENSORS.magnetic_field_ned, trajectory.latitude_deg,
                           trajectory.longitude_deg)
    assert np.allclose(configured.field_ecef, expected, rtol=0.0, atol=1e-12)
    assert configured.field_origin == "configured field_ned_T"
    modelled = _started(cls, data, magnetometer=MagnetometerConfig(model_year=2025.5))
    model = modelled.sources["magnetometer"]
    latitude, longitude, height = ecef_to_geodetic(data.truth["p"][0])
    wmm = ned_to_ecef(wmm_field_ned(latitude, longitude, height, 2025.5), latitude, longitude)
    assert np.allclose(model.field_ecef, wmm, rtol=0.0, atol=1e-12)
    assert "2025.50" in model.field_origin
    # The simulation's field is the WMM near Buenos Aires: the two agree to a few uT.
    assert np.linalg.norm(model.field_ecef - expected) < 3e-6
    with pytest.raises(ValueError, match="field_ned_T"):
        MagnetometerConfig(field_ned_T=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="field_ned_T"):
        MagnetometerConfig(field_ned_T=(1e-5, math.nan, 0.0))


@pytest.mark.parametrize("cls", FILTERS)
def test_aiding_outliers_are_gated_without_touching_the_gnss_status(cls):
    filter_ = copy.deepcopy(_short_run(cls))
    data = _data(0.0, 5.0, 7)
    # One more IMU sample: the samples below are stamped at the new filter time (applied at
    # once), which no earlier sample has.
    assert filter_.process_imu(filter_.time + 0.01, data.gyro[-1], data.accel[-1])
    filter_.flush()
    filter_.drain_updates()
    before = filter_.counts()
    state, covariance = filter_.nominal(), filter_.covariance.copy()
    augmented = dict(filter_.augmented)
    t = filter_.time
    field = data.magnetometer_field[-1]
    rotated = np.array([-field[1], field[0], field[2]])  # 90 deg of yaw
    magnetometer, barometer = filter_.sources["magnetometer"], filter_.sources["barometer"]
    assert filter_.process(magnetometer.measurement(t, rotated, R_MAG))  # applied now
    assert filter_.process(barometer.measurement(
        t, height_m=data.barometer_height[-1] + 20.0, height_variance_m2=R_BARO))
    after = filter_.counts()
    for source in ("magnetometer", "barometer"):
        assert after[f"{source}_gated"] == before[f"{source}_gated"] + 1
        assert after[f"{source}_accepted"] == before[f"{source}_accepted"]
    assert after["magnetometer_disturbed"] == 0  # same strength and dip: gated, not disturbed
    updates = filter_.drain_updates()
    assert [(u.source, u.reason) for u in updates] == [("magnetometer", "gated"),
                                                       ("barometer", "gated")]
    for before_, after_ in zip(state, filter_.nominal(), strict=True):
        assert np.array_equal(before_, after_)
    assert np.array_equal(covariance, filter_.covariance)
    assert filter_.augmented == augmented
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

    def magnetometer(f: ErrorStateFilter, j: int) -> bool:
        return f.process(f.sources["magnetometer"].measurement(
            data.magnetometer_time[j], data.magnetometer_field[j], R_MAG))

    def barometer(f: ErrorStateFilter, j: int) -> bool:
        return f.process(f.sources["barometer"].measurement(
            data.barometer_time[j], height_m=data.barometer_height[j],
            height_variance_m2=R_BARO))

    feeds = {
        "gnss": lambda f, j: f.process_gnss(
            data.gnss_time[j], data.gnss_position[j], np.full(3, SENSORS.gnss_position_sigma**2),
            data.gnss_velocity[j], np.full(3, SENSORS.gnss_velocity_sigma**2)),
        "magnetometer": magnetometer,
        "barometer": barometer,
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
    for name in ("magnetometer", "barometer"):
        assert np.allclose(on_time.augmented[name], delayed.augmented[name], rtol=0.0,
                           atol=1e-12)
    counts, reference = delayed.counts(), on_time.counts()
    assert (counts["magnetometer_delayed"], counts["barometer_delayed"]) == (1, 1)
    for source in ("gnss_position", "gnss_velocity", "magnetometer", "barometer"):
        assert counts[f"{source}_accepted"] == reference[f"{source}_accepted"]
