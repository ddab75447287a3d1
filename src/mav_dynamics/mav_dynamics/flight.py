"""Flight logic of the ``controller`` node, without ROS: what the node does between messages.

``FlightControl`` takes odometry and setpoints as numbers, owns the flight plan and, on each
``tick``, returns the actuator command (``FlightTick``). The node (``ros.controller_node``)
and the ROS-free closed-loop pipeline both run it, so they fly the same logic.

- Before the first accepted odometry, and until ``takeoff_delay_s`` after it, a tick is idle
  (rotor speeds 0: motors off; tilts at 0 clipped to their limits).
- The plan is then ``TakeOff``: a minimum-jerk climb from where the vehicle sits when the
  delay ends (latest odometry; turning from its heading to the mission's) to the start of
  the mission, then the mission.
- A setpoint before the take-off becomes the climb's goal (a hover there); once flying, it
  replaces the plan by a minimum-jerk move from the current reference to a hover there.
  A new mission likewise: before the take-off the climb goes to it; once flying, a move
  to its start, then the mission.
- Odometry with non-finite fields, a non-unit quaternion, huge values or a stamp not after
  the last accepted one is counted per reason and ignored.
- Stale odometry: control goes on with the last accepted odometry as it is (no
  extrapolation); ``status`` reports ERROR, since a multirotor has no safe open-loop command.

Times are integer nanoseconds of one clock (the node clock: sim time in simulation); plan
time is seconds since the end of the take-off delay.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from mav_dynamics.allocation import AllocationStatus, ControlAllocator
from mav_dynamics.controller import ControlOutput, TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.trajectories import (
    Hover,
    MinimumJerkMove,
    TakeOff,
    Trajectory,
    heading,
    rest_to_rest_duration,
)
from mav_dynamics.vehicle import ControllerGains, FloatArray, Vehicle
from mav_geometry import quaternion
from mav_geometry.shown import shown

OK, WARN, ERROR = 0, 1, 2
"""Status levels, as ``diagnostic_msgs/DiagnosticStatus`` numbers them."""
QUATERNION_TOLERANCE = 1e-3
"""Largest accepted | |q| - 1 | of a received quaternion (it is then normalised)."""
LARGEST_POSITION_M = 1e7
"""Largest accepted |coordinate| of a received position, m (beyond the Earth's radius from
the map origin): the control law squares errors, so 1e300 m would become an infinite
wrench."""
LARGEST_RATE = 1e4
"""Largest accepted |component| of a received twist (m/s and rad/s), for the same reason."""
SHORTEST_SETPOINT_MOVE_S = 1.0
"""Least duration of a move to a new setpoint or plan, s: also bounds the braking from speed."""
GAIN_KEYS = tuple(field.name for field in fields(ControllerGains))
"""Keys of the gains (``position``, ``velocity``, ``attitude``, ``angular_rate``)."""

Vector = Sequence[float] | FloatArray


def resolve_gains(vehicle: Vehicle, overrides: Mapping[str, FloatArray]) -> ControllerGains:
    """The vehicle file's gains with ``overrides`` (``GAIN_KEYS`` key -> 3 gains) in their
    place; ValueError naming the missing ``gains.*`` keys if the file has no gains and the
    overrides do not give all of them."""
    missing = [f"gains.{key}" for key in GAIN_KEYS if key not in overrides]
    if vehicle.gains is None and missing:
        needed = sorted(f"gains.{key}" for key in GAIN_KEYS)
        raise ValueError(f"parameters {missing} are not set: vehicle {shown(vehicle.name)} "
                         f"has no controller gains, so all of {needed} are needed")
    return ControllerGains(**{key: overrides[key] if key in overrides else getattr(
        vehicle.gains, key) for key in GAIN_KEYS})


def unit_quaternion(q: FloatArray) -> bool:
    """Whether a finite quaternion is unit within ``QUATERNION_TOLERANCE`` (components
    are checked first: squaring 1e200 would overflow)."""
    return bool(np.abs(q).max() <= 2.0
                and abs(np.linalg.norm(q) - 1.0) <= QUATERNION_TOLERANCE)


def odometry_rejection(stamp_ns: int, orientation_xyzw: FloatArray, position: FloatArray,
                       twist: FloatArray, last_stamp_ns: int | None) -> str | None:
    """Why an odometry sample cannot be used (a diagnostics counter name), or None;
    ``last_stamp_ns`` is the stamp of the last accepted sample (None before any)."""
    if not (np.isfinite(orientation_xyzw).all() and np.isfinite(position).all()
            and np.isfinite(twist).all()):
        return "non_finite"
    if not unit_quaternion(orientation_xyzw):
        return "non_unit_quaternion"
    if (np.abs(position).max() > LARGEST_POSITION_M
            or np.abs(twist).max() > LARGEST_RATE):
        return "out_of_range"
    if last_stamp_ns is not None:
        if stamp_ns < last_stamp_ns:
            return "stamp_backwards"
        if stamp_ns == last_stamp_ns:
            return "stamp_duplicate"
    return None


def setpoint_rejection(position: FloatArray, orientation_xyzw: FloatArray) -> str | None:
    """Why a setpoint cannot be flown to (a diagnostics counter name), or None; the frame
    is the caller's to check."""
    if not (np.isfinite(position).all() and np.isfinite(orientation_xyzw).all()):
        return "non_finite"
    if not unit_quaternion(orientation_xyzw):
        return "non_unit_quaternion"
    if np.abs(position).max() > LARGEST_POSITION_M:
        return "out_of_range"
    return None


