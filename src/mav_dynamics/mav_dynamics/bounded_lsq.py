"""Bounded-variable least squares: ``min ||A x - b||`` subject to ``lower <= x <= upper``.

The active-set method of Stark and Parker (1995), the one ``scipy.optimize.lsq_linear``
runs with ``method="bvls"``: every variable starts at a bound; the one whose gradient most
wants to leave its bound is freed; the free variables get the unconstrained solution with
the others held, stepping back along the segment to the first bound crossed (that variable
is fixed there) until the free solution is feasible. It ends when no fixed variable wants to
leave its bound (the KKT conditions).

The allocator's problems have 4-12 unknowns and full column rank (a regularisation row per
unknown), where this ends in a few steps. It is here so that a controller does not import
``scipy.optimize`` (0.6-0.8 s) at start-up; tests compare it with scipy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

KKT_TOLERANCE = 1e-15
"""Gradient, relative to ``|A^T b|`` (at least 1), below which a fixed variable stays fixed:
a few machine epsilons, the gradient's round-off. The allocator's priority stage has
condition numbers near 1e8, where a looser tolerance stops visibly short of the minimum."""


def bounded_lsq(matrix: FloatArray, target: FloatArray, lower: FloatArray,
                upper: FloatArray) -> FloatArray:
    """The ``x`` in ``[lower, upper]`` minimising ``||matrix x - target||`` (finite bounds,
    ``lower <= upper``). Always within the bounds; with full column rank the minimiser."""
    if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower <= upper).all()):
        raise ValueError("bounded_lsq needs finite bounds with lower <= upper")
    columns = matrix.shape[1]
    x = lower.copy()
    free = np.zeros(columns, dtype=bool)
    at_upper = np.zeros(columns, dtype=bool)
    tolerance = KKT_TOLERANCE * max(1.0, float(np.abs(matrix.T @ target).max()))
    stuck = -1  # a variable freed without moving (round-off): not freed again right away
    for _ in range(4 * columns + 8):  # each pass frees one variable; far more than needed
        gradient = matrix.T @ (target - matrix @ x)  # minus half the objective's gradient
        wants_out = np.where(at_upper, -gradient, gradient)
        wants_out[free] = -np.inf
        wants_out[lower == upper] = -np.inf  # a fixed value has nowhere to go
        if stuck >= 0:
            wants_out[stuck] = -np.inf
        leaving = int(np.argmax(wants_out))
        if wants_out[leaving] <= tolerance:
            break
        free[leaving] = True
        at_upper[leaving] = False
        before = x
        x = _solve_free(matrix, target, lower, upper, x, free, at_upper)
        stuck = leaving if not free[leaving] and np.array_equal(x, before) else -1
    return np.clip(x, lower, upper)


def _solve_free(matrix: FloatArray, target: FloatArray, lower: FloatArray, upper: FloatArray,
                x: FloatArray, free: NDArray[np.bool_], at_upper: NDArray[np.bool_]
                ) -> FloatArray:
    """Free variables at their least-squares values with the others held, stepping back to
    the first bound crossed and fixing that variable there until none is crossed. Updates
    ``free`` and ``at_upper`` in place."""
    x = x.copy()
    while free.any():
        held = ~free
        residual = target - matrix[:, held] @ x[held]
        solution = np.linalg.lstsq(matrix[:, free], residual, rcond=None)[0]
        current = x[free]
        crossed = (solution < lower[free]) | (solution > upper[free])
        if not crossed.any():
            x[free] = solution
            return x
        index = np.flatnonzero(free)
        step = solution - current
        bound = np.where(step < 0.0, lower[free], upper[free])
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(crossed, (bound - current) / step, np.inf)
        alpha = float(np.clip(fraction.min(), 0.0, 1.0))
        x[free] = current + alpha * step
        # Fix every variable the step took to a bound, at that bound.
        hit = crossed & (fraction <= alpha)
        for j, i in enumerate(index):
            if hit[j]:
                free[i] = False
                at_upper[i] = step[j] > 0.0
                x[i] = upper[i] if at_upper[i] else lower[i]
    return x
