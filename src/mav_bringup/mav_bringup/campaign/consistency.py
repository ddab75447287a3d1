"""Monte Carlo consistency tests of an estimator over many runs (Bar-Shalom, Li and
Kirubarajan, *Estimation with Applications to Tracking and Navigation*, 2001, §5.4).

If a filter's covariance is right, the NEES of a 3-vector is chi-square with 3 degrees of
freedom at every time, independent between runs; the average over N runs is then
chi2(3 N) / N, and a two-sided 95 % acceptance band for it is
[chi2(0.025, 3 N) / N, chi2(0.975, 3 N) / N]. An average above the band means errors larger
than the filter believes (optimistic), below it smaller (pessimistic). NIS sums over the
accepted updates of a source the same way: sum(NIS) is chi2 with the summed dof.

The time averages are accumulated per time bin, one run at a time: memory grows with the
runs' length, not with their number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trident_ekf.core.chi_square import quantile

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

BAND_PROBABILITY = 0.95
"""Probability of the two-sided acceptance band."""
CONSISTENT_FRACTION = 0.9
"""Fraction of the time bins the average NEES must spend inside the band for the verdict
'consistent'. An exact filter scores about BAND_PROBABILITY; errors correlated in time
(every real filter's) spread the score around it, hence the margin."""
MIN_RANGE_S = 1.0
"""Shortest stretch outside the band named in a report: a correct filter leaves the band at
isolated bins (5 % of them), never for a second at a time."""
MAX_RANGES = 5
"""Most out-of-band stretches named per test (the longest)."""

CONSISTENT = "consistent"
OPTIMISTIC = "optimistic"  # errors larger than the covariance says
PESSIMISTIC = "pessimistic"  # errors smaller than the covariance says
NO_DATA = "no data"


def band(count: ArrayLike, dof: int,
         probability: float = BAND_PROBABILITY) -> tuple[FloatArray, FloatArray]:
    """Lower and upper limits of the two-sided ``probability`` band of the mean of ``count``
    independent chi2(``dof``) variables, per element of ``count`` (NaN where it is 0)."""
    counts = np.asarray(count, dtype=np.int64)
    lower = np.full(counts.shape, np.nan)
    upper = np.full(counts.shape, np.nan)
    tail = 0.5 * (1.0 - probability)
    for n in np.unique(counts[counts > 0]):  # a few distinct counts: one quantile each
        where = counts == n
        lower[where] = quantile(tail, int(dof * n)) / n
        upper[where] = quantile(1.0 - tail, int(dof * n)) / n
    return lower, upper


def verdict_of(inside: float, above: float, below: float) -> str:
    """CONSISTENT when ``inside`` (a fraction) reaches CONSISTENT_FRACTION, otherwise the
    side the average leaves the band to most."""
    if inside >= CONSISTENT_FRACTION:
        return CONSISTENT
    return OPTIMISTIC if above >= below else PESSIMISTIC


def worst_verdict(verdicts: list[str]) -> str:
    """One verdict for several tests: CONSISTENT only if every test with data is."""
    failing = [v for v in verdicts if v not in (CONSISTENT, NO_DATA)]
    if failing:
        return failing[0]
    return CONSISTENT if CONSISTENT in verdicts else NO_DATA


class EnsembleAverage:
    """Sum and count per time bin of ``width`` chi-square columns (the NEES of position,
    velocity, attitude) over runs aligned on simulation time; non-finite values are skipped.
    Runs that start late or end early add to the bins they cover."""

    def __init__(self, width: int, step_s: float) -> None:
        self.width = width
        self.step_s = step_s
        self.count: IntArray = np.zeros((0, width), dtype=np.int64)
        self.total: FloatArray = np.zeros((0, width))

    def add(self, time_s: ArrayLike, values: ArrayLike) -> None:
        """One run: ``values`` ``(n, width)`` at ``time_s`` ``(n,)`` (s, >= 0)."""
        rows = np.asarray(values, dtype=float).reshape(-1, self.width)
        bins = np.rint(np.asarray(time_s, dtype=float) / self.step_s).astype(np.int64)
        if len(bins) != len(rows):
            raise ValueError(f"{len(bins)} times for {len(rows)} rows")
        if not len(bins):
            return
        if bins.min() < 0:
            raise ValueError("a series time is negative")
        self._grow(int(bins.max()) + 1)
        for column in range(self.width):
            finite = np.isfinite(rows[:, column])
            np.add.at(self.count[:, column], bins[finite], 1)
            np.add.at(self.total[:, column], bins[finite], rows[finite, column])

    def merge(self, other: EnsembleAverage) -> None:
        """Add the runs of ``other`` (same width and step)."""
        self._grow(len(other.count))
        self.count[: len(other.count)] += other.count
        self.total[: len(other.total)] += other.total

    def _grow(self, bins: int) -> None:
        if bins > len(self.count):
            extra = bins - len(self.count)
            self.count = np.vstack([self.count, np.zeros((extra, self.width), np.int64)])
            self.total = np.vstack([self.total, np.zeros((extra, self.width))])

    @property
    def time_s(self) -> FloatArray:
        """Time of each bin, s."""
        return np.arange(len(self.count), dtype=np.float64) * self.step_s

    @property
    def mean(self) -> FloatArray:
        """Average over runs per bin and column; NaN where no run has a value."""
        result = np.full(self.total.shape, np.nan)
        np.divide(self.total, self.count, out=result, where=self.count > 0)
        return result


@dataclass(frozen=True)
class OutOfBand:
    """A stretch of time the average spends on one side of its band."""

    start_s: float
    end_s: float  # time of the last bin outside
    side: str  # "above" (optimistic) or "below" (pessimistic)


@dataclass(frozen=True)
class BandCheck:
    """The average of one chi-square column against its band over time."""

    bins: int  # time bins with at least one run
    inside: float  # fractions of those bins
    above: float
    below: float
    mean: float  # over every run and time (dof for a correct filter)
    verdict: str
    ranges: tuple[OutOfBand, ...]  # the longest stretches outside, in time order


def check_column(average: EnsembleAverage, column: int, dof: int) -> BandCheck:
    """Column ``column`` of ``average`` (chi2 with ``dof`` each) against its band at every
    bin (the band of the bin's own run count)."""
    count = average.count[:, column]
    mean = average.mean[:, column]
    lower, upper = band(count, dof)
    seen = count > 0
    bins = int(seen.sum())
    if not bins:
        return BandCheck(0, float("nan"), float("nan"), float("nan"), float("nan"), NO_DATA, ())
    side = np.where(seen & (mean > upper), 1, np.where(seen & (mean < lower), -1, 0))
    above = float(np.sum(side > 0)) / bins
    below = float(np.sum(side < 0)) / bins
    inside = 1.0 - above - below
    overall = float(average.total[:, column].sum() / count.sum())
    return BandCheck(bins, inside, above, below, overall, verdict_of(inside, above, below),
                     _stretches(side, average.step_s))


def _stretches(side: IntArray, step_s: float) -> tuple[OutOfBand, ...]:
    """Runs of equal non-zero ``side`` lasting MIN_RANGE_S or more, the MAX_RANGES longest."""
    edges = np.flatnonzero(np.diff(side)) + 1
    starts = np.concatenate([[0], edges])
    ends = np.concatenate([edges, [len(side)]])
    found = [(int(b - a), int(a), int(b)) for a, b in zip(starts, ends, strict=True)
             if side[a] != 0 and (b - a) * step_s >= MIN_RANGE_S - 1e-9]
    longest = sorted(sorted(found, reverse=True)[:MAX_RANGES], key=lambda item: item[1])
    return tuple(OutOfBand(a * step_s, (b - 1) * step_s, "above" if side[a] > 0 else "below")
                 for _, a, b in longest)


@dataclass
class SourceTally:
    """Updates of one measurement source (in one run, or pooled over runs)."""

    accepted: int = 0
    rejected: int = 0
    nis_sum: float = 0.0  # over accepted updates
    dof_sum: int = 0  # over accepted updates

    def add(self, other: SourceTally) -> None:
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.nis_sum += other.nis_sum
        self.dof_sum += other.dof_sum

    @property
    def nis_per_dof(self) -> float:
        """Time-averaged NIS divided by its dof: 1 for a correct filter."""
        return self.nis_sum / self.dof_sum if self.dof_sum else float("nan")


def tally_updates(source: ArrayLike, nis: ArrayLike, dof: ArrayLike,
                  accepted: ArrayLike) -> dict[str, SourceTally]:
    """One run's updates per source; an accepted update with a non-finite NIS is left out."""
    names = np.asarray(source, dtype=object)
    values = np.asarray(nis, dtype=float)
    dofs = np.asarray(dof, dtype=np.int64)
    taken = np.asarray(accepted, dtype=bool)
    tallies = {}
    for name in sorted(set(names.tolist())):
        mine = names == name
        used = mine & taken & np.isfinite(values)
        tallies[str(name)] = SourceTally(int(used.sum()), int((mine & ~taken).sum()),
                                         float(values[used].sum()), int(dofs[used].sum()))
    return tallies


@dataclass(frozen=True)
class NisCheck:
    """A source's NIS over runs: the pooled time average against the band of its total dof,
    and how many runs' own time averages lie inside their own bands."""

    runs: int
    accepted: int
    rejected: int
    nis_per_dof: float
    lower: float
    upper: float
    verdict: str
    runs_inside: float  # fraction of the runs with accepted updates

    @property
    def spread_ratio(self) -> float:
        """sqrt(NIS / dof): the innovations' spread over the one the filter predicts (1 when
        right; 0.5: the filter expects innovations twice as large as it sees, so its noise
        for the source, or its state covariance, is too large)."""
        return float(np.sqrt(self.nis_per_dof))


def check_nis(per_run: list[SourceTally]) -> NisCheck:
    """The NIS test of one source from each run's tally."""
    pooled = SourceTally()
    for tally in per_run:
        pooled.add(tally)
    used = [t for t in per_run if t.dof_sum]
    if not pooled.dof_sum:
        return NisCheck(len(per_run), pooled.accepted, pooled.rejected, float("nan"),
                        float("nan"), float("nan"), NO_DATA, float("nan"))
    lower, upper = band([pooled.dof_sum], 1)
    value = pooled.nis_per_dof
    verdict = (CONSISTENT if lower[0] <= value <= upper[0]
               else OPTIMISTIC if value > upper[0] else PESSIMISTIC)
    run_lower, run_upper = band([t.dof_sum for t in used], 1)
    run_values = np.array([t.nis_per_dof for t in used])
    inside = float(np.mean((run_values >= run_lower) & (run_values <= run_upper)))
    return NisCheck(len(per_run), pooled.accepted, pooled.rejected, value, float(lower[0]),
                    float(upper[0]), verdict, inside)
