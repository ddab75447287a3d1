"""Checks for sensor configuration fields: one ValueError naming field, value and allowed range."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _fail(owner: str, field: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"{owner}.{field} = {value!r} is invalid: allowed {allowed}")


def require_positive(owner: str, field: str, value: float) -> None:
    """``value`` must be a finite number > 0."""
    if not (math.isfinite(value) and value > 0.0):
        raise _fail(owner, field, value, "finite and > 0")


def require_non_negative(owner: str, field: str, value: float) -> None:
    """``value`` must be a finite number >= 0."""
    if not (math.isfinite(value) and value >= 0.0):
        raise _fail(owner, field, value, "finite and >= 0")


def require_in_range(owner: str, field: str, value: float, low: float, high: float) -> None:
    """``value`` must be finite and within ``[low, high]``."""
    if not (math.isfinite(value) and low <= value <= high):
        raise _fail(owner, field, value, f"[{low}, {high}]")


def require_finite_vector(owner: str, field: str, value: Sequence[float], size: int) -> None:
    """``value`` must hold exactly ``size`` finite numbers."""
    if len(value) != size or not all(math.isfinite(float(c)) for c in value):
        raise _fail(owner, field, value, f"{size} finite numbers")


def require_unit_quaternion(owner: str, field: str, value: Sequence[float]) -> None:
    """``value`` must be 4 finite numbers ``[x, y, z, w]`` of norm 1 (to 1e-6)."""
    require_finite_vector(owner, field, value, 4)
    if abs(math.sqrt(sum(float(c) ** 2 for c in value)) - 1.0) > 1e-6:
        raise _fail(owner, field, value, "a unit quaternion [x, y, z, w] (norm 1 +- 1e-6)")
