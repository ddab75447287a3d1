"""Trigonometric coefficients of the SO(3)/SE(3)/SE2(3) exponentials and Jacobians.

Each coefficient is an even entire function of the rotation angle whose closed
form cancels catastrophically near zero (``theta - sin(theta)`` and the like).
Below ``SERIES_SWITCH_RAD`` the Taylor series is summed instead: its terms
alternate and shrink factorially there, so it is accurate to round-off, and
above it the closed form has lost at most a few ulps.
"""

from __future__ import annotations

from collections.abc import Callable
from math import factorial

import numpy as np

from mav_geometry.arrays import FloatArray

SERIES_SWITCH_RAD = 2.0
_TERMS = 14  # 2**(2*14) / 31! ~ 3e-26: far below round-off at the switch angle


def _coefficients(term: Callable[[int], float]) -> FloatArray:
    return np.array([(-1) ** k * term(k) for k in range(_TERMS)], dtype=np.float64)


def _evaluate(
    theta: FloatArray, series: FloatArray, closed_form: Callable[[FloatArray], FloatArray]
) -> FloatArray:
    shape = np.shape(theta)
    theta = np.atleast_1d(np.asarray(theta, dtype=np.float64))  # 0-d results are not writable
    theta_sq = theta * theta
    result = np.full(theta.shape, series[-1])
    for coefficient in series[-2::-1]:
        result = result * theta_sq + coefficient
    large = theta >= SERIES_SWITCH_RAD
    if np.any(large):
        result[large] = closed_form(theta[large])
    return result.reshape(shape)


def sinc(theta: FloatArray) -> FloatArray:
    """sin(theta)/theta, 1 at 0 (no cancellation: a plain quotient is exact enough)."""
    result: FloatArray = np.sinc(np.asarray(theta, dtype=np.float64) / np.pi)
    return result


def one_minus_cos_over_sq(theta: FloatArray) -> FloatArray:
    """(1 - cos theta)/theta^2 written as sinc(theta/2)^2/2, free of cancellation."""
    half_sinc = sinc(0.5 * np.asarray(theta, dtype=np.float64))
    result: FloatArray = 0.5 * half_sinc * half_sinc
    return result


_C_SERIES = _coefficients(lambda k: 1.0 / factorial(2 * k + 3))
_D_SERIES = _coefficients(lambda k: 1.0 / factorial(2 * k + 4))
_G_SERIES = _coefficients(lambda k: (k + 1) / factorial(2 * k + 5))
_F_SERIES = _coefficients(lambda k: 2.0 * (k + 1) / factorial(2 * k + 4))


def theta_minus_sin_over_cube(theta: FloatArray) -> FloatArray:
    """(theta - sin theta)/theta^3; 1/6 at 0."""
    return _evaluate(theta, _C_SERIES, lambda t: (t - np.sin(t)) / t**3)


def cos_remainder_over_fourth(theta: FloatArray) -> FloatArray:
    """(theta^2/2 - 1 + cos theta)/theta^4; 1/24 at 0."""
    return _evaluate(theta, _D_SERIES, lambda t: (0.5 * t * t - 1.0 + np.cos(t)) / t**4)


def se3_q_third(theta: FloatArray) -> FloatArray:
    """(2 theta - 3 sin theta + theta cos theta)/(2 theta^5); 1/120 at 0."""
    return _evaluate(
        theta,
        _G_SERIES,
        lambda t: (2.0 * t - 3.0 * np.sin(t) + t * np.cos(t)) / (2.0 * t**5),
    )


def _jacobian_inverse_numerator(theta: FloatArray) -> FloatArray:
    """(2(1 - cos theta)/theta^2 - sin theta/theta)/theta^2; 1/12 at 0."""
    return _evaluate(
        theta,
        _F_SERIES,
        lambda t: (2.0 * one_minus_cos_over_sq(t) - sinc(t)) / (t * t),
    )


def so3_jacobian_inverse_coefficient(theta: FloatArray) -> FloatArray:
    """(1 - theta sin theta / (2 (1 - cos theta)))/theta^2; 1/12 at 0.

    The coefficient of hat(phi)^2 in the inverse left Jacobian of SO(3). It has
    poles at theta = 2 pi n (n != 0); callers work with |theta| <= pi.
    """
    result: FloatArray = _jacobian_inverse_numerator(theta) / (
        2.0 * one_minus_cos_over_sq(theta)
    )
    return result
