"""Bounded summaries of long sample streams, for the reports of runs and replays.

A report must not hold a run's samples: its memory would grow with the run's length. Its
figures of merit come from ``RunningStats`` (count, mean, variance, mean square, extremes,
per column, updated a chunk at a time; chunks merge as in Chan et al.'s parallel variance),
and its plots from ``MinMaxDecimator``, which keeps, of each of a bounded number of
consecutive buckets of rows, the rows where some column is smallest or largest: a spike
stays visible however long the run. The full-rate data stays in the bag.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

PLOT_BUCKETS = 512
"""Buckets a ``MinMaxDecimator`` keeps at most (between half and all of them), each with its
extreme rows: about the pixel columns of a report's time plot."""


class RunningStats:
    """Statistics of a stream of rows of ``width`` columns, each column on its own finite
    values; a non-finite value is counted in ``nonfinite`` and left out. Memory: O(width)."""

    def __init__(self, width: int = 1) -> None:
        self.width = width
        self.rows = 0  # rows added
        self.count = np.zeros(width, dtype=np.int64)  # finite values per column
        self.nonfinite = np.zeros(width, dtype=np.int64)
        self._mean = np.zeros(width)
        self._m2 = np.zeros(width)  # sum of squared deviations from the mean
        self._squares = np.zeros(width)  # sum of squares
        self._min = np.full(width, np.inf)
        self._max = np.full(width, -np.inf)

    def add(self, values: ArrayLike) -> None:
        """Rows ``(n, width)`` (or ``n`` values when ``width`` is 1)."""
        rows = np.asarray(values, dtype=float).reshape(-1, self.width)
        if not len(rows):
            return
        self.rows += len(rows)
        finite = np.isfinite(rows)
        clean = np.where(finite, rows, 0.0)
        count = finite.sum(axis=0)
        self.nonfinite += len(rows) - count
        seen = count > 0
        chunk_mean = np.divide(clean.sum(axis=0), count, out=np.zeros(self.width), where=seen)
        chunk_m2 = np.sum(np.where(finite, rows - chunk_mean, 0.0) ** 2, axis=0)
        total = self.count + count
        delta = chunk_mean - self._mean
        weight = np.divide(count, total, out=np.zeros(self.width), where=total > 0)
        self._mean = self._mean + delta * weight
        self._m2 = self._m2 + chunk_m2 + delta**2 * self.count * weight
        self._squares += np.sum(clean**2, axis=0)
        self._min = np.minimum(self._min, np.where(finite, rows, np.inf).min(axis=0))
        self._max = np.maximum(self._max, np.where(finite, rows, -np.inf).max(axis=0))
        self.count = total

    def _per_column(self, values: FloatArray) -> FloatArray:
        result: FloatArray = np.where(self.count > 0, values, np.nan)
        return result

    @property
    def mean(self) -> FloatArray:
        """Mean per column; NaN for a column without finite values."""
        return self._per_column(self._mean)

    @property
    def std(self) -> FloatArray:
        """Population standard deviation per column (``numpy.std``'s)."""
        return self._per_column(np.sqrt(self._m2 / np.maximum(self.count, 1)))

    @property
    def rms(self) -> FloatArray:
        """Root mean square per column."""
        return self._per_column(np.sqrt(self._squares / np.maximum(self.count, 1)))

    @property
    def minimum(self) -> FloatArray:
        return self._per_column(self._min)

    @property
    def maximum(self) -> FloatArray:
        return self._per_column(self._max)

    @property
    def max_abs(self) -> FloatArray:
        """Largest absolute value per column."""
        return self._per_column(np.maximum(np.abs(self._min), np.abs(self._max)))


def _group_extremes(groups: FloatArray, real: BoolArray) -> tuple[FloatArray, IntArray]:
    """Of each group of rows ``(g, r, width)``, the rows where some column is smallest or
    largest (NaN never is; rows where ``real`` ``(g, r)`` is False are padding, and the first
    row of each group is real), in order, and how many rows each group keeps."""
    ignored = np.isnan(groups) | ~real[..., None]
    lowest = np.argmin(np.where(ignored, np.inf, groups), axis=1)
    highest = np.argmax(np.where(ignored, -np.inf, groups), axis=1)
    keep = np.zeros(real.shape, dtype=bool)
    group = np.arange(len(groups))[:, None]
    keep[group, lowest] = True
    keep[group, highest] = True
    return groups[keep], keep.sum(axis=1)


