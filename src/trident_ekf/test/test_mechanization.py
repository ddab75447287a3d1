"""Earth model, kinematics (18)-(20), pure-INS drift and integrator order (trident-ekf.md T1-T3)."""

from __future__ import annotations

import numpy as np
import pytest

from mav_geometry.nilpotent import TRIDENT
from trident_ekf.core.earth import (
    EARTH_RATE,
    ecef_to_geodetic,
    geodetic_to_ecef,
    gravity_ecef,
    gravity_gradient,
    gravity_xyz,
)
from trident_ekf.core.mechanization import (
    ConventionalIntegrator,
    TridentIntegrator,
    trident_derivative,
)
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

AGILE = Trajectory(amplitude_m=(200.0, 150.0, 20.0), period_s=(10.0, 7.0, 9.0),
                   velocity_enu=(10.0, 5.0, 1.0), euler_amplitude_rad=(0.5, 0.4, 1.0),
                   euler_period_s=(3.0, 4.0, 5.0))


def test_plumb_bob_gravity_magnitude_equator_and_pole():
    equator = np.linalg.norm(gravity_xyz(*geodetic_to_ecef(0.0, 0.0, 0.0)))
    pole = np.linalg.norm(gravity_xyz(*geodetic_to_ecef(90.0, 0.0, 0.0)))
    # Normal gravity (Somigliana): 9.7803 m/s^2 at the equator, 9.8322 m/s^2 at the pole.
    assert equator == pytest.approx(9.7803, abs=2e-3)
    assert pole == pytest.approx(9.8322, abs=2e-3)


def test_plumb_bob_gravity_is_along_the_ellipsoid_normal():
    lat, lon = np.radians(-34.6), np.radians(-58.4)
    up = np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    g = np.array(gravity_xyz(*geodetic_to_ecef(-34.6, -58.4, 0.0)))
    assert np.degrees(np.arccos(-g @ up / np.linalg.norm(g))) < 0.01


def test_gravity_gradient_matches_finite_differences():
    p = geodetic_to_ecef(45.0, 10.0, 100.0)
    eps = 1.0
    numeric = np.array([(gravity_ecef(p + eps * e) - gravity_ecef(p - eps * e)) / (2 * eps)
                        for e in np.eye(3)]).T
    assert np.allclose(gravity_gradient(p), numeric, atol=2e-8)  # J2 part left out


def test_geodetic_round_trip():
    lat, lon, h = ecef_to_geodetic(geodetic_to_ecef(-34.6, -58.4, 25.0))
    assert (lat, lon, h) == pytest.approx((-34.6, -58.4, 25.0), abs=1e-7)


def test_trident_kinematics_equal_the_derivative_of_the_packed_state():
    """(18)-(20) with g-bar = plumb-bob gamma reproduce d/dt of (17) under (5)-(7)."""
    h = 1e-4
    for t in (1.0, 2.5, 4.0):
        truth = AGILE.truth(np.array([t - h, t, t + h]))
        packed = TRIDENT.pack(truth["q"], truth["v"], truth["p"])
        numeric = (packed[2] - packed[0]) / (2 * h)
        model = trident_derivative(packed[1], truth["omega_ib"][1], truth["force"][1])
        assert np.allclose(model, numeric, rtol=1e-6, atol=1e-6)


def _final_errors(rate: float) -> tuple[float, float]:
    data = simulate(AGILE, SensorModel(), 20.0, imu_rate=rate, noise=False)
    truth = data.truth
    trident = TridentIntegrator()
    conventional = ConventionalIntegrator()
    x = tuple(TRIDENT.pack(truth["q"][0], truth["v"][0], truth["p"][0]))
    q, v, p = tuple(truth["q"][0]), tuple(truth["v"][0]), tuple(truth["p"][0])
    dt = 1.0 / rate
    for k in range(1, data.imu_time.size):
        gyro, accel = tuple(data.gyro[k]), tuple(data.accel[k])
        x = trident.step(x, gyro, accel, dt)
        q, v, p = conventional.step(q, v, p, gyro, accel, dt)
    p_trident = TRIDENT.unpack(np.array(x))[2]
    return (float(np.linalg.norm(p_trident - truth["p"][-1])),
            float(np.linalg.norm(np.array(p) - truth["p"][-1])))


def test_both_integrators_are_second_order_in_position():
    errors = np.array([_final_errors(rate) for rate in (50.0, 100.0, 200.0)])
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all((orders > 1.8) & (orders < 2.2)), orders


def _pure_ins_drift(trajectory: Trajectory, duration: float) -> tuple[float, np.ndarray]:
    data = simulate(trajectory, SensorModel(), duration, imu_rate=200.0, noise=False)
    truth = data.truth
    integrator = TridentIntegrator()
    x = tuple(TRIDENT.pack(truth["q"][0], truth["v"][0], truth["p"][0]))
    for k in range(1, data.imu_time.size):
        x = integrator.step(x, tuple(data.gyro[k]), tuple(data.accel[k]), 0.005)
    return float(np.linalg.norm(TRIDENT.unpack(np.array(x))[2] - truth["p"][-1])), np.array(x)


def test_static_pure_ins_drifts_less_than_a_millimetre_in_300_s():
    static = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0))
    drift, x = _pure_ins_drift(static, 300.0)
    assert drift < 1e-3
    assert np.allclose(TRIDENT.norm(x), [1.0, 0.0, 0.0], atol=1e-12)  # still a unit trident


def test_constant_velocity_pure_ins_drifts_less_than_a_millimetre_in_60_s():
    cruise = Trajectory(amplitude_m=(0.0, 0.0, 0.0), velocity_enu=(8.0, 6.0, 0.0),
                        euler_amplitude_rad=(0.0, 0.0, 0.0))
    assert _pure_ins_drift(cruise, 60.0)[0] < 1e-3


def test_static_imu_reads_plus_g_up_and_the_earth_rate():
    static = Trajectory(amplitude_m=(0.0, 0.0, 0.0), euler_amplitude_rad=(0.0, 0.0, 0.0),
                        yaw0_rad=0.0)
    data = simulate(static, SensorModel(), 1.0, noise=False)
    assert data.accel[1][2] == pytest.approx(9.797, abs=0.01)  # REP-145: +g on up (FLU z)
    assert np.linalg.norm(data.gyro[1]) == pytest.approx(EARTH_RATE, rel=1e-9)
