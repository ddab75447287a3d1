"""GNSS position bias states (FilterConfig.gnss_bias_sigma_*): off, the 15-state filter is
unchanged; on, F and H of the 18-state filters match finite differences, the R rule,
delayed fixes, and on a flight with a Gauss-Markov GNSS error the 15-state filter is
overconfident while the augmented filters are consistent."""

from __future__ import annotations

import copy
from concurrent.futures import Future, ProcessPoolExecutor
from functools import cache

import numpy as np
import pytest
from scipy.stats import chi2

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import enu_to_ecef_rotation, geodetic_to_ecef
from trident_ekf.core.filter import GNSS_BIAS, POS, STATE_DIM, ErrorStateFilter
from trident_ekf.core.measurements import Barometer, Magnetometer, MagnetometerConfig
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.measurements.gnss import GnssPosition, GnssVelocity
from trident_ekf.core.simulation import (
    SensorModel,
    SimulatedData,
    Trajectory,
    run,
    simulate,
    start_with_error,
)

FILTERS = [TridentEKF, BaselineESKF]
HORIZONTAL, VERTICAL = 0.2, 0.4  # m, correlated GNSS error (truth and filter)
STATIONARY_SIGMA = np.array([HORIZONTAL, HORIZONTAL, VERTICAL])
SENSORS = SensorModel(gnss_position_sigma=0.3, gnss_correlated_sigma_horizontal=HORIZONTAL,
                      gnss_correlated_sigma_vertical=VERTICAL)
BIAS_CONFIG = FilterConfig(gnss_bias_sigma_horizontal=HORIZONTAL,
                           gnss_bias_sigma_vertical=VERTICAL)
TRAJECTORY = Trajectory()
SIGMAS = np.array([0.03, 0.03, 0.1, *[0.3] * 3, *[2.0] * 3, *[SENSORS.gyro_bias_sigma] * 3,
                   *[SENSORS.accel_bias_sigma] * 3])
RUNS = 12
SETTLED = 10.0  # s: epochs after the initial 2 m position sigma has converged

# ----- linearization of the augmented filters ---------------------------------------------
GYRO = np.array([0.3, -0.2, 0.5])  # raw readings, rad/s
ACCEL = np.array([1.5, -0.8, 9.6])  # raw readings, m/s^2
DT = 0.01
TAU = 2.0  # s: short, so the bias block of F stands out against the navigation blocks


def _augmented_estimate(cls: type[ErrorStateFilter], aided: bool = False,
                        **config) -> ErrorStateFilter:
    """18 states (GNSS bias, estimate non-zero); ``aided``: then a magnetometer (3d) and a
    barometer with their own states (22)."""
    settings = dict(covariance_decimation=1, lever_arm=(0.3, -0.2, 0.5),
                    gnss_bias_sigma_horizontal=HORIZONTAL,
                    gnss_bias_sigma_vertical=VERTICAL, gnss_bias_correlation_time=TAU)
    field = SensorModel().magnetic_field_ned
    sources = ([Magnetometer(MagnetometerConfig(mode="3d", field_ned_T=field)), Barometer()]
               if aided else [])
    estimate = cls(FilterConfig(**{**settings, **config}), sources)
    q = quaternion.normalize(np.random.default_rng(7).normal(size=4))
    estimate.initialize(0.0, q, [12.0, -5.0, 3.0], geodetic_to_ecef(-34.6, -58.4, 40.0),
                        np.full(15, 0.1), gyro_bias=[0.01, -0.02, 0.005],
                        accel_bias=[0.05, 0.1, -0.08])
    estimate.augmented[GnssPosition.name] = (0.15, -0.1, 0.3)
    if aided:
        estimate.augmented["magnetometer"] = (2e-6, -1e-6, 3e-6)
        estimate.augmented["barometer"] = (14.0,)
    estimate.last_omega = tuple(GYRO + np.array(estimate.gyro_bias))
    return estimate


def _truth_with_error(estimate: ErrorStateFilter, error: np.ndarray) -> ErrorStateFilter:
    """A copy whose state is the estimate corrected by ``error`` (this filter's convention)."""
    truth = copy.deepcopy(estimate)
    truth._correct(error.tolist())
    truth.last_omega = tuple(GYRO + np.array(truth.gyro_bias))
    return truth


