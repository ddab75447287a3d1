"""Implausible IMU and GNSS inputs and input clock faults, through the session (the logic the
node and trident-replay share): saturated and absurd IMU readings, a stamp far ahead, the
driver's clock stepping back or jumping ahead, an IMU blackout, fixes off the Earth. Each
is rejected and counted under its own name, reported in diagnostics while it lasts, and
the estimate stays within 3 sigma of the simulated truth."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.input_clock import FAULT_HOLD
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

DATUM = (47.3977, 8.5456, 488.0)
IMU_RATE = 100.0  # Hz
EPOCH = 1_700_000_000.0  # s: a wall-clock-like stamp origin
LATENCY = 0.05  # s: fixes arrive this long after their stamp
SENSORS = SensorModel(gnss_position_sigma=0.5, gnss_velocity_sigma=0.05)
TRAJECTORY = Trajectory(*DATUM, hover_time=2.0, amplitude_m=(6.0, 4.0, 1.0),
                        period_s=(12.0, 10.0, 15.0), yaw0_rad=0.3)
DURATION = 10.0  # s
FAULT_AT = 4.5  # s: every fault starts here, in flight
CHECK_EVERY = 10  # outputs: every tenth is compared with the truth
N = FilterConfig().clock_change_samples

Corrupt = Callable[[int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None]


@pytest.fixture(scope="module")
def data():
    return simulate(TRAJECTORY, SENSORS, DURATION, imu_rate=IMU_RATE, gnss_rate=5.0,
                    rng=np.random.default_rng(5))


def make_session(cls=TridentEKF, **session) -> EstimationSession:
    return EstimationSession(cls(FilterConfig()), Initializer(
        yaw=TRAJECTORY.yaw0_rad, yaw_sigma=math.radians(5.0)), datum=DATUM, **session)


def ns(t: float) -> int:
    return round((EPOCH + t) * IMU_RATE) * round(1e9 / IMU_RATE)


class Flight:
    """Streams the data into a session: ``shift(t)`` s added to the stamps of the samples
    taken at t (IMU and GNSS share the driver's clock), ``corrupt(k, gyro, accel)`` replaces
    IMU sample k (None: not sent), up to ``until`` s; records every output's k, compares
    every ``CHECK_EVERY``-th with the truth (ratio of |error| to sigma), and calls
    ``observe(k)`` after every sample."""

    def __init__(self, session: EstimationSession, data,
                 shift: Callable[[float], float] = lambda t: 0.0,
                 corrupt: Corrupt | None = None,
                 observe: Callable[[int], None] | None = None, until: float = DURATION) -> None:
        self.session, self.data = session, data
        self.outputs: list[int] = []
        self.checked: list[tuple[int, np.ndarray]] = []
        fixes = list(range(data.gnss_time.size))
        for k in range(1, index(until) + 1):
            t = data.imu_time[k]
            while fixes and data.gnss_time[fixes[0]] + LATENCY <= t + 1e-9:
                self._gnss(fixes.pop(0), shift)
            gyro, accel = data.gyro[k], data.accel[k]
            sample = corrupt(k, gyro, accel) if corrupt else (gyro, accel)
            if sample is not None and session.imu(ns(t + shift(t)), *sample):
                self.outputs.append(k)
                if len(self.outputs) % CHECK_EVERY == 0 or k == data.imu_time.size - 1:
                    self.checked.append((k, self.ratios(k)))
            if observe:
                observe(k)

    def _gnss(self, j: int, shift: Callable[[float], float]) -> None:
        data, session = self.data, self.session
        stamp = ns(data.gnss_time[j] + shift(data.gnss_time[j]))
        session.fix(stamp, 0, *ecef_to_geodetic(data.gnss_position[j]),
                    np.eye(3) * SENSORS.gnss_position_sigma**2)
        session.velocity(stamp, TRAJECTORY.enu_to_ecef.T @ data.gnss_velocity[j],
                         np.eye(3) * SENSORS.gnss_velocity_sigma**2)

    def ratios(self, k: int) -> np.ndarray:
        """|truth - estimate| / sigma: ENU position, velocity, attitude (9)."""
        estimate = self.session.estimate()
        t = self.data.imu_time[k:k + 1]
        position, velocity, _ = TRAJECTORY.local(t)
        (roll, pitch, yaw), _ = (a[0] for a in TRAJECTORY.euler(t))
        q_true = quaternion.multiply(quaternion.from_rotation_vector([0.0, 0.0, yaw]),
                                     quaternion.multiply(
                                         quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                                         quaternion.from_rotation_vector([roll, 0.0, 0.0])))
        error = np.concatenate([
            position[0] - estimate["position"], velocity[0] - estimate["velocity"],
            quaternion.to_rotation_vector(quaternion.multiply(
                q_true, quaternion.conjugate(estimate["attitude"])))])
        sigma = np.sqrt(np.concatenate([np.diag(estimate[name]) for name in
                                        ("position_cov", "velocity_cov", "attitude_cov")]))
        return np.abs(error) / sigma

    def after(self, t: float) -> np.ndarray:
        """The ratios of the outputs from ``t`` s on (rows)."""
        return np.array([r for k, r in self.checked if self.data.imu_time[k] >= t])


def index(t: float) -> int:
    return round(t * IMU_RATE)


def rejections(session: EstimationSession) -> dict[str, int]:
    """The non-zero IMU and GNSS counters but those of used inputs (accepted, delayed: the
    fixes arrive 50 ms late, so each is applied at its stamp through the history)."""
    kept = ("imu_", "fix_", "velocity_", "gnss_position_", "gnss_velocity_")
    return {name: n for name, n in session.counts().items()
            if n and name.startswith(kept) and not name.endswith(("_accepted", "_delayed"))
            and name != "imu_clock_changes"}


def assert_tracks_the_truth(flight: Flight, since: float) -> None:
    ratios = flight.after(since)
    assert ratios.shape[0] > 10
    assert np.all(np.mean(ratios < 3.0, axis=0) >= 0.95), np.mean(ratios < 3.0, axis=0)
    assert np.all(ratios[-1] < 3.0)


@pytest.fixture(scope="module")
def clean(data):
    """The same flight without faults: what every faulty one is compared with."""
    return Flight(make_session(), data)


def test_the_fault_free_flight_rejects_nothing(clean):
    flight = clean
    assert rejections(flight.session) == {}
    assert flight.session.diagnostics()[:2] == (0, "nominal")
    assert_tracks_the_truth(flight, 2.0)


def test_an_absurd_imu_burst_is_rejected_as_saturated_and_never_integrated(data, clean):
    """Ten samples of 1e6 m/s^2 (finite, absurd): the attacker moved the estimate 240 km."""
    burst = range(index(FAULT_AT), index(FAULT_AT) + 10)
    levels = {}

    def observe(k: int) -> None:
        if k in (burst[-1], burst[-1] + index(FAULT_HOLD) + 1):
            levels[k] = session.diagnostics()[:2]

    session = make_session()
    flight = Flight(session, data, observe=observe, corrupt=lambda k, w, f: (
        (w, np.array([1e6, -1e6, 1e6])) if k in burst else (w, f)))
    # The next usable sample spans 0.11 s, longer than max_imu_interval: a gap (bridged).
    assert rejections(session) == {"imu_saturated": 10, "imu_gap": 1}
    # Reported while it lasts (WARN), then nominal again.
    assert levels == {burst[-1]: (1, "IMU saturated: samples at the sensor's range "
                                     "rejected; nominal"),
                      burst[-1] + index(FAULT_HOLD) + 1: (0, "nominal")}
    assert_tracks_the_truth(flight, 2.0)



def test_a_reading_at_the_declared_range_is_saturated_in_the_imu_axes():
    config = FilterConfig(gyro_range=10.0, accel_range=50.0)
    turned = quaternion.to_matrix(quaternion.from_rotation_vector([0.0, 0.0, math.pi / 4]))
    session = EstimationSession(TridentEKF(config), Initializer(), imu_rotation=turned)
    still = np.array([0.0, 0.0, 9.8])
    # Both axes of the body frame get 10 / sqrt(2) rad/s: only the IMU's x axis is at range.
    session.imu(ns(0.01), [10.0, 0.0, 0.0], still)
    session.imu(ns(0.02), [9.999, 0.0, 0.0], still)
    session.imu(ns(0.03), [0.0, 0.0, 0.0], [0.0, -50.0, 9.8])
    session.imu(ns(0.04), [0.0, 0.0, 0.0], [math.inf, 0.0, 9.8])
    assert rejections(session) == {"imu_saturated": 2, "imu_nonfinite": 1}
    assert session.received["imu"] == 4


def test_one_sample_an_hour_ahead_is_one_rejected_sample(data, clean):
    """The attacker's sample stamped 1 h ahead stopped every output for an hour."""
    k_bad = index(FAULT_AT)
    session = make_session()
    flight = Flight(session, data, shift=lambda t: 3600.0 if index(t) == k_bad else 0.0)
    assert rejections(session) == {"imu_stamp_jump": 1}
    assert flight.outputs == [k for k in clean.outputs if k != k_bad]  # all the others
    assert session.counts()["imu_clock_changes"] == 0
    assert session.diagnostics()[:2] == (0, "nominal")
    assert_tracks_the_truth(flight, 2.0)


@pytest.mark.parametrize(("cls", "step"), [(TridentEKF, -10.0), (TridentEKF, 3600.0),
                                         (BaselineESKF, -10.0)])
def test_a_clock_step_is_a_new_time_base_after_a_few_samples(data, cls, step):
    """The driver's clock steps back 10 s (or ahead 1 h) for good, for IMU and GNSS: after
    ``clock_change_samples`` samples agree, the estimate continues on the new base."""
    reports = {}
    changed = index(FAULT_AT)

    def observe(k: int) -> None:
        if k in (changed + N - 1, changed + N - 1 + index(FAULT_HOLD)):
            reports[k] = session.diagnostics()

    session = make_session(cls)
    flight = Flight(session, data, shift=lambda t: step if t >= FAULT_AT - 1e-9 else 0.0,
                    observe=observe)
    lost = "imu_out_of_order" if step < 0 else "imu_stamp_jump"
    assert rejections(session) == {lost: N - 1}  # no fix lost, none counted twice
    assert session.counts()["imu_clock_changes"] == 1
    ks = flight.outputs
    assert ks[ks.index(changed - 1) + 1] == changed + N - 1  # outputs again at the N-th
    assert ks[-1] == data.imu_time.size - 1
    level, summary, values = reports[changed + N - 1]
    assert (level, summary) == (2, f"IMU clock stepped {step:+.3f} s: continuing on the "
                                   "new time base; nominal")
    assert values["imu_last_clock_step_s"] == f"{step:.3f}"
    assert reports[changed + N - 1 + index(FAULT_HOLD)][:2] == (0, "nominal")
    assert_tracks_the_truth(flight, FAULT_AT)
    assert session.events[-1] == (f"IMU clock stepped {step:+.3f} s: continuing on the new "
                                  "time base")


def test_a_clock_step_while_aligning_restarts_the_alignment(data):
    session = make_session()
    Flight(session, data, shift=lambda t: -10.0 if t >= 0.5 else 0.0, until=2.0)
    assert rejections(session) == {"imu_out_of_order": N - 1}
    assert session.counts()["imu_clock_changes"] == 1
    assert session.started  # levelled again on the new base


def test_an_imu_blackout_reads_error_while_it_lasts(data):
    """4 s of NaN samples (stamps go on): ERROR once longer than imu_timeout, bridged and
    nominal at the first usable sample."""
    blackout = range(index(FAULT_AT), index(FAULT_AT + 4.0))
    timeout = FilterConfig().imu_timeout
    reports = {}

    def observe(k: int) -> None:
        if k in (blackout[0] + index(timeout) - 1, blackout[0] + index(timeout) + 1,
                 blackout[-1] + 1):
            reports[k] = session.diagnostics()[:2]

    session = make_session()
    nan = np.full(3, math.nan)
    flight = Flight(session, data, observe=observe, corrupt=lambda k, w, f: (
        (nan, f) if k in blackout else (w, f)))
    assert rejections(session) == {"imu_nonfinite": len(blackout), "imu_gap": 1}
    assert reports == {blackout[0] + index(timeout) - 1: (0, "nominal"),
                       blackout[0] + index(timeout) + 1: (
                           2, "IMU blackout: no usable sample for 1.0 s; nominal"),
                       blackout[-1] + 1: (0, "nominal")}
    assert_tracks_the_truth(flight, FAULT_AT + 4.0)


def test_silence_on_the_callers_clock_is_a_blackout(clean):
    session = clean.session
    assert session.diagnostics(imu_silence_s=0.5)[0] == 0
    level, summary, values = session.diagnostics(imu_silence_s=2.5)
    assert (level, summary) == (2, "IMU blackout: no usable sample for 2.5 s; nominal")
    assert (values["input_fault"], values["imu_blackout_s"]) == (
        "IMU blackout: no usable sample for 2.5 s", "2.500")
    assert make_session().diagnostics(imu_silence_s=10.0)[0] == 1  # no sample yet: waiting


@pytest.mark.parametrize(("latitude", "longitude", "height", "covariance", "reason"), [
    (91.0, 8.5, 488.0, np.eye(3), "fix_out_of_range"),
    (47.0, 181.0, 488.0, np.eye(3), "fix_out_of_range"),
    (47.0, -180.5, 488.0, np.eye(3), "fix_out_of_range"),
    (47.0, 8.5, -1500.0, np.eye(3), "fix_out_of_range"),
    (47.0, 8.5, 2e5, np.eye(3), "fix_out_of_range"),
    (math.nan, 8.5, 488.0, np.eye(3), "fix_nonfinite"),
    (47.0, 8.5, math.inf, np.eye(3), "fix_nonfinite"),
    (47.0, 8.5, 488.0, [[4.0, 5.0, 0.0], [5.0, 4.0, 0.0], [0.0, 0.0, 4.0]],
     "fix_bad_covariance"),  # positive diagonal, not positive definite
    (47.0, 8.5, 488.0, [[4.0, 1.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]],
     "fix_bad_covariance"),  # not symmetric
])
def test_a_fix_off_the_earth_is_counted_by_its_reason(latitude, longitude, height, covariance,
                                                       reason):
    session = make_session()
    assert not session.fix(ns(1.0), 0, latitude, longitude, height, covariance)
    assert rejections(session) == {reason: 1}
    assert session.fix(ns(1.1), 0, 90.0, 180.0, 99_999.0, np.eye(3))  # the edges are valid


def test_a_velocity_covariance_that_is_not_positive_definite_is_rejected():
    session = make_session()
    assert session.fix(ns(1.0), 0, *DATUM, np.eye(3))
    singular = [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert not session.velocity(ns(1.0), [1.0, 0.0, 0.0], singular)
    assert rejections(session) == {"velocity_bad_covariance": 1}


@pytest.mark.parametrize("cls", [TridentEKF, BaselineESKF])
def test_a_fix_the_history_replay_drops_is_counted_once(data, cls):
    """A late fix stamped inside a skipped IMU gap: the rewind re-runs the gap and drops it
    as late; it used to be counted delayed too."""
    filter_ = cls(FilterConfig(max_bridged_gap=0.5))
    k0 = index(FAULT_AT)
    truth = data.truth
    filter_.initialize(data.imu_time[k0], truth["q"][k0], truth["v"][k0], truth["p"][k0],
                       np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3))
    filter_.process_imu(data.imu_time[k0 + 1], data.gyro[k0 + 1], data.accel[k0 + 1])
    k1 = k0 + index(0.8)  # a 0.8 s gap: skipped
    filter_.process_imu(data.imu_time[k1], data.gyro[k1], data.accel[k1])
    j = int(np.searchsorted(data.gnss_time, data.imu_time[k0 + 1], side="right"))
    assert data.gnss_time[j] < data.imu_time[k1]
    assert filter_.process_gnss(data.gnss_time[j], data.gnss_position[j], np.full(3, 0.25))
    counts = filter_.aid_status["gnss_position"].counts
    assert (counts["late"], counts["delayed"], counts["accepted"]) == (1, 0, 0)
    assert filter_.imu_counts["gap"] == 1


@pytest.mark.parametrize("cls", [TridentEKF, BaselineESKF])
def test_the_filter_rejects_a_stamp_jump_and_keeps_its_state(data, cls):
    filter_ = cls(FilterConfig(max_imu_stamp_jump=2.0))
    truth = data.truth
    filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0], np.full(15, 0.1))
    filter_.process_imu(0.01, data.gyro[1], data.accel[1])
    before = [a.copy() for a in filter_.nominal()]
    assert not filter_.process_imu(2.02, data.gyro[2], data.accel[2])
    assert filter_.imu_counts["stamp_jump"] == 1
    assert all(np.array_equal(a, b) for a, b in zip(before, filter_.nominal(), strict=True))
    assert filter_.process_imu(2.0, data.gyro[2], data.accel[2])  # within the limit: a gap
    assert filter_.imu_counts["gap"] == 1


def test_the_output_schedule_restarts_when_the_clock_steps_back():
    schedule = OutputSchedule(10.0)
    assert [schedule.due(s) for s in (ns(1.0), ns(1.05), ns(1.1), ns(-9.0), ns(-8.95),
                                      ns(-8.9))] == [False, False, True, True, False, True]


@pytest.mark.parametrize(("fields", "message"), [
    ({"max_imu_stamp_jump": 0.05}, "max_imu_stamp_jump must be finite and >= "
                                   "max_imu_interval"),
    ({"clock_change_samples": 1}, "clock_change_samples must be an integer >= 2"),
    ({"gyro_range": 0.0}, "gyro_range must be finite and > 0"),
    ({"accel_range": math.inf}, "accel_range must be finite and > 0"),
    ({"imu_timeout": -1.0}, "imu_timeout must be finite and > 0"),
])
def test_invalid_input_settings_raise(fields, message):
    with pytest.raises(ValueError, match=message):
        FilterConfig(**fields)
