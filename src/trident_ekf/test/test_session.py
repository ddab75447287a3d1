"""EstimationSession (the logic trident-replay and the node share), without ROS: start-up,
ENU estimate against the simulated truth within its covariance, GNSS pairing, bad inputs
counted and never fused, output decimation, IMU mounting, and the replay path through it."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import ecef_to_geodetic
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate
from trident_ekf.tools import bagio, cdr
from trident_ekf.tools.replay import ReplaySession

DATUM = (47.3977, 8.5456, 488.0)
IMU_PERIOD_NS = 5_000_000  # 200 Hz
EPOCH_NS = 1_700_000_000 * 10**9  # a wall-clock-like stamp origin
SENSORS = SensorModel(gnss_position_sigma=0.5, gnss_velocity_sigma=0.05)
TRAJECTORY = Trajectory(*DATUM, hover_time=3.0, amplitude_m=(6.0, 4.0, 1.0),
                        period_s=(12.0, 10.0, 15.0), yaw0_rad=0.3)


@pytest.fixture(scope="module")
def data():
    return simulate(TRAJECTORY, SENSORS, 20.0, gnss_rate=10.0, rng=np.random.default_rng(3))


def stamp(t: float) -> int:
    """Integer ns of a simulated time on the IMU grid."""
    return EPOCH_NS + round(t * 1e9 / IMU_PERIOD_NS) * IMU_PERIOD_NS


def fixes(data):
    """(stamp ns, latitude, longitude, height, ENU covariance, ENU velocity, its covariance)."""
    R = TRAJECTORY.enu_to_ecef
    for t, p, v in zip(data.gnss_time, data.gnss_position, data.gnss_velocity, strict=True):
        yield (stamp(t), *ecef_to_geodetic(p), np.eye(3) * SENSORS.gnss_position_sigma**2,
               R.T @ v, np.eye(3) * SENSORS.gnss_velocity_sigma**2)


def make_initializer() -> Initializer:
    return Initializer(yaw=TRAJECTORY.yaw0_rad, yaw_sigma=math.radians(5.0))


def make_session(config: FilterConfig | None = None, **kwargs) -> EstimationSession:
    return EstimationSession(TridentEKF(config or FilterConfig()), make_initializer(), **kwargs)


def run(session: EstimationSession, data, gyro=None, accel=None, on_output=None,
        latency: float = 0.05) -> None:
    """Stream the data: GNSS arrives ``latency`` s after its stamp, fix then velocity."""
    gyro = data.gyro if gyro is None else gyro
    accel = data.accel if accel is None else accel
    pending = list(fixes(data))
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        while pending and (pending[0][0] - EPOCH_NS) * 1e-9 + latency <= t + 1e-9:
            s, lat, lon, h, cov, v, v_cov = pending.pop(0)
            session.fix(s, 0, lat, lon, h, cov)
            session.velocity(s, v, v_cov)
        if session.imu(stamp(t), gyro[k], accel[k]) and on_output is not None:
            on_output(k)


def errors_and_sigmas(session: EstimationSession, data, k: int):
    """Truth minus estimate (ENU position, velocity, attitude rotation vector about ENU
    axes) and the matching sigmas."""
    estimate = session.estimate()
    position, velocity, _ = TRAJECTORY.local(data.imu_time[k:k + 1])
    angles, _ = TRAJECTORY.euler(data.imu_time[k:k + 1])
    roll, pitch, yaw = angles[0]
    q_true = quaternion.multiply(quaternion.from_rotation_vector([0.0, 0.0, yaw]),
                                 quaternion.multiply(
                                     quaternion.from_rotation_vector([0.0, pitch, 0.0]),
                                     quaternion.from_rotation_vector([roll, 0.0, 0.0])))
    q_error = quaternion.multiply(q_true, quaternion.conjugate(estimate["attitude"]))
    error = np.concatenate([position[0] - estimate["position"],
                            velocity[0] - estimate["velocity"],
                            quaternion.to_rotation_vector(q_error)])
    sigma = np.sqrt(np.concatenate([np.diag(estimate[name]) for name in
                                    ("position_cov", "velocity_cov", "attitude_cov")]))
    return error, sigma


@dataclass(frozen=True)
class TrackedRun:
    """A session over the whole stream, its first output's time (s) and |error| / sigma at
    every 20th output."""

    session: EstimationSession
    started_at: float
    ratios: np.ndarray


def run_tracked(session: EstimationSession, data, gyro=None, accel=None) -> TrackedRun:
    """``run``, looking at the estimate every 20th output (``estimate()`` flushes the
    filter, so runs compared bit for bit must look at the same outputs)."""
    ratios = []
    started_at = []

    def check(k: int) -> None:
        if not started_at:
            started_at.append(data.imu_time[k])
        if k % 20 == 0:
            error, sigma = errors_and_sigmas(session, data, k)
            ratios.append(np.abs(error) / sigma)

    run(session, data, gyro, accel, on_output=check)
    return TrackedRun(session, started_at[0], np.array(ratios))


@pytest.fixture(scope="module")
def tracked(data) -> TrackedRun:
    """The default session (TridentEKF, datum ``DATUM``) over the stream: run once for the
    tests that look at it or compare another run with it; a test that feeds it more takes
    a copy."""
    return run_tracked(make_session(datum=DATUM), data)


def test_session_starts_and_tracks_the_truth_within_three_sigma(data, tracked):
    session = tracked.session
    assert 1.0 <= tracked.started_at <= 1.3  # levelling 1 s, then the next fix
    inside = np.mean(tracked.ratios < 3.0, axis=0)
    assert np.all(inside >= 0.95), inside
    final, sigma = errors_and_sigmas(session, data, data.imu_time.size - 1)
    assert np.all(np.abs(final[:3]) < 1.0)
    assert np.all(sigma[:3] < 1.0)
    assert session.filter.status.value == "nominal"
    counts = session.counts()
    assert counts["gnss_position_gated"] == counts["gnss_velocity_gated"] == 0
    assert counts["gnss_position_accepted"] == counts["gnss_velocity_accepted"] > 150


def test_datum_defaults_to_the_first_valid_fix(data, tracked):
    session = make_session()
    run(session, data)
    first = next(fixes(data))
    assert session.datum.geodetic == pytest.approx(first[1:4])
    anchored = tracked.session
    offset = anchored.estimate()["position"] - session.estimate()["position"]
    expected = TRAJECTORY.enu_to_ecef.T @ (session.datum.origin - anchored.datum.origin)
    assert offset == pytest.approx(expected, abs=1e-3)  # same filter, shifted map origin


def test_gnss_bias_states_keep_the_position_covariance_honest(data, tracked):
    """White fixes averaged at 10 Hz shrink the position sigma to a few cm; with the filter's
    GNSS bias states (18 error states) the estimate carries the correlated error's sigma,
    and the session's ENU outputs follow the larger state."""
    plain = tracked.session
    biased = make_session(FilterConfig(gnss_bias_sigma_horizontal=0.2,
                                       gnss_bias_sigma_vertical=0.3), datum=DATUM)
    run(biased, data)
    assert np.all(np.sqrt(np.diag(plain.estimate()["position_cov"])) < 0.1)
    assert biased.filter.covariance.shape == (18, 18)
    sigma = np.sqrt(np.diag(biased.estimate()["position_cov"]))
    assert np.all(sigma[:2] > 0.15)
    assert sigma[2] > 0.2
    error, _ = errors_and_sigmas(biased, data, data.imu_time.size - 1)
    assert np.all(np.abs(error[:3]) < 3.0 * sigma)
    counts = biased.counts()
    assert counts["gnss_position_gated"] == counts["gnss_velocity_gated"] == 0


