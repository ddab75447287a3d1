"""Reference trajectories for the tracking controller (world ENU, SI units, no ROS).

Every trajectory answers ``reference(t)`` with a ``TrackingReference``: position (m),
velocity (m/s), acceleration (m/s^2) and jerk (m/s^3) of the body origin in the world,
attitude R^0_b (a heading rotation about z for the flight plans here) and its body
angular velocity/acceleration. Derivatives are analytic, so the controller's
feedforward is exact. Time ``t`` (s) is trajectory time: 0 is where the plan starts;
before it every trajectory holds its start, after its end it holds its last point.

- ``Hover``: a fixed pose.
- ``MinimumJerkMove``: quintic from any position/velocity/acceleration to rest at a
  target pose, attitude interpolated along the geodesic with the same profile.
- ``Waypoints``: rest-to-rest minimum-jerk segments through a list of points.
- ``FigureEight``: Lissajous ``x = A sin(phi)``, ``y = (A/2) sin(2 phi)`` whose phase
  ``phi`` speeds up smoothly from rest (C^3 ramp), so it starts with zero velocity.
- ``TakeOff``: a minimum-jerk climb from where the vehicle sits to the start of another
  trajectory, then that trajectory (velocity and acceleration continuous at the junction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from mav_dynamics.controller import TrackingReference
from mav_dynamics.vehicle import FloatArray
from mav_geometry.groups import SO3

MINIMUM_JERK_PEAK_SPEED = 1.875
"""Peak speed of a rest-to-rest minimum-jerk move over its mean speed (distance/duration)."""


class Trajectory(Protocol):
    """Anything the controller can track: ``reference(t)`` at trajectory time t (s)."""

    def reference(self, t: float) -> TrackingReference:
        """Desired state at time ``t`` (s)."""
        ...


def heading(yaw: float) -> FloatArray:
    """R^0_b of a level body with heading ``yaw`` (rad, about ENU z from east)."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _vector3(value: Sequence[float] | FloatArray, name: str) -> FloatArray:
    array = np.asarray(value, dtype=float)
    if array.shape != (3,) or not np.isfinite(array).all():
        raise ValueError(f"{name} must be 3 finite numbers (m), got {value!r}")
    return array


def _positive(value: float, name: str, unit: str) -> float:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be > 0 {unit}, got {value!r}")
    return float(value)


class Hover:
    """Hold ``position`` (m, ENU) with heading ``yaw`` (rad), or with ``attitude`` (R^0_b)
    when given (fully actuated vehicles track all of it, others its heading)."""

    def __init__(self, position: Sequence[float] | FloatArray, yaw: float = 0.0,
                 attitude: FloatArray | None = None) -> None:
        self._reference = TrackingReference(
            _vector3(position, "hover position"),
            attitude=heading(yaw) if attitude is None else np.asarray(attitude, dtype=float))

    def reference(self, t: float) -> TrackingReference:
        return self._reference


