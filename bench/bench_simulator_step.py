"""Cost of one ``VehicleSimulator.step()`` (1 kHz physics) with the compiled kernels against
the Python references (what ``MAV_KERNELS=reference`` runs), in the same process.

Usage: python bench/bench_simulator_step.py [--repeats K] [--steps N] [--output-dir DIR]

Each case is a simulator with every sensor fitted (IMU 200 Hz, GNSS 10 Hz, barometer and
magnetometer 50 Hz), airborne at 10 m, yawing at 1 rad/s with every rotor at the hover
speed. The compiled one and the reference one start alike and are stepped in alternating
blocks of ``--steps`` steps (best block of ``--repeats``, so both see the same machine
load); after the timing they must still agree on the pose to round-off. The reference
swaps every loaded ``_kernels`` extension for None, the numpy/Python code of every package
(DQVI, the plant's wrench and bookkeeping, the motor lag, the GNSS geodetic conversion,
the vehicle model and wing aerodynamics, geometry).

Budget (issue 16): ``mav-sim`` at >= 15x real time with recording on, i.e. the whole graph
under 67 us per simulated ms on the issue's machine (about 2.5-3x faster than the one this
was written on). Writes ``simulator_step.{json,md}``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import numpy as np
from bench_vehicle_sim import spinning_hover
from harness import Result, append_and_show, write_report

from mav_ros_common.resources import find_named_file
from variational_sim.sensors.barometer import BarometerConfig
from variational_sim.sensors.magnetometer import MagnetometerConfig
from variational_sim.vehicle_sim.scenario import load_scenario
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
SIMULATOR_KERNEL_USERS = ("variational_sim.vehicle_sim.plant",
                          "variational_sim.vehicle_sim.motors", "variational_sim.sensors.gnss",
                          "variational_sim.sensors.imu")
"""The modules that use the simulator's own kernels (the rest: DQVI, models, geometry)."""
CASES = (("quadrotor_x", "calm"), ("quadrotor_x", "gusty"), ("tilting_quadrotor", "gusty"),
         ("quadrotor_two_wings", "gusty"))


@contextmanager
def reference_kernels(only: tuple[str, ...] | None = None) -> Iterator[None]:
    """Every loaded module's ``_kernels`` (or only those of the modules named ``only``) set
    to None; objects built inside keep None."""
    swapped = [(module, module._kernels) for module in list(sys.modules.values())
               if isinstance(getattr(module, "_kernels", None), ModuleType)
               and (only is None or module.__name__ in only)]
    for module, _ in swapped:
        module._kernels = None
    try:
        yield
    finally:
        for module, kernels in swapped:
            module._kernels = kernels


def hovering_simulator(vehicle: str, scenario: str) -> VehicleSimulator:
    """A simulator with every sensor, airborne at 10 m, yawing, rotors at the hover speed."""
    simulator = VehicleSimulator(SimulatorConfig(
        vehicle_file=str(find_named_file(vehicle, "vehicles")), seed=1,
        barometer=BarometerConfig(), magnetometer=MagnetometerConfig(),
        scenario=load_scenario(find_named_file(f"{scenario}.yaml", "scenarios"))))
    return spinning_hover(simulator)


def block_time(simulator: VehicleSimulator, steps: int) -> float:
    """Seconds per step over ``steps`` steps."""
    start = time.perf_counter()
    for _ in range(steps):
        simulator.step()
    return (time.perf_counter() - start) / steps


def measure(vehicle: str, scenario: str, repeats: int, steps: int) -> tuple[Result, float]:
    """Compiled against reference, and the time per step (s) with only the simulator's
    own kernels off (DQVI, vehicle model and geometry compiled)."""
    compiled = hovering_simulator(vehicle, scenario)
    with reference_kernels():
        reference = hovering_simulator(vehicle, scenario)
    with reference_kernels(SIMULATOR_KERNEL_USERS):
        partial = hovering_simulator(vehicle, scenario)
    ours = baseline = partial_s = math.inf
    for _ in range(repeats):
        ours = min(ours, block_time(compiled, steps))
        with reference_kernels():
            baseline = min(baseline, block_time(reference, steps))
        with reference_kernels(SIMULATOR_KERNEL_USERS):
            partial_s = min(partial_s, block_time(partial, steps))
    for other in (reference, partial):
        drift = float(np.max(np.abs(compiled.plant.state.pose - other.plant.state.pose)))
        if not drift < 1e-9:
            raise AssertionError(f"{vehicle}/{scenario}: compiled and reference poses differ "
                                 f"by {drift:.3g} after {repeats * steps} steps")
    return Result(f"simulator step, {vehicle}, {scenario}", 1, ours, baseline), partial_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7,
                        help="timed blocks per kernel choice, best kept (default 7, >= 1)")
    parser.add_argument("--steps", type=int, default=1000,
                        help="physics steps per timed block (default 1000, >= 100)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.steps < 100:
        parser.error("--steps must be >= 100 (a whole GNSS period at 1 kHz)")
    results, partials = [], []
    for index, (vehicle, scenario) in enumerate(CASES, start=1):
        result, partial = measure(vehicle, scenario, args.repeats, args.steps)
        print(f"[{index}/{len(CASES)}] {result.name}: {result.ours_s * 1e6:.1f} us compiled, "
              f"{result.baseline_s * 1e6:.1f} us reference, {partial * 1e6:.1f} us with the "
              "simulator's own kernels off")
        results.append(result)
        partials.append(partial)
    _, markdown = write_report(results, "VehicleSimulator.step per 1 kHz physics step: "
                               "compiled kernels vs Python references", "reference",
                               args.output_dir, "simulator_step",
                               "per physics step, best block of repeats")
    lines = ["", "Real-time factors at 1 kHz; 'simulator kernels off': the plant, motor, IMU "
             "and GNSS kernels on their Python references, DQVI and the rest compiled.", "",
             "| case | compiled | real time (compiled) | real time (reference) | "
             "simulator kernels off | off / compiled |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.name} | {r.ours_s * 1e6:.1f} us | {1e-3 / r.ours_s:.1f}x | "
              f"{1e-3 / r.baseline_s:.1f}x | {p * 1e6:.1f} us | {p / r.ours_s:.2f} |"
              for r, p in zip(results, partials, strict=True)]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
