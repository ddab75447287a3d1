"""Time per step of the Fly-Hopper in maximal coordinates: compiled step, numpy reference,
minimal-coordinate baseline and MuJoCo, and the cost per step against the number of bodies.

Usage: python bench/bench_hopper.py [--repeats K] [--output-dir DIR] [--max-links N]
       [--skip-baselines]

1. compiled against reference (the same process): the drop test and the hop (1 s each at
   h = 1 ms, the experiments' whole loop: controller, step, records) with the C step
   (``multibody._kernels``, as used) and with the numpy reference
   (``compiled=False``); their trajectories must agree (1e-8 m); the real-time factor
   of each, and the integrator step alone on the hop's recorded states and commands;
2. peer: MuJoCo (when installed; 'peer not installed' otherwise), a 5-body planar
   closed-loop hopper-like leg (vertical slide, two hips, parallelogram closed by a
   ``connect`` equality, foot sphere on a floor plane, position servos on the hips)
   dropped for 1 s at h = 1 ms, one Python ``mj_step`` per step; printed as ratios;
3. scaling: a pendulum chain of 1..N links (``multibody.chain``, h = 1 ms) with the
   contact-free Newton step and with the interior point on every step (foot clear of the
   ground), compiled, and the reference at a few sizes; the fitted cost per added body
   (us), a check that the cost per added body does not grow (the upper half's slope at
   most 1.5x the lower half's), a table and ``hopper_scaling.png``;
4. harness cases (skipped with ``--skip-baselines``; ours and the baseline in the same
   process, after checking they agree):
   the fixed-base passive swing over 0.15 s, maximal variational integrator at
   h = 10 ms and 1 ms against the paper's minimal-coordinate RK4 + Baumgarte at 1 ms;
   they must give the same joint angles at 0.15 s (within 0.05 deg and 0.005 deg);
   the hopper standing on its foot (hips locked, base on a vertical guide) for 50
   steps at h = 1 ms with the contact interior point, against the same robot with its
   base welded at the standing height (contact-free Newton): both must stay put; and
   the drop test and the hop (1 s each at h = 1 ms) with the contact solver as used
   (predictor-corrector, warm start, exact broad phase) against the plain interior
   point (fixed central-path reduction, cold start, every step): same trajectory.

OpenBLAS is held to one thread (``OPENBLAS_NUM_THREADS``, unless set). Times are CPU
seconds of the benchmark's thread, best of ``--repeats`` (the scaling
curve: of 2 more); the harness cases of 4. are wall-clock (``harness.best_time``).
Writes ``hopper.{json,md}``, ``hopper_scaling.{json,md,png}`` and (with the baselines)
``hopper_timing.{json,md}``.
"""

from __future__ import annotations

import os

# every timed path is single-threaded; a multi-threaded BLAS in the reference's dense solve
# only spins for its size (before numpy loads; an explicit setting wins)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import importlib
import json
import time
from pathlib import Path

import numpy as np
from harness import Case, run, write_report

from variational_sim.experiments import drop_test, hop
from variational_sim.experiments.common import fly_hopper
from variational_sim.minimal.planar_loop import BaumgarteRK4, PlanarLoopModel, PlanarState
from variational_sim.multibody.chain import chain_configuration, pendulum_chain
from variational_sim.multibody.contact import ContactVariationalMultibody, InteriorPointOptions
from variational_sim.multibody.hopper import (
    LEG_JOINTS,
    NOMINAL_ANGLES_DEG,
    nominal_configuration,
    with_locked_joints,
    with_vertical_guide,
    with_welded_base,
)
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import joint_angle

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
HORIZON_S = 0.15
HIPS = {name: NOMINAL_ANGLES_DEG[name] for name in ("hip0", "hip2")}
PLAIN = InteriorPointOptions(predictor_corrector=False, warm_start=False, free_step_first=False)
"""The contact solver without its speed-ups: the in-run baseline of the contact cases."""