class MinimumJerkMove:
    """From ``start`` (its position, velocity, acceleration, attitude) at ``start_time`` (s) to
    rest at ``target`` (m) and ``target_attitude`` after ``duration`` (s).

    Each axis is the quintic with those six boundary values; the attitude follows
    ``R0 exp(s(tau) log(R0^T R1))`` with the rest-to-rest profile ``s`` (the start's angular
    rates are not matched: the flight plans start and end every turn at rest).
    """

    def __init__(self, start: TrackingReference, target: Sequence[float] | FloatArray,
                 duration: float, start_time: float = 0.0,
                 target_attitude: FloatArray | None = None) -> None:
        self.duration = _positive(duration, "move duration", "s")
        self.start_time = float(start_time)
        self.start = start
        self.target = _vector3(target, "move target")
        span = self.duration
        rise = self.target - start.position
        velocity_term, acceleration_term = start.velocity * span, start.acceleration * span**2
        # Coefficients of p(tau) = sum c_k tau^k, tau = (t - start_time) / duration.
        self._coefficients = np.array([
            start.position, velocity_term, 0.5 * acceleration_term,
            10.0 * rise - 6.0 * velocity_term - 1.5 * acceleration_term,
            -15.0 * rise + 8.0 * velocity_term + 1.5 * acceleration_term,
            6.0 * rise - 3.0 * velocity_term - 0.5 * acceleration_term])
        self.target_attitude = start.attitude if target_attitude is None else target_attitude
        self._rotation_vector = SO3.log(start.attitude.T @ self.target_attitude)
        self._end = TrackingReference(self.target, attitude=self.target_attitude)

    def reference(self, t: float) -> TrackingReference:
        tau = (t - self.start_time) / self.duration
        if tau >= 1.0:
            return self._end
        if tau <= 0.0:
            return self.start
        span = self.duration
        c = self._coefficients
        position = c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))))
        velocity = (c[1] + tau * (2 * c[2] + tau * (3 * c[3] + tau * (4 * c[4] + tau * 5 * c[5]))))
        acceleration = 2 * c[2] + tau * (6 * c[3] + tau * (12 * c[4] + tau * 20 * c[5]))
        jerk = 6 * c[3] + tau * (24 * c[4] + tau * 60 * c[5])
        s, ds, dds = _rest_to_rest(tau)
        attitude = (self.start.attitude @ SO3.exp(s * self._rotation_vector)
                    if self._rotation_vector.any() else self.start.attitude)
        return TrackingReference(
            position, velocity / span, acceleration / span**2, jerk / span**3, attitude,
            angular_velocity=ds / span * self._rotation_vector,
            angular_acceleration=dds / span**2 * self._rotation_vector)


def _rest_to_rest(tau: float) -> tuple[float, float, float]:
    """Minimum-jerk profile ``s = 10 tau^3 - 15 tau^4 + 6 tau^5`` and its first two
    derivatives in tau: 0 -> 1 with zero rate and curvature at both ends."""
    return (tau**3 * (10.0 + tau * (-15.0 + 6.0 * tau)),
            30.0 * tau**2 * (1.0 - tau) ** 2,
            60.0 * tau * (1.0 + tau * (-3.0 + 2.0 * tau)))


def rest_to_rest_duration(distance: float, speed: float) -> float:
    """Duration (s) of a rest-to-rest minimum-jerk move over ``distance`` (m) whose peak
    speed is ``speed`` (m/s)."""
    return MINIMUM_JERK_PEAK_SPEED * distance / speed


class Waypoints:
    """Through ``points`` (m, ENU, at least one) in order, stopping at each; every segment
    is a rest-to-rest minimum-jerk move with peak speed ``speed_mps``; heading ``yaw`` (rad).
    Repeated consecutive points are skipped."""

    def __init__(self, points: Sequence[Sequence[float]] | FloatArray, speed_mps: float,
                 yaw: float = 0.0) -> None:
        speed = _positive(speed_mps, "waypoint speed", "m/s")
        array = np.asarray(points, dtype=float)
        if array.ndim != 2 or array.shape[1] != 3 or array.shape[0] < 1 or not np.isfinite(
                array).all():
            raise ValueError(f"waypoints must be at least one point of 3 finite numbers (m), "
                             f"got {points!r}")
        attitude = heading(yaw)
        self._hold = Hover(array[0], yaw)
        self.moves: list[MinimumJerkMove] = []
        elapsed = 0.0
        here = array[0]
        for point in array[1:]:
            distance = float(np.linalg.norm(point - here))
            if distance == 0.0:
                continue
            duration = rest_to_rest_duration(distance, speed)
            rest = TrackingReference(here, attitude=attitude)
            self.moves.append(MinimumJerkMove(rest, point, duration, elapsed))
            elapsed += duration
            here = point
        self.duration = elapsed
        """Time (s) at which the last point is reached."""
        self._starts = [move.start_time for move in self.moves]

    def reference(self, t: float) -> TrackingReference:
        if not self.moves:
            return self._hold.reference(t)
        index = max(0, int(np.searchsorted(self._starts, t, side="right")) - 1)
        return self.moves[index].reference(t)