def _propagated(f: ErrorStateFilter) -> ErrorStateFilter:
    """A copy after one IMU interval of the filter's own propagation (decimation 1: the
    nominal step and the bias decay of ``flush``)."""
    f = copy.deepcopy(f)
    f._propagate(tuple(GYRO + np.array(f.gyro_bias)), tuple(ACCEL + np.array(f.accel_bias)), DT)
    return f


def _error(estimate: ErrorStateFilter, truth: ErrorStateFilter) -> np.ndarray:
    return estimate.error_from_truth(*truth.nominal(), truth.gyro_bias, truth.accel_bias,
                                     truth.gnss_bias)


def _numeric_transition(estimate: ErrorStateFilter, eps: float = 1e-3) -> np.ndarray:
    after = _propagated(estimate)
    columns = []
    for delta in np.eye(estimate.state_dim) * eps:
        plus = _error(after, _propagated(_truth_with_error(estimate, delta)))
        minus = _error(after, _propagated(_truth_with_error(estimate, -delta)))
        columns.append((plus - minus) / (2 * eps))
    return np.array(columns).T


def _model_F(estimate: ErrorStateFilter) -> np.ndarray:
    F = estimate._F.copy()
    estimate._fill_error_dynamics(F, GYRO + np.array(estimate.gyro_bias),
                                  ACCEL + np.array(estimate.accel_bias))
    return F


@pytest.mark.parametrize(("cls", "tolerance"), [(TridentEKF, 1e-4), (BaselineESKF, 5e-3)])
def test_augmented_error_dynamics_match_finite_differences(cls, tolerance):
    """Same tolerances as the 15-state check (test_linearization); the bias rows and
    columns (-I / tau, nothing else) are checked on their own, absolutely."""
    estimate = _augmented_estimate(cls)
    F = _model_F(estimate)
    transition = _numeric_transition(estimate)
    numeric = (transition - np.eye(18)) / DT
    model = F + 0.5 * DT * (F @ F)
    assert np.max(np.abs(numeric - model)) / np.max(np.abs(F)) < tolerance
    for rows, columns in ((GNSS_BIAS, slice(None)), (slice(None), GNSS_BIAS)):
        assert np.allclose(numeric[rows, columns], model[rows, columns], rtol=0.0, atol=1e-5)
    assert np.allclose(F[GNSS_BIAS, GNSS_BIAS], -np.eye(3) / TAU)
    # The flat-index fill writes the same navigation entries as in the 15-state filter.
    plain = cls(FilterConfig(lever_arm=estimate.config.lever_arm))
    for name in (*cls._NOMINAL_FIELDS, "gyro_bias", "accel_bias"):
        setattr(plain, name, getattr(estimate, name))
    assert np.array_equal(F[:STATE_DIM, :STATE_DIM], _model_F(plain))


def _numeric_measurement_jacobian(estimate: ErrorStateFilter, predict,
                                  eps: float = 1e-4) -> np.ndarray:
    """d(h(estimate) - h(truth))/d(error) by central differences of the truth's h."""
    columns = []
    for delta in np.eye(estimate.state_dim) * eps:
        plus = predict(_truth_with_error(estimate, delta))
        minus = predict(_truth_with_error(estimate, -delta))
        columns.append(-(plus - minus) / (2 * eps))
    return np.array(columns).T


def _zero_measurement(estimate: ErrorStateFilter, source: str, size: int) -> Measurement:
    """A measurement of zeros: its residual (predicted - measured) is the prediction."""
    return Measurement(source, estimate.time, np.zeros(size), np.eye(size))


def _gnss_model(f: ErrorStateFilter) -> tuple[np.ndarray, np.ndarray]:
    """Predicted [position, velocity] of the antenna and H (6 x state_dim), rows position
    then velocity, from the two GNSS sources."""
    parts = [f.sources[name].linearize(f, _zero_measurement(f, name, 3))
             for name in (GnssPosition.name, GnssVelocity.name)]
    return (np.concatenate([part.residual for part in parts]),
            np.vstack([part.H for part in parts]))


