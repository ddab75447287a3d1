"""The compiled filter kernels (core/_kernels.c) against the numpy/Python reference: the
nominal propagation bit for bit, the covariance step to round-off, a whole replay of a
simulated log (with a delayed fix) to 1e-9, and the errors of bad arguments."""

from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mav_geometry.nilpotent import TRIDENT
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core import filter as filter_module
from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.filter import ACC_SIZE, ErrorStateFilter
from trident_ekf.core.mechanization import ConventionalIntegrator, TridentIntegrator
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

kernels = importlib.import_module("trident_ekf.core._kernels")  # fails if not built
FILTERS = (TridentEKF, BaselineESKF)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)
BIAS_STATES = {"gnss_bias_sigma_horizontal": 0.2, "gnss_bias_sigma_vertical": 0.4}

component = st.floats(-1.0, 1.0)
vector = st.tuples(component, component, component)


def _pose(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random attitude, velocity (m/s) and ECEF position near the Earth's surface (m)."""
    q = rng.normal(size=4)
    position = geodetic_to_ecef(rng.uniform(-80.0, 80.0), rng.uniform(-180.0, 180.0),
                                rng.uniform(-100.0, 5000.0))
    return q / np.linalg.norm(q), rng.normal(0.0, 20.0, 3), position


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), omega=vector, force=vector,
       dt=st.floats(1e-4, 0.05), rates=st.tuples(st.floats(0.0, 1e-3), st.floats(0.0, 1e-2)))
def test_nominal_propagation_is_bit_identical(seed: int, omega: tuple[float, ...],
                                              force: tuple[float, ...], dt: float,
                                              rates: tuple[float, float]) -> None:
    omega = tuple(3.0 * c for c in omega)  # rad/s
    force = tuple(30.0 * c for c in force)  # m/s^2
    q, v, p = _pose(np.random.default_rng(seed))
    x = tuple(float(c) for c in TRIDENT.pack(q, v, p))
    acc = np.random.default_rng(seed).normal(size=ACC_SIZE)
    expected_acc = acc.copy()
    expected_acc[:7] += [*(c * dt for c in omega), *(c * dt for c in force), dt]
    if rates[0] or rates[1]:
        expected_acc[7:] += [rates[0] * dt, rates[1] * dt]

    compiled_acc = acc.copy()
    assert kernels.trident_propagate(x, omega, force, dt, rates, compiled_acc) \
        == TridentIntegrator().step(x, omega, force, dt)
    assert np.array_equal(compiled_acc, expected_acc)

    state = (tuple(q.tolist()), tuple(v.tolist()), tuple(p.tolist()))
    compiled_acc = acc.copy()
    assert kernels.conventional_propagate(*state, omega, force, dt, rates, compiled_acc) \
        == ConventionalIntegrator().step(*state, omega, force, dt)
    assert np.array_equal(compiled_acc, expected_acc)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([0.0, 1e-6, 1e-2, 1.0]))
def test_the_correction_is_bit_identical(seed: int, scale: float) -> None:
    """_inject (the nominal state's correction by an estimated error) in C and in Python."""
    rng = np.random.default_rng(seed)
    q, v, p = _pose(rng)
    dx = (scale * rng.normal(size=9)).tolist()
    for cls in FILTERS:
        compiled, reference = cls(), cls()
        reference.compiled = False
        for filter_ in (compiled, reference):
            filter_._set_nominal(q, v, p)
            filter_._inject(dx)
        assert compiled.compiled
        assert [c.tolist() for c in compiled.nominal()] \
            == [c.tolist() for c in reference.nominal()]


def _reference(cls: type[ErrorStateFilter], config: FilterConfig,
               monkeypatch: pytest.MonkeyPatch) -> ErrorStateFilter:
    """A filter built as with MAV_KERNELS=reference."""
    with monkeypatch.context() as patch:
        patch.setattr(filter_module, "_kernels", None)
        return cls(config)


