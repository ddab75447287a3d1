"""Properties of the scalar-last Hamilton quaternion functions, cross-checked with scipy."""

import numpy as np
import pytest
from geometry_strategies import (
    quaternions,
    rotation_vectors,
    unit_quaternions,
    vectors,
)
from hypothesis import example, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy.spatial.transform import Rotation

from mav_geometry import quaternion as Q


def same_rotation(a, b, atol=1e-12):
    """Quaternions equal up to the double-cover sign."""
    a, b = np.asarray(a), np.asarray(b)
    sign = np.where(np.sum(a * b, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    assert_allclose(a, sign * b, atol=atol)


@given(quaternions(), quaternions(), quaternions())
def test_product_is_associative_with_identity_and_inverse(p, q, r):
    assert_allclose(Q.multiply(Q.multiply(p, q), r), Q.multiply(p, Q.multiply(q, r)), atol=1e-11)
    assert_allclose(Q.multiply(Q.identity(), q), q)
    assert_allclose(Q.multiply(q, Q.identity()), q)
    assert_allclose(Q.multiply(q, Q.inverse(q)), Q.identity(), atol=1e-12)
    assert_allclose(Q.multiply(Q.inverse(q), q), Q.identity(), atol=1e-12)


@given(quaternions(), quaternions())
def test_norm_is_multiplicative_and_conjugate_reverses_products(p, q):
    assert_allclose(Q.norm(Q.multiply(p, q)), Q.norm(p) * Q.norm(q), rtol=1e-12)
    assert_allclose(
        Q.conjugate(Q.multiply(p, q)), Q.multiply(Q.conjugate(q), Q.conjugate(p)), atol=1e-12
    )
    assert_allclose(Q.multiply(q, Q.conjugate(q))[:3], 0.0, atol=1e-12)
    assert_allclose(Q.multiply(q, Q.conjugate(q))[3], Q.norm(q) ** 2, rtol=1e-12)


def test_hamilton_basis_products():
    i, j, k, one = np.eye(4)
    assert_allclose(Q.multiply(i, j), k)
    assert_allclose(Q.multiply(j, k), i)
    assert_allclose(Q.multiply(k, i), j)
    for unit in (i, j, k):
        assert_allclose(Q.multiply(unit, unit), -one)


@given(unit_quaternions(), unit_quaternions())
def test_product_matches_scipy_composition(p, q):
    expected = (Rotation.from_quat(p) * Rotation.from_quat(q)).as_quat()
    same_rotation(Q.multiply(p, q), expected)


@given(quaternions(), quaternions())
def test_left_and_right_matrices(p, q):
    assert_allclose(Q.left_matrix(p) @ q, Q.multiply(p, q), atol=1e-12)
    assert_allclose(Q.right_matrix(q) @ p, Q.multiply(p, q), atol=1e-12)


@given(unit_quaternions(), vectors())
def test_rotate_matches_matrix_and_scipy(q, v):
    rotated = Q.rotate(q, v)
    assert_allclose(rotated, Q.to_matrix(q) @ v, atol=1e-12)
    assert_allclose(rotated, Rotation.from_quat(q).apply(v), atol=1e-12)
    assert_allclose(np.linalg.norm(rotated), np.linalg.norm(v), atol=1e-12)
    sandwich = Q.multiply(Q.multiply(q, np.append(v, 0.0)), Q.conjugate(q))
    assert_allclose(rotated, sandwich[:3], atol=1e-12)


@given(unit_quaternions())
def test_matrix_round_trip_including_angles_near_pi(q):
    matrix = Q.to_matrix(q)
    assert_allclose(matrix @ matrix.T, np.eye(3), atol=1e-14)
    assert_allclose(np.linalg.det(matrix), 1.0, atol=1e-14)
    recovered = Q.from_matrix(matrix)
    assert recovered[3] >= 0.0
    same_rotation(recovered, q, atol=1e-14)


@given(st.one_of(quaternions(), unit_quaternions()))
@example(np.array([0.0, 0.0, 1.0, 2.225073858507203e-309]))  # subnormal scalar part
def test_exp_inverts_log(q):
    assert_allclose(Q.exp(Q.log(q)), q, atol=1e-12)


@given(rotation_vectors(), st.floats(-2.0, 2.0))
def test_log_inverts_exp_inside_the_principal_branch(half_phi, scalar):
    # The vector part of log has norm in [0, pi]; half a rotation vector stays below pi/2.
    x = np.append(half_phi, scalar)
    assert_allclose(Q.log(Q.exp(x)), x, atol=1e-12)


@given(rotation_vectors())
def test_rotation_vector_round_trip_and_scipy(phi):
    q = Q.from_rotation_vector(phi)
    assert_allclose(Q.norm(q), 1.0, atol=1e-15)
    same_rotation(q, Rotation.from_rotvec(phi).as_quat(), atol=1e-15)
    assert_allclose(Q.to_rotation_vector(q), phi, atol=1e-12)


def test_rotation_vector_at_the_singular_points():
    # Exactly zero, below double precision squared, and a half turn both ways.
    assert_allclose(Q.from_rotation_vector([0.0, 0.0, 0.0]), [0, 0, 0, 1])
    tiny = np.array([1e-200, -2e-200, 3e-200])
    assert_allclose(Q.to_rotation_vector(Q.from_rotation_vector(tiny)), tiny, rtol=1e-15)
    half_turn = np.array([0.0, 0.0, np.pi])
    assert_allclose(Q.from_rotation_vector(half_turn), [0, 0, 1, 0], atol=1e-16)
    assert_allclose(Q.to_rotation_vector([0.0, 0.0, 1.0, 0.0]), half_turn)
    assert_allclose(Q.to_rotation_vector([0.0, 0.0, -1.0, 0.0]), -half_turn)
    # Just past a half turn the shortest rotation flips axis.
    past = Q.from_rotation_vector([0.0, 0.0, np.pi + 1e-3])
    assert_allclose(Q.to_rotation_vector(past), [0.0, 0.0, -(np.pi - 1e-3)], atol=1e-12)
    # log of -1: the axis is undefined, the angle is not.
    assert_allclose(Q.log([0.0, 0.0, 0.0, -1.0]), [np.pi, 0.0, 0.0, 0.0])
    assert_allclose(Q.exp(Q.log([0.0, 0.0, 0.0, -1.0])), [0, 0, 0, -1], atol=1e-15)


def test_log_near_identity_keeps_relative_accuracy():
    for angle in (1e-15, 1e-10, 1e-6):
        q = Q.from_rotation_vector([angle, 0.0, 0.0])
        assert_allclose(Q.to_rotation_vector(q)[0], angle, rtol=1e-14)


@given(quaternions())
def test_normalize_and_canonical(q):
    unit = Q.normalize(q)
    assert_allclose(Q.norm(unit), 1.0, atol=1e-15)
    assert_allclose(unit * Q.norm(q), q, atol=1e-12)
    assert Q.canonical(q)[3] >= 0.0
    same_rotation(Q.canonical(unit), unit)


@pytest.mark.parametrize("bad", [[0, 0, 0, 0], [np.nan, 0, 0, 1], [np.inf, 0, 0, 1]])
def test_normalize_rejects_zero_and_non_finite(bad):
    with pytest.raises(ValueError, match="zero or non-finite"):
        Q.normalize(bad)


def test_batches_broadcast_like_numpy():
    rng = np.random.default_rng(3)
    batch = Rotation.random(24, rng=rng).as_quat().reshape(2, 3, 4, 4)
    single = Rotation.random(rng=rng).as_quat()
    products = Q.multiply(batch, single)
    assert products.shape == (2, 3, 4, 4)
    assert_allclose(products[1, 2, 3], Q.multiply(batch[1, 2, 3], single))
    assert Q.to_matrix(batch).shape == (2, 3, 4, 3, 3)
    assert_allclose(Q.from_matrix(Q.to_matrix(batch)), Q.canonical(batch), atol=1e-14)
    assert Q.to_rotation_vector(batch).shape == (2, 3, 4, 3)
    assert Q.rotate(batch, np.ones(3)).shape == (2, 3, 4, 3)
    assert Q.identity((5,)).shape == (5, 4)
    assert Q.left_matrix(batch).shape == (2, 3, 4, 4, 4)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: Q.multiply([1, 2, 3], [0, 0, 0, 1]), "p"),
        (lambda: Q.rotate([0, 0, 0, 1], [1, 2]), "v"),
        (lambda: Q.from_matrix(np.eye(4)), "matrix"),
        (lambda: Q.from_rotation_vector([1.0, 2.0, 3.0, 4.0]), "phi"),
    ],
)
def test_wrong_shapes_name_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name} must have trailing shape"):
        call()
