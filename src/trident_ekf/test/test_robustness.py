"""Input checks, time handling, gating, status and initialization."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, FilterStatus, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic, enu_to_ecef_rotation
from trident_ekf.core.initialization import Initializer, MotionAttitude, euler_enu
from trident_ekf.core.simulation import SensorModel, Trajectory, run, simulate

FILTERS = [TridentEKF, BaselineESKF]
DATA = simulate(Trajectory(), SensorModel(), 20.0, imu_rate=100.0,
                rng=np.random.default_rng(3))
R_P, R_V = np.full(3, 1.5**2), np.full(3, 0.1**2)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)


def _started(cls, **config):
    filter_ = cls(FilterConfig(**config))
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    return filter_


def _feed(filter_, until: float, gnss: bool = True, offset=(0.0, 0.0, 0.0)) -> None:
    j = 0
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        if t <= filter_.time:
            continue
        if t > until:
            break
        while gnss and j < DATA.gnss_time.size and DATA.gnss_time[j] <= t:
            if DATA.gnss_time[j] > filter_.time:
                filter_.process_gnss(DATA.gnss_time[j], DATA.gnss_position[j] + offset, R_P,
                                     DATA.gnss_velocity[j], R_V)
            j += 1
        filter_.process_imu(t, DATA.gyro[k], DATA.accel[k])


@pytest.mark.parametrize("cls", FILTERS)
def test_bad_imu_samples_are_rejected_and_counted(cls):
    filter_ = _started(cls)
    _feed(filter_, 1.0)
    state = copy.deepcopy(filter_.nominal())
    t = filter_.time
    assert not filter_.process_imu(t + 0.01, [math.nan, 0, 0], [0, 0, 9.8])
    assert not filter_.process_imu(t, DATA.gyro[1], DATA.accel[1])  # duplicate stamp
    assert not filter_.process_imu(t - 0.5, DATA.gyro[1], DATA.accel[1])  # out of order
    counts = filter_.imu_counts
    assert (counts["nonfinite"], counts["duplicate"], counts["out_of_order"]) == (1, 1, 1)
    assert all(np.array_equal(a, b) for a, b in zip(state, filter_.nominal(), strict=True))
    accepted = counts["accepted"]
    assert filter_.process_imu(t + 1.0, DATA.gyro[1], DATA.accel[1])  # 1 s gap: bridged
    assert counts["gap"] == 1
    assert counts["accepted"] == accepted + 1  # a gap sample is accepted (and counted)
    flat = filter_.counts()
    assert (flat["imu_nonfinite"], flat["imu_duplicate"], flat["imu_out_of_order"],
            flat["imu_gap"]) == (1, 1, 1, 1)
    assert filter_.time == t + 1.0


GAP = (8.0, 10.2)  # s: a 2.2 s IMU dropout in flight, as the logger of data/px4_real has


def _with_imu_gap() -> object:
    keep = (DATA.imu_time <= GAP[0]) | (DATA.imu_time > GAP[1])
    return dataclasses.replace(
        DATA, imu_time=DATA.imu_time[keep], gyro=DATA.gyro[keep], accel=DATA.accel[keep],
        truth={key: value[keep] for key, value in DATA.truth.items()},
        gyro_bias=DATA.gyro_bias[keep], accel_bias=DATA.accel_bias[keep])


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("gnss_in_gap", [False, True])
def test_an_imu_gap_is_bridged_and_its_drift_stays_inside_three_sigma(cls, gnss_in_gap):
    filter_ = _started(cls)
    result = run(filter_, _with_imu_gap(), record_every=1,
                 skip_gnss=None if gnss_in_gap else GAP)
    assert filter_.imu_counts["gap"] == 1
    # Every fix is used, those inside the gap at their stamps: nothing gated, no reset.
    fixes = DATA.gnss_time[DATA.gnss_time > 0.0]
    if not gnss_in_gap:
        fixes = fixes[(fixes < GAP[0]) | (fixes >= GAP[1])]
    counts = filter_.aid_status["gnss_position"].counts
    assert (counts["accepted"], counts["gated"], counts["late"], counts["resets"]) == (
        fixes.size, 0, 0, 0)
    sigma = np.sqrt(np.diagonal(result["position_covariance"], axis1=1, axis2=2))
    assert np.all(np.abs(result["position_error"]) <= 3.0 * sigma)
    time = result["time"]
    before = sigma[time <= GAP[0]][-1].max()
    if not gnss_in_gap:
        assert sigma[time > GAP[1]][0].max() > 3.0 * before  # grown over the gap
    assert sigma[time > 15.0][0].max() < 2.0 * before  # and back after a few fixes


@pytest.mark.parametrize("cls", FILTERS)
def test_a_gap_longer_than_max_bridged_gap_is_skipped(cls):
    filter_ = _started(cls, max_bridged_gap=1.0)
    run(filter_, _with_imu_gap(), record_every=1)
    assert filter_.imu_counts["gap"] == 1
    counts = filter_.aid_status["gnss_position"].counts
    assert counts["late"] > 0  # the fixes inside the skipped gap are dropped
    assert counts["gated"] > 0  # the held state is off after it


@pytest.mark.parametrize("cls", FILTERS)
def test_bad_gnss_fixes_are_rejected_and_counted(cls):
    filter_ = _started(cls)
    _feed(filter_, 2.0)
    t = filter_.time
    p, v = DATA.gnss_position[0], DATA.gnss_velocity[0]
    assert not filter_.process_gnss(t - 5.0, p, R_P, v, R_V)  # older than the history
    assert filter_.process_gnss(t + 0.05, p, R_P, v, R_V)  # queued
    assert not filter_.process_gnss(t + 0.05, p, R_P, v, R_V)  # duplicate stamp
    assert not filter_.process_gnss(t + 0.1, [math.nan, 0, 0], R_P)
    assert not filter_.process_gnss(t + 0.1, p, [-1.0, 1.0, 1.0])  # negative variance
    # An epoch is a velocity and a position measurement, each counted by its source.
    position = filter_.aid_status["gnss_position"].counts
    velocity = filter_.aid_status["gnss_velocity"].counts
    assert (position["late"], position["duplicate"], position["nonfinite"]) == (1, 1, 2)
    assert (velocity["late"], velocity["duplicate"], velocity["nonfinite"]) == (1, 1, 0)
    flat = filter_.counts()
    assert (flat["gnss_position_late"], flat["gnss_position_duplicate"],
            flat["gnss_position_nonfinite"]) == (1, 1, 2)
    assert filter_.aid_status["gnss_position"].rejected == 4
    with pytest.raises(ValueError, match="position must have 3 elements"):
        filter_.process_gnss(t + 0.2, [1.0, 2.0], R_P)
    with pytest.raises(ValueError, match="velocity_covariance is required"):
        filter_.process_gnss(t + 0.2, p, R_P, v)


@pytest.mark.parametrize("cls", FILTERS)
def test_outlier_is_gated_and_persistent_jump_declares_divergence(cls):
    # Without the consistency tests (test_divergence.py: with them this jump is spoofing).
    filter_ = _started(cls, max_consecutive_rejections=5, reset_on_divergence=False,
                       consistency_probability=0.0)
    _feed(filter_, 10.0)
    filter_.drain_updates()
    position = filter_.nominal()[2]
    _feed(filter_, 10.21, offset=np.array([100.0, 0.0, 0.0]))  # one 100 m outlier
    updates = filter_.drain_updates()
    # The epoch's velocity is fine and fused; its position is gated.
    assert [(u.source, u.accepted) for u in updates] == [("gnss_velocity", True),
                                                         ("gnss_position", False)]
    assert updates[1].nis > 1000.0
    assert updates[1].reason == "gated"
    assert filter_.aid_status["gnss_position"].counts["gated"] == 1
    assert filter_.aid_status["gnss_velocity"].counts["gated"] == 0
    assert np.linalg.norm(filter_.nominal()[2] - position) < 5.0  # pure-INS motion only
    assert filter_.status is FilterStatus.NOMINAL
    _feed(filter_, 12.0, offset=np.array([100.0, 0.0, 0.0]))  # spoofing-like jump persists
    assert filter_.status is FilterStatus.DIVERGED


@pytest.mark.parametrize("cls", FILTERS)
def test_persistent_jump_resets_to_gnss_when_reset_is_enabled(cls):
    # Without the consistency tests the reset takes any fix, even a jump the GNSS velocity
    # and the IMU contradict (test_divergence.py: with them it never does).
    filter_ = _started(cls, max_consecutive_rejections=5, consistency_probability=0.0)
    _feed(filter_, 10.0)
    jump = np.array([100.0, 0.0, 0.0])
    _feed(filter_, 11.01, offset=jump)  # five rejected fixes, then the reset
    assert filter_.aid_status["gnss_position"].counts["resets"] == 1
    assert filter_.aid_status["gnss_position"].counts["gated"] == 5
    assert filter_.status is FilterStatus.DIVERGED
    k = int(np.searchsorted(DATA.imu_time, filter_.time))
    assert np.linalg.norm(filter_.nominal()[2] - (DATA.truth["p"][k] + jump)) < 10.0
    _feed(filter_, 13.0, offset=jump)  # the new track is consistent: accepted again
    assert filter_.status is FilterStatus.NOMINAL
    assert filter_.counts()["gnss_position_resets"] == 1


@pytest.mark.parametrize("cls", FILTERS)
def test_outage_status_and_covariance_divergence(cls):
    filter_ = _started(cls, outage_timeout=1.0, divergence_position_sigma=3.0)
    _feed(filter_, 5.0)
    assert filter_.status is FilterStatus.NOMINAL
    _feed(filter_, 6.5, gnss=False)
    assert filter_.status is FilterStatus.OUTAGE
    _feed(filter_, 20.0, gnss=False)
    assert filter_.status is FilterStatus.DIVERGED  # position sigma passed 3 m


@pytest.mark.parametrize("cls", FILTERS)
def test_fix_between_imu_samples_is_applied_at_its_own_stamp(cls):
    """Queued fix inside an interval == splitting that interval at the fix stamp by hand."""
    queued = _started(cls, covariance_decimation=1)
    _feed(queued, 3.0)
    queued.drain_updates()
    split = copy.deepcopy(queued)
    t0 = queued.time
    k = int(np.searchsorted(DATA.imu_time, t0)) + 1
    t_fix = 0.5 * (DATA.imu_time[k - 1] + DATA.imu_time[k])
    p, v = DATA.gnss_position[15], DATA.gnss_velocity[15]
    queued.process_gnss(t_fix, p, R_P, v, R_V)
    queued.process_imu(DATA.imu_time[k], DATA.gyro[k], DATA.accel[k])
    split.process_imu(t_fix, DATA.gyro[k], DATA.accel[k])
    split.process_gnss(t_fix, p, R_P, v, R_V)
    split.process_imu(DATA.imu_time[k], DATA.gyro[k], DATA.accel[k])
    assert [(u.source, u.time) for u in queued.drain_updates()] == [
        ("gnss_velocity", t_fix), ("gnss_position", t_fix)]
    for a, b in zip(queued.nominal(), split.nominal(), strict=True):
        assert np.allclose(a, b, rtol=0, atol=1e-9)
    assert np.allclose(queued.covariance, split.covariance, atol=1e-12)


@pytest.mark.parametrize("cls", FILTERS)
def test_delayed_fix_inside_the_history_equals_the_on_time_fix(cls):
    """A fix delivered 0.3 s late (after the next fix was applied) is applied at its own
    stamp by rewinding to a snapshot and re-running the stored IMU samples."""
    on_time, delayed = _started(cls), _started(cls)
    delayed_index = 7  # fix at 1.6 s; the fix at 1.8 s is applied before it arrives
    j = 0
    late = None
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        if t > 3.0:
            break
        while j < DATA.gnss_time.size and DATA.gnss_time[j] <= t:
            fix = (DATA.gnss_time[j], DATA.gnss_position[j], R_P, DATA.gnss_velocity[j], R_V)
            on_time.process_gnss(*fix)
            if j == delayed_index:
                late = fix
            else:
                delayed.process_gnss(*fix)
            j += 1
        on_time.process_imu(t, DATA.gyro[k], DATA.accel[k])
        delayed.process_imu(t, DATA.gyro[k], DATA.accel[k])
        if late is not None and t >= late[0] + 0.3:
            assert delayed.process_gnss(*late)
            late = None
    for a, b in zip(on_time.nominal(), delayed.nominal(), strict=True):
        assert np.allclose(a, b, rtol=0.0, atol=1e-9)
    assert np.allclose(on_time.covariance, delayed.covariance, rtol=1e-9, atol=1e-15)
    for source in ("gnss_position", "gnss_velocity"):  # the late epoch: one of each
        assert delayed.aid_status[source].counts["delayed"] == 1
        assert (delayed.aid_status[source].counts["accepted"]
                == on_time.aid_status[source].counts["accepted"])
    assert delayed.imu_counts["accepted"] == on_time.imu_counts["accepted"]


def test_invalid_configuration_and_initial_state_raise_value_errors():
    with pytest.raises(ValueError, match="gyro_noise"):
        FilterConfig(gyro_noise=-1.0)
    with pytest.raises(ValueError, match="covariance_decimation"):
        FilterConfig(covariance_decimation=0)
    with pytest.raises(ValueError, match="gate_probability"):
        FilterConfig(gate_probability=1.5)
    filter_ = TridentEKF()
    with pytest.raises(ValueError, match="velocity must be finite"):
        filter_.initialize(0.0, [0, 0, 0, 1], [math.nan, 0, 0], [6.4e6, 0, 0], SIGMAS)
    with pytest.raises(ValueError, match="positive definite"):
        filter_.initialize(0.0, [0, 0, 0, 1], [0, 0, 0], [6.4e6, 0, 0], np.zeros((15, 15)))
    assert filter_.status is FilterStatus.UNINITIALIZED
    assert not filter_.process_imu(0.1, [0, 0, 0], [0, 0, 9.8])


def _initialize_from(trajectory: Trajectory, yaw: float | None) -> tuple[np.ndarray, dict]:
    data = simulate(trajectory, SensorModel(), 5.0, rng=np.random.default_rng(4))
    initializer = Initializer(level_duration=1.0, yaw=yaw)
    j = 0
    for k in range(1, data.imu_time.size):
        initializer.add_imu(data.imu_time[k], data.gyro[k], data.accel[k])
        while j < data.gnss_time.size and data.gnss_time[j] <= data.imu_time[k]:
            if initializer.add_gnss(data.gnss_time[j], data.gnss_position[j],
                                    data.gnss_velocity[j]):
                result = initializer.result
                index = int(np.searchsorted(data.imu_time, result.time))
                truth = {key: value[index] for key, value in data.truth.items()}
                truth["gyro_bias"] = data.gyro_bias[index]
                error = quaternion.to_rotation_vector(
                    quaternion.multiply(quaternion.conjugate(result.attitude), truth["q"]))
                return error, {"result": result, "truth": truth}
            j += 1
        data_end = k
    raise AssertionError(f"no initial state after {data_end} samples")


def test_static_levelling_with_yaw_parameter():
    static = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0),
                        yaw0_rad=0.5)
    error, info = _initialize_from(static, yaw=0.5)
    # Tilt is off by the horizontal accelerometer bias over g (sigma 0.05 m/s^2 -> ~0.3 deg).
    # Tilt is off by the accelerometer bias (~0.6 deg); through the 64 deg inclination that
    # tilts the levelled field and turns the heading by up to tan(64 deg) = 2x as much.
    assert np.degrees(np.abs(error[:2])).max() < 1.0
    assert abs(math.degrees(error[2])) < 2.0 * math.tan(math.radians(64.0))
    result, truth = info["result"], info["truth"]
    assert np.linalg.norm(result.position - truth["p"]) < 10.0
    assert np.abs(result.gyro_bias - truth["gyro_bias"]).max() < 5e-3


def _offer_all(trajectory: Trajectory, initializer: Initializer, **offers) -> bool:
    """Feed 5 s of a simulated trajectory with ``offers`` at every fix; True if it starts."""
    data = simulate(trajectory, SensorModel(), 5.0, rng=np.random.default_rng(4))
    j = 0
    for k in range(1, data.imu_time.size):
        initializer.add_imu(data.imu_time[k], data.gyro[k], data.accel[k])
        while j < data.gnss_time.size and data.gnss_time[j] <= data.imu_time[k]:
            if initializer.add_gnss(data.gnss_time[j], data.gnss_position[j],
                                    data.gnss_velocity[j], **offers):
                return True
            j += 1
    return False


MOVING = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0),
                    velocity_enu=(6.0 * math.cos(0.5), 6.0 * math.sin(0.5), 0.0), yaw0_rad=0.5)


def test_a_moving_vehicle_without_a_yaw_source_waits():
    # Still IMU (constant velocity) but a GNSS speed of 6 m/s: not a static start.
    assert not _offer_all(MOVING, Initializer(level_duration=1.0))


def test_in_motion_start_takes_the_offered_attitude_and_never_seeds_the_gyro_bias():
    q_enu = euler_enu(0.02, -0.01, 0.5)
    initializer = Initializer(level_duration=1.0)
    offered = MotionAttitude(q_enu, math.radians(4.0))
    assert _offer_all(MOVING, initializer, motion=offered)
    result = initializer.result
    assert (result.alignment, result.yaw_source) == ("in_motion", "yaw_estimator")
    assert np.all(result.gyro_bias == 0.0)
    assert result.sigmas[2] == pytest.approx(math.radians(4.0))
    assert result.sigmas[0] == pytest.approx(math.radians(5.0))  # motion_tilt_sigma


def test_static_start_without_a_yaw_source_leaves_yaw_unknown():
    static = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0),
                        yaw0_rad=0.5)
    error, info = _initialize_from(static, yaw=None)
    result = info["result"]
    assert (result.alignment, result.yaw_source) == ("static", "unknown")
    assert result.sigmas[2] == pytest.approx(math.pi)
    assert np.degrees(np.abs(error[:2])).max() < 1.0  # levelled all the same


def test_static_start_takes_yaw_from_the_magnetometer():
    static = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0),
                        yaw0_rad=2.0)
    data = simulate(static, SensorModel(), 3.0, rng=np.random.default_rng(4))
    field_enu = np.array([1e-6, 2.1e-5, -4.3e-5])  # east, north, up (T): a mid-latitude field
    lat, lon, _ = ecef_to_geodetic(data.gnss_position[0])
    field_ecef = enu_to_ecef_rotation(lat, lon) @ field_enu
    initializer = Initializer(level_duration=1.0)
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        initializer.add_imu(t, data.gyro[k], data.accel[k])
        body = quaternion.to_matrix(data.truth["q"][k]).T @ field_ecef
        initializer.add_magnetometer(t, body)
        j = int(np.searchsorted(data.gnss_time, t))
        if j < data.gnss_time.size and data.gnss_time[j] == t and initializer.add_gnss(
                t, data.gnss_position[j], data.gnss_velocity[j], earth_field_ecef=field_ecef):
            break
    result = initializer.result
    assert result is not None
    assert result.yaw_source == "magnetometer"
    error = quaternion.to_rotation_vector(
        quaternion.multiply(quaternion.conjugate(result.attitude), data.truth["q"][k]))
    # Tilt is off by the accelerometer bias (~0.6 deg); through the 64 deg inclination that
    # tilts the levelled field and turns the heading by up to tan(64 deg) = 2x as much.
    assert np.degrees(np.abs(error[:2])).max() < 1.0
    assert abs(math.degrees(error[2])) < 2.0 * math.tan(math.radians(64.0))
