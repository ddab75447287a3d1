"""The aiding-source plug-ins (``core.measurements``): every source's H against finite
differences of its own residual in both filters, the standard atmosphere, the barometer
offset state, the magnetometer's disturbance check, hard-iron states and heading mode, the
zero-velocity detector and updates, the per-source ``AidStatus``, and a source defined only
here (a range finder) registered and used through the registry, the session and the
counters without touching the package."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import chi2

from mav_geometry import quaternion
from mav_geometry.settings import check_settings, setting
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic, enu_to_ecef_rotation, geodetic_to_ecef
from trident_ekf.core.filter import ATT, BA, BG, POS, VEL, ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements import (
    REGISTRY,
    Barometer,
    BarometerConfig,
    ExternalPose,
    Magnetometer,
    MagnetometerConfig,
    ZeroVelocity,
    ZeroVelocityConfig,
    build_sources,
    register,
)
from trident_ekf.core.measurements.barometer import (
    SEA_LEVEL_PRESSURE,
    altitude_pressure,
    height_per_pascal,
    pressure_altitude,
)
from trident_ekf.core.measurements.base import (
    AidingSource,
    Linearization,
    Measurement,
)
from trident_ekf.core.measurements.zero_velocity import StillnessDetector
from trident_ekf.core.session import Datum, EstimationSession
from trident_ekf.core.simulation import (
    SensorModel,
    SimulatedData,
    Trajectory,
    run,
    simulate,
    start_with_error,
)

FILTERS = [TridentEKF, BaselineESKF]
SENSORS = SensorModel()
FIELD_NED = SENSORS.magnetic_field_ned  # T: the simulator's field at its default origin
SIGMAS = np.array([0.03, 0.03, 0.1, *[0.3] * 3, *[2.0] * 3, *[SENSORS.gyro_bias_sigma] * 3,
                   *[SENSORS.accel_bias_sigma] * 3])
CORE_BLOCKS = {"attitude": ATT, "velocity": VEL, "position": POS, "gyro bias": BG,
               "accel bias": BA}


# ----- finite-difference checks of every source's H ------------------------------------------
GYRO = np.array([0.3, -0.2, 0.5])  # raw readings, rad/s


def _estimate(cls: type[ErrorStateFilter], source: AidingSource,
              augmented: tuple[float, ...] = ()) -> ErrorStateFilter:
    """A filter with ``source`` at a random attitude, moving, with a lever arm and biases;
    the source's augmented estimate set to ``augmented``."""
    filter_ = cls(FilterConfig(covariance_decimation=1, lever_arm=(0.3, -0.2, 0.5)), [source])
    q = quaternion.normalize(np.random.default_rng(11).normal(size=4))
    filter_.initialize(0.0, q, [12.0, -5.0, 3.0], geodetic_to_ecef(-34.6, -58.4, 40.0),
                       np.full(15, 0.1), gyro_bias=[0.01, -0.02, 0.005],
                       accel_bias=[0.05, 0.1, -0.08])
    filter_.last_omega = tuple(GYRO + np.array(filter_.gyro_bias))
    if augmented:
        filter_.augmented[source.name] = augmented
    return filter_


def _corrected(estimate: ErrorStateFilter, error: np.ndarray) -> ErrorStateFilter:
    """A copy corrected by ``error`` (state_dim, the filter's convention) with its own
    injection: the truth of which ``error`` is the estimate's error."""
    truth = copy.deepcopy(estimate)
    truth._correct(error.tolist())
    truth.last_omega = tuple(GYRO + np.array(truth.gyro_bias))
    return truth


def _check_jacobian(estimate: ErrorStateFilter, m: Measurement, eps: float,
                    rtol: float = 1e-5) -> Linearization:
    """H of the source of ``m`` against central differences of its residual
    r(estimate) - r(truth) = H dx, column block by block (core blocks and each source's
    augmented states): a non-zero block to ``rtol`` of its own largest entry, a zero block
    to ``rtol`` of the smallest non-zero block's. Returns the linearization."""
    source = estimate.sources[m.source]
    linear = source.linearize(estimate, m)
    H = linear.H
    columns = []
    for delta in np.eye(estimate.state_dim) * eps:
        plus = source.linearize(_corrected(estimate, delta), m).residual
        minus = source.linearize(_corrected(estimate, -delta), m).residual
        columns.append(-(plus - minus) / (2.0 * eps))
    numeric = np.array(columns).T
    assert H.shape == numeric.shape == (source.dof, estimate.state_dim)
    blocks = dict(CORE_BLOCKS)
    blocks.update({f"{name} states": estimate.state_slice(name) for name in estimate.sources
                   if estimate.sources[name].augmented})
    scales = {name: float(np.abs(H[:, block]).max()) for name, block in blocks.items()}
    floor = rtol * min(scale for scale in scales.values() if scale > 0.0)
    for name, block in blocks.items():
        atol = rtol * scales[name] if scales[name] > 0.0 else floor
        mismatch = np.abs(numeric[:, block] - H[:, block]).max()
        assert mismatch <= atol, (
            f"{m.source} H, {name} columns: |numeric - H| = {mismatch:.3g} > {atol:.3g}\n"
            f"H = {H[:, block]}\nnumeric = {numeric[:, block]}")
    return linear