@pytest.mark.parametrize("cls", FILTERS)
def test_augmented_gnss_jacobian_matches_finite_differences(cls):
    estimate = _augmented_estimate(cls)
    _, H = _gnss_model(estimate)
    numeric = _numeric_measurement_jacobian(estimate, lambda f: _gnss_model(f)[0])
    assert H.shape == (6, 18)
    assert np.allclose(numeric, H, atol=5e-5)  # ECEF round-off / eps
    up = enu_to_ecef_rotation(-34.6, -58.4)[:, 2]
    assert np.allclose(H[0:3, GNSS_BIAS][:, 2], up)  # the bias is in ENU axes
    assert not H[3:6, GNSS_BIAS].any()


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("source", ["magnetometer", "barometer"])
def test_augmented_aiding_jacobians_match_finite_differences(cls, source):
    """With the GNSS bias states (and the sources' own states after them) the magnetometer
    and barometer rows do not see the GNSS bias; navigation columns against their scale,
    the source's own states (I / +1) on their own."""
    estimate = _augmented_estimate(cls, aided=True)
    aiding = estimate.sources[source]
    m = (aiding.measurement(0.0, [1.5e-5, -1e-5, 2e-5]) if source == "magnetometer"
         else aiding.measurement(0.0, height_m=50.0, height_variance_m2=1.0))
    H = aiding.linearize(estimate, m).H
    numeric = _numeric_measurement_jacobian(
        estimate, lambda f: f.sources[source].linearize(f, m).residual, eps=1e-3)
    assert H.shape[1] == 22
    assert estimate.state_slice(GnssPosition.name) == GNSS_BIAS  # the GNSS bias comes first
    assert not H[:, GNSS_BIAS].any()
    assert np.allclose(numeric[:, GNSS_BIAS], 0.0, atol=1e-9)
    core = slice(0, STATE_DIM)
    assert np.allclose(numeric[:, core], H[:, core], rtol=0.0,
                       atol=1e-5 * np.abs(H[:, core]).max())
    own = estimate.state_slice(source)
    assert np.allclose(numeric[:, own], H[:, own], rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("cls", FILTERS)
def test_injection_then_error_recovers_the_injected_augmented_error(cls):
    estimate = _augmented_estimate(cls)
    delta = np.random.default_rng(3).normal(
        scale=[0.01] * 3 + [0.1] * 3 + [1.0] * 3 + [1e-3] * 6 + [0.2] * 3)
    truth = _truth_with_error(estimate, delta)
    assert np.allclose(_error(estimate, truth), delta, atol=1e-9)
    # Conventional errors: the bias block passes through unchanged.
    assert np.allclose((estimate.conventional_jacobian() @ delta)[GNSS_BIAS], delta[GNSS_BIAS])


# ----- configuration, initialization and the R rule ---------------------------------------
def test_initialize_accepts_15_or_18_and_adds_the_stationary_bias_covariance():
    estimate = _augmented_estimate(TridentEKF)
    assert estimate.covariance.shape == (18, 18)
    assert np.allclose(np.diag(estimate.covariance)[GNSS_BIAS], STATIONARY_SIGMA**2)
    assert not estimate.covariance[:STATE_DIM, GNSS_BIAS].any()
    q, v, p = estimate.nominal()
    estimate.initialize(0.0, q, v, p, np.concatenate([np.full(15, 0.1), [1.0, 2.0, 3.0]]))
    assert np.allclose(np.diag(estimate.covariance)[GNSS_BIAS], [1.0, 4.0, 9.0])
    assert estimate.gnss_bias == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="18x18"):
        estimate.initialize(0.0, q, v, p, np.full(16, 0.1))
    plain = TridentEKF()
    with pytest.raises(ValueError, match="15x15"):
        plain.initialize(0.0, q, v, p, np.full(18, 0.1))


@pytest.mark.parametrize("sigmas", [(0.2, 0.0), (-0.1, -0.1), (float("nan"), 0.2)])
def test_bias_sigmas_must_be_both_zero_or_both_positive(sigmas):
    with pytest.raises(ValueError, match="gnss_bias_sigma"):
        FilterConfig(gnss_bias_sigma_horizontal=sigmas[0], gnss_bias_sigma_vertical=sigmas[1])


