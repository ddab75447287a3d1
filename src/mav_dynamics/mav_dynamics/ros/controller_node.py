"""``controller`` node: the ROS shell of ``mav_dynamics.flight.FlightControl``.

The flight logic (odometry acceptance, take-off delay and climb, setpoints, plan changes,
the control tick, saturation bookkeeping and the status) lives in ``mav_dynamics.flight``,
which the ROS-free closed-loop pipeline runs too; this node declares the parameters and maps
their changes onto it, converts messages (``convert``), checks the setpoint frame and
publishes.

Each tick on the node clock (``mav_ros_common.ticks``: /clock-driven on sim time, a timer
on wall time) runs ``FlightControl.tick`` and publishes ``actuator_commands`` (JointState:
``rotor_i`` velocity = rotor speed in rad/s, ``tilt_i`` position = tilt angle in rad), and,
at ``telemetry_rate_hz``, ``controller/wrench`` (body wrench in ``base_link``) and
``controller/reference`` (Odometry in ``map`` of the plan's position and attitude, twist in
the reference body frame ``base_link_reference``); ``/diagnostics`` (status ``controller``)
every ``diagnostics_period_s``.

Idle ticks (before the first odometry and during ``takeoff_delay_s``: motors off) publish
the idle command too, so a lock-stepped simulator keeps advancing. The take-off, setpoint
moves (``controller/setpoint``, PoseStamped in ``map``; other frames are counted as
``frame_not_map`` here), odometry screening and stale odometry (ERROR, flying on): see
``mav_dynamics.flight``. Odometry is subscribed raw and read from its CDR; data that is not
plain CDR is counted as rejected odometry ``malformed`` here.

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

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from mav_dynamics import flight
from mav_dynamics.controller import ControlOutput, TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.ros import convert
from mav_dynamics.ros.parameters import (
    GAIN_PARAMETERS,
    MISSION_PARAMETERS,
    ODOMETRY_TOPICS,
    SPECS,
    ControllerSettings,
    controller_settings,
)
from mav_dynamics.trajectories import Trajectory
from mav_dynamics.vehicle import ControllerGains, FloatArray
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion
from mav_ros_common import diagnostics, stamps
from mav_ros_common.node_main import run_node, spin_events
from mav_ros_common.parameters import ParameterError, declare_parameters, show
from mav_ros_common.qos import RELIABLE_10
from mav_ros_common.resources import ShareNotFoundError, find_named_file
from mav_ros_common.ticks import create_ticker

NODE_NAME = "controller"


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

    def _gains(self, settings: ControllerSettings) -> ControllerGains:
        """The vehicle file's gains with the ``gains.*`` parameters given in their place."""
        try:
            return flight.resolve_gains(self.vehicle, settings.gain_overrides)
        except ValueError as error:
            raise ParameterError(str(error)) from error

    def _setup(self) -> None:
        values, settings = self.parameters.values, self.parameters.settings
        model = self._load(values["vehicle_file"])
        self.vehicle = model.vehicle
        self.vehicle_name = self.vehicle.name
        gains = self._gains(settings)
        try:
            self.flight = flight.FlightControl(
                model, gains, settings.mission, plan_name=values["trajectory"],
                rate_hz=values["rate_hz"], takeoff_delay_s=values["takeoff_delay_s"],
                takeoff_duration_s=values["takeoff_duration_s"], speed_mps=values["speed_mps"])
        except ValueError as error:
            raise ParameterError(f"parameter 'vehicle_file' = {show(values['vehicle_file'])} "
                                 f"is invalid: {error}", "vehicle_file") from error
        self._control_ticks = 0
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
        # Raw: the numbers are read from the CDR (convert.odometry_sample).
        self.create_subscription(Odometry, self.odometry_topic, self._on_odometry, RELIABLE_10,
                                 raw=True)
        self.create_subscription(PoseStamped, "controller/setpoint", self._on_setpoint,
                                 RELIABLE_10)
        self._next_diagnostics_ns: int | None = None
        create_ticker(self, self.flight.period_s, self._tick)

    @property
    def controller(self) -> TrackingController:
        """The tracking controller the core flies with."""
        return self.flight.controller

    @property
    def mission(self) -> Trajectory:
        """What is flown after take-off (``FlightControl.mission``)."""
        return self.flight.mission

    @property
    def plan_name(self) -> str:
        """The ``trajectory`` parameter, or ``setpoint`` (``FlightControl.plan_name``)."""
        return self.flight.plan_name

    # --- run-time parameter changes -------------------------------------------------------

    def _apply(self, settings: ControllerSettings, changed: frozenset[str]) -> None:
        """Make accepted parameter changes take effect (between two callbacks)."""
        if changed & GAIN_PARAMETERS:
            self.flight.set_gains(self._gains(settings))
        if "diagnostics_period_s" in changed:
            self._next_diagnostics_ns = None  # report now, then at the new period
        self.flight.speed_mps = self.parameters["speed_mps"]   # before a move is planned
        chosen = self.parameters["trajectory"]
        if changed & (MISSION_PARAMETERS[chosen] | {"trajectory"}):
            self.flight.set_mission(self._now_ns(), settings.mission, chosen)
        # odometry_timeout_s and telemetry_rate_hz are read where they are used.

    # --- inputs -------------------------------------------------------------------------

    def _on_odometry(self, raw: bytes) -> None:
        try:
            sample = convert.odometry_sample(raw)
        except ValueError:  # not plain CDR: no numbers to screen
            self.flight.rejected_odometry["malformed"] += 1
            return
        self.flight.odometry(sample.stamp_ns, self._now_ns(), sample.orientation,
                             sample.position, sample.twist)

    def _on_setpoint(self, message: PoseStamped) -> None:
        position, orientation = convert.pose_target(message)
        if message.header.frame_id not in ("", "map"):
            self.flight.rejected_setpoints["frame_not_map"] += 1
            return
        self.flight.set_setpoint(self._now_ns(), position, orientation)

    # --- control tick ---------------------------------------------------------------------

    def _now_ns(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    def _tick(self, now_ns: int) -> None:
        stamp = stamps.from_ns(now_ns)
        tick = self.flight.tick(now_ns)
        convert.fill_joint_state(self._command, stamp, tick.rotor_speeds, tick.tilt_angles)
        self.command_publisher.publish(self._command)
        if tick.output is not None and tick.reference is not None:
            self._publish_telemetry(stamp, tick.output, tick.reference)
        self._maybe_publish_diagnostics(now_ns, stamp)

    def _publish_telemetry(self, stamp: Any, output: ControlOutput,
                           reference: TrackingReference) -> None:
        """Wrench and reference on the first of every ``telemetry_every`` control ticks."""
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

    def diagnostic_status(self, now_ns: int) -> tuple[int, str, dict[str, str]]:
        """Level, summary and key values of the ``controller`` status (``FlightControl.status``
        with the odometry topic); starts a new reporting window."""
        level, summary, values = self.flight.status(now_ns,
                                                    self.parameters["odometry_timeout_s"])
        return level, summary, {"odometry_topic": self.odometry_topic, **values}


def main(args: list[str] | None = None) -> int:
    """Run the node until interrupted; exit codes as ``mav_ros_common.node_main``."""
    return run_node(ControllerNode, args, name=NODE_NAME, executor=EventsExecutor,
                    run=spin_events)


if __name__ == "__main__":
    sys.exit(main())
