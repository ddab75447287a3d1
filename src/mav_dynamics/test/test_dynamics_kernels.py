"""The compiled kernels of mav_dynamics (controller, tree model, wings, allocation) against
the numpy reference, on every shipped vehicle file (fully and under-actuated, tilting and
winged)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.spatial.transform import Rotation

from mav_dynamics import _kernels as kernels  # an unbuilt extension fails here, not skips
from mav_dynamics import aero as aero_module
from mav_dynamics import allocation as allocation_module
from mav_dynamics import controller as controller_module
from mav_dynamics import model as model_module
from mav_dynamics.allocation import ControlAllocator, allocation_matrix
from mav_dynamics.controller import ControlOutput, TrackingController, TrackingReference
from mav_dynamics.model import DynamicsResult, TreeModel
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.groups import SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
SHIPPED = sorted(VEHICLES.glob("*.yaml"))


@contextmanager
def kernels_set(module: object) -> Iterator[None]:
    """Run controller.py with ``module`` as its kernels (None: the numpy reference)."""
    saved = controller_module._kernels
    controller_module._kernels = module
    try:
        yield
    finally:
        controller_module._kernels = saved


def random_reference(rng: np.random.Generator) -> TrackingReference:
    return TrackingReference(
        position=rng.normal(size=3), velocity=rng.normal(size=3),
        acceleration=rng.normal(size=3), jerk=rng.normal(size=3),
        attitude=Rotation.random(rng=rng).as_matrix(), angular_velocity=rng.normal(size=3),
        angular_acceleration=rng.normal(size=3))


def assert_same_output(compiled: ControlOutput, reference: ControlOutput) -> None:
    for name in ("wrench", "desired_attitude", "position_error", "attitude_error"):
        a, b = getattr(compiled, name), getattr(reference, name)
        assert a.shape == b.shape, name
        assert_allclose(a, b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()), err_msg=name)


def compare(controller: TrackingController, rotation: np.ndarray, position: np.ndarray,
            twist: np.ndarray, reference: TrackingReference) -> None:
    with kernels_set(kernels):
        compiled = controller.update(rotation, position, twist, reference)
    with kernels_set(None):
        expected = controller.update(rotation, position, twist, reference)
    assert_same_output(compiled, expected)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("fully_actuated", [False, True])
def test_controller_kernel_matches_the_reference_on_every_vehicle(path, fully_actuated):
    model = TreeModel(load_vehicle(path))
    controller = TrackingController(model, fully_actuated=fully_actuated)
    rng = np.random.default_rng(len(path.stem))
    for _ in range(10):
        compare(controller, Rotation.random(rng=rng).as_matrix(), rng.normal(size=3),
                rng.normal(size=6), random_reference(rng))


def test_controller_kernel_matches_in_the_degenerate_thrust_branches():
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_x.yaml"))
    controller = TrackingController(model, fully_actuated=False)
    rng = np.random.default_rng(3)
    hover = TrackingReference(position=np.zeros(3))
    # free fall commanded: zero thrust direction; and the heading along the thrust axis
    free_fall = dataclasses.replace(hover, acceleration=controller.gravity_world.copy())
    vertical_heading = dataclasses.replace(
        hover, attitude=Rotation.from_rotvec([0.0, -np.pi / 2, 0.0]).as_matrix())
    for reference in (hover, free_fall, vertical_heading):
        compare(controller, np.eye(3), np.zeros(3), np.zeros(6), reference)
        compare(controller, Rotation.random(rng=rng).as_matrix(), np.zeros(3),
                rng.normal(size=6), reference)


def test_controller_kernel_takes_lists_and_strided_arrays():
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_x.yaml"))
    controller = TrackingController(model)
    attitude = np.asfortranarray(Rotation.from_rotvec([0.1, 0.2, 0.3]).as_matrix())
    reference = TrackingReference(position=[1, 2, 3], attitude=attitude)  # type: ignore[arg-type]
    compare(controller, np.eye(3), np.zeros(3), np.arange(6.0), reference)


def test_controller_kernel_rejects_bad_buffers():
    args = [np.eye(3), *(np.zeros(3),) * 1, np.zeros(6), *(np.zeros(3),) * 4, np.eye(3),
            *(np.zeros(3),) * 6, np.eye(6), np.zeros(3), np.eye(3), np.empty(21)]
    kernels.tracking_wrench(*args, False)
    bad = list(args)
    bad[2] = np.zeros(5)
    with pytest.raises(ValueError, match="tracking_wrench: twist must be 6 float64 values"):
        kernels.tracking_wrench(*bad, False)
    bad = list(args)
    bad[-1] = np.empty(21).tobytes()
    with pytest.raises(BufferError):
        kernels.tracking_wrench(*bad, False)
    with pytest.raises(TypeError, match="takes 19 arguments"):
        kernels.tracking_wrench(*args)


@contextmanager
def all_kernels(module: object) -> Iterator[None]:
    """Run the model, wings and allocation with ``module`` as kernels (None: reference)."""
    saved = [(m, m._kernels) for m in (model_module, aero_module, allocation_module)]
    for m, _ in saved:
        m._kernels = module
    try:
        yield
    finally:
        for m, kernel in saved:
            m._kernels = kernel


def model_state(model: TreeModel, rng: np.random.Generator) -> dict[str, np.ndarray | None]:
    tilts = model.tilt_count
    return {"rotation": Rotation.random(rng=rng).as_matrix(), "twist": rng.normal(size=6) * 2.0,
            "rotor_speeds": rng.uniform(0.0, 900.0, model.rotor_count),
            "rotor_accelerations": rng.normal(size=model.rotor_count) * 50.0,
            "rotor_angles": rng.uniform(-np.pi, np.pi, model.rotor_count),
            "tilt_angles": rng.uniform(-1.0, 1.0, tilts) if tilts else None,
            "tilt_rates": rng.normal(size=tilts) if tilts else None,
            "tilt_accelerations": rng.normal(size=tilts) if tilts else None,
            "wind": rng.normal(size=3) * 5.0}


def assert_same_result(compiled: DynamicsResult, reference: DynamicsResult) -> None:
    for field in dataclasses.fields(DynamicsResult):
        a, b = getattr(compiled, field.name), getattr(reference, field.name)
        assert a.shape == b.shape, field.name
        scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))
        if field.name == "base_residual":   # round-off itself (~0): both on the wrench scale
            scale = float(np.abs(reference.rotor_wrench).max())
        assert_allclose(a, b, rtol=1e-12, atol=1e-12 * scale, err_msg=field.name)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_model_kernel_matches_the_reference_on_every_vehicle(path):
    model = TreeModel(load_vehicle(path))
    rng = np.random.default_rng(len(path.stem) + 1)
    for torques in (True, False):
        for _ in range(10):
            state = model_state(model, rng)
            with all_kernels(kernels):
                compiled = model.evaluate(**state, torques=torques)
            with all_kernels(None):
                reference = model.evaluate(**state, torques=torques)
            assert_same_result(compiled, reference)


def fly(model: TreeModel, steps: int) -> np.ndarray:
    """A whole run: explicit Euler on the base twist and attitude (step 1 ms) with the
    rotors at a fixed speed and the tilts swinging; returns the final twist and attitude."""
    rotation, twist = np.eye(3), np.zeros(6)
    speeds = np.full(model.rotor_count, 450.0)
    for step in range(steps):
        tilts = np.full(model.tilt_count, 0.3 * np.sin(0.01 * step)) if model.tilt_count else None
        result = model.evaluate(rotation, twist, speeds, tilt_angles=tilts,
                                wind=np.array([3.0, -1.0, 0.0]), torques=False)
        twist = twist + 1e-3 * result.base_acceleration
        rotation = rotation @ SO3.exp(1e-3 * twist[:3])
    return np.concatenate([twist, rotation.ravel()])


@pytest.mark.parametrize("name", ["quadrotor_four_tilting_wings", "quadrotor_x"])
def test_a_whole_run_stays_with_the_reference(name):
    model = TreeModel(load_vehicle(VEHICLES / f"{name}.yaml"))
    with all_kernels(kernels):
        compiled = fly(model, 300)
    with all_kernels(None):
        reference = fly(model, 300)
    assert np.abs(reference[:6]).max() > 0.1    # it moved
    assert_allclose(compiled, reference, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(("bad", "message"), [
    ("rotation", "rotation must be finite"),
    ("twist", "twist must be finite"),
    ("tilt_rates", r"joint inputs \(rotor and tilt arrays\) must be finite"),
    ("wind", "wind must be finite"),
])
def test_model_kernel_rejects_what_the_reference_rejects(bad, message):
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_four_tilting_wings.yaml"))
    arguments = {"rotation": np.eye(3), "twist": np.zeros(6),
                 "rotor_speeds": np.full(model.rotor_count, 400.0),
                 "tilt_rates": np.zeros(model.tilt_count), "wind": np.zeros(3)}
    arguments[bad] = arguments[bad].copy()
    arguments[bad].flat[-1] = np.nan
    for module in (kernels, None):
        with all_kernels(module), pytest.raises(ValueError, match=message):
            model.evaluate(**arguments)


def test_model_kernel_rejects_malformed_constants():
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_two_wings.yaml"))
    n = model.body_count
    outputs = [np.empty(6), np.empty(36), np.empty(6), np.empty(6 * n), np.empty(36 * n),
               np.empty(6 * n), np.empty(n), np.empty(6)]
    inputs = [model._packed_bodies, model._packed_wings, model._packed_drag, np.eye(3),
              np.zeros(6), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(3),
              model.gravity_world]
    kernels.tree_evaluate(*inputs, *outputs, True)
    truncated = list(inputs)
    truncated[1] = model._packed_wings[:-1]
    with pytest.raises(ValueError, match="malformed packed wings"):
        kernels.tree_evaluate(*truncated, *outputs, True)
    reordered = list(inputs)
    reordered[0] = model._packed_bodies.copy()
    reordered[0][1, 0] = 3.0    # body 1 under a later body
    with pytest.raises(ValueError, match="bodies must follow their parents"):
        kernels.tree_evaluate(*reordered, *outputs, True)
    with pytest.raises(ValueError, match="tree_evaluate: locked must be 36 float64 values"):
        kernels.tree_evaluate(*inputs, outputs[0], np.empty(35), *outputs[2:], True)


@pytest.mark.parametrize("name", ["quadrotor_two_wings", "quadrotor_four_tilting_wings"])
def test_wing_kernel_matches_the_reference(name):
    model = TreeModel(load_vehicle(VEHICLES / f"{name}.yaml"))
    rng = np.random.default_rng(5)
    # every direction (alpha past both table ends), slow (below MIN_AIRSPEED) and still air
    twists = [rng.normal(size=6) * scale for scale in (0.1, 1.0, 30.0) for _ in range(30)]
    twists += [np.zeros(6), np.array([0.0, 0.0, 0.0, 1e-7, 0.0, 0.0])]
    for _, wing in model.wings:
        for twist in twists:
            with all_kernels(kernels):
                compiled = wing.wrench_link_frame(twist)
            with all_kernels(None):
                reference = wing.wrench_link_frame(twist)
            assert_allclose(compiled, reference, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="malformed packed wing"):
        kernels.wing_link_wrench(model.wings[0][1].packed[:-1], np.zeros(6), np.empty(6))


class CountingKernels:
    """The kernels, counting the allocations the compiled exact path returned and those it
    left to the bounded solve."""

    def __init__(self) -> None:
        self.exact = 0
        self.bounded = 0

    def __getattr__(self, name: str) -> object:
        return getattr(kernels, name)

    def allocate_exact(self, *args: object) -> int:
        result: int = kernels.allocate_exact(*args)
        self.exact += result >= 0
        self.bounded += result < 0
        return result


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_allocation_kernel_matches_the_reference_on_every_vehicle(path):
    model = TreeModel(load_vehicle(path))
    allocator = ControlAllocator(model)
    rng = np.random.default_rng(len(path.stem) + 2)
    low, high = np.sqrt(allocator.u_min), np.sqrt(allocator.u_max)
    counting = CountingKernels()
    for k in range(20):
        tilts = rng.uniform(-0.3, 0.3, model.tilt_count) if model.tilt_count else None
        # inside the speed limits, or (every fifth) past them: the bounded fallback
        reach = 1.3 if k % 5 == 0 else 0.9
        speeds = rng.uniform(low + 0.1 * (high - low), low + reach * (high - low))
        wrench = allocation_matrix(model, tilts) @ speeds**2 + rng.normal(size=6) * (k % 3)
        # every other call rate-limits the tilts around the current ones
        current, period = (tilts, 0.01) if model.tilt_count and k % 2 else (None, None)
        with all_kernels(counting):
            compiled = allocator.allocate(wrench, current, period)
        with all_kernels(None):
            reference = allocator.allocate(wrench, current, period)
        for name in ("rotor_speeds", "tilt_angles"):
            assert_allclose(getattr(compiled, name), getattr(reference, name), rtol=1e-12)
        for name in ("achieved_wrench", "unallocated_wrench"):
            assert_allclose(getattr(compiled.status, name), getattr(reference.status, name),
                            rtol=1e-12, atol=1e-9 * max(1.0, np.abs(wrench).max()))
        for name in ("saturated", "saturated_rotors", "saturated_tilts", "rank"):
            assert np.array_equal(getattr(compiled.status, name),
                                  getattr(reference.status, name)), name
    # the compiled path itself was compared, and so was the fallback
    assert counting.exact >= 3
    assert counting.bounded >= 1


def test_allocation_kernel_rejects_malformed_slots():
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_x.yaml"))
    allocator = ControlAllocator(model)
    empty = np.empty(0)
    arguments = [*allocator._kernel_matrices, np.full(4, 7.0), allocator.u_min,
                 allocator.u_max, empty, empty, empty, empty, np.zeros(6), np.empty(4), empty,
                 np.empty(6), np.empty(6), np.empty(4), empty, 1e-4]
    with pytest.raises(ValueError, match="malformed rotor slots"):
        kernels.allocate_exact(*arguments)


class SmallKernels:
    """The kernels, claiming to take at most 3 bodies (rotors)."""

    MAX_BODIES = 3

    def __getattr__(self, name: str) -> object:
        return getattr(kernels, name)


def test_trees_larger_than_the_kernels_take_run_the_reference():
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_two_wings.yaml"))
    allocator = ControlAllocator(model)
    state = model_state(model, np.random.default_rng(9))
    wrench = allocation_matrix(model) @ np.full(model.rotor_count, 500.0**2)
    results = []
    for module in (SmallKernels(), None):
        with all_kernels(module):
            results.append((model.evaluate(**state), allocator.allocate(wrench)))
    (evaluated, allocated), (reference, reference_allocation) = results
    for field in dataclasses.fields(DynamicsResult):   # bit for bit: the same numpy code ran
        assert np.array_equal(getattr(evaluated, field.name), getattr(reference, field.name),
                              equal_nan=True), field.name
    assert np.array_equal(allocated.rotor_speeds, reference_allocation.rotor_speeds)
