"""GNSS outage status with hysteresis: a gap shorter than the outage timeout leaves the
status alone; the automatic timeout is a few nominal GNSS periods measured from the fix
stamps (median of the recent intervals), at least a floor; an explicit timeout overrides.

The stream is a 1 Hz receiver as on a real vehicle: stamps with jitter, fixes applied
0.1-0.4 s after their stamp (through the history), and now and then a skipped epoch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, FilterStatus, TridentEKF
from trident_ekf.core.filter import ASSUMED_GNSS_PERIOD
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

FILTERS = [TridentEKF, BaselineESKF]
IMU_RATE = 100.0
DURATION = 40.0
DATA = simulate(Trajectory(), SensorModel(), DURATION, imu_rate=IMU_RATE, gnss_rate=1.0,
                rng=np.random.default_rng(5))
R_P, R_V = np.full(3, 1.5**2), np.full(3, 0.1**2)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)
SKIPPED = (12.0,)  # s: epochs the receiver skips
GAP = (25.0, 30.0)  # s: a real outage (no fix stamped in [25, 30), the 30 s one returns)


def _started(cls, **config):
    filter_ = cls(FilterConfig(history_length=1.0, **config))
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    return filter_


def _fix_schedule(seed: int, gap: tuple[float, float] | None):
    """(arrival time, stamp, epoch index) of every fix: stamps jitter by 10 ms (sigma),
    arrivals 0.1-0.4 s later; the skipped epochs and those inside ``gap`` are missing."""
    rng = np.random.default_rng(seed)
    schedule = []
    for j, t in enumerate(DATA.gnss_time):
        stamp = float(t + np.clip(rng.normal(0.0, 0.01), -0.03, 0.03))
        arrival = stamp + rng.uniform(0.1, 0.4)
        if any(abs(t - s) < 1e-9 for s in SKIPPED) or (gap and gap[0] <= t < gap[1]):
            continue
        schedule.append((arrival, stamp, j))
    return sorted(schedule)


def _run(filter_, schedule, until: float = DURATION):
    """Feed the IMU and the fixes as they arrive; the status after every IMU sample."""
    statuses = []
    pending = list(schedule)
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        if t > until:
            break
        while pending and pending[0][0] <= t:
            _, stamp, j = pending.pop(0)
            filter_.process_gnss(stamp, DATA.gnss_position[j], R_P, DATA.gnss_velocity[j], R_V)
        filter_.process_imu(t, DATA.gyro[k], DATA.accel[k])
        statuses.append((t, filter_.status))
    return statuses


def _outage_times(statuses) -> list[float]:
    return [t for t, status in statuses if status is FilterStatus.OUTAGE]


@pytest.mark.parametrize("cls", FILTERS)
def test_jittery_late_1hz_fixes_with_a_skipped_epoch_never_read_outage(cls):
    filter_ = _started(cls)
    statuses = _run(filter_, _fix_schedule(1, gap=None))
    assert _outage_times(statuses) == []
    assert {status for _, status in statuses} == {FilterStatus.NOMINAL}
    assert filter_.gnss_period == pytest.approx(1.0, abs=0.03)
    assert filter_.outage_threshold == pytest.approx(3.0, abs=0.1)  # 3 periods > the floor
    assert filter_.aid_status["gnss_position"].counts["accepted"] >= 35


@pytest.mark.parametrize("cls", FILTERS)
def test_the_former_fixed_two_second_timeout_flickers_on_the_same_stream(cls):
    """What the automatic timeout fixes: the skipped epoch plus the fix latency exceed a
    fixed 2 s (the former default), a short OUTAGE in the middle of nominal flight."""
    statuses = _run(_started(cls, outage_timeout=2.0), _fix_schedule(1, gap=None))
    outage = _outage_times(statuses)
    assert outage
    assert all(SKIPPED[0] < t < SKIPPED[0] + 2.0 for t in outage)
    assert statuses[-1][1] is FilterStatus.NOMINAL


@pytest.mark.parametrize("cls", FILTERS)
def test_a_five_second_gap_reads_outage_then_nominal_when_fixes_return(cls):
    filter_ = _started(cls)
    statuses = _run(filter_, _fix_schedule(2, gap=GAP))
    outage = _outage_times(statuses)
    assert outage, "a 5 s gap at 1 Hz must read OUTAGE"
    # The last fix before the gap is stamped near 24 s and applied by 24.4 s: OUTAGE from
    # 3 nominal periods after it, until the first fix after the gap (30 s) is applied.
    assert 26.9 < outage[0] < 27.1
    assert 30.0 < outage[-1] < 30.45
    assert np.all(np.diff(outage) < 0.011)  # one stretch, no flicker
    assert all(status is FilterStatus.NOMINAL for t, status in statuses
               if t < outage[0] or t > outage[-1])
    # The 6 s interval across the gap does not move the median period.
    assert filter_.gnss_period == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("cls", FILTERS)
def test_explicit_timeout_overrides_the_measured_period(cls):
    filter_ = _started(cls, outage_timeout=4.5)
    statuses = _run(filter_, _fix_schedule(2, gap=GAP))
    outage = _outage_times(statuses)
    assert filter_.outage_threshold == 4.5
    assert 28.4 < outage[0] < 28.6
    assert filter_.gnss_period == pytest.approx(1.0, abs=0.03)  # measured all the same


def test_fast_receiver_uses_the_floor_and_periods_scale_the_timeout():
    data = simulate(Trajectory(), SensorModel(), 5.0, imu_rate=IMU_RATE, gnss_rate=10.0,
                    rng=np.random.default_rng(7))
    filter_ = TridentEKF(FilterConfig(outage_timeout_floor=0.5, outage_gnss_periods=4.0))
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       data.gyro_bias[0], data.accel_bias[0])
    # Before any interval is measured a 1 Hz receiver is assumed: no OUTAGE at start.
    assert math.isnan(filter_.gnss_period)
    assert filter_.outage_threshold == 4.0 * ASSUMED_GNSS_PERIOD
    j = 0
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        while j < data.gnss_time.size and data.gnss_time[j] <= t:
            filter_.process_gnss(data.gnss_time[j], data.gnss_position[j], R_P)
            j += 1
        filter_.process_imu(t, data.gyro[k], data.accel[k])
    assert filter_.gnss_period == pytest.approx(0.1)
    assert filter_.outage_threshold == 0.5  # 4 x 0.1 s is below the floor
    filter_.set_config(FilterConfig(outage_timeout_floor=0.1, outage_gnss_periods=4.0))
    assert filter_.outage_threshold == pytest.approx(0.4)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("outage_timeout", 0.0, "outage_timeout must be NaN \\(automatic\\) or finite and > 0"),
    ("outage_timeout", math.inf, "outage_timeout must be NaN"),
    ("outage_gnss_periods", 0.5, "outage_gnss_periods must be finite and >= 1"),
    ("outage_timeout_floor", 0.0, "outage_timeout_floor must be finite and > 0"),
])
def test_outage_settings_are_validated(field, value, message):
    with pytest.raises(ValueError, match=message):
        FilterConfig(**{field: value})
