"""F and H (GNSS, magnetometer, barometer) of both filters against finite differences of the
actual discrete propagation and measurement functions (docs/theory/trident-ekf.md T4): the
corrected F_L passes, the printed one fails. The measurement models are the aiding sources'
(``core.measurements``): H of ``source.linearize`` against central differences of its own
residual (predicted - measured, for a fixed measurement) over states corrected by the
filter's injection."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.filter import ATT, STATE_DIM, VEL, ErrorStateFilter
from trident_ekf.core.measurements import Barometer, Magnetometer, MagnetometerConfig
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.measurements.gnss import GnssPosition, GnssVelocity
from trident_ekf.core.simulation import SensorModel

RNG = np.random.default_rng(7)
GYRO = np.array([0.3, -0.2, 0.5])  # raw readings, rad/s
ACCEL = np.array([1.5, -0.8, 9.6])  # raw readings, m/s^2
DT = 0.01
FILTERS = [TridentEKF, BaselineESKF]


def _estimate(cls: type[ErrorStateFilter], aided: bool = False) -> ErrorStateFilter:
    """A filter at a random attitude with a lever arm; ``aided``: with a magnetometer (3d,
    hard-iron states) and a barometer (offset state), their estimates non-zero."""
    config = FilterConfig(covariance_decimation=1, lever_arm=(0.3, -0.2, 0.5))
    field = SensorModel().magnetic_field_ned
    sources = ([Magnetometer(MagnetometerConfig(mode="3d", field_ned_T=field)), Barometer()]
               if aided else [])
    estimate = cls(config, sources)
    q = quaternion.normalize(RNG.normal(size=4))
    estimate.initialize(0.0, q, [12.0, -5.0, 3.0], geodetic_to_ecef(-34.6, -58.4, 40.0),
                        np.full(15, 0.1), gyro_bias=[0.01, -0.02, 0.005],
                        accel_bias=[0.05, 0.1, -0.08])
    estimate.last_omega = tuple(GYRO + np.array(estimate.gyro_bias))
    if aided:
        estimate.augmented["magnetometer"] = (2e-6, -1e-6, 3e-6)  # T
        estimate.augmented["barometer"] = (14.0,)  # m
    return estimate


def _truth_with_error(estimate: ErrorStateFilter, error: np.ndarray) -> ErrorStateFilter:
    """A copy whose state is the estimate corrected by ``error`` (this filter's convention,
    15 or state_dim elements) with the filter's own injection."""
    truth = copy.deepcopy(estimate)
    full = np.zeros(estimate.state_dim)
    full[:error.size] = error
    truth._correct(full.tolist())
    truth.last_omega = tuple(GYRO + np.array(truth.gyro_bias))
    return truth


def _step(f: ErrorStateFilter) -> None:
    f._step(tuple(GYRO + np.array(f.gyro_bias)), tuple(ACCEL + np.array(f.accel_bias)), DT)


def _error_after_step(estimate: ErrorStateFilter, error: np.ndarray) -> np.ndarray:
    truth = _truth_with_error(estimate, error)
    est = copy.deepcopy(estimate)
    _step(truth)
    _step(est)
    return est.error_from_truth(*truth.nominal(), truth.gyro_bias, truth.accel_bias)


def _numeric_transition(estimate: ErrorStateFilter, eps: float = 1e-3) -> np.ndarray:
    columns = []
    for i in range(15):
        delta = np.zeros(15)
        delta[i] = eps
        columns.append(
            (_error_after_step(estimate, delta) - _error_after_step(estimate, -delta)) / (2 * eps)
        )
    return np.array(columns).T


def _model_F(estimate: ErrorStateFilter) -> np.ndarray:
    F = estimate._F.copy()
    estimate._fill_error_dynamics(F, GYRO + np.array(estimate.gyro_bias),
                                  ACCEL + np.array(estimate.accel_bias))
    return F


def _relative_mismatch(F: np.ndarray, transition: np.ndarray) -> float:
    """Largest entry of |(Phi_numeric - I)/dt - (F + F^2 dt/2)| relative to max |F|."""
    model = F + 0.5 * DT * (F @ F)
    return float(np.max(np.abs((transition - np.eye(15)) / DT - model)) / np.max(np.abs(F)))


@pytest.mark.parametrize(("cls", "tolerance"), [(TridentEKF, 1e-4), (BaselineESKF, 5e-3)])
def test_error_dynamics_match_finite_differences_of_the_discrete_step(cls, tolerance):
    """The trident F_L is exact up to finite-difference noise (it hardly depends on the
    state); the conventional F holds C f at the start of the interval, an O(dt |w|) error."""
    estimate = _estimate(cls)
    transition = _numeric_transition(estimate)
    assert _relative_mismatch(_model_F(estimate), transition) < tolerance


def test_printed_sign_of_block_2_1_fails_the_same_check():
    estimate = _estimate(TridentEKF)
    transition = _numeric_transition(estimate)
    F = _model_F(estimate)
    printed = F.copy()
    printed[VEL, ATT] = -F[VEL, ATT]  # the paper prints +(f x)
    assert _relative_mismatch(F, transition) < 1e-4
    assert _relative_mismatch(printed, transition) > 0.5


