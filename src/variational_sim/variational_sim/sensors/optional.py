"""The sensors a vehicle may carry besides its IMU and GNSS receiver.

Each entry says how to build the sensor from its config, the simulator's configuration and
its own random generator, and what it publishes; the simulator core builds every fitted
one, the node declares ``<name>.enabled`` and one parameter per config field for each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from variational_sim.sensors.barometer import Barometer, BarometerConfig
from variational_sim.sensors.base import Sensor
from variational_sim.sensors.magnetometer import Magnetometer, MagnetometerConfig


@dataclass(frozen=True)
class OptionalSensor:
    """How to build one kind of optional sensor."""

    config: type[Any]
    """Its config dataclass (``mav_geometry.settings.setting`` fields)."""
    build: Callable[[Any, np.random.Generator, Any], Sensor]
    """(its config, its generator, the ``SimulatorConfig``) -> the sensor."""
    publishes: str
    """What enabling it publishes, for the parameter description."""


OPTIONAL_SENSORS: dict[str, OptionalSensor] = {
    "barometer": OptionalSensor(
        BarometerConfig,
        lambda config, rng, simulator: Barometer(config, rng, simulator.gnss.datum[2]),
        "static pressure on barometer/pressure (sensor_msgs/FluidPressure)"),
    "magnetometer": OptionalSensor(
        MagnetometerConfig,
        lambda config, rng, simulator: Magnetometer(config, rng,
                                                    simulator.imu.mount_rotation_xyzw),
        "magnetic field in imu_link on magnetic_field (sensor_msgs/MagneticField)"),
}
"""By name: the ``SimulatorConfig`` field, the parameter group and the seed stream."""
