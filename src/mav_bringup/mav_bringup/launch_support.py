"""What the launch files share: whether rviz2 is installed, checked before any node starts;
the discovery range the nodes start with; the per-vehicle nodes of a multi-vehicle
simulation (``fleet.launch.py``).

``ros2 launch`` starts actions in order and a missing package fails only when its node is
reached, after the others run. The launch files therefore default ``rviz`` to whether rviz2
is installed, and put ``OpaqueFunction(function=require_rviz2)`` before every node, so an
explicit ``rviz:=true`` without rviz2 stops the launch before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ament_index_python.packages import PackageNotFoundError, get_package_prefix

from mav_bringup import discovery
from mav_bringup.graph import fleet
from mav_bringup.graph.components import Component
from mav_geometry.yaml_file import parse_yaml
from mav_ros_common.resources import config_file

RVIZ_PACKAGE = "rviz2"


def rviz2_installed() -> bool:
    """rviz2 is on the ament prefix path (a sourced distro or overlay)."""
    if not os.environ.get("AMENT_PREFIX_PATH"):
        return False
    try:
        get_package_prefix(RVIZ_PACKAGE)
    except PackageNotFoundError:
        return False
    return True


def rviz_default() -> str:
    """Default of the ``rviz`` launch argument: ``"true"`` only where rviz2 is installed."""
    return "true" if rviz2_installed() else "false"


def require_rviz2(context: Any) -> list[Any]:
    """OpaqueFunction body: refuse ``rviz:=true`` without rviz2, before any node starts."""
    wanted = str(context.launch_configurations.get("rviz", "false")).lower() in {"true", "1"}
    if wanted and not rviz2_installed():
        raise RuntimeError(
            "rviz:=true but rviz2 is not installed (apt install ros-$ROS_DISTRO-rviz2, or "
            "run rviz2 on another machine on the same ROS_DOMAIN_ID); nothing was started. "
            "Run with rviz:=false to go on without it.")
    return []


DISCOVERY_RANGES = list(discovery.RANGES)
"""Choices of the ``discovery_range`` launch argument."""
DISCOVERY_RANGE_VARIABLE = discovery.VARIABLE


def discovery_range_default() -> str:
    """Default of the ``discovery_range`` launch argument: the user's
    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` when set, else ``LOCALHOST`` (this machine only). The
    launch files set the variable from the argument before any node starts, and every
    process they start inherits it."""
    return discovery.chosen_range()[0]


FLEET_NODES = (("mav_dynamics", "controller_node", "controller", "controller.yaml"),
               ("trident_ekf", "estimator_node", "trident_ekf", "estimator.yaml"))
"""(package, executable, node name, parameter file) of what each vehicle of a fleet runs."""


def fleet_node_arguments(configurations: Mapping[str, str]) -> list[dict[str, Any]]:
    """``launch_ros.actions.Node`` keyword arguments of each vehicle's controller and
    estimator, from the launch configurations ``vehicles`` (comma-separated vehicle files),
    ``vehicle_spacing_m``, ``trajectory``, ``odometry_source`` and ``use_sim_time``.

    Vehicle k runs them in namespace ``uav<k>`` with its parameter file's values as a
    dictionary (launch_ros keys it by the node's full name, which a file keyed by the plain
    name would not reach) and ``mav_bringup.graph.fleet``'s per-vehicle changes: references
    moved with the start position, frames ``uav<k>/base_link`` and ``uav<k>/odom``."""
    files = [f.strip() for f in configurations["vehicles"].split(",") if f.strip()]
    spacing = float(configurations["vehicle_spacing_m"])
    sim_time = configurations["use_sim_time"].lower() in {"true", "1"}
    nodes = []
    for k, vehicle_file in enumerate(files):
        for package, executable, name, parameter_file in FLEET_NODES:
            component = Component(name, "", config_file(parameter_file))
            values = dict(parse_yaml(component.parameters.read_text())[name][
                "ros__parameters"])
            values.update(fleet.vehicle_parameters(component, k, vehicle_file, spacing))
            if name == fleet.CONTROLLER:
                values["trajectory"] = configurations["trajectory"]
                values["odometry_source"] = configurations["odometry_source"]
            nodes.append({"package": package, "executable": executable, "name": name,
                          "namespace": fleet.namespace(k), "output": "screen",
                          "parameters": [{**values, "use_sim_time": sim_time}]})
    return nodes
