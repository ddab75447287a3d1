"""Filter parameters with validation (units in every field name's docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_SAMPLING_FACTOR = 10.0  # largest gyro/accel_sampling_factor (dimensionless)
STANDARD_GRAVITY = 9.80665  # m/s^2: what an accelerometer range "16 g" means


@dataclass(frozen=True)
class FilterConfig:
    """Noise model, gating and robustness settings shared by both filters.

    gyro_noise: gyro white-noise density N_g, rad/s/sqrt(Hz).
    accel_noise: accelerometer white-noise density N_a, m/s^2/sqrt(Hz).
    gyro_bias_walk: gyro bias random walk N_bg, rad/s/sqrt(s).
    accel_bias_walk: accel bias random walk N_ba, m/s^2/sqrt(s).
    gyro_sampling_factor, accel_sampling_factor: k_g, k_a (dimensionless, in [0, 10]; 0,
        the default, = off): process noise for what a coarsely point-sampled IMU (a logged
        or low-rate stream) does not show between two samples. Each IMU interval dt adds
        the variance (k_g |w_k - w_{k-1}| dt)^2 rad^2 to every attitude error axis and
        (k_a |f_k - f_{k-1}| dt)^2 (m/s)^2 to every velocity error axis, with w, f the
        rate (rad/s) and specific force (m/s^2) of this and the previous sample: the
        integration error of an interval grows with how fast the input changes across it,
        so the covariance grows in manoeuvres and vibration and not at rest. An input
        that wanders as a random walk between the samples gives k = 1/6 for these norms: the
        integral of the Brownian bridge about the sampled values has the variance
        sigma^2 dt^3 / 12 per axis, and E|w_k - w_{k-1}|^2 = 3 sigma^2 dt. The end-point
        (rectangle) rule of the integrators adds to it.
    lever_arm: IMU to GNSS antenna, body axes, m.
    covariance_decimation: IMU samples per covariance propagation (1 = every sample).
    gate_probability: chi-square probability of the NIS gate of every aiding update (0
        disables it).
    max_imu_interval: longest IMU interval integrated, s; a longer one is a gap (counted).
    max_bridged_gap: longest gap bridged, s: over it the state coasts (attitude and
        velocity held) while the covariance grows as for an unknown rotation rate
        ``gap_rate_sigma`` (rad/s) and acceleration ``gap_accel_sigma`` (m/s^2), each held
        over the gap, and the measurements inside it are applied at their stamps (a logging
        dropout, a driver stall). A longer gap is not integrated: the clock jumps and the
        measurements inside it are dropped.
    outage_timeout: time without an accepted GNSS position update before the status reads
        OUTAGE, s; NaN (default) = automatic: ``outage_gnss_periods`` nominal GNSS
        periods (the median of the recent fix intervals, measured by the filter), at
        least ``outage_timeout_floor``. A gap shorter than it leaves the status as it is.
    outage_gnss_periods: nominal GNSS periods without an accepted fix that make an
        outage in the automatic mode (>= 1).
    outage_timeout_floor: smallest automatic outage timeout, s (fast receivers: the
        fix latency and its jitter are not worth an outage).
    divergence_position_sigma: position sigma above which the status reads DIVERGED, m.
    max_consecutive_rejections: gated GNSS rejections in a row that declare divergence.
    history_length: how far back a delayed measurement (a GNSS fix, a source with a delay_s)
        is still applied at its own stamp, s (state snapshots and IMU samples are kept that
        long; 0 disables the history).
    reset_on_divergence: on that declaration, reset position and velocity to the fix (with
        the fix's covariance) instead of staying DIVERGED until re-initialized.
    consistency_probability: chi-square probability (3 dof) of the tests that tell a
        diverged estimate from wrong fixes (``core.divergence``): a rejected fix's
        displacement against the GNSS velocity and the inertial solution. A fix both
        contradict is inconsistent (not counted towards divergence; two in a row raise the
        spoofing alarm), and the reset only goes onto a fix that ends a track of
        ``max_consecutive_rejections`` fixes moving as both say. 0 disables the tests:
        every gated fix counts and the reset takes any fix.
    gnss_bias_sigma_horizontal, gnss_bias_sigma_vertical: stationary sigma, m, of the
        slowly varying (multipath, atmosphere) part of the GNSS position error, per east /
        north and up axis. 0 for both (default): fixes are white, 15 error states. Both > 0:
        three more error states estimate that error as a first-order Gauss-Markov bias b
        (ENU axes at the ``initialize`` position), db/dt = -b / tau + w, and a fix measures
        antenna position + b + white noise.
    gnss_bias_correlation_time: tau of that bias, s (only used with the bias states).
    gnss_covariance_includes_bias: with the bias states, the fix's reported position
        covariance is white + correlated (as receivers report it): the white part used as R
        is the reported covariance minus the bias's stationary covariance, its eigenvalues
        floored at ``gnss_white_sigma_floor``^2. False: the reported covariance is used as
        the white part as it is.
    gnss_white_sigma_floor: smallest white GNSS position sigma left by that subtraction, m.
    gyro_range, accel_range: the IMU's declared full-scale range per sensor axis, rad/s and
        m/s^2 (defaults 2000 deg/s and 16 g, common MEMS settings). A sample with any axis at
        or beyond it is saturated: rejected and counted (``imu_saturated``), not fused.
    max_imu_stamp_jump: largest forward IMU interval that is a gap (bridged or skipped), s;
        a longer one is a stamp fault: the sample is rejected (``imu_stamp_jump``).
    clock_change_samples: consecutive IMU samples rejected for their stamps (backward, or
        beyond ``max_imu_stamp_jump``) that agree among themselves (increasing, intervals
        at most ``max_imu_interval``) and so make a new input time base: the estimate
        continues on it (``core.input_clock``). One bad stamp stays a rejected sample.
    imu_timeout: time without a usable IMU sample (input stamps, or the node's clock) after
        which the session reports an IMU blackout (diagnostics ERROR), s.
    """

    gyro_noise: float = 1e-3
    accel_noise: float = 2e-2
    gyro_bias_walk: float = 1e-5
    accel_bias_walk: float = 1e-4
    gyro_sampling_factor: float = 0.0
    accel_sampling_factor: float = 0.0
    lever_arm: tuple[float, float, float] = (0.0, 0.0, 0.0)
    covariance_decimation: int = 4
    gate_probability: float = 0.9999
    max_imu_interval: float = 0.1
    max_bridged_gap: float = 5.0
    gap_rate_sigma: float = 0.1
    gap_accel_sigma: float = 3.0
    outage_timeout: float = math.nan
    outage_gnss_periods: float = 3.0
    outage_timeout_floor: float = 1.0
    divergence_position_sigma: float = 1000.0
    max_consecutive_rejections: int = 25
    reset_on_divergence: bool = True
    consistency_probability: float = 0.9999
    history_length: float = 1.0
    gnss_bias_sigma_horizontal: float = 0.0
    gnss_bias_sigma_vertical: float = 0.0
    gnss_bias_correlation_time: float = 60.0
    gnss_covariance_includes_bias: bool = True
    gnss_white_sigma_floor: float = 0.01
    gyro_range: float = math.radians(2000.0)
    accel_range: float = 16.0 * STANDARD_GRAVITY
    max_imu_stamp_jump: float = 10.0
    clock_change_samples: int = 5
    imu_timeout: float = 1.0

    def __post_init__(self) -> None:
        positive = {
            "gyro_noise": self.gyro_noise,
            "accel_noise": self.accel_noise,
            "gyro_bias_walk": self.gyro_bias_walk,
            "accel_bias_walk": self.accel_bias_walk,
            "max_imu_interval": self.max_imu_interval,
            "gap_rate_sigma": self.gap_rate_sigma,
            "gap_accel_sigma": self.gap_accel_sigma,
            "outage_timeout_floor": self.outage_timeout_floor,
            "divergence_position_sigma": self.divergence_position_sigma,
            "gnss_bias_correlation_time": self.gnss_bias_correlation_time,
            "gnss_white_sigma_floor": self.gnss_white_sigma_floor,
            "gyro_range": self.gyro_range,
            "accel_range": self.accel_range,
            "imu_timeout": self.imu_timeout,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if not (math.isnan(self.outage_timeout)
                or (math.isfinite(self.outage_timeout) and self.outage_timeout > 0.0)):
            raise ValueError("outage_timeout must be NaN (automatic) or finite and > 0 s, "
                             f"got {self.outage_timeout!r}")
        if not (math.isfinite(self.outage_gnss_periods) and self.outage_gnss_periods >= 1.0):
            raise ValueError("outage_gnss_periods must be finite and >= 1, "
                             f"got {self.outage_gnss_periods!r}")
        for name in ("gyro_sampling_factor", "accel_sampling_factor"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= MAX_SAMPLING_FACTOR):
                raise ValueError(f"{name} must be in [0, {MAX_SAMPLING_FACTOR}], "
                                 f"got {value!r}")
        if not (math.isfinite(self.max_bridged_gap) and self.max_bridged_gap >= 0.0):
            raise ValueError(
                f"max_bridged_gap must be finite and >= 0 s, got {self.max_bridged_gap!r}")
        if not (math.isfinite(self.max_imu_stamp_jump)
                and self.max_imu_stamp_jump >= self.max_imu_interval):
            raise ValueError("max_imu_stamp_jump must be finite and >= max_imu_interval "
                             f"({self.max_imu_interval!r} s), got {self.max_imu_stamp_jump!r}")
        if not (isinstance(self.clock_change_samples, int) and self.clock_change_samples >= 2):
            raise ValueError("clock_change_samples must be an integer >= 2, "
                             f"got {self.clock_change_samples!r}")
        if not (math.isfinite(self.history_length) and self.history_length >= 0.0):
            raise ValueError(
                f"history_length must be finite and >= 0 s, got {self.history_length!r}")
        if len(self.lever_arm) != 3 or not all(math.isfinite(c) for c in self.lever_arm):
            raise ValueError(f"lever_arm must be 3 finite numbers (m), got {self.lever_arm!r}")
        if not (isinstance(self.covariance_decimation, int) and self.covariance_decimation >= 1):
            raise ValueError(
                f"covariance_decimation must be an integer >= 1, got {self.covariance_decimation!r}"
            )
        bias_sigmas = (self.gnss_bias_sigma_horizontal, self.gnss_bias_sigma_vertical)
        if not (all(math.isfinite(s) and s >= 0.0 for s in bias_sigmas)
                and (all(bias_sigmas) or not any(bias_sigmas))):
            raise ValueError("gnss_bias_sigma_horizontal and gnss_bias_sigma_vertical must be "
                             f"both 0 or both finite and > 0 m, got {bias_sigmas!r}")
        if not 0.0 <= self.consistency_probability < 1.0:
            raise ValueError("consistency_probability must be in [0, 1), "
                             f"got {self.consistency_probability!r}")
        if not 0.0 <= self.gate_probability < 1.0:
            raise ValueError(f"gate_probability must be in [0, 1), got {self.gate_probability!r}")
        if self.max_consecutive_rejections < 1:
            raise ValueError(
                "max_consecutive_rejections must be >= 1, "
                f"got {self.max_consecutive_rejections!r}"
            )

    @property
    def gnss_bias_states(self) -> bool:
        """True when the GNSS position bias is estimated (18 error states)."""
        return self.gnss_bias_sigma_horizontal > 0.0

    def gnss_bias_variance(self) -> np.ndarray:
        """Stationary variances (east, north, up) of the GNSS position bias, m^2."""
        horizontal, vertical = self.gnss_bias_sigma_horizontal, self.gnss_bias_sigma_vertical
        return np.square([horizontal, horizontal, vertical])

    def continuous_noise(self) -> np.ndarray:
        """Q_c = diag(N_g^2 I, N_a^2 I, N_bg^2 I, N_ba^2 I) for w = [xi_g, xi_a, xi_bg, xi_ba]."""
        densities = (self.gyro_noise, self.accel_noise, self.gyro_bias_walk, self.accel_bias_walk)
        return np.diag(np.repeat(np.square(densities), 3))
