"""Cost of one simulator physics step and of the ROS node's publishing, against bare steps.

Usage: python bench/bench_vehicle_sim.py [--repeats K] [--output-dir DIR]

Harness cases (ours and the baseline in the same process, after checking they agree):

1. ``VehicleSimulator.step()`` (motors, rotor/drag wrench, DQVI, balances, IMU at 200 Hz,
   GNSS at 10 Hz) against the bare ``DQVI.step`` of the same locked rigid body under the
   same held wrench, for ``quadrotor_x``, ``tilting_quadrotor`` and ``quadrotor_two_wings``
   (its wing wrenches at every step) hovering while yawing at 1 rad/s (so Newton
   iterates), and the tilting one with its servos slewing (K(tilt) at every step); both
   must give the same pose after one step;
2. ``MultirotorPlant.step`` alone against the bare DQVI step (the plant's own overhead);
3. ``SimulatorNode.advance()`` over one 10 ms lock-step period (10 physics steps and every
   message falling due) against 10 ``VehicleSimulator.step()`` calls: the cost of rclpy
   publishing; both must advance 10 steps.

The contract asks for >= 5x real time of the whole graph at 1 kHz physics, hence the
target of <= 80 us per physics step for the quadrotor simulator. Writes
``vehicle_sim_timing.{json,md}`` and prints us per physics step.

Peer (when ``rotorpy`` is installed, the ``bench`` extra): a closed-loop hover at 10 m for
``--peer-duration`` s of sim time, one run after the other in this process, best of
``--repeats``; printed as real-time factors and appended to the report:

- ours: ``VehicleSimulator`` (``quadrotor_x``: DQVI at 1 kHz, first-order motors, IMU and
  GNSS sampled) with the SE(3) ``TrackingController`` and the ``ControlAllocator`` ticking
  at 100 Hz on the true state;
- RotorPy 3: its ``Multirotor`` (Hummingbird parameters: Newton-Euler equations integrated
  by scipy's RK45 over each step, first-order motors, rotor and frame drag; no sensors) with
  its ``SE3Control`` on the true state, once at its customary 100 Hz step (control and
  integration step alike) and once at 1 kHz, our physics rate.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from pathlib import Path

import numpy as np
from harness import Case, Result, append_and_show, run, write_report

from mav_dynamics.allocation import ControlAllocator
from mav_dynamics.controller import TrackingController, TrackingReference
from mav_geometry import quaternion
from mav_ros_common.resources import find_named_file
from variational_sim.integrators.dqvi import DQVI
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
YAW_RATE = 1.0
"""rad/s: a spinning hover keeps the DQVI Newton solve busy while staying in place."""


def spinning_hover(simulator: VehicleSimulator) -> VehicleSimulator:
    """Put ``simulator`` airborne at 10 m, yawing, with every rotor at the hover speed."""
    plant = simulator.plant
    speed = math.sqrt(plant.weight / plant.allocation(simulator.servos.angles)[5].sum())
    plant.reset((0.0, 0.0, 10.0), twist=(0.0, 0.0, YAW_RATE, 0.0, 0.0, 0.0))
    simulator.set_command([speed] * simulator.rotor_count)
    simulator.motors.speeds = list(simulator.motors.commands)
    return simulator


def bare_dqvi(simulator: VehicleSimulator):
    """The same body, state and held wrench stepped by DQVI alone."""
    plant = simulator.plant
    integrator = DQVI(plant.body, plant.step_size)
    held = plant.applied_wrench(simulator.motors.speeds, simulator.servos.angles)
    state = [plant.state]

    def step() -> np.ndarray:
        state[0] = integrator.step(state[0], held)
        return state[0].pose

    return step


def simulator_of(vehicle: str) -> VehicleSimulator:
    """A hovering simulator of an installed vehicle file, spinning its rotors."""
    path = find_named_file(vehicle, "vehicles")
    return spinning_hover(VehicleSimulator(SimulatorConfig(vehicle_file=str(path))))


def simulator_case(vehicle_file: str) -> Case:
    simulator = simulator_of(vehicle_file)
    baseline = bare_dqvi(simulator)

    def ours() -> np.ndarray:
        simulator.step()
        return simulator.plant.state.pose

    return Case(f"simulator step, {Path(vehicle_file).stem}", 1, ours, baseline, _same_pose)


def slewing_tilts_case() -> Case:
    """``tilting_quadrotor`` with a tilt command alternating each step, so the servos move
    and K(tilt) is re-evaluated at every step."""
    simulator = simulator_of("tilting_quadrotor")
    baseline = bare_dqvi(simulator)
    speeds = list(simulator.motors.commands)
    calls = [0]

    def ours() -> np.ndarray:
        calls[0] += 1
        simulator.set_command(speeds, [0.1 * (-1) ** calls[0]] * simulator.tilt_count)
        simulator.step()
        return simulator.plant.state.pose

    return Case("simulator step, tilting_quadrotor, servos slewing", 1, ours, baseline,
                _same_pose)


def plant_case() -> Case:
    simulator = simulator_of("quadrotor_x")
    baseline = bare_dqvi(simulator)
    plant, speeds = simulator.plant, list(simulator.motors.speeds)

    def ours() -> np.ndarray:
        plant.step(speeds)
        return plant.state.pose

    return Case("plant step only, quadrotor_x", 1, ours, baseline, _same_pose)


def _same_pose(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.abs(a - b).max() < 1e-12)


PEER_HOVER_M = (0.0, 0.0, 10.0)
CONTROL_PERIOD_STEPS = 10
"""Our control tick every 10 physics steps: 100 Hz."""


def our_hover(duration_s: float) -> tuple[float, float]:
    """(wall time s, final height m) of our closed-loop hover (see the module)."""
    simulator = spinning_hover(VehicleSimulator(SimulatorConfig(
        vehicle_file=str(find_named_file("quadrotor_x.yaml", "vehicles")))))
    simulator.plant.reset(PEER_HOVER_M)
    model = simulator.plant.model
    allocator = ControlAllocator(model)
    controller = TrackingController(model, rank=allocator.rank)
    reference = TrackingReference(position=np.array(PEER_HOVER_M))
    steps = round(duration_s / simulator.step_size)
    start = time.perf_counter()
    for step in range(steps):
        if step % CONTROL_PERIOD_STEPS == 0:
            truth = simulator.truth
            rotation = quaternion.to_matrix(truth.orientation_xyzw)
            output = controller.update(rotation, truth.position_enu, truth.twist_body, reference)
            simulator.set_command(allocator.allocate(output.wrench).rotor_speeds)
        simulator.step()
    return time.perf_counter() - start, float(simulator.truth.position_enu[2])


def rotorpy_hover(duration_s: float, step_s: float) -> tuple[float, float] | None:
    """(wall time s, final height m) of RotorPy's closed-loop hover, or None without it."""
    try:
        from rotorpy.controllers.quadrotor_control import SE3Control
        from rotorpy.trajectories.hover_traj import HoverTraj
        from rotorpy.vehicles.hummingbird_params import quad_params
        from rotorpy.vehicles.multirotor import Multirotor
    except ImportError:
        return None
    hover = np.array(PEER_HOVER_M)
    vehicle = Multirotor(quad_params, initial_state={
        "x": hover.copy(), "v": np.zeros(3), "q": np.array([0.0, 0.0, 0.0, 1.0]),
        "w": np.zeros(3), "wind": np.zeros(3), "rotor_speeds": np.full(4, 1788.53)})
    controller, trajectory = SE3Control(quad_params), HoverTraj(x0=hover)
    state = dict(vehicle.initial_state)
    start = time.perf_counter()
    for step in range(round(duration_s / step_s)):
        t = step * step_s
        state = vehicle.step(state, controller.update(t, state, trajectory.update(t)), step_s)
    return time.perf_counter() - start, float(state["x"][2])


