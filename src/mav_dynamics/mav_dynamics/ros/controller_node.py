"""``controller`` node: trajectory -> SE(3) tracking controller -> control allocation.

Each tick of a timer on the node clock (sim time in simulation) takes the latest accepted
odometry, evaluates the flight plan, computes the body wrench (``TrackingController``) and
allocates it (``ControlAllocator``), then publishes ``actuator_commands`` (JointState:
``rotor_i`` velocity = rotor speed in rad/s, ``tilt_i`` position = tilt angle in rad),
and, at ``telemetry_rate_hz``, ``controller/wrench`` (body wrench in ``base_link``) and
``controller/reference`` (Odometry in ``map`` of the plan's position and attitude, twist in
the reference body frame ``base_link_reference``); ``/diagnostics`` (status ``controller``) every
``diagnostics_period_s``.

- Before the first odometry, and until ``takeoff_delay_s`` after it, every tick publishes the
  idle command (rotor speeds 0: motors off) so a lock-stepped simulator keeps advancing.
- The flight plan is ``TakeOff``: a minimum-jerk climb from where the vehicle sits when the
  delay ends (latest odometry; turning from its heading to the plan's) to the start of the
  chosen trajectory, then the trajectory.
- ``controller/setpoint`` (PoseStamped, ``map``) replaces the plan by a minimum-jerk move
  from the current reference to a hover at that pose (before take-off: the climb's goal).
- Odometry with non-finite fields, a non-unit quaternion or a stamp not after the last one
  is counted per reason, reported and ignored.
- Stale odometry (older than ``odometry_timeout_s``): the controller keeps flying on the
  last accepted odometry as it is (no extrapolation, the plan goes on) and reports ERROR;
  a multirotor has no safe open-loop command, so the node makes the fault loud instead.

Run-time parameter changes (``ros2 param set``; which ones are read-only: ``parameters``):
``gains.*`` replace the controller's gains from the next tick (an unset key keeps the
vehicle file's); a change of ``trajectory`` or of the chosen trajectory's parameters
rebuilds the mission and, once flying, flies a minimum-jerk move from the current
reference to the new mission's start (like a setpoint, which it replaces), then the mission;
before the take-off the climb goes to the new mission. The other parameters of other
trajectories are kept for when they are chosen. ``speed_mps``, ``odometry_timeout_s``,
``telemetry_rate_hz`` and ``diagnostics_period_s`` hold from the next tick.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState

from mav_dynamics.allocation import AllocationStatus, ControlAllocator
from mav_dynamics.controller import ControlOutput, TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.ros import convert
from mav_dynamics.ros.parameters import (
    GAIN_PARAMETERS,
    GAIN_UNITS,
    MISSION_PARAMETERS,
    ODOMETRY_TOPICS,
    SPECS,
    ControllerSettings,
    controller_settings,
)
from mav_dynamics.trajectories import (
    Hover,
    MinimumJerkMove,
    TakeOff,
    Trajectory,
    heading,
    rest_to_rest_duration,
)
from mav_dynamics.vehicle import ControllerGains, FloatArray
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion
from mav_ros_common import diagnostics
from mav_ros_common.node_main import run_node
from mav_ros_common.parameters import ParameterError, declare_parameters, show
from mav_ros_common.qos import RELIABLE_10
from mav_ros_common.resources import ShareNotFoundError, find_named_file

NODE_NAME = "controller"
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


def _unit(q: FloatArray) -> bool:
    """Whether a finite quaternion is unit within ``QUATERNION_TOLERANCE`` (components
    are checked first: squaring 1e200 would overflow)."""
    return bool(np.abs(q).max() <= 2.0
                and abs(np.linalg.norm(q) - 1.0) <= QUATERNION_TOLERANCE)


class _MoveThen:
    """``move`` (from its start time) and, from its end, ``trajectory`` started there."""

    def __init__(self, move: MinimumJerkMove, trajectory: Trajectory) -> None:
        self.move = move
        self.trajectory = trajectory
        self._end = move.start_time + move.duration

    def reference(self, t: float) -> TrackingReference:
        if t < self._end:
            return self.move.reference(t)
        return self.trajectory.reference(t - self._end)


class ControllerNode(Node):
    """The controller/allocator node; keyword arguments go to ``rclpy.node.Node``.

    Raises ``ParameterError`` on a bad parameter (see ``parameters``)."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(node_kwargs.pop("node_name", NODE_NAME), **node_kwargs)
        try:
            self.parameters = declare_parameters(self, SPECS, controller_settings)
            self._setup()
        except Exception:
            self.destroy_node()
            raise
        self.parameters.enable_updates(self._apply)

    def _load(self, name: str) -> TreeModel:
        """The vehicle model of parameter ``vehicle_file`` (ParameterError)."""
        try:
            vehicle = load_vehicle(find_named_file(name, "vehicles"))
            return TreeModel(vehicle)
        except (ValueError, ShareNotFoundError) as error:
            raise ParameterError(f"parameter 'vehicle_file' = {show(name)} is invalid: "
                                 f"{error}", "vehicle_file") from error

    def _gains(self, overrides: Mapping[str, FloatArray]) -> ControllerGains:
        """The vehicle file's gains with the ``gains.*`` parameters given in their place."""
        base = self.vehicle.gains
        missing = [f"gains.{key}" for key in GAIN_UNITS if key not in overrides]
        if base is None and missing:
            raise ParameterError(
                f"parameters {missing} are not set: vehicle '{self.vehicle.name}' has no "
                f"controller gains, so all of {sorted(GAIN_PARAMETERS)} are needed")
        return ControllerGains(**{key: overrides[key] if key in overrides else getattr(
            base, key) for key in GAIN_UNITS})

    def _setup(self) -> None:
        values, settings = self.parameters.values, self.parameters.settings
        model = self._load(values["vehicle_file"])
        self.vehicle = model.vehicle
        self.vehicle_name = self.vehicle.name
        try:
            self.allocator = ControlAllocator(model)
            self.controller = TrackingController(model, self._gains(settings.gain_overrides),
                                                 rank=self.allocator.rank)
        except ValueError as error:
            if isinstance(error, ParameterError):
                raise
            raise ParameterError(f"parameter 'vehicle_file' = {show(values['vehicle_file'])} "
                                 f"is invalid: {error}", "vehicle_file") from error
        self.mission = settings.mission
        self.plan_name: str = values["trajectory"]
        """What is flown after take-off: the ``trajectory`` parameter, or ``setpoint``."""
        self.plan: Trajectory | None = None
        """The take-off and mission, built when the climb starts (None before)."""
        self._plan_start_ns: int | None = None
        self._state: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self._state_stamp_ns: int | None = None
        self.rejected_odometry: Counter[str] = Counter()
        self.rejected_setpoints: Counter[str] = Counter()
        self._idle_speeds = np.zeros(model.rotor_count)
        self._idle_tilts = np.clip(0.0, self.allocator.tilt_min, self.allocator.tilt_max)
        self._tilt_command = self._idle_tilts.copy()
        self._period_s = 1.0 / values["rate_hz"]
        self._control_ticks = 0
        self._last_status: tuple[AllocationStatus, ControlOutput] | None = None
        self._rejections_reported = 0
        self._saturated_ticks = 0
        self._ticks = 0
        self._quaternion_cache: tuple[FloatArray, FloatArray] = (np.eye(3), np.array(
            [0.0, 0.0, 0.0, 1.0]))
        self._command = convert.joint_state_message(model.rotor_count, model.tilt_count)
        self._wrench = WrenchStamped()
        self._wrench.header.frame_id = "base_link"
        self._reference = Odometry()
        self._reference.header.frame_id = "map"
        self._reference.child_frame_id = "base_link_reference"  # twist in the reference body
        self.command_publisher = self.create_publisher(JointState, "actuator_commands",
                                                       RELIABLE_10)
        self.wrench_publisher = self.create_publisher(WrenchStamped, "controller/wrench",
                                                      RELIABLE_10)
        self.reference_publisher = self.create_publisher(Odometry, "controller/reference",
                                                         RELIABLE_10)
        self.diagnostics_publisher = diagnostics.create_publisher(self)
        self.odometry_topic = ODOMETRY_TOPICS[values["odometry_source"]]
        self.create_subscription(Odometry, self.odometry_topic, self._on_odometry, RELIABLE_10)
        self.create_subscription(PoseStamped, "controller/setpoint", self._on_setpoint,
                                 RELIABLE_10)
        self._next_diagnostics_ns: int | None = None
        self.create_timer(self._period_s, self._tick)

    # --- run-time parameter changes -------------------------------------------------------

    def _apply(self, settings: ControllerSettings, changed: frozenset[str]) -> None:
        """Make accepted parameter changes take effect (between two callbacks)."""
        if changed & GAIN_PARAMETERS:
            self.controller.gains = self._gains(settings.gain_overrides)
        if "diagnostics_period_s" in changed:
            self._next_diagnostics_ns = None  # report now, then at the new period
        chosen = self.parameters["trajectory"]
        if changed & (MISSION_PARAMETERS[chosen] | {"trajectory"}):
            self.mission = settings.mission
            self.plan_name = chosen
            self._fly_to_mission()
        # speed_mps, odometry_timeout_s and telemetry_rate_hz are read where they are used.

    def _fly_to_mission(self) -> None:
        """Once flying, a minimum-jerk move from the current reference to the mission's
        start, then the mission; before the take-off the climb will go there anyway."""
        time_s = self._plan_time(self._now_ns())
        if self.plan is None or time_s is None:
            return
        current = self.plan.reference(time_s)
        start = self.mission.reference(0.0)
        distance = float(np.linalg.norm(start.position - current.position))
        duration = max(rest_to_rest_duration(distance, self.parameters["speed_mps"]),
                       SHORTEST_SETPOINT_MOVE_S)
        self.plan = _MoveThen(MinimumJerkMove(current, start.position, duration, time_s,
                                              start.attitude), self.mission)

    # --- inputs -------------------------------------------------------------------------

    def _on_odometry(self, message: Odometry) -> None:
        sample = convert.odometry_sample(message)
        reason = self._odometry_rejection(sample)
        if reason is not None:
            self.rejected_odometry[reason] += 1
            return
        rotation = quaternion.to_matrix(sample.orientation / np.linalg.norm(sample.orientation))
        self._state = (rotation, sample.position, sample.twist)
        self._state_stamp_ns = sample.stamp_ns
        if self._plan_start_ns is None:
            self._plan_start_ns = self._now_ns() + round(
                self.parameters["takeoff_delay_s"] * 1e9)

    def _odometry_rejection(self, sample: convert.OdometrySample) -> str | None:
        """Why a sample cannot be used (a diagnostics counter name), or None."""
        if not (np.isfinite(sample.orientation).all() and np.isfinite(sample.position).all()
                and np.isfinite(sample.twist).all()):
            return "non_finite"
        if not _unit(sample.orientation):
            return "non_unit_quaternion"
        if (np.abs(sample.position).max() > LARGEST_POSITION_M
                or np.abs(sample.twist).max() > LARGEST_RATE):
            return "out_of_range"
        if self._state_stamp_ns is not None:
            if sample.stamp_ns < self._state_stamp_ns:
                return "stamp_backwards"
            if sample.stamp_ns == self._state_stamp_ns:
                return "stamp_duplicate"
        return None

    def _on_setpoint(self, message: PoseStamped) -> None:
        position, orientation = convert.pose_target(message)
        if message.header.frame_id not in ("", "map"):
            self.rejected_setpoints["frame_not_map"] += 1
            return
        if not (np.isfinite(position).all() and np.isfinite(orientation).all()):
            self.rejected_setpoints["non_finite"] += 1
            return
        if not _unit(orientation):
            self.rejected_setpoints["non_unit_quaternion"] += 1
            return
        if np.abs(position).max() > LARGEST_POSITION_M:
            self.rejected_setpoints["out_of_range"] += 1
            return
        attitude = quaternion.to_matrix(orientation / np.linalg.norm(orientation))
        self.plan_name = "setpoint"
        time_s = self._plan_time(self._now_ns())
        if self.plan is None or time_s is None:
            self.mission = Hover(position, attitude=attitude)   # the climb's goal
            return
        current = self.plan.reference(time_s)
        distance = float(np.linalg.norm(position - current.position))
        duration = max(rest_to_rest_duration(distance, self.parameters["speed_mps"]),
                       SHORTEST_SETPOINT_MOVE_S)
        self.plan = MinimumJerkMove(current, position, duration, time_s, attitude)

    def _takeoff(self, rotation: FloatArray, position: FloatArray) -> TakeOff:
        """Climb from where the vehicle sits, turning from its heading, to the mission's start.

        Built from the odometry at the end of the take-off delay, not the first one: an
        estimator's first outputs may still be settling."""
        yaw = math.atan2(rotation[1, 0], rotation[0, 0])
        return TakeOff(position, self.mission, self.parameters["takeoff_duration_s"],
                       heading(yaw))

    # --- control tick ---------------------------------------------------------------------

    def _now_ns(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    def _plan_time(self, now_ns: int) -> float | None:
        """Flight-plan time (s) at ``now_ns``: < 0 during the take-off delay, None before the
        first odometry."""
        if self._plan_start_ns is None:
            return None
        return (now_ns - self._plan_start_ns) * 1e-9

    def _tick(self) -> None:
        now = self.get_clock().now()
        now_ns = int(now.nanoseconds)
        stamp = now.to_msg()
        self._ticks += 1
        plan_time = self._plan_time(now_ns)
        if self._state is None or plan_time is None or plan_time < 0.0:
            convert.fill_joint_state(self._command, stamp, self._idle_speeds, self._idle_tilts)
            self.command_publisher.publish(self._command)
        else:
            if self.plan is None:
                self.plan = self._takeoff(*self._state[:2])
            self._control(stamp, self.plan.reference(plan_time), *self._state)
        self._maybe_publish_diagnostics(now_ns, stamp)

    def _control(self, stamp: Any, reference: TrackingReference, rotation: FloatArray,
                 position: FloatArray, twist: FloatArray) -> None:
        output = self.controller.update(rotation, position, twist, reference)
        tilting = self._tilt_command.size > 0
        allocation = self.allocator.allocate(
            output.wrench, self._tilt_command if tilting else None,
            self._period_s if tilting else None)
        self._tilt_command = allocation.tilt_angles
        status = allocation.status
        self._saturated_ticks += status.saturated
        self._last_status = (status, output)
        convert.fill_joint_state(self._command, stamp, allocation.rotor_speeds,
                                 allocation.tilt_angles)
        self.command_publisher.publish(self._command)
        self._control_ticks += 1
        if (self._control_ticks - 1) % self.parameters.settings.telemetry_every:
            return
        convert.fill_wrench(self._wrench, stamp, output.wrench)
        self.wrench_publisher.publish(self._wrench)
        convert.fill_reference(self._reference, stamp, reference,
                               self._orientation(reference.attitude))
        self.reference_publisher.publish(self._reference)

    def _orientation(self, attitude: FloatArray) -> FloatArray:
        """``[x, y, z, w]`` of the reference attitude; cached (plans rarely turn)."""
        matrix, value = self._quaternion_cache
        if not np.array_equal(matrix, attitude):
            value = quaternion.from_matrix(attitude)
            self._quaternion_cache = (attitude, value)
        return value

    # --- diagnostics ----------------------------------------------------------------------

    def _maybe_publish_diagnostics(self, now_ns: int, stamp: Any) -> None:
        if self._next_diagnostics_ns is not None and now_ns < self._next_diagnostics_ns:
            return
        self._next_diagnostics_ns = now_ns + round(
            self.parameters["diagnostics_period_s"] * 1e9)
        level, summary, values = self.diagnostic_status(now_ns)
        self.diagnostics_publisher.publish(diagnostics.diagnostic_array(
            stamp, diagnostics.status(diagnostics.status_name(self), level, summary, values,
                                      self.vehicle_name)))
        self._saturated_ticks = 0
        self._ticks = 0

    def diagnostic_status(self, now_ns: int) -> tuple[bytes, str, dict[str, str]]:
        """Level, summary and key values of the ``controller`` status."""
        values = {"odometry_topic": self.odometry_topic, "trajectory": self.plan_name}
        rejections = sum(self.rejected_odometry.values())
        new_rejections = rejections - self._rejections_reported
        self._rejections_reported = rejections
        values.update({f"rejected_odometry_{k}": str(n) for k, n in
                       sorted(self.rejected_odometry.items())})
        values.update({f"rejected_setpoint_{k}": str(n) for k, n in
                       sorted(self.rejected_setpoints.items())})
        if self._state_stamp_ns is None:
            return diagnostics.OK, "waiting for odometry (motors off)", values
        age = (now_ns - self._state_stamp_ns) * 1e-9
        values["odometry_age_s"] = f"{age:.4f}"
        plan_time = self._plan_time(now_ns)
        if plan_time is None or plan_time < 0.0:
            wait = 0.0 if plan_time is None else -plan_time
            return diagnostics.OK, f"waiting for take-off in {wait:.2f} s", values
        if self._last_status is not None:
            status, output = self._last_status
            values.update({
                "allocation_saturated": str(status.saturated),
                "saturated_rotors": str(np.flatnonzero(status.saturated_rotors).tolist()),
                "saturated_ticks": f"{self._saturated_ticks}/{self._ticks}",
                "unallocated_wrench_norm": f"{np.linalg.norm(status.unallocated_wrench):.4g}",
                "position_error_m": f"{np.linalg.norm(output.position_error):.4f}"})
        if age > self.parameters["odometry_timeout_s"]:
            return (diagnostics.ERROR, f"odometry stale ({age:.2f} s): flying on the last "
                    "odometry", values)
        if self._saturated_ticks:
            return diagnostics.WARN, "allocation saturated", values
        if new_rejections:
            return diagnostics.WARN, f"flying; {new_rejections} odometry rejected", values
        return diagnostics.OK, "flying", values


def main(args: list[str] | None = None) -> int:
    """Run the node until interrupted; exit codes as ``mav_ros_common.node_main``."""
    return run_node(ControllerNode, args, name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
