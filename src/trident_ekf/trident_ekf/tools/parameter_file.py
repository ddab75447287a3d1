"""The estimator node's parameter file read without a node: ``trident-replay
--params-file`` replays a bag with the settings the live node would take from the same
file (``config/estimator_live.yaml``, or a log's tuning in ``config/replay/``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mav_geometry.yaml_file import parse_yaml
from mav_ros_common.parameter_file import read_node_parameters
from mav_ros_common.parameters import Values
from trident_ekf.ros.parameters import SPECS

NODE = "trident_ekf"


def read_parameter_file(path: Path, overrides: Mapping[str, Any] | None = None) -> Values:
    """Every estimator parameter from ``path`` and ``overrides`` as
    ``mav_ros_common.parameter_file.read_node_parameters`` reads them (ValueError naming the
    file)."""
    return read_node_parameters(SPECS, NODE, path, overrides, parse_yaml)
