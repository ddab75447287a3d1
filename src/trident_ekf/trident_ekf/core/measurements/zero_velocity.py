"""Zero-velocity update: while a stillness detector says the IMU is at rest on the Earth,
its Earth-relative velocity is measured as zero (bounds velocity, and through it position
and tilt drift, on the ground without GNSS).

The detector looks at a window of raw IMU samples: the vehicle is still when every rate is
small and the specific-force magnitude hardly varies. A hovering multirotor vibrates (its
specific force varies by tenths of m/s^2 at the rotor frequencies), so the default
thresholds only fire with the motors off.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from mav_geometry.arrays import FloatVector
from mav_geometry.settings import check_settings, setting
from trident_ekf.core.measurements.base import (
    AidingSource,
    Linearization,
    Measurement,
)

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter

VEL = slice(3, 6)


@dataclass(frozen=True)
class ZeroVelocityConfig:
    sigma_mps: float = setting(0.03, "velocity noise of one update", "m/s", 1e-4, 10.0)
    rate_hz: float = setting(5.0, "updates per second while still", "Hz", 0.1, 1000.0)
    window_s: float = setting(0.5, "stillness detector window", "s", 0.02, 10.0)
    gyro_threshold_rad_s: float = setting(
        0.02, "largest rate magnitude in the window (bias included)", "rad/s", 1e-5, 1.0)
    accel_threshold_m_s2: float = setting(
        0.08, "largest standard deviation of the specific-force magnitude in the window",
        "m/s^2", 1e-4, 10.0)

    def __post_init__(self) -> None:
        check_settings(self)


class StillnessDetector:
    """Still over the last ``window_s`` of samples (at least five of them)."""

    def __init__(self, config: ZeroVelocityConfig) -> None:
        self.config = config
        self._samples: deque[tuple[float, float, float]] = deque()  # t, |gyro|, |accel|

    def add(self, time: float, gyro: FloatVector, accel: FloatVector) -> bool:
        samples = self._samples
        samples.append((time, math.hypot(*gyro), math.hypot(*accel)))
        while samples and samples[0][0] < time - self.config.window_s:
            samples.popleft()
        if len(samples) < 5 or time - samples[0][0] < 0.8 * self.config.window_s:
            return False
        values = np.array(samples)
        return bool(values[:, 1].max() < self.config.gyro_threshold_rad_s
                    and values[:, 2].std() < self.config.accel_threshold_m_s2)


class ZeroVelocity(AidingSource):
    """Earth-relative IMU velocity = 0 (ECEF, m/s)."""

    name: ClassVar[str] = "zero_velocity"
    dof = 3
    config: ZeroVelocityConfig

    def __init__(self, config: ZeroVelocityConfig | None = None) -> None:
        super().__init__(config or ZeroVelocityConfig())

    def measurement(self, time: float) -> Measurement:
        return Measurement(self.name, float(time), np.zeros(3),
                           np.eye(3) * self.config.sigma_mps**2)

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        _, v, _ = filter_.nominal()
        H = np.zeros((3, filter_.state_dim))
        H[:, VEL] = filter_.navigation_error_block(filter_.attitude_matrix())
        return Linearization(v - m.value, H, m.covariance)
