"""Skew-symmetric matrices, and flat indices for writing 3x3 blocks into a square matrix in
one numpy call (assigning blocks one by one costs more than the filters' arithmetic)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from mav_geometry.arrays import FloatVector


def skew(a: FloatVector) -> NDArray[np.float64]:
    """[a x]: skew(a) @ b == cross(a, b) (a plain 3x3 build; SO3.hat is batch-oriented)."""
    x, y, z = a
    return np.array(((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0)))


def skew_flat_indices(row: int, col: int, dim: int) -> list[int]:
    """Flat indices in a dim x dim matrix of the six off-diagonal entries of a 3x3 skew block."""
    return [(row + r) * dim + col + c
            for r, c in ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))]


def skew_flat_values(x: float, y: float, z: float) -> list[float]:
    """The entries of [a x] at ``skew_flat_indices`` for a = (x, y, z)."""
    return [-z, y, z, -x, -y, x]


def block_flat_indices(row: int, col: int, dim: int) -> list[int]:
    """Flat indices in a dim x dim matrix of a full 3x3 block, row-major."""
    return [(row + r) * dim + col + c for r in range(3) for c in range(3)]
