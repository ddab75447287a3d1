"""The ``mavros`` profile: MAVROS (ROS 2) topics of an ArduPilot or PX4 autopilot.

Under ``mavros_namespace`` (default /mavros):

    imu/data_raw               sensor_msgs/Imu            FLU rates and specific force
    global_position/raw/fix    sensor_msgs/NavSatFix      the receiver's fix (MAVROS gives
                                                          the ellipsoidal height)
    global_position/raw/gps_vel geometry_msgs/TwistStamped ENU velocity, no covariance:
                                                          ``gnss_velocity_sigma_mps``
    imu/mag                    sensor_msgs/MagneticField  T, FLU    (magnetometer source)
    imu/static_pressure        sensor_msgs/FluidPressure  Pa        (barometer source)

MAVROS has already turned the autopilot's NED/FRD into ENU/FLU and stamped the messages
with ROS time (its timesync), so the standard converters apply unchanged. The external
pose stays on its standard topic.
"""

from __future__ import annotations

from trident_ekf.adapters import ros
from trident_ekf.adapters.base import Input, InputOptions, Profile, join

IMU_TOPIC = "imu/data_raw"
FIX_TOPIC = "global_position/raw/fix"
VELOCITY_TOPIC = "global_position/raw/gps_vel"
MAGNETOMETER_TOPIC = "imu/mag"
BAROMETER_TOPIC = "imu/static_pressure"


def profile(options: InputOptions) -> Profile:
    ns = options.mavros_namespace
    velocity_type, velocity = ros.velocity_converter(options, "TwistStamped")
    return Profile("mavros", ros.with_standard_aiding([
        Input(join(ns, IMU_TOPIC), ros.IMU, ros.imu, "imu", raw=True),
        Input(join(ns, FIX_TOPIC), ros.NAVSATFIX, ros.navsatfix, "fix"),
        Input(join(ns, VELOCITY_TOPIC), velocity_type, velocity, "velocity"),
        ros.aiding_input("magnetometer", join(ns, MAGNETOMETER_TOPIC)),
        ros.aiding_input("barometer", join(ns, BAROMETER_TOPIC)),
    ]))
