"""Bounded stream summaries: the decimator's kept rows stay under its bound however many rows
it is fed, keep every row of a short stream and the extremes of a long one; the running
statistics equal numpy's over the same data, fed in any chunks."""

from __future__ import annotations

import numpy as np
import pytest

from mav_ros_common.streams import MinMaxDecimator, RunningStats

BUCKETS = 64
WIDTH = 3  # time, two values


def _rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([np.arange(n, dtype=float), rng.normal(size=n), rng.normal(size=n)])


def test_a_stream_shorter_than_the_buckets_is_kept_whole():
    decimator = MinMaxDecimator(WIDTH, BUCKETS)
    rows = _rows(BUCKETS - 1)
    for chunk in np.array_split(rows, 5):
        decimator.add(chunk)
    assert decimator.span == 1
    assert np.array_equal(decimator.rows(), rows)


@pytest.mark.parametrize("chunk", [1, 13, 1000])
def test_the_kept_rows_stay_bounded_when_fed_ten_times_more(chunk):
    """At no point does the decimator hold more than its bound, for a stream or one ten
    times as long, fed a row or many at a time."""
    bound = BUCKETS * 2 * WIDTH
    for n in (1_000, 10_000):
        rows = _rows(n)
        decimator = MinMaxDecimator(WIDTH, BUCKETS)
        most = 0
        for start in range(0, n, chunk):
            decimator.add(rows[start:start + chunk])
            most = max(most, decimator.retained)
        assert most <= bound
        assert decimator.seen == n
        assert BUCKETS / 2 <= n / decimator.span < BUCKETS  # the span grew with the stream


def test_spikes_the_ends_and_the_order_survive_decimation():
    rows = _rows(50_000)
    rows[12_345, 1] = 40.0  # a one-sample spike up in one column
    rows[33_333, 2] = -55.0  # and down in the other
    rows[20_000, 1] = np.nan  # NaN is never an extreme
    decimator = MinMaxDecimator(WIDTH, BUCKETS)
    for chunk in np.array_split(rows, 37):
        decimator.add(chunk)
    time, first, second = decimator.columns()
    assert len(time) < len(rows) / 20
    assert np.all(np.diff(time) > 0)
    assert (time[0], time[-1]) == (0.0, len(rows) - 1.0)
    assert 12_345.0 in time
    assert np.nanmax(first) == 40.0
    assert 33_333.0 in time
    assert np.nanmin(second) == -55.0
    assert 20_000.0 not in time


def test_running_statistics_equal_the_batch_ones_in_any_chunks():
    rng = np.random.default_rng(3)
    data = rng.normal(40.0, 0.5, size=(1_000, 2))  # a large mean: the variance must not cancel
    data[7, 1] = np.nan
    data[8, 1] = np.inf
    finite = [data[:, 0], data[np.isfinite(data[:, 1]), 1]]
    for chunks in (1, 9, 1_000):
        stats = RunningStats(2)
        for part in np.array_split(data, chunks):
            stats.add(part)
        assert stats.rows == 1_000
        assert stats.count.tolist() == [1_000, 998]
        assert stats.nonfinite.tolist() == [0, 2]
        for k, column in enumerate(finite):
            assert stats.mean[k] == pytest.approx(np.mean(column), rel=1e-13)
            assert stats.std[k] == pytest.approx(np.std(column), rel=1e-10)
            assert stats.rms[k] == pytest.approx(np.sqrt(np.mean(column**2)), rel=1e-13)
            assert stats.minimum[k] == np.min(column)
            assert stats.maximum[k] == np.max(column)
            assert stats.max_abs[k] == np.max(np.abs(column))


def test_statistics_of_nothing_are_nan_and_a_decimator_needs_two_buckets():
    stats = RunningStats(1)
    stats.add(np.zeros(0))
    assert stats.rows == 0
    assert np.isnan(stats.mean[0])
    assert np.isnan(stats.max_abs[0])
    with pytest.raises(ValueError, match="at least 2 buckets"):
        MinMaxDecimator(2, 1)
