"""SO(3), SE(3), SE2(3): group axioms, exp/log, adjoints and Jacobians.

Independent oracles: scipy's matrix exponential ``expm`` for exp, Ad and the
Jacobians (J_l = integral of exp(s ad) over [0, 1], read off one block matrix
exponential), and central finite differences.
"""

import numpy as np
import pytest
from geometry_strategies import SPECIAL_ANGLES, tangents, unit_vectors, vectors
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy.linalg import expm
from scipy.spatial.transform import Rotation

from mav_geometry import _series
from mav_geometry.groups import SE3, SE23, SO3

GROUPS = [SO3, SE3, SE23]
group_parameter = pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.name)


def elements(group):
    return tangents(group.translations, max_angle=np.pi).map(group.exp)


def left_jacobian_oracle(group, xi):
    """J_l = sum ad^n/(n+1)!: the top-right block of expm([[ad, I], [0, 0]])."""
    n = group.dof
    block = np.zeros((2 * n, 2 * n))
    block[:n, :n] = group.ad(xi)
    block[:n, n:] = np.eye(n)
    return expm(block)[:n, n:]


@group_parameter
@given(data=st.data())
def test_exp_matches_matrix_exponential(group, data):
    xi = data.draw(tangents(group.translations, max_angle=3 * np.pi))
    assert_allclose(group.exp(xi), expm(group.hat(xi)), atol=1e-11)
    assert_allclose(group.vee(group.hat(xi)), xi)


@group_parameter
@given(data=st.data())
def test_log_inverts_exp(group, data):
    xi = data.draw(tangents(group.translations))
    assert_allclose(group.log(group.exp(xi)), xi, atol=1e-9, rtol=1e-9)
    x = data.draw(elements(group))
    assert_allclose(group.exp(group.log(x)), x, atol=1e-12)


@group_parameter
@given(data=st.data())
def test_group_axioms(group, data):
    a, b, c = (data.draw(elements(group)) for _ in range(3))
    assert_allclose(
        group.compose(group.compose(a, b), c), group.compose(a, group.compose(b, c)), atol=1e-11
    )
    assert_allclose(group.compose(a, group.identity()), a)
    assert_allclose(group.compose(a, group.inverse(a)), group.identity(), atol=1e-12)
    assert_allclose(group.compose(group.inverse(a), a), group.identity(), atol=1e-12)
    product = group.compose(a, b)
    rotation = product[:3, :3]
    assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-14)
    assert_allclose(product[3:, :], group.identity()[3:, :])


@group_parameter
@given(data=st.data())
def test_adjoint_is_a_homomorphism_and_conjugates_the_algebra(group, data):
    a, b = data.draw(elements(group)), data.draw(elements(group))
    xi = data.draw(tangents(group.translations))
    ad_a = group.adjoint(a)
    assert_allclose(group.adjoint(group.compose(a, b)), ad_a @ group.adjoint(b), atol=1e-10)
    assert_allclose(group.adjoint(group.inverse(a)), np.linalg.inv(ad_a), atol=1e-9)
    assert_allclose(a @ group.hat(xi) @ group.inverse(a), group.hat(ad_a @ xi), atol=1e-10)
    assert_allclose(
        group.exp(ad_a @ xi), group.compose(group.compose(a, group.exp(xi)), group.inverse(a)),
        atol=1e-9,
    )


@group_parameter
@given(data=st.data())
def test_small_adjoint_is_the_bracket_and_generates_adjoint(group, data):
    x, y = data.draw(tangents(group.translations)), data.draw(tangents(group.translations))
    bracket = group.hat(x) @ group.hat(y) - group.hat(y) @ group.hat(x)
    assert_allclose(group.hat(group.ad(x) @ y), bracket, atol=1e-10)
    assert_allclose(group.adjoint(group.exp(x)), expm(group.ad(x)), atol=1e-9)


@group_parameter
@given(data=st.data())
def test_jacobians_match_the_series_oracle(group, data):
    xi = data.draw(tangents(group.translations))
    left = group.left_jacobian(xi)
    assert_allclose(left, left_jacobian_oracle(group, xi), atol=1e-11)
    assert_allclose(group.right_jacobian(xi), left_jacobian_oracle(group, -xi), atol=1e-11)
    assert_allclose(left, group.adjoint(group.exp(xi)) @ group.right_jacobian(xi), atol=1e-10)
    identity = np.eye(group.dof)
    assert_allclose(group.left_jacobian_inverse(xi) @ left, identity, atol=1e-9)
    right = group.right_jacobian(xi)
    assert_allclose(group.right_jacobian_inverse(xi) @ right, identity, atol=1e-9)