@pytest.mark.parametrize("cls", FILTERS)
def test_barometer_jacobian_with_the_offset_column(cls):
    estimate = _estimate(cls, Barometer(), augmented=(14.0,))
    m = estimate.sources["barometer"].measurement(0.0, height_m=50.0, height_variance_m2=0.25)
    linear = _check_jacobian(estimate, m, eps=1e-3)
    assert linear.H[0, estimate.state_slice("barometer")].tolist() == [1.0]
    height = ecef_to_geodetic(estimate.nominal()[2])[2]
    assert linear.residual[0] == pytest.approx(height + 14.0 - 50.0, abs=1e-9)
    assert linear.R.tolist() == [[0.25]]


@pytest.mark.parametrize("cls", FILTERS)
def test_three_axis_magnetometer_jacobian_with_the_hard_iron_columns(cls):
    source = Magnetometer(MagnetometerConfig(mode="3d", field_ned_T=FIELD_NED))
    estimate = _estimate(cls, source, augmented=(2e-6, -1e-6, 3e-6))
    C = quaternion.to_matrix(estimate.nominal()[0])
    sample = C.T @ source.field_ecef + np.array([4e-7, -3e-7, 2e-7])
    linear = _check_jacobian(estimate, source.measurement(0.0, sample), eps=1e-4)
    assert np.array_equal(linear.H[:, estimate.state_slice("magnetometer")], np.eye(3))
    assert np.allclose(linear.residual, [2e-6 - 4e-7, -1e-6 + 3e-7, 3e-6 - 2e-7], atol=1e-15)


@pytest.mark.parametrize("cls", FILTERS)
def test_heading_magnetometer_jacobian(cls):
    """One row; the residual is the heading of the field levelled with the estimated
    attitude, so it also moves with a tilt about the horizontal field (gain tan(dip))."""
    source = Magnetometer(MagnetometerConfig(mode="heading", field_ned_T=FIELD_NED))
    estimate = _estimate(cls, source)
    assert source.dof == 1
    assert not source.augmented
    C = quaternion.to_matrix(estimate.nominal()[0])
    exact = C.T @ source.field_ecef
    linear = _check_jacobian(estimate, source.measurement(0.0, exact), eps=1e-4)
    # The row is taken at the model field: the sample's noise moves the residual, not H
    # (an H correlated with the residual's noise biases the update).
    noisy = source.linearize(estimate, source.measurement(0.0, exact + np.array([4e-7, -3e-7,
                                                                                 2e-7])))
    assert np.array_equal(noisy.H, linear.H)
    assert noisy.residual[0] != linear.residual[0]


@pytest.mark.parametrize("cls", FILTERS)
def test_zero_velocity_jacobian(cls):
    estimate = _estimate(cls, ZeroVelocity())
    m = estimate.sources["zero_velocity"].measurement(0.0)
    linear = _check_jacobian(estimate, m, eps=1e-4)
    assert np.allclose(linear.residual, estimate.nominal()[1])  # v_hat - 0
    assert np.allclose(linear.R, np.eye(3) * ZeroVelocityConfig().sigma_mps**2)


@pytest.mark.parametrize("cls", FILTERS)
def test_external_pose_jacobian_and_residual(cls):
    """Position and attitude rows at a pose 0.5 m and 1 deg from the estimate (the attitude
    Jacobian is checked at the estimate's own attitude: it is -I there exactly)."""
    source = ExternalPose()
    estimate = _estimate(cls, source)
    datum = Datum(-34.6, -58.4, 20.0)
    q_hat, _, p_hat = estimate.nominal()
    position = datum.position_enu(p_hat)
    attitude = datum.attitude_enu(q_hat)
    covariance = np.diag([0.01, 0.04, 0.09, 1e-4, 4e-4, 9e-4])  # ENU position, map rotation
    at_estimate = source.measurement(0.0, datum, position, attitude, covariance)
    linear = _check_jacobian(estimate, at_estimate, eps=1e-3)
    assert np.allclose(linear.residual, 0.0, atol=1e-6)
    assert np.array_equal(linear.H[3:, ATT], -np.eye(3))
    # Noise: ENU position block turned to ECEF, the map-frame rotation block to body axes.
    C = quaternion.to_matrix(q_hat)
    R_enu = datum.enu_to_ecef
    assert np.allclose(linear.R[:3, :3], R_enu @ np.diag([0.01, 0.04, 0.09]) @ R_enu.T)
    assert np.allclose(linear.R[3:, 3:], C.T @ R_enu @ np.diag([1e-4, 4e-4, 9e-4]) @ R_enu.T @ C)
    # Away from the estimate: residual p_hat - p and log(q_meas^* q_hat) = -(body rotation).
    rotation = np.radians([1.0, -0.5, 0.7])  # body axes
    q_body = quaternion.multiply(q_hat, quaternion.from_rotation_vector(rotation))
    moved = source.measurement(0.0, datum, position + np.array([0.5, -0.2, 0.1]),
                               datum.attitude_enu(q_body), covariance)
    residual = source.linearize(estimate, moved).residual
    assert np.allclose(datum.enu_to_ecef.T @ residual[:3], [-0.5, 0.2, -0.1], atol=1e-6)
    assert np.allclose(residual[3:], -rotation, atol=1e-12)


