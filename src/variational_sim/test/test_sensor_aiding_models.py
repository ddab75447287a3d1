"""Barometer and magnetometer models (``sensors.barometer``, ``sensors.magnetometer``).

Expected values are written out independently of the models: the ICAO atmosphere from
its textbook constants and published table values, the estimator's pressure-altitude
conversion with its own constants, magnetometer readings from hand-derived axis
permutations (map ENU, base_link FLU) and from numpy matrices. Statistical tests use fixed
seeds; each tolerance is Z standard errors of the estimator for the sample size used
(Z = 5: a correct model fails with probability below 1e-6). For a Gauss-Markov sequence
with n samples and one-step coefficient phi: sample variance SE
sigma^2 sqrt(2 (1 + phi^2) / (n (1 - phi^2))); lag-k autocorrelation SE (Bartlett)
sqrt(((1 + phi^2)(1 - phi^(2k)) / (1 - phi^2) - 2 k phi^(2k)) / n).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from variational_sim.sensors.barometer import (
    Barometer,
    BarometerConfig,
    BarometerReading,
    near_ground_weight,
)
from variational_sim.sensors.base import Fault, Matrix3, Vector3
from variational_sim.sensors.magnetometer import (
    Magnetometer,
    MagnetometerConfig,
    MagnetometerReading,
)

Z = 5.0
G0 = 9.80665
R_AIR = 287.05287  # J/(kg K)
LAPSE = 0.0065  # K/m
GEOID = 47.0
DATUM = 488.0
IDENTITY_ROWS: Matrix3 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
NO_MOUNT = (0.0, 0.0, 0.0, 1.0)


@dataclass
class FakeTruth:
    """The ``SensorTruth`` a sensor reads, set by hand."""

    time_s: float = 0.0
    rotation_rows: Matrix3 = IDENTITY_ROWS
    position_enu: Vector3 = (0.0, 0.0, 0.0)
    velocity_enu: Vector3 = (0.0, 0.0, 0.0)
    angular_velocity_body: Vector3 = (0.0, 0.0, 0.0)
    gravity_enu: Vector3 = (0.0, 0.0, -G0)
    height_above_ground_m: float = 20.0
    rotor_load: float = 0.0

    def accelerations(self) -> tuple[Vector3, Vector3]:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)


def rows_of(matrix: np.ndarray) -> Matrix3:
    return tuple(tuple(float(c) for c in row) for row in matrix)  # type: ignore[return-value]


def yaw_rows(yaw_rad: float) -> Matrix3:
    """base_link -> map for a level vehicle at ENU yaw ``yaw_rad`` (0: body x east)."""
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    return ((c, -s, 0.0), (s, c, 0.0), (0.0, 0.0, 1.0))


def wrap(angle_rad: float) -> float:
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi


# --- barometer -------------------------------------------------------------------------

QUIET_BARO = {"noise_sigma_pa": 0.0, "drift_sigma_pa": 0.0, "ground_effect_pa": 0.0}


def quiet_barometer(seed: int = 0, **overrides) -> Barometer:
    return Barometer(BarometerConfig(**(QUIET_BARO | overrides)), np.random.default_rng(seed),
                     DATUM)


def icao_pressure(msl_height_m: float, p0: float = 101325.0, t0: float = 288.15) -> float:
    """ICAO troposphere, from its textbook constants."""
    return float(p0 * (1.0 - LAPSE * msl_height_m / t0) ** (G0 / (R_AIR * LAPSE)))


def estimator_pressure_altitude(pressure_pa: float) -> float:
    """The estimator's conversion (trident_ekf barometer.pressure_altitude), its constants."""
    return float(288.15 / 0.0065 * (1.0 - (pressure_pa / 101325.0) ** 0.190263))


