"""Replay a rosbag2 recording through a live trident EKF on the bag's clock, with rviz.

    ros2 launch launch/replay.launch.py bag:=/data/flight_001 rate:=2.0

`ros2 bag play --clock` publishes /clock from the bag's time line and the estimator (from
estimator.launch.py) runs on it. A bag recorded from sim.launch.py also holds /clock, /tf and
the old estimate: they are remapped aside so they do not collide with the live ones.
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, ExecuteProcess, IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

LAUNCH_DIR = Path(__file__).resolve().parent
RECORDED_ASIDE = ["/clock", "/tf", "/trident_ekf/odometry"]


def generate_launch_description() -> LaunchDescription:
    bag_play = ExecuteProcess(
        cmd=[
            "ros2", "bag", "play", LaunchConfiguration("bag"),
            "--rate", LaunchConfiguration("rate"),
            "--clock",
            "--remap", *[f"{topic}:=/recorded{topic}" for topic in RECORDED_ASIDE],
        ],
        output="screen",
    )
    estimator_and_rviz = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_DIR / "estimator.launch.py")),
        launch_arguments={
            "use_sim_time": "true",
            "rviz": LaunchConfiguration("rviz"),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "bag", description="rosbag2 to play (folder, .db3 or .mcap); required"),
        DeclareLaunchArgument(
            "rate", default_value="1.0", description="playback speed (1.0: as recorded)"),
        DeclareLaunchArgument(
            "rviz", default_value="true", choices=["true", "false"],
            description="start rviz2 with config/rviz/trident.rviz"),
        bag_play,
        estimator_and_rviz,
    ])