@group_parameter
@given(data=st.data())
def test_jacobians_match_finite_differences(group, data):
    xi = data.draw(tangents(group.translations, max_angle=3.0))
    step = 1e-6
    x = group.exp(xi)
    x_inv = group.inverse(x)
    left = np.empty((group.dof, group.dof))
    right = np.empty((group.dof, group.dof))
    for i in range(group.dof):
        d = np.zeros(group.dof)
        d[i] = step
        plus, minus = group.exp(xi + d), group.exp(xi - d)
        left[:, i] = (group.log(plus @ x_inv) - group.log(minus @ x_inv)) / (2 * step)
        right[:, i] = (group.log(x_inv @ plus) - group.log(x_inv @ minus)) / (2 * step)
    assert_allclose(group.left_jacobian(xi), left, atol=1e-6 * (1 + np.abs(xi).max()))
    assert_allclose(group.right_jacobian(xi), right, atol=1e-6 * (1 + np.abs(xi).max()))


@group_parameter
@given(data=st.data())
def test_act_and_components(group, data):
    x = data.draw(elements(group))
    point = data.draw(vectors())
    homogeneous = np.zeros(group.size)
    homogeneous[:3] = point
    if group.translations:
        homogeneous[-1] = 1.0
    assert_allclose(group.act(x, point), (x @ homogeneous)[:3], atol=1e-12)
    assert_allclose(group.from_components(*group.components(x)), x)


@group_parameter
@given(axis=unit_vectors(), gap=st.sampled_from([0.0, 1e-12, 1e-9, 1e-6]))
def test_log_near_a_half_turn(group, axis, gap):
    angle = np.pi - gap
    rotation = Rotation.from_rotvec(axis * angle).as_matrix()
    phi = group.log(group.from_components(rotation, *[np.ones(3)] * group.translations))[:3]
    # At exactly pi the axis sign is arbitrary; the rotation it describes is not.
    assert_allclose(np.linalg.norm(phi), angle, atol=1e-12)
    assert_allclose(Rotation.from_rotvec(phi).as_matrix(), rotation, atol=1e-12)


@group_parameter
def test_batches(group):
    rng = np.random.default_rng(7)
    xi = rng.normal(size=(3, 5, group.dof))
    xi[..., :3] /= 1.0 + np.linalg.norm(xi[..., :3], axis=-1, keepdims=True)  # angles below 1 rad
    x = group.exp(xi)
    assert x.shape == (3, 5, group.size, group.size)
    assert_allclose(x[2, 4], group.exp(xi[2, 4]))
    assert_allclose(group.log(x), xi, atol=1e-12)
    assert group.left_jacobian(xi).shape == (3, 5, group.dof, group.dof)
    assert_allclose(group.adjoint(x)[1, 2], group.adjoint(x[1, 2]))
    assert_allclose(group.compose(x, group.inverse(x)), group.identity((3, 5)), atol=1e-12)


def test_named_groups_have_the_expected_sizes():
    assert (SO3.size, SO3.dof) == (3, 3)
    assert (SE3.size, SE3.dof) == (4, 6)
    assert (SE23.size, SE23.dof) == (5, 9)
    with pytest.raises(ValueError, match="takes 2 translation columns"):
        SE23.from_components(np.eye(3), np.zeros(3))


SERIES_CASES = [
    (_series.theta_minus_sin_over_cube, lambda t: (t - np.sin(t)) / t**3, 1 / 6),
    (_series.cos_remainder_over_fourth, lambda t: (t * t / 2 - 1 + np.cos(t)) / t**4, 1 / 24),
    (_series.se3_q_third, lambda t: (2 * t - 3 * np.sin(t) + t * np.cos(t)) / (2 * t**5), 1 / 120),
    (
        _series.so3_jacobian_inverse_coefficient,
        lambda t: (1 - t * np.sin(t) / (2 * (1 - np.cos(t)))) / t**2,
        1 / 12,
    ),
]


@pytest.mark.parametrize(("function", "closed_form", "at_zero"), SERIES_CASES)
def test_series_agree_with_closed_forms_where_both_are_accurate(function, closed_form, at_zero):
    # Around the switch both branches are accurate: they must agree to round-off.
    theta = np.linspace(1.0, 3.0, 201)
    assert_allclose(function(theta), closed_form(theta), rtol=1e-13)
    assert_allclose(function(np.array([0.0])), [at_zero], rtol=1e-15)
    small = np.array([a for a in SPECIAL_ANGLES if 0 < a < 1e-3])
    assert_allclose(function(small), at_zero, rtol=1e-5)
