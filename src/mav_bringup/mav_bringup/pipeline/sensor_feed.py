"""The simulator's sensor readings as the estimator's input samples, without messages.

In the graph each reading becomes messages (``Sensor.fill``) that the estimator's input
profile converts back (``trident_ekf.adapters.ros``). Here a reading goes straight to the
same samples with the same numbers: stamps rounded to whole nanoseconds as a message header
holds them, float64 values as the messages carry them, the receiver's covariances as
reported, the IMU and magnetometer in imu_link axes (the session applies its own
``imu_rotation_xyzw``, as it does to the messages). A reading reaches the estimator only
where the graph connects it: an output whose topic and type an input of the estimator's
profile subscribes (aiding inputs only for enabled sources), and only when the sensor
publishes it (a receiver in an outage may say nothing; a no-fix sends no velocity).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from trident_ekf.adapters import Aid, Fix, ImuSample, Input, Sample, Velocity
from trident_ekf.adapters.base import absolute
from variational_sim.sensors.base import Sensor
from variational_sim.sensors.gnss import STATUS_FIX, STATUS_NO_FIX

SampleOf = Callable[[Any, int], tuple[Sample | None, ...]]
"""A reading and its stamp (ns) -> one sample per sensor output (None: not published)."""


def _imu(reading: Any, stamp_ns: int) -> tuple[Sample | None, ...]:
    return (ImuSample(stamp_ns, tuple(reading.gyro.tolist()), tuple(reading.accel.tolist())),)


def _gnss(reading: Any, stamp_ns: int) -> tuple[Sample | None, ...]:
    """NavSatFix (status, WGS-84, diagonal-known ENU covariance) and, with a fix, the ENU
    velocity with its covariance."""
    fix = Fix(stamp_ns, STATUS_FIX if reading.fix else STATUS_NO_FIX,
              float(reading.latitude_deg), float(reading.longitude_deg),
              float(reading.height_m), np.array(reading.position_covariance_enu, dtype=float),
              True)
    if not reading.fix:
        return (fix if reading.published else None, None)
    velocity = Velocity(stamp_ns, tuple(reading.velocity_enu.tolist()),
                        np.array(reading.velocity_covariance_enu, dtype=float))
    return (fix, velocity)


def _barometer(reading: Any, stamp_ns: int) -> tuple[Sample | None, ...]:
    return (Aid("barometer", stamp_ns, {"pressure_pa": float(reading.pressure_pa),
                                        "pressure_variance_pa2": float(reading.variance_pa2)}),)


def _magnetometer(reading: Any, stamp_ns: int) -> tuple[Sample | None, ...]:
    return (Aid("magnetometer", stamp_ns, {
        "field_T": np.array(reading.field_T, dtype=float),
        "covariance_T2": np.diag(np.array(reading.covariance_diagonal_T2, dtype=float))}),)


SAMPLES: dict[str, SampleOf] = {"imu": _imu, "gnss": _gnss, "barometer": _barometer,
                                "magnetometer": _magnetometer}
"""Per simulated sensor (by name), its readings as samples, in its ``outputs`` order."""


class SensorFeed:
    """Which outputs of the simulator's sensors reach the estimator, and as which samples."""

    def __init__(self, sensors: Mapping[str, Sensor], inputs: Sequence[Input]) -> None:
        subscribed = {(absolute(item.topic), item.msgtype) for item in inputs}
        unknown = sorted(set(sensors) - set(SAMPLES))
        if unknown:
            raise ValueError(f"the pipeline cannot feed the simulator's {unknown} to the "
                             f"estimator: it converts {sorted(SAMPLES)}")
        self._connected = {
            name: tuple((absolute(output.topic), output.msgtype) in subscribed
                        for output in sensor.outputs)
            for name, sensor in sensors.items()}

    def connected(self, sensor: str) -> tuple[bool, ...]:
        """Per output of ``sensor``, whether the estimator subscribes it."""
        return self._connected[sensor]

    def samples(self, sensor: Sensor, reading: Any) -> list[Sample]:
        """The samples the estimator receives of one reading, in publication order."""
        stamp_ns = round(reading.time_s * 1e9)  # a header's stamp: whole nanoseconds
        outputs = SAMPLES[sensor.name](reading, stamp_ns)
        return [sample for sample, wanted in zip(outputs, self._connected[sensor.name],
                                                 strict=True)
                if wanted and sample is not None]
