"""The graph's three nodes' parameters without nodes: each node's parameter file (named by
``config/graph.yaml``), then the run's overrides, every value checked by its
``ParameterSpec`` and turned into the node's settings by the node's own builder, as
``mav-sim`` gives them to the nodes (``--set NODE.PARAM=VALUE``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from mav_bringup.graph.components import default_graph_file, load_graph
from mav_dynamics.ros import parameters as controller_parameters
from mav_dynamics.ros.parameters import ControllerSettings, controller_settings
from mav_geometry.shown import shown
from mav_geometry.yaml_file import parse_yaml
from mav_ros_common.parameter_file import read_node_parameters
from mav_ros_common.parameters import ParameterError, ParameterSpec, Values
from trident_ekf.ros import parameters as estimator_parameters
from trident_ekf.ros.parameters import EstimatorSettings, estimator_settings
from variational_sim.ros import parameters as simulator_parameters
from variational_sim.ros.parameters import SimulatorSettings, simulator_settings

SIMULATOR, CONTROLLER, ESTIMATOR = "simulator", "controller", "trident_ekf"
NODES = (SIMULATOR, CONTROLLER, ESTIMATOR)
"""The nodes of the graph the pipeline runs, by their graph names."""
SettingsT = TypeVar("SettingsT")


@dataclass(frozen=True)
class NodeSetup(Generic[SettingsT]):
    """One node's validated parameter values and the settings its builder made of them."""

    values: Values
    settings: SettingsT


@dataclass(frozen=True)
class GraphParameters:
    """What each node of the graph would run with."""

    simulator: NodeSetup[SimulatorSettings]
    controller: NodeSetup[ControllerSettings]
    estimator: NodeSetup[EstimatorSettings]


def _setup(node: str, specs: Sequence[ParameterSpec], build: Callable[[Values], SettingsT],
           path: Path, overrides: Mapping[str, Any]) -> NodeSetup[SettingsT]:
    """A node's values from its file and overrides, and its settings; ValueError naming
    the node (and the file, parameter and value where one is at fault)."""
    try:
        values = read_node_parameters(specs, node, path, overrides, parse_yaml)
        return NodeSetup(values, build(values))
    except ValueError as error:
        name = error.name if isinstance(error, ParameterError) else None
        raise ParameterError(f"node '{node}': {error}", name) from None


def read_graph_parameters(overrides: Mapping[str, Mapping[str, Any]],
                          graph_file: Path | None = None) -> GraphParameters:
    """The three nodes' parameters from the graph file's parameter files (default: the
    installed ``config/graph.yaml``) and ``overrides`` (node -> parameter -> value);
    ValueError for an override of a node the graph does not have, or any invalid value."""
    path = graph_file if graph_file is not None else default_graph_file()
    components = {component.name: component for component in load_graph(path)}
    missing = [node for node in NODES if node not in components]
    if missing:
        raise ValueError(f"graph file {path} has no {shown(missing)} node(s): the pipeline "
                         f"runs {list(NODES)}")
    strangers = sorted(set(overrides) - set(NODES))
    if strangers:
        raise ValueError(f"overrides name no node of the pipeline: {shown(strangers)}; its "
                         f"nodes are {list(NODES)}")

    def setup(node: str, specs: Sequence[ParameterSpec],
              build: Callable[[Values], SettingsT]) -> NodeSetup[SettingsT]:
        return _setup(node, specs, build, components[node].parameters,
                      overrides.get(node, {}))

    return GraphParameters(
        simulator=setup(SIMULATOR, simulator_parameters.SPECS, simulator_settings),
        controller=setup(CONTROLLER, controller_parameters.SPECS, controller_settings),
        estimator=setup(ESTIMATOR, estimator_parameters.SPECS, estimator_settings))
