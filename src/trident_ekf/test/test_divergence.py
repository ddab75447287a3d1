"""Divergence or spoofing (core.divergence, docs/theory/trident-ekf.md §5.14): fixes that the
GNSS velocity and the IMU contradict are never fused nor reset onto, and raise the spoofing
alarm while they last; a genuine divergence still resets."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, FilterStatus, TridentEKF
from trident_ekf.core.filter import POS
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

FILTERS = [TridentEKF, BaselineESKF]
TRAJECTORY = Trajectory()
DATA = simulate(TRAJECTORY, SensorModel(), 33.0, imu_rate=100.0, rng=np.random.default_rng(3))
R_P, R_V = np.full(3, 1.5**2), np.full(3, 0.1**2)
SIGMAS = np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3)
EAST = TRAJECTORY.enu_to_ecef[:, 0]
UP = TRAJECTORY.enu_to_ecef[:, 2]


@dataclasses.dataclass
class Run:
    """Per GNSS position update: (stamp, reason, the alarm after it, status after it); per
    recorded IMU stamp: the position error over its sigma, per axis."""

    fixes: list[tuple[float, str, str, FilterStatus]]
    error_ratio: np.ndarray
    final_error_m: float


def _run(filter_, offset, skip=lambda t: False, accel_step=lambda t: 0.0,
         until: float = DATA.imu_time[-1], clock_step: tuple[float, float] = (np.inf, 0.0)
         ) -> Run:
    """Feed DATA up to ``until`` s with the fixes moved by ``offset(t)`` (ECEF m), those
    ``skip(t)`` left out, and ``accel_step(t)`` added to the accelerometer (an IMU fault the
    filter's model does not cover); from ``clock_step[0]`` s on every stamp is
    ``clock_step[1]`` s later (a new input time base, ``restart_clock``). Fix stamps in the
    result are DATA's."""
    truth = DATA.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], SIGMAS,
                       DATA.gyro_bias[0], DATA.accel_bias[0])
    fixes, ratios = [], []
    j = 0
    shift = 0.0
    for k in range(1, np.searchsorted(DATA.imu_time, until, side="right")):
        t = DATA.imu_time[k]
        if t >= clock_step[0] and not shift:
            shift = clock_step[1]
            filter_.restart_clock(filter_.time + shift)
        while j < DATA.gnss_time.size and DATA.gnss_time[j] <= t:
            stamp = DATA.gnss_time[j]
            if stamp > 0.0 and not skip(stamp):
                filter_.process_gnss(stamp + shift, DATA.gnss_position[j] + offset(stamp), R_P,
                                     DATA.gnss_velocity[j], R_V)
            j += 1
        filter_.process_imu(t + shift, DATA.gyro[k], DATA.accel[k] + accel_step(t))
        fixes += [(u.time - shift, u.reason, filter_.gnss_alarm, filter_.status)
                  for u in filter_.drain_updates() if u.source == "gnss_position"]
        if k % 10 == 0:
            filter_.flush()
            error = filter_.nominal()[2] - truth["p"][k]
            sigma = np.sqrt(np.diag(filter_.conventional_covariance()[POS, POS]))
            ratios.append(np.abs(error) / sigma)
    return Run(fixes, np.array(ratios), float(np.linalg.norm(error)))


SPOOFED = (10.0, 30.0)  # s: a 500 m east jump held for 20 s


def _spoofed(t: float) -> bool:
    return SPOOFED[0] <= t < SPOOFED[1]


@pytest.mark.parametrize("cls", FILTERS)
def test_a_spoofed_jump_is_never_fused_and_is_flagged_while_it_lasts(cls):
    filter_ = cls(FilterConfig())
    run = _run(filter_, lambda t: 500.0 * EAST if _spoofed(t) else 0.0)
    spoofed = [fix for fix in run.fixes if _spoofed(fix[0])]
    after = [fix for fix in run.fixes if fix[0] >= SPOOFED[1]]
    counts = filter_.aid_status["gnss_position"].counts
    assert len(spoofed) == 100
    assert (counts["inconsistent"], counts["gated"], counts["resets"]) == (100, 0, 0)
    assert counts["accepted"] == len(run.fixes) - 100
    assert filter_.counts()["gnss_position_spoofing_alarms"] == 1
    # Every spoofed fix is inconsistent; the first alone could be an outlier, the second
    # makes the jump persistent and raises the alarm, which holds to the last one.
    assert {reason for _, reason, _, _ in spoofed} == {"inconsistent"}
    assert spoofed[0][2] == ""
    alarms = {alarm for _, _, alarm, _ in spoofed[1:]}
    assert all(re.fullmatch(r"GNSS position inconsistent with velocity and IMU: suspected "
                            r"spoofing, (49\d|50\d) m jump", alarm) for alarm in alarms), alarms
    assert spoofed[-1][3] is FilterStatus.OUTAGE  # no accepted fix: inertial + velocity only
    # The first genuine fix after it passes the gate: fused, the alarm cleared (0.2 s).
    assert after[0][0] - SPOOFED[1] < 2.0
    assert [(reason, alarm, status) for _, reason, alarm, status in after] == [
        ("accepted", "", FilterStatus.NOMINAL)] * len(after)
    # The estimate never left the truth by more than 3 sigma, on any axis.
    assert run.error_ratio.max() < 3.0
    assert run.final_error_m < 2.0


