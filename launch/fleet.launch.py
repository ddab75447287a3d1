"""Several vehicles: one simulator, and a controller and an estimator per vehicle, on sim time.

    ros2 launch mav_bringup fleet.launch.py
    ros2 launch mav_bringup fleet.launch.py vehicles:=quadrotor_x,hexarotor,tilted_hexarotor

Vehicle k (from 1) flies in namespace `uav<k>` (topics `/uav1/imu/data`, frames
`uav1/base_link`), starting (k - 1) x `vehicle_spacing_m` east of the first, with its own
seed; its controller's reference moves with it. The simulator waits at each lock-step
boundary for every vehicle's command. No rviz: trident.rviz shows one vehicle. The per-vehicle
nodes come from `mav_bringup.launch_support.fleet_node_arguments` (the same changes as
`mav-sim --vehicles`). With `duration_s` > 0 the launch ends when the simulator finishes.
DDS discovery stays on this machine unless `discovery_range` widens it (docs/security.md).
"""

from launch.actions import (
    DeclareLaunchArgument,
    OpaqueFunction,
    SetEnvironmentVariable,
    Shutdown,
)
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from mav_bringup.launch_support import (
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_RANGES,
    discovery_range_default,
    fleet_node_arguments,
)

BRINGUP = "mav_bringup"
BOOLEAN = ["true", "false"]


def launch_fleet(context: LaunchContext) -> list[Node]:
    """The controllers and estimators of the vehicles given."""
    configurations = {
        "vehicles": LaunchConfiguration("vehicles").perform(context),
        "vehicle_spacing_m": LaunchConfiguration("vehicle_spacing_m").perform(context),
        "trajectory": LaunchConfiguration("trajectory").perform(context),
        "odometry_source": LaunchConfiguration("odometry_source").perform(context),
        "use_sim_time": LaunchConfiguration("use_sim_time").perform(context),
    }
    return [Node(**arguments) for arguments in fleet_node_arguments(configurations)]


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(BRINGUP)
    simulator = Node(
        package="variational_sim",
        executable="simulator_node",
        name="simulator",
        output="screen",
        parameters=[
            PathJoinSubstitution([share, "config", "simulator.yaml"]),
            {
                "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"),
                                               value_type=bool),
                "vehicles": ParameterValue(LaunchConfiguration("vehicles"), value_type=str),
                "vehicle_spacing_m": ParameterValue(LaunchConfiguration("vehicle_spacing_m"),
                                                    value_type=float),
                "scenario": ParameterValue(LaunchConfiguration("scenario"), value_type=str),
                "duration_s": ParameterValue(LaunchConfiguration("duration_s"), value_type=float),
                "real_time_factor": ParameterValue(
                    LaunchConfiguration("real_time_factor"), value_type=float),
            },
        ],
        on_exit=Shutdown(reason="simulation finished"),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "vehicles", default_value="quadrotor_x,hexarotor",
            description="comma-separated vehicle files (names in config/vehicles of "
                        "mav_bringup, or paths): vehicle k in namespace uav<k>"),
        DeclareLaunchArgument(
            "vehicle_spacing_m", default_value="3.0",
            description="east spacing of the start positions, m"),
        DeclareLaunchArgument(
            "scenario", default_value="calm",
            description="scenario file (wind and timed faults, for every vehicle): a name in "
                        "config/scenarios of mav_bringup, or a path"),
        DeclareLaunchArgument(
            "trajectory", default_value="figure_eight",
            choices=["figure_eight", "hover", "waypoints"],
            description="reference every controller tracks (around its vehicle's start)"),
        DeclareLaunchArgument(
            "odometry_source", default_value="estimate", choices=["estimate", "ground_truth"],
            description="odometry the controllers close the loop on"),
        DeclareLaunchArgument(
            "duration_s", default_value="0",
            description="simulated time to run, s (0: run until stopped)"),
        DeclareLaunchArgument(
            "real_time_factor", default_value="1.0",
            description="simulated seconds per wall-clock second"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="true", choices=BOOLEAN,
            description="every node follows the simulator's /clock"),
        DeclareLaunchArgument(
            "discovery_range", default_value=discovery_range_default(),
            choices=DISCOVERY_RANGES,
            description="how far DDS discovery reaches (ROS_AUTOMATIC_DISCOVERY_RANGE of every "
                        "node started here): LOCALHOST (this machine only; the default unless "
                        "the variable is set), SUBNET (the local network), OFF, SYSTEM_DEFAULT; "
                        "docs/security.md"),
        SetEnvironmentVariable(DISCOVERY_RANGE_VARIABLE, LaunchConfiguration("discovery_range")),
        simulator,
        OpaqueFunction(function=launch_fleet),
    ])