def _initialized_pair(cls: type[ErrorStateFilter], config: FilterConfig,
                      rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
                      ) -> tuple[ErrorStateFilter, ErrorStateFilter]:
    """(reference, compiled) filters in the same random state with a random covariance."""
    reference = _reference(cls, config, monkeypatch)
    q, v, p = _pose(rng)
    root = rng.normal(size=(reference.state_dim, reference.state_dim))
    reference.initialize(0.0, q, v, p, root @ root.T * 0.01 + np.eye(reference.state_dim),
                         rng.normal(0.0, 0.01, 3), rng.normal(0.0, 0.1, 3))
    compiled = copy.deepcopy(reference)
    assert not reference.compiled
    compiled.compiled = True
    return reference, compiled


def _relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| relative to the sqrt(P_ii P_jj) scale of each covariance entry."""
    scale = np.sqrt(np.outer(np.diag(b), np.diag(b)))
    return float(np.max(np.abs(a - b) / scale))


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("bias_states", [False, True])
def test_covariance_step_matches_the_reference(cls: type[ErrorStateFilter], bias_states: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    config = FilterConfig(covariance_decimation=5, gyro_sampling_factor=0.5,
                          accel_sampling_factor=0.5, **(BIAS_STATES if bias_states else {}))
    rng = np.random.default_rng(7)
    for _ in range(20):
        reference, compiled = _initialized_pair(cls, config, rng, monkeypatch)
        for filter_ in (reference, compiled):  # 4 samples: below the decimation, no flush
            for k in range(1, 5):
                filter_.process_imu(0.005 * k, (0.3, -0.2, 0.1 * k), (0.5, 0.2, -9.8 + 0.1 * k))
        assert np.array_equal(reference._acc, compiled._acc)
        assert reference._acc[7] > 0.0  # the sampling noise is in the step
        reference.flush()
        compiled.flush()
        assert np.array_equal(reference._F, compiled._F)
        assert _relative_difference(compiled.covariance, reference.covariance) < 1e-13
        assert np.array_equal(compiled.covariance, compiled.covariance.T)
        assert not compiled._acc.any()
        assert not reference._acc.any()
        assert compiled.status == reference.status


@pytest.mark.parametrize("cls", FILTERS)
def test_a_divergent_covariance_is_flagged_like_the_reference(
        cls: type[ErrorStateFilter], monkeypatch: pytest.MonkeyPatch) -> None:
    config = FilterConfig(covariance_decimation=1, divergence_position_sigma=1.0)
    reference, compiled = _initialized_pair(cls, config, np.random.default_rng(3), monkeypatch)
    for filter_ in (reference, compiled):
        filter_.process_imu(0.005, (0.0, 0.0, 0.0), (0.0, 0.0, 9.8))
    assert reference.status.value == compiled.status.value == "diverged"  # P_pos > 1 m^2


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("size", [1, 3, 6])
def test_measurement_update_matches_the_reference(cls: type[ErrorStateFilter], size: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Gain, correction, NIS and the Joseph update with the turn, per call on random
    covariances, Jacobians and residuals."""
    rng = np.random.default_rng(size)
    for _ in range(20):
        reference, compiled = _initialized_pair(cls, FilterConfig(**BIAS_STATES), rng,
                                                monkeypatch)
        n = reference.state_dim
        H = rng.normal(size=(size, n)) * (rng.random((size, n)) < 0.5)  # sparse, as models
        root = rng.normal(size=(size, size))
        R = root @ root.T + np.eye(size)
        z = rng.normal(size=size)
        ours = compiled._innovation(z, H, R)
        theirs = reference._innovation(z, H, R)
        for a, b in zip(ours, theirs, strict=True):
            assert np.allclose(a, b, rtol=1e-11, atol=0.0)
        K = ours[0]
        # The turn of a real correction (the identity for the baseline: None), as the
        # orthogonal J_after^T J_before of the conventional Jacobians.
        before = reference.conventional_jacobian()
        rotation_before = reference.attitude_matrix()
        reference._correct((0.01 * rng.normal(size=n)).tolist())
        turn = reference._correction_turn(rotation_before)
        assert (turn is None) == (cls is BaselineESKF)
        M = reference.conventional_jacobian().T @ before
        IKH = np.eye(n) - K @ H
        expected = M @ (IKH @ reference.covariance @ IKH.T + K @ R @ K.T) @ M.T
        P = compiled.covariance
        kernels.joseph_update(P, H, R, K, turn)
        assert _relative_difference(P, 0.5 * (expected + expected.T)) < 1e-12
        assert np.array_equal(P, P.T)


