"""The trident EKF alone, on a companion computer (wall clock by default), with optional rviz.

    ros2 launch mav_bringup estimator.launch.py inputs:=mavros rviz:=true
    ros2 launch mav_bringup estimator.launch.py inputs:=px4 px4_namespace:=/fmu
    ros2 launch mav_bringup estimator.launch.py imu_topic:=/imu/data_raw fix_topic:=/ublox/fix

`inputs` selects the vehicle interface (node parameter of the same name, trident_ekf.adapters):
`ros` (default): ROS drivers, whose topics the remapping arguments `imu_topic`, `fix_topic`,
`vel_topic` connect to the estimator's `/imu/data`, `/gnss/fix`, `/gnss/vel`
(sensor_msgs/Imu, NavSatFix, and the ENU velocity as TwistWithCovarianceStamped or, with
the parameter `gnss_velocity_type`, TwistStamped); `mavros`: MAVROS under
`mavros_namespace` (imu/data_raw, global_position/raw/fix, global_position/raw/gps_vel,
imu/mag, imu/static_pressure); `px4`: the PX4 uXRCE-DDS bridge under `px4_namespace`
(out/sensor_combined, out/vehicle_gps_position, out/vehicle_air_data,
out/vehicle_magnetometer; NED/FRD converted; needs the px4_msgs package). The magnetometer
and barometer inputs are used when the parameter file enables those sources.

The default parameter file is `config/estimator_live.yaml` (a real vehicle; the simulation
passes `config/estimator.yaml`). The frame and input arguments override the parameter
file. sim and replay launch include this file, so the estimator and rviz are described once.
Parameter and rviz files come from the installed mav_bringup share directory. DDS discovery
stays on this machine unless `discovery_range` widens it (docs/security.md).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.conditions import IfCondition
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from mav_bringup.launch_support import (
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_RANGES,
    discovery_range_default,
    require_rviz2,
    rviz_default,
)

BRINGUP = "mav_bringup"
BOOLEAN = ["true", "false"]
INPUTS = ["ros", "mavros", "px4"]  # trident_ekf.adapters.PROFILES


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(BRINGUP)
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    estimator = Node(
        package="trident_ekf",
        executable="estimator_node",
        name="trident_ekf",
        output="screen",
        # Its SROS2 identity when ROS_SECURITY_ENABLE=true (mav-keystore, docs/security.md).
        ros_arguments=["--enclave", "/trident_ekf"],
        parameters=[
            LaunchConfiguration("params_file"),
            {
                "use_sim_time": use_sim_time,
                "map_frame": ParameterValue(LaunchConfiguration("map_frame"), value_type=str),
                "base_frame": ParameterValue(LaunchConfiguration("base_frame"), value_type=str),
                "inputs": ParameterValue(LaunchConfiguration("inputs"), value_type=str),
                "mavros_namespace": ParameterValue(LaunchConfiguration("mavros_namespace"),
                                                   value_type=str),
                "px4_namespace": ParameterValue(LaunchConfiguration("px4_namespace"),
                                                value_type=str),
            },
        ],
        remappings=[
            ("/imu/data", LaunchConfiguration("imu_topic")),
            ("/gnss/fix", LaunchConfiguration("fix_topic")),
            ("/gnss/vel", LaunchConfiguration("vel_topic")),
        ],
    )
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        name="rviz2",
        arguments=["-d", PathJoinSubstitution([share, "config", "rviz", "trident.rviz"])],
        # rviz must follow the same clock as the stamps it displays.
        parameters=[{"use_sim_time": use_sim_time}],
        condition=IfCondition(LaunchConfiguration("rviz")),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([share, "config", "estimator_live.yaml"]),
            description="estimator parameter file (trident_ekf: ros__parameters: ...); "
                        "estimator.yaml is the simulator's"),
        DeclareLaunchArgument(
            "inputs", default_value="ros", choices=INPUTS,
            description="vehicle interface: ros (drivers on the imu/fix/vel topics), mavros "
                        "(MAVROS topics under mavros_namespace), px4 (uXRCE-DDS topics under "
                        "px4_namespace; needs px4_msgs)"),
        DeclareLaunchArgument(
            "mavros_namespace", default_value="/mavros",
            description="namespace of the MAVROS topics (inputs:=mavros)"),
        DeclareLaunchArgument(
            "px4_namespace", default_value="/fmu",
            description="namespace of the PX4 uXRCE-DDS topics (inputs:=px4)"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false", choices=BOOLEAN,
            description="follow /clock (simulation, bag replay) instead of the wall clock"),
        DeclareLaunchArgument(
            "imu_topic", default_value="/imu/data",
            description="sensor_msgs/Imu input (REP-145: specific force, sensor frame); "
                        "inputs:=ros"),
        DeclareLaunchArgument(
            "fix_topic", default_value="/gnss/fix",
            description="sensor_msgs/NavSatFix input; inputs:=ros"),
        DeclareLaunchArgument(
            "vel_topic", default_value="/gnss/vel",
            description="ENU velocity input (geometry_msgs/TwistWithCovarianceStamped, or "
                        "TwistStamped with gnss_velocity_type); inputs:=ros"),
        DeclareLaunchArgument(
            "map_frame", default_value="map",
            description="parent frame of the published odometry and transform (REP-105)"),
        DeclareLaunchArgument(
            "base_frame", default_value="base_link",
            description="vehicle body frame (FLU) of the published odometry and transform"),
        DeclareLaunchArgument(
            "rviz", default_value=rviz_default(), choices=BOOLEAN,
            description="start rviz2 with config/rviz/trident.rviz (default: true where "
                        "rviz2 is installed)"),
        DeclareLaunchArgument(
            "discovery_range", default_value=discovery_range_default(),
            choices=DISCOVERY_RANGES,
            description="how far DDS discovery reaches (ROS_AUTOMATIC_DISCOVERY_RANGE of every "
                        "node started here): LOCALHOST (this machine only; the default unless "
                        "the variable is set), SUBNET (the local network), OFF, SYSTEM_DEFAULT; "
                        "docs/security.md"),
        OpaqueFunction(function=require_rviz2),
        SetEnvironmentVariable(DISCOVERY_RANGE_VARIABLE, LaunchConfiguration("discovery_range")),
        estimator,
        rviz,
    ])
