"""Screw-theory identities of mav-screw-theory.md §6, tests 3-6 (and §3.5, §4.2 item 4)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from mav_dynamics.model import ad_batch
from mav_dynamics.screws import (
    cross3,
    joint_adjoint_terms,
    revolute_screw,
    rotation_from_z,
    rotor_matrix,
)
from mav_geometry.groups import SE3, SO3


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def _random_pose(rng: np.random.Generator) -> np.ndarray:
    return SE3.exp(rng.normal(size=6))


@pytest.mark.parametrize("seed", range(5))
def test_adjoint_of_revolute_exponential_is_quadratic_in_ad(seed: int) -> None:
    rng = np.random.default_rng(seed)
    screw = revolute_screw(_unit(rng), rng.normal(size=3))
    angle = rng.uniform(-3.0, 3.0)
    ad, ad_sq = joint_adjoint_terms(screw)
    closed = np.eye(6) + np.sin(angle) * ad + (1.0 - np.cos(angle)) * ad_sq
    assert np.allclose(closed, SE3.adjoint(SE3.exp(screw * angle)), atol=1e-12)
    assert np.allclose(SE3.exp(screw * angle), expm(SE3.hat(screw * angle)), atol=1e-12)
    assert np.allclose(ad @ ad_sq, -ad, atol=1e-12)  # ad^3 = -ad for a unit revolute screw


@pytest.mark.parametrize("seed", range(5))
def test_joint_screw_in_child_frame_is_independent_of_angle(seed: int) -> None:
    """(27): Ad_{T^c_p(theta)} S^{p,p}_c is the same for every theta."""
    rng = np.random.default_rng(seed)
    screw = revolute_screw(_unit(rng), rng.normal(size=3))
    zero_pose = _random_pose(rng)
    values = [SE3.adjoint(SE3.inverse(SE3.exp(screw * t) @ zero_pose)) @ screw
              for t in rng.uniform(-3, 3, size=4)]
    for value in values[1:]:
        assert np.allclose(value, values[0], atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_rotor_matrix_is_adjoint_invariant(seed: int) -> None:
    """(61): Ad_T^T K Ad_T = K for any T, so the rotor column is frame-free."""
    rng = np.random.default_rng(seed)
    k = rotor_matrix(rng.uniform(1e-6, 1e-4), rng.uniform(1e-8, 1e-6), int(rng.choice([-1, 1])))
    adjoint = SE3.adjoint(_random_pose(rng))
    assert np.allclose(adjoint.T @ k @ adjoint, k, rtol=0.0, atol=1e-12 * np.abs(k).max())


@pytest.mark.parametrize("seed", range(5))
def test_rotor_matrix_axial_component_is_minus_drag(seed: int) -> None:
    """S^T K S = -k_d for any point on the axis: the motor sees +k_d w^2."""
    rng = np.random.default_rng(seed)
    drag = rng.uniform(1e-8, 1e-6)
    k = rotor_matrix(rng.uniform(1e-6, 1e-4), drag, int(rng.choice([-1, 1])))
    screw = revolute_screw(_unit(rng), rng.normal(size=3))
    assert screw @ k @ screw == pytest.approx(-drag, rel=1e-10)


def test_rotation_from_z_maps_z_onto_direction() -> None:
    rng = np.random.default_rng(1)
    for direction in [_unit(rng), np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, -1.0])]:
        rotation = rotation_from_z(direction)
        assert np.allclose(rotation @ [0.0, 0.0, 1.0], direction, atol=1e-12)
        assert np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-12)
        assert np.linalg.det(rotation) == pytest.approx(1.0)
    assert np.allclose(SO3.log(rotation_from_z(np.array([0.0, 0.0, 1.0]))), 0.0)


def test_power_pairing_is_frame_invariant() -> None:
    """(15)-(16): (Ad^T_{T^b_a} W^b)^T (Ad_{T^a_b} V^b) = W^b . V^b."""
    rng = np.random.default_rng(9)
    pose = _random_pose(rng)                                    # T^b_a
    wrench, twist = rng.normal(size=6), rng.normal(size=6)
    wrench_a = SE3.adjoint(pose).T @ wrench
    twist_a = SE3.adjoint(SE3.inverse(pose)) @ twist
    assert wrench_a @ twist_a == pytest.approx(wrench @ twist, rel=1e-12)


def test_batched_helpers_equal_the_group_module() -> None:
    rng = np.random.default_rng(10)
    twists = rng.normal(size=(5, 6))
    assert np.array_equal(ad_batch(twists), SE3.ad(twists))
    a, b = rng.normal(size=3), rng.normal(size=3)
    assert np.allclose(cross3(a, b), np.cross(a, b), atol=1e-15)
