"""The estimator node's parameter file read without a node: ``trident-replay
--params-file`` replays a bag with the settings the live node would take from the same
file (``config/estimator_live.yaml``, or a log's tuning in ``config/replay/``)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mav_geometry.shown import shown
from mav_ros_common.parameters import Values, flattened
from trident_ekf.ros.parameters import SPECS

NODE = "trident_ekf"
NODE_KEYS = (NODE, f"/{NODE}", "/**")  # how a ROS 2 parameter file may name the node
MAX_NAMED_UNKNOWN = 5  # a file of typos gets a readable error, not a list of all of them


def read_parameter_file(path: Path, overrides: Mapping[str, Any] | None = None) -> Values:
    """Every node parameter: the file's ``trident_ekf: ros__parameters:`` values, then
    ``overrides`` (parameter name -> value), the rest at their defaults; each checked as
    the node checks it. ValueError naming the file: unreadable, no such block, an unknown
    parameter (a typo is not silently ignored; the closest names are suggested) or an
    invalid value (the parameter, the value and what is allowed)."""
    try:
        document = yaml.safe_load(path.read_text())
    except RecursionError:
        raise ValueError(f"cannot read the parameter file {path}: nested too deeply") from None
    except (OSError, yaml.YAMLError, ValueError) as error:  # ValueError: not UTF-8, long ints
        raise ValueError(f"cannot read the parameter file {path}: {str(error)[:300]}") from None
    block = next((document[key]["ros__parameters"] for key in NODE_KEYS
                  if isinstance(document, dict) and isinstance(document.get(key), dict)
                  and isinstance(document[key].get("ros__parameters"), dict)), None)
    if block is None:
        raise ValueError(f"{path}: no '{NODE}: ros__parameters:' block "
                         f"(node keys tried: {list(NODE_KEYS)})")
    try:
        given = flattened(block) | dict(overrides or {})
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    specs = {spec.name: spec for spec in SPECS}
    unknown = sorted(map(str, set(given) - set(specs)))
    if unknown:
        hints = {name: difflib.get_close_matches(name, specs, n=2)
                 for name in unknown[:MAX_NAMED_UNKNOWN]}
        more = len(unknown) - len(hints)
        raise ValueError(f"{path}: unknown parameter(s) " + "; ".join(
            shown(name) + (f" (did you mean {hint}?)" if hint else "")
            for name, hint in hints.items()) + (f"; and {more} more" if more else ""))
    try:
        return {name: spec.check(given.get(name, spec.default))
                for name, spec in specs.items()}
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
