"""What a truncated or corrupt flight log lost, said in words for the import report.

The log readers (pyulog, pymavlink) read what they can of a damaged file and say little
about the rest: a ULog cut short reads as a shorter flight, and a corrupt block in the
middle as a flight with a hole in it. This module finds both: a ULog whose last record is
cut (``ulog_cut_at``), and the holes a corrupt block left in each sensor series
(``series_gaps``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ULOG_HEADER_BYTES = 16  # magic (7), version (1), start timestamp (8)
_ULOG_RECORD = struct.Struct("<HB")  # payload size, message type
GAP_FACTOR = 20.0  # an interval this many times the series' median one is a hole
MIN_GAP_S = 0.2  # s: shorter holes are left to the estimator's own gap handling


def ulog_cut_at(path: Path) -> int | None:
    """The byte offset where the last, incomplete record of a ULog starts, or None if the
    file ends exactly after a record (as the PX4 logger leaves it). Only meaningful for a
    file whose records pyulog found intact: corruption in the middle breaks the walk."""
    with path.open("rb") as stream:
        data = stream.read()
    offset = ULOG_HEADER_BYTES
    while offset + _ULOG_RECORD.size <= len(data):
        size, _ = _ULOG_RECORD.unpack_from(data, offset)
        if offset + _ULOG_RECORD.size + size > len(data):
            return offset
        offset += _ULOG_RECORD.size + size
    return None if offset == len(data) else offset


def series_gaps(name: str, time: NDArray[np.float64]) -> str | None:
    """One line on the holes in a sensor series (stamps in s): where each is and about how
    many samples it lost at the series' median rate; None without a hole."""
    if time.size < 3:
        return None
    interval = np.diff(time)
    median = float(np.median(interval))
    if not median > 0.0:
        return None
    holes = np.flatnonzero(interval > max(GAP_FACTOR * median, MIN_GAP_S))
    if holes.size == 0:
        return None
    lost = int(sum(round(interval[i] / median) - 1 for i in holes))
    spans = ", ".join(f"{time[i]:.1f}-{time[i + 1]:.1f} s" for i in holes[:3])
    more = f" and {holes.size - 3} more" if holes.size > 3 else ""
    return (f"{name}: {time.size} samples kept, about {lost} lost at {1.0 / median:.0f} Hz "
            f"in {holes.size} hole(s) ({spans}{more} of the log clock)")