def _extreme_rows(rows: FloatArray) -> FloatArray:
    """``_group_extremes`` of one group."""
    if len(rows) <= 2:
        return rows
    return _group_extremes(rows[None], np.ones((1, len(rows)), dtype=bool))[0]


class MinMaxDecimator:
    """Rows of ``width`` columns (time first, for a time plot), kept as fewer than
    ``buckets`` consecutive buckets of ``span`` rows each, reduced to their extreme rows.

    ``span`` starts at 1 (every row kept) and doubles, merging neighbouring buckets, when
    the next rows would make ``buckets`` full ones: so a stream of any length keeps at most
    ``buckets * 2 * width`` rows, and a stream of fewer than ``buckets`` rows keeps them all.
    """

    def __init__(self, width: int, buckets: int = PLOT_BUCKETS) -> None:
        if buckets < 2:
            raise ValueError(f"a decimator needs at least 2 buckets, got {buckets}")
        self.width = width
        self.buckets = buckets
        self.span = 1
        self.seen = 0  # rows added
        self._kept = np.zeros((0, width))  # extreme rows of the full buckets, in order
        self._sizes = np.zeros(0, dtype=np.int64)  # rows kept of each full bucket
        self._open = np.zeros((0, width))  # extreme rows of the bucket being filled
        self._open_count = 0  # rows added to the bucket being filled

    def add(self, values: ArrayLike) -> None:
        """Rows ``(n, width)`` in stream order."""
        rows = np.asarray(values, dtype=float).reshape(-1, self.width)
        self.seen += len(rows)
        while len(self._sizes) + (self._open_count + len(rows)) // self.span >= self.buckets:
            self._coarsen()
        fill = min(self.span - self._open_count, len(rows))
        self._open = _extreme_rows(np.concatenate([self._open, rows[:fill]]))
        self._open_count += fill
        rows = rows[fill:]
        if self._open_count < self.span:
            return
        self._append(self._open, np.array([len(self._open)]))
        whole = len(rows) // self.span * self.span
        blocks = rows[:whole].reshape(-1, self.span, self.width)
        self._append(*_group_extremes(blocks, np.ones(blocks.shape[:2], dtype=bool)))
        self._open = _extreme_rows(rows[whole:])
        self._open_count = len(rows) - whole

    def _append(self, rows: FloatArray, sizes: IntArray) -> None:
        """Full buckets (their kept rows, and how many of them each has) after the others."""
        self._kept = np.concatenate([self._kept, rows])
        self._sizes = np.concatenate([self._sizes, sizes])

    def _coarsen(self) -> None:
        """Double the span: merge neighbouring full buckets (an odd last one joins the
        bucket being filled, which then holds fewer than the new span)."""
        if len(self._sizes) % 2:
            last = int(self._sizes[-1])
            self._open = _extreme_rows(np.concatenate([self._kept[-last:], self._open]))
            self._open_count += self.span
            self._kept, self._sizes = self._kept[:-last], self._sizes[:-1]
        self.span *= 2
        if not len(self._sizes):
            return
        depth = int(self._sizes.max())
        real = np.arange(depth) < self._sizes[:, None]
        padded = np.full((len(self._sizes), depth, self.width), np.nan)
        padded[real] = self._kept
        pairs = len(self._sizes) // 2
        self._kept, self._sizes = _group_extremes(
            padded.reshape(pairs, 2 * depth, self.width), real.reshape(pairs, 2 * depth))

    @property
    def retained(self) -> int:
        """Rows held now."""
        return len(self._kept) + len(self._open)

    def rows(self) -> FloatArray:
        """The kept rows in stream order, ``(m, width)``."""
        rows: FloatArray = np.concatenate([self._kept, self._open])
        return rows

    def columns(self) -> tuple[FloatArray, ...]:
        """``rows()`` by column (time first)."""
        return tuple(self.rows().T)
