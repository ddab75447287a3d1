"""The simulator of one vehicle built from the node's settings, with its vehicle and
scenario files resolved (names looked up in the installed share), without a node: the
simulator node and the ROS-free closed-loop pipeline of ``mav_bringup`` build it alike."""

from __future__ import annotations

from dataclasses import replace

from mav_ros_common.parameters import ParameterError, show
from mav_ros_common.resources import ShareNotFoundError, find_named_file
from variational_sim.vehicle_sim.scenario import ScenarioError, load_scenario
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator


def vehicle_simulator(config: SimulatorConfig, scenario: str) -> VehicleSimulator:
    """The simulator of ``config`` with its vehicle file and the ``scenario`` (a name in
    config/scenarios/ or a path; "" keeps ``config.scenario``) resolved; ParameterError
    naming the parameter (``scenario`` or ``vehicle_file``)."""
    if scenario:
        try:
            config = replace(config, scenario=load_scenario(find_named_file(scenario,
                                                                            "scenarios")))
        except (ValueError, ShareNotFoundError) as error:
            raise ParameterError(f"parameter 'scenario' = {show(scenario)} is invalid: {error}",
                                 "scenario") from error
    try:
        path = find_named_file(config.vehicle_file, "vehicles")
        return VehicleSimulator(replace(config, vehicle_file=str(path)))
    except ScenarioError as error:
        raise ParameterError(f"parameter 'scenario' = {show(scenario)} does not fit this "
                             f"simulator: {error}", "scenario") from error
    except (ValueError, ShareNotFoundError) as error:
        raise ParameterError(f"parameter 'vehicle_file' = {show(config.vehicle_file)} is "
                             f"invalid: {error}", "vehicle_file") from error
