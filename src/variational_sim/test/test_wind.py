"""Wind model (mean, 1-cosine gusts, Dryden turbulence) and the plant's air-relative drag."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy.integrate import quad

from mav_dynamics.vehicle_file import load_vehicle, parse_vehicle
from mav_geometry import quaternion as Q
from mav_ros_common.resources import find_named_file
from variational_sim.vehicle_sim.plant import MultirotorPlant
from variational_sim.vehicle_sim.wind import (
    FEET,
    MAX_HEIGHT_M,
    DrydenParameters,
    Gust,
    WindConfig,
    WindField,
    dryden_parameters,
    filter_coefficients,
)

HEXAROTOR = find_named_file("hexarotor", "vehicles")
TWO_WINGS = find_named_file("quadrotor_two_wings", "vehicles")
H = 1e-3


def series(field: WindField, steps: int, height: float, airspeed: float,
           step: float | None = None) -> np.ndarray:
    """``velocity`` at ``k * step`` for k = 0 .. steps-1, shape (steps, 3)."""
    step = field.step_s if step is None else step
    return np.array([field.velocity(k * step, height, airspeed) for k in range(steps)])


def autocorrelation(x: np.ndarray, lag: int) -> float:
    x = x - x.mean()
    return float(x[:-lag] @ x[lag:] / (x @ x))


# -- configuration ----------------------------------------------------------------------

@pytest.mark.parametrize(("make", "match"), [
    (lambda: WindConfig(mean_enu_mps=(1.0, math.nan, 0.0)), r"WindConfig\.mean_enu_mps = "),
    (lambda: WindConfig(mean_enu_mps=(1.0, 2.0)), r"WindConfig\.mean_enu_mps = \(1\.0, 2\.0\)"),
    (lambda: WindConfig(mean_enu_mps=(150.0, 0.0, 0.0)), r"WindConfig\.\|mean_enu_mps\| = 150"),
    (lambda: WindConfig(turbulence_w20_mps=-1.0),
     r"WindConfig\.turbulence_w20_mps = -1\.0 is invalid: allowed \[0\.0, 50\.0\]"),
    (lambda: WindConfig(turbulence_sigma_horizontal_mps=math.inf),
     r"WindConfig\.turbulence_sigma_horizontal_mps = inf"),
    (lambda: WindConfig(turbulence_w20_mps=5.0, turbulence_sigma_horizontal_mps=1.0),
     r"turbulence_w20_mps = 5\.0 and .*turbulence_sigma_horizontal_mps = 1\.0 .*at most one"),
    (lambda: WindConfig(min_height_m=0.0), r"WindConfig\.min_height_m = 0\.0"),
    (lambda: WindConfig(min_speed_mps=0.0), r"WindConfig\.min_speed_mps = 0\.0"),
    (lambda: WindConfig(gusts=((1.0, 2.0, (1.0, 0.0, 0.0)),)),
     r"WindConfig\.gusts\[0\] = \(1\.0, 2\.0"),
    (lambda: Gust(1.0, 0.0, (1.0, 0.0, 0.0)),
     r"Gust\.duration_s = 0\.0 is invalid: allowed \[0\.001, 100000\.0\]"),
    (lambda: Gust(-1.0, 1.0, (1.0, 0.0, 0.0)), r"Gust\.start_s = -1\.0"),
    (lambda: Gust(1.0, 1.0, (1.0, 0.0)), r"Gust\.amplitude_enu_mps = \(1\.0, 0\.0\)"),
    (lambda: WindField(WindConfig(), np.random.default_rng(0), 0.0), r"WindField\.step_s = 0\.0"),
])
def test_bad_configuration_names_the_field_value_and_range(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_vectors_given_as_lists_become_float_tuples():
    config = WindConfig(mean_enu_mps=[1, 2, 3],
                        gusts=[Gust(0.0, 1.0, [0, 1, 0])])
    assert config.mean_enu_mps == (1.0, 2.0, 3.0)
    assert config.gusts[0].amplitude_enu_mps == (0.0, 1.0, 0.0)
    assert isinstance(config.gusts, tuple)
    assert not config.turbulent


# -- mean wind and gusts ------------------------------------------------------------------

def test_mean_wind_alone_is_constant_whatever_the_time_height_and_airspeed():
    field = WindField(WindConfig(mean_enu_mps=(3.0, -4.0, 0.5)), np.random.default_rng(1))
    values = {field.velocity(k * H, height, airspeed)
              for k, (height, airspeed) in enumerate(zip(np.linspace(-5, 500, 2000),
                                                         np.linspace(0, 30, 2000), strict=True))}
    assert values == {(3.0, -4.0, 0.5)}
    assert field.turbulence_enu == (0.0, 0.0, 0.0)


def test_one_minus_cosine_gust_integrates_to_half_amplitude_times_duration_and_peaks_midway():
    mean = np.array([1.0, 0.0, 0.0])
    amplitude = np.array([3.0, -1.5, 0.8])
    gust = Gust(start_s=2.0, duration_s=4.0, amplitude_enu_mps=tuple(amplitude))
    field = WindField(WindConfig(mean_enu_mps=tuple(mean), gusts=(gust,)),
                      np.random.default_rng(0))
    times = np.arange(8001) * H
    gusty = np.array([field.velocity(t, 10.0, 5.0) for t in times]) - mean
    np.testing.assert_allclose(np.trapezoid(gusty, times, axis=0), amplitude * 4.0 / 2.0,
                               rtol=1e-9)
    peak = np.argmax(np.linalg.norm(gusty, axis=1))
    assert times[peak] == pytest.approx(4.0)
    np.testing.assert_allclose(gusty[peak], amplitude, rtol=1e-12)
    assert not gusty[times < 2.0].any()
    assert not gusty[times > 6.0].any()
    # smooth start: 1 - cos rises quadratically, (pi tau / d)^2 after tau = 0.1 s
    np.testing.assert_allclose(gusty[2100], amplitude * (1 - math.cos(2 * math.pi * 0.025)) / 2,
                               rtol=1e-9)
    np.testing.assert_allclose(gust.velocity(3.0), amplitude / 2, rtol=1e-12)


def test_overlapping_gusts_add():
    a = Gust(1.0, 2.0, (1.0, 0.0, 0.0))
    b = Gust(1.5, 1.0, (0.0, 2.0, -1.0))
    field = WindField(WindConfig(gusts=(b, a)), np.random.default_rng(0))
    for t in (0.5, 1.2, 1.7, 2.0, 2.6, 3.5):
        np.testing.assert_allclose(field.velocity(t, 5.0, 0.0),
                                   np.add(a.velocity(t), b.velocity(t)), atol=1e-15)
        assert field.deterministic_velocity(t) == field.velocity(t, 5.0, 0.0)


# -- Dryden parameters and discretisation ---------------------------------------------------

def test_dryden_parameters_follow_the_low_altitude_formulas_in_feet():
    w20 = 15.0
    for height_ft in (10.0, 20.0, 100.0, 500.0):
        p = dryden_parameters(height_ft * FEET, w20)
        factor = 0.177 + 0.000823 * height_ft
        assert p.length_w == pytest.approx(height_ft * FEET, rel=1e-12)
        assert p.length_u == p.length_v == pytest.approx(
            height_ft / factor**1.2 * FEET, rel=1e-12)
        assert p.sigma_w == pytest.approx(1.5, rel=1e-12)
        assert p.sigma_u == p.sigma_v == pytest.approx(1.5 / factor**0.4, rel=1e-12)
    # at 1000 ft the model is isotropic: L_u = L_w = h, sigma_u = sigma_w
    top = dryden_parameters(MAX_HEIGHT_M, w20)
    np.testing.assert_allclose(top, (1.5, 1.5, 1.5, MAX_HEIGHT_M, MAX_HEIGHT_M, MAX_HEIGHT_M),
                               rtol=1e-12)
    given = dryden_parameters(50.0, sigma_horizontal_mps=2.0)
    assert given.sigma_u == given.sigma_v == 2.0
    assert given.sigma_w / given.sigma_u == pytest.approx(
        dryden_parameters(50.0, 10.0).sigma_w / dryden_parameters(50.0, 10.0).sigma_u)


def _second_order_matrices(c, offset):
    rho, r, l11, l21, l22 = c[offset:offset + 5]
    phi = rho * np.array([[1.0, 0.0], [r, 1.0]])
    return phi, np.array([[l11, 0.0], [l21, l22]])


@pytest.mark.parametrize("r", [1e-7, 1e-4, 0.02, 0.7, 3.0])
def test_second_order_discretisation_is_exact_at_any_step(r):
    """The sampled covariances of the v/w filters equal Dryden's
    ``sigma^2 (1 - tau / (2 T)) exp(-tau / T)`` at every lag, and the process noise equals
    the integral it discretises (checked by quadrature, no cancellation at small steps)."""
    p = DrydenParameters(1.0, 2.0, 3.0, 1.0, 1.0, 1.0)  # T = L / V = 1 s
    c = filter_coefficients(p, 1.0, r)
    stationary = np.array([[1.0, 0.5], [0.5, 0.5]])
    output = np.array([math.sqrt(3.0), 1.0 - math.sqrt(3.0)]) / math.sqrt(2.0)
    for offset, sigma in ((2, 2.0), (7, 3.0)):
        phi, chol = _second_order_matrices(c, offset)
        noise = chol @ chol.T
        reference = [2.0 * quad(lambda s, n=n: s**n * math.exp(-2 * s), 0.0, r,
                                epsabs=0.0, epsrel=1e-13)[0] for n in (0, 1, 2)]
        np.testing.assert_allclose([noise[0, 0], noise[0, 1], noise[1, 1]], reference,
                                   rtol=1e-9)
        determinant = reference[0] * reference[2] - reference[1] ** 2
        assert chol[1, 1] == pytest.approx(math.sqrt(determinant / reference[0]), rel=1e-6)
        np.testing.assert_allclose(phi @ stationary @ phi.T + noise, stationary,
                                   rtol=1e-12, atol=1e-15)
        assert sigma**2 * output @ stationary @ output == pytest.approx(sigma**2, rel=1e-14)
        for k in (1, 2, 5):
            tau = k * r
            covariance = sigma**2 * output @ np.linalg.matrix_power(phi, k) @ stationary @ output
            assert covariance == pytest.approx(
                sigma**2 * (1 - tau / 2) * math.exp(-tau), rel=1e-10, abs=1e-14)
    phi_u, drive_u = c[:2]
    assert phi_u == pytest.approx(math.exp(-r), rel=1e-14)
    assert phi_u**2 + drive_u**2 == pytest.approx(1.0, rel=1e-14)


def test_dryden_series_has_the_configured_sigmas_and_correlations_along_the_mean_wind():
    """10^4 s of turbulence at 5 m in a (6, 8) m/s wind crossed at 20 m/s, sampled every
    50 ms (T_u = L_u / V = 1.8 s, T_w = 0.25 s): sample sigmas of u (along the wind), v
    (left of it) and w (up) within 5 % of the model's, the normalised autocorrelation at
    lags T and 2 T within 0.05 of exp(-tau/T) for u and (1 - tau/(2T)) exp(-tau/T) for v
    and w, the integral scale of u within 20 % of L_u. Tolerances are >= 4 standard errors
    (spread over 20 seeds: 0.01, 0.013, 0.043); a first-order v, or the u axis not turned
    to the wind, is off by 0.18 at lag T."""
    mean = np.array([6.0, 8.0, 0.0])
    height, speed, step = 5.0, 20.0, 0.05
    field = WindField(WindConfig(mean_enu_mps=tuple(mean), turbulence_w20_mps=15.0),
                      np.random.default_rng(2024), step, step)
    turbulence = series(field, 200_000, height, speed) - mean
    along, left = np.array([0.6, 0.8, 0.0]), np.array([-0.8, 0.6, 0.0])
    u, v, w = turbulence @ along, turbulence @ left, turbulence[:, 2]
    p = dryden_parameters(height, 15.0)
    assert p.sigma_u == pytest.approx(2.91, abs=0.01)
    for x, sigma in ((u, p.sigma_u), (v, p.sigma_v), (w, p.sigma_w)):
        assert np.std(x) == pytest.approx(sigma, rel=0.05)
        assert abs(np.mean(x)) < 0.1 * sigma
    assert abs(np.corrcoef(u, v)[0, 1]) < 0.05
    assert abs(np.corrcoef(u, w)[0, 1]) < 0.05
    for x, length, order in ((u, p.length_u, 1), (v, p.length_v, 2), (w, p.length_w, 2)):
        time_constant = length / speed
        for multiple in (1.0, 2.0):
            lag = round(multiple * time_constant / step)
            tau = lag * step / time_constant
            expected = math.exp(-tau) * (1.0 if order == 1 else 1.0 - tau / 2.0)
            assert autocorrelation(x, lag) == pytest.approx(expected, abs=0.05)
    # integral time scale of u: T (1 - exp(-5)) up to 5 T
    lags = round(5 * p.length_u / speed / step)
    centred = u - u.mean()
    correlation = np.correlate(centred, centred[:-lags], mode="valid") / (centred @ centred)
    assert np.sum(correlation[:lags]) * step * speed == pytest.approx(
        p.length_u * (1 - math.exp(-5)), rel=0.2)


def test_turbulence_time_scale_follows_the_crossing_speed_and_floors():
    """Only V dt / L enters the transition: airspeed 10 m/s at 20 ms steps gives the same
    series as 20 m/s at 10 ms; with no mean wind a zero airspeed uses the floor, and
    heights outside [min_height_m, 304.8 m] are clamped."""
    config = WindConfig(turbulence_sigma_horizontal_mps=1.0)

    def make(step):
        return WindField(config, np.random.default_rng(5), step, step)

    np.testing.assert_allclose(series(make(0.02), 2000, 30.0, 10.0),
                               series(make(0.01), 2000, 30.0, 20.0), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(series(make(0.01), 500, 30.0, 0.0),
                                  series(make(0.01), 500, 30.0, config.min_speed_mps))
    np.testing.assert_array_equal(series(make(0.01), 500, -2.0, 5.0),
                                  series(make(0.01), 500, config.min_height_m, 5.0))
    np.testing.assert_array_equal(series(make(0.01), 500, 2000.0, 5.0),
                                  series(make(0.01), 500, MAX_HEIGHT_M, 5.0))
    # a mean wind of 8 m/s keeps the field moving past a vehicle drifting with the air
    windy = WindConfig(mean_enu_mps=(0.0, 8.0, 0.0), turbulence_sigma_horizontal_mps=1.0)
    np.testing.assert_array_equal(
        series(WindField(windy, np.random.default_rng(5), 0.01, 0.01), 500, 30.0, 0.0),
        series(WindField(windy, np.random.default_rng(5), 0.01, 0.01), 500, 30.0, 8.0))
    # the sigmas follow the height: 2 m/s horizontal, sigma_w by the model's ratio
    high = WindField(config, np.random.default_rng(6), 0.05, 0.05)
    w = series(high, 40_000, 10.0, 30.0)[:, 2]
    assert np.std(w) == pytest.approx(dryden_parameters(10.0, sigma_horizontal_mps=1.0).sigma_w,
                                      rel=0.08)


def test_turbulence_is_held_between_updates_and_reproducible_by_seed():
    config = WindConfig(mean_enu_mps=(2.0, 0.0, 0.0), turbulence_w20_mps=10.0)
    field = WindField(config, np.random.default_rng(42), H, 0.01)
    first = series(field, 3000, 20.0, 4.0)
    changes = np.flatnonzero(np.any(np.diff(first, axis=0) != 0.0, axis=1)) + 1
    np.testing.assert_array_equal(changes, np.arange(10, 3000, 10))  # every 10 ms exactly
    again = WindField(config, np.random.default_rng(42), H, 0.01)
    np.testing.assert_array_equal(series(again, 3000, 20.0, 4.0), first)
    other = WindField(config, np.random.default_rng(43), H, 0.01)
    assert np.abs(series(other, 3000, 20.0, 4.0) - first).max() > 0.1
    field.reset()
    np.testing.assert_array_equal(series(field, 3000, 20.0, 4.0), first)
    # a restart at a later time repeats the same series from there
    field.reset()
    later = np.array([field.velocity(100.0 + k * H, 20.0, 4.0) for k in range(3000)])
    np.testing.assert_array_equal(later, first)


def test_a_skipped_interval_is_one_exact_transition():
    """Calls 5 s apart advance the states by one exact 5 s transition: the sampled lag-1
    correlation of u is exp(-5 V / L_u) = 0.81 (0.004 standard error; advancing by one
    10 ms update per call would give 0.9996)."""
    config = WindConfig(mean_enu_mps=(5.0, 0.0, 0.0), turbulence_w20_mps=15.0)
    field = WindField(config, np.random.default_rng(8), H, 0.01)
    u = np.array([field.velocity(5.0 * k, 20.0, 5.0)[0] for k in range(20_000)])
    length = dryden_parameters(20.0, 15.0).length_u
    assert autocorrelation(u, 1) == pytest.approx(math.exp(-5.0 * 5.0 / length), abs=0.02)


# -- plant in wind ---------------------------------------------------------------------

def hover_speed(plant: MultirotorPlant) -> float:
    return math.sqrt(plant.weight / plant.allocation()[5].sum())


def scaled_drag(factor: float):
    data = yaml.safe_load(HEXAROTOR.read_text())
    data["body"]["drag"]["linear"] = [factor * d for d in data["body"]["drag"]["linear"]]
    return parse_vehicle(data)


@pytest.mark.parametrize("drag_factor", [1.0, 20.0])
def test_hovering_drag_body_drifts_with_the_wind_at_the_time_constant_m_over_d1(drag_factor):
    """Hexarotor with linear drag D1 and its CoM at O, hover thrust, steady wind w: each
    ENU axis follows m dv/dt = D1 (w - v), v = w (1 - exp(-t D1 / m)), level attitude.

    The plant holds the drag of the step's first node, so the nodes follow the explicit
    Euler recursion v_k = w (1 - (1 - h / tau)^k) to round-off, which is the exponential
    to first order in h / tau (relative error t h / (2 tau^2)); the positions are the
    trapezoidal sums of the node velocities."""
    vehicle = scaled_drag(drag_factor)
    plant = MultirotorPlant(vehicle, "dqvi", H)
    wind = np.array([3.0, -2.0, 0.5])
    plant.set_wind(wind)
    plant.reset((0.0, 0.0, 10.0), yaw=0.7)
    speed = hover_speed(plant)
    mass = plant.body.mass
    time_constants = mass / vehicle.drag.linear[3:]
    assert time_constants[0] == pytest.approx(1.62 / (0.06 * drag_factor))
    steps = 8000 if drag_factor > 1.0 else 4000
    for k in range(1, steps + 1):
        plant.step([speed] * plant.rotor_count)
        if k % 1000 == 0:
            t = k * H
            ratio = 1 - H / time_constants
            np.testing.assert_allclose(plant.velocity_enu, wind * (1 - ratio**k),
                                       rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(  # trapezoidal sum of the node velocities
                plant.position, np.array([0, 0, 10]) + wind * (
                    t - time_constants * (1 + ratio) * (1 - ratio**k) / 2), rtol=1e-9)
            decay = np.exp(-t / time_constants)
            # (1 - h/tau)^k = exp(-t/tau) (1 - t h / (2 tau^2) + ...): twice that bound
            tolerance = np.abs(wind * decay) * t * H / time_constants**2 + 1e-12
            assert np.all(np.abs(plant.velocity_enu - wind * (1 - decay)) <= tolerance)
            np.testing.assert_allclose(  # the velocity's error integrates to < |w| h / 2
                plant.position, np.array([0, 0, 10]) + wind * (t - time_constants * (1 - decay)),
                atol=0.5 * H * np.abs(wind).max())
            np.testing.assert_allclose(plant.orientation, Q.from_rotation_vector([0, 0, 0.7]),
                                       atol=1e-9)
            assert np.all(np.abs(plant.air_velocity_enu + wind * decay) <= tolerance)
    if drag_factor > 1.0:  # 8 s is about 6 time constants: moving with the air
        np.testing.assert_allclose(plant.velocity_enu, wind, rtol=5e-3)
    kinetic = 0.5 * mass * float(np.dot(plant.velocity_enu, plant.velocity_enu))
    assert kinetic > 0.05
    assert abs(plant.energy_error()) < 1e-9 * kinetic
    assert np.abs(plant.momentum_error()).max() < 1e-9


def test_drag_and_wings_see_the_air_relative_twist():
    """Moving at v in still air or resting in the wind -R v gives the same aerodynamic
    wrench (wings included), in any attitude."""
    vehicle = load_vehicle(TWO_WINGS)
    orientation = Q.from_rotation_vector([0.3, -0.2, 1.1])
    rotation = Q.to_matrix(orientation)
    omega, velocity = [0.2, -0.1, 0.4], np.array([9.0, 1.5, -0.7])
    speeds = [500.0] * 4

    def wrench(twist, wind):
        plant = MultirotorPlant(vehicle, "dqvi", H)
        plant.set_wind(wind)
        plant.reset((0.0, 0.0, 20.0), twist=twist, orientation=orientation)
        return np.array(plant.applied_wrench(speeds, [0.1] * plant.tilt_count))

    moving = wrench([*omega, *velocity], (0.0, 0.0, 0.0))
    windy = wrench([*omega, 0.0, 0.0, 0.0], -rotation @ velocity)
    np.testing.assert_allclose(windy, moving, rtol=1e-12, atol=1e-12)
    gusty = np.array([4.0, -3.0, 1.0])
    both = wrench([*omega, *(velocity + rotation.T @ gusty)], gusty)
    np.testing.assert_allclose(both, moving, rtol=1e-12, atol=1e-12)
    still = wrench([*omega, 0.0, 0.0, 0.0], (0.0, 0.0, 0.0))
    assert np.abs(moving - still).max() > 0.5  # the aerodynamics matter at 9 m/s


def test_zero_wind_is_the_still_air_path_and_bad_wind_is_rejected():
    vehicle = load_vehicle(TWO_WINGS)

    def run(wind, steps=200):
        plant = MultirotorPlant(vehicle, "dqvi", H)
        if wind is not None:
            plant.set_wind(wind)
        plant.reset((0.0, 0.0, 30.0), twist=(0.1, 0.0, -0.2, 8.0, 1.0, 0.0))
        for _ in range(steps):
            plant.step([550.0] * 4, [0.0] * plant.tilt_count)
        return plant

    reference, zero = run(None), run((0.0, 0.0, 0.0))
    np.testing.assert_array_equal(zero.state.pose, reference.state.pose)
    np.testing.assert_array_equal(zero.state.momentum, reference.state.momentum)
    assert zero.wind_enu == (0.0, 0.0, 0.0)
    windy = run((0.0, 5.0, 0.0))
    assert windy.wind_enu == (0.0, 5.0, 0.0)
    assert np.abs(windy.state.momentum - reference.state.momentum).max() > 1e-3
    # the wind's work on the wings and body enters the balance like any held wrench
    energy_change = windy.body.energy(windy.state) - run(None, 0).body.energy(run(None, 0).state)
    assert abs(energy_change) > 1.0
    assert abs(windy.energy_error()) < 1e-6 * abs(energy_change)
    assert np.abs(windy.momentum_error()).max() < 1e-9
    with pytest.raises(ValueError, match=r"wind velocity_enu = \(1\.0, nan, 0\.0\)"):
        windy.set_wind((1.0, math.nan, 0.0))
    with pytest.raises(ValueError, match="must be 3 finite numbers"):
        windy.set_wind((1.0, 2.0))
    assert windy.wind_enu == (0.0, 5.0, 0.0)
