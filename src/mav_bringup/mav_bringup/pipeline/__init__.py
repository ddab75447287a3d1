"""The closed loop of ``mav-sim`` without ROS: the simulator, controller/allocator and
estimator cores of the graph's nodes stepped in one Python loop, with the nodes' parameter
files, for the same trajectories several times faster (campaigns run it).

- ``node_parameters``: the graph's parameter files and overrides -> each node's settings;
- ``cores``: the simulator, estimation session and flight control built as the nodes do;
- ``sensor_feed``: the simulator's readings as the estimator's input samples;
- ``closed_loop``: ``LoopOptions``, ``run_closed_loop``, ``LoopResult``;
- ``loop_record``, ``run_metrics``: what a run keeps, and its metrics, series and updates.
"""

from mav_bringup.pipeline.closed_loop import LoopOptions, LoopResult, run_closed_loop

__all__ = ["LoopOptions", "LoopResult", "run_closed_loop"]
