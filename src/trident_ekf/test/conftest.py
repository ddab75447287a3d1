"""Shared fixtures of the trident_ekf tests: the real ArduCopter flight as an imported bag,
with the noise settings that flight needs (data/README.md has the log's description), and a
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

LOG171 = Path(__file__).resolve().parents[3] / "data" / "ardupilot" / "log171.bin"


@dataclass(frozen=True)
class Log171:
    """The imported bag and this log's tuning: GNSS latency 0.2 s as ArduPilot's
    GPS_DELAY_MS; u-blox accuracies scaled to what the innovations show; IMU noise of a
    vibrating 49 Hz-logged Pixhawk IMU; a gyro-bias prior of 0.2 deg/s (ArduPilot removes
    the gyro offsets it measures at boot: the logged rates carry only the residual). The
    vehicle flips and crashes after 190 s (the gyro saturates, and the autopilot's EKF1 is
    no reference then); until about 70 s EKF1's yaw is magnetic heading (no
    declination)."""

    bag: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "gnss": {"delay_s": 0.2, "accuracy_scale": 0.25, "speed_accuracy_scale": 0.3,
                 "horizontal_floor_m": 0.05, "vertical_floor_m": 0.1,
                 "speed_floor_mps": 0.03},
        "barometer": {"noise_sigma_m": 0.25},
        "magnetometer": {"mode": "heading", "heading_sigma_deg": 4.4},
    })
    config: FilterConfig = field(default_factory=lambda: FilterConfig(
        gyro_noise=5e-3, accel_noise=0.22, gyro_bias_walk=1e-4, accel_bias_walk=1e-3))
    crash: float = 190.0  # s after the first IMU sample
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


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    """A private rclpy context for the real-DDS tests of a module."""
    with private_context() as context:
        yield context