# ----- the standard atmosphere -------------------------------------------------------------
def test_standard_atmosphere():
    assert pressure_altitude(SEA_LEVEL_PRESSURE) == 0.0
    assert pressure_altitude(101325.0) == 0.0
    # ICAO standard atmosphere table: 898.76 hPa at 1000 m.
    assert altitude_pressure(1000.0) == pytest.approx(89875.0, abs=5.0)
    assert altitude_pressure(0.0) == pytest.approx(101325.0, abs=1e-9)
    for height in (-400.0, 0.0, 30.0, 1000.0, 4500.0, 10000.0):
        assert pressure_altitude(altitude_pressure(height)) == pytest.approx(height, abs=1e-6)
    for pressure in (108000.0, 101325.0, 95000.0, 70000.0, 30000.0):
        assert altitude_pressure(pressure_altitude(pressure)) == pytest.approx(pressure,
                                                                             rel=1e-12)
        step = 1.0  # Pa
        numeric = (pressure_altitude(pressure - step) - pressure_altitude(pressure + step)) / (
            2.0 * step)
        assert height_per_pascal(pressure) == pytest.approx(numeric, rel=1e-7)
    assert height_per_pascal(101325.0) == pytest.approx(0.0832, abs=2e-4)  # ~8.3 m/hPa


def test_barometer_pressure_readings_become_heights_with_their_variance():
    barometer = Barometer()
    m = barometer.measurement(2.0, pressure_pa=89874.6, pressure_variance_pa2=4.0)
    assert m.value[0] == pytest.approx(1000.0, abs=0.01)
    assert m.covariance[0, 0] == pytest.approx(4.0 * height_per_pascal(89874.6) ** 2)
    unknown = barometer.measurement(2.0, pressure_pa=89874.6)  # no variance: the default
    assert unknown.covariance[0, 0] == BarometerConfig().noise_sigma_m**2
    with pytest.raises(ValueError, match="exactly one"):
        barometer.measurement(2.0, pressure_pa=1e5, height_m=3.0)


# ----- barometer offset state --------------------------------------------------------------
BARO_OFFSET = 40.0  # m: the barometer reads the height plus this


@cache
def _offset_data() -> SimulatedData:
    data = simulate(Trajectory(), SENSORS, 60.0, imu_rate=100.0, rng=np.random.default_rng(21))
    return dataclasses.replace(data, barometer_height=data.barometer_height + BARO_OFFSET)


def _up_statistics(result: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Height error (estimate - truth, m) and its sigma at every recorded epoch."""
    up = enu_to_ecef_rotation(Trajectory().latitude_deg, Trajectory().longitude_deg)[:, 2]
    error = result["position_error"] @ up
    sigma = np.sqrt(np.einsum("i,nij,j->n", up, result["position_covariance"], up))
    return error, sigma


@pytest.mark.parametrize("cls", FILTERS)
def test_barometer_offset_state_absorbs_a_constant_offset(cls):
    """Default settings: the offset starts at the first reading minus the predicted height
    and converges to the true 40 m within its 3 sigma; the height stays inside 3 sigma and
    the barometer's NIS is near its 1 dof."""
    data = _offset_data()
    filter_ = cls(FilterConfig(), [Barometer()])
    start_with_error(filter_, data, SIGMAS, np.random.default_rng(22))
    result = run(filter_, data, barometer=True)
    offset = filter_.state_slice("barometer")
    offset_sigma = result["sigma"][:, offset.start]  # the estimate's sigma per epoch
    total = result["error"][:, offset.start] + filter_.sources["barometer"].reference_offset
    offset_error = total - BARO_OFFSET  # state truth given as zero: b0 + b - true offset
    settled = result["time"] > 10.0
    assert np.all(np.abs(offset_error[settled]) < 3.0 * offset_sigma[settled])
    assert offset_sigma[-1] < 0.5  # from the 5 m prior
    assert filter_.sources["barometer"].offset(filter_) == pytest.approx(BARO_OFFSET, abs=1.0)
    error, sigma = _up_statistics(result)
    assert np.all(np.abs(error) < 3.0 * sigma)
    status = filter_.aid_status["barometer"]
    assert status.counts["accepted"] == data.barometer_time.size
    assert 0.5 < status.nis_mean < 2.0



@pytest.mark.parametrize("cls", FILTERS)
def test_barometer_offset_does_not_decay_through_an_outage(cls):
    """The 40 m offset is a constant plus a Gauss-Markov change: with a 20 s correlation time
    and 40 s of barometer-only flight the height holds. A state holding the whole offset
    decays towards zero: 40 m (1 - e^-2) = 35 m of height error."""
    data = _offset_data()
    config = BarometerConfig(offset_sigma_m=1.0, offset_correlation_time_s=20.0)
    filter_ = cls(FilterConfig(), [Barometer(config)])
    start_with_error(filter_, data, SIGMAS, np.random.default_rng(23))
    result = run(filter_, data, skip_gnss=(20.0, 60.0), barometer=True)
    error, sigma = _up_statistics(result)
    in_outage = result["time"] > 20.0
    assert np.max(np.abs(error[in_outage])) < 2.0
    assert np.all(np.abs(error) < 3.0 * sigma)

# ----- magnetometer ------------------------------------------------------------------------
@cache
def _hover_data(duration: float = 4.0, seed: int = 31) -> SimulatedData:
    """A hover (no manoeuvre for the whole run) with the default sensor noise."""
    return simulate(Trajectory(hover_time=1e4), SENSORS, duration, imu_rate=100.0,
                    rng=np.random.default_rng(seed))


def _started_at_truth(cls: type[ErrorStateFilter], data: SimulatedData,
                      sources: list[AidingSource], yaw_error: float = 0.0,
                      sigmas: np.ndarray = SIGMAS) -> ErrorStateFilter:
    filter_ = cls(FilterConfig(), sources)
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], sigmas,
                       data.gyro_bias[0], data.accel_bias[0])
    filter_._inject([0.0, 0.0, -yaw_error, *[0.0] * 6])
    return filter_