def _numeric_measurement_jacobian(estimate: ErrorStateFilter,
                                  residual: Callable[[ErrorStateFilter], np.ndarray],
                                  eps: float = 1e-4) -> np.ndarray:
    """d(r(estimate) - r(truth))/d(error) by central differences of the truth's residual
    (all state_dim columns); for a fixed measurement that is d(h(estimate) - h(truth))."""
    columns = []
    for i in range(estimate.state_dim):
        delta = np.zeros(estimate.state_dim)
        delta[i] = eps
        plus = residual(_truth_with_error(estimate, delta))
        minus = residual(_truth_with_error(estimate, -delta))
        columns.append(-(plus - minus) / (2 * eps))
    return np.array(columns).T


def _zero_measurement(estimate: ErrorStateFilter, source: str, size: int) -> Measurement:
    """A measurement of zeros: its residual is the prediction."""
    return Measurement(source, estimate.time, np.zeros(size), np.eye(size))


@pytest.mark.parametrize("cls", FILTERS)
def test_gnss_jacobian_with_lever_arm_matches_finite_differences(cls):
    """Position and velocity rows (the two GNSS sources) with the lever arm."""
    estimate = _estimate(cls)
    position = _zero_measurement(estimate, GnssPosition.name, 3)
    velocity = _zero_measurement(estimate, GnssVelocity.name, 3)

    def predicted(f: ErrorStateFilter) -> np.ndarray:
        return np.concatenate([f.sources[GnssPosition.name].linearize(f, position).residual,
                               f.sources[GnssVelocity.name].linearize(f, velocity).residual])

    H = np.vstack([estimate.sources[GnssPosition.name].linearize(estimate, position).H,
                   estimate.sources[GnssVelocity.name].linearize(estimate, velocity).H])
    numeric = _numeric_measurement_jacobian(estimate, predicted)
    assert np.allclose(numeric, H, atol=5e-5)  # ECEF round-off / eps
    assert np.all(np.isfinite(predicted(estimate)))


def _magnetometer_sample(estimate: ErrorStateFilter) -> Measurement:
    """A realistic body-axes sample: the estimate's prediction plus a small misfit."""
    source = estimate.sources["magnetometer"]
    predicted = source.linearize(estimate, _zero_measurement(estimate, "magnetometer", 3))
    return source.measurement(estimate.time, predicted.residual + np.array([3e-7, -2e-7, 1e-7]))


def _barometer_sample(estimate: ErrorStateFilter) -> Measurement:
    return estimate.sources["barometer"].measurement(estimate.time, height_m=50.0,
                                                     height_variance_m2=1.0)


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize(("source", "sample"), [("magnetometer", _magnetometer_sample),
                                                ("barometer", _barometer_sample)])
def test_magnetometer_and_barometer_jacobians_match_finite_differences(cls, source, sample):
    """trident-ekf.md §5.11 rows for the trident filter; for the baseline the same magnetometer row
    (same attitude error) and the barometer row +u_up^T on p_hat - p. The navigation and
    IMU-bias columns are checked against their own scale, the source's own augmented states
    (hard iron: I; barometer offset: +1) against theirs, every other column is zero."""
    estimate = _estimate(cls, aided=True)
    m = sample(estimate)
    aiding = estimate.sources[source]
    H = aiding.linearize(estimate, m).H
    numeric = _numeric_measurement_jacobian(
        estimate, lambda f: f.sources[source].linearize(f, m).residual, eps=1e-3)
    own = estimate.state_slice(source)
    core_scale = np.abs(H[:, :STATE_DIM]).max()
    assert core_scale > 0.0
    assert np.allclose(numeric[:, :STATE_DIM], H[:, :STATE_DIM], rtol=0.0,
                       atol=1e-5 * core_scale), np.abs(numeric - H)[:, :STATE_DIM].max()
    assert np.allclose(numeric[:, own], H[:, own], rtol=0.0, atol=1e-9)
    assert np.abs(H[:, own]).max() == 1.0
    others = np.ones(estimate.state_dim, dtype=bool)
    others[:STATE_DIM] = others[own] = False
    assert np.all(H[:, others] == 0.0)
    assert np.allclose(numeric[:, others], 0.0, atol=1e-9)


@pytest.mark.parametrize("cls", FILTERS)
def test_injection_then_error_recovers_the_injected_error(cls):
    estimate = _estimate(cls)
    delta = RNG.normal(scale=[0.01] * 3 + [0.1] * 3 + [1.0] * 3 + [1e-3] * 6)
    truth = _truth_with_error(estimate, delta)
    recovered = estimate.error_from_truth(*truth.nominal(), truth.gyro_bias, truth.accel_bias)
    assert np.allclose(recovered, delta, atol=1e-9)


def test_trident_and_conventional_errors_are_related_by_corrected_J_L():
    trident = _estimate(TridentEKF)
    baseline = BaselineESKF()
    baseline.initialize(0.0, *trident.nominal(), np.full(15, 0.1),
                        trident.gyro_bias, trident.accel_bias)
    delta = RNG.normal(scale=[1e-6] * 3 + [1e-4] * 6 + [1e-6] * 6)
    truth = _truth_with_error(trident, delta)
    conventional = baseline.error_from_truth(*truth.nominal(), truth.gyro_bias, truth.accel_bias)
    assert np.allclose(trident.conventional_jacobian() @ delta, conventional, atol=1e-9)
