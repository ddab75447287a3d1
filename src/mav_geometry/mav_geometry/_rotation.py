"""Rotation kernels on 3x3 matrices and rotation vectors ``phi`` (rad).

The public face is ``groups.SO3``; these functions are its building blocks and
those of SE(3) and SE2(3). ``exp(phi)`` is the matrix exponential of
``hat(phi)``; the left Jacobian satisfies
``exp(phi + d) ~ exp(left_jacobian(phi) d) exp(phi)`` and the right Jacobian
``exp(phi + d) ~ exp(phi) exp(right_jacobian(phi) d)`` to first order in ``d``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import _series, quaternion
from mav_geometry.arrays import FloatArray, as_float_array


def hat(phi: ArrayLike) -> FloatArray:
    """Skew-symmetric matrix with ``hat(a) @ b == cross(a, b)``."""
    phi = as_float_array(phi, (3,), "phi")
    x, y, z = phi[..., 0], phi[..., 1], phi[..., 2]
    zero = np.zeros_like(x)
    return np.stack(
        [
            np.stack([zero, -z, y], axis=-1),
            np.stack([z, zero, -x], axis=-1),
            np.stack([-y, x, zero], axis=-1),
        ],
        axis=-2,
    )


def vee(matrix: ArrayLike) -> FloatArray:
    """Inverse of ``hat`` (reads the skew part of any 3x3 matrix)."""
    m = as_float_array(matrix, (3, 3), "matrix")
    return 0.5 * np.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]],
        axis=-1,
    )


def _quadratic_in_hat(phi: FloatArray, first: FloatArray, second: FloatArray) -> FloatArray:
    """``I + first hat(phi) + second hat(phi)^2`` with per-element coefficients."""
    skew = hat(phi)
    result: FloatArray = (
        np.eye(3) + first[..., None, None] * skew + second[..., None, None] * (skew @ skew)
    )
    return result


def exp(phi: ArrayLike) -> FloatArray:
    """Rotation matrix of rotation vector ``phi`` (through the unit quaternion: fewer ops)."""
    return quaternion.to_matrix(quaternion.from_rotation_vector(phi))


def log(rotation: ArrayLike) -> FloatArray:
    """Rotation vector with angle in [0, pi]; accurate near pi (via a pivoted quaternion)."""
    return quaternion.to_rotation_vector(quaternion.from_matrix(rotation))


def left_jacobian(phi: ArrayLike) -> FloatArray:
    """Left Jacobian ``I + (1-cos)/t^2 hat + (t-sin)/t^3 hat^2`` (t = |phi|).

    The right Jacobian is ``left_jacobian(-phi)``.
    """
    phi = as_float_array(phi, (3,), "phi")
    angle = np.linalg.norm(phi, axis=-1)
    return _quadratic_in_hat(
        phi, _series.one_minus_cos_over_sq(angle), _series.theta_minus_sin_over_cube(angle)
    )


def left_jacobian_inverse(phi: ArrayLike) -> FloatArray:
    """Inverse of ``left_jacobian``; defined for |phi| < 2 pi."""
    phi = as_float_array(phi, (3,), "phi")
    angle = np.linalg.norm(phi, axis=-1)
    return _quadratic_in_hat(
        phi, np.full(angle.shape, -0.5), _series.so3_jacobian_inverse_coefficient(angle)
    )