def test_imu_mounting_rotation_is_undone(data, tracked):
    """IMU axes yawed 90 deg and rolled 180 deg from the body: with the mount rotation the
    session estimates exactly what a body-aligned IMU gives."""
    q_imu_in_body = quaternion.from_rotation_vector([math.pi, 0.0, 0.0])
    q_imu_in_body = quaternion.multiply(quaternion.from_rotation_vector([0.0, 0.0, 1.5708]),
                                        q_imu_in_body)
    C = quaternion.to_matrix(q_imu_in_body)
    mounted = make_session(datum=DATUM, imu_rotation=C)
    run_tracked(mounted, data, gyro=data.gyro @ C, accel=data.accel @ C)  # body -> IMU axes
    a, b = tracked.session.estimate(), mounted.estimate()
    assert b["position"] == pytest.approx(a["position"], abs=1e-6)
    assert b["attitude"] == pytest.approx(a["attitude"], abs=1e-9)


def test_fix_and_velocity_pair_on_arrival_and_a_lone_fix_goes_alone(data, tracked):
    session = copy.deepcopy(tracked.session)  # fed more below
    updates = session.drain_updates()
    # 50 ms late, fix and velocity still paired: every epoch is a velocity and a position
    # update (3 dof each) at the same stamp. (Late, they are applied through the history:
    # the position's rewind re-applies, and reports again, the velocity of its epoch.)
    assert {u.dof for u in updates} == {3}
    positions = {u.time for u in updates if u.source == "gnss_position"}
    velocities = {u.time for u in updates if u.source == "gnss_velocity"}
    assert positions == velocities
    assert len(positions) == session.counts()["gnss_position_accepted"] > 150
    assert session.counts()["gnss_velocity_accepted"] == len(positions)
    t = data.imu_time[-1]
    _, lat, lon, h, cov, v, v_cov = next(fixes(data))
    later = stamp(t) + IMU_PERIOD_NS
    session.fix(later, 0, lat, lon, h, cov, covariance_known=False)  # a default covariance
    for k in range(1, 12):  # 55 ms of IMU: past the pairing window
        session.imu(later + k * IMU_PERIOD_NS, data.gyro[-1], data.accel[-1])
    (update,) = session.drain_updates()  # the position alone, no velocity update
    assert (update.source, update.dof, update.time) == ("gnss_position", 3,
                                                        pytest.approx(later * 1e-9))
    session.velocity(later + 20 * IMU_PERIOD_NS, v, v_cov)
    for k in range(12, 40):
        session.imu(later + k * IMU_PERIOD_NS, data.gyro[-1], data.accel[-1])
    assert session.drain_updates() == []
    assert session.rejected["velocity_unpaired"] == 1


