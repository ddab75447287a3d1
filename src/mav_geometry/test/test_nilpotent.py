"""Dual and trident quaternions against their groups SE(3) and SE2(3)."""

import numpy as np
import pytest
from geometry_strategies import tangents, unit_quaternions, vectors
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from mav_geometry import quaternion as Q
from mav_geometry.nilpotent import DUAL, TRIDENT

ALGEBRAS = [DUAL, TRIDENT]
algebra_parameter = pytest.mark.parametrize("algebra", ALGEBRAS, ids=lambda a: a.name)


def unit_elements(algebra):
    return st.builds(
        lambda q, *ts: algebra.pack(q, *ts),
        unit_quaternions(),
        *[vectors() for _ in range(algebra.imaginary_parts)],
    )


def same_element(a, b, atol=1e-12):
    """Equal up to the double-cover sign."""
    sign = -1.0 if np.dot(a[:4], b[:4]) < 0 else 1.0
    assert_allclose(a, sign * b, atol=atol)


def series_exp(algebra, xi, terms=40):
    """exp(xi_breve / 2) summed as a power series with the algebra's own product."""
    half = np.zeros(algebra.width)
    for part in range(1 + algebra.imaginary_parts):
        half[4 * part : 4 * part + 3] = 0.5 * xi[3 * part : 3 * part + 3]
    total = algebra.identity()
    term = algebra.identity()
    for n in range(1, terms):
        term = algebra.multiply(term, half) / n
        total = total + term
    return total


@algebra_parameter
@given(data=st.data())
def test_pack_unpack_round_trip_and_unit_norm(algebra, data):
    q = data.draw(unit_quaternions())
    translations = [data.draw(vectors()) for _ in range(algebra.imaginary_parts)]
    x = algebra.pack(q, *translations)
    assert x.shape == (algebra.width,)
    q_back, *translations_back = algebra.unpack(x)
    assert_allclose(q_back, q)
    for back, original in zip(translations_back, translations, strict=True):
        assert_allclose(back, original, atol=1e-12)
    expected_norm = np.zeros(1 + algebra.imaginary_parts)
    expected_norm[0] = 1.0
    assert_allclose(algebra.norm(x), expected_norm, atol=1e-12)


@algebra_parameter
@given(data=st.data())
def test_product_equals_group_composition(algebra, data):
    a, b = data.draw(unit_elements(algebra)), data.draw(unit_elements(algebra))
    product = algebra.multiply(a, b)
    group = algebra.group
    assert_allclose(
        algebra.to_matrix(product),
        group.compose(algebra.to_matrix(a), algebra.to_matrix(b)),
        atol=1e-11,
    )
    assert_allclose(algebra.norm(product)[1:], 0.0, atol=1e-11)


@algebra_parameter
@given(data=st.data())
def test_algebra_axioms(algebra, data):
    a, b, c = (data.draw(unit_elements(algebra)) for _ in range(3))
    assert_allclose(
        algebra.multiply(algebra.multiply(a, b), c),
        algebra.multiply(a, algebra.multiply(b, c)),
        atol=1e-10,
    )
    assert_allclose(algebra.multiply(a, algebra.identity()), a)
    assert_allclose(algebra.multiply(a, algebra.conjugate(a)), algebra.identity(), atol=1e-11)
    assert_allclose(algebra.multiply(algebra.conjugate(a), a), algebra.identity(), atol=1e-11)
    assert_allclose(
        algebra.conjugate(algebra.multiply(a, b)),
        algebra.multiply(algebra.conjugate(b), algebra.conjugate(a)),
        atol=1e-11,
    )


@algebra_parameter
@given(data=st.data())
def test_exp_matches_group_exp_and_power_series(algebra, data):
    xi = data.draw(tangents(algebra.imaginary_parts, max_angle=3 * np.pi))
    x = algebra.exp(xi)
    assert_allclose(algebra.to_matrix(x), algebra.group.exp(xi), atol=1e-10)
    if np.abs(xi).max() < 5.0:  # the series needs more terms for large arguments
        assert_allclose(x, series_exp(algebra, xi), atol=1e-11)


@algebra_parameter
@given(data=st.data())
def test_log_round_trips(algebra, data):
    xi = data.draw(tangents(algebra.imaginary_parts))
    assert_allclose(algebra.log(algebra.exp(xi)), xi, atol=1e-9, rtol=1e-9)
    x = data.draw(unit_elements(algebra))
    same_element(algebra.exp(algebra.log(x)), x, atol=1e-11)
    assert_allclose(algebra.log(-x), algebra.log(x), atol=1e-11)


@algebra_parameter
@given(data=st.data())
def test_matrix_round_trip_and_act(algebra, data):
    x = data.draw(unit_elements(algebra))
    same_element(algebra.from_matrix(algebra.to_matrix(x)), x, atol=1e-12)
    point = data.draw(vectors())
    assert_allclose(algebra.act(x, point), algebra.group.act(algebra.to_matrix(x), point),
                    atol=1e-12)


@algebra_parameter
@given(data=st.data(), noise=st.floats(1e-9, 1e-2))
def test_normalize_projects_onto_unit_elements(algebra, data, noise):
    x = data.draw(unit_elements(algebra))
    assert_allclose(algebra.normalize(x), x, atol=1e-13)
    rng = np.random.default_rng(0)
    perturbed = x + noise * rng.normal(size=x.shape)
    unit = algebra.normalize(perturbed)
    expected = np.zeros(1 + algebra.imaginary_parts)
    expected[0] = 1.0
    assert_allclose(algebra.norm(unit), expected, atol=1e-12)
    # The projection moves the element by no more than the perturbation's order.
    assert np.abs(unit - x).max() < 50 * noise * (1 + np.abs(x).max())


@algebra_parameter
def test_normalize_rejects_a_zero_principal_part(algebra):
    with pytest.raises(ValueError, match="principal part is zero or non-finite"):
        algebra.normalize(np.zeros(algebra.width))


def test_trident_packs_the_navigation_state_like_the_paper():
    # q + eps1 1/2 v q + eps2 1/2 p q, parts stored [P, D1, D2] scalar-last.
    q = Q.from_rotation_vector([0.1, -0.2, 0.3])
    v = np.array([1.0, 2.0, 3.0])
    p = np.array([-4.0, 5.0, 6.0])
    x = TRIDENT.pack(q, v, p)
    assert_allclose(x[4:8], 0.5 * Q.multiply(np.append(v, 0.0), q))
    assert_allclose(x[8:12], 0.5 * Q.multiply(np.append(p, 0.0), q))
    dual = DUAL.pack(q, p)
    assert_allclose(dual[4:8], x[8:12])


@algebra_parameter
def test_batches(algebra):
    rng = np.random.default_rng(11)
    xi = rng.normal(size=(4, 3, algebra.group.dof))
    x = algebra.exp(xi)
    assert x.shape == (4, 3, algebra.width)
    assert_allclose(algebra.multiply(x, algebra.conjugate(x)), algebra.identity((4, 3)),
                    atol=1e-12)
    assert_allclose(algebra.to_matrix(x)[3, 2], algebra.group.exp(xi[3, 2]), atol=1e-12)
    q = Q.identity((4, 1))
    packed = algebra.pack(q, *[np.ones((3, 3))] * algebra.imaginary_parts)
    assert packed.shape == (4, 3, algebra.width)
    with pytest.raises(ValueError, match="packs"):
        algebra.pack(q)
