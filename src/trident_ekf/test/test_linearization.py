"""F and H (GNSS, magnetometer, barometer) of both filters against finite differences of the
actual discrete propagation and measurement functions (docs/theory/trident-ekf.md T4): the
corrected F_L passes, the printed one fails."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.filter import ATT, VEL, ErrorStateFilter
from trident_ekf.core.simulation import SensorModel

RNG = np.random.default_rng(7)
GYRO = np.array([0.3, -0.2, 0.5])  # raw readings, rad/s
ACCEL = np.array([1.5, -0.8, 9.6])  # raw readings, m/s^2
DT = 0.01
FILTERS = [TridentEKF, BaselineESKF]


def _estimate(cls: type[ErrorStateFilter]) -> ErrorStateFilter:
    config = FilterConfig(covariance_decimation=1, lever_arm=(0.3, -0.2, 0.5),
                          magnetic_field_ned=SensorModel().magnetic_field_ned,
                          barometer_height_offset=14.0)
    estimate = cls(config)
    q = quaternion.normalize(RNG.normal(size=4))
    estimate.initialize(0.0, q, [12.0, -5.0, 3.0], geodetic_to_ecef(-34.6, -58.4, 40.0),
                        np.full(15, 0.1), gyro_bias=[0.01, -0.02, 0.005],
                        accel_bias=[0.05, 0.1, -0.08])
    estimate.last_omega = tuple(GYRO + np.array(estimate.gyro_bias))
    return estimate


def _truth_with_error(estimate: ErrorStateFilter, error: np.ndarray) -> ErrorStateFilter:
    """A copy whose state is the estimate corrected by ``error`` (this filter's convention)."""
    truth = copy.deepcopy(estimate)
    truth._inject(error[:9])
    truth.gyro_bias = tuple(np.array(estimate.gyro_bias) - error[9:12])
    truth.accel_bias = tuple(np.array(estimate.accel_bias) - error[12:15])
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
                                  predict: Callable[[ErrorStateFilter], np.ndarray],
                                  eps: float = 1e-4) -> np.ndarray:
    """d(h(estimate) - h(truth))/d(error) by central differences of the truth's h."""
    columns = []
    for i in range(15):
        delta = np.zeros(15)
        delta[i] = eps
        plus = predict(_truth_with_error(estimate, delta))
        minus = predict(_truth_with_error(estimate, -delta))
        columns.append(-(plus - minus) / (2 * eps))
    return np.array(columns).T


@pytest.mark.parametrize("cls", FILTERS)
def test_gnss_jacobian_with_lever_arm_matches_finite_differences(cls):
    estimate = _estimate(cls)
    predicted_p, predicted_v, H = estimate._gnss_model()
    numeric = _numeric_measurement_jacobian(
        estimate, lambda f: np.concatenate(f._gnss_model()[:2]))
    assert np.allclose(numeric, H, atol=5e-5)  # ECEF round-off / eps
    assert np.all(np.isfinite(np.concatenate([predicted_p, predicted_v])))


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("model", ["_magnetometer_model", "_barometer_model"])
def test_magnetometer_and_barometer_jacobians_match_finite_differences(cls, model):
    """trident-ekf.md §5.11 rows for the trident filter; for the baseline the same magnetometer row
    (same attitude error) and the barometer row +u_up^T on p_hat - p."""
    estimate = _estimate(cls)
    _, H = getattr(estimate, model)()
    numeric = _numeric_measurement_jacobian(
        estimate, lambda f: np.atleast_1d(getattr(f, model)()[0]), eps=1e-3)
    scale = np.abs(H).max()
    assert scale > 0.0
    assert np.allclose(numeric, H, rtol=0.0, atol=1e-5 * scale), np.abs(numeric - H).max()


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