def maximal_swing(step: float):
    """Zero-argument callable: joint angles (deg) after the fixed-base swing."""
    hopper = with_welded_base(fly_hopper())
    positions, quaternions = nominal_configuration(hopper)

    def swing() -> np.ndarray:
        integrator = VariationalMultibody(hopper, step)
        state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
        for _ in range(round(HORIZON_S / step)):
            state = integrator.step(state)
        return np.degrees([joint_angle(hopper, n, state.quaternions) for n in LEG_JOINTS])

    return swing


def minimal_swing(step: float):
    """Zero-argument callable: the same swing with RK4 + Baumgarte (deg)."""
    model = PlanarLoopModel(with_welded_base(fly_hopper()))
    q0 = np.radians([NOMINAL_ANGLES_DEG[n] for n in LEG_JOINTS])

    def swing() -> np.ndarray:
        integrator = BaumgarteRK4(model, step)
        state = PlanarState(0.0, q0, np.zeros(4))
        for _ in range(round(HORIZON_S / step)):
            state = integrator.step(state)
        return np.degrees(state.q)

    return swing


def standing_base(mechanism) -> np.ndarray:
    """Base CoM position (m) at which the foot of the nominal pose touches the ground."""
    positions, quaternions = nominal_configuration(mechanism)
    integrator = ContactVariationalMultibody(mechanism, 0.001)
    gap = integrator.gaps(integrator.initial_state(positions, quaternions,
                                                   np.zeros((5, 6))))[0]
    return positions[0] - np.array([0.0, 0.0, gap])


def standing(with_contact: bool, steps: int = 50):
    """Zero-argument callable: base height (m) after ``steps`` of 1 ms standing still."""
    locked = with_locked_joints(fly_hopper(), HIPS)
    base = standing_base(locked)
    if with_contact:
        mechanism, integrator_type = with_vertical_guide(locked), ContactVariationalMultibody
    else:
        mechanism = with_welded_base(locked.without_contacts(), base)
        integrator_type = VariationalMultibody
    positions, quaternions = nominal_configuration(mechanism, base_position=base)

    def stand() -> float:
        integrator = integrator_type(mechanism, 0.001)
        state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
        for _ in range(steps):
            state = integrator.step(state)
        return float(state.positions[0, 2])

    return stand


def contact_run(experiment, options: InteriorPointOptions):
    """Zero-argument callable: 1 s of ``experiment`` (drop_test or hop) at h = 1 ms."""
    return lambda: experiment.simulate(0.001, 1.0, options)


def same_drop(a, b) -> bool:
    """Drop results agree: base height (m) and normal force (N) at every step."""
    return bool(np.max(np.abs(a.base_height - b.base_height)) < 1e-8
                and np.max(np.abs(a.normal_force - b.normal_force)) < 1e-4)


def same_hop(a, b) -> bool:
    """Hop results agree: base height at every step (m), apex (m) and flight time (s)."""
    return bool(np.max(np.abs(a.base_height - b.base_height)) < 1e-8
                and abs(a.apex_height - b.apex_height) < 1e-8
                and abs(a.flight_time - b.flight_time) < 1e-9)


def seconds(function) -> tuple[float, object]:
    """CPU time (s) of this thread for one call, and its result. Every timed code path is
    single-threaded; the thread's CPU time does not count the time other processes take
    on a shared machine (wall-clock does), nor the spinning of idle BLAS threads
    (process time does)."""
    start = time.thread_time()
    result = function()
    return time.thread_time() - start, result