def _disturbed_sample(filter_: ErrorStateFilter, kind: str) -> np.ndarray:
    """The model field in body axes (estimated attitude), 1.5x as strong or with its
    inclination turned 20 deg (dip steeper or shallower), or unchanged."""
    source = filter_.sources["magnetometer"]
    q, _, p = filter_.nominal()
    to_enu = enu_to_ecef_rotation(*ecef_to_geodetic(p)[:2]).T
    field = to_enu @ source.field_ecef  # ENU
    if kind == "strong":
        field = 1.5 * field
    elif kind.startswith("dip"):
        axis = np.cross(field, [0.0, 0.0, 1.0])  # horizontal, normal to the field
        angle = math.radians(20.0 if kind == "dip+" else -20.0)
        turn = quaternion.to_matrix(quaternion.from_rotation_vector(
            angle * axis / np.linalg.norm(axis)))
        field = turn @ field
    return quaternion.to_matrix(q).T @ (to_enu.T @ field)


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("mode", ["3d", "heading"])
def test_disturbed_magnetometer_samples_are_rejected_and_change_nothing(cls, mode):
    data = _hover_data()
    filter_ = _started_at_truth(
        cls, data, [Magnetometer(MagnetometerConfig(mode=mode, field_ned_T=FIELD_NED))])
    source = filter_.sources["magnetometer"]
    counts = filter_.aid_status["magnetometer"].counts
    k = 0
    for kind in ("strong", "dip+", "dip-", "undisturbed"):
        k += 1  # one IMU sample: a new stamp, applied at once
        assert filter_.process_imu(data.imu_time[k], data.gyro[k], data.accel[k])
        filter_.flush()
        state, covariance = filter_.nominal(), filter_.covariance.copy()
        augmented = dict(filter_.augmented)
        before = dict(counts)
        sample = _disturbed_sample(filter_, kind)
        assert filter_.process(source.measurement(filter_.time, sample,
                                                  np.eye(3) * 1e-14))
        (update,) = filter_.drain_updates()
        if kind == "undisturbed":
            assert (update.accepted, update.reason) == (True, "accepted")
            assert counts["accepted"] == before["accepted"] + 1
            continue
        assert (update.accepted, update.reason) == (False, "disturbed"), kind
        assert counts["disturbed"] == before["disturbed"] + 1
        assert {reason: n for reason, n in counts.items() if reason != "disturbed"} == {
            reason: n for reason, n in before.items() if reason != "disturbed"}
        for a, b in zip(state, filter_.nominal(), strict=True):
            assert np.array_equal(a, b)
        assert np.array_equal(covariance, filter_.covariance)
        assert filter_.augmented == augmented
    assert counts["disturbed"] == 3
    assert filter_.counts()["magnetometer_disturbed"] == 3
    assert filter_.aid_status["magnetometer"].rejected == 3


@pytest.mark.parametrize("cls", FILTERS)
def test_hard_iron_bias_is_estimated_after_manoeuvres(cls):
    """Samples with a constant hard-iron bias of (2, -1, 3) uT; three-axis mode with the
    default 5 uT prior learns it within 3 sigma once the attitude has varied."""
    bias = np.array([2e-6, -1e-6, 3e-6])
    data = simulate(Trajectory(), SENSORS, 60.0, imu_rate=100.0, rng=np.random.default_rng(41))
    data = dataclasses.replace(data, magnetometer_field=data.magnetometer_field + bias)
    three_axis = MagnetometerConfig(mode="3d", field_ned_T=FIELD_NED)  # default hard-iron prior
    filter_ = cls(FilterConfig(), [Magnetometer(three_axis)])
    start_with_error(filter_, data, SIGMAS, np.random.default_rng(42))
    run(filter_, data, magnetometer=True)
    filter_.flush()
    states = filter_.state_slice("magnetometer")
    sigma = np.sqrt(np.diag(filter_.covariance[states, states]))
    estimate = np.array(filter_.augmented["magnetometer"])
    assert np.all(np.abs(estimate - bias) < 3.0 * sigma), (estimate, sigma)
    assert np.all(sigma < 0.5e-6)  # from the 5 uT prior
    status = filter_.aid_status["magnetometer"]
    assert status.counts["accepted"] > 0.9 * data.magnetometer_time.size
    assert 1.5 < status.nis_mean < 6.0  # 3 dof