def test_a_singular_innovation_covariance_is_refused() -> None:
    n = 15
    H, K, dx, S_inv = np.zeros((3, n)), np.empty((n, 3)), np.empty(n), np.empty((3, 3))
    with pytest.raises(ValueError, match=r"^the innovation covariance S is singular$"):
        kernels.innovation(np.eye(n), H, np.zeros((3, 3)), np.ones(3), K, dx, S_inv)
    with pytest.raises(ValueError, match=r"^z must have 1 to 6 elements, got 7$"):
        kernels.innovation(np.eye(n), H, np.eye(3), np.ones(7), K, dx, S_inv)
    with pytest.raises(ValueError, match=r"^K must have 45 elements, got 42$"):
        kernels.innovation(np.eye(n), H, np.eye(3), np.ones(3), K[:14], dx, S_inv)
    with pytest.raises(ValueError, match=r"^rotation must have 9 elements, got 15$"):
        kernels.joseph_update(np.eye(n), H, np.eye(3), K, np.eye(n)[0])


def _replay(filter_: ErrorStateFilter, records: list[tuple], truth: dict) -> ErrorStateFilter:
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS)
    for record in records:
        if record[1] == "imu":
            filter_.process_imu(record[0], record[2], record[3])
        else:
            filter_.process_gnss(*record[2:])
    filter_.flush()
    return filter_


@pytest.mark.parametrize(("cls", "decimation", "bias_states"),
                         [(TridentEKF, 1, False), (BaselineESKF, 1, False),
                          (TridentEKF, 4, True), (BaselineESKF, 4, True)])
