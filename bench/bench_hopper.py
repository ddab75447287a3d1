"""Time per step of the Fly-Hopper in maximal coordinates, against the minimal baseline.

Usage: python bench/bench_hopper.py [--repeats K] [--output-dir DIR]

1. harness cases (ours and the baseline in the same process, after checking they agree):
   the fixed-base passive swing over 0.15 s, maximal variational integrator at
   h = 10 ms and 1 ms against the paper's minimal-coordinate RK4 + Baumgarte at 1 ms;
   they must give the same joint angles at 0.15 s (within 0.05 deg and 0.005 deg);
   the hopper standing on its foot (hips locked, base on a vertical guide) for 50
   steps at h = 1 ms with the contact interior point, against the same robot with its
   base welded at the standing height (contact-free Newton): both must stay put; and
   the drop test and the hop (1 s each at h = 1 ms) with the contact solver as used
   (predictor-corrector, warm start, exact broad phase) against the plain interior
   point (fixed central-path reduction, cold start, every step): same trajectory;
2. real-time factors: the floating hopper without contact at h = 10 ms (the
   zero-gravity PD manoeuvre, 1 s simulated), the drop test with contact at h = 1 ms
   (1 s simulated, 0.2 s of flight then resting contact) and the hop at h = 1 ms
   (1 s: push, 0.55 s of flight, landing), with the solver iterations per step.

Writes ``hopper_timing.{json,md}`` (harness report) and ``hopper.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from harness import Case, run, write_report

from variational_sim.experiments import drop_test, hop, pd_manoeuvre
from variational_sim.minimal.planar_loop import BaumgarteRK4, PlanarLoopModel, PlanarState
from variational_sim.multibody.contact import ContactVariationalMultibody, InteriorPointOptions
from variational_sim.multibody.hopper import (
    LEG_JOINTS,
    NOMINAL_ANGLES_DEG,
    load_hopper,
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
    hopper = with_welded_base(load_hopper())
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
    model = PlanarLoopModel(with_welded_base(load_hopper()))
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
    locked = with_locked_joints(load_hopper(), HIPS)
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


def cpu_seconds(function) -> tuple[float, object]:
    """Process time (s) of one call and its result."""
    start = time.process_time()
    result = function()
    return time.process_time() - start, result


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--repeats", type=int, default=3, help="timing repeats")
    arguments.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                           help=f"where to write the reports (default {DEFAULT_OUTPUT})")
    args = arguments.parse_args()

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
    results = run(cases, args.repeats)
    write_report(results, "Fly-Hopper maximal-coordinate stepping",
                 "baseline (minimal RK4+Baumgarte; welded base for standing; plain interior "
                 "point for the drop and the hop)",
                 args.output_dir, "hopper_timing")

    best = float("inf")
    for _ in range(args.repeats):
        start = time.process_time()
        pd_manoeuvre.simulate(0.01, 1.0)
        best = min(best, time.process_time() - start)
    drop_cpu, drop = min((cpu_seconds(contact_run(drop_test, InteriorPointOptions()))
                          for _ in range(args.repeats)), key=lambda run: run[0])
    hop_cpu, hopped = min((cpu_seconds(contact_run(hop, InteriorPointOptions()))
                           for _ in range(args.repeats)), key=lambda run: run[0])
    plain_drop, plain_hop = drop_test.simulate(0.001, 1.0, PLAIN), hop.simulate(0.001, 1.0, PLAIN)
    figures = {
        "floating_no_contact_h_s": 0.01,
        "floating_no_contact_time_per_step_s": best / 100,
        "floating_no_contact_real_time_factor": 1.0 / best,
        "fixed_base_h10ms_time_per_step_s": results[0].ours_s / results[0].size,
        "drop_test_contact_h_s": 0.001,
        "drop_test_contact_time_per_step_s": drop_cpu / 1000,
        "drop_test_contact_real_time_factor": 1.0 / drop_cpu,
        "drop_test_iterations_per_step": float(drop.iterations.mean()),
        "drop_test_plain_iterations_per_step": float(plain_drop.iterations.mean()),
        "drop_test_speedup_vs_plain": 1.0 / results[3].ratio,
        "hop_contact_time_per_step_s": hop_cpu / 1000,
        "hop_real_time_factor": 1.0 / hop_cpu,
        "hop_iterations_per_step": float(hopped.iterations.mean()),
        "hop_plain_iterations_per_step": float(plain_hop.iterations.mean()),
        "hop_speedup_vs_plain": 1.0 / results[4].ratio,
        "standing_contact_time_per_step_s": results[2].ours_s / results[2].size,
    }
    print(f"floating hopper, no contact, h = 10 ms: {best / 100 * 1e3:.3f} ms per step "
          f"(including PD and momentum bookkeeping), {1.0 / best:.1f}x real time")
    for name, cpu, ours, plain, case in (("drop test", drop_cpu, drop, plain_drop, results[3]),
                                         ("hop", hop_cpu, hopped, plain_hop, results[4])):
        print(f"{name} with contact, h = 1 ms: {cpu:.3f} s for 1000 steps, {1.0 / cpu:.2f}x "
              f"real time; {ours.iterations.mean():.2f} solver iterations per step "
              f"(plain interior point {plain.iterations.mean():.2f}, "
              f"{1.0 / case.ratio:.1f}x slower)")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "hopper.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
