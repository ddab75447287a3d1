"""The filter's delayed-measurement history. Its duplicate-measurement bookkeeping: the
(stamp, source) keys it holds for the queued and applied measurements stay exactly those of
the queue and the history window through queueing, applying, rewinds for delayed
measurements and eviction. Its snapshots: how far apart they are changes no result."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core import filter as filter_module
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

DATA = simulate(Trajectory(), SensorModel(), 4.0, imu_rate=100.0,
                rng=np.random.default_rng(5))
R_P, R_V = np.full(3, 1.5**2), np.full(3, 0.1**2)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)


def _held_matches_queue_and_history(filter_: TridentEKF) -> bool:
    expected = Counter((m.time, m.source) for m in filter_._pending)
    expected.update((m.time, m.source) for m, _, _ in filter_._applied)
    return filter_._held == expected


def _fix(filter_: TridentEKF, j: int) -> bool:
    return filter_.process_gnss(DATA.gnss_time[j], DATA.gnss_position[j], R_P,
                                DATA.gnss_velocity[j], R_V)


def test_duplicates_are_found_in_the_queue_the_history_and_after_a_rewind():
    filter_ = TridentEKF(FilterConfig())
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    counts = filter_.aid_status["gnss_position"].counts
    first_fix = int(np.searchsorted(DATA.gnss_time, 0.0, side="right"))
    j = first_fix
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        # Every other fix arrives 2.5 IMU samples late: applied by a rewind.
        while j < DATA.gnss_time.size and DATA.gnss_time[j] <= t - 0.025 * (j % 2):
            assert _fix(filter_, j)
            if j % 3 == 0:  # re-sent: queued, applied or replayed, it is a duplicate
                assert not _fix(filter_, j)
            j += 1
        filter_.process_imu(t, DATA.gyro[k], DATA.accel[k])
        assert _held_matches_queue_and_history(filter_)
    sent = j - first_fix
    resent = sum(1 for i in range(first_fix, j) if i % 3 == 0)
    assert counts["duplicate"] == resent
    assert counts["delayed"] == sum(1 for i in range(first_fix, j) if i % 2)
    assert counts["accepted"] + counts["gated"] == sent
    # The window is history_length (1 s) long: older applied fixes were evicted, and a
    # fix re-sent from before it is late, not a duplicate.
    assert min(m.time for m, _, _ in filter_._applied) > DATA.gnss_time[first_fix]
    assert not _fix(filter_, first_fix)
    assert (counts["late"], counts["duplicate"]) == (1, resent)
    filter_.reset()
    assert not filter_._held


def _run_with_late_fixes(decimation: int) -> TridentEKF:
    """The first 3 s of the log with every other fix 2.5 IMU samples late and every fifth
    0.3 s late (a rewind over several snapshots and applied fixes)."""
    filter_ = TridentEKF(FilterConfig(covariance_decimation=decimation))
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    arrivals = DATA.gnss_time + np.where(np.arange(DATA.gnss_time.size) % 5 == 0, 0.3,
                                         0.025 * (np.arange(DATA.gnss_time.size) % 2))
    order = np.argsort(arrivals, kind="stable")
    j = 0
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        if t > 3.0:
            break
        while j < order.size and arrivals[order[j]] <= t:
            _fix(filter_, int(order[j]))
            j += 1
        filter_.process_imu(t, DATA.gyro[k], DATA.accel[k])
    return filter_


@pytest.mark.parametrize("decimation", [1, 4])
@pytest.mark.parametrize("spacing", [0.0, 0.3])
def test_the_snapshot_spacing_does_not_change_the_estimate(monkeypatch, decimation, spacing):
    """A rewind restarts from the last snapshot before the delayed stamp and re-runs the same
    arithmetic from there: a snapshot before every sample, or one every 0.3 s, gives the
    estimate of the default spacing bit for bit, with the same counts."""
    default = _run_with_late_fixes(decimation)
    monkeypatch.setattr(filter_module, "SNAPSHOT_SPACING", spacing)
    other = _run_with_late_fixes(decimation)
    assert len(other._snapshots) != len(default._snapshots)  # the spacing did change
    assert default.aid_status["gnss_position"].counts["delayed"] >= 5
    for a, b in zip(default.nominal(), other.nominal(), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(default.covariance, other.covariance)
    assert default.counts() == other.counts()
    for name, status in default.aid_status.items():
        assert other.aid_status[name].nis_sum == pytest.approx(status.nis_sum, rel=1e-12)