def test_bad_inputs_are_counted_and_never_fused(data):
    session = make_session()
    gyro, accel = data.gyro[1], data.accel[1]
    early = stamp(0.0) - 10 * IMU_PERIOD_NS  # before the stream, at rest
    assert not session.imu(early, (math.nan, 0.0, 0.0), accel)
    assert not session.velocity(early, (1.0, 0.0, 0.0), np.eye(3))  # no fix, no datum yet
    session.imu(early + IMU_PERIOD_NS, gyro, accel)
    session.imu(early + IMU_PERIOD_NS, gyro, accel)
    session.imu(early, gyro, accel)
    run(session, data)
    accepted = {name: session.counts()[f"{name}_accepted"]
                for name in ("gnss_position", "gnss_velocity")}
    last = stamp(data.imu_time[-1])
    _, lat, lon, h, cov, v, v_cov = next(fixes(data))
    assert not session.fix(last, -1, math.nan, math.nan, math.nan, np.zeros(9))  # NO_FIX
    assert not session.fix(last, 0, lat, math.inf, h, cov)
    assert not session.fix(last, 0, lat, lon, h, np.full(9, math.nan))
    assert not session.fix(last, 0, lat, lon, h, np.zeros(9))  # "known" but zero
    assert not session.velocity(last, (math.nan, 0.0, 0.0), v_cov)
    assert not session.velocity(last, v, -np.eye(3))
    for k in range(1, 40):
        session.imu(last + k * IMU_PERIOD_NS, data.gyro[-1], data.accel[-1])
    counts = session.counts()
    assert {name: counts[f"{name}_accepted"] for name in accepted} == accepted
    assert all(counts[f"{name}_{reason}"] == 0 for name in accepted
               for reason in ("gated", "nonfinite", "late", "duplicate"))
    expected = {"imu_nonfinite": 1, "imu_duplicate": 1, "imu_out_of_order": 1,
                "velocity_without_fix": 1, "fix_no_fix": 1, "fix_nonfinite": 1,
                "fix_bad_covariance": 2, "velocity_nonfinite": 1,
                "velocity_bad_covariance": 1}
    assert {name: counts[name] for name in expected} == expected
    level, summary, values = session.diagnostics()
    assert (level, summary) == (0, "nominal")
    assert values["fix_no_fix"] == "1"
    assert values["imu_messages"] == str(session.received["imu"])
    assert float(values["yaw_sigma_deg"]) > 0.0
    assert float(values["gyro_bias_sigma_z_rad_s"]) > 0.0