class MoveThen:
    """``move`` (from its start time) and, from its end, ``trajectory`` started there."""

    def __init__(self, move: MinimumJerkMove, trajectory: Trajectory) -> None:
        self.move = move
        self.trajectory = trajectory
        self._end = move.start_time + move.duration

    def reference(self, t: float) -> TrackingReference:
        if t < self._end:
            return self.move.reference(t)
        return self.trajectory.reference(t - self._end)


@dataclass(frozen=True)
class FlightTick:
    """One control tick's command and what it came from."""

    rotor_speeds: FloatArray
    """Rotor speed commands, rad/s (rotor file order)."""
    tilt_angles: FloatArray
    """Tilt angle commands, rad (empty without tilting rotors)."""
    output: ControlOutput | None
    """The controller's wrench and errors; None when idle (motors off: before odometry and
    during the take-off delay)."""
    reference: TrackingReference | None
    """The flight plan's reference at this tick; None when idle."""


class FlightControl:
    """Odometry and setpoints in, one actuator command per ``tick`` out (see the module).

    ``speed_mps`` (peak speed of setpoint moves and moves to a new mission, m/s) and
    ``takeoff_duration_s`` (the climb, s; read when the climb starts) may be set at any
    time. ValueError if the vehicle cannot be allocated or controlled."""

    def __init__(self, model: TreeModel, gains: ControllerGains, mission: Trajectory, *,
                 plan_name: str, rate_hz: float, takeoff_delay_s: float,
                 takeoff_duration_s: float, speed_mps: float) -> None:
        self.allocator = ControlAllocator(model)
        self.controller = TrackingController(model, gains, rank=self.allocator.rank)
        self.period_s = 1.0 / rate_hz
        self.takeoff_delay_s = takeoff_delay_s
        self.takeoff_duration_s = takeoff_duration_s
        self.speed_mps = speed_mps
        self._mission = mission
        self._plan_name = plan_name
        self.plan: Trajectory | None = None
        """The take-off and mission, built when the climb starts (None before)."""
        self._plan_start_ns: int | None = None
        self._state: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self.odometry_stamp_ns: int | None = None
        """Stamp of the last accepted odometry (None before any)."""
        self.rejected_odometry: Counter[str] = Counter()
        self.rejected_setpoints: Counter[str] = Counter()
        self._idle_speeds = np.zeros(model.rotor_count)
        self._idle_tilts = np.clip(0.0, self.allocator.tilt_min, self.allocator.tilt_max)
        self._idle_speeds.flags.writeable = self._idle_tilts.flags.writeable = False  # shared
        self._tilt_command = self._idle_tilts.copy()
        self._last_status: tuple[AllocationStatus, ControlOutput] | None = None
        self._rejections_reported = 0
        self._saturated_ticks = 0
        self._ticks = 0

    @property
    def mission(self) -> Trajectory:
        """What is flown after take-off (``set_mission``; a setpoint makes it a hover)."""
        return self._mission

    @property
    def plan_name(self) -> str:
        """Name of the mission: the one given to ``set_mission``, or ``setpoint``."""
        return self._plan_name

    # --- inputs -------------------------------------------------------------------------

    def odometry(self, stamp_ns: int, now_ns: int, orientation_xyzw: Vector, position: Vector,
                 twist: Vector) -> str | None:
        """Take an odometry sample: attitude R^0_b as ``[x, y, z, w]``, position p^0_b (m,
        world), body twist ``(omega, v)`` (rad/s, m/s). Returns None if accepted, else the
        reason, counted in ``rejected_odometry``. The first accepted sample at ``now_ns``
        starts the take-off delay."""
        orientation = np.array(orientation_xyzw, dtype=float)
        position_m = np.array(position, dtype=float)    # copies: the caller may reuse its own
        body_twist = np.array(twist, dtype=float)
        reason = odometry_rejection(stamp_ns, orientation, position_m, body_twist,
                                    self.odometry_stamp_ns)
        if reason is not None:
            self.rejected_odometry[reason] += 1
            return reason
        rotation = quaternion.to_matrix(orientation / np.linalg.norm(orientation))
        self._state = (rotation, position_m, body_twist)
        self.odometry_stamp_ns = stamp_ns
        if self._plan_start_ns is None:
            self._plan_start_ns = now_ns + round(self.takeoff_delay_s * 1e9)
        return None

    def set_setpoint(self, now_ns: int, position: Vector, orientation_xyzw: Vector) -> str | None:
        """Fly to a hover at ``position`` (m, world) with attitude ``orientation_xyzw``
        (see the module). Returns None if accepted, else the reason, counted in
        ``rejected_setpoints``. The caller checks the frame."""
        target = np.array(position, dtype=float)
        orientation = np.array(orientation_xyzw, dtype=float)
        reason = setpoint_rejection(target, orientation)
        if reason is not None:
            self.rejected_setpoints[reason] += 1
            return reason
        attitude = quaternion.to_matrix(orientation / np.linalg.norm(orientation))
        self._plan_name = "setpoint"
        time_s = self._plan_time(now_ns)
        if self.plan is None or time_s is None:
            self._mission = Hover(target, attitude=attitude)   # the climb's goal
        else:
            self.plan = self._move(self.plan.reference(time_s), target, time_s, attitude)
        return None

    def set_mission(self, now_ns: int, mission: Trajectory, plan_name: str) -> None:
        """Fly ``mission`` (named ``plan_name``) instead: once flying, a minimum-jerk move
        from the current reference to its start, then the mission; before the take-off the
        climb will go there anyway."""
        self._mission = mission
        self._plan_name = plan_name
        time_s = self._plan_time(now_ns)
        if self.plan is None or time_s is None:
            return
        current = self.plan.reference(time_s)
        start = mission.reference(0.0)
        move = self._move(current, start.position, time_s, start.attitude)
        self.plan = MoveThen(move, mission)

    def set_gains(self, gains: ControllerGains) -> None:
        """Control with ``gains`` from the next tick."""
        self.controller.gains = gains

    def _move(self, current: TrackingReference, target: FloatArray, time_s: float,
              attitude: FloatArray) -> MinimumJerkMove:
        """Rest-to-rest move from ``current`` at plan time ``time_s`` at ``speed_mps`` peak,
        lasting at least ``SHORTEST_SETPOINT_MOVE_S``."""
        distance = float(np.linalg.norm(target - current.position))
        duration = max(rest_to_rest_duration(distance, self.speed_mps), SHORTEST_SETPOINT_MOVE_S)
        return MinimumJerkMove(current, target, duration, time_s, attitude)

    # --- control tick ---------------------------------------------------------------------

    def _plan_time(self, now_ns: int) -> float | None:
        """Flight-plan time (s) at ``now_ns``: < 0 during the take-off delay, None before the
        first odometry."""
        if self._plan_start_ns is None:
            return None
        return (now_ns - self._plan_start_ns) * 1e-9

    def _takeoff(self, rotation: FloatArray, position: FloatArray) -> TakeOff:
        """Climb from where the vehicle sits, turning from its heading, to the mission's start.

        Built from the odometry at the end of the take-off delay, not the first one: an
        estimator's first outputs may still be settling."""
        yaw = math.atan2(rotation[1, 0], rotation[0, 0])
        return TakeOff(position, self._mission, self.takeoff_duration_s, heading(yaw))

    def tick(self, now_ns: int) -> FlightTick:
        """The command at ``now_ns`` (call once per ``period_s``: tilt commands are
        rate-limited over that period)."""
        self._ticks += 1
        plan_time = self._plan_time(now_ns)
        if self._state is None or plan_time is None or plan_time < 0.0:
            return FlightTick(self._idle_speeds, self._idle_tilts, None, None)
        if self.plan is None:
            self.plan = self._takeoff(*self._state[:2])
        reference = self.plan.reference(plan_time)
        output = self.controller.update(*self._state, reference)
        tilting = self._tilt_command.size > 0
        allocation = self.allocator.allocate(
            output.wrench, self._tilt_command if tilting else None,
            self.period_s if tilting else None)
        self._tilt_command = allocation.tilt_angles
        self._saturated_ticks += allocation.status.saturated
        self._last_status = (allocation.status, output)
        return FlightTick(allocation.rotor_speeds, allocation.tilt_angles, output, reference)

    # --- status ---------------------------------------------------------------------------

    def status(self, now_ns: int, odometry_timeout_s: float) -> tuple[int, str, dict[str, str]]:
        """Level (``OK``, ``WARN``, ``ERROR``), one-line summary and key values at ``now_ns``;
        odometry older than ``odometry_timeout_s`` is stale. Saturation and new rejections
        count since the previous call: each call starts a new reporting window."""
        values = {"trajectory": self._plan_name}
        rejections = sum(self.rejected_odometry.values())
        new_rejections = rejections - self._rejections_reported
        self._rejections_reported = rejections
        saturated_ticks, ticks = self._saturated_ticks, self._ticks
        self._saturated_ticks = self._ticks = 0
        values.update({f"rejected_odometry_{k}": str(n) for k, n in
                       sorted(self.rejected_odometry.items())})
        values.update({f"rejected_setpoint_{k}": str(n) for k, n in
                       sorted(self.rejected_setpoints.items())})
        if self.odometry_stamp_ns is None:
            return OK, "waiting for odometry (motors off)", values
        age = (now_ns - self.odometry_stamp_ns) * 1e-9
        values["odometry_age_s"] = f"{age:.4f}"
        plan_time = self._plan_time(now_ns)
        if plan_time is None or plan_time < 0.0:
            wait = 0.0 if plan_time is None else -plan_time
            return OK, f"waiting for take-off in {wait:.2f} s", values
        if self._last_status is not None:
            status, output = self._last_status
            values.update({
                "allocation_saturated": str(status.saturated),
                "saturated_rotors": str(np.flatnonzero(status.saturated_rotors).tolist()),
                "saturated_ticks": f"{saturated_ticks}/{ticks}",
                "unallocated_wrench_norm": f"{np.linalg.norm(status.unallocated_wrench):.4g}",
                "position_error_m": f"{np.linalg.norm(output.position_error):.4f}"})
        if age > odometry_timeout_s:
            return ERROR, f"odometry stale ({age:.2f} s): flying on the last odometry", values
        if saturated_ticks:
            return WARN, "allocation saturated", values
        if new_rejections:
            return WARN, f"flying; {new_rejections} odometry rejected", values
        return OK, "flying", values