class FigureEight:
    """Lissajous figure-eight at ``height_m`` (m) around ``center`` (x, y in m, ENU):
    ``x = A sin(phi)``, ``y = (A/2) sin(2 phi)`` with ``A = size_m``, heading ``yaw`` (rad).

    The phase rate rises from 0 to ``2 pi / period_s`` over ``ramp_s`` (s) with the
    minimum-jerk profile (so position to jerk are continuous and the start is at rest at
    the centre); ``ramp_s = 0`` starts at full speed.
    """

    def __init__(self, center: Sequence[float] = (0.0, 0.0), size_m: float = 2.0,
                 period_s: float = 12.0, height_m: float = 1.5, yaw: float = 0.0,
                 ramp_s: float | None = None) -> None:
        self.size = _positive(size_m, "figure-eight size", "m")
        self.period = _positive(period_s, "figure-eight period", "s")
        self.ramp = self.period if ramp_s is None else float(ramp_s)
        if not (math.isfinite(self.ramp) and self.ramp >= 0.0):
            raise ValueError(f"figure-eight ramp must be >= 0 s, got {ramp_s!r}")
        self.rate = 2.0 * math.pi / self.period
        self.origin = _vector3([*center, height_m], "figure-eight centre and height")
        self.attitude = heading(yaw)

    def phase(self, t: float) -> tuple[float, float, float, float]:
        """Phase (rad) and its first three time derivatives at ``t`` (s)."""
        w, ramp = self.rate, self.ramp
        if t < 0.0:
            return 0.0, 0.0, 0.0, 0.0
        if t >= ramp:
            return w * (t - 0.5 * ramp), w, 0.0, 0.0  # the ramp's integral is ramp / 2
        tau = t / ramp
        s, ds, dds = _rest_to_rest(tau)
        integral = tau**4 * (2.5 + tau * (-3.0 + tau))
        return w * ramp * integral, w * s, w * ds / ramp, w * dds / ramp**2

    def reference(self, t: float) -> TrackingReference:
        phi, d1, d2, d3 = self.phase(t)
        a, b = self.size, 0.5 * self.size
        sin1, cos1, sin2, cos2 = math.sin(phi), math.cos(phi), math.sin(2 * phi), math.cos(
            2 * phi)
        # Derivatives of the shape in phi (x, y) then the chain rule through phi(t).
        shape = (np.array([a * sin1, b * sin2, 0.0]), np.array([a * cos1, 2 * b * cos2, 0.0]),
                 np.array([-a * sin1, -4 * b * sin2, 0.0]),
                 np.array([-a * cos1, -8 * b * cos2, 0.0]))
        return TrackingReference(
            position=self.origin + shape[0],
            velocity=shape[1] * d1,
            acceleration=shape[2] * d1**2 + shape[1] * d2,
            jerk=shape[3] * d1**3 + 3.0 * shape[2] * d1 * d2 + shape[1] * d3,
            attitude=self.attitude)


class TakeOff:
    """Climb from ``start_position`` (m, where the vehicle sits) to ``trajectory``'s start
    in ``duration_s`` (s, minimum jerk, rest to rest), then fly ``trajectory`` shifted by
    ``duration_s``. The trajectory must start at rest (all of this module's do), so velocity
    and acceleration are continuous at the junction. ``start_attitude`` (default: the
    trajectory's) turns into the trajectory's attitude during the climb, so a vehicle parked
    with another heading is not asked to spin round on the ground."""

    def __init__(self, start_position: Sequence[float] | FloatArray, trajectory: Trajectory,
                 duration_s: float, start_attitude: FloatArray | None = None) -> None:
        self.duration = _positive(duration_s, "take-off duration", "s")
        self.trajectory = trajectory
        first = trajectory.reference(0.0)
        ground = TrackingReference(
            _vector3(start_position, "take-off start"),
            attitude=first.attitude if start_attitude is None else start_attitude)
        self.climb = MinimumJerkMove(ground, first.position, self.duration,
                                     target_attitude=first.attitude)

    def reference(self, t: float) -> TrackingReference:
        if t < self.duration:
            return self.climb.reference(t)
        return self.trajectory.reference(t - self.duration)
