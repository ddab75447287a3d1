"""A node's parameter file read without a node: the values the node would take from the same
file (and overrides), each checked by its ``ParameterSpec``.

``trident-replay --params-file`` replays a bag with the estimator's settings this way, and
the closed-loop pipeline of ``mav_bringup`` builds the simulator, controller and estimator
from the graph's parameter files without rclpy.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from mav_ros_common.parameters import (
    _RCLPY_PARAMETERS,
    ParameterSpec,
    Values,
    flattened,
    show,
)

MAX_NAMED_UNKNOWN = 5
"""Unknown names an error lists: a file of typos gets a readable error, not all of them."""


def node_keys(node: str) -> tuple[str, ...]:
    """The keys under which a ROS 2 parameter file may hold the node's block, in the order
    they are looked for."""
    return (node, f"/{node}", "/**")


def read_node_parameters(specs: Sequence[ParameterSpec], node: str, path: Path,
                         overrides: Mapping[str, Any] | None = None,
                         parse: Callable[[str], Any] = yaml.safe_load) -> Values:
    """Every parameter of ``specs``: the file's ``<node>: ros__parameters:`` values, then
    ``overrides`` (parameter name -> value), the rest at their defaults; each checked as the
    node checks it. Names rclpy owns (``use_sim_time``) are left to rclpy, as the node does.
    ``parse`` reads the text (a safe YAML loader; callers with ``mav_geometry`` pass its
    faster ``parse_yaml``). ValueError naming the file: unreadable, no such block, an
    unknown parameter (a typo is not silently ignored; the closest names are suggested) or
    an invalid value (the parameter, the value and what is allowed)."""
    try:
        document = parse(Path(path).read_text())
    except RecursionError:
        raise ValueError(f"cannot read the parameter file {path}: nested too deeply") from None
    except (OSError, yaml.YAMLError, ValueError) as error:  # ValueError: not UTF-8, long ints
        raise ValueError(f"cannot read the parameter file {path}: {str(error)[:300]}") from None
    keys = node_keys(node)
    block = next((document[key]["ros__parameters"] for key in keys
                  if isinstance(document, dict) and isinstance(document.get(key), dict)
                  and isinstance(document[key].get("ros__parameters"), dict)), None)
    if block is None:
        raise ValueError(f"{path}: no '{node}: ros__parameters:' block "
                         f"(node keys tried: {list(keys)})")
    try:
        given = flattened(block) | dict(overrides or {})
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    by_name = {spec.name: spec for spec in specs}
    unknown = sorted(name for name in map(str, given)
                     if name not in by_name and not name.startswith(_RCLPY_PARAMETERS))
    if unknown:
        hints = {name: difflib.get_close_matches(name, by_name, n=2)
                 for name in unknown[:MAX_NAMED_UNKNOWN]}
        more = len(unknown) - len(hints)
        raise ValueError(f"{path}: unknown parameter(s) " + "; ".join(
            show(name) + (f" (did you mean {hint}?)" if hint else "")
            for name, hint in hints.items()) + (f"; and {more} more" if more else ""))
    try:
        return {name: spec.check(given.get(name, spec.default))
                for name, spec in by_name.items()}
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
