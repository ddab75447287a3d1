"""Replay a rosbag2 recording through a live trident EKF on the bag's clock, with rviz.

    ros2 launch mav_bringup replay.launch.py bag:=/data/flight_001 rate:=2.0
    ros2 launch mav_bringup replay.launch.py bag:=/data/px4_flight inputs:=px4

`ros2 bag play --clock` publishes /clock from the bag's time line and the estimator (from
estimator.launch.py) runs on it. `inputs` and `params_file` go to the estimator as in
estimator.launch.py: a bag of PX4 or MAVROS topics replays with `inputs:=px4` or
`inputs:=mavros`. A bag recorded from sim.launch.py or mav-sim also holds the recorded
/clock, /tf, /diagnostics and the old estimate: the player leaves them out
(`--exclude-regex`), so they neither fight the player's clock nor the live estimator. They
are not remapped aside: rosbag2 applies `--remap` to the player node itself, which would
also move the /clock it publishes. DDS discovery stays on this machine unless
`discovery_range` widens it (docs/security.md).
"""

from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    IncludeLaunchDescription,
    OpaqueFunction,
    SetEnvironmentVariable,
)
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from mav_bringup.launch_support import (
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_RANGES,
    discovery_range_default,
    require_rviz2,
    rviz_default,
)

BRINGUP = "mav_bringup"
INPUTS = ["ros", "mavros", "px4"]  # trident_ekf.adapters.PROFILES
# Recorded topics that the live graph publishes itself: the clock, transforms, diagnostics
# and everything under the estimator's namespace.
NOT_REPLAYED = "^/(clock|tf|diagnostics|trident_ekf/.*)$"


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(BRINGUP)
    bag_play = ExecuteProcess(
        cmd=[
            "ros2", "bag", "play", LaunchConfiguration("bag"),
            "--rate", LaunchConfiguration("rate"),
            "--clock",
            "--exclude-regex", NOT_REPLAYED,
        ],
        output="screen",
    )
    estimator_and_rviz = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            PathJoinSubstitution([share, "launch", "estimator.launch.py"])),
        launch_arguments={
            "use_sim_time": "true",
            "rviz": LaunchConfiguration("rviz"),
            "params_file": LaunchConfiguration("params_file"),
            "inputs": LaunchConfiguration("inputs"),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "bag", description="rosbag2 to play (folder, .db3 or .mcap); required"),
        DeclareLaunchArgument(
            "rate", default_value="1.0", description="playback speed (1.0: as recorded)"),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([share, "config", "estimator_live.yaml"]),
            description="estimator parameter file; estimator.yaml for a bag of mav-sim or "
                        "sim.launch.py"),
        DeclareLaunchArgument(
            "inputs", default_value="ros", choices=INPUTS,
            description="topics the bag holds: ros (/imu/data, /gnss/fix, /gnss/vel), mavros "
                        "(under /mavros) or px4 (PX4 uXRCE-DDS, under /fmu)"),
        DeclareLaunchArgument(
            "rviz", default_value=rviz_default(), choices=["true", "false"],
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
        estimator_and_rviz,
        bag_play,
    ])
