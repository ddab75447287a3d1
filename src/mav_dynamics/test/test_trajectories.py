"""Flight-plan trajectories: analytic derivatives, junctions, endpoints and shapes."""

from __future__ import annotations

import numpy as np
import pytest

from mav_dynamics.controller import TrackingReference
from mav_dynamics.trajectories import (
    MINIMUM_JERK_PEAK_SPEED,
    FigureEight,
    Hover,
    MinimumJerkMove,
    TakeOff,
    Trajectory,
    Waypoints,
    heading,
)
from mav_geometry.groups import SO3

STEP = 1e-5  # s, central differences


def _difference(trajectory: Trajectory, t: float, field: str) -> np.ndarray:
    ahead, behind = trajectory.reference(t + STEP), trajectory.reference(t - STEP)
    return (getattr(ahead, field) - getattr(behind, field)) / (2 * STEP)


def _body_rate_difference(trajectory: Trajectory, t: float) -> np.ndarray:
    """``vee(R^T dR/dt)`` by central differences of the attitude."""
    ahead, behind = trajectory.reference(t + STEP), trajectory.reference(t - STEP)
    return SO3.log(behind.attitude.T @ ahead.attitude) / (2 * STEP)


def _check_derivatives(trajectory: Trajectory, times: np.ndarray) -> None:
    for t in times:
        reference = trajectory.reference(t)
        for value, field in ((reference.velocity, "position"),
                             (reference.acceleration, "velocity"),
                             (reference.jerk, "acceleration"),
                             (reference.angular_acceleration, "angular_velocity")):
            difference = _difference(trajectory, t, field)
            scale = max(1.0, float(np.abs(value).max()))
            assert np.allclose(value, difference, rtol=0.0, atol=1e-6 * scale), (t, field)
        assert np.allclose(reference.angular_velocity, _body_rate_difference(trajectory, t),
                           atol=1e-6), t


def _moving_start() -> TrackingReference:
    return TrackingReference(np.array([0.3, -0.2, 1.0]), np.array([0.8, -0.4, 0.3]),
                             np.array([-0.5, 1.2, 0.4]), attitude=heading(0.4))


def test_figure_eight_derivatives_match_finite_differences_in_and_after_the_ramp() -> None:
    trajectory = FigureEight(center=(1.0, -2.0), size_m=2.0, period_s=12.0, height_m=1.5,
                             yaw=0.3, ramp_s=5.0)
    _check_derivatives(trajectory, np.array([0.7, 2.5, 4.2, 6.1, 13.3, 20.0]))


def test_minimum_jerk_move_derivatives_including_the_attitude_turn() -> None:
    move = MinimumJerkMove(_moving_start(), [2.0, 1.0, 2.5], 3.0, start_time=1.0,
                           target_attitude=SO3.exp(np.array([0.2, -0.1, 1.4])))
    _check_derivatives(move, np.array([1.2, 2.0, 2.9, 3.7]))


def test_waypoint_and_takeoff_derivatives() -> None:
    waypoints = Waypoints([[0, 0, 1], [2, 0, 1], [2, 3, 2]], speed_mps=1.5, yaw=-0.5)
    _check_derivatives(waypoints, np.array([0.4, 1.3, 2.6, 4.0]))
    takeoff = TakeOff([0.5, 0.5, 0.0], FigureEight(ramp_s=6.0), duration_s=4.0,
                      start_attitude=heading(2.0))
    _check_derivatives(takeoff, np.array([0.5, 2.2, 3.5, 5.0, 9.0]))


def test_move_starts_on_its_start_state_and_ends_at_rest_on_target() -> None:
    start = _moving_start()
    target_attitude = SO3.exp(np.array([0.0, 0.0, -1.0]))
    move = MinimumJerkMove(start, [2.0, 1.0, 2.5], 3.0, start_time=1.0,
                           target_attitude=target_attitude)
    just_after = move.reference(1.0 + 1e-9)
    assert np.allclose(just_after.position, start.position, atol=1e-8)
    assert np.allclose(just_after.velocity, start.velocity, atol=1e-7)
    assert np.allclose(just_after.acceleration, start.acceleration, atol=1e-6)
    assert np.allclose(just_after.attitude, start.attitude, atol=1e-8)
    end = move.reference(4.0 - 1e-9)
    assert np.allclose(end.position, [2.0, 1.0, 2.5], atol=1e-8)
    assert np.allclose(end.velocity, 0.0, atol=1e-7)
    assert np.allclose(end.acceleration, 0.0, atol=1e-6)
    assert np.allclose(end.attitude, target_attitude, atol=1e-8)
    assert np.allclose(move.reference(10.0).position, [2.0, 1.0, 2.5])


def test_waypoints_stop_at_every_point_and_reach_the_requested_peak_speed() -> None:
    points = np.array([[0, 0, 1], [3, 0, 1], [3, 0, 1], [3, 4, 1]], dtype=float)
    speed = 2.0
    trajectory = Waypoints(points, speed_mps=speed, yaw=0.2)
    durations = [MINIMUM_JERK_PEAK_SPEED * 3.0 / speed, MINIMUM_JERK_PEAK_SPEED * 4.0 / speed]
    assert trajectory.duration == pytest.approx(sum(durations))  # the repeated point is skipped
    for t, point in ((0.0, points[0]), (durations[0], points[1]), (sum(durations), points[3]),
                     (sum(durations) + 5.0, points[3]), (-1.0, points[0])):
        reference = trajectory.reference(t)
        assert np.allclose(reference.position, point, atol=1e-9), t
        assert np.allclose(reference.velocity, 0.0, atol=1e-9), t
    samples = np.linspace(0.0, trajectory.duration, 2001)
    speeds = [np.linalg.norm(trajectory.reference(t).velocity) for t in samples]
    assert max(speeds) == pytest.approx(speed, rel=1e-3)
    assert np.allclose(trajectory.reference(1.0).attitude, heading(0.2))


