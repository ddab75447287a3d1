"""A uniform random sample of a stream of rows, of bounded size: the histograms of a
campaign's errors pooled over any number of runs, whose range is not known until the end.

Each row gets a uniform random key and the sample keeps the ``capacity`` rows with the
smallest keys (a bottom-k sample, equivalent to reservoir sampling): every set of
``capacity`` rows of the stream is equally likely. Exact moments come from
``mav_ros_common.streams.RunningStats``; this only shapes the histograms.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


class UniformSample:
    """At most ``capacity`` rows of ``width`` columns drawn uniformly from all rows added;
    reproducible for a given ``seed`` and order of rows."""

    def __init__(self, width: int, capacity: int, seed: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"a sample holds at least 1 row, got {capacity}")
        self.width = width
        self.capacity = capacity
        self.seen = 0  # rows added
        self._rng = np.random.default_rng(seed)
        self._rows: list[FloatArray] = []
        self._keys: list[FloatArray] = []
        self._held = 0  # rows in the lists: kept below 2 * capacity

    def add(self, values: ArrayLike) -> None:
        """Rows ``(n, width)``."""
        rows = np.asarray(values, dtype=float).reshape(-1, self.width)
        self.seen += len(rows)
        self._rows.append(rows)
        self._keys.append(self._rng.random(len(rows)))
        self._held += len(rows)
        if self._held >= 2 * self.capacity:
            self._reduce()

    def _reduce(self) -> None:
        rows = np.concatenate(self._rows) if self._rows else np.zeros((0, self.width))
        keys = np.concatenate(self._keys) if self._keys else np.zeros(0)
        if len(keys) > self.capacity:
            keep = np.argpartition(keys, self.capacity)[: self.capacity]
            rows, keys = rows[keep], keys[keep]
        self._rows, self._keys, self._held = [rows], [keys], len(keys)

    @property
    def rows(self) -> FloatArray:
        """The sample, ``(min(seen, capacity), width)``."""
        self._reduce()
        return self._rows[0]
