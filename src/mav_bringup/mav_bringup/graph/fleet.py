"""Several vehicles in one graph: namespaces, per-vehicle parameters and the fleet report.

The simulator flies every vehicle (its ``vehicles`` parameter); the other nodes of the
graph (controller, estimator) run once per vehicle in its namespace ``uav<k>``, where their
relative topics meet the simulator's ``uav<k>/...`` ones. A parameter file keyed by the
node's name does not reach a node in a namespace (rcl matches the full name), so each gets
a copy keyed ``/uav<k>/<name>``, written next to the run's outputs for the record.
Vehicle k (from 0) starts ``k * spacing`` east of the first: its controller's references
(figure-eight centre, hover position, waypoints) move with it; its estimator names its
frames ``uav<k>/base_link`` and ``uav<k>/odom`` in the common ``map``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from mav_bringup.graph.components import Component
from mav_geometry.yaml_file import read_yaml

CONTROLLER = "controller"
ESTIMATOR = "trident_ekf"


def namespace(index: int) -> str:
    """The namespace of vehicle ``index`` (from 0): ``uav1``, ``uav2``..."""
    return f"uav{index + 1}"


def namespaced_parameter_file(component: Component, name_space: str, directory: Path) -> Path:
    """A copy of the component's parameter file keyed ``/<namespace>/<node name>``."""
    _, document = read_yaml(component.parameters, "parameter", ValueError)
    values = document[component.name]["ros__parameters"]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name_space}_{component.name}.yaml"
    path.write_text(yaml.safe_dump({f"/{name_space}/{component.name}":
                                    {"ros__parameters": values}}, sort_keys=False))
    return path


def _shifted(values: list[float], east_m: float, stride: int) -> list[float]:
    """Flat [x, y(, z), ...] points moved ``east_m`` along x."""
    return [v + east_m if i % stride == 0 else v for i, v in enumerate(values)]


def vehicle_parameters(component: Component, index: int, vehicle_file: str,
                       spacing_m: float) -> dict[str, Any]:
    """What vehicle ``index``'s copy of a node gets on top of its parameter file."""
    name_space = namespace(index)
    if component.name == ESTIMATOR:
        return {"base_frame": f"{name_space}/base_link", "odom_frame": f"{name_space}/odom"}
    if component.name != CONTROLLER:
        return {}
    _, document = read_yaml(component.parameters, "parameter", ValueError)
    values = document[CONTROLLER]["ros__parameters"]
    east = index * spacing_m
    moved: dict[str, Any] = {"vehicle_file": vehicle_file}
    for key, stride in (("figure_eight_center", 2), ("hover_position", 3), ("waypoints", 3)):
        if key in values:
            moved[key] = _shifted([float(v) for v in values[key]], east, stride)
    return moved


def write_fleet_summary(directory: Path, run: dict[str, Any],
                        vehicles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``summary.json`` and ``report.md`` of a multi-vehicle run, linking each vehicle's own
    report (``<namespace>/report.md``); returns the summary."""
    summary = {**run, "vehicles": vehicles}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    lines = [
        "# mav-sim fleet report", "",
        f"- {len(vehicles)} vehicles, scenario `{run.get('scenario')}`, "
        f"{run.get('sim_time_s', 0.0):.1f} s simulated in {run.get('wall_time_s', 0.0):.1f} s "
        f"wall: **{run.get('real_time_factor') or 0.0:.2f}x real time**", "",
        "| vehicle | file | tracking RMS (m) | worst axis inside 3 sigma | report |",
        "|---|---|---|---|---|",
    ]
    for name, facts in vehicles.items():
        inside = facts.get("inside_three_sigma") or {}
        worst = min(inside.items(), key=lambda item: item[1]) if inside else None
        worst_text = f"{worst[0]} {100 * worst[1]:.1f} %" if worst else "n/a"
        tracking = facts.get("tracking_rms_m")
        tracking_text = "n/a" if tracking is None else f"{tracking:.3f}"
        lines.append(f"| `{name}` | `{facts.get('vehicle')}` | {tracking_text} | {worst_text} "
                     f"| [{name}/report.md]({name}/report.md) |")
    (directory / "report.md").write_text("\n".join(lines) + "\n")
    return summary
