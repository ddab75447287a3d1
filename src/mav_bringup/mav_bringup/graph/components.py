"""The graph file (``config/graph.yaml``): which node classes to load, with which parameters.

Nodes are loaded by ``module:Class`` name, as a component container does, so the runner
depends on no package at import time: a missing package is a clear error at start-up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mav_geometry.shown import shown
from mav_geometry.yaml_file import read_yaml
from mav_ros_common.resources import config_file


def default_graph_file() -> Path:
    """``config/graph.yaml`` as installed with the bringup."""
    return config_file("graph.yaml")


@dataclass(frozen=True)
class Component:
    """One node of the graph: its name, ``module:Class`` and parameter file."""

    name: str
    plugin: str
    parameters: Path

    def load_class(self) -> type:
        """The node class; ImportError names the package to install."""
        module_name, _, class_name = self.plugin.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            package = module_name.split(".")[0]
            raise ImportError(
                f"graph node '{self.name}' needs package '{package}' ({self.plugin}), which is "
                f"not installed ({error}); run ./tools/bootstrap or pip install -e src/{package}"
            ) from error
        node_class: type = getattr(module, class_name)
        return node_class

    def ros_arguments(self, overrides: dict[str, Any]) -> list[str]:
        """``cli_args`` for the node: its parameter file, then ``-p name:=value`` overrides."""
        arguments = ["--ros-args", "--params-file", str(self.parameters)]
        for key, value in overrides.items():
            arguments += ["-p", f"{key}:={_ros_value(value)}"]
        return arguments


def _ros_value(value: Any) -> str:
    """A parameter value as ``ros2 run ... -p`` parses it (YAML flow style, one line)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6)
    return str(text).removesuffix("\n...\n").strip()


def load_graph(path: Path) -> list[Component]:
    """Components in start order; parameter files resolved against the graph file's folder."""
    _, document = read_yaml(path, "graph", ValueError)
    try:
        entries = document["nodes"]
        components = [
            Component(_text(entry["name"]), _text(entry["plugin"]),
                      (Path(path).parent / _text(entry["parameters"])).resolve())
            for entry in entries
        ]
    except (KeyError, TypeError, ValueError) as error:  # ValueError: a path with a NUL
        raise ValueError(f"graph file {path}: expected 'nodes: [{{name, plugin, parameters}}]' "
                         f"({type(error).__name__}: {str(error)[:200]})") from error
    for component in components:
        if ":" not in component.plugin:
            raise ValueError(f"graph file {path}: plugin of {shown(component.name)} must be "
                             f"'module:Class', got {shown(component.plugin)}")
        try:
            found = component.parameters.is_file()
        except OSError:  # a name no file system holds (too long): not found either
            found = False
        if not found:
            raise ValueError(f"graph file {path}: parameter file of {shown(component.name)} "
                             f"not found: {shown(str(component.parameters))}")
    return components


def _text(value: Any) -> str:
    """A name or path of the graph file: text, or a number written as one."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"expected text, got {shown(value)}")
