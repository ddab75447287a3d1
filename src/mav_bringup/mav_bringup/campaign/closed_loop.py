"""The run function campaigns use by default: one run on the ROS-free closed loop
(``mav_bringup.pipeline``), the simulator, controller and estimator cores of the graph."""

from __future__ import annotations

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.campaign_file import RunSpec
from mav_bringup.campaign.records import LoopOutput


def run_closed_loop_spec(spec: RunSpec) -> LoopOutput:
    """Fly ``spec`` (its series sampled at ``columns.SERIES_RATE_HZ``)."""
    from mav_bringup.pipeline.closed_loop import LoopOptions, run_closed_loop

    options = LoopOptions(vehicle=spec.vehicle.reference, scenario=spec.scenario.reference,
                          trajectory=spec.trajectory, seed=spec.seed,
                          duration_s=spec.duration_s, overrides=spec.overrides())
    result: LoopOutput = run_closed_loop(options, series_rate_hz=C.SERIES_RATE_HZ)
    return result