def test_standard_day_pressure_matches_the_icao_table_and_formula():
    barometer = quiet_barometer()
    # ICAO standard atmosphere table (geopotential altitude -> pressure, Pa).
    table = {0.0: 101325.0, 500.0: 95460.8, 1000.0: 89874.6, 2000.0: 79495.2,
             3000.0: 70108.5}
    for msl_height, expected in table.items():
        truth = FakeTruth(position_enu=(3.0, -4.0, msl_height + GEOID - DATUM))
        reading = barometer.measure(truth)
        assert reading.pressure_pa == pytest.approx(expected, abs=1.0)
        assert reading.pressure_pa == pytest.approx(icao_pressure(msl_height), rel=1e-12)
        assert reading.variance_pa2 == 0.0
        # The estimator's conversion gives ellipsoidal height - geoid height on a standard day.
        ellipsoidal = DATUM + truth.position_enu[2]
        assert estimator_pressure_altitude(reading.pressure_pa) == pytest.approx(
            ellipsoidal - GEOID, abs=0.01)
        assert barometer.report_values()["offset_m"] == pytest.approx(-GEOID, abs=0.01)


def test_other_day_gives_the_icao_pressure_of_that_day_and_a_height_offset():
    day: dict[str, Any] = {"sea_level_pressure_pa": 102325.0, "sea_level_temperature_k": 303.15}
    barometer = quiet_barometer(**day)
    for up in (-50.0, 0.0, 120.0):
        reading = barometer.measure(FakeTruth(position_enu=(0.0, 0.0, up)))
        expected = icao_pressure(DATUM + up - GEOID, 102325.0, 303.15)
        assert reading.pressure_pa == pytest.approx(expected, rel=1e-12)
        offset = estimator_pressure_altitude(reading.pressure_pa) - (DATUM + up)
        assert barometer.report_values()["offset_m"] == pytest.approx(offset, abs=0.01)
        # +10 hPa reads about 82 m low; the column 15 K warmer than standard a further
        # ~5 % of the height above sea level (22 m at 441 m): -104 m here, +-6 m over
        # these heights.
        assert -GEOID - 112.0 < offset < -GEOID - 100.0


def test_pressure_gradient_is_minus_rho_g():
    days: list[dict[str, Any]] = [{}, {"sea_level_pressure_pa": 99000.0,
                                       "sea_level_temperature_k": 270.0}]
    for day in days:
        barometer = quiet_barometer(**day)
        p0 = day.get("sea_level_pressure_pa", 101325.0)
        t0 = day.get("sea_level_temperature_k", 288.15)
        for up in (0.0, 800.0):
            low = barometer.measure(FakeTruth(position_enu=(0.0, 0.0, up - 0.5)))
            high = barometer.measure(FakeTruth(position_enu=(0.0, 0.0, up + 0.5)))
            msl = DATUM + up - GEOID
            temperature = t0 - LAPSE * msl
            density = icao_pressure(msl, p0, t0) / (R_AIR * temperature)
            gradient = high.pressure_pa - low.pressure_pa
            assert gradient == pytest.approx(-density * G0, rel=1e-5)
            assert 1.0 < density < 1.4


def test_white_noise_has_the_configured_sigma_and_is_reported_as_variance():
    sigma, n = 3.0, 20000
    barometer = quiet_barometer(seed=7, noise_sigma_pa=sigma)
    truth = FakeTruth()
    readings = []
    for k in range(n):
        truth.time_s = k * 0.02
        readings.append(barometer.measure(truth))
    assert all(r.variance_pa2 == sigma**2 for r in readings)
    error = np.array([r.pressure_pa for r in readings]) - icao_pressure(DATUM - GEOID)
    assert abs(error.mean()) < Z * sigma / math.sqrt(n)
    assert error.std() == pytest.approx(sigma, rel=Z / math.sqrt(2.0 * n))
    correlation = float(np.sum(error[1:] * error[:-1]) / np.sum(error**2))
    assert abs(correlation) < Z / math.sqrt(n)


def drift_series(seed: int, interval_s: float, n: int, sigma: float,
                 tau: float) -> np.ndarray:
    barometer = quiet_barometer(seed=seed, drift_sigma_pa=sigma, drift_correlation_time_s=tau)
    truth = FakeTruth()
    true_pressure = icao_pressure(DATUM - GEOID)
    series = np.empty(n)
    for k in range(n):
        truth.time_s = k * interval_s
        series[k] = barometer.measure(truth).pressure_pa - true_pressure
    assert barometer.report_values()["drift_pa"] == pytest.approx(series[-1], abs=1e-6)
    return series


def autocorrelation(x: np.ndarray, lag: int) -> float:
    return float(np.sum(x[lag:] * x[:-lag]) / np.sum(x**2))