@pytest.mark.parametrize("cls", FILTERS)
def test_heading_mode_fixes_a_yaw_error_in_hover(cls):
    """Hover (yaw unobservable from GNSS), initial yaw error 30 deg with sigma 40 deg:
    heading updates at the default 5 deg noise bring yaw within 3 deg; GNSS alone leaves
    the error."""
    data = _hover_data(40.0, 51)
    sigmas = SIGMAS.copy()
    sigmas[2] = math.radians(40.0)
    results = {}
    for fused in (False, True):
        filter_ = _started_at_truth(
            cls, data, [Magnetometer(MagnetometerConfig(mode="heading", field_ned_T=FIELD_NED))],
            yaw_error=math.radians(30.0), sigmas=sigmas)
        truth = data.truth
        initial = filter_.error_from_truth(truth["q"][0], truth["v"][0], truth["p"][0],
                                           data.gyro_bias[0], data.accel_bias[0])
        assert math.degrees(abs(initial[2])) == pytest.approx(30.0, abs=0.5)
        results[fused] = run(filter_, data, magnetometer=fused)
        accepted = filter_.aid_status["magnetometer"].counts["accepted"]
        assert accepted > 0.9 * data.magnetometer_time.size if fused else accepted == 0
    settled = results[True]["time"] > 2.0
    assert np.degrees(np.abs(results[True]["error"][settled, 2])).max() < 3.0
    assert np.degrees(results[True]["sigma"][settled, 2]).max() < 3.0
    assert np.degrees(np.abs(results[False]["error"][:, 2])).min() > 20.0


# ----- zero velocity -----------------------------------------------------------------------
QUIET = SensorModel(gyro_noise=1e-4, accel_noise=2e-3, gyro_bias_sigma=0.002)  # a good MEMS
DATUM = (Trajectory().latitude_deg, Trajectory().longitude_deg, Trajectory().height_m)


@cache
def _static_data(duration: float = 20.0) -> SimulatedData:
    return simulate(Trajectory(hover_time=1e4), QUIET, duration, imu_rate=200.0,
                    gnss_rate=5.0, rng=np.random.default_rng(61))


def test_stillness_detector_fires_at_rest_and_not_with_vibration():
    data = _static_data()
    n = 600  # 3 s at 200 Hz
    t, gyro, accel = data.imu_time[1:n], data.gyro[1:n], data.accel[1:n]
    vibration = np.zeros_like(accel)
    vibration[:, 2] = 0.5 * math.sqrt(2.0) * np.sin(2.0 * math.pi * 37.0 * t)  # 0.5 m/s^2 rms
    config = ZeroVelocityConfig()
    still = StillnessDetector(config)
    shaken = StillnessDetector(config)
    at_rest = [still.add(*sample) for sample in zip(t, gyro, accel, strict=True)]
    vibrating = [shaken.add(*sample) for sample in zip(t, gyro, accel + vibration, strict=True)]
    full = t > t[0] + config.window_s  # the window has filled
    assert not any(at_rest[:50])  # fewer samples than the window
    assert np.mean(np.array(at_rest)[full]) > 0.99
    assert not any(vibrating)
    turning = StillnessDetector(config)  # rotating at 0.1 rad/s about z
    rotating = gyro + np.array([0.0, 0.0, 0.1])
    assert not any(turning.add(*sample) for sample in zip(t, rotating, accel, strict=True))


def _stream(session: EstimationSession, data: SimulatedData,
            gnss_outage: tuple[float, float] = (math.inf, math.inf),
            aid: Callable[[EstimationSession, int], None] | None = None,
            on_imu: Callable[[int], None] | None = None) -> None:
    """IMU, GNSS fixes with velocities (none inside ``gnss_outage``) and, through
    ``aid(session, j)``, an optional source's samples at the barometer stamps, to a session;
    stamps in ns from 0. ``on_imu(k)`` after every IMU sample the running filter took."""
    R = enu_to_ecef_rotation(*DATUM[:2])
    sigma_p, sigma_v = data.sensors.gnss_position_sigma, data.sensors.gnss_velocity_sigma
    j = a = 0
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        while j < data.gnss_time.size and data.gnss_time[j] <= t:
            stamp = round(data.gnss_time[j] * 1e9)
            if not gnss_outage[0] <= data.gnss_time[j] < gnss_outage[1]:
                session.fix(stamp, 0, *ecef_to_geodetic(data.gnss_position[j]),
                            np.eye(3) * sigma_p**2)
                session.velocity(stamp, R.T @ data.gnss_velocity[j], np.eye(3) * sigma_v**2)
            j += 1
        while aid is not None and a < data.barometer_time.size and data.barometer_time[a] <= t:
            aid(session, a)
            a += 1
        if session.imu(round(t * 1e9), data.gyro[k], data.accel[k]) and on_imu is not None:
            on_imu(k)


