"""Noise sources shared by the sensor models: blocked standard normals, Gauss-Markov steps.

Drawing one small vector per call from ``numpy.random.Generator`` costs about a
microsecond of overhead each time; the models instead take fixed-width rows from a
block drawn at once. The stream of rows depends only on the generator's state and
the number of rows taken, so a seed reproduces every run.
"""

from __future__ import annotations

import math

import numpy as np


class StandardNormalStream:
    """Rows of ``width`` independent N(0, 1) floats, drawn from ``rng`` ``block_rows`` at a time."""

    def __init__(self, rng: np.random.Generator, width: int, block_rows: int = 512) -> None:
        self._rng = rng
        self._width = width
        self._block_rows = block_rows
        self._rows: list[list[float]] = []
        self._next = 0

    def next_row(self) -> list[float]:
        """The next row (a fresh list of ``width`` Python floats)."""
        if self._next == len(self._rows):
            self._rows = self._rng.standard_normal((self._block_rows, self._width)).tolist()
            self._next = 0
        row = self._rows[self._next]
        self._next += 1
        return row


def gauss_markov_coefficients(interval_s: float, correlation_time_s: float) -> tuple[float, float]:
    """Exact discretisation of a first-order Gauss-Markov process over ``interval_s``.

    For ``dx/dt = -x / tau + w`` with stationary standard deviation ``sigma``,
    ``x(t + dt) = phi x(t) + sigma * drive * n`` with ``n ~ N(0, 1)``; returns
    ``(phi, drive) = (exp(-dt/tau), sqrt(1 - exp(-2 dt/tau)))``, which keeps the
    stationary variance ``sigma^2`` exactly for any step (dt, tau in s).
    """
    phi = math.exp(-interval_s / correlation_time_s)
    drive = math.sqrt(-math.expm1(-2.0 * interval_s / correlation_time_s))
    return phi, drive
