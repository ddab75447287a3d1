"""Sensor models: IMU (Earth rate, mount, lever arm, noise and bias processes, faults) and
GNSS (geodesy, lever arm, white and Gauss-Markov errors, covariance, outages).

Statistical tests use fixed seeds; each tolerance is Z standard errors of the estimator
for the sample size used (Z = 5: a correct model fails with probability below 1e-6).
Standard errors for a Gauss-Markov sequence x_k = phi x_{k-1} + ... with n samples:
sample variance 2 sigma^4 (1 + phi^2) / (n (1 - phi^2)); lag-1 sample autocorrelation
(1 - phi^2) / n (Bartlett).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pymap3d
import pytest

from mav_geometry import quaternion as Q
from variational_sim.sensors.gnss import (
    GnssConfig,
    GnssModel,
    enu_to_geodetic,
    geodetic_to_enu,
)
from variational_sim.sensors.imu import (
    EARTH_RATE_RAD_S,
    ImuConfig,
    ImuModel,
    earth_rate_enu,
    normal_gravity_enu,
)

Z = 5.0
G = 9.80665
GRAVITY = np.array([0.0, 0.0, -G])
ZERO = np.zeros(3)
LATITUDE = 47.3977

QUIET_IMU = {
    "gyro_noise_density": 0.0, "accel_noise_density": 0.0, "gyro_bias_walk": 0.0,
    "accel_bias_walk": 0.0, "gyro_turn_on_sigma": 0.0, "accel_turn_on_sigma": 0.0,
    "gyro_bias_instability": 0.0, "accel_bias_instability": 0.0,
}
QUIET_GNSS = {
    "horizontal_sigma_m": 0.0, "vertical_sigma_m": 0.0, "correlated_horizontal_sigma_m": 0.0,
    "correlated_vertical_sigma_m": 0.0, "velocity_sigma_mps": 0.0,
}


def quiet_imu(seed: int = 0, earth_rate=ZERO, **overrides) -> ImuModel:
    """An IMU with every error off except ``overrides``."""
    return ImuModel(ImuConfig(**(QUIET_IMU | overrides)), np.random.default_rng(seed),
                    earth_rate)


def rotation(rotation_vector) -> np.ndarray:
    return Q.to_matrix(Q.from_rotation_vector(rotation_vector))


def at_rest(model: ImuModel, R=None):
    return model.sample(np.eye(3) if R is None else R, ZERO, ZERO, ZERO, GRAVITY)


def variance_tolerance(phi: float, n: int) -> float:
    """Z standard errors of a sample variance (relative to sigma^2) of a Gauss-Markov series."""
    return Z * math.sqrt(2.0 * (1.0 + phi**2) / (n * (1.0 - phi**2)))


def lag_one_autocorrelation(x: np.ndarray) -> float:
    """Pooled lag-1 autocorrelation of zero-mean series in the columns of ``x``."""
    return float(np.sum(x[1:] * x[:-1]) / np.sum(x[:-1] ** 2))


# --- IMU: deterministic geometry -------------------------------------------------------


def test_earth_rate_enu_points_along_the_polar_axis():
    np.testing.assert_allclose(earth_rate_enu(0.0), [0.0, EARTH_RATE_RAD_S, 0.0], atol=1e-20)
    np.testing.assert_allclose(earth_rate_enu(90.0), [0.0, 0.0, EARTH_RATE_RAD_S], atol=1e-20)
    np.testing.assert_allclose(earth_rate_enu(-30.0), EARTH_RATE_RAD_S
                               * np.array([0.0, math.sqrt(3) / 2, -0.5]), rtol=1e-15)
    assert np.linalg.norm(earth_rate_enu(LATITUDE)) == pytest.approx(7.292115e-5, rel=1e-15)
    with pytest.raises(ValueError, match="latitude_deg"):
        earth_rate_enu(91.0)


def test_normal_gravity_matches_published_wgs84_values():
    # WGS-84 (NIMA TR8350.2): gamma_e and gamma_p at the ellipsoid; free-air gradient
    # about 3.086e-6 1/s^2 at mid-latitudes.
    np.testing.assert_allclose(normal_gravity_enu(0.0, 0.0), [0.0, 0.0, -9.7803253359],
                               rtol=1e-12)
    np.testing.assert_allclose(normal_gravity_enu(-90.0, 0.0), [0.0, 0.0, -9.8321849378],
                               rtol=1e-10)
    gradient = (normal_gravity_enu(45.0, 1000.0) - normal_gravity_enu(45.0, 0.0))[2] / 1000.0
    assert gradient == pytest.approx(3.086e-6, rel=1e-3)
    with pytest.raises(ValueError, match="height_m"):
        normal_gravity_enu(0.0, math.nan)


def test_level_at_rest_reads_plus_g_and_the_earth_rate():
    w_ie = earth_rate_enu(LATITUDE)
    reading = at_rest(quiet_imu(earth_rate=w_ie))
    np.testing.assert_array_equal(reading.accel, [0.0, 0.0, G])
    np.testing.assert_array_equal(reading.gyro, w_ie)
    assert not reading.saturated


def test_tilted_at_rest_reads_gravity_and_earth_rate_in_body_axes():
    w_ie = earth_rate_enu(LATITUDE)
    R = rotation([0.3, -0.2, 1.1])
    reading = at_rest(quiet_imu(earth_rate=w_ie), R)
    np.testing.assert_allclose(reading.accel, R.T @ [0.0, 0.0, G], atol=1e-14)
    np.testing.assert_allclose(reading.gyro, R.T @ w_ie, atol=1e-20)


def test_moving_body_reads_specific_force_and_coriolis_when_velocity_given():
    w_ie = earth_rate_enu(LATITUDE)
    R = rotation([0.1, 0.2, -0.4])
    omega = np.array([0.3, -0.1, 0.2])
    accel_enu = np.array([1.0, -2.0, 0.5])
    velocity = np.array([12.0, -3.0, 1.0])
    model = quiet_imu(earth_rate=w_ie)
    reading = model.sample(R, omega, ZERO, accel_enu, GRAVITY)
    np.testing.assert_allclose(reading.accel, R.T @ (accel_enu - GRAVITY), atol=1e-13)
    np.testing.assert_allclose(reading.gyro, omega + R.T @ w_ie, atol=1e-15)
    with_coriolis = model.sample(R, omega, ZERO, accel_enu, GRAVITY, velocity_enu=velocity)
    np.testing.assert_allclose(with_coriolis.accel - reading.accel,
                               R.T @ (2.0 * np.cross(w_ie, velocity)), atol=1e-13)


def test_mount_rotation_rotates_readings_into_imu_link():
    # imu_link yawed +90 deg in base_link: its x axis is base_link's y axis.
    quarter_turn = tuple(Q.from_rotation_vector([0.0, 0.0, math.pi / 2]).tolist())
    model = quiet_imu(mount_rotation_xyzw=quarter_turn)
    reading = model.sample(np.eye(3), np.array([1.0, 0.0, 0.0]), ZERO,
                           np.array([0.0, 2.0, 0.0]), GRAVITY)
    np.testing.assert_allclose(reading.gyro, [0.0, -1.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(reading.accel, [2.0, 0.0, G], atol=1e-15)

    mount = Q.from_rotation_vector([0.7, -0.3, 0.5])
    R, omega, accel = rotation([0.2, 0.1, 0.3]), np.array([0.4, 0.5, -0.6]), np.ones(3)
    base = quiet_imu().sample(R, omega, ZERO, accel, GRAVITY)
    mounted = quiet_imu(mount_rotation_xyzw=tuple(mount.tolist())).sample(
        R, omega, ZERO, accel, GRAVITY)
    np.testing.assert_allclose(mounted.gyro, Q.to_matrix(mount).T @ base.gyro, atol=1e-14)
    np.testing.assert_allclose(mounted.accel, Q.to_matrix(mount).T @ base.accel, atol=1e-14)


def test_lever_arm_adds_centripetal_and_tangential_acceleration():
    lever = np.array([0.2, -0.1, 0.05])
    spin = 3.0  # rad/s about z
    model = quiet_imu(mount_position_m=tuple(lever))
    no_gravity = ZERO
    reading = model.sample(np.eye(3), np.array([0.0, 0.0, spin]), ZERO, ZERO, no_gravity)
    np.testing.assert_allclose(reading.accel, [-spin**2 * lever[0], -spin**2 * lever[1], 0.0],
                               atol=1e-15)
    alpha = 2.0  # rad/s^2 about z, from rest
    reading = model.sample(np.eye(3), ZERO, np.array([0.0, 0.0, alpha]), ZERO, no_gravity)
    np.testing.assert_allclose(reading.accel, [-alpha * lever[1], alpha * lever[0], 0.0],
                               atol=1e-15)


# --- IMU: noise and bias statistics ----------------------------------------------------


def test_white_noise_sigma_is_density_times_sqrt_rate():
    config = ImuConfig(**(QUIET_IMU | {"gyro_noise_density": 1e-3,
                                       "accel_noise_density": 2e-2}))
    model = ImuModel(config, np.random.default_rng(1))
    n = 20000
    samples = [at_rest(model) for _ in range(n)]
    gyro = np.array([s.gyro for s in samples])
    accel = np.array([s.accel for s in samples]) - [0.0, 0.0, G]
    tolerance = variance_tolerance(0.0, 3 * n) / 2.0  # relative error of a sigma
    for errors, density in ((gyro, 1e-3), (accel, 2e-2)):
        sigma = density * math.sqrt(config.rate_hz)
        assert np.std(errors) == pytest.approx(sigma, rel=tolerance)
        np.testing.assert_allclose(np.mean(errors, axis=0), 0.0, atol=Z * sigma / math.sqrt(n))


def test_turn_on_bias_spread_over_power_cycles():
    model = quiet_imu(seed=2, gyro_turn_on_sigma=2e-3, accel_turn_on_sigma=0.03)
    n = 3000
    gyro, accel = [], []
    for _ in range(n):
        model.reset()
        gyro.append(model.gyro_bias)
        accel.append(model.accel_bias)
    tolerance = variance_tolerance(0.0, 3 * n) / 2.0
    assert np.std(gyro) == pytest.approx(2e-3, rel=tolerance)
    assert np.std(accel) == pytest.approx(0.03, rel=tolerance)
    reading = at_rest(model)  # the estimator's sign: truth = reading + bias
    np.testing.assert_allclose(reading.gyro, -model.gyro_bias, atol=1e-18)
    np.testing.assert_allclose(reading.accel, [0.0, 0.0, G] - model.accel_bias, atol=1e-15)


def test_random_walk_variance_grows_linearly_in_time():
    walk = 0.01  # units/sqrt(s); 1 Hz so each sample is one second
    models = [quiet_imu(seed=100 + i, rate_hz=1.0, gyro_bias_walk=walk, accel_bias_walk=2 * walk)
              for i in range(400)]
    checkpoints = {25: [], 50: [], 100: []}
    for step in range(1, 101):
        for model in models:
            at_rest(model)
        if step in checkpoints:
            checkpoints[step] = [(m.gyro_bias, m.accel_bias) for m in models]
    tolerance = variance_tolerance(0.0, 3 * len(models))
    for seconds, biases in checkpoints.items():
        gyro = np.array([g for g, _ in biases])
        accel = np.array([a for _, a in biases])
        assert np.mean(gyro**2) == pytest.approx(walk**2 * seconds, rel=tolerance)
        assert np.mean(accel**2) == pytest.approx((2 * walk) ** 2 * seconds, rel=tolerance)


def test_bias_instability_is_a_stationary_gauss_markov_process():
    tau, rate, n = 1.0, 10.0, 40000  # lag tau = 10 samples; exact discretisation
    model = quiet_imu(seed=3, rate_hz=rate, bias_correlation_time_s=tau,
                      gyro_bias_instability=5e-4, accel_bias_instability=5e-3)
    gyro, accel = np.empty((n, 3)), np.empty((n, 3))
    for k in range(n):
        at_rest(model)
        gyro[k], accel[k] = model.gyro_bias, model.accel_bias
    phi = math.exp(-1.0 / (tau * rate))
    for series, sigma in ((gyro, 5e-4), (accel, 5e-3)):
        assert np.mean(series**2) == pytest.approx(sigma**2,
                                                   rel=variance_tolerance(phi, 3 * n))
        lag = round(tau * rate)
        rho = np.sum(series[lag:] * series[:-lag]) / np.sum(series[:-lag] ** 2)
        # Bartlett variance of the lag-k autocorrelation of an AR(1) series.
        bartlett = ((1 + phi**2) * (1 - phi ** (2 * lag)) / (1 - phi**2)
                    - 2 * lag * phi ** (2 * lag)) / (3 * n)
        assert rho == pytest.approx(math.exp(-1.0), abs=Z * math.sqrt(bartlett))


# --- IMU: faults, saturation, reproducibility ------------------------------------------


def test_saturation_clips_and_flags():
    config = ImuConfig(**QUIET_IMU)
    model = ImuModel(config, np.random.default_rng(0))
    reading = model.sample(np.eye(3), np.array([50.0, -40.0, 1.0]), ZERO, ZERO, GRAVITY)
    np.testing.assert_array_equal(reading.gyro, [config.gyro_range, -config.gyro_range, 1.0])
    assert reading.saturated
    reading = model.sample(np.eye(3), ZERO, ZERO, np.array([0.0, 0.0, 200.0]), GRAVITY)
    np.testing.assert_array_equal(reading.accel, [0.0, 0.0, config.accel_range])
    assert reading.saturated
    assert not at_rest(model).saturated


def test_spike_appears_in_exactly_one_sample():
    model = quiet_imu()
    before = at_rest(model)
    model.inject_spike([0.1, 0.0, -0.2], [1.0, 2.0, 3.0])
    model.inject_spike([0.1, 0.0, 0.0], [0.0, 0.0, 0.0])  # spikes before one sample add up
    spiked = at_rest(model)
    after = at_rest(model)
    np.testing.assert_allclose(spiked.gyro - before.gyro, [0.2, 0.0, -0.2], atol=1e-15)
    np.testing.assert_allclose(spiked.accel - before.accel, [1.0, 2.0, 3.0], atol=1e-15)
    np.testing.assert_array_equal(after.gyro, before.gyro)
    np.testing.assert_array_equal(after.accel, before.accel)
    model.inject_spike([100.0, 0.0, 0.0], ZERO)
    assert at_rest(model).saturated
    with pytest.raises(ValueError, match="gyro"):
        model.inject_spike([math.nan, 0.0, 0.0], ZERO)


def test_same_seed_reproduces_samples_and_biases():
    def run(seed: int) -> np.ndarray:
        model = ImuModel(ImuConfig(), np.random.default_rng(seed), earth_rate_enu(LATITUDE))
        R = rotation([0.1, 0.2, 0.3])
        rows = [np.concatenate([s.gyro, s.accel]) for s in
                (model.sample(R, ZERO, ZERO, ZERO, GRAVITY) for _ in range(1500))]
        model.reset()
        rows.append(np.concatenate([model.gyro_bias, model.accel_bias]))
        return np.array(rows)

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.allclose(run(7), run(8))


def test_reset_draws_a_new_power_on_state():
    model = quiet_imu(seed=4, gyro_turn_on_sigma=1e-3, accel_bias_walk=1.0)
    for _ in range(10):
        at_rest(model)
    gyro_before = model.gyro_bias
    model.reset()
    assert not np.allclose(model.gyro_bias, gyro_before)
    np.testing.assert_array_equal(model.accel_bias, ZERO)  # the random walk restarts at 0


@pytest.mark.parametrize(("field", "value"), [
    ("rate_hz", 0.0), ("rate_hz", math.inf), ("gyro_noise_density", -1e-3),
    ("accel_bias_walk", math.nan), ("bias_correlation_time_s", -5.0), ("gyro_range", 0.0),
    ("accel_turn_on_sigma", -0.1), ("mount_rotation_xyzw", (0.0, 0.0, 0.0, 2.0)),
    ("mount_rotation_xyzw", (0.0, 0.0, 1.0)), ("mount_position_m", (0.0, math.nan, 0.0)),
])
def test_imu_config_errors_name_the_field_and_value(field, value):
    message = rf"ImuConfig\.{field} = {re.escape(repr(value))} is invalid"
    with pytest.raises(ValueError, match=message) as error:
        ImuConfig(**{field: value})
    assert "allowed" in str(error.value)


# --- GNSS --------------------------------------------------------------------------------


def quiet_gnss(seed: int = 0, **overrides) -> GnssModel:
    return GnssModel(GnssConfig(**(QUIET_GNSS | overrides)), np.random.default_rng(seed))


def measure_at_origin(model: GnssModel, time_s: float):
    return model.measure_at(time_s, np.eye(3), ZERO, ZERO, ZERO)


def test_enu_geodetic_round_trip_matches_pymap3d():
    datum = (LATITUDE, 8.5456, 488.0)
    rng = np.random.default_rng(5)
    for point in rng.uniform(-20000.0, 20000.0, (20, 3)) * [1.0, 1.0, 0.05]:
        geodetic = enu_to_geodetic(point, datum)
        np.testing.assert_allclose(geodetic, pymap3d.enu2geodetic(*point, *datum),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(geodetic_to_enu(*geodetic, datum), point, atol=1e-6)


def test_noise_free_fix_is_the_antenna_with_lever_arm_and_rotation():
    antenna = (1.0, 0.0, 0.2)
    model = quiet_gnss(antenna_position_m=antenna)
    R = rotation([0.0, 0.0, math.pi / 2])  # yawed 90 deg: body x points north
    position, velocity = np.array([10.0, -5.0, 30.0]), np.array([1.0, 2.0, 0.0])
    fix = model.measure_at(0.0, R, position, velocity, np.array([0.0, 0.0, 0.5]))
    assert fix.fix
    np.testing.assert_allclose(fix.position_enu, position + np.array([0.0, 1.0, 0.2]), atol=1e-12)
    # w x r = (0, 0.5, 0) in base_link, i.e. west in ENU.
    np.testing.assert_allclose(fix.velocity_enu, velocity + np.array([-0.5, 0.0, 0.0]), atol=1e-12)
    np.testing.assert_allclose(
        (fix.latitude_deg, fix.longitude_deg, fix.height_m),
        pymap3d.enu2geodetic(*fix.position_enu, *model.config.datum), atol=1e-12)


def test_white_position_and_velocity_sigmas():
    model = quiet_gnss(seed=6, horizontal_sigma_m=0.5, vertical_sigma_m=1.0,
                       velocity_sigma_mps=0.05)
    n = 4000
    fixes = [measure_at_origin(model, 0.1 * k) for k in range(n)]
    position = np.array([f.position_enu for f in fixes])
    velocity = np.array([f.velocity_enu for f in fixes])
    tolerance = variance_tolerance(0.0, n) / 2.0  # one axis; relative error of a sigma
    np.testing.assert_allclose(np.std(position, axis=0), [0.5, 0.5, 1.0], rtol=tolerance)
    np.testing.assert_allclose(np.std(velocity, axis=0), 0.05, rtol=tolerance)


def test_correlated_error_is_gauss_markov_over_irregular_intervals():
    tau = 2.0
    model = quiet_gnss(seed=7, correlated_horizontal_sigma_m=0.1,
                       correlated_vertical_sigma_m=0.2, correlation_time_s=tau)
    # Steps alternate tau/4 and 3 tau/4: every other fix is exactly one tau apart, and
    # the exact discretisation must make that subsequence an AR(1) with phi = e^-1.
    times = np.cumsum(np.tile([0.25 * tau, 0.75 * tau], 4000))
    errors = np.array([measure_at_origin(model, t).position_enu for t in times])
    np.testing.assert_array_equal(errors[-1], model.correlated_error_enu)
    errors = errors[1::2]
    phi, n = math.exp(-1.0), len(errors)
    variance = np.mean(errors**2, axis=0)
    np.testing.assert_allclose(variance, [0.01, 0.01, 0.04], rtol=variance_tolerance(phi, n))
    rho = lag_one_autocorrelation(errors / [0.1, 0.1, 0.2])
    assert rho == pytest.approx(phi, abs=Z * math.sqrt((1 - phi**2) / (3 * n)))


def test_reported_covariance_matches_the_error_statistics():
    config = GnssConfig(correlation_time_s=1.0)
    model = GnssModel(config, np.random.default_rng(8))
    n = 3000
    # 5 tau apart: the correlated part is nearly independent from fix to fix (phi = e^-5).
    fixes = [measure_at_origin(model, 5.0 * k) for k in range(n)]
    P = fixes[0].position_covariance_enu
    expected = np.diag([0.5**2 + 0.1**2, 0.5**2 + 0.1**2, 1.0**2 + 0.2**2])
    np.testing.assert_allclose(P, expected, rtol=1e-15)
    np.testing.assert_allclose(fixes[0].velocity_covariance_enu, 0.05**2 * np.eye(3),
                               rtol=1e-15)
    position = np.array([f.position_enu for f in fixes])
    velocity = np.array([f.velocity_enu for f in fixes])
    # Normalised squared errors are chi-square with 3 dof: mean 3, variance 6.
    for errors, covariance in ((position, P), (velocity, fixes[0].velocity_covariance_enu)):
        nees = np.einsum("ni,ij,nj->n", errors, np.linalg.inv(covariance), errors)
        assert np.mean(nees) == pytest.approx(3.0, abs=Z * math.sqrt(6.0 / n))


def test_outages_flag_no_fix_then_recover():
    model = quiet_gnss(outages=((1.0, 2.0),), horizontal_sigma_m=0.5)
    assert not model.in_outage(0.9)
    assert model.in_outage(1.0)
    assert not model.in_outage(2.0)  # end is exclusive
    flags = [measure_at_origin(model, 0.1 * k).fix for k in range(30)]
    assert flags == [not 10 <= k < 20 for k in range(30)]

    lost = measure_at_origin(model, 3.0)
    assert lost.fix
    model.inject_outage(3.5, 0.5)
    lost = measure_at_origin(model, 3.7)
    assert not lost.fix
    assert np.isnan(lost.position_enu).all()
    assert math.isnan(lost.latitude_deg)
    np.testing.assert_array_equal(lost.position_covariance_enu, np.zeros((3, 3)))
    recovered = measure_at_origin(model, 4.0)
    assert recovered.fix
    assert np.isfinite(recovered.position_enu).all()

    model.inject_outage(10.0, 1.0)
    model.reset()  # injected outages go, scheduled ones stay
    assert not model.in_outage(10.5)
    assert model.in_outage(1.5)


def test_gnss_rejects_time_going_back_and_reproduces_with_a_seed():
    model = quiet_gnss()
    measure_at_origin(model, 1.0)
    with pytest.raises(ValueError, match="before the previous"):
        measure_at_origin(model, 0.5)

    def run(seed: int) -> np.ndarray:
        model = GnssModel(GnssConfig(), np.random.default_rng(seed))
        return np.array([measure_at_origin(model, 0.1 * k).position_enu for k in range(50)])

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.allclose(run(3), run(4))


@pytest.mark.parametrize(("field", "value"), [
    ("rate_hz", -10.0), ("latency_s", -0.01), ("horizontal_sigma_m", math.nan),
    ("correlation_time_s", 0.0), ("antenna_position_m", (0.0, 0.0)),
    ("datum", (95.0, 8.0, 400.0)), ("outages", ((2.0, 1.0),)),
    ("outages", ((5.0, 6.0), (1.0, 2.0))), ("publish_during_outage", "no"),
])
def test_gnss_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=rf"GnssConfig\.{field}") as error:
        GnssConfig(**{field: value})
    assert "allowed" in str(error.value)