def test_output_schedule_puts_outputs_on_multiples_of_the_period():
    schedule = OutputSchedule(100.0)
    stamps = [EPOCH_NS + k * IMU_PERIOD_NS for k in range(1, 400)]  # the first mid-period
    due = [s for s in stamps if schedule.due(s)]
    assert due == [s for s in stamps[1:] if s % 10_000_000 == 0]
    jittered = OutputSchedule(30.0)
    irregular = np.cumsum(np.random.default_rng(0).integers(3_000_000, 7_000_000, 600))
    slots = [s // jittered.period_ns for s in irregular if jittered.due(int(s))]
    assert slots == sorted(set(slots))  # at most one output per period
    assert len(slots) == pytest.approx(irregular[-1] * 30e-9, abs=2)
    with pytest.raises(ValueError, match="output rate"):
        OutputSchedule(0.0)


def test_replay_session_feeds_the_shared_session_from_messages(data):
    """trident-replay's message handlers give the session exactly the plain-value stream
    (covariance propagated every sample, so that the replay's extra outputs change nothing)."""
    config = FilterConfig(covariance_decimation=1)
    direct = make_session(config)
    run(direct, data)
    replay = ReplaySession(make_session(config), None, 50.0)
    pending = list(fixes(data))
    for k in range(1, data.imu_time.size):
        t = data.imu_time[k]
        while pending and (pending[0][0] - EPOCH_NS) * 1e-9 + 0.05 <= t + 1e-9:
            s, lat, lon, h, cov, v, v_cov = pending.pop(0)
            replay.fix(bagio.navsatfix_message(s, lat, lon, h, cov))
            replay.velocity(bagio.twist_message(s, v, v_cov))
        replay.imu(cdr.ImuSample(stamp(t), tuple(data.gyro[k]), tuple(data.accel[k])))
    ours, theirs = direct.estimate(), replay.session.estimate()
    for name in ("position", "velocity", "attitude", "pose_cov", "twist_cov"):
        assert np.array_equal(ours[name], theirs[name]), name
    accepted = replay.series.summary()["nis_by_source"]["gnss_position"]["accepted"]
    assert accepted == direct.counts()["gnss_position_accepted"] > 0


@pytest.mark.parametrize("filter_class", [TridentEKF, BaselineESKF])
def test_set_pose_gives_back_the_pose_and_covariance_it_was_given(filter_class):
    """The estimate right after set_pose is the pose, and its pose covariance (ENU position,
    rotation about the ENU axes) is the one given: the congruences in and out agree."""
    session = EstimationSession(filter_class(FilterConfig()), make_initializer(),
                                datum=(47.0, 8.0, 400.0))
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 6))
    covariance = A @ A.T * 0.01 + np.diag([1.0, 2.0, 0.5, 1e-3, 2e-3, 4e-3])
    q = quaternion.from_rotation_vector([0.1, -0.2, 1.3])
    session.set_pose(10**9, [5.0, -3.0, 2.0], q, covariance, velocity_enu=[1.0, 0.5, 0.0])
    estimate = session.estimate()
    assert session.phase == "running"
    np.testing.assert_allclose(estimate["position"], [5.0, -3.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(estimate["velocity"], [1.0, 0.5, 0.0], atol=1e-9)
    assert abs(float(np.dot(estimate["attitude"], q))) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(estimate["pose_cov"], covariance, rtol=1e-9, atol=1e-12)


def test_set_pose_and_set_datum_refuse_what_they_cannot_use():
    session = make_session()
    with pytest.raises(ValueError, match="no map datum yet"):
        session.set_pose(0, [0, 0, 0], [0, 0, 0, 1], np.eye(6))
    session.set_datum(47.0, 8.0, 400.0)
    with pytest.raises(ValueError, match="positive definite"):
        session.set_pose(0, [0, 0, 0], [0, 0, 0, 1], -np.eye(6))
    with pytest.raises(ValueError, match="finite"):
        session.set_pose(0, [0, math.nan, 0], [0, 0, 0, 1], np.eye(6))
    with pytest.raises(ValueError, match="out of range"):
        session.set_datum(91.0, 8.0, 400.0)
    assert session.resets == {"reset": 0, "set_pose": 0, "set_datum": 1, "yaw": 0}
    assert session.phase == "waiting_for_data"
