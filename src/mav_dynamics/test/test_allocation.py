"""Allocation: round trips, rank, the quadrotor analytic inverse, limits and priorities."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.allocation import ControlAllocator, allocation_matrix
from mav_dynamics.closed_form import QuadrotorParameters
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle, parse_vehicle

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
SHIPPED = sorted(VEHICLES.glob("*.yaml"))
RANKS = {"quadrotor_plus": 4, "quadrotor_x": 4, "hexarotor": 4, "tilted_hexarotor": 6,
         "tilting_quadrotor": 6, "quadrotor_two_wings": 4, "quadrotor_four_tilting_wings": 5}


def _allocator(path: Path) -> ControlAllocator:
    return ControlAllocator(TreeModel(load_vehicle(path)))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_rank_is_detected(path: Path) -> None:
    assert _allocator(path).rank == RANKS[path.stem]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_feasible_wrench_round_trips_and_uncontrollable_part_is_reported(path: Path) -> None:
    allocator = _allocator(path)
    model = allocator.model
    rng = np.random.default_rng(4)
    for _ in range(5):
        speeds = rng.uniform(450.0, 650.0, model.rotor_count)
        tilt = rng.uniform(-0.3, 0.3, model.tilt_count)
        wrench = allocation_matrix(model, tilt) @ speeds**2
        result = allocator.allocate(wrench)
        achieved = allocation_matrix(model, result.tilt_angles) @ result.rotor_speeds**2
        assert np.allclose(achieved, wrench, rtol=1e-9, atol=1e-9)
        assert not result.status.saturated
        assert np.allclose(result.status.unallocated_wrench, 0.0, atol=1e-9)
    # a component outside the range of K cannot be made; it is reported, not hidden
    null = np.linalg.svd(allocator.matrix)[0][:, allocator.rank:]
    if null.size:
        extra = null @ rng.normal(size=null.shape[1])
        result = allocator.allocate(wrench + extra)
        assert np.allclose(result.status.unallocated_wrench, extra, atol=1e-9)
        assert not result.status.saturated


def test_quadrotor_analytic_inverse_matches() -> None:
    """Theory §3.3 / test 27 with the §5.6 fixture and (m_x, m_y, m_z, f_z) = (.05,-.03,.01,12)."""
    params = QuadrotorParameters()
    allocator = ControlAllocator(TreeModel(parse_vehicle(params.vehicle_data())))
    mx, my, mz, fz = 0.05, -0.03, 0.01, 12.0
    kl, kd, d = params.thrust_coefficient, params.drag_coefficient, params.arm
    analytic = np.array([
        fz / (4 * kl) + my / (2 * d * kl) + mz / (4 * kd),
        fz / (4 * kl) - mx / (2 * d * kl) - mz / (4 * kd),
        fz / (4 * kl) - my / (2 * d * kl) + mz / (4 * kd),
        fz / (4 * kl) + mx / (2 * d * kl) - mz / (4 * kd),
    ])
    assert np.all(analytic > 0.0)
    result = allocator.allocate(np.array([mx, my, mz, 0.0, 0.0, fz]))
    assert np.allclose(result.rotor_speeds**2, analytic, rtol=1e-10)
    assert np.allclose(result.status.achieved_wrench, [mx, my, mz, 0.0, 0.0, fz], atol=1e-10)


@pytest.mark.parametrize("name", ["quadrotor_plus", "hexarotor", "tilted_hexarotor"])
def test_too_much_thrust_keeps_the_attitude_moments(name: str) -> None:
    allocator = _allocator(VEHICLES / f"{name}.yaml")
    rotor = allocator.model.vehicle.rotors[0]
    max_thrust = rotor.thrust_coefficient * rotor.speed_max**2 * allocator.model.rotor_count
    moments = np.array([0.3, -0.2, 0.05])
    wrench = np.concatenate([moments, [0.0, 0.0, 1.5 * max_thrust]])
    result = allocator.allocate(wrench)
    status = result.status
    assert status.saturated
    assert status.saturated_rotors.any()
    assert np.allclose(status.achieved_wrench[:3], moments, atol=1e-3 * np.abs(moments).max())
    assert 0.7 * max_thrust < status.achieved_wrench[5] < max_thrust
    assert np.allclose(status.unallocated_wrench, wrench - status.achieved_wrench)
    assert np.all(result.rotor_speeds <= rotor.speed_max + 1e-9)


def test_impossible_roll_moment_saturates_and_is_reported() -> None:
    allocator = _allocator(VEHICLES / "quadrotor_plus.yaml")
    wrench = np.array([5.0, 0.0, 0.0, 0.0, 0.0, 10.0])
    result = allocator.allocate(wrench)
    assert result.status.saturated
    assert result.status.saturated_rotors[[1, 3]].all()      # rotors on the y axis at limits
    assert 0.0 < result.status.achieved_wrench[0] < 5.0
    assert result.status.unallocated_wrench[0] > 0.0
    assert np.all(result.rotor_speeds >= 100.0 - 1e-9)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_limits_are_respected_for_any_request(path: Path) -> None:
    allocator = _allocator(path)
    rng = np.random.default_rng(8)
    for _ in range(4):
        wrench = rng.normal(size=6) * np.array([1.0, 1.0, 0.3, 10.0, 10.0, 30.0])
        result = allocator.allocate(wrench)
        assert np.all(result.rotor_speeds >= allocator.speed_min - 1e-9)
        assert np.all(result.rotor_speeds <= allocator.speed_max + 1e-9)
        assert np.all(result.tilt_angles >= allocator.tilt_min - 1e-12)
        assert np.all(result.tilt_angles <= allocator.tilt_max + 1e-12)
        achieved = allocation_matrix(allocator.model, result.tilt_angles) @ result.rotor_speeds**2
        assert np.allclose(result.status.achieved_wrench, achieved)


@pytest.mark.parametrize("name", ["tilting_quadrotor", "quadrotor_four_tilting_wings"])
def test_tilt_rate_limit_narrows_the_reachable_angles(name: str) -> None:
    allocator = _allocator(VEHICLES / f"{name}.yaml")
    model = allocator.model
    wrench = allocation_matrix(model, np.full(4, 0.4)) @ np.full(4, 550.0**2)
    free = allocator.allocate(wrench)
    assert np.allclose(free.status.achieved_wrench, wrench, atol=1e-9)
    assert np.abs(free.tilt_angles).min() > 0.1
    dt = 0.01
    limited = allocator.allocate(wrench, tilt_current=np.zeros(4), dt=dt)
    assert np.all(np.abs(limited.tilt_angles) <= allocator.tilt_rate * dt + 1e-12)
    assert limited.status.saturated


def test_bad_requests_and_unsupported_tilt_layouts_are_rejected() -> None:
    allocator = _allocator(VEHICLES / "quadrotor_plus.yaml")
    with pytest.raises(ValueError, match="wrench must be 6 finite numbers"):
        allocator.allocate(np.array([0, 0, 0, 0, 0, np.nan]))
    with pytest.raises(ValueError, match="weights must be 6 positive"):
        ControlAllocator(allocator.model, weights=np.array([1, 1, 1, 1, 1, 0.0]))
    data = yaml.safe_load((VEHICLES / "tilting_quadrotor.yaml").read_text())
    two_rotors = copy.deepcopy(data)
    two_rotors["rotors"][1]["parent"] = "tilt_1"
    with pytest.raises(ValueError, match="exactly one rotor"):
        ControlAllocator(TreeModel(parse_vehicle(two_rotors)))
    oblique = copy.deepcopy(data)
    oblique["rotors"][0]["thrust_axis"] = [-np.sin(0.2), 0.0, np.cos(0.2)]  # not perpendicular
    with pytest.raises(ValueError, match="perpendicular"):
        ControlAllocator(TreeModel(parse_vehicle(oblique)))