def test_white_part_is_the_reported_covariance_minus_the_bias_floored():
    estimate = _augmented_estimate(TridentEKF)
    A = enu_to_ecef_rotation(-34.6, -58.4)
    white = np.diag([0.3, 0.3, 0.5]) ** 2
    reported = A @ (white + np.diag(STATIONARY_SIGMA**2)) @ A.T
    assert np.allclose(estimate.gnss.white_covariance(estimate, reported), A @ white @ A.T)
    # Reported smaller than the bias's variance: floored, still positive definite.
    floor = estimate.config.gnss_white_sigma_floor
    tiny = estimate.gnss.white_covariance(estimate, np.eye(3) * 0.01)
    assert np.allclose(np.linalg.eigvalsh(tiny).min(), floor**2)
    as_white = _augmented_estimate(TridentEKF, gnss_covariance_includes_bias=False)
    assert as_white.gnss.white_covariance(as_white, reported) is reported
    # The R of the position update is that white part.
    fix = Measurement(GnssPosition.name, 0.0, np.zeros(3), reported)
    assert np.allclose(estimate.gnss.linearize(estimate, fix).R, A @ white @ A.T)


# ----- bias states off: the 15-state filter, unchanged ----------------------------------------
@cache
def _data(seed: int, hover: float = 0.0, duration: float = 60.0) -> SimulatedData:
    return simulate(Trajectory(hover_time=hover), SENSORS, duration, imu_rate=100.0,
                    rng=np.random.default_rng(seed))


@pytest.mark.parametrize("cls", FILTERS)
def test_bias_settings_have_no_effect_while_the_sigmas_are_zero(cls):
    """The other bias fields change nothing bit for bit while the sigmas are 0 (the run
    against the code before the bias states was compared the same way, out of tree)."""
    data = _data(0, duration=20.0)
    results = []
    for config in (FilterConfig(), FilterConfig(gnss_bias_correlation_time=3.0,
                                                gnss_covariance_includes_bias=False,
                                                gnss_white_sigma_floor=0.5)):
        filter_ = cls(config)
        start_with_error(filter_, data, SIGMAS, np.random.default_rng(1))
        results.append((run(filter_, data, skip_gnss=(8.0, 12.0)), filter_))
    (first, a), (second, b) = results
    assert a.covariance.shape == b.covariance.shape == (15, 15)
    for key in ("error", "nees", "sigma", "nis", "position_error"):
        assert np.array_equal(first[key], second[key])
    assert np.array_equal(a.covariance, b.covariance)


@pytest.mark.parametrize("cls", FILTERS)
def test_augmented_filter_with_a_vanishing_bias_reproduces_the_15_state_filter(cls):
    """Bias sigma 1 um, fixes taken as white: the 18-state navigation solution is the
    15-state one on the same data (the augmentation adds nothing else)."""
    data = _data(1, duration=20.0)
    tiny = FilterConfig(gnss_bias_sigma_horizontal=1e-6, gnss_bias_sigma_vertical=1e-6,
                        gnss_covariance_includes_bias=False)
    results = []
    for config in (FilterConfig(), tiny):
        filter_ = cls(config)
        start_with_error(filter_, data, SIGMAS, np.random.default_rng(4))
        results.append((run(filter_, data), filter_))
    (plain, a), (augmented, b) = results
    assert np.allclose(plain["error"], augmented["error"][:, :STATE_DIM], rtol=0.0, atol=1e-6)
    assert np.allclose(plain["sigma"], augmented["sigma"][:, :STATE_DIM], rtol=1e-5, atol=0.0)
    assert np.allclose(a.covariance, b.covariance[:STATE_DIM, :STATE_DIM], rtol=1e-5,
                       atol=1e-14)


def test_simulated_correlated_error_leaves_the_white_streams_unchanged():
    white = simulate(TRAJECTORY, SensorModel(gnss_position_sigma=0.3), 20.0, imu_rate=100.0,
                     rng=np.random.default_rng(0))
    correlated = _data(0, duration=20.0)
    assert not white.gnss_bias.any()
    assert correlated.gnss_bias.any()
    for name in ("gyro", "accel", "gnss_velocity", "magnetometer_field", "barometer_height"):
        assert np.array_equal(getattr(white, name), getattr(correlated, name))
    added = (correlated.gnss_position - white.gnss_position) @ TRAJECTORY.enu_to_ecef
    fixes = np.searchsorted(correlated.imu_time, correlated.gnss_time)
    assert np.allclose(added, correlated.gnss_bias[fixes], atol=1e-6)


