"""A delayed GNSS epoch (velocity and position with one stamp, older than the filter time)
is applied by one rewind of the history, with the result of two."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

DATA = simulate(Trajectory(), SensorModel(), 3.0, imu_rate=100.0,
                rng=np.random.default_rng(3))
R_P, R_V = np.full(3, 1.5**2), np.full(3, 0.1**2)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)
LATE = 7  # the epoch at 1.6 s arrives 0.3 s late, after the one at 1.8 s is applied


def _fed_until_the_late_epoch(cls):
    """A filter fed until the late epoch arrives (without it), its updates drained."""
    filter_ = cls(FilterConfig())
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    j = 0
    for k in range(1, DATA.imu_time.size):
        t = DATA.imu_time[k]
        while DATA.gnss_time[j] <= t:
            if j != LATE:
                filter_.process_gnss(DATA.gnss_time[j], DATA.gnss_position[j], R_P,
                                     DATA.gnss_velocity[j], R_V)
            j += 1
        filter_.process_imu(t, DATA.gyro[k], DATA.accel[k])
        if t >= DATA.gnss_time[LATE] + 0.3:
            break
    filter_.drain_updates()
    return filter_


@pytest.mark.parametrize("cls", [TridentEKF, BaselineESKF])
def test_a_delayed_epoch_costs_one_rewind_with_the_result_of_two(cls):
    together, apart = _fed_until_the_late_epoch(cls), _fed_until_the_late_epoch(cls)
    t = DATA.gnss_time[LATE]
    assert together.process_gnss(t, DATA.gnss_position[LATE], R_P,
                                 DATA.gnss_velocity[LATE], R_V)
    # Submitted one by one, the velocity and the position rewind the history each.
    assert apart.process(Measurement("gnss_velocity", t, DATA.gnss_velocity[LATE], np.diag(R_V)))
    assert apart.process(Measurement("gnss_position", t, DATA.gnss_position[LATE], np.diag(R_P)))
    next_epoch = DATA.gnss_time[LATE + 1]
    # Each rewind re-applies (and reports again) the epoch applied since: once, not twice.
    assert [(u.source, u.time) for u in together.drain_updates()] == [
        ("gnss_velocity", t), ("gnss_position", t),
        ("gnss_velocity", next_epoch), ("gnss_position", next_epoch)]
    assert [(u.source, u.time) for u in apart.drain_updates()] == [
        ("gnss_velocity", t), ("gnss_velocity", next_epoch), ("gnss_position", next_epoch),
        ("gnss_velocity", t), ("gnss_position", t),
        ("gnss_velocity", next_epoch), ("gnss_position", next_epoch)]
    # Every replay restarts from the same snapshot: the same state, bit for bit.
    for a, b in zip(together.nominal(), apart.nominal(), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(together.covariance, apart.covariance)
    assert together.counts() == apart.counts()
    assert together.counts()["gnss_position_delayed"] == 1
    assert together.counts()["gnss_velocity_delayed"] == 1
    for name in ("gnss_position", "gnss_velocity"):
        a, b = together.aid_status[name], apart.aid_status[name]
        assert a.nis_count == b.nis_count
        # The re-applied epoch's NIS is taken out and added again once per rewind: round-off.
        assert math.isclose(a.nis_sum, b.nis_sum, rel_tol=1e-14)