def variance_standard_error(phi: float, n: int) -> float:
    """Relative standard error of the mean square of n samples of an AR(1) with lag-one
    correlation ``phi``."""
    return math.sqrt(2.0 * (1.0 + phi**2) / (n * (1.0 - phi**2)))


def test_drift_is_gauss_markov_with_the_configured_sigma_and_correlation_time():
    sigma, tau, interval, n = 10.0, 1.0, 0.02, 200_000
    drift = drift_series(3, interval, n, sigma, tau)
    phi = math.exp(-interval / tau)
    assert float(np.mean(drift**2)) == pytest.approx(
        sigma**2, rel=Z * variance_standard_error(phi, n))
    lag = round(tau / interval)  # one correlation time: e^-1
    decay = phi ** (2 * lag)
    lag_se = math.sqrt(((1 + phi**2) * (1 - decay) / (1 - phi**2) - 2 * lag * decay) / n)
    assert autocorrelation(drift, lag) == pytest.approx(math.exp(-1.0), abs=Z * lag_se)


def test_drift_keeps_its_law_at_a_coarse_call_interval():
    # Exact discretisation over the actual interval: half a correlation time per call.
    sigma, tau, interval, n = 10.0, 1.0, 0.5, 50_000
    drift = drift_series(4, interval, n, sigma, tau)
    phi = math.exp(-interval / tau)
    assert float(np.mean(drift**2)) == pytest.approx(
        sigma**2, rel=Z * variance_standard_error(phi, n))
    assert autocorrelation(drift, 1) == pytest.approx(phi, abs=Z * math.sqrt((1 - phi**2) / n))


def test_ground_effect_reads_high_pressure_low_height_and_fades_with_height():
    barometer = quiet_barometer(ground_effect_pa=20.0, ground_effect_height_m=1.0)
    true_pressure = icao_pressure(DATUM - GEOID)

    def excess(height_above_ground: float, load: float) -> float:
        truth = FakeTruth(height_above_ground_m=height_above_ground, rotor_load=load)
        reading = barometer.measure(truth)
        assert barometer.report_values()["ground_effect_pa"] == pytest.approx(
            reading.pressure_pa - true_pressure, abs=1e-6)
        return reading.pressure_pa - true_pressure

    at_ground = excess(0.0, 0.5)
    assert at_ground == pytest.approx(10.0, abs=1e-6)  # 20 Pa x load 0.5
    # Pressure high = height low, as the estimator sees it.
    reading = barometer.measure(FakeTruth(height_above_ground_m=0.0, rotor_load=0.5))
    assert estimator_pressure_altitude(reading.pressure_pa) < DATUM - GEOID - 0.5
    heights = [0.0, 0.1, 0.3, 0.5, 0.8, 0.99]
    values = [excess(h, 0.5) for h in heights]
    assert all(a > b > 0.0 for a, b in itertools.pairwise(values))
    assert excess(0.5, 0.5) == pytest.approx(10.0 * 0.25, abs=1e-6)  # (1 - h/H)^2
    assert excess(1.0, 0.5) == 0.0
    assert excess(5.0, 1.0) == 0.0
    assert excess(0.0, 0.0) == 0.0  # rotors off
    assert excess(0.2, 1.0) == pytest.approx(2.0 * excess(0.2, 0.5), rel=1e-9)
    off = quiet_barometer(ground_effect_pa=20.0, ground_effect_height_m=0.0)
    assert off.measure(FakeTruth(height_above_ground_m=0.0, rotor_load=1.0)).pressure_pa == (
        pytest.approx(true_pressure, abs=1e-9))


def test_near_ground_weight():
    assert near_ground_weight(-0.1, 2.0) == 1.0
    assert near_ground_weight(0.0, 2.0) == 1.0
    assert near_ground_weight(1.0, 2.0) == pytest.approx(0.25)
    assert near_ground_weight(2.0, 2.0) == 0.0
    assert near_ground_weight(0.0, 0.0) == 0.0


