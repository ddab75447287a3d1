"""mav_dynamics per-call cost: model evaluation and allocation, per shipped vehicle.

Usage: python bench/bench_dynamics.py [--repeats K] [--output-dir DIR]

Cases (each checked against its baseline before timing):

- ``model, closed form``: the tree recursion on the fixture quadrotor of
  docs/theory/mav-screw-theory.md §5.6 against the paper's closed form (69)-(74) for the
  same state;
- ``model``: the batched tree recursion against a plain per-body loop of the
  algorithm of docs/theory/mav-screw-theory.md §2.8 written with ``mav_geometry.groups.SE3``
  (exp, adjoint);
- ``allocation``: our allocator (precomputed pseudo-inverse, bounded solve only
  when a limit is hit) against a bounded least-squares solve every call
  (``scipy.optimize.lsq_linear``); agreement is on the achieved wrench;
- ``model + allocation``: one controller-step's worth of both (the issue's
  target: at most 100 us per call for the quadrotor);
- ``model, compiled vs numpy`` and ``control tick, compiled vs numpy``: the same call with
  the C kernels (``mav_dynamics._kernels``) and with the numpy reference they replace
  (``MAV_KERNELS=reference``), in the same run; the control tick is
  ``TrackingController.update`` then ``ControlAllocator.allocate``, as ``FlightControl.tick``
  does them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from harness import Case, run, write_report
from scipy.optimize import lsq_linear

from mav_dynamics import aero, allocation, controller, model
from mav_dynamics.aero import body_drag_wrench
from mav_dynamics.allocation import ControlAllocator, allocation_matrix
from mav_dynamics.closed_form import QuadrotorParameters, quadrotor_acceleration
from mav_dynamics.controller import TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle, parse_vehicle
from mav_geometry.groups import SE3, SO3

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "bench" / "results"
VEHICLES = ROOT / "config" / "vehicles"


def loop_tree(model: TreeModel, rotation, twist, q, dq, ddq, wind) -> np.ndarray:
    """mav-screw-theory.md §2.8 body by body, with SE3 group calls (the straightforward way)."""
    count = model.body_count
    ad_kb, twists, bias = [np.eye(6)] * count, [twist] * count, [np.zeros(6)] * count
    order = sorted(range(1, count), key=lambda k: _depth(model, k))
    for k in order:
        p = model.parents[k]
        screw = model.screws_parent[k]
        pose = SE3.exp(screw * q[k]) @ model.zero_poses[k]
        ad_kp = SE3.adjoint(SE3.inverse(pose))
        screw_child = SE3.adjoint(SE3.inverse(model.zero_poses[k])) @ screw
        ad_kb[k] = ad_kp @ ad_kb[p]
        twists[k] = ad_kp @ (twists[p] + screw * dq[k])
        bias[k] = (ad_kp @ bias[p] + SE3.ad(twists[k]) @ screw_child * dq[k]
                   + screw_child * ddq[k])
    gravity = np.concatenate([np.zeros(3), rotation.T @ model.gravity_world])
    wind_body = np.concatenate([np.zeros(3), rotation.T @ wind])
    locked, right = np.zeros((6, 6)), np.zeros(6)
    rotor_of = {b: r for r, b in enumerate(model.rotor_bodies)}
    wings = dict(model.wings)
    for k in range(count):
        inertia = model.inertias[k]
        external = inertia @ ad_kb[k] @ gravity
        if k in rotor_of:
            r = rotor_of[k]
            external = external + model.rotor_aero_columns[r] * dq[k] ** 2
        if k in wings:
            external = external + wings[k].wrench_link_frame(twists[k] - ad_kb[k] @ wind_body)
        if k == 0:
            external = external + body_drag_wrench(model.vehicle.drag, twist - wind_body)
        locked += ad_kb[k].T @ inertia @ ad_kb[k]
        right += ad_kb[k].T @ (SE3.ad(twists[k]).T @ inertia @ twists[k] + external
                               - inertia @ bias[k])
    return np.linalg.solve(locked, right)


def _depth(model: TreeModel, k: int) -> int:
    depth = 0
    while k:
        k, depth = model.parents[k], depth + 1
    return depth


def lsq_allocation(allocator: ControlAllocator, wrench: np.ndarray) -> np.ndarray:
    """Bounded least squares every call; returns the achieved wrench."""
    matrix = allocator.matrix
    if allocator.tilted_rotor.size:
        lower, upper = allocator._relaxed_bounds(allocator.tilt_min, allocator.tilt_max)
    else:
        lower, upper = allocator.u_min, allocator.u_max
    scale = upper.max()
    x = lsq_linear(matrix * scale, wrench, bounds=(lower / scale, upper / scale)).x * scale
    result: np.ndarray = matrix @ x
    return result


@contextmanager
def _numpy_reference() -> Iterator[None]:
    """mav_dynamics with its numpy reference instead of the compiled kernels."""
    modules = (aero, allocation, controller, model)
    saved = [module._kernels for module in modules]
    for module in modules:
        module._kernels = None
    try:
        yield
    finally:
        for module, kernels in zip(modules, saved, strict=True):
            module._kernels = kernels


def _reference_of(function: Callable[[], Any]) -> Callable[[], Any]:
    def run_reference() -> Any:
        with _numpy_reference():
            return function()
    return run_reference


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-8, atol=1e-8))


def _state(model: TreeModel, rng: np.random.Generator) -> dict:
    return {
        "rotation": SO3.exp(rng.normal(size=3) * 0.3),
        "twist": rng.normal(size=6) * 0.5,
        "rotor_speeds": rng.uniform(450.0, 600.0, model.rotor_count),
        "rotor_accelerations": rng.normal(size=model.rotor_count) * 20.0,
        "tilt_angles": rng.uniform(-0.3, 0.3, model.tilt_count) if model.tilt_count else None,
        "tilt_rates": rng.normal(size=model.tilt_count) if model.tilt_count else None,
        "wind": np.array([2.0, -1.0, 0.0]),
    }


def cases(seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    params = QuadrotorParameters()
    fixture = TreeModel(parse_vehicle(params.vehicle_data()))
    state = _state(fixture, rng)
    state["wind"] = None
    result = [Case(
        "model, closed form (fixture quadrotor)", fixture.body_count,
        lambda s=state: fixture.evaluate(**s, torques=False).base_acceleration,
        lambda s=state: quadrotor_acceleration(params, s["rotation"], s["twist"],
                                               s["rotor_speeds"], s["rotor_accelerations"]),
        _close)]
    for path in sorted(VEHICLES.glob("*.yaml")):
        model = TreeModel(load_vehicle(path))
        allocator = ControlAllocator(model)
        s = _state(model, rng)
        q = model.joint_vectors(None, s["tilt_angles"])
        dq = model.joint_vectors(s["rotor_speeds"], s["tilt_rates"])
        ddq = model.joint_vectors(s["rotor_accelerations"], None)
        wrench = allocation_matrix(model, s["tilt_angles"]) @ s["rotor_speeds"] ** 2
        n = model.body_count

        def ours_model(m=model, s=s):
            return m.evaluate(**s, torques=False).base_acceleration

        def loop_model(m=model, s=s, q=q, dq=dq, ddq=ddq):
            return loop_tree(m, s["rotation"], s["twist"], q, dq, ddq, s["wind"])

        def ours_alloc(a=allocator, w=wrench):
            return a.allocate(w).status.achieved_wrench

        def lsq_alloc(a=allocator, w=wrench):
            return lsq_allocation(a, w)

        def ours_both(m=model, a=allocator, s=s, w=wrench):
            return (m.evaluate(**s, torques=False).base_acceleration,
                    a.allocate(w).status.achieved_wrench)

        def loop_both(m=model, a=allocator, s=s, q=q, dq=dq, ddq=ddq, w=wrench):
            return (loop_tree(m, s["rotation"], s["twist"], q, dq, ddq, s["wind"]),
                    lsq_allocation(a, w))

        def both_close(a, b):
            return _close(a[0], b[0]) and _close(a[1], b[1])

        # a tick in flight near the reference: no limit touched, as in most ticks
        tracking = TrackingController(model, rank=allocator.rank)
        reference = TrackingReference(position=np.array([0.05, -0.02, 1.0]),
                                      velocity=np.array([0.2, 0.0, 0.05]))
        near = (SO3.exp(np.array([0.01, -0.005, 0.01])), np.array([0.0, 0.0, 1.0]),
                np.array([0.02, -0.01, 0.005, 0.15, 0.0, 0.02]))

        def tick(a=allocator, c=tracking, r=reference, state=near):
            output = c.update(*state, r)
            return output.wrench, a.allocate(output.wrench).status.achieved_wrench

        def ours_full_model(m=model, s=s):
            return m.evaluate(**s, torques=True).body_accelerations

        name = path.stem
        result += [
            Case(f"model ({name})", n, ours_model, loop_model, _close),
            Case(f"allocation ({name})", n, ours_alloc, lsq_alloc, _close),
            Case(f"model + allocation ({name})", n, ours_both, loop_both, both_close),
            Case(f"model with torques, compiled vs numpy ({name})", n, ours_full_model,
                 _reference_of(ours_full_model), _close),
            Case(f"control tick, compiled vs numpy ({name})", n, tick, _reference_of(tick),
                 both_close),
        ]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    results = run(cases(), args.repeats)
    _, markdown = write_report(
        results, "mav_dynamics per call: batched tree + fast allocation vs baselines",
        "baseline (closed form / per-body SE3 loop / lsq_linear / numpy reference)",
        args.output_dir, "dynamics")
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