def test_a_whole_replay_agrees_with_the_reference(cls: type[ErrorStateFilter], decimation: int,
                                                 bias_states: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """6 s at 200 Hz with 5 Hz GNSS; the fix at 3 s arrives 0.1 s late (one rewind)."""
    sensors = SensorModel(gnss_correlated_sigma_horizontal=0.2,
                          gnss_correlated_sigma_vertical=0.4)
    data = simulate(Trajectory(), sensors, 6.0, imu_rate=200.0, gnss_rate=5.0,
                    rng=np.random.default_rng(1))
    rv = (sensors.gnss_velocity_sigma**2,) * 3
    records: list[tuple] = [(t, "imu", tuple(g), tuple(a)) for t, g, a in
                            zip(data.imu_time[1:], data.gyro[1:], data.accel[1:], strict=True)]
    records += [(t + 0.1 * (k == 15), "gnss", t, p, data.gnss_position_covariance, v, rv)
                for k, (t, p, v) in enumerate(zip(data.gnss_time, data.gnss_position,
                                                  data.gnss_velocity, strict=True))]
    records.sort(key=lambda r: (r[0], r[1] == "imu"))
    config = FilterConfig(covariance_decimation=decimation, gyro_sampling_factor=0.3,
                          **(BIAS_STATES if bias_states else {}))
    reference = _replay(_reference(cls, config, monkeypatch), records, data.truth)
    compiled = _replay(cls(config), records, data.truth)
    assert compiled.compiled
    assert compiled.counts() == reference.counts()
    assert compiled.counts()["gnss_position_delayed"] == 1
    for ours, theirs in zip(compiled.nominal(), reference.nominal(), strict=True):
        assert np.linalg.norm(ours - theirs) <= 1e-9 * np.linalg.norm(theirs)
    # The biases in sigmas: small and weakly observable (the GNSS bias against the position
    # most), they amplify the round-off of the covariance steps to about 2e-9 sigma here.
    difference = compiled.error_from_truth(*reference.nominal(), reference.gyro_bias,
                                           reference.accel_bias, reference.gnss_bias)
    sigma = np.sqrt(np.diag(reference.covariance))
    assert np.max(np.abs(difference[9:]) / sigma[9:]) < 1e-8
    assert _relative_difference(compiled.covariance, reference.covariance) < 1e-9


def _flush_arguments(n: int = 15) -> list:
    acc = np.zeros(ACC_SIZE)
    acc[6] = 0.005
    return [np.eye(n), np.zeros((n, n)), np.ones(n), acc, (0.0, 0.0, 0.0, 1.0), (7e6, 0.0, 0.0)]


@pytest.mark.parametrize(("position", "replacement", "error", "message"), [
    (0, np.eye(14), ValueError, "P must have 225 elements, got 196"),
    (0, np.eye(15, dtype=np.float32), TypeError, "P must hold float64 values"),
    (0, np.asfortranarray(np.arange(225.0).reshape(15, 15)), TypeError,
     "P must be a writable C-contiguous float64 array"),
    (1, "F", TypeError, "F must be a writable C-contiguous float64 array"),
    (2, np.ones(40), ValueError, "q_error must have 9 to 32 elements, got 40"),
    (3, np.zeros(ACC_SIZE), ValueError, r"acc holds no elapsed time \(acc\[6\] must be > 0\)"),
    (4, (1.0, 0.0), ValueError, "q must have 4 elements, got 2"),
    (5, (1.0, "x", 0.0), TypeError, r"p must hold floats \(element 1 is not\)"),
])
def test_bad_arguments_raise_one_clear_error(position: int, replacement: object,
                                             error: type[Exception], message: str) -> None:
    arguments = _flush_arguments()
    arguments[position] = replacement
    covariance = arguments[0] if isinstance(arguments[0], np.ndarray) else None
    before = None if covariance is None else covariance.copy()
    with pytest.raises(error, match=f"^{message}$"):
        kernels.conventional_flush(*arguments, 100.0)
    if before is not None:
        assert np.array_equal(covariance, before)  # nothing written on an error


def test_read_only_and_miscounted_arguments_are_refused() -> None:
    acc = np.zeros(ACC_SIZE)
    acc.flags.writeable = False
    x = tuple(TRIDENT.identity().tolist())
    with pytest.raises(TypeError, match=r"^acc must be a writable C-contiguous float64 array$"):
        kernels.trident_propagate(x, (0, 0, 0), (0, 0, 0), 0.01, (0, 0), acc)
    with pytest.raises(ValueError, match=r"^x must have 12 elements, got 4$"):
        kernels.trident_propagate(x[:4], (0, 0, 0), (0, 0, 0), 0.01, (0, 0), np.zeros(ACC_SIZE))
    with pytest.raises(TypeError, match=r"^dt must be a float$"):
        kernels.trident_propagate(x, (0, 0, 0), (0, 0, 0), "0.01", (0, 0), np.zeros(ACC_SIZE))
    with pytest.raises(TypeError, match=r"^trident_flush takes 6 arguments, got 2$"):
        kernels.trident_flush(np.eye(15), np.eye(15))
    with pytest.raises(TypeError, match=r"^omega must be a sequence of 3 floats$"):
        kernels.conventional_propagate((0, 0, 0, 1), (0, 0, 0), (7e6, 0, 0), 1.0, (0, 0, 0),
                                       0.01, (0, 0), np.zeros(ACC_SIZE))


def test_the_bare_covariance_step_is_the_flushes_arithmetic() -> None:
    """covariance_step (the benchmark's compiled floor) on the F a flush filled gives the
    flush's covariance exactly."""
    rng = np.random.default_rng(5)
    filter_ = TridentEKF(FilterConfig(covariance_decimation=1))
    q, v, p = _pose(rng)
    filter_.initialize(0.0, q, v, p, SIGMAS)
    before = filter_.covariance.copy()
    filter_.process_imu(0.01, (0.1, 0.2, 0.3), (0.1, 0.0, 9.8))
    P = before
    kernels.covariance_step(P, filter_._F, filter_._q_error, 0.01, 0.0, 0.0)
    assert np.array_equal(P, filter_.covariance)