def test_offset_fault_only_inside_its_window():
    barometer = quiet_barometer()
    barometer.inject(Fault("offset_pa", 1.0, 2.0, (50.0,)))
    true_pressure = icao_pressure(DATUM - GEOID)
    for time_s, expected in ((0.5, 0.0), (1.0, 50.0), (1.98, 50.0), (2.0, 0.0), (3.0, 0.0)):
        reading = barometer.measure(FakeTruth(time_s=time_s))
        assert reading.pressure_pa - true_pressure == pytest.approx(expected, abs=1e-6)
        assert barometer.report_values()["fault_pa"] == expected
    with pytest.raises(ValueError, match="unknown fault kind"):
        barometer.inject(Fault("spike", 0.0, 1.0, (1.0,)))
    with pytest.raises(ValueError, match="offset_pa"):
        barometer.inject(Fault("offset_pa", 0.0, 1.0, (1.0, 2.0)))
    barometer.reset()
    assert barometer.faults == []


def barometer_run(barometer: Barometer, n: int = 200) -> list[float]:
    truth = FakeTruth(height_above_ground_m=0.3, rotor_load=0.4)
    values = []
    for k in range(n):
        truth.time_s = k * 0.02
        truth.position_enu = (0.0, 0.0, 0.01 * k)
        values.append(barometer.measure(truth).pressure_pa)
    return values


def test_barometer_is_reproducible_from_its_seed():
    first = barometer_run(Barometer(BarometerConfig(), np.random.default_rng(11), DATUM))
    second = barometer_run(Barometer(BarometerConfig(), np.random.default_rng(11), DATUM))
    other = barometer_run(Barometer(BarometerConfig(), np.random.default_rng(12), DATUM))
    assert first == second
    assert first != other
    barometer = Barometer(BarometerConfig(), np.random.default_rng(11), DATUM)
    barometer_run(barometer)
    barometer.reset(np.random.default_rng(11))
    assert barometer_run(barometer) == first


def test_barometer_set_error_model_keeps_the_drift_and_refuses_a_new_rate():
    barometer = quiet_barometer(seed=5, drift_sigma_pa=10.0, drift_correlation_time_s=1e6)
    barometer.measure(FakeTruth(time_s=0.0))
    drift = barometer.report_values()["drift_pa"]
    assert drift != 0.0
    barometer.set_error_model(BarometerConfig(**(QUIET_BARO | {
        "drift_sigma_pa": 10.0, "drift_correlation_time_s": 1e6, "noise_sigma_pa": 1.0})))
    reading = barometer.measure(FakeTruth(time_s=0.02))
    assert reading.variance_pa2 == 1.0
    assert barometer.report_values()["drift_pa"] == pytest.approx(drift, abs=0.05)
    with pytest.raises(ValueError, match="rate_hz"):
        barometer.set_error_model(BarometerConfig(rate_hz=20.0))
    with pytest.raises(ValueError, match="before the previous"):
        barometer.measure(FakeTruth(time_s=0.01))


@pytest.mark.parametrize(("field", "value"), [
    ("rate_hz", 0.0), ("latency_s", -0.1), ("noise_sigma_pa", -1.0),
    ("sea_level_pressure_pa", 50000.0), ("sea_level_temperature_k", math.nan),
    ("geoid_height_m", 500.0), ("drift_sigma_pa", -1.0), ("drift_correlation_time_s", 0.0),
    ("ground_effect_pa", math.inf), ("ground_effect_height_m", -1.0),
])
def test_barometer_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        BarometerConfig(**{field: value})


@pytest.mark.parametrize("config_class", [BarometerConfig, MagnetometerConfig])
def test_every_config_field_is_a_documented_setting_with_a_unit(config_class):
    for item in fields(config_class):
        assert item.metadata["doc"], item.name
        assert item.metadata["unit"], item.name
        default = getattr(config_class(), item.name)
        if isinstance(default, tuple):
            assert all(isinstance(c, float) for c in default), item.name


def header_message(**body) -> SimpleNamespace:
    header = SimpleNamespace(stamp=SimpleNamespace(sec=0, nanosec=0), frame_id="")
    return SimpleNamespace(header=header, **body)


def test_barometer_fills_a_fluid_pressure_message():
    barometer = Barometer(BarometerConfig(), np.random.default_rng(0), DATUM)
    (output,) = barometer.outputs
    assert (output.topic, output.msgtype, output.frame_id) == (
        "barometer/pressure", "sensor_msgs/msg/FluidPressure", "base_link")
    assert barometer.rate_hz == 50.0
    assert barometer.latency_s == 0.0
    message = header_message(fluid_pressure=0.0, variance=0.0)
    published = barometer.fill(BarometerReading(12.345678901, 95000.5, 9.0), [message])
    assert published == (True,)
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (12, 345678901)
    assert message.header.frame_id == ""  # the shell sets the frame, once
    assert message.fluid_pressure == 95000.5
    assert message.variance == 9.0


