"""The filter's duplicate-measurement bookkeeping: the (stamp, source) keys it holds for the
queued and applied measurements stay exactly those of the queue and the history window
through queueing, applying, rewinds for delayed measurements and eviction."""

from __future__ import annotations

from collections import Counter

import numpy as np

from trident_ekf.core import FilterConfig, TridentEKF
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