def _session(sources: list[AidingSource], yaw: float = Trajectory().yaw0_rad
             ) -> EstimationSession:
    return EstimationSession(TridentEKF(FilterConfig(), sources),
                             Initializer(yaw=yaw, yaw_sigma=math.radians(5.0)), datum=DATUM)


def test_zero_velocity_updates_bound_the_velocity_at_rest():
    """At rest, GNSS for 5 s then none: the session's stillness detector makes zero-velocity
    updates at the source's rate; velocity sigma stays below the source's sigma, while
    without them it grows well past it."""
    data = _static_data()
    sigmas = {}
    for zupt in (False, True):
        session = _session(build_sources({"zero_velocity": None}) if zupt else [])
        _stream(session, data, gnss_outage=(5.0, math.inf))
        estimate = session.estimate()
        sigmas[zupt] = np.sqrt(np.diag(estimate["velocity_cov"]))
        if zupt:
            assert np.all(np.abs(estimate["velocity"]) < 3.0 * sigmas[zupt])
            counts = session.counts()
            still = data.imu_time[-1] - 1.0 - ZeroVelocityConfig().window_s  # after levelling
            expected = ZeroVelocityConfig().rate_hz * still
            assert 0.9 * expected < counts["zero_velocity_accepted"] <= expected + 1
            assert counts["zero_velocity_gated"] == 0
            assert session.filter.aid_status["zero_velocity"].counts["accepted"] == (
                counts["zero_velocity_accepted"])
            # At rest the velocity error is far below the update's 3 cm/s: NIS under 3 dof.
            assert session.filter.aid_status["zero_velocity"].nis_mean < 3.0
    sigma_mps = ZeroVelocityConfig().sigma_mps
    assert np.all(sigmas[True] < sigma_mps)
    assert np.all(sigmas[False][:2] > 3.0 * sigma_mps)


# ----- AidStatus -----------------------------------------------------------------------------
@cache
def _aided_data() -> SimulatedData:
    return simulate(Trajectory(), SENSORS, 3.0, imu_rate=100.0, rng=np.random.default_rng(71))


def _fed(cls: type[ErrorStateFilter], data: SimulatedData, until: float,
         late_barometer: int | None = None, delay: float = 0.3) -> ErrorStateFilter:
    """GNSS and barometer up to ``until`` s; barometer sample ``late_barometer`` arrives
    ``delay`` s late."""
    filter_ = _started_at_truth(cls, data, [Barometer()])
    barometer = filter_.sources["barometer"]
    late = None
    j = b = 0
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        if t > until:
            break
        while j < data.gnss_time.size and data.gnss_time[j] <= t:
            filter_.process_gnss(data.gnss_time[j], data.gnss_position[j],
                                 np.full(3, SENSORS.gnss_position_sigma**2), data.gnss_velocity[j],
                                 np.full(3, SENSORS.gnss_velocity_sigma**2))
            j += 1
        while b < data.barometer_time.size and data.barometer_time[b] <= t:
            m = barometer.measurement(data.barometer_time[b], height_m=data.barometer_height[b],
                                      height_variance_m2=SENSORS.barometer_sigma**2)
            if b == late_barometer:
                late = m
            else:
                filter_.process(m)
            b += 1
        filter_.process_imu(t, data.gyro[k], data.accel[k])
        if late is not None and t >= late.time + delay:
            assert filter_.process(late)
            late = None
    filter_.flush()
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
def test_aid_status_records_nis_test_ratio_and_innovation(cls):
    data = _aided_data()
    filter_ = _fed(cls, data, until=1.95)  # no barometer stamp at the filter time
    results = filter_.drain_updates()
    status = filter_.aid_status["barometer"]
    accepted = [u.nis for u in results if u.source == "barometer" and u.accepted]
    assert status.nis_count == len(accepted) == status.counts["accepted"] > 10
    assert status.nis_mean == pytest.approx(np.mean(accepted), rel=1e-12)
    # One more reading, 0.8 m above the prediction, at the filter time.
    barometer = filter_.sources["barometer"]
    predicted = barometer.linearize(filter_, Measurement("barometer", filter_.time,
                                                         np.zeros(1), np.eye(1)))
    reading = predicted.residual[0] + 0.8
    variance = SENSORS.barometer_sigma**2
    S = (predicted.H @ filter_.covariance @ predicted.H.T).item() + variance
    assert filter_.process(barometer.measurement(filter_.time, height_m=reading,
                                                 height_variance_m2=variance))
    (update,) = filter_.drain_updates()
    assert update.accepted
    assert update.dof == 1
    assert status.last_innovation == pytest.approx([0.8], abs=1e-9)  # measured - predicted
    assert update.residual == pytest.approx([-0.8], abs=1e-9)  # predicted - measured
    assert status.last_nis == pytest.approx(0.64 / S, rel=1e-9) == update.nis
    gate = chi2.ppf(filter_.config.gate_probability, 1)
    assert status.last_test_ratio == pytest.approx(status.last_nis / gate, rel=1e-12)
    assert status.last_time == filter_.time
    summary = status.summary()
    assert summary["nis_expected"] == 1
    assert summary["accepted"] == status.counts["accepted"]
    assert summary["last_innovation"] == pytest.approx([0.8], abs=1e-9)
    # The GNSS position status records the last fix the same way (3 components).
    gnss = filter_.aid_status["gnss_position"]
    assert gnss.last_innovation.shape == (3,)
    assert 0.0 < gnss.last_test_ratio < 1.0