# --- magnetometer ----------------------------------------------------------------------

QUIET_MAG = {"noise_sigma_T": 0.0}
NORTH, EAST, DOWN = MagnetometerConfig().earth_field_ned_T


def quiet_magnetometer(seed: int = 0, mount=NO_MOUNT, **overrides) -> Magnetometer:
    return Magnetometer(MagnetometerConfig(**(QUIET_MAG | overrides)),
                        np.random.default_rng(seed), mount)


def field_of(magnetometer: Magnetometer, **truth) -> np.ndarray:
    return np.array(magnetometer.measure(FakeTruth(**truth)).field_T)


def test_default_earth_field_is_the_wmm_field_of_the_default_site():
    horizontal = math.hypot(NORTH, EAST)
    assert math.degrees(math.atan2(EAST, NORTH)) == pytest.approx(3.55, abs=0.01)
    assert math.degrees(math.atan2(DOWN, horizontal)) == pytest.approx(63.5, abs=0.05)
    assert math.hypot(horizontal, DOWN) == pytest.approx(48.4e-6, abs=0.05e-6)


def test_level_reading_is_the_ned_field_in_flu_axes():
    magnetometer = quiet_magnetometer()
    # Yaw 0: x east, y north, z up.
    np.testing.assert_allclose(field_of(magnetometer), [EAST, NORTH, -DOWN], atol=1e-18)
    # Yaw 90 deg: x north, y west, z up.
    np.testing.assert_allclose(field_of(magnetometer, rotation_rows=yaw_rows(math.pi / 2)),
                               [NORTH, -EAST, -DOWN], atol=1e-18)
    # Yaw 180 deg: x west, y south.
    np.testing.assert_allclose(field_of(magnetometer, rotation_rows=yaw_rows(math.pi)),
                               [-EAST, -NORTH, -DOWN], atol=1e-18)


def test_rolled_vehicle_and_mounted_imu():
    # Roll +90 deg about x at yaw 0: body y points up, body z points south.
    rolled = ((1.0, 0.0, 0.0), (0.0, 0.0, -1.0), (0.0, 1.0, 0.0))
    np.testing.assert_allclose(field_of(quiet_magnetometer(), rotation_rows=rolled),
                               [EAST, -DOWN, -NORTH], atol=1e-18)
    # IMU upside down (180 deg about x): imu y = -body y, imu z = -body z.
    upside_down = quiet_magnetometer(mount=(1.0, 0.0, 0.0, 0.0))
    np.testing.assert_allclose(field_of(upside_down), [EAST, -NORTH, DOWN], atol=1e-18)
    # IMU turned 90 deg about z: imu x = body y, imu y = -body x.
    s = math.sqrt(0.5)
    turned = quiet_magnetometer(mount=(0.0, 0.0, s, s))
    np.testing.assert_allclose(field_of(turned), [NORTH, -EAST, -DOWN], atol=1e-17)
    # General attitude and mount against numpy matrices: M^T R^T e_enu.
    mount = Q.from_rotation_vector([0.2, -0.4, 0.9])
    R = Q.to_matrix(Q.from_rotation_vector([0.3, -0.25, 2.0]))
    expected = Q.to_matrix(mount).T @ R.T @ np.array([EAST, NORTH, -DOWN])
    general = quiet_magnetometer(mount=tuple(float(c) for c in mount))
    np.testing.assert_allclose(field_of(general, rotation_rows=rows_of(R)), expected,
                               atol=1e-17)


