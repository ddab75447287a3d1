"""The float-tuple kernels agree with the batched reference implementations."""

import numpy as np
from geometry_strategies import (
    SPECIAL_ANGLES,
    quaternions,
    rotation_vectors,
    unit_quaternions,
    vectors,
)
from hypothesis import given
from numpy.testing import assert_allclose

from mav_geometry import _series, scalar
from mav_geometry import quaternion as Q
from mav_geometry.groups import SO3
from mav_geometry.nilpotent import DUAL


@given(quaternions(), quaternions(), vectors())
def test_products_match_quaternion_module(p, q, u):
    assert_allclose(scalar.multiply(p, q), Q.multiply(p, q), atol=1e-12)
    pure = np.append(u, 0.0)
    assert_allclose(scalar.multiply_pure(q, u), Q.multiply(q, pure), atol=1e-12)
    assert_allclose(scalar.pure_multiply(u, q), Q.multiply(pure, q), atol=1e-12)
    assert_allclose(scalar.cross(p[:3], u), np.cross(p[:3], u), atol=1e-12)


@given(unit_quaternions(), vectors())
def test_rotations_match_quaternion_module(q, v):
    assert_allclose(scalar.rotate(q, v), Q.rotate(q, v), atol=1e-12)
    assert_allclose(scalar.rotate_inverse(q, v), Q.to_matrix(q).T @ v, atol=1e-12)
    assert_allclose(np.array(scalar.to_matrix(q)), Q.to_matrix(q), atol=1e-15)


@given(unit_quaternions(), vectors())
def test_unpack_translation_matches_dual_quaternions(q, t):
    dual = DUAL.pack(q, t)
    assert_allclose(scalar.unpack_translation(dual[4:], q), t, atol=1e-12)


@given(rotation_vectors(max_angle=3.0), vectors())
def test_exp_with_jacobian_matches_so3(phi, x):
    q, a, b = scalar.exp_with_jacobian(phi)
    assert_allclose(q, Q.from_rotation_vector(phi), atol=1e-15)
    assert_allclose(scalar.left_jacobian_apply(phi, a, b, x), SO3.left_jacobian(phi) @ x,
                    atol=1e-12)


def test_jacobian_coefficients_keep_full_relative_precision():
    # The batched series module is the reference at every special angle.
    for angle in [*SPECIAL_ANGLES, 0.0999999, 0.1, 0.1000001]:
        _, a, b = scalar.exp_with_jacobian((0.0, angle, 0.0))
        reference = np.array([angle])
        assert_allclose(a, _series.one_minus_cos_over_sq(reference)[0], rtol=1e-15)
        assert_allclose(b, _series.theta_minus_sin_over_cube(reference)[0], rtol=2e-14)
