"""Simulation: simulator, controller/allocator and trident EKF on sim time, with rviz.

    ros2 launch mav_bringup sim.launch.py
    ros2 launch mav_bringup sim.launch.py vehicle:=hexarotor trajectory:=hover rviz:=false

The simulator publishes /clock and steps in lock-step with the controller; it is paced at
`real_time_factor` times the wall clock (1.0: watchable in rviz; larger runs faster). The
estimator and rviz come from estimator.launch.py. With `duration_s` > 0 the launch ends when
the simulator finishes. Parameter and vehicle files come from the installed mav_bringup.
DDS discovery stays on this machine unless `discovery_range` (or an exported
ROS_AUTOMATIC_DISCOVERY_RANGE) widens it; with ROS_SECURITY_ENABLE=true each node runs in its
enclave of the mav-keystore keystore (docs/security.md).
"""

from launch.actions import (
    DeclareLaunchArgument,
    IncludeLaunchDescription,
    OpaqueFunction,
    SetEnvironmentVariable,
    Shutdown,
)
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
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


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(BRINGUP)
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    # A name is looked up by the nodes among the installed vehicle files; a path is used as is.
    vehicle_file = ParameterValue(LaunchConfiguration("vehicle"), value_type=str)
    simulator = Node(
        package="variational_sim",
        executable="simulator_node",
        name="simulator",
        output="screen",
        # Its SROS2 identity when ROS_SECURITY_ENABLE=true (mav-keystore, docs/security.md).
        ros_arguments=["--enclave", "/simulator"],
        parameters=[
            PathJoinSubstitution([share, "config", "simulator.yaml"]),
            {
                "use_sim_time": use_sim_time,
                "vehicle_file": vehicle_file,
                "scenario": ParameterValue(LaunchConfiguration("scenario"), value_type=str),
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
        ros_arguments=["--enclave", "/controller"],
        parameters=[
            PathJoinSubstitution([share, "config", "controller.yaml"]),
            {
                "use_sim_time": use_sim_time,
                "vehicle_file": vehicle_file,
                "trajectory": ParameterValue(LaunchConfiguration("trajectory"), value_type=str),
                "odometry_source": ParameterValue(
                    LaunchConfiguration("odometry_source"), value_type=str),
            },
        ],
    )
    estimator_and_rviz = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            PathJoinSubstitution([share, "launch", "estimator.launch.py"])),
        launch_arguments={
            "use_sim_time": LaunchConfiguration("use_sim_time"),
            "rviz": LaunchConfiguration("rviz"),
            # The simulator's tuning (its datum, its sensors), not the live defaults.
            "params_file": PathJoinSubstitution([share, "config", "estimator.yaml"]),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            "vehicle", default_value="quadrotor_x.yaml",
            description="vehicle file: a name in config/vehicles of mav_bringup, or a path; "
                        "simulator and controller get the same file"),
        DeclareLaunchArgument(
            "scenario", default_value="calm",
            description="scenario file (wind and timed faults): a name in config/scenarios of "
                        "mav_bringup (calm, gusty, gnss_outage_30s, spoofing_jump, "
                        "motor_failure, sensor_faults), or a path"),
        DeclareLaunchArgument(
            "trajectory", default_value="figure_eight",
            choices=["figure_eight", "hover", "waypoints"],
            description="reference the controller tracks"),
        DeclareLaunchArgument(
            "odometry_source", default_value="estimate", choices=["estimate", "ground_truth"],
            description="odometry the controller closes the loop on"),
        DeclareLaunchArgument(
            "rviz", default_value=rviz_default(), choices=BOOLEAN,
            description="start rviz2 with config/rviz/trident.rviz (default: true where "
                        "rviz2 is installed)"),
        DeclareLaunchArgument(
            "duration_s", default_value="0",
            description="simulated time to run, s (0: run until stopped)"),
        DeclareLaunchArgument(
            "real_time_factor", default_value="1.0",
            description="simulated seconds per wall-clock second (1.0: real time)"),
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
        OpaqueFunction(function=require_rviz2),
        SetEnvironmentVariable(DISCOVERY_RANGE_VARIABLE, LaunchConfiguration("discovery_range")),
        simulator,
        controller,
        estimator_and_rviz,
    ])