def test_heading_from_a_level_reading_recovers_the_yaw():
    config = MagnetometerConfig()
    magnetometer = Magnetometer(config, np.random.default_rng(2), NO_MOUNT)
    declination = math.atan2(EAST, NORTH)
    # Per-sample heading noise: sigma / horizontal field.
    tolerance = Z * config.noise_sigma_T / math.hypot(NORTH, EAST)
    for yaw_deg in (-170.0, -90.0, -30.0, 0.0, 45.0, 135.0, 180.0):
        yaw = math.radians(yaw_deg)
        bx, by, _ = field_of(magnetometer, rotation_rows=yaw_rows(yaw))
        # Magnetic north lies at ENU angle 90 deg - declination; the body sees it at that
        # angle minus the yaw.
        estimate = math.pi / 2 - declination - math.atan2(by, bx)
        assert abs(wrap(estimate - yaw)) < tolerance


def test_hard_and_soft_iron():
    soft = (1.1, 0.05, 0.0, -0.03, 0.9, -0.02, 0.01, 0.04, 1.0)  # not symmetric
    hard = (1e-6, -2e-6, 3e-6)
    magnetometer = quiet_magnetometer(soft_iron=soft, hard_iron_T=hard)
    R = Q.to_matrix(Q.from_rotation_vector([0.1, 0.2, 0.7]))
    earth_body = R.T @ np.array([EAST, NORTH, -DOWN])
    expected = np.reshape(soft, (3, 3)) @ earth_body + np.array(hard)
    np.testing.assert_allclose(field_of(magnetometer, rotation_rows=rows_of(R)), expected,
                               atol=1e-17)
    disturbance = magnetometer.report_values()["disturbance_T"]
    assert disturbance == pytest.approx(float(np.linalg.norm(expected - earth_body)), rel=1e-9)


def test_motor_interference_scales_with_rotor_load():
    k = (2e-6, 0.0, -5e-6)
    magnetometer = quiet_magnetometer(motor_interference_T=k)
    base = field_of(magnetometer, rotor_load=0.0)
    np.testing.assert_allclose(base, [EAST, NORTH, -DOWN], atol=1e-18)
    assert magnetometer.report_values()["disturbance_T"] == 0.0
    for load in (0.25, 0.5, 1.0):
        np.testing.assert_allclose(field_of(magnetometer, rotor_load=load) - base,
                                   load * np.array(k), atol=1e-18)
        assert magnetometer.report_values()["disturbance_T"] == pytest.approx(
            load * math.hypot(*k), rel=1e-9)


def test_ground_disturbance_fades_with_height_and_its_heading_error():
    disturbance_enu = (5e-6, 0.0, 0.0)  # eastward, map ENU
    magnetometer = quiet_magnetometer(ground_disturbance_T=disturbance_enu,
                                      ground_disturbance_height_m=2.0)
    earth = np.array([EAST, NORTH, -DOWN])
    yaw = math.radians(30.0)
    rows = yaw_rows(yaw)
    R = np.array(rows)
    for height, weight in ((0.0, 1.0), (1.0, 0.25), (2.0, 0.0), (10.0, 0.0)):
        reading = field_of(magnetometer, rotation_rows=rows, height_above_ground_m=height)
        expected = R.T @ (earth + weight * np.array(disturbance_enu))
        np.testing.assert_allclose(reading, expected, atol=1e-18)
    # At the ground: the heading computed from the reading is off by heading_error_deg.
    reading = field_of(magnetometer, rotation_rows=rows, height_above_ground_m=0.0)
    report = magnetometer.report_values()
    assert report["disturbance_T"] == pytest.approx(5e-6, rel=1e-9)
    estimate = math.pi / 2 - math.atan2(EAST, NORTH) - math.atan2(reading[1], reading[0])
    assert math.degrees(wrap(estimate - yaw)) == pytest.approx(report["heading_error_deg"],
                                                               abs=1e-9)
    # An eastward pull turns the field clockwise (seen from above): yaw reads high.
    assert 10.0 < report["heading_error_deg"] < 15.0


def test_field_offset_fault_only_inside_its_window():
    magnetometer = quiet_magnetometer()
    offset = (1e-5, -2e-6, 0.0)
    magnetometer.inject(Fault("field_offset_T", 1.0, 2.0, offset))
    earth = np.array([EAST, NORTH, -DOWN])
    for time_s, active in ((0.5, False), (1.0, True), (1.5, True), (2.0, False)):
        reading = field_of(magnetometer, time_s=time_s)
        np.testing.assert_allclose(reading - earth, np.array(offset) if active else 0.0,
                                   atol=1e-18)
        expected = math.hypot(*offset) if active else 0.0
        assert magnetometer.report_values()["disturbance_T"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="field_offset_T"):
        magnetometer.inject(Fault("field_offset_T", 0.0, 1.0, (1.0,)))