def peer_comparison(duration_s: float, repeats: int) -> list[str]:
    """Markdown lines: real-time factors of our hover and RotorPy's, best of ``repeats``
    taking turns (so a busy spell of the machine hits both)."""
    peer_steps = (0.01, 0.001)
    ours: list[tuple[float, float]] = []
    peers: dict[float, list[tuple[float, float]]] = {step: [] for step in peer_steps}
    for _ in range(repeats):
        ours.append(our_hover(duration_s))
        for step_s in peer_steps:
            run = rotorpy_hover(duration_s, step_s)
            if run is not None:
                peers[step_s].append(run)
    wall, height = min(ours)
    lines = ["", f"Closed-loop hover at 10 m, {duration_s:g} s of sim time (peer: RotorPy; "
             "see the module docstring for what each simulates).", "",
             "| simulator | physics step | control | real-time factor | ours / peer wall time "
             "| final height (m) |", "|---|---:|---:|---:|---:|---:|",
             f"| ours (quadrotor_x) | 1 ms | 100 Hz | {duration_s / wall:.2f}x | 1.00 "
             f"| {height:.4f} |"]
    if not peers[peer_steps[0]]:
        return [*lines, "", "RotorPy: peer not installed (pip install the bench extra)."]
    for step_s in peer_steps:
        peer_wall, peer_height = min(peers[step_s])
        lines.append(f"| RotorPy 3 (Hummingbird) | {1e3 * step_s:g} ms (RK45) | "
                     f"{1 / step_s:g} Hz | {duration_s / peer_wall:.2f}x | "
                     f"{wall / peer_wall:.2f} | {peer_height:.4f} |")
    return lines