# ----- consistency on a flight with a Gauss-Markov GNSS error ---------------------------------
MonteCarlo = dict[tuple[type[ErrorStateFilter], FilterConfig], list[Future[dict[str, np.ndarray]]]]
"""The ``RUNS`` runs (``simulation.run`` results, by seed) of each filter and configuration."""


@pytest.fixture(scope="module")
def monte_carlo(replay_pool: ProcessPoolExecutor) -> MonteCarlo:
    """The runs of the three consistency tests, submitted at once so that they run side by
    side in the pool. Each filter is started here (seeded), so a run is the same in any
    worker."""
    runs: MonteCarlo = {}
    for cls, config in ((TridentEKF, FilterConfig()), (TridentEKF, BIAS_CONFIG),
                        (BaselineESKF, BIAS_CONFIG)):
        runs[cls, config] = []
        for seed in range(RUNS):
            filter_ = cls(config)
            start_with_error(filter_, _data(seed), SIGMAS, np.random.default_rng(100 + seed))
            runs[cls, config].append(replay_pool.submit(run, filter_, _data(seed)))
    return runs


def _consistency(runs: list[Future[dict[str, np.ndarray]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per run and epoch (after SETTLED): position NEES (3 dof) and |error| / sigma in ENU."""
    nees, normalized = [], []
    R = TRAJECTORY.enu_to_ecef
    for future in runs:
        result = future.result()
        settled = result["time"] > SETTLED
        error = result["position_error"][settled]
        covariance = result["position_covariance"][settled]
        nees.append(np.einsum("ni,ni->n", error,
                              np.linalg.solve(covariance, error[..., None])[..., 0]))
        sigma_enu = np.sqrt(np.einsum("ij,nik,kj->nj", R, covariance, R))
        normalized.append(np.abs(error @ R) / sigma_enu)
    return np.array(nees), np.array(normalized)


def _band(dof: int, runs: int) -> tuple[float, float]:
    """Two-sided 95% band of the run-average of a chi-square(dof) statistic."""
    return chi2.ppf(0.025, dof * runs) / runs, chi2.ppf(0.975, dof * runs) / runs


def test_white_noise_filter_is_overconfident_with_a_correlated_gnss_error(monte_carlo):
    nees, normalized = _consistency(monte_carlo[TridentEKF, FilterConfig()])
    average = nees.mean(axis=0)
    assert average.mean() > 10.0  # the expected value is 3
    assert np.mean(average > _band(3, RUNS)[1]) > 0.8
    inside = np.mean(normalized < 3.0, axis=(0, 1))
    assert inside[2] < 0.8, inside  # up: far from the 95 % the product needs


@pytest.mark.parametrize("cls", FILTERS)
def test_augmented_filter_is_consistent_with_a_correlated_gnss_error(cls, monte_carlo):
    nees, normalized = _consistency(monte_carlo[cls, BIAS_CONFIG])
    average = nees.mean(axis=0)
    low, high = _band(3, RUNS)
    assert 2.0 < average.mean() < 4.0, average.mean()
    assert np.mean((average > low) & (average < high)) > 0.85
    inside = np.mean(normalized < 3.0, axis=(0, 1))
    assert np.all(inside >= 0.95), inside  # every ENU axis


@pytest.mark.parametrize("cls", FILTERS)
def test_unobservable_bias_stays_within_its_stationary_sigma(cls):
    """Hover (bias and position only seen as their sum), then a 60 s GNSS outage: the bias
    sigma never exceeds the stationary one and regrows towards it, and the estimate decays
    as exp(-t / tau) without fixes."""
    data = _data(4, hover=200.0, duration=100.0)
    filter_ = cls(BIAS_CONFIG)
    start_with_error(filter_, data, SIGMAS, np.random.default_rng(5))
    result = run(filter_, data, skip_gnss=(40.0, 100.0))
    sigma = result["sigma"][:, GNSS_BIAS]
    assert np.all(sigma <= STATIONARY_SIGMA * (1.0 + 1e-6))
    time = result["time"]
    before, end = np.searchsorted(time, [40.0, 100.0]) - 1  # the fix at 100 s is applied
    assert np.all(sigma[before] < 0.99 * STATIONARY_SIGMA)  # fixes told it a little
    assert np.all(sigma[end] > 0.85 * STATIONARY_SIGMA)
    estimate = result["error"][:, GNSS_BIAS] + data.gnss_bias[10::10]  # recorded stamps
    assert np.all(np.abs(estimate) < 3.0 * STATIONARY_SIGMA)
    decay = np.exp(-(time[end] - time[before]) / BIAS_CONFIG.gnss_bias_correlation_time)
    assert np.allclose(estimate[end], estimate[before] * decay, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", FILTERS)
def test_delayed_fix_with_bias_states_matches_the_on_time_fix(cls):
    """The history snapshot carries the bias: a fix applied 0.3 s late by a rewind gives
    the same state and covariance as on time."""
    data = _data(2, duration=4.0)
    filters = []
    for delay in (0.0, 0.3):
        filter_ = cls(BIAS_CONFIG)
        start_with_error(filter_, data, SIGMAS, np.random.default_rng(2))
        late, j = None, 0
        for k in range(1, data.imu_time.size):
            t = data.imu_time[k]
            while j < data.gnss_time.size and data.gnss_time[j] <= t:
                fix = (data.gnss_time[j], data.gnss_position[j], data.gnss_position_covariance,
                       data.gnss_velocity[j], np.full(3, SENSORS.gnss_velocity_sigma**2))
                if j == 7 and delay:
                    late = fix
                else:
                    filter_.process_gnss(*fix)
                j += 1
            filter_.process_imu(t, data.gyro[k], data.accel[k])
            if late is not None and t >= late[0] + delay:
                assert filter_.process_gnss(*late)
                late = None
        filter_.flush()
        filters.append(filter_)
    on_time, delayed = filters
    # The late epoch is two measurements (velocity, position), each applied once in the past.
    for source in (GnssPosition.name, GnssVelocity.name):
        assert delayed.aid_status[source].counts["delayed"] == 1
        assert on_time.aid_status[source].counts["delayed"] == 0
        assert (delayed.aid_status[source].counts["accepted"]
                == on_time.aid_status[source].counts["accepted"])
    assert np.allclose(on_time.gnss_bias, delayed.gnss_bias, rtol=0.0, atol=1e-9)
    assert any(on_time.gnss_bias)
    for a, b in zip(on_time.nominal(), delayed.nominal(), strict=True):
        assert np.allclose(a, b, rtol=0.0, atol=1e-9)
    assert np.allclose(on_time.covariance, delayed.covariance, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("cls", FILTERS)
def test_reset_to_gnss_keeps_the_bias_and_its_correlation(cls):
    """After a divergence reset the position is the fix minus the bias estimate; its
    covariance holds the white part plus the bias's, correlated with the bias error."""
    filter_ = cls(FilterConfig(gnss_bias_sigma_horizontal=HORIZONTAL,
                               gnss_bias_sigma_vertical=VERTICAL, max_consecutive_rejections=1,
                               consistency_probability=0.0))  # the reset onto any fix
    data = _data(3, duration=2.0)
    start_with_error(filter_, data, SIGMAS, np.random.default_rng(3))
    filter_.augmented[GnssPosition.name] = (0.1, -0.2, 0.3)
    fix = data.gnss_position[0] + 500.0
    filter_.process_imu(data.imu_time[1], data.gyro[1], data.accel[1])
    filter_.process_gnss(data.imu_time[1], fix, data.gnss_position_covariance)
    assert filter_.aid_status[GnssPosition.name].counts["resets"] == 1
    A = enu_to_ecef_rotation(TRAJECTORY.latitude_deg, TRAJECTORY.longitude_deg)
    assert np.allclose(filter_.nominal()[2], fix - A @ np.array(filter_.gnss_bias), atol=1e-6)
    P = filter_.conventional_covariance()
    bias = P[GNSS_BIAS, GNSS_BIAS]
    white = filter_.gnss.white_covariance(filter_, data.gnss_position_covariance)
    assert np.allclose(P[POS, POS], white + A @ bias @ A.T, atol=1e-9)
    assert np.allclose(P[POS, GNSS_BIAS], -A @ bias, atol=1e-9)
    assert np.all(np.linalg.eigvalsh(filter_.covariance) > 0.0)
