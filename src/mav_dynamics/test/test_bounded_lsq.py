"""Bounded-variable least squares against its optimality conditions, closed forms and scipy's
``lsq_linear`` (BVLS) as an independent baseline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import lsq_linear

from mav_dynamics.bounded_lsq import bounded_lsq

KKT_SLACK = 1e-9  # relative: gradient of a variable at a bound pointing out of the box


def _problem(seed: int, rows: int, columns: int, conditioning: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(rows, columns))
    matrix[: min(3, rows)] *= conditioning  # a dominant block, as the allocator's priority rows
    matrix = np.vstack([matrix, 1e-5 * np.eye(columns)])  # full column rank
    target = rng.normal(size=matrix.shape[0]) * rng.uniform(0.1, 10.0)
    lower = rng.uniform(-1.0, 0.5, columns)
    upper = lower + rng.uniform(0.01, 1.5, columns)
    return matrix, target, lower, upper


def _assert_kkt(matrix: np.ndarray, target: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                x: np.ndarray) -> None:
    """Inside the box; the descent direction -grad points out of it wherever x is not free."""
    assert np.all(x >= lower)
    assert np.all(x <= upper)
    descent = matrix.T @ (target - matrix @ x)
    scale = KKT_SLACK * max(1.0, float(np.abs(matrix.T @ target).max()))
    interior = (x > lower) & (x < upper)
    movable = lower < upper
    assert np.all(np.abs(descent[interior]) <= scale)
    assert np.all(descent[(x == lower) & movable] <= scale)
    assert np.all(descent[(x == upper) & movable] >= -scale)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 8), columns=st.integers(1, 12),
       conditioning=st.sampled_from([1.0, 1e2, 1e4]))
def test_matches_scipy_bvls_and_meets_the_optimality_conditions(
        seed: int, rows: int, columns: int, conditioning: float) -> None:
    matrix, target, lower, upper = _problem(seed, rows, columns, conditioning)
    ours = bounded_lsq(matrix, target, lower, upper)
    _assert_kkt(matrix, target, lower, upper, ours)
    theirs = lsq_linear(matrix, target, bounds=(lower, upper), method="bvls").x
    cost = float(np.sum((matrix @ ours - target) ** 2))
    baseline = float(np.sum((matrix @ theirs - target) ** 2))
    assert cost <= baseline * (1.0 + 1e-9) + 1e-24


def test_an_unconstrained_minimum_inside_the_box_is_returned_exactly() -> None:
    matrix, target, _, _ = _problem(3, 6, 4, 1.0)
    free = np.linalg.lstsq(matrix, target, rcond=None)[0]
    x = bounded_lsq(matrix, target, free - 1.0, free + 1.0)
    np.testing.assert_allclose(x, free, rtol=0.0, atol=1e-12)


def test_a_diagonal_problem_clips_each_variable_to_its_box() -> None:
    # min sum (d_i x_i - t_i)^2: separable, so the answer is t_i / d_i clipped.
    diagonal = np.array([1.0, 2.0, 0.5, 4.0])
    target = np.array([3.0, -4.0, 0.2, 1.0])
    lower, upper = np.array([-1.0, -1.0, -1.0, 0.0]), np.array([1.0, 1.0, 1.0, 0.1])
    x = bounded_lsq(np.diag(diagonal), target, lower, upper)
    np.testing.assert_allclose(x, np.clip(target / diagonal, lower, upper), atol=1e-15)


def test_a_variable_with_equal_bounds_stays_there() -> None:
    # scipy refuses lower == upper; a tilt window narrowed to one angle gives it.
    matrix, target, lower, upper = _problem(5, 4, 5, 1.0)
    upper[2] = lower[2]
    x = bounded_lsq(matrix, target, lower, upper)
    assert x[2] == lower[2]
    _assert_kkt(matrix, target, lower, upper, x)


@pytest.mark.parametrize(("lower", "upper"), [
    (np.array([0.0, np.nan]), np.array([1.0, 1.0])),
    (np.array([0.0, -np.inf]), np.array([1.0, 1.0])),
    (np.array([0.0, 2.0]), np.array([1.0, 1.0])),
])
def test_bad_bounds_are_refused(lower: np.ndarray, upper: np.ndarray) -> None:
    with pytest.raises(ValueError, match="finite bounds with lower <= upper"):
        bounded_lsq(np.eye(2), np.ones(2), lower, upper)
