"""The trident EKF alone, on a companion computer (wall clock by default), with optional rviz.

    ros2 launch mav_bringup estimator.launch.py imu_topic:=/mavros/imu/data_raw rviz:=true

Remapping arguments connect the estimator's inputs (`/imu/data`, `/gnss/fix`, `/gnss/vel`)
to the vehicle's topics. The frame arguments override the parameter file's frames. sim and
replay launch include this file, so the estimator and rviz are described once. Parameter and
rviz files come from the installed mav_bringup share directory.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from mav_bringup.launch_support import require_rviz2, rviz_default

BRINGUP = "mav_bringup"
BOOLEAN = ["true", "false"]


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(BRINGUP)
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    estimator = Node(
        package="trident_ekf",
        executable="estimator_node",
        name="trident_ekf",
        output="screen",
        parameters=[
            LaunchConfiguration("params_file"),
            {
                "use_sim_time": use_sim_time,
                "map_frame": ParameterValue(LaunchConfiguration("map_frame"), value_type=str),
                "base_frame": ParameterValue(LaunchConfiguration("base_frame"), value_type=str),
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
            "params_file", default_value=PathJoinSubstitution([share, "config", "estimator.yaml"]),
            description="estimator parameter file (trident_ekf: ros__parameters: ...)"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false", choices=BOOLEAN,
            description="follow /clock (simulation, bag replay) instead of the wall clock"),
        DeclareLaunchArgument(
            "imu_topic", default_value="/imu/data",
            description="sensor_msgs/Imu input (REP-145: specific force, sensor frame)"),
        DeclareLaunchArgument(
            "fix_topic", default_value="/gnss/fix", description="sensor_msgs/NavSatFix input"),
        DeclareLaunchArgument(
            "vel_topic", default_value="/gnss/vel",
            description="geometry_msgs/TwistWithCovarianceStamped input (ENU velocity)"),
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
        OpaqueFunction(function=require_rviz2),
        estimator,
        rviz,
    ])