def magnetometer_run(magnetometer: Magnetometer, n: int = 100) -> list[Vector3]:
    values = []
    for k in range(n):
        truth = FakeTruth(time_s=0.02 * k, rotation_rows=yaw_rows(0.01 * k), rotor_load=0.3)
        values.append(magnetometer.measure(truth).field_T)
    return values


def test_magnetometer_is_reproducible_from_its_seed():
    def make(seed: int) -> Magnetometer:
        return Magnetometer(MagnetometerConfig(), np.random.default_rng(seed), NO_MOUNT)

    first = magnetometer_run(make(21))
    assert first == magnetometer_run(make(21))
    assert first != magnetometer_run(make(22))
    magnetometer = make(21)
    magnetometer_run(magnetometer)
    magnetometer.reset(np.random.default_rng(21))
    assert magnetometer_run(magnetometer) == first


def test_magnetometer_noise_sigma_and_set_error_model():
    magnetometer = Magnetometer(MagnetometerConfig(noise_sigma_T=3e-7),
                                np.random.default_rng(9), NO_MOUNT)
    n = 5000
    readings = np.array([field_of(magnetometer) for _ in range(n)])
    error = readings - np.array([EAST, NORTH, -DOWN])
    np.testing.assert_allclose(error.std(axis=0), 3e-7, rtol=Z / math.sqrt(2.0 * n))
    magnetometer.set_error_model(MagnetometerConfig(noise_sigma_T=1e-6))
    reading = magnetometer.measure(FakeTruth())
    assert reading.covariance_diagonal_T2 == pytest.approx((1e-12,) * 3)
    with pytest.raises(ValueError, match="latency_s"):
        magnetometer.set_error_model(MagnetometerConfig(latency_s=0.1))


def test_magnetometer_fills_a_magnetic_field_message():
    magnetometer = Magnetometer(MagnetometerConfig(), np.random.default_rng(0), NO_MOUNT)
    (output,) = magnetometer.outputs
    assert (output.topic, output.msgtype, output.frame_id) == (
        "magnetic_field", "sensor_msgs/msg/MagneticField", "imu_link")
    message = header_message(magnetic_field=SimpleNamespace(x=0.0, y=0.0, z=0.0),
                             magnetic_field_covariance=[0.0] * 9)
    reading = magnetometer.measure(FakeTruth(time_s=3.5))
    assert magnetometer.fill(reading, [message]) == (True,)
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (3, 500_000_000)
    assert message.header.frame_id == ""  # the shell sets the frame, once
    field = message.magnetic_field
    assert (field.x, field.y, field.z) == reading.field_T
    variance = 3e-7**2
    np.testing.assert_allclose(np.reshape(message.magnetic_field_covariance, (3, 3)),
                               np.eye(3) * variance, rtol=1e-12, atol=0.0)
    other = MagnetometerReading(4.0, (1e-6, 2e-6, 3e-6), (1e-12, 2e-12, 3e-12))
    magnetometer.fill(other, [message])
    np.testing.assert_allclose(np.asarray(message.magnetic_field_covariance)[[0, 4, 8]],
                               [1e-12, 2e-12, 3e-12], rtol=1e-12)


@pytest.mark.parametrize(("field", "value"), [
    ("rate_hz", -1.0), ("noise_sigma_T", -1e-7), ("earth_field_ned_T", (2e-4, 0.0, 0.0)),
    ("hard_iron_T", (0.0, 0.0)), ("motor_interference_T", (0.0, math.nan, 0.0)),
    ("ground_disturbance_T", (0.0, 0.0, 0.0, 0.0)), ("ground_disturbance_height_m", -1.0),
    ("soft_iron", (1.0, 0.0, 0.0)), ("soft_iron", (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0)),
    ("soft_iron", (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0)),
])
def test_magnetometer_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        MagnetometerConfig(**{field: value})


def test_magnetometer_rejects_a_non_unit_mount():
    with pytest.raises(ValueError, match="mount_rotation_xyzw"):
        Magnetometer(MagnetometerConfig(), np.random.default_rng(0), (0.0, 0.0, 0.0, 2.0))