@pytest.mark.parametrize("cls", FILTERS)
def test_a_delayed_measurement_does_not_double_count(cls):
    """A barometer sample 0.3 s late rewinds the history and re-applies the GNSS and
    barometer updates since: counts and NIS sums end as with on-time delivery."""
    data = _aided_data()
    on_time = _fed(cls, data, until=3.0)
    delayed = _fed(cls, data, until=3.0, late_barometer=12)  # 1.3 s
    for name in ("gnss_position", "gnss_velocity", "barometer"):
        a, b = on_time.aid_status[name], delayed.aid_status[name]
        assert b.counts["accepted"] == a.counts["accepted"] > 0
        assert b.nis_count == a.nis_count == a.counts["accepted"]
        assert b.nis_sum == pytest.approx(a.nis_sum, rel=1e-9)
        assert b.counts["gated"] == a.counts["gated"]
    assert delayed.aid_status["barometer"].counts["delayed"] == 1
    assert delayed.counts()["barometer_delayed"] == 1
    assert on_time.counts()["barometer_delayed"] == 0
    assert delayed.imu_counts["accepted"] == on_time.imu_counts["accepted"]


# ----- a source defined only here: a range finder -----------------------------------------
@dataclass(frozen=True)
class RangeFinderConfig:
    noise_sigma_m: float = setting(0.05, "range noise when a sample has no variance", "m",
                                   1e-4, 10.0)
    ground_height_m: float = setting(
        math.nan, "ellipsoidal height of the flat ground; NaN = the height at the start",
        "m", -1000.0, 9000.0, allow_nan=True)

    def __post_init__(self) -> None:
        check_settings(self)


class RangeFinder(AidingSource):
    """Height above a flat ground (m), as a tilt-compensated downward range finder gives it:
    h(p) - ground, 1 dof."""

    name: ClassVar[str] = "range_finder"
    dof = 1
    config: RangeFinderConfig

    def __init__(self, config: RangeFinderConfig | None = None) -> None:
        super().__init__(config or RangeFinderConfig())
        self.ground = math.nan

    def start(self, filter_: ErrorStateFilter) -> None:
        given = self.config.ground_height_m
        self.ground = given if math.isfinite(given) else ecef_to_geodetic(filter_.nominal()[2])[2]

    def measurement(self, time: float, range_m: float, variance: float = 0.0) -> Measurement:
        if variance <= 0.0:
            variance = self.config.noise_sigma_m**2
        return Measurement(self.name, float(time), np.array([float(range_m)]),
                           np.array([[variance]]))

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        q, _, p = filter_.nominal()
        latitude, longitude, height = ecef_to_geodetic(p)
        up = enu_to_ecef_rotation(latitude, longitude)[:, 2]
        H = np.zeros((1, filter_.state_dim))
        H[0, POS] = up @ filter_.navigation_error_block(quaternion.to_matrix(q))
        return Linearization(np.array([height - self.ground - m.value[0]]), H, m.covariance)


@pytest.fixture
def range_finder():
    register(RangeFinder, RangeFinderConfig)
    yield RangeFinder
    del REGISTRY["range_finder"]


GROUND = Trajectory().height_m - 5.0  # m: the sensor starts 5 m above flat ground
RANGE_SIGMA = 0.05  # m


@cache
def _range_data() -> SimulatedData:
    """Hover 3 s (levelling), then manoeuvres; a range sample at every barometer stamp."""
    return simulate(Trajectory(hover_time=3.0), SENSORS, 36.0, imu_rate=100.0,
                    rng=np.random.default_rng(81))


def _ranges(data: SimulatedData) -> np.ndarray:
    index = np.searchsorted(data.imu_time, data.barometer_time)
    heights = np.array([ecef_to_geodetic(p)[2] for p in data.truth["p"][index]])
    return heights - GROUND + np.random.default_rng(82).normal(0.0, RANGE_SIGMA, heights.size)


def _range_run(data: SimulatedData, fused: bool
               ) -> tuple[np.ndarray, np.ndarray, EstimationSession]:
    """A session (with the range finder if ``fused``) over ``_range_data`` with GNSS lost
    from 20 s on: height error (ENU up at the trajectory origin, m) and its sigma every 0.1 s
    of the outage's second half (28-36 s)."""
    ranges = _ranges(data)
    truth_up = Trajectory(hover_time=3.0).local(data.imu_time)[0][:, 2]
    sources = build_sources(
        {"range_finder": RangeFinderConfig(ground_height_m=GROUND)} if fused else {})
    session = _session(sources)
    errors: list[float] = []
    sigmas: list[float] = []

    def aid(session_: EstimationSession, j: int) -> None:
        session_.aid("range_finder", round(data.barometer_time[j] * 1e9), range_m=ranges[j],
                     variance=RANGE_SIGMA**2)

    def record(k: int) -> None:
        if data.imu_time[k] < 28.0 or k % 10:
            return
        estimate = session.estimate()
        errors.append(estimate["position"][2] - truth_up[k])
        sigmas.append(math.sqrt(estimate["position_cov"][2, 2]))

    _stream(session, data, (20.0, math.inf), aid if fused else None, record)
    return np.array(errors), np.array(sigmas), session


