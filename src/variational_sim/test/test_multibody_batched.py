"""The stacked small-matrix kernels against ``mav_geometry.quaternion``, and the
remembered evaluations of the constraint set and the contact centres."""

from __future__ import annotations

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from variational_sim.experiments.common import fly_hopper
from variational_sim.multibody import batched
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.contact import ContactVariationalMultibody
from variational_sim.multibody.hopper import with_vertical_guide


def _quaternions(rng: np.random.Generator, count: int) -> np.ndarray:
    return Q.normalize(rng.normal(size=(count, 4)))


def test_rotation_matrices_and_products_match_the_reference() -> None:
    rng = np.random.default_rng(0)
    p, q = _quaternions(rng, 6), _quaternions(rng, 6)
    assert np.allclose(batched.rotation_matrices(q), Q.to_matrix(q), atol=1e-15)
    assert np.allclose(batched.multiply(p, q), Q.multiply(p, q), atol=1e-15)
    assert np.allclose(batched.conjugate(q), Q.conjugate(q), atol=0.0)


def test_rotation_vector_quaternions_match_the_reference_including_zero() -> None:
    rng = np.random.default_rng(1)
    units = rng.normal(size=(2, 3))
    units /= np.linalg.norm(units, axis=1, keepdims=True)
    vectors = np.concatenate([np.zeros((1, 3)), 1e-9 * rng.normal(size=(2, 3)),
                              batched.SMALL_ANGLE * np.array([[0.999], [1.001]]) * units,
                              rng.normal(size=(4, 3))])
    assert np.allclose(batched.from_rotation_vectors(vectors), Q.from_rotation_vector(vectors),
                       atol=1e-15)


def test_skew_applies_the_cross_product() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    assert np.allclose(batched.apply(batched.skew(a), b), np.cross(a, b), atol=1e-15)
    assert np.allclose(batched.apply_transposed(batched.skew(a), b), np.cross(b, a),
                       atol=1e-15)


def test_remembered_evaluations_are_read_only_and_follow_the_configuration() -> None:
    hopper = with_vertical_guide(fly_hopper())
    constraints = ConstraintSet(hopper)
    integrator = ContactVariationalMultibody(hopper, 0.001)
    rng = np.random.default_rng(3)
    positions, quaternions = rng.normal(size=(5, 3)), _quaternions(rng, 5)
    moved = positions + 0.1  # changes the base guide's rows and the foot centre
    for evaluate in (constraints.evaluate, integrator.centres):
        values, jacobian = evaluate(positions, quaternions)
        assert evaluate(positions.copy(), quaternions.copy())[1] is jacobian
        with pytest.raises(ValueError, match="read-only"):
            jacobian[0, 0] = 1.0
        assert not np.allclose(evaluate(moved, quaternions)[0], values)
