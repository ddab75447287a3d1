"""Array typing and input checks shared by every module of the package."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray: TypeAlias = NDArray[np.float64]
FloatVector: TypeAlias = Sequence[float] | FloatArray
"""A vector as Python floats or a float array: for code that reads it element by element."""


def as_float_array(value: ArrayLike, trailing: tuple[int, ...], name: str) -> FloatArray:
    """Return ``value`` as a float64 array whose last axes have shape ``trailing``.

    Leading axes are free (batches). Raises ValueError naming ``name`` otherwise.
    """
    array = np.asarray(value, dtype=np.float64)
    ndim = len(trailing)
    if array.ndim < ndim or array.shape[array.ndim - ndim :] != trailing:
        raise ValueError(
            f"{name} must have trailing shape {trailing}, got array of shape {array.shape}"
        )
    return array


def dot_last(a: FloatArray, b: FloatArray) -> FloatArray:
    """Dot product over the last axis, broadcasting the leading ones."""
    result: FloatArray = np.einsum("...i,...i->...", a, b)
    return result
