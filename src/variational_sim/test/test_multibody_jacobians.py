"""Finite-difference checks of every analytic Jacobian of the maximal-coordinate model.

Perturbations follow the tangent convention: ``Q <- Q exp(dtheta/2)`` (body frame) and
``r <- r + dr`` (world). Central differences with step 1e-6 agree to about 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from variational_sim.experiments.common import fly_hopper
from variational_sim.minimal.planar_loop import PlanarLoopModel
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.contact import ContactVariationalMultibody
from variational_sim.multibody.discrete import (
    momenta,
    relative_rotation,
    start_momentum_jacobian,
)
from variational_sim.multibody.hopper import with_welded_base
from variational_sim.multibody.mechanism import WORLD, Body, Joint, Mechanism

EPS = 1e-6


def _perturbed(positions, quaternions, body, index, amount):
    positions, quaternions = positions.copy(), quaternions.copy()
    if index < 3:
        rotation = np.zeros(3)
        rotation[index] = amount
        quaternions[body] = Q.multiply(quaternions[body], Q.from_rotation_vector(rotation))
    else:
        positions[body, index - 3] += amount
    return positions, quaternions


def _numeric_jacobian(function, positions, quaternions):
    columns = []
    for body in range(len(positions)):
        for index in range(6):
            plus = function(*_perturbed(positions, quaternions, body, index, EPS))
            minus = function(*_perturbed(positions, quaternions, body, index, -EPS))
            columns.append((plus - minus) / (2 * EPS))
    return np.array(columns).T


def _random_configuration(rng, n):
    positions = rng.normal(size=(n, 3))
    quaternions = Q.normalize(rng.normal(size=(n, 4)))
    return positions, quaternions


def _test_mechanism() -> Mechanism:
    """Every joint kind, a world parent, a rotated reference and projected point rows."""
    rng = np.random.default_rng(3)

    def body(name: str) -> Body:
        a = rng.normal(size=(3, 3))
        return Body(name, 1.0 + rng.random(), a @ a.T + np.eye(3))

    tilted = Q.normalize(np.array([0.2, -0.1, 0.3, 0.9]))
    joints = (
        Joint("r", "revolute", WORLD, "a", rng.normal(size=3), rng.normal(size=3),
              axis=np.array([0.6, 0.0, 0.8]), orientation=tilted),
        Joint("s", "spherical", "a", "b", rng.normal(size=3), rng.normal(size=3)),
        Joint("f", "fixed", "b", "c", rng.normal(size=3), rng.normal(size=3),
              orientation=tilted),
        Joint("p", "spherical", "c", "a", rng.normal(size=3), rng.normal(size=3),
              point_directions=np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]])),
    )
    return Mechanism("test", (body("a"), body("b"), body("c")), joints)


@pytest.mark.parametrize("mechanism", [_test_mechanism(), with_welded_base(fly_hopper())],
                         ids=["all-joint-kinds", "welded-hopper"])
def test_constraint_jacobian_matches_finite_differences(mechanism: Mechanism) -> None:
    constraints = ConstraintSet(mechanism)
    rng = np.random.default_rng(7)
    for _ in range(3):
        positions, quaternions = _random_configuration(rng, len(mechanism.bodies))
        _, analytic = constraints.evaluate(positions, quaternions)
        numeric = _numeric_jacobian(
            lambda x, q: constraints.evaluate(x, q, jacobian=False)[0], positions, quaternions
        )
        assert np.max(np.abs(analytic - numeric)) < 1e-8 * max(1.0, np.max(np.abs(numeric)))


def _kinetic_lagrangian(x0, q0, x1, q1, masses, inertias, h):
    """Kinetic part of L_d, written independently of ``discrete``."""
    v = Q.multiply(Q.conjugate(q0), q1)[:, :3]
    rotational = np.einsum("ni,nij,nj->", v, inertias, v)
    return float(np.sum(masses * np.sum((x1 - x0) ** 2, axis=1)) / (2 * h)
                 + 2.0 / h * rotational)


def test_discrete_legendre_transforms_are_the_lagrangian_derivatives() -> None:
    rng = np.random.default_rng(11)
    n, h = 3, 0.01
    masses = 1.0 + rng.random(n)
    a = rng.normal(size=(n, 3, 3))
    inertias = a @ a.transpose(0, 2, 1) + np.eye(3)
    x0, q0 = _random_configuration(rng, n)
    x1 = x0 + 0.01 * rng.normal(size=(n, 3))
    q1 = Q.multiply(q0, Q.from_rotation_vector(0.05 * rng.normal(size=(n, 3))))
    start, end = momenta(x0, x1, relative_rotation(q0, q1), masses, inertias, h)
    d1 = _numeric_jacobian(
        lambda x, q: np.array([_kinetic_lagrangian(x, q, x1, q1, masses, inertias, h)]), x0, q0)
    d2 = _numeric_jacobian(
        lambda x, q: np.array([_kinetic_lagrangian(x0, q0, x, q, masses, inertias, h)]), x1, q1)
    assert np.allclose(start.reshape(-1), -d1[0], atol=1e-7)
    assert np.allclose(end.reshape(-1), d2[0], atol=1e-7)


def test_newton_block_is_the_derivative_of_the_start_momentum() -> None:
    rng = np.random.default_rng(5)
    n, h = 2, 0.02
    masses = 1.0 + rng.random(n)
    a = rng.normal(size=(n, 3, 3))
    inertias = a @ a.transpose(0, 2, 1) + np.eye(3)
    x0, q0 = _random_configuration(rng, n)
    x1 = x0 + 0.01 * rng.normal(size=(n, 3))
    q1 = Q.multiply(q0, Q.from_rotation_vector(0.3 * rng.normal(size=(n, 3))))
    blocks = start_momentum_jacobian(relative_rotation(q0, q1), masses, inertias, h)
    numeric = _numeric_jacobian(
        lambda x, q: momenta(x0, x, relative_rotation(q0, q), masses, inertias, h)[0].reshape(-1),
        x1, q1)
    for body in range(n):
        block = numeric[6 * body:6 * body + 6, 6 * body:6 * body + 6]
        assert np.max(np.abs(blocks[body] - block)) < 1e-6 * np.max(np.abs(block))
    off_diagonal = numeric.copy()
    for body in range(n):
        off_diagonal[6 * body:6 * body + 6, 6 * body:6 * body + 6] = 0.0
    assert np.max(np.abs(off_diagonal)) < 1e-6


def test_contact_centre_jacobian_matches_finite_differences() -> None:
    hopper = fly_hopper()
    integrator = ContactVariationalMultibody(hopper, 0.001)
    positions, quaternions = _random_configuration(np.random.default_rng(2), 5)
    _, analytic = integrator.centres(positions, quaternions)
    numeric = _numeric_jacobian(
        lambda x, q: integrator.centres(x, q)[0].reshape(-1), positions, quaternions)
    assert np.max(np.abs(analytic[0] - numeric)) < 1e-8


def test_minimal_loop_jacobian_and_bias_match_finite_differences() -> None:
    model = PlanarLoopModel(with_welded_base(fly_hopper()))
    rng = np.random.default_rng(4)
    q, qdot = rng.normal(size=4), rng.normal(size=4)
    _, d, bias = model.constraint(q, qdot)
    numeric = np.array([(model.constraint(q + EPS * e, qdot)[0]
                         - model.constraint(q - EPS * e, qdot)[0]) / (2 * EPS)
                        for e in np.eye(4)]).T
    assert np.max(np.abs(d - numeric)) < 1e-8
    # bias = d(D qdot)/dq qdot
    rate = np.array([(model.constraint(q + EPS * e, qdot)[1] @ qdot
                      - model.constraint(q - EPS * e, qdot)[1] @ qdot) / (2 * EPS)
                     for e in np.eye(4)]).T
    assert np.max(np.abs(bias - rate @ qdot)) < 1e-7
