"""Which rows of a flight log to keep, and why the others are dropped.

The autopilot's own estimate is the reference that replay metrics compare against, so a
single corrupt row in it (a 512 m spike) would show up as an estimator error. The screens
here decide which reference rows to keep and give the reason for each dropped row. Every
row is counted once, under the first of these reasons that applies:

``invalid``
    the autopilot flags the row invalid (PX4 ``xy_valid``, ``z_valid``, ``v_xy_valid``,
    ``v_z_valid``);
``no_origin``
    valid locally but with no global origin (PX4 ``xy_global``/``z_global`` 0, or no
    ``ref_lat``/``ref_lon``/``ref_alt``);
``nonfinite``
    NaN or infinity in the stamp, position, velocity or attitude;
``out_of_order``
    a stamp that is not later than every earlier kept row's;
``jump``
    a place or speed that no vehicle could reach (``JumpLimits``).

A local origin that changes in flight is not an error. Logged changes (PX4 ``ref_lat``/
``ref_lon``/``ref_alt``) are counted: the reader places each row with its own origin.
Unlogged changes, where many consecutive rows agree on a new place, are accepted as a new
segment and also counted. ``px4_local_to_geodetic`` applies PX4's own local projection.

Pure numpy: the readers in ``flightlog`` supply the arrays, and the counts go into the
import report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]

PX4_EARTH_RADIUS = 6371000.0  # m: the sphere of PX4's local projection (geo.h)
REFERENCE_REASONS = ("invalid", "no_origin", "nonfinite", "out_of_order", "jump")


@dataclass(frozen=True)
class JumpLimits:
    """What a vehicle can do between two reference rows."""

    max_speed: float = 100.0  # m/s: faster than any multirotor this suite serves
    margin: float = 5.0  # m: allowance for estimator resets and stamp jitter
    confirm_rows: int = 5  # consecutive rows that must agree on a new place before it is accepted


@dataclass(frozen=True)
class ReferenceScreen:
    """The outcome of ``screen_reference``."""

    keep: BoolArray  # rows to keep
    segment: IntArray  # per row: its continuous segment (-1 if dropped); unlogged origin
    # changes start a new segment
    report: dict[str, int]  # reference_rows_<reason>, _total, _kept, reference_origin_changes...


def finite_rows(*columns: Array) -> BoolArray:
    """Rows where every value of every column (shape (n,) or (n, k)) is finite."""
    n = len(columns[0])
    finite = np.ones(n, dtype=bool)
    if n == 0:  # (0, -1) is no shape numpy can infer
        return finite
    for column in columns:
        finite &= np.all(np.isfinite(np.reshape(column, (n, -1))), axis=1)
    return finite


def increasing_rows(time: Array) -> BoolArray:
    """Rows whose stamp is later than every earlier row's (the first row always is)."""
    if time.size == 0:
        return np.zeros(0, dtype=bool)
    previous_max = np.maximum.accumulate(np.concatenate([[-np.inf], time[:-1]]))
    increasing: BoolArray = time > previous_max
    return increasing


def screen_series(name: str, time: Array, *values: Array) -> tuple[BoolArray, dict[str, int]]:
    """A sensor series: keep the finite rows whose stamps increase. Counts
    ``<name>_rows_nonfinite`` and ``<name>_rows_out_of_order``."""
    finite = finite_rows(time, *values)
    keep = finite.copy()
    keep[finite] = increasing_rows(time[finite])
    return keep, {f"{name}_rows_nonfinite": int(np.count_nonzero(~finite)),
                  f"{name}_rows_out_of_order": int(np.count_nonzero(finite & ~keep))}


def origin_changes(origin: Array) -> BoolArray:
    """Rows whose origin (lat, lon, alt) differs from the previous row's (never the first)."""
    changed = np.zeros(len(origin), dtype=bool)
    changed[1:] = np.any(origin[1:] != origin[:-1], axis=1)
    return changed


def px4_local_to_geodetic(north_east: Array, origin_lat_lon: Array) -> Array:
    """(lat, lon) degrees of PX4 local positions (n, 2) m, each row with its own origin
    (n, 2) degrees: the inverse azimuthal equidistant projection on PX4's sphere, the one
    PX4 uses between ``vehicle_local_position`` and ``vehicle_global_position``."""
    north, east = (north_east / PX4_EARTH_RADIUS).T  # rad of arc
    lat0, lon0 = np.radians(origin_lat_lon).T
    arc = np.hypot(north, east)
    cos_arc = np.cos(arc)
    sin_arc_over_arc = np.sinc(arc / np.pi)  # sin(c)/c, 1 at the origin
    latitude = np.arcsin(np.clip(cos_arc * np.sin(lat0)
                                 + north * sin_arc_over_arc * np.cos(lat0), -1.0, 1.0))
    longitude = lon0 + np.arctan2(east * sin_arc_over_arc,
                                  np.cos(lat0) * cos_arc - north * np.sin(lat0) * sin_arc_over_arc)
    degrees: Array = np.degrees(np.stack([latitude, longitude], axis=-1))
    return degrees


