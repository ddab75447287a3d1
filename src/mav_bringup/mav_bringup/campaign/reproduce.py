"""The commands that reproduce one run of a campaign: ``mav-campaign --only`` (the same
closed-loop pipeline, into the campaign's output directory) and the equivalent ``mav-sim``
line (the ROS graph, which flies the same trajectories for the same seed)."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mav_bringup.campaign import columns as C

REPRODUCE_DIR = "reproduce"
"""Where, under the campaign's output directory, the ``mav-sim`` line writes its run."""


def campaign_command(campaign_file: Path, output_dir: Path, run_id: str) -> str:
    """``mav-campaign`` re-running only ``run_id``."""
    return shlex.join(["mav-campaign", str(campaign_file), "--output-dir", str(output_dir),
                       "--only", run_id])


def mav_sim_command(run: Mapping[str, Any], overrides: Mapping[str, Any],
                    output_dir: Path) -> str:
    """``mav-sim`` flying the run ``run`` (a row of results.parquet): its vehicle, scenario,
    trajectory, seed and duration, the campaign's fixed ``overrides`` and then the run's own
    parameters (``param.<node>.<name>`` columns), each as ``--set NODE.PARAM=VALUE``."""
    words = ["mav-sim", "--vehicle", str(run[C.VEHICLE]), "--scenario", str(run[C.SCENARIO])]
    if run.get(C.TRAJECTORY):
        words += ["--trajectory", str(run[C.TRAJECTORY])]
    words += ["--seed", str(run[C.SEED]), "--duration", _yaml_scalar(run[C.DURATION])]
    settings = dict(_flat_overrides(overrides))
    settings.update((key[len(C.PARAM_PREFIX):], value) for key, value in run.items()
                    if key.startswith(C.PARAM_PREFIX) and not _missing(value))
    for name, value in settings.items():
        words += ["--set", f"{name}={_yaml_value(value)}"]
    words += ["--output-dir", str(output_dir / REPRODUCE_DIR / str(run[C.RUN_ID]))]
    return shlex.join(words)


def _flat_overrides(overrides: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``NODE.PARAM`` and value of each override, written either ``{node: {param: value}}``
    or ``{"node.param": value}``."""
    flat = []
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            flat += [(f"{key}.{name}", item) for name, item in value.items()]
        else:
            flat.append((str(key), value))
    return flat


def _missing(value: Any) -> bool:
    """A parameter column a run has no value in (another run's draw)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _yaml_scalar(value: Any) -> str:
    """A number or word as ``mav-sim --set`` reads it back (YAML): reals keep their point."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _yaml_value(value: Any) -> str:
    """``_yaml_scalar``, lists as YAML flow sequences."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_value(item) for item in value) + "]"
    return _yaml_scalar(value)