OUTAGE = (5.0, 20.0)  # s


@pytest.mark.parametrize("cls", FILTERS)
def test_a_genuine_divergence_after_an_outage_still_resets(cls):
    """A 1 m/s^2 accelerometer fault the filter's model does not cover, during a 15 s
    outage: the estimate drifts by 135 m against a position sigma of about 20 m per axis. The fixes
    that come back move as the GNSS velocity and the IMU say: a coherent track, reset onto
    after max_consecutive_rejections of them."""
    filter_ = cls(FilterConfig())
    step = np.array([1.0, -0.8, 0.0])
    run = _run(filter_, lambda t: 0.0, skip=lambda t: OUTAGE[0] <= t < OUTAGE[1],
               accel_step=lambda t: step if t >= OUTAGE[0] else 0.0)
    after = [fix for fix in run.fixes if fix[0] >= OUTAGE[1]]
    counts = filter_.aid_status["gnss_position"].counts
    assert (counts["resets"], counts["inconsistent"]) == (1, 0)
    assert filter_.counts()["gnss_position_spoofing_alarms"] == 0
    rejections = FilterConfig().max_consecutive_rejections
    assert [reason for _, reason, _, _ in after[:rejections]] == ["gated"] * rejections
    assert after[rejections - 1][3] is FilterStatus.DIVERGED  # declared, and reset
    assert not any(alarm for _, _, alarm, _ in run.fixes)
    assert after[-1][1:] == ("accepted", "", FilterStatus.NOMINAL)
    assert run.error_ratio[-1].max() < 3.0
    assert run.final_error_m < 3.0


@pytest.mark.parametrize("cls", FILTERS)
def test_a_coherent_track_of_implausible_fixes_is_never_reset_onto(cls):
    """After a gap in the fixes (no link to the last accepted one) a spoofer sends a track
    10 000 km up that moves as the GNSS velocity says: not a place on Earth, so the alarm
    rises at once and the filter never resets onto it."""
    filter_ = cls(FilterConfig(max_consecutive_rejections=5))
    gap, spoof = (8.0, 10.0), (10.0, 13.0)
    run = _run(filter_, lambda t: 1e7 * UP if spoof[0] <= t < spoof[1] else 0.0,
               skip=lambda t: gap[0] <= t < gap[1], until=14.0)
    spoofed = [fix for fix in run.fixes if spoof[0] <= fix[0] < spoof[1]]
    counts = filter_.aid_status["gnss_position"].counts
    assert (counts["inconsistent"], counts["gated"], counts["resets"]) == (15, 0, 0)
    assert filter_.counts()["gnss_position_spoofing_alarms"] == 1
    assert {alarm for _, _, alarm, _ in spoofed} == {
        "GNSS position implausible (height 1e+07 m): suspected spoofing"}
    assert run.fixes[-1][1:3] == ("accepted", "")
    assert run.error_ratio.max() < 3.0


@pytest.mark.parametrize("cls", FILTERS)
def test_the_alarm_holds_across_a_step_of_the_input_clock(cls):
    """The tracked fixes move to the new time base with the estimate: the spoofed track
    after the step is still judged against the anchor before the jump, not reset onto."""
    filter_ = cls(FilterConfig())
    spoof = (5.0, 14.0)
    run = _run(filter_, lambda t: 500.0 * EAST if spoof[0] <= t < spoof[1] else 0.0,
               until=15.0, clock_step=(8.0, 1000.0))
    counts = filter_.aid_status["gnss_position"].counts
    assert (counts["inconsistent"], counts["gated"], counts["resets"]) == (45, 0, 0)
    assert filter_.counts()["gnss_position_spoofing_alarms"] == 1
    assert all(alarm for stamp, _, alarm, _ in run.fixes if spoof[0] + 0.2 <= stamp < spoof[1])
    assert run.fixes[-1][1:3] == ("accepted", "")
    assert run.error_ratio.max() < 3.0