def test_single_waypoint_is_a_hover() -> None:
    trajectory = Waypoints([[1.0, 2.0, 3.0]], speed_mps=1.0)
    assert np.allclose(trajectory.reference(7.0).position, [1.0, 2.0, 3.0])
    assert trajectory.duration == 0.0


def test_figure_eight_shape_period_and_rest_start() -> None:
    size, period, ramp = 2.0, 12.0, 6.0
    trajectory = FigureEight(center=(1.0, -1.0), size_m=size, period_s=period, height_m=1.5,
                             ramp_s=ramp)
    start = trajectory.reference(0.0)
    assert np.allclose(start.position, [1.0, -1.0, 1.5])
    assert np.allclose(start.velocity, 0.0)
    assert np.allclose(start.acceleration, 0.0)
    lap = np.linspace(ramp, ramp + period, 4001)
    points = np.array([trajectory.reference(t).position for t in lap])
    assert np.allclose(points[:, 2], 1.5)
    assert points[:, 0].max() - 1.0 == pytest.approx(size, rel=1e-6)
    assert points[:, 0].min() - 1.0 == pytest.approx(-size, rel=1e-6)
    assert points[:, 1].max() + 1.0 == pytest.approx(size / 2, rel=1e-6)
    for t in (ramp + 0.3, ramp + 4.1, 30.0):
        now, later = trajectory.reference(t), trajectory.reference(t + period)
        assert np.allclose(now.position, later.position, atol=1e-9)
        assert np.allclose(now.velocity, later.velocity, atol=1e-9)
    # y = (A/2) sin(2 phi) = x cos(phi): the lemniscate y^2 = x^2 (1 - x^2 / A^2).
    x, y = (points[:, :2] - [1.0, -1.0]).T
    assert np.allclose(y**2, x**2 * (1.0 - (x / size) ** 2), atol=1e-9)
    assert np.linalg.norm(trajectory.reference(ramp + 1.0).velocity) > 0.5


@pytest.mark.parametrize(("trajectory", "junction"), [
    (FigureEight(ramp_s=6.0), 6.0),                    # end of the phase ramp
    (TakeOff([0.3, -0.4, 0.05], FigureEight(ramp_s=6.0), duration_s=4.0), 4.0),
    (TakeOff([0.0, 0.0, 0.0], Waypoints([[0, 0, 1], [1, 1, 1]], 1.0), duration_s=3.0), 3.0),
], ids=["ramp_end", "takeoff_figure_eight", "takeoff_waypoints"])
def test_junctions_are_continuous(trajectory: Trajectory, junction: float) -> None:
    before, after = trajectory.reference(junction - 1e-9), trajectory.reference(junction + 1e-9)
    for field in ("position", "velocity", "acceleration"):
        assert np.allclose(getattr(before, field), getattr(after, field), atol=1e-6), field
    assert np.allclose(before.attitude, after.attitude)


def test_takeoff_climbs_from_the_start_to_the_trajectory_then_flies_it() -> None:
    mission = FigureEight(center=(1.0, 0.0), height_m=2.0, ramp_s=6.0, yaw=0.5)
    takeoff = TakeOff([0.2, 0.1, 0.0], mission, duration_s=5.0, start_attitude=heading(-1.0))
    first = takeoff.reference(0.0)
    assert np.allclose(first.position, [0.2, 0.1, 0.0])
    assert np.allclose(first.velocity, 0.0)
    assert np.allclose(first.attitude, heading(-1.0))            # the parked heading
    climb_top = takeoff.reference(5.0)
    assert np.allclose(climb_top.position, [1.0, 0.0, 2.0])
    assert np.allclose(climb_top.attitude, heading(0.5))         # the mission's heading
    assert np.allclose(takeoff.reference(12.3).position, mission.reference(7.3).position)
    heights = [takeoff.reference(t).position[2] for t in np.linspace(0.0, 5.0, 101)]
    assert np.all(np.diff(heights) >= 0.0)              # no dip below the ground on the way


def test_hover_holds_a_pose() -> None:
    attitude = SO3.exp(np.array([0.1, 0.0, 0.7]))
    hover = Hover([1.0, 2.0, 3.0], attitude=attitude)
    reference = hover.reference(123.0)
    assert np.allclose(reference.position, [1.0, 2.0, 3.0])
    assert np.allclose(reference.attitude, attitude)
    assert np.allclose(Hover([0, 0, 1], yaw=np.pi / 2).reference(0.0).attitude[:, 0], [0, 1, 0])


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Waypoints([[0, 0, 1], [1, 1, 1]], speed_mps=0.0), "waypoint speed must be > 0"),
    (lambda: Waypoints([[0, 0], [1, 1]], speed_mps=1.0), "waypoints must be"),
    (lambda: FigureEight(period_s=-1.0), "figure-eight period must be > 0"),
    (lambda: FigureEight(ramp_s=float("nan")), "ramp must be >= 0"),
    (lambda: Hover([0.0, float("inf"), 1.0]), "hover position must be 3 finite numbers"),
    (lambda: TakeOff([0, 0, 0], Hover([0, 0, 1]), duration_s=0.0), "take-off duration"),
])
def test_bad_arguments_are_rejected_with_the_quantity_named(build, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()