@pytest.mark.parametrize("cls", FILTERS)
def test_range_finder_jacobian(cls, range_finder):
    """The plug-in passes the same finite-difference check as the package's sources; its
    ground defaults to the height at ``initialize``."""
    estimate = _estimate(cls, range_finder())
    start_height = ecef_to_geodetic(estimate.nominal()[2])[2]
    assert estimate.sources["range_finder"].ground == start_height
    m = estimate.sources["range_finder"].measurement(0.0, 1.5)
    linear = _check_jacobian(estimate, m, eps=1e-3)
    assert linear.residual[0] == pytest.approx(-1.5, abs=1e-9)
    assert linear.R.tolist() == [[RangeFinderConfig().noise_sigma_m**2]]


def test_a_registered_source_works_through_registry_session_and_counters(range_finder):
    assert REGISTRY["range_finder"].source is range_finder
    with pytest.raises(ValueError, match="already registered"):
        register(RangeFinder, RangeFinderConfig)
    with pytest.raises(ValueError, match="noise_sigma_m"):
        RangeFinderConfig(noise_sigma_m=-1.0)
    (default,) = build_sources({"range_finder": None})
    assert isinstance(default, RangeFinder)
    assert default.config == RangeFinderConfig()
    data = _range_data()
    errors, sigmas, session = _range_run(data, fused=True)
    plain_errors, plain_sigmas, plain = _range_run(data, fused=False)
    samples = data.barometer_time.size
    counts, status = session.counts(), session.filter.aid_status["range_finder"]
    assert counts["range_finder_accepted"] == status.counts["accepted"] > 0.9 * samples
    assert counts["range_finder_before_start"] > 0  # samples before the initializer started
    assert (counts["range_finder_accepted"] + counts["range_finder_before_start"]
            + counts["range_finder_gated"]) == samples == session.received["range_finder"]
    assert session.filter.counts()["range_finder_accepted"] == counts["range_finder_accepted"]
    assert 0.5 < status.nis_mean < 2.0  # 1 dof
    assert "range_finder_nis_mean" in session.diagnostics()[2]
    assert "range_finder_accepted" not in plain.counts()
    # Height through the GNSS outage (its second half): held by the range finder, inside
    # its covariance, where the plain filter drifts.
    assert np.mean(np.abs(errors) < 3.0 * sigmas) >= 0.95
    rms, plain_rms = np.sqrt(np.mean(errors**2)), np.sqrt(np.mean(plain_errors**2))
    assert rms < 0.2 * plain_rms, (rms, plain_rms)
    assert sigmas.max() < 0.1 < plain_sigmas.max()


def test_a_source_delay_applies_each_reading_at_its_stamp_minus_the_delay():
    """A precise barometer (2 cm) whose readings are 0.3 s older than their stamps, in a
    climbing and sinking flight (up to 0.4 m/s): with ``delay_s`` = 0.3 each reading is
    applied at stamp - 0.3 s through the filter history (counted as delayed) and the height
    follows the truth; without it the late readings pull the height 0.3 s behind."""
    delay = 0.3
    data = _range_data()
    truth_up = Trajectory(hover_time=3.0).local(data.imu_time)[0][:, 2]
    late = np.searchsorted(data.imu_time, data.barometer_time - delay)
    heights = np.array([ecef_to_geodetic(p)[2] for p in data.truth["p"][late]])
    heights += np.random.default_rng(83).normal(0.0, 0.02, heights.size)
    spread = {}
    for setting_ in (0.0, delay):
        # An offset that hardly changes: the readings, not the offset, carry the height.
        config = BarometerConfig(offset_sigma_m=0.05, delay_s=setting_)
        session = _session([Barometer(config)])
        stamps: list[float] = []
        errors: list[float] = []

        def aid(session_: EstimationSession, j: int, stamps_: list[float] = stamps) -> None:
            if data.barometer_time[j] > 1.0:  # the history holds the last 0.3 s by then
                session_.aid("barometer", round(data.barometer_time[j] * 1e9),
                             height_m=heights[j], height_variance_m2=0.02**2)
                stamps_.append(data.barometer_time[j])

        def record(k: int, session_: EstimationSession = session,
                   errors_: list[float] = errors) -> None:
            if data.imu_time[k] > 10.0 and k % 10 == 0:
                errors_.append(session_.estimate()["position"][2] - truth_up[k])

        _stream(session, data, aid=aid, on_imu=record)
        status = session.filter.aid_status["barometer"]
        assert status.last_time == pytest.approx(stamps[-1] - setting_, abs=1e-9)
        assert (status.counts["delayed"] > 0.9 * len(stamps)) == (setting_ > 0.0)
        # The spread about the mean: b0 keeps the first reading's error (a constant).
        spread[setting_] = float(np.std(errors))
    assert spread[delay] < 0.03  # m; measured 0.018 with the delay, 0.082 without
    assert spread[0.0] > 2.0 * spread[delay]
