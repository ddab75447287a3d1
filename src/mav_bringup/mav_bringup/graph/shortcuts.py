"""What ``mav-sim``'s own options set on the graph's nodes, before ``--set`` overrides: one
mapping for the graph runner and the ROS-free pipeline, so both fly the same run."""

from __future__ import annotations

from typing import Any


def shortcut_parameters(*, vehicle: str, trajectory: str, odometry_source: str, seed: int,
                        duration_s: float, scenario: str | None) -> dict[str, dict[str, Any]]:
    """Node name -> parameter -> value for the options of one run (``scenario`` None: the
    simulator parameter file's)."""
    parameters: dict[str, dict[str, Any]] = {
        "simulator": {"duration_s": float(duration_s), "vehicle_file": vehicle, "seed": seed},
        "controller": {"vehicle_file": vehicle, "trajectory": trajectory,
                       "odometry_source": odometry_source},
    }
    if scenario is not None:
        parameters["simulator"]["scenario"] = scenario
    return parameters