def best_time(function, repeats: int) -> tuple[float, object]:
    """Least thread CPU time (s) over ``repeats`` calls, and the last result."""
    runs = [seconds(function) for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[-1][1]


def experiment_run(experiment, compiled: bool, options=None):
    """Zero-argument callable: 1 s of ``experiment`` at h = 1 ms with the compiled step or
    the numpy reference (the experiment module's integrator class swapped for the run)."""
    def simulate():
        original = experiment.ContactVariationalMultibody
        experiment.ContactVariationalMultibody = functools.partial(original, compiled=compiled)
        try:
            return experiment.simulate(0.001, 1.0, options or InteriorPointOptions())
        finally:
            experiment.ContactVariationalMultibody = original
    return simulate


def recorded_hop() -> tuple[object, list, list]:
    """The hop's integrator setup, states and commands of its 1000 steps (compiled run)."""
    states, commands = [], []
    original_step = ContactVariationalMultibody.step

    def recording(self, state, inputs=None):
        states.append(state)
        commands.append(inputs)
        return original_step(self, state, inputs)

    ContactVariationalMultibody.step = recording
    try:
        hop.simulate(0.001, 1.0)
    finally:
        ContactVariationalMultibody.step = original_step
    return with_vertical_guide(fly_hopper()), states, commands


def step_replay(mechanism, states, commands, compiled: bool):
    """Zero-argument callable: one integrator step from each recorded state."""
    integrator = ContactVariationalMultibody(mechanism, 0.001, motor_commands=True,
                                             compiled=compiled)

    def replay():
        for state, command in zip(states, commands, strict=True):
            integrator.step(state, command)
    return replay


HOPPER_MJCF = """
<mujoco model="hopper5">
  <option timestep="0.001"/>
  <default><geom contype="0" conaffinity="0"/><joint damping="0.05"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" contype="1" conaffinity="1"/>
    <body name="base" pos="0 0 0.6">
      <joint name="guide" type="slide" axis="0 0 1"/>
      <geom type="box" size="0.05 0.05 0.05" mass="7"/>
      <body name="link0">
        <joint name="hip0" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.0866 0 -0.05" size="0.01" mass="0.25"/>
        <body name="link1" pos="0.0866 0 -0.05">
          <joint name="knee1" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 -0.15 0 -0.26" size="0.01" mass="0.07"/>
        </body>
      </body>
      <body name="link2">
        <joint name="hip2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 -0.15 0 -0.26" size="0.01" mass="0.28"/>
        <body name="link3" pos="-0.15 0 -0.26">
          <joint name="knee3" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.2598 0 -0.15" size="0.01" mass="0.13"/>
          <geom name="foot" type="sphere" pos="0.2598 0 -0.15" size="0.025" mass="0.01"
                contype="1" conaffinity="1" friction="0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><connect body1="link1" body2="link3" anchor="-0.15 0 -0.26"/></equality>
  <actuator>
    <position joint="hip0" kp="200"/>
    <position joint="hip2" kp="200"/>
  </actuator>
</mujoco>
"""
"""The peer's hopper: 5 bodies, a parallelogram leg closed by an equality, a foot sphere
over a floor, hips held by position servos; dropped from 0.19 m (foot clearance)."""


def mujoco_drop():
    """Zero-argument callable: 1000 Python ``mj_step`` calls of the peer's drop, returning
    the number of steps with a foot contact; None when mujoco is not installed."""
    try:
        mujoco = importlib.import_module("mujoco")
    except ImportError:
        return None
    model = mujoco.MjModel.from_xml_string(HOPPER_MJCF)
    data = mujoco.MjData(model)

    def drop() -> int:
        mujoco.mj_resetData(model, data)
        touching = 0
        for _ in range(1000):
            mujoco.mj_step(model, data)
            touching += data.ncon > 0
        return touching

    return drop


def chain_run(links: int, contact: bool, compiled: bool, steps: int):
    """Zero-argument callable: ``steps`` steps of the pendulum chain of ``links`` links
    swinging from 0.6 rad (first joint) and 0.3 rad (the others) at h = 1 ms."""
    mechanism = pendulum_chain(links, np.array([0.0, 0.0, 5.0]))
    angles = np.full(links, 0.3)
    angles[0] = 0.6
    positions, quaternions = chain_configuration(mechanism, angles)
    if contact:  # the interior point on every step, the foot clear of the ground
        integrator = ContactVariationalMultibody(mechanism, 0.001, compiled=compiled,
                                                 options=InteriorPointOptions(
                                                     free_step_first=False))
    else:
        integrator = VariationalMultibody(mechanism.without_contacts(), 0.001,
                                          compiled=compiled)
    start = integrator.initial_state(positions, quaternions, np.zeros((links, 6)))

    def run() -> None:
        state = start
        for _ in range(steps):
            state = integrator.step(state)

    return run


def chain_step_times(sizes: list[int], contact: bool, compiled: bool, steps: int,
                     repeats: int) -> np.ndarray:
    """Best time (s) per step of each chain size; the sizes take turns in every repeat,
    so that a burst of load on the machine does not bend the curve at a few sizes."""
    runs = [chain_run(n, contact, compiled, steps) for n in sizes]
    best = np.full(len(sizes), np.inf)
    for _ in range(repeats):
        for i, chain in enumerate(runs):
            best[i] = min(best[i], seconds(chain)[0] / steps)
    return best


def linear_fit(sizes: np.ndarray, costs: np.ndarray) -> tuple[float, float]:
    """Least-squares slope (per body) and intercept."""
    slope, intercept = np.polyfit(sizes, costs, 1)
    return float(slope), float(intercept)


def half_slopes(sizes: np.ndarray, costs: np.ndarray) -> tuple[float, float]:
    """Fitted cost per added body over the lower and the upper half of the sizes."""
    middle = len(sizes) // 2
    return (linear_fit(sizes[:middle + 1], costs[:middle + 1])[0],
            linear_fit(sizes[middle:], costs[middle:])[0])


def scaling(max_links: int, repeats: int, output_dir: Path) -> dict:
    """Cost per step against the number of links; the table, the fit and the plot."""
    sizes = np.arange(1, max_links + 1)
    series = {}
    for contact in (False, True):
        costs = chain_step_times(sizes.tolist(), contact, True, 100, repeats + 2)
        series["interior point" if contact else "contact-free Newton"] = costs
    reference_sizes = sorted({1, 5, 10, max_links} & set(sizes.tolist()))
    reference = dict(zip(reference_sizes,
                         chain_step_times(reference_sizes, False, False, 10, 2).tolist(),
                         strict=True))
    figures: dict = {"links": sizes.tolist(), "reference_newton_s": reference}
    lines = ["", "## Cost per step against the number of bodies (pendulum chain, h = 1 ms)", "",
             "| links | contact-free Newton (us) | interior point every step (us) "
             "| reference Newton (us) | reference / compiled |", "|---:|---:|---:|---:|---:|"]
    for i, n in enumerate(sizes):
        newton, interior = series["contact-free Newton"][i], series["interior point"][i]
        ref = reference.get(int(n))
        ref_cells = (f"{ref * 1e6:.0f} | {ref / newton:.0f}x" if ref is not None else "- | -")
        lines.append(f"| {n} | {newton * 1e6:.1f} | {interior * 1e6:.1f} | {ref_cells} |")
    lines.append("")
    for name, costs in series.items():
        slope, intercept = linear_fit(sizes, costs)
        lower, upper = half_slopes(sizes, costs)
        linear = upper <= 1.5 * lower
        figures[name] = {"time_per_step_s": costs.tolist(), "slope_per_body_s": slope,
                         "intercept_s": intercept, "lower_half_slope_s": lower,
                         "upper_half_slope_s": upper, "cost_per_added_body_at_most_linear": linear}
        lines.append(f"- {name}: {slope * 1e6:.2f} us per added body (fit {intercept * 1e6:.1f} "
                     f"+ {slope * 1e6:.2f} n us); per added body {lower * 1e6:.2f} us over "
                     f"1..{sizes[len(sizes) // 2]} and {upper * 1e6:.2f} us above: "
                     f"{'at most linear (PASS)' if linear else 'grows faster than linear (FAIL)'}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, costs in series.items():
        slope, intercept = linear_fit(sizes, costs)
        axis.plot(sizes, costs * 1e6, "o", label=f"{name} (compiled)")
        axis.plot(sizes, (intercept + slope * sizes) * 1e6, "-", color="grey", linewidth=0.8)
    axis.plot(list(reference), [t * 1e6 for t in reference.values()], "s",
              label="contact-free Newton (numpy reference)")
    axis.set(xlabel="bodies in the chain", ylabel="time per step (us)", yscale="log",
             title="Maximal-coordinate step, h = 1 ms")
    axis.legend()
    figure.tight_layout()
    output_dir.mkdir(parents=True, exist_ok=True)
    figure.savefig(output_dir / "hopper_scaling.png", dpi=120)
    (output_dir / "hopper_scaling.json").write_text(json.dumps(figures, indent=2, default=str))
    (output_dir / "hopper_scaling.md").write_text("\n".join(lines[1:]) + "\n")
    print("\n".join(lines))
    return figures


def compiled_against_reference(repeats: int) -> tuple[dict, list[str]]:
    """Section 1: whole experiments and the step alone, compiled and reference."""
    figures, lines = {}, ["## Fly-Hopper with contact, h = 1 ms: compiled step against the "
                          "numpy reference", ""]
    lines += ["| run | compiled per step | reference per step | reference / compiled "
              "| real time (compiled) | real time (reference) |", "|---|---:|---:|---:|---:|---:|"]
    for name, experiment in (("drop test", drop_test), ("hop", hop)):
        fast_s, fast = best_time(experiment_run(experiment, True), repeats)
        slow_s, slow = best_time(experiment_run(experiment, False), 1)
        if np.abs(fast.base_height - slow.base_height).max() > 1e-8:
            raise AssertionError(f"{name}: compiled and reference trajectories differ")
        key = name.replace(" ", "_")
        figures |= {f"{key}_compiled_time_per_step_s": fast_s / 1000,
                    f"{key}_reference_time_per_step_s": slow_s / 1000,
                    f"{key}_speedup": slow_s / fast_s,
                    f"{key}_real_time_factor": 1.0 / fast_s,
                    f"{key}_reference_real_time_factor": 1.0 / slow_s,
                    f"{key}_iterations_per_step": float(fast.iterations.mean())}
        lines.append(f"| {name}, whole loop | {fast_s * 1e3:.0f} us | {slow_s * 1e3:.0f} us "
                     f"| {slow_s / fast_s:.1f}x | {1.0 / fast_s:.1f}x "
                     f"| {1.0 / slow_s:.2f}x |")
    mechanism, states, commands = recorded_hop()
    fast_step, _ = best_time(step_replay(mechanism, states, commands, True), repeats)
    slow_step, _ = best_time(step_replay(mechanism, states, commands, False), 1)
    figures |= {"hop_step_compiled_s": fast_step / len(states),
                "hop_step_reference_s": slow_step / len(states),
                "hop_step_real_time_factor": len(states) * 0.001 / fast_step}
    lines.append(f"| hop, integrator step alone | {fast_step / len(states) * 1e6:.0f} us "
                 f"| {slow_step / len(states) * 1e6:.0f} us | {slow_step / fast_step:.1f}x "
                 f"| {len(states) * 0.001 / fast_step:.1f}x "
                 f"| {len(states) * 0.001 / slow_step:.2f}x |")
    return figures, lines


def peer(figures: dict, repeats: int) -> list[str]:
    """Section 2: the MuJoCo drop, and our per-step times over it."""
    drop = mujoco_drop()
    if drop is None:
        print("MuJoCo: peer not installed")
        return ["", "MuJoCo: peer not installed (pip install the bench extra)."]
    seconds, touching = best_time(drop, repeats)
    if not touching:
        raise AssertionError("MuJoCo hopper never touched the floor")
    per_step = seconds / 1000
    figures["mujoco_hopper_time_per_step_s"] = per_step
    lines = ["", f"MuJoCo 5-body closed-loop hopper drop, one Python mj_step per step: "
             f"{per_step * 1e6:.1f} us per step ({touching} of 1000 steps in contact).", "",
             "| ours | per step | ours / MuJoCo |", "|---|---:|---:|"]
    for label, key in (("hop, integrator step alone (compiled)", "hop_step_compiled_s"),
                       ("hop, whole loop (compiled)", "hop_compiled_time_per_step_s"),
                       ("drop test, whole loop (compiled)", "drop_test_compiled_time_per_step_s"),
                       ("hop, integrator step alone (reference)", "hop_step_reference_s")):
        figures[f"{key}_over_mujoco"] = figures[key] / per_step
        lines.append(f"| {label} | {figures[key] * 1e6:.0f} us | {figures[key] / per_step:.1f}x |")
    return lines


def baselines(repeats: int, output_dir: Path) -> None:
    """Section 4: the harness cases against the minimal baseline and the plain interior
    point."""
    def agree_within(tolerance_deg: float):
        return lambda a, b: bool(np.max(np.abs(a - b)) < tolerance_deg)

    cases = [
        Case("fixed-base swing 0.15 s: maximal h=10 ms vs minimal RK4 h=1 ms",
             round(HORIZON_S / 0.01), maximal_swing(0.01), minimal_swing(0.001),
             agree_within(0.05)),
        Case("fixed-base swing 0.15 s: maximal h=1 ms vs minimal RK4 h=1 ms",
             round(HORIZON_S / 0.001), maximal_swing(0.001), minimal_swing(0.001),
             agree_within(0.005)),
        Case("standing 50 steps h=1 ms: contact interior point vs welded base", 50,
             standing(True), standing(False), lambda a, b: abs(a - b) < 1e-8),
        Case("drop test 1 s h=1 ms: contact solver vs plain interior point", 1000,
             contact_run(drop_test, InteriorPointOptions()), contact_run(drop_test, PLAIN),
             same_drop),
        Case("hop 1 s h=1 ms: contact solver vs plain interior point", 1000,
             contact_run(hop, InteriorPointOptions()), contact_run(hop, PLAIN), same_hop),
    ]
    results = run(cases, repeats)
    write_report(results, "Fly-Hopper maximal-coordinate stepping",
                 "baseline (minimal RK4+Baumgarte; welded base for standing; plain interior "
                 "point for the drop and the hop)",
                 output_dir, "hopper_timing")


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--repeats", type=int, default=3, help="timing repeats (>= 1)")
    arguments.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                           help=f"where to write the reports (default {DEFAULT_OUTPUT})")
    arguments.add_argument("--max-links", type=int, default=20,
                           help="longest chain of the scaling curve (bodies, 4..100, default 20)")
    arguments.add_argument("--skip-baselines", action="store_true",
                           help="skip the harness cases against the minimal-coordinate "
                           "baseline and the plain interior point (the slow part)")
    args = arguments.parse_args()
    if args.repeats < 1 or not 4 <= args.max_links <= 100:
        arguments.error("--repeats must be >= 1 and --max-links in 4..100")

    figures, lines = compiled_against_reference(args.repeats)
    lines += peer(figures, args.repeats)
    print("\n".join(lines))
    figures["scaling"] = scaling(args.max_links, args.repeats, args.output_dir)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "hopper.json").write_text(json.dumps(figures, indent=2, default=str))
    (args.output_dir / "hopper.md").write_text("\n".join(lines) + "\n")
    if not args.skip_baselines:
        baselines(args.repeats, args.output_dir)


if __name__ == "__main__":
    main()