def _within_reach(dt: Array, displacement: Array, limits: JumpLimits) -> BoolArray:
    reach: BoolArray = (np.linalg.norm(displacement, axis=-1)
                        <= limits.max_speed * dt + limits.margin)
    return reach


def drop_jumps(time: Array, position: Array, velocity: Array,
               limits: JumpLimits = JumpLimits()) -> tuple[IntArray, int]:
    """Segment of each row (-1 for a dropped row) and the number of unlogged relocations.

    A row is dropped if its speed exceeds ``max_speed``, or if its position is further from
    the last kept row's than ``max_speed * dt + margin``. Comparing against the last kept row
    means a single corrupt row is dropped but the good rows after it are kept. When
    ``confirm_rows`` consecutive rows agree on a new place, the estimate has moved (an origin
    change that was not logged). Those rows start a new segment, unless the old segment is
    shorter than that, in which case the old segment was the outlier (for example, a corrupt
    first row) and is dropped instead. ``time`` must be increasing.
    """
    segment = np.full(time.size, -1, dtype=np.int64)
    # Sequential by nature: the common case (each row within reach of the one before) is
    # computed once, vectorised, and the loop only does real work around a jump.
    step_ok = np.zeros(time.size, dtype=bool)
    step_ok[1:] = _within_reach(np.diff(time), np.diff(position, axis=0), limits)

    def reach(a: int, b: int) -> bool:
        return bool(_within_reach(time[b] - time[a], position[b] - position[a], limits))

    current, last, relocations = 0, -1, 0
    pending: list[int] = []
    for i in np.flatnonzero(np.linalg.norm(velocity, axis=1) <= limits.max_speed).tolist():
        if last < 0 or (last == i - 1 and step_ok[i]) or reach(last, i):
            segment[i], last, pending = current, i, []
            continue
        pending = [*pending, i] if pending and reach(pending[-1], i) else [i]
        if len(pending) < limits.confirm_rows:
            continue
        old = segment == current
        if np.count_nonzero(old) < limits.confirm_rows:
            segment[old] = -1  # the old place was the outlier
        else:
            current, relocations = current + 1, relocations + 1
        segment[pending], last, pending = current, pending[-1], []
    return segment, relocations


class _Screen:
    """Successive row filters; each dropped row is counted once, under the first reason."""

    def __init__(self, n: int) -> None:
        self.keep = np.ones(n, dtype=bool)
        self.counts = dict.fromkeys(REFERENCE_REASONS, 0)

    def drop(self, reason: str, mask: BoolArray) -> None:
        dropped = self.keep & mask
        self.counts[reason] += int(np.count_nonzero(dropped))
        self.keep &= ~dropped

    def drop_rows(self, reason: str, rows: IntArray) -> None:
        mask = np.zeros(self.keep.size, dtype=bool)
        mask[rows] = True
        self.drop(reason, mask)

    def rows(self) -> IntArray:
        rows: IntArray = np.flatnonzero(self.keep)
        return rows


def screen_reference(time: Array, position: Array, velocity: Array, attitude: Array, *,
                     invalid: BoolArray | None = None, no_origin: BoolArray | None = None,
                     origin: Array | None = None,
                     limits: JumpLimits = JumpLimits()) -> ReferenceScreen:
    """Screen reference rows: stamps (n,), positions and velocities (n, 3) in one common frame
    (m, m/s), attitudes (n, 4). ``invalid`` and ``no_origin`` are the autopilot's flags (none
    if not given); ``origin`` (n, 3), if given, is each row's logged local origin. Logged
    origin changes are counted among the rows that pass the stamp checks.

    The report has ``reference_rows_total``, ``reference_rows_kept``, one
    ``reference_rows_<reason>`` per reason (zero included), ``reference_origin_changes``
    (logged plus unlogged) and ``reference_origin_changes_unlogged``.
    """
    screen = _Screen(time.size)
    for reason, mask in (("invalid", invalid), ("no_origin", no_origin)):
        if mask is not None:
            screen.drop(reason, mask)
    screen.drop("nonfinite", ~finite_rows(time, position, velocity, attitude))
    rows = screen.rows()
    screen.drop_rows("out_of_order", rows[~increasing_rows(time[rows])])
    rows = screen.rows()
    logged = 0 if origin is None else int(np.count_nonzero(origin_changes(origin[rows])))
    segment_of_rows, relocations = drop_jumps(time[rows], position[rows], velocity[rows], limits)
    screen.drop_rows("jump", rows[segment_of_rows < 0])
    segment = np.full(time.size, -1, dtype=np.int64)
    segment[rows] = segment_of_rows
    report = {"reference_rows_total": int(time.size),
              "reference_rows_kept": int(np.count_nonzero(screen.keep)),
              **{f"reference_rows_{reason}": count for reason, count in screen.counts.items()},
              "reference_origin_changes": logged + relocations,
              "reference_origin_changes_unlogged": relocations}
    return ReferenceScreen(keep=screen.keep, segment=segment, report=report)
