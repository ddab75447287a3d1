"""Closed loop: controller -> allocator -> motors/servos -> tree model, integrated at 1 kHz.

The integrator lives here on purpose (the variational simulator has its own
issue): semi-implicit Euler on the body twist, then ``T <- T exp(V dt)``;
first-order motors (the vehicle's time constant) and second-order tilt servos
(the joint's bandwidth, critically damped) feed consistent rotor and tilt
accelerations into the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mav_dynamics.allocation import ControlAllocator
from mav_dynamics.controller import TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.trajectories import FigureEight, Hover
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.groups import SE3, SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
SHIPPED = sorted(VEHICLES.glob("*.yaml"))
DT = 1e-3
FULLY_ACTUATED = {"tilted_hexarotor", "tilting_quadrotor"}


@dataclass
class Run:
    position_error: np.ndarray      # |p - p_ref| per step (m)
    attitude_error: np.ndarray      # angle between R and the controller's R_d per step (rad)
    reference_attitude_error: np.ndarray  # angle between R and the reference attitude (rad)
    saturated_steps: int
    final_twist: np.ndarray


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.arccos(np.clip((np.trace(a.T @ b) - 1.0) / 2.0, -1.0, 1.0)))


def simulate(path: Path, reference: Callable[[float], TrackingReference], duration: float,
             start_position: np.ndarray | None = None) -> Run:
    model = TreeModel(load_vehicle(path))
    allocator = ControlAllocator(model)
    controller = TrackingController(model, rank=allocator.rank)
    first = reference(0.0)
    pose = SE3.from_components(np.eye(3), first.position if start_position is None
                               else start_position)
    twist = np.concatenate([np.zeros(3), first.velocity])
    hover = allocator.allocate(-model.locked_inertia() @ model.gravity_twist(np.eye(3)))
    speeds, tilt = hover.rotor_speeds.copy(), hover.tilt_angles.copy()
    tilt_rate, tilt_command = np.zeros_like(tilt), tilt.copy()
    time_constant = np.array([r.time_constant for r in model.vehicle.rotors])
    bandwidth = np.array([k.joint.servo_bandwidth for k in model.vehicle.tilting_links])
    tilting = model.tilt_count > 0
    steps = round(duration / DT)
    position_error, attitude_error, reference_error = (np.empty(steps) for _ in range(3))
    saturated = 0
    for k in range(steps):
        ref = reference(k * DT)
        rotation, position = pose[:3, :3], pose[:3, 3]
        control = controller.update(rotation, position, twist, ref)
        command = allocator.allocate(control.wrench, tilt_current=tilt_command if tilting
                                     else None, dt=DT)
        saturated += command.status.saturated
        tilt_command = command.tilt_angles
        rotor_accel = (command.rotor_speeds - speeds) / time_constant
        tilt_accel = bandwidth**2 * (tilt_command - tilt) - 2.0 * bandwidth * tilt_rate
        result = model.evaluate(
            rotation, twist, speeds, rotor_accel, tilt_angles=tilt if tilting else None,
            tilt_rates=tilt_rate if tilting else None,
            tilt_accelerations=tilt_accel if tilting else None, torques=False)
        twist = twist + DT * result.base_acceleration
        speeds = speeds + DT * rotor_accel
        tilt_rate = tilt_rate + DT * tilt_accel
        tilt = tilt + DT * tilt_rate
        pose = pose @ SE3.exp(twist * DT)
        position_error[k] = np.linalg.norm(control.position_error)
        attitude_error[k] = _angle(rotation, control.desired_attitude)
        reference_error[k] = _angle(rotation, ref.attitude)
    return Run(position_error, attitude_error, reference_error, saturated, twist)


def hover_at(point: np.ndarray, attitude: np.ndarray | None = None):
    return Hover(point, attitude=attitude).reference


# Full speed from t = 0 (no ramp): the vehicle starts on the curve with the curve's velocity.
figure_eight = FigureEight(center=(0.0, 0.0), size_m=1.0, period_s=6.0, height_m=1.0,
                           ramp_s=0.0).reference


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_vehicle_returns_to_hover_from_an_offset(path: Path) -> None:
    target = np.array([0.0, 0.0, 1.0])
    run = simulate(path, hover_at(target), duration=3.0, start_position=np.array([0.3, -0.2, 0.8]))
    assert run.position_error[0] == pytest.approx(np.sqrt(0.17), rel=1e-9)
    assert run.position_error[-1] < 0.02
    assert run.position_error.max() < 0.45                       # no overshoot beyond start
    assert np.abs(run.final_twist).max() < 0.05
    assert run.attitude_error[-1] < 0.01


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_vehicle_tracks_a_figure_eight(path: Path) -> None:
    run = simulate(path, figure_eight, duration=6.0)
    assert np.all(np.isfinite(run.position_error))
    assert run.saturated_steps <= 0.001 * run.position_error.size   # a tilt-rate limit at most
    if path.stem in FULLY_ACTUATED:
        # position and attitude are independent: the body stays level through the turns
        assert run.position_error.max() < 0.03
        assert run.reference_attitude_error.max() < 0.02
    else:
        assert run.position_error.max() < 0.04
        assert run.reference_attitude_error.max() > 0.1          # it must bank to turn
    assert run.position_error[-1000:].max() < 0.03


def test_tilted_hexarotor_holds_a_tilted_attitude_in_place() -> None:
    tilted = SO3.exp(np.array([0.15, -0.1, 0.3]))
    run = simulate(VEHICLES / "tilted_hexarotor.yaml", hover_at(np.array([0.0, 0.0, 1.0]),
                                                               tilted), duration=2.5)
    assert run.reference_attitude_error[0] > 0.3
    assert run.reference_attitude_error[-1] < 2e-3
    assert run.position_error.max() < 0.02
    assert run.position_error[-1] < 2e-3
    assert run.saturated_steps == 0


def test_under_actuated_quadrotor_cannot_hold_a_tilted_attitude_in_place() -> None:
    """The contrast: a planar quadrotor given the same request keeps its thrust vertical."""
    tilted = SO3.exp(np.array([0.15, -0.1, 0.0]))
    run = simulate(VEHICLES / "quadrotor_plus.yaml", hover_at(np.array([0.0, 0.0, 1.0]),
                                                            tilted), duration=1.0)
    assert run.reference_attitude_error[-1] > 0.15
    assert run.position_error[-1] < 0.01


def test_controller_at_rest_on_reference_asks_for_the_hover_wrench() -> None:
    for path in SHIPPED:
        model = TreeModel(load_vehicle(path))
        controller = TrackingController(model)
        output = controller.update(np.eye(3), np.ones(3), np.zeros(6),
                                   TrackingReference(np.ones(3)))
        expected = -model.locked_inertia() @ model.gravity_twist(np.eye(3))
        assert np.allclose(output.wrench, expected, atol=1e-12)
        assert np.allclose(output.desired_attitude, np.eye(3), atol=1e-12)