def node_case(context) -> tuple[Case, object]:
    from rclpy.parameter import Parameter

    from variational_sim.ros.simulator_node import SimulatorNode

    node = SimulatorNode(context=context, parameter_overrides=[
        Parameter("lockstep", value=False), Parameter("real_time_factor", value=0.0)])
    spinning_hover(node.simulator)
    reference = spinning_hover(VehicleSimulator(node.simulator.config))
    steps = round(node.get_parameter("lockstep_period_s").value
                  * node.get_parameter("physics_rate_hz").value)

    def ours() -> int:
        before = node.simulator.steps
        node.advance()
        return node.simulator.steps - before

    def baseline() -> int:
        for _ in range(steps):
            reference.step()
        return steps

    return Case("node advance (10 ms, publishing) vs core steps", steps, ours, baseline,
                lambda a, b: a == b == steps), node


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--repeats", type=int, default=5, help="timing repeats")
    arguments.add_argument("--peer-duration", type=float, default=1.0,
                           help="sim time of the RotorPy comparison, s (default 1; > 0)")
    arguments.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                           help=f"where to write the reports (default {DEFAULT_OUTPUT})")
    args = arguments.parse_args()
    if args.repeats < 1 or not args.peer_duration > 0.0:
        arguments.error("--repeats must be >= 1 and --peer-duration > 0")
    peer_lines = peer_comparison(args.peer_duration, args.repeats)
    # an isolated DDS domain so the node's traffic reaches nobody else: the one set in
    # ROS_DOMAIN_ID (when several runs share the machine), else a random one
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    try:
        node_bench, node = node_case(context)
        cases = [simulator_case("quadrotor_x.yaml"), simulator_case("tilting_quadrotor.yaml"),
                 simulator_case("quadrotor_two_wings.yaml"), slewing_tilts_case(), plant_case(),
                 node_bench]
        results = run(cases, args.repeats)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    _, markdown = write_report(results, "Vehicle simulator: cost per physics step",
                               "baseline (bare DQVI step; for the node case, the core's steps)",
                               args.output_dir, "vehicle_sim_timing")
    for result in results:
        _print_per_step(result)
    append_and_show(markdown, peer_lines)


def _print_per_step(result: Result) -> None:
    per_step = result.ours_s / result.size
    print(f"{result.name}: {1e6 * per_step:.1f} us per physics step "
          f"(baseline {1e6 * result.baseline_s / result.size:.1f} us, ratio {result.ratio:.2f}); "
          f"at 1 kHz alone: {1e-3 / per_step:.1f}x real time")


if __name__ == "__main__":
    main()
