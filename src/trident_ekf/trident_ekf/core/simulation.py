"""ECEF-consistent trajectory and IMU/GNSS/magnetometer/barometer simulator with known truth.

The vehicle moves along an analytic path in a local ENU tangent frame fixed to the
Earth at a geodetic origin, so positions, velocities, accelerations, attitude and
body rates are exact. The IMU measures the exact specific force and inertial rate
(Earth rotation and J2 plumb-bob gravity included) at the middle of each sample
interval, with the paper's error model: reading = truth - bias - white noise,
random-walk biases. Magnetometer (a field fixed in ECEF) and barometer (ellipsoidal
height) samples, then the optional first-order Gauss-Markov GNSS position error, are
drawn after everything else, so they leave the other outputs of a given seed unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from trident_ekf.core.earth import (
    OMEGA_ECEF,
    ecef_to_geodetic,
    enu_to_ecef_rotation,
    geodetic_to_ecef,
    gravity_ecef,
    ned_to_ecef,
)
from trident_ekf.core.filter import POS, STATE_DIM, ErrorStateFilter, UpdateResult

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Trajectory:
    """Hover until ``hover_time`` s, then smooth manoeuvres (all amplitudes from rest).

    East/north/up: amplitude_m * (1 - cos(w t')), with w = 2 pi / period_s per axis
    (t' = time since the hover ended). Roll, pitch and yaw: yaw0 + amplitude sin(w t').
    A zero amplitude gives a static axis; ``velocity_enu`` adds a constant ground velocity.
    """

    latitude_deg: float = -34.6
    longitude_deg: float = -58.4
    height_m: float = 30.0
    hover_time: float = 0.0
    amplitude_m: tuple[float, float, float] = (20.0, 15.0, 2.0)
    period_s: tuple[float, float, float] = (40.0, 25.0, 30.0)
    velocity_enu: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw0_rad: float = 0.5
    euler_amplitude_rad: tuple[float, float, float] = (0.1, 0.1, 0.6)
    euler_period_s: tuple[float, float, float] = (7.0, 9.0, 30.0)
    origin_ecef: Array = field(init=False, repr=False)
    enu_to_ecef: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "origin_ecef",
            geodetic_to_ecef(self.latitude_deg, self.longitude_deg, self.height_m),
        )
        object.__setattr__(
            self, "enu_to_ecef", enu_to_ecef_rotation(self.latitude_deg, self.longitude_deg)
        )

    def _phase(self, t: Array) -> Array:
        return np.maximum(np.asarray(t, dtype=float) - self.hover_time, 0.0)

    def local(self, t: Array) -> tuple[Array, Array, Array]:
        """ENU position (m), velocity (m/s) and acceleration (m/s^2), shape (N, 3)."""
        tp = self._phase(t)[:, None]
        t_abs = np.asarray(t, dtype=float)[:, None]
        w = 2.0 * np.pi / np.array(self.period_s)
        A = np.array(self.amplitude_m)
        v0 = np.array(self.velocity_enu)
        position = A * (1.0 - np.cos(w * tp)) + v0 * t_abs
        velocity = A * w * np.sin(w * tp) + v0
        acceleration = A * w**2 * np.cos(w * tp) * (tp > 0.0)
        return position, velocity, acceleration

    def euler(self, t: Array) -> tuple[Array, Array]:
        """(roll, pitch, yaw) rad and their rates rad/s, shape (N, 3)."""
        tp = self._phase(t)[:, None]
        w = 2.0 * np.pi / np.array(self.euler_period_s)
        A = np.array(self.euler_amplitude_rad)
        angles = A * np.sin(w * tp) + np.array([0.0, 0.0, self.yaw0_rad])
        rates = A * w * np.cos(w * tp) * (tp > 0.0)
        return angles, rates

    def truth(self, t: Array) -> dict[str, Array]:
        """q body->ECEF, ECEF v, p, a, body rate omega_eb^b and the ideal IMU outputs."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        pos_n, vel_n, acc_n = self.local(t)
        angles, rates = self.euler(t)
        roll, pitch, yaw = angles.T
        droll, dpitch, dyaw = rates.T
        q_nb = quaternion.multiply(
            quaternion.from_rotation_vector(np.outer(yaw, [0.0, 0.0, 1.0])),
            quaternion.multiply(
                quaternion.from_rotation_vector(np.outer(pitch, [0.0, 1.0, 0.0])),
                quaternion.from_rotation_vector(np.outer(roll, [1.0, 0.0, 0.0])),
            ),
        )
        omega_eb = np.stack([
            droll - dyaw * np.sin(pitch),
            dpitch * np.cos(roll) + dyaw * np.sin(roll) * np.cos(pitch),
            -dpitch * np.sin(roll) + dyaw * np.cos(roll) * np.cos(pitch),
        ], axis=-1)
        R = self.enu_to_ecef
        q_en = quaternion.from_matrix(R)
        q = quaternion.multiply(q_en, q_nb)
        p = self.origin_ecef + pos_n @ R.T
        v = vel_n @ R.T
        a = acc_n @ R.T
        C = quaternion.to_matrix(q)
        omega_ib = omega_eb + np.einsum("nji,j->ni", C, OMEGA_ECEF)
        specific = a + 2.0 * np.cross(OMEGA_ECEF, v) - gravity_ecef(p)
        force = np.einsum("nji,nj->ni", C, specific)
        return {"q": q, "v": v, "p": p, "a": a, "omega_eb": omega_eb,
                "omega_ib": omega_ib, "force": force}


@dataclass(frozen=True)
class SensorModel:
    """Noise densities (as FilterConfig), initial bias sigmas, GNSS, magnetometer and
    barometer sigmas, lever arm, and the Earth field at the trajectory origin.

    The GNSS position error is white (``gnss_position_sigma``) plus, when its sigmas are
    > 0, a stationary first-order Gauss-Markov error in ENU axes at the trajectory origin
    (east/north ``gnss_correlated_sigma_horizontal``, up ``gnss_correlated_sigma_vertical``,
    correlation time ``gnss_correlation_time``); the fixes then report the covariance
    white^2 + correlated^2, as receivers do.
    """

    gyro_noise: float = 1e-3  # rad/s/sqrt(Hz)
    accel_noise: float = 2e-2  # m/s^2/sqrt(Hz)
    gyro_bias_walk: float = 1e-5  # rad/s/sqrt(s)
    accel_bias_walk: float = 1e-4  # m/s^2/sqrt(s)
    gyro_bias_sigma: float = 0.005  # rad/s
    accel_bias_sigma: float = 0.05  # m/s^2
    gnss_position_sigma: float = 1.5  # m
    gnss_velocity_sigma: float = 0.1  # m/s
    lever_arm: tuple[float, float, float] = (0.0, 0.0, 0.0)  # m, body
    magnetometer_sigma: float = 2e-7  # T, per axis
    barometer_sigma: float = 0.5  # m
    gnss_correlated_sigma_horizontal: float = 0.0  # m
    gnss_correlated_sigma_vertical: float = 0.0  # m
    gnss_correlation_time: float = 60.0  # s
    # North, east, down (T): WMM near Buenos Aires (about 22.5 uT, inclination -38 deg).
    magnetic_field_ned: tuple[float, float, float] = (1.75e-5, -2.8e-6, -1.39e-5)


@dataclass(frozen=True)
class SimulatedData:
    """IMU samples (row k covers (t_{k-1}, t_k]), GNSS fixes with the position covariance
    they report (ECEF, m^2), magnetometer samples (body axes, T), barometric ellipsoidal
    heights (m) and truth at IMU stamps, including the correlated GNSS position error
    ``gnss_bias`` (m, ENU axes at the trajectory origin; zero without it)."""

    imu_time: Array
    gyro: Array
    accel: Array
    gnss_time: Array
    gnss_position: Array
    gnss_velocity: Array
    truth: dict[str, Array]
    gyro_bias: Array
    accel_bias: Array
    sensors: SensorModel
    magnetometer_time: Array
    magnetometer_field: Array
    barometer_time: Array
    barometer_height: Array
    gnss_position_covariance: Array
    gnss_bias: Array


def simulate(trajectory: Trajectory, sensors: SensorModel, duration: float,
             imu_rate: float = 200.0, gnss_rate: float = 5.0,
             rng: np.random.Generator | None = None, noise: bool = True,
             magnetometer_rate: float = 10.0, barometer_rate: float = 10.0) -> SimulatedData:
    """Sample the trajectory for ``duration`` s: IMU, GNSS, magnetometer and barometer at
    their rates (Hz; the aiding sensors at IMU stamps, a whole number of IMU samples apart)."""
    rates = (imu_rate, gnss_rate, magnetometer_rate, barometer_rate)
    if duration <= 0.0 or min(rates) <= 0.0:
        raise ValueError("duration and all rates must be > 0")
    rng = rng or np.random.default_rng(0)
    dt = 1.0 / imu_rate
    n = round(duration * imu_rate)
    t = np.arange(n + 1, dtype=np.float64) * dt
    truth = trajectory.truth(t)
    mid = trajectory.truth(t[1:] - 0.5 * dt)
    scale = 1.0 if noise else 0.0
    gyro_bias = np.cumsum(
        np.vstack([rng.normal(0, sensors.gyro_bias_sigma, 3) * scale,
                   rng.normal(0, sensors.gyro_bias_walk * np.sqrt(dt), (n, 3)) * scale]), axis=0)
    accel_bias = np.cumsum(
        np.vstack([rng.normal(0, sensors.accel_bias_sigma, 3) * scale,
                   rng.normal(0, sensors.accel_bias_walk * np.sqrt(dt), (n, 3)) * scale]), axis=0)
    gyro = np.zeros((n + 1, 3))
    accel = np.zeros((n + 1, 3))
    gyro[1:] = (mid["omega_ib"] - gyro_bias[1:]
                - rng.normal(0, sensors.gyro_noise / np.sqrt(dt), (n, 3)) * scale)
    accel[1:] = (mid["force"] - accel_bias[1:]
                 - rng.normal(0, sensors.accel_noise / np.sqrt(dt), (n, 3)) * scale)
    def stamp_indices(rate: float) -> NDArray[np.int64]:
        step = round(imu_rate / rate)
        return np.arange(step, n + 1, step)

    index = stamp_indices(gnss_rate)
    lever = np.array(sensors.lever_arm)
    C = quaternion.to_matrix(truth["q"][index])
    antenna_p = truth["p"][index] + C @ lever
    antenna_v = truth["v"][index] + np.einsum(
        "nij,nj->ni", C, np.cross(truth["omega_eb"][index], lever))
    gnss_p = antenna_p + rng.normal(0, sensors.gnss_position_sigma, antenna_p.shape) * scale
    gnss_v = antenna_v + rng.normal(0, sensors.gnss_velocity_sigma, antenna_v.shape) * scale
    mag_index = stamp_indices(magnetometer_rate)
    field_ecef = ned_to_ecef(sensors.magnetic_field_ned, trajectory.latitude_deg,
                             trajectory.longitude_deg)
    field = np.einsum("nji,j->ni", quaternion.to_matrix(truth["q"][mag_index]), field_ecef)
    field += rng.normal(0, sensors.magnetometer_sigma, field.shape) * scale
    baro_index = stamp_indices(barometer_rate)
    height = np.array([ecef_to_geodetic(p)[2] for p in truth["p"][baro_index]])
    height += rng.normal(0, sensors.barometer_sigma, height.shape) * scale
    correlated_sigma = np.array([sensors.gnss_correlated_sigma_horizontal] * 2
                                + [sensors.gnss_correlated_sigma_vertical])
    gnss_bias = np.zeros((n + 1, 3))
    if noise and correlated_sigma.any():
        gnss_bias = _gauss_markov(rng, correlated_sigma, sensors.gnss_correlation_time, dt, n)
        gnss_p = gnss_p + gnss_bias[index] @ trajectory.enu_to_ecef.T
    R = trajectory.enu_to_ecef
    position_covariance = (sensors.gnss_position_sigma**2 * np.eye(3)
                           + (R * np.square(correlated_sigma)) @ R.T)
    return SimulatedData(t, gyro, accel, t[index], gnss_p, gnss_v, truth,
                         gyro_bias, accel_bias, sensors, magnetometer_time=t[mag_index],
                         magnetometer_field=field, barometer_time=t[baro_index],
                         barometer_height=height, gnss_position_covariance=position_covariance,
                         gnss_bias=gnss_bias)


def _gauss_markov(rng: np.random.Generator, sigma: Array, tau: float, dt: float,
                  n: int) -> Array:
    """n + 1 samples, dt s apart, of a stationary first-order Gauss-Markov 3-vector with
    per-axis sigma and correlation time tau (s): exact discretization, b_0 ~ N(0, sigma^2)."""
    decay = np.exp(-dt / tau)
    innovations = rng.normal(0.0, 1.0, (n + 1, 3)) * sigma
    innovations[1:] *= np.sqrt(1.0 - decay**2)
    return lfilter([1.0], [1.0, -decay], innovations, axis=0)


def events(data: SimulatedData) -> Iterator[tuple[str, int]]:
    """Merged time-ordered stream of ("imu", k) for k >= 1 and ("gnss" | "magnetometer" |
    "barometer", j) events.

    A measurement is delivered just before the IMU sample that carries the filter past
    its stamp.
    """
    stamps = {"gnss": data.gnss_time, "magnetometer": data.magnetometer_time,
              "barometer": data.barometer_time}
    next_index = dict.fromkeys(stamps, 0)
    for k in range(1, data.imu_time.size):
        for kind, times in stamps.items():
            j = next_index[kind]
            while j < times.size and times[j] <= data.imu_time[k]:
                yield kind, j
                j += 1
            next_index[kind] = j
        yield "imu", k


def run(filter_: ErrorStateFilter, data: SimulatedData, start: int = 0,
        skip_gnss: tuple[float, float] | None = None, record_every: int = 10,
        magnetometer: bool = False, barometer: bool = False) -> dict[str, Array]:
    """Feed the data to an initialized filter; record error and sigma every few IMU stamps.

    skip_gnss: (start, end) s of a simulated GNSS outage; magnetometer, barometer: also
    feed those samples (with the simulated sigmas). Returns arrays keyed
    ``error`` (filter convention, against the true GNSS bias too), ``nees``, ``sigma``
    (conventional, per state), ``position_error`` (p_hat - p, ECEF m),
    ``position_covariance`` (its 3x3, m^2) and ``time``, plus ``nis`` of every GNSS epoch.
    """
    rp = data.gnss_position_covariance
    rv = np.full(3, data.sensors.gnss_velocity_sigma**2)
    r_mag = np.full(3, data.sensors.magnetometer_sigma**2)
    r_baro = data.sensors.barometer_sigma**2
    times, errors, nees, sigmas = [], [], [], []
    nis: list[float] = []
    position_errors, position_covariances = [], []
    for kind, index in events(data):
        if kind == "magnetometer":
            t = data.magnetometer_time[index]
            if magnetometer and t > data.imu_time[start]:
                filter_.process(filter_.sources["magnetometer"].measurement(  # type: ignore[attr-defined]
                    t, data.magnetometer_field[index], r_mag))
            continue
        if kind == "barometer":
            t = data.barometer_time[index]
            if barometer and t > data.imu_time[start]:
                filter_.process(filter_.sources["barometer"].measurement(  # type: ignore[attr-defined]
                    t, height_m=data.barometer_height[index], height_variance_m2=r_baro))
            continue
        if kind == "gnss":
            t = data.gnss_time[index]
            if t <= data.imu_time[start] or (skip_gnss and skip_gnss[0] <= t < skip_gnss[1]):
                continue
            filter_.process_gnss(t, data.gnss_position[index], rp, data.gnss_velocity[index], rv)
            continue
        if index <= start:
            continue
        filter_.process_imu(data.imu_time[index], data.gyro[index], data.accel[index])
        nis.extend(_epoch_nis(filter_.drain_updates()))
        if index % record_every:
            continue
        filter_.flush()
        truth = data.truth
        error = filter_.error_from_truth(truth["q"][index], truth["v"][index], truth["p"][index],
                                         data.gyro_bias[index], data.accel_bias[index],
                                         data.gnss_bias[index])
        times.append(data.imu_time[index])
        errors.append(error)
        nees.append(float(error @ np.linalg.solve(filter_.covariance, error)))
        conventional = filter_.conventional_covariance()
        sigmas.append(np.sqrt(np.diag(conventional)))
        position_errors.append(filter_.nominal()[2] - truth["p"][index])
        position_covariances.append(conventional[POS, POS])
    return {"time": np.array(times), "error": np.array(errors), "nees": np.array(nees),
            "sigma": np.array(sigmas), "nis": np.array(nis),
            "position_error": np.array(position_errors),
            "position_covariance": np.array(position_covariances)}


def run_and_return_filter(filter_: ErrorStateFilter,
                          data: SimulatedData) -> tuple[dict[str, Array], ErrorStateFilter]:
    """``run``, and the filter after it: for a run in a worker process, where the filter
    that ``run`` changes is a copy the caller never sees."""
    return run(filter_, data), filter_


def _epoch_nis(updates: list[UpdateResult]) -> list[float]:
    """NIS of each accepted GNSS epoch: its velocity and position NIS summed (sequential
    updates of one epoch split the joint NIS exactly, so the sum is chi-square(6))."""
    epochs: dict[float, float] = {}
    for update in updates:
        if update.accepted and update.source in ("gnss_position", "gnss_velocity"):
            epochs[update.time] = epochs.get(update.time, 0.0) + update.nis
    return list(epochs.values())


def start_with_error(filter_: ErrorStateFilter, data: SimulatedData, sigmas: FloatArray,
                     rng: np.random.Generator) -> None:
    """Initialize at the first truth sample displaced by an error drawn from N(0, sigmas).

    The error is in the filter's own convention (15 sigmas: rad, m/s, m, rad/s, m/s^2), so
    the initial covariance diag(sigmas^2) is consistent with it to first order. A GNSS bias
    estimate starts at zero: its error, minus the simulated bias, is drawn from the
    stationary covariance the filter starts with.
    """
    truth = data.truth
    filter_.initialize(data.imu_time[0], truth["q"][0], truth["v"][0], truth["p"][0],
                       sigmas, data.gyro_bias[0], data.accel_bias[0])
    error = rng.normal(0.0, sigmas)
    filter_._correct((-error).tolist() + [0.0] * (filter_.state_dim - STATE_DIM))
