"""Shared fixtures of the trident_ekf tests: the real ArduCopter and PX4 flights as imported
bags, with the noise settings each flight needs (data/README.md describes the logs), and a
private rclpy context for the real-DDS tests."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rclpy.context import Context

from mav_ros_common.testing import private_context
from trident_ekf.core import FilterConfig
from trident_ekf.core.initialization import Initializer
from trident_ekf.tools.flightlog import read_log, write_bag

DATA = Path(__file__).resolve().parents[3] / "data"
LOG171 = DATA / "ardupilot" / "log171.bin"


@dataclass(frozen=True)
class Log171:
    """The imported bag and this log's tuning.

    - Latencies as ArduPilot's own EKF of the time assumed them: GNSS 0.2 s (GPS_DELAY_MS),
      barometer 60 ms, magnetometer 40 ms (the heading residuals correlate with the turn
      rate without the latter).
    - u-blox accuracies scaled to what the innovations show.
    - IMU noise of a vibrating Pixhawk IMU; the log holds 49 Hz point samples of a 20 Hz
      low-passed signal, so the sampling noise is on with k = 1/6 (an input that wanders
      as a random walk between samples; the gyro-integration error against EKF1 over
      0.1 s gives 0.15-0.25 in aided flight).
    - A gyro-bias prior of 0.2 deg/s (ArduPilot removes the gyro offsets it measures at
      boot: the logged rates carry only the residual).

    The vehicle hits the ground at 226 s (35 rad/s, 108 m/s^2: the gyro saturates, and the
    autopilot's EKF1 is no reference from then on); until about 70 s EKF1's yaw is
    magnetic heading (no declination)."""

    bag: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "gnss": {"delay_s": 0.2, "accuracy_scale": 0.25, "speed_accuracy_scale": 0.28,
                 "horizontal_floor_m": 0.05, "vertical_floor_m": 0.1,
                 "speed_floor_mps": 0.03},
        "barometer": {"noise_sigma_m": 0.25, "delay_s": 0.06},
        "magnetometer": {"mode": "heading", "heading_sigma_deg": 1.8, "delay_s": 0.04},
    })
    config: FilterConfig = field(default_factory=lambda: FilterConfig(
        gyro_noise=5e-3, accel_noise=0.22, gyro_bias_walk=1e-4, accel_bias_walk=1e-3,
        gyro_sampling_factor=1.0 / 6.0, accel_sampling_factor=1.0 / 6.0))
    crash: float = 225.5  # s after the first IMU sample: the last flying moment
    magnetic_reference_until: float = 70.0  # s
    take_off: float = 72.0  # s

    def initializer(self) -> Initializer:
        """A fresh initializer with this log's priors (an initializer is used once)."""
        return Initializer(gyro_bias_sigma=math.radians(0.2))


@pytest.fixture(scope="session")
def log171(tmp_path_factory: pytest.TempPathFactory) -> Log171:
    path = tmp_path_factory.mktemp("log171") / "log171"
    write_bag(read_log(LOG171), path)
    return Log171(path)


@dataclass(frozen=True)
class Px4Real:
    """The imported real PX4 flight (data/px4_real: GNSS with a DGPS fix, barometer, no
    magnetometer, no reference) and its tuning: GNSS latency 0.11 s (PX4's EKF2_GPS_DELAY
    default); the receiver's eph/epv (0.56/0.93 m) describe its slow error, the fix-to-fix
    innovations are about 2 cm, so the position accuracies are scaled by 0.04 and the speed
    accuracy (0.19 m/s) by 0.4; barometer noise 0.35 m with an offset that changes by 0.7 m
    over about 10 s (rotor wash of a flight within a few metres of the ground); accelerometer
    noise 0.012 m/s^2/sqrt(Hz) (a 250 Hz IMU)."""

    bag: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "gnss": {"delay_s": 0.11, "accuracy_scale": 0.04, "speed_accuracy_scale": 0.4,
                 "horizontal_floor_m": 0.01, "vertical_floor_m": 0.01,
                 "speed_floor_mps": 0.03},
        "barometer": {"noise_sigma_m": 0.35, "offset_sigma_m": 0.7,
                      "offset_correlation_time_s": 10.0},
    })
    config: FilterConfig = field(default_factory=lambda: FilterConfig(accel_noise=0.012))


@pytest.fixture(scope="session")
def px4_real(tmp_path_factory: pytest.TempPathFactory) -> Px4Real:
    path = tmp_path_factory.mktemp("px4_real") / "px4_real"
    write_bag(read_log(DATA / "px4_real"), path)
    return Px4Real(path)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    """A private rclpy context for the real-DDS tests of a module."""
    with private_context() as context:
        yield context
