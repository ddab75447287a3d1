"""Changing a sensor model's error law while it runs (the simulator node's dynamic
parameters): the new law holds from the next sample, the state and the noise stream go on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from variational_sim.sensors.gnss import GnssConfig, GnssModel
from variational_sim.sensors.imu import ImuConfig, ImuModel

QUIET_IMU = ImuConfig(gyro_noise_density=0.0, accel_noise_density=0.02, gyro_bias_walk=0.0,
                      accel_bias_walk=0.0, gyro_turn_on_sigma=0.0, accel_turn_on_sigma=0.0,
                      gyro_bias_instability=0.0, accel_bias_instability=0.0)
AT_REST = (np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3), np.array([0.0, 0.0, -9.8]))


def _imu(config: ImuConfig) -> ImuModel:
    return ImuModel(config, np.random.default_rng(3))


def test_imu_white_noise_follows_the_new_density_from_the_next_sample() -> None:
    steady, changed = _imu(QUIET_IMU), _imu(QUIET_IMU)
    for _ in range(5):
        assert np.array_equal(steady.sample(*AT_REST).accel, changed.sample(*AT_REST).accel)
    changed.set_error_model(replace(QUIET_IMU, accel_noise_density=0.06, accel_range=50.0))
    assert changed.config.accel_noise_density == 0.06
    for _ in range(5):
        a, b = steady.sample(*AT_REST).accel, changed.sample(*AT_REST).accel
        truth = np.array([0.0, 0.0, 9.8])
        assert np.allclose(b - truth, 3.0 * (a - truth), rtol=1e-12, atol=1e-15)


def test_imu_keeps_its_bias_and_noise_stream_across_an_unchanged_law() -> None:
    config = ImuConfig()
    steady, reconfigured = _imu(config), _imu(config)
    for _ in range(20):
        steady.sample(*AT_REST)
        reconfigured.sample(*AT_REST)
    reconfigured.set_error_model(replace(config))
    assert np.array_equal(steady.gyro_bias, reconfigured.gyro_bias)
    for _ in range(20):
        assert np.array_equal(steady.sample(*AT_REST).gyro, reconfigured.sample(*AT_REST).gyro)


def test_imu_rate_and_mount_cannot_change() -> None:
    model = _imu(QUIET_IMU)
    with pytest.raises(ValueError, match=r"\['rate_hz', 'mount_position_m'\] cannot change"):
        model.set_error_model(replace(QUIET_IMU, rate_hz=100.0, mount_position_m=(0.1, 0, 0)))
    assert model.config == QUIET_IMU


def _fix(model: GnssModel, time_s: float) -> np.ndarray:
    return model.measure_at(time_s, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)).position_enu


def test_gnss_sigmas_and_outages_follow_the_new_law() -> None:
    white = GnssConfig(correlated_horizontal_sigma_m=0.0, correlated_vertical_sigma_m=0.0)
    steady = GnssModel(white, np.random.default_rng(5))
    changed = GnssModel(white, np.random.default_rng(5))
    assert np.array_equal(_fix(steady, 0.1), _fix(changed, 0.1))
    changed.set_error_model(replace(white, horizontal_sigma_m=1.0, vertical_sigma_m=2.0,
                                    outages=((0.5, 0.6),)))
    a, b = _fix(steady, 0.2), _fix(changed, 0.2)
    assert np.allclose(b, 2.0 * a, rtol=1e-12)
    fix = changed.measure_at(0.55, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
    assert not fix.fix
    assert np.allclose(np.diag(changed.measure_at(0.7, np.eye(3), np.zeros(3), np.zeros(3),
                                               np.zeros(3)).position_covariance_enu),
                       [1.0, 1.0, 4.0])
    with pytest.raises(ValueError, match=r"\['datum'\] cannot change"):
        changed.set_error_model(replace(white, datum=(0.0, 0.0, 0.0)))
