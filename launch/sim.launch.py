"""Simulation: simulator, controller/allocator and trident EKF on sim time, with rviz.

    ros2 launch launch/sim.launch.py
    ros2 launch launch/sim.launch.py vehicle:=hexarotor.yaml trajectory:=hover rviz:=false

The simulator publishes /clock and steps in lock-step with the controller; it is paced at
`real_time_factor` times the wall clock (1.0: watchable in rviz; larger runs faster). The
estimator and rviz come from estimator.launch.py. With `duration_s` > 0 the launch ends when
the simulator finishes.
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, Shutdown
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

LAUNCH_DIR = Path(__file__).resolve().parent
# config/ sits next to launch/ in the repository and in the docker workspace (/ws).
CONFIG_DIR = LAUNCH_DIR.parent / "config"
BOOLEAN = ["true", "false"]


def generate_launch_description() -> LaunchDescription:
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    # A bare file name is looked up in config/vehicles; an absolute path is used as given.
    vehicle_file = PathJoinSubstitution(
        [str(CONFIG_DIR / "vehicles"), LaunchConfiguration("vehicle")])
    simulator = Node(
        package="variational_sim",
        executable="simulator_node",
        name="simulator",
        output="screen",
        parameters=[
            str(CONFIG_DIR / "simulator.yaml"),
            {
                "use_sim_time": use_sim_time,
                "vehicle_file": ParameterValue(vehicle_file, value_type=str),
                "duration_s": ParameterValue(LaunchConfiguration("duration_s"), value_type=float),
                "real_time_factor": ParameterValue(
                    LaunchConfiguration("real_time_factor"), value_type=float),
            },
        ],
        on_exit=Shutdown(reason="simulation finished"),
    )
    controller = Node(
        package="mav_dynamics",
        executable="controller_node",
        name="controller",
        output="screen",
        parameters=[
            str(CONFIG_DIR / "controller.yaml"),
            {
                "use_sim_time": use_sim_time,
                "vehicle_file": ParameterValue(vehicle_file, value_type=str),
                "trajectory": ParameterValue(LaunchConfiguration("trajectory"), value_type=str),
                "odometry_source": ParameterValue(
                    LaunchConfiguration("odometry_source"), value_type=str),
            },
        ],
    )
    estimator_and_rviz = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_DIR / "estimator.launch.py")),
        launch_arguments={
            "use_sim_time": LaunchConfiguration("use_sim_time"),
            "rviz": LaunchConfiguration("rviz"),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "vehicle", default_value="quadrotor_x.yaml",
            description="vehicle file: a name in config/vehicles or an absolute path"),
        DeclareLaunchArgument(
            "trajectory", default_value="figure_eight",
            choices=["figure_eight", "hover", "waypoints"],
            description="reference the controller tracks"),
        DeclareLaunchArgument(
            "odometry_source", default_value="estimate", choices=["estimate", "ground_truth"],
            description="odometry the controller closes the loop on"),
        DeclareLaunchArgument(
            "rviz", default_value="true", choices=BOOLEAN,
            description="start rviz2 with config/rviz/trident.rviz"),
        DeclareLaunchArgument(
            "duration_s", default_value="0",
            description="simulated time to run, s (0: run until stopped)"),
        DeclareLaunchArgument(
            "real_time_factor", default_value="1.0",
            description="simulated seconds per wall-clock second (1.0: real time)"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="true", choices=BOOLEAN,
            description="every node follows the simulator's /clock"),
        simulator,
        controller,
        estimator_and_rviz,
    ])
