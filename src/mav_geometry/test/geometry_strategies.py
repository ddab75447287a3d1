"""Hypothesis strategies for the algebra tests: unit quaternions, rotation vectors
with angles that include the singular points (0 and pi), and group tangents."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

# Angles the closed forms handle specially: exact zero, the series region, the
# switch to closed forms, and the neighbourhood of pi where the log is delicate.
SPECIAL_ANGLES = [0.0, 1e-300, 1e-12, 1e-8, 1e-5, 1e-3, 0.1, 1.999999, 2.0, 2.000001,
                  np.pi - 1e-4, np.pi - 1e-8, np.pi - 1e-12]


def unit_vectors() -> st.SearchStrategy[np.ndarray]:
    components = st.floats(-1.0, 1.0, allow_nan=False)
    return (
        st.tuples(components, components, components)
        .map(np.array)
        .filter(lambda v: np.linalg.norm(v) > 1e-3)
        .map(lambda v: v / np.linalg.norm(v))
    )


def angles(max_angle: float = np.pi - 1e-12) -> st.SearchStrategy[float]:
    return st.one_of(
        st.floats(0.0, max_angle),
        st.sampled_from([a for a in SPECIAL_ANGLES if a <= max_angle]),
        st.floats(1e-10, 1e-2),
    )


def rotation_vectors(max_angle: float = np.pi - 1e-12) -> st.SearchStrategy[np.ndarray]:
    """Rotation vectors (rad) with angle in [0, max_angle]."""
    return st.builds(lambda axis, angle: axis * angle, unit_vectors(), angles(max_angle))


def vectors(scale: float = 10.0) -> st.SearchStrategy[np.ndarray]:
    component = st.floats(-scale, scale, allow_nan=False)
    return st.tuples(component, component, component).map(np.array)


def quaternions() -> st.SearchStrategy[np.ndarray]:
    """Non-zero, not necessarily unit quaternions."""
    component = st.floats(-3.0, 3.0, allow_nan=False)
    return (
        st.tuples(component, component, component, component)
        .map(np.array)
        .filter(lambda q: np.linalg.norm(q) > 1e-2)
    )


def unit_quaternions() -> st.SearchStrategy[np.ndarray]:
    """Unit quaternions of either sign, angles near 0 and pi included."""
    def build(axis: np.ndarray, angle: float, sign: int) -> np.ndarray:
        return sign * np.append(np.sin(angle / 2) * axis, np.cos(angle / 2))

    return st.builds(build, unit_vectors(), angles(np.pi), st.sampled_from([1, -1]))


def tangents(translations: int, max_angle: float = np.pi - 1e-12) -> st.SearchStrategy[np.ndarray]:
    """Tangent vectors (phi, tau_1, .., tau_K) of SE_K(3)."""
    return st.builds(
        lambda phi, *taus: np.concatenate([phi, *taus]),
        rotation_vectors(max_angle),
        *[vectors() for _ in range(translations)],
    )
