"""The ``px4`` profile: PX4 uORB topics through the uXRCE-DDS bridge (px4_msgs, v1.15 layout).

Under ``px4_namespace`` (default /fmu):

    out/sensor_combined       px4_msgs/SensorCombined       gyro_rad, accelerometer_m_s2 (FRD)
    out/vehicle_gps_position  px4_msgs/SensorGps            fix and NED velocity
    out/vehicle_air_data      px4_msgs/VehicleAirData       baro_pressure_pa (barometer)
    out/vehicle_magnetometer  px4_msgs/VehicleMagnetometer  magnetometer_ga, FRD (magnetometer)

QoS: the bridge publishes best effort, keep last, and the subscription is best effort,
volatile (a reliable subscription would match nothing).
The last two topics are not in the bridge's default topic list of every PX4 release: add
them to PX4's ``dds_topics.yaml`` if ``ros2 topic list`` does not show them.

Conversions (PX4 is NED/FRD, ROS ENU/FLU): body vectors (x, y, z) -> (x, -y, -z); NED
vectors (n, e, d) -> (e, n, -d); gauss -> tesla (1e-4). GNSS: ``fix_type`` 0-1 is no fix
(NavSatStatus NO_FIX), 2-3 and 8 (extrapolated) a fix, 4 (RTCM code differential) an
SBAS fix, 5-6 (RTK float, fixed) a GBAS fix; position covariance diag(eph^2, eph^2, epv^2)
(unknown if either is not > 0); velocity (vel_e, vel_n, -vel_d) m/s, sent only while
``vel_ned_valid``, with s_variance_m_s (a speed sigma, despite the name) squared per axis.
Latitude/longitude are degrees (float64 ``latitude_deg``, ``longitude_deg``, PX4 >= 1.15)
or 1e-7 degree integers (``lat``, ``lon``, older); height is the ellipsoidal
``altitude_ellipsoid_m`` (or ``alt_ellipsoid`` mm).

Stamps: PX4 timestamps are microseconds; the stamp is the sample time, ``timestamp`` x 1000
ns for SensorCombined (the gyro sample; the accelerometer offset
``accelerometer_timestamp_relative`` is not applied) and SensorGps (its ``timestamp`` is
the time of the position and velocity), ``timestamp_sample`` x 1000 for VehicleAirData and
VehicleMagnetometer (``timestamp`` when it is 0). With timestamp synchronization on (PX4
parameter UXRCE_DDS_SYNCT = 1, the default) the bridge shifts every timestamp field into
the agent's clock, so the stamps are on the companion computer's clock like those of ROS
drivers; without it they count from the autopilot's boot, which the filter accepts too
(it only uses differences between stamps; the magnetometer's model year then comes from
``magnetometer.model_year`` or today).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trident_ekf.adapters import ros
from trident_ekf.adapters.base import (
    NS_PER_US,
    STATUS_FIX,
    STATUS_GBAS_FIX,
    STATUS_NO_FIX,
    STATUS_SBAS_FIX,
    Aid,
    Fix,
    Input,
    InputOptions,
    Profile,
    Sample,
    Vector3,
    Velocity,
    join,
    positive,
)
from trident_ekf.tools.cdr import ImuSample

PACKAGE = "px4_msgs"
SENSOR_COMBINED = "px4_msgs/msg/SensorCombined"
SENSOR_GPS = "px4_msgs/msg/SensorGps"
VEHICLE_AIR_DATA = "px4_msgs/msg/VehicleAirData"
VEHICLE_MAGNETOMETER = "px4_msgs/msg/VehicleMagnetometer"
MESSAGE_TYPES = (SENSOR_COMBINED, SENSOR_GPS, VEHICLE_AIR_DATA, VEHICLE_MAGNETOMETER)
IMU_TOPIC = "out/sensor_combined"
GNSS_TOPIC = "out/vehicle_gps_position"
BAROMETER_TOPIC = "out/vehicle_air_data"
MAGNETOMETER_TOPIC = "out/vehicle_magnetometer"
GAUSS = 1e-4  # T
RELATIVE_TIMESTAMP_INVALID = 2147483647  # SensorCombined: no accelerometer sample
FIX_TYPE_2D = 2
_STATUS = {4: STATUS_SBAS_FIX, 5: STATUS_GBAS_FIX, 6: STATUS_GBAS_FIX}


def frd_to_flu(x: float, y: float, z: float) -> Vector3:
    """A body vector from FRD to FLU axes."""
    return (float(x), -float(y), -float(z))


def ned_to_enu(north: float, east: float, down: float) -> Vector3:
    """A local-level vector from NED to ENU axes."""
    return (float(east), float(north), -float(down))


def navsat_status(fix_type: int) -> int:
    """sensor_msgs/NavSatStatus.status of a PX4 ``fix_type``."""
    if fix_type < FIX_TYPE_2D:
        return STATUS_NO_FIX
    return _STATUS.get(fix_type, STATUS_FIX)


def stamp_from_us(microseconds: int) -> int:
    """A PX4 timestamp (us) as a stamp in ns."""
    return int(microseconds) * NS_PER_US


def sample_stamp(message: Any) -> int:
    """``timestamp_sample`` (``timestamp`` if 0) in ns."""
    sample = int(message.timestamp_sample)
    return stamp_from_us(sample if sample > 0 else message.timestamp)


def sensor_combined(message: Any) -> tuple[Sample, ...]:
    """SensorCombined: the FLU gyro and accelerometer sample at ``timestamp``."""
    relative = int(getattr(message, "accelerometer_timestamp_relative", 0))
    if relative == RELATIVE_TIMESTAMP_INVALID:
        raise ValueError("sensor_combined without an accelerometer sample")
    gyro, accel = message.gyro_rad, message.accelerometer_m_s2
    return (ImuSample(stamp_from_us(message.timestamp), frd_to_flu(gyro[0], gyro[1], gyro[2]),
                      frd_to_flu(accel[0], accel[1], accel[2])),)


def geodetic(message: Any) -> tuple[float, float, float]:
    """(latitude deg, longitude deg, ellipsoidal height m) of a SensorGps of either layout."""
    if hasattr(message, "latitude_deg"):
        return (float(message.latitude_deg), float(message.longitude_deg),
                float(message.altitude_ellipsoid_m))
    return int(message.lat) * 1e-7, int(message.lon) * 1e-7, int(message.alt_ellipsoid) * 1e-3


def position_covariance(eph: float, epv: float) -> tuple[tuple[float, ...], bool]:
    """(ENU covariance 9 row-major m^2, known) from the horizontal and vertical accuracies."""
    eph, epv = float(eph), float(epv)
    if not (positive(eph) and positive(epv)):
        return (0.0,) * 9, False
    h, v = eph * eph, epv * epv
    return (h, 0.0, 0.0, 0.0, h, 0.0, 0.0, 0.0, v), True


def velocity_covariance(speed_sigma: float) -> np.ndarray:
    """3x3 ENU covariance from the speed accuracy (zeros, i.e. not reported, unless > 0)."""
    sigma = float(speed_sigma)
    return np.eye(3) * (sigma * sigma if positive(sigma) else 0.0)


def sensor_gps(message: Any) -> tuple[Sample, ...]:
    """SensorGps: the fix, and the ENU velocity while ``vel_ned_valid``."""
    stamp = stamp_from_us(message.timestamp)
    status = navsat_status(int(message.fix_type))
    latitude, longitude, height = geodetic(message)
    covariance, known = position_covariance(message.eph, message.epv)
    fix = Fix(stamp, status, latitude, longitude, height, covariance, known)
    if status == STATUS_NO_FIX or not bool(getattr(message, "vel_ned_valid", True)):
        return (fix,)
    velocity = ned_to_enu(message.vel_n_m_s, message.vel_e_m_s, message.vel_d_m_s)
    return fix, Velocity(stamp, velocity, velocity_covariance(message.s_variance_m_s))


def vehicle_air_data(message: Any) -> tuple[Sample, ...]:
    """VehicleAirData: the static pressure (Pa) of the selected barometer, variance
    unknown."""
    pressure = float(message.baro_pressure_pa)
    if not math.isfinite(pressure):
        raise ValueError(f"baro_pressure_pa {pressure!r}")
    return (Aid("barometer", sample_stamp(message),
                {"pressure_pa": pressure, "pressure_variance_pa2": 0.0}),)


def vehicle_magnetometer(message: Any) -> tuple[Sample, ...]:
    """VehicleMagnetometer: the calibrated field of the selected magnetometer, gauss FRD ->
    tesla FLU, covariance unknown."""
    ga = message.magnetometer_ga
    return (Aid("magnetometer", sample_stamp(message),
                {"field_T": np.array(frd_to_flu(ga[0], ga[1], ga[2])) * GAUSS}),)


def profile(options: InputOptions) -> Profile:
    ns = options.px4_namespace
    return Profile("px4", ros.with_standard_aiding([
        Input(join(ns, IMU_TOPIC), SENSOR_COMBINED, sensor_combined, "imu"),
        Input(join(ns, GNSS_TOPIC), SENSOR_GPS, sensor_gps, "fix"),
        Input(join(ns, BAROMETER_TOPIC), VEHICLE_AIR_DATA, vehicle_air_data, "barometer",
              source="barometer"),
        Input(join(ns, MAGNETOMETER_TOPIC), VEHICLE_MAGNETOMETER, vehicle_magnetometer,
              "magnetometer", source="magnetometer"),
    ]))
