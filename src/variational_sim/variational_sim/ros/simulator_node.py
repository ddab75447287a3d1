"""ROS 2 node ``simulator``: the vehicle simulator with the contract's topics, services and
lock-step API (``advance``, ``waiting_for_command``, ``sim_time``, ``real_time_factor``,
``finished``) and ``drive``, the loop that runs it.

The node is a thin shell around ``VehicleSimulator``: each physics step it publishes only
what fell due (IMU, GNSS after its latency, ground truth, rotor speeds with the markers,
diagnostics at their own rates) and /clock once per lock-step boundary, which is all that
sim-time timers need (each /clock message costs every sim-time node a callback). ``main()``
runs it standalone (``drive`` with an events executor) until ``duration_s`` of sim time.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState, NavSatFix
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from variational_sim.ros import convert, parameters
from variational_sim.ros.qos import RELIABLE_10, SENSOR_DATA, TF, TF_STATIC
from variational_sim.sensors.gnss import GnssFix
from variational_sim.vehicle_sim.simulator import StepOutput, VehicleSimulator

MAP_FRAME = "map"
BASE_FRAME = "base_link"
TRUTH_FRAME = "base_link_ground_truth"
IMU_FRAME = "imu_link"
GNSS_FRAME = "gnss_link"
COMMAND_REASONS = ("unknown_joint", "missing_rotor", "missing_tilt", "wrong_length", "non_finite",
                   "stamp_backwards", "duplicate_stamp")
"""Reasons an actuator command is rejected (each reported on /diagnostics)."""
WAIT_FOR_COMMAND_S = 0.01
"""Longest executor wait while the lock-step waits for a command, s (wall); the wait ends
as soon as any message arrives."""


class SimulatorNode(Node):
    """The ``simulator`` node; keyword arguments go to ``rclpy.node.Node``."""

    def __init__(self, node_name: str = "simulator", **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)
        try:
            self._configure(parameters.declare(self))
        except parameters.ParameterError:
            self.destroy_node()
            raise
        config = self.simulator.config
        imu = config.imu
        # white-noise variance of one sample: density^2 * rate
        self._imu_messages = convert.ImuMessages(IMU_FRAME, imu.gyro_noise_density**2 * imu.rate_hz,
                                                 imu.accel_noise_density**2 * imu.rate_hz)
        self._clock_messages = convert.ClockMessages()
        self._odometry_messages = convert.OdometryMessages(MAP_FRAME, TRUTH_FRAME)
        self._truth_tf_messages = convert.TransformMessages(MAP_FRAME, TRUTH_FRAME)
        self._actuator_messages = convert.ActuatorStateMessages(
            self.simulator.rotor_count, self.simulator.tilt_count)

        self._clock_pub = self.create_publisher(Clock, "/clock", RELIABLE_10)
        self._imu_pub = self.create_publisher(Imu, "imu/data", SENSOR_DATA)
        self._fix_pub = self.create_publisher(NavSatFix, "gnss/fix", SENSOR_DATA)
        self._vel_pub = self.create_publisher(TwistWithCovarianceStamped, "gnss/vel", SENSOR_DATA)
        self._odometry_pub = self.create_publisher(Odometry, "ground_truth/odometry", RELIABLE_10)
        self._rotor_pub = self.create_publisher(JointState, "simulator/rotor_speeds", RELIABLE_10)
        self._markers_pub = self.create_publisher(MarkerArray, "simulator/markers", RELIABLE_10)
        self._tf_pub = self.create_publisher(TFMessage, "/tf", TF)
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", TF_STATIC)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics",
                                                      RELIABLE_10)
        self.create_subscription(JointState, "actuator_commands", self._on_command, RELIABLE_10)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/inject_gnss_outage", self._on_gnss_outage)
        self.create_service(Trigger, "~/inject_imu_spike", self._on_imu_spike)

        self.lockstep_timeouts = 0
        self.rejected_commands: Counter[str] = Counter()
        self._restart()
        self._publish_static_transforms()
        self._publish_clock()
        self.get_logger().info(
            f"vehicle {self.simulator.vehicle.name} ({self.simulator.vehicle_path}), "
            f"integrator {config.integrator} at {config.physics_rate_hz:g} Hz, lockstep "
            f"{'on' if self.lockstep else 'off'} every {self.lockstep_period_s} s")

    def _configure(self, values: dict[str, Any]) -> None:
        """The simulator and the node's settings from declared values (ParameterError)."""
        self.simulator: VehicleSimulator = parameters.vehicle_simulator(values)
        physics_rate = self.simulator.config.physics_rate_hz
        self._truth_every = parameters.steps_per_period(
            "ground_truth_rate_hz", values["ground_truth_rate_hz"], physics_rate)
        self._markers_every = parameters.steps_per_period(
            "markers_rate_hz", values["markers_rate_hz"], physics_rate)
        self._diagnostics_every = parameters.steps_per_period(
            "diagnostics_rate_hz", values["diagnostics_rate_hz"], physics_rate)
        self._boundary_every = parameters.lockstep_steps(values, parameters.steps_per_period(
            "imu_rate_hz", self.simulator.config.imu.rate_hz, physics_rate))
        self.lockstep_period_s: float = values["lockstep_period_s"]
        self.lockstep: bool = values["lockstep"]
        self.lockstep_timeout_s: float = values["lockstep_timeout_s"]
        self.duration_s: float = values["duration_s"]
        self._pace: float = values["real_time_factor"]
        self._marker_scale: float = values["marker_length_per_newton"]
        self._spike = (np.array(parameters.vector3(values, "fault_imu_spike_gyro")),
                       np.array(parameters.vector3(values, "fault_imu_spike_accel")))
        self._outage_s: float = values["fault_gnss_outage_s"]

    # -- lock-step API ----------------------------------------------------------------------

    def _restart(self) -> None:
        """Lock-step and pacing state for a run starting at the simulator's t = 0."""
        self._boundary = 0
        self._boundary_wall = time.monotonic()
        self._released = True
        self._last_command_ns = -1
        self._start_wall: float | None = None
        self._last_clock_ns = -1

    @property
    def sim_time(self) -> float:
        """Simulation time (s)."""
        return self.simulator.time_s

    @property
    def finished(self) -> bool:
        """True once ``duration_s`` (> 0) of sim time has run."""
        return self.duration_s > 0.0 and self.simulator.time_s >= self.duration_s - 1e-12

    @property
    def real_time_factor(self) -> float:
        """Sim time over wall time since the first ``advance()`` (0 before it)."""
        if self._start_wall is None:
            return 0.0
        wall = time.monotonic() - self._start_wall
        return self.simulator.time_s / wall if wall > 0.0 else 0.0

    @property
    def waiting_for_command(self) -> bool:
        """True while lock-step waits at a boundary for a command stamped at or after it.

        Once ``lockstep_timeout_s`` of wall time has passed the wait ends (counted in
        ``lockstep_timeouts``) and the held command is used.
        """
        if not self.lockstep or self._released:
            return False
        if self._last_command_ns >= self._boundary_ns():
            self._released = True
            return False
        if time.monotonic() - self._boundary_wall > self.lockstep_timeout_s:
            self.lockstep_timeouts += 1
            self._released = True
            self.get_logger().warning(
                f"no actuator command stamped >= {self.sim_time:.3f} s within "
                f"{self.lockstep_timeout_s} s: continuing with the held command")
            return False
        return True

    def _boundary_ns(self) -> int:
        return round(self._boundary * self._boundary_every * self.simulator.step_size * 1e9)

    def advance(self) -> bool:
        """Step physics to the next lock-step boundary, publishing what falls due on the way.

        Never blocks: returns False without stepping when finished, waiting for a command,
        or ahead of the ``real_time_factor`` pace.
        """
        if self.finished or self.waiting_for_command:
            return False
        now = time.monotonic()
        if self._start_wall is None:
            self._start_wall = now
        elif self._pace > 0.0 and self.simulator.time_s > (now - self._start_wall) * self._pace:
            return False
        target = (self._boundary + 1) * self._boundary_every
        if self.duration_s > 0.0:
            target = min(target, math.ceil(self.duration_s / self.simulator.step_size - 1e-9))
        while self.simulator.steps < target:
            self._publish_due(self.simulator.step())
        self._boundary += 1
        self._publish_clock()
        self._boundary_wall = time.monotonic()
        self._released = False
        return True

    # -- publishing -------------------------------------------------------------------------

    def _publish_due(self, output: StepOutput) -> None:
        steps = self.simulator.steps
        if output.imu is not None:
            sample = output.imu
            self._imu_pub.publish(self._imu_messages.fill(output.time_s, sample.gyro,
                                                          sample.accel))
        for fix in output.gnss:
            self._publish_fix(fix)
        if steps % self._truth_every == 0:
            self._publish_truth()
        if steps % self._markers_every == 0:
            self._publish_markers()
        if steps % self._diagnostics_every == 0:
            self._publish_diagnostics()

    def _publish_clock(self) -> None:
        stamp_ns = round(self.simulator.time_s * 1e9)
        if stamp_ns != self._last_clock_ns:
            self._clock_pub.publish(self._clock_messages.fill(self.simulator.time_s))
            self._last_clock_ns = stamp_ns

    def _publish_fix(self, fix: GnssFix) -> None:
        if not fix.fix and not self.simulator.config.gnss.publish_during_outage:
            return
        self._fix_pub.publish(convert.navsat_fix_message(
            fix.time_s, GNSS_FRAME, fix.latitude_deg, fix.longitude_deg, fix.height_m,
            fix.position_covariance_enu, fix.fix))
        if fix.fix:
            self._vel_pub.publish(convert.gnss_velocity_message(
                fix.time_s, GNSS_FRAME, fix.velocity_enu, fix.velocity_covariance_enu))

    def _publish_truth(self) -> None:
        truth = self.simulator.truth
        self._odometry_pub.publish(self._odometry_messages.fill(
            truth.time_s, truth.position_enu, truth.orientation_xyzw, truth.twist_body))
        self._tf_pub.publish(self._truth_tf_messages.fill(
            truth.time_s, truth.position_enu, truth.orientation_xyzw))

    def _publish_markers(self) -> None:
        """Rotor speeds and thrust arrows: for people and plots, at the (low) markers rate."""
        truth = self.simulator.truth
        self._rotor_pub.publish(self._actuator_messages.fill(
            truth.time_s, truth.rotor_speeds, truth.tilt_angles))
        positions, axes, thrusts = self.simulator.rotor_thrusts()
        self._markers_pub.publish(convert.rotor_markers(
            self.simulator.time_s, TRUTH_FRAME, positions, axes, self._marker_scale * thrusts))

    def _publish_static_transforms(self) -> None:
        imu = self.simulator.config.imu
        gnss = self.simulator.config.gnss
        self._tf_static_pub.publish(convert.tf_message([
            convert.transform(0.0, BASE_FRAME, IMU_FRAME, imu.mount_position_m,
                              imu.mount_rotation_xyzw),
            convert.transform(0.0, BASE_FRAME, GNSS_FRAME, gnss.antenna_position_m,
                              (0.0, 0.0, 0.0, 1.0)),
        ]))

    def diagnostic_values(self) -> dict[str, float | int | bool]:
        """The numbers published on /diagnostics (units in the key names)."""
        core = self.simulator.diagnostics()
        rejected = Counter(core.rejected_commands) + self.rejected_commands
        # The truth behind the fixes: a report can tell a rare GNSS error from a filter fault.
        east, north, up = self.simulator.gnss.correlated_error_enu
        return {
            "sim_time_s": core.time_s,
            "real_time_factor": self.real_time_factor,
            "energy_error_J": core.energy_error_j,
            "momentum_error_Ns": core.linear_momentum_error,
            "angular_momentum_error_Nms": core.angular_momentum_error,
            "newton_iterations": core.newton_iterations,
            "max_newton_iterations": core.max_newton_iterations,
            "landed": core.landed,
            "touchdowns": core.touchdowns,
            "lockstep_timeouts": self.lockstep_timeouts,
            "clamped_commands": core.clamped_commands,
            "gnss_correlated_error_east_m": east,
            "gnss_correlated_error_north_m": north,
            "gnss_correlated_error_up_m": up,
            **{f"rejected_commands_{reason}": rejected[reason] for reason in COMMAND_REASONS},
        }

    def _publish_diagnostics(self) -> None:
        values = self.diagnostic_values()
        problems = [key for key in values if (key.startswith("rejected_commands_")
                                              or key == "lockstep_timeouts") and values[key]]
        level = DiagnosticStatus.WARN if problems else DiagnosticStatus.OK
        summary = ("counted: " + ", ".join(f"{k} {values[k]}" for k in problems)
                   if problems else "running")
        self._diagnostics_pub.publish(convert.diagnostics_message(
            self.simulator.time_s, "simulator", level, summary, values))

    # -- inputs -----------------------------------------------------------------------------

    def _on_command(self, message: JointState) -> None:
        """Hold a valid actuator command; count and drop a bad one (never raises)."""
        stamp_ns = convert.stamp_nanoseconds(message.header.stamp)
        if stamp_ns <= self._last_command_ns:
            reason = "duplicate_stamp" if stamp_ns == self._last_command_ns else "stamp_backwards"
            self.rejected_commands[reason] += 1
            return
        # The controller answered this boundary even if its content is unusable.
        self._last_command_ns = stamp_ns
        try:
            speeds, tilts = convert.actuator_command(
                message, self.simulator.rotor_count, self.simulator.tilt_count)
        except convert.CommandError as error:
            self.rejected_commands[error.reason] += 1
            return
        self.simulator.set_command(speeds, tilts)

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        self.simulator.reset()
        self.lockstep_timeouts = 0
        self.rejected_commands.clear()
        self._restart()
        self._publish_clock()
        response.success = True
        response.message = "simulator reset to t = 0 s, landed at the initial pose"
        return response

    def _on_gnss_outage(self, _request: Trigger.Request, response: Trigger.Response
                        ) -> Trigger.Response:
        self.simulator.inject_gnss_outage(self._outage_s)
        response.success = True
        response.message = (f"GNSS outage from t = {self.sim_time:.3f} s for "
                            f"{self._outage_s} s")
        return response

    def _on_imu_spike(self, _request: Trigger.Request, response: Trigger.Response
                      ) -> Trigger.Response:
        self.simulator.inject_imu_spike(*self._spike)
        response.success = True
        response.message = (f"IMU spike gyro {self._spike[0].tolist()} rad/s, accel "
                            f"{self._spike[1].tolist()} m/s^2 on the next sample")
        return response


def drive(node: SimulatorNode, executor: Executor,
          progress: Callable[[float], None] | None = None) -> None:
    """Run the lock-step to the end: advance whenever the simulator is not waiting, and let
    the executor deliver messages in between (waiting at most ``WAIT_FOR_COMMAND_S``).
    ``progress`` gets the sim time (s) after each pass."""
    while not node.finished and executor.context.ok():
        stepped = node.advance()
        executor.spin_once(timeout_sec=0.0 if stepped else WAIT_FOR_COMMAND_S)
        if progress is not None:
            progress(node.sim_time)


def main(args: list[str] | None = None) -> int:
    """Run the simulator alone until ``duration_s`` (forever when 0)."""
    rclpy.init(args=args)
    node: SimulatorNode | None = None
    try:
        node = SimulatorNode()
        executor = EventsExecutor()
        executor.add_node(node)
        drive(node, executor)
        node.get_logger().info(f"finished at {node.sim_time:.3f} s sim time, "
                               f"{node.real_time_factor:.2f}x real time")
    except parameters.ParameterError as error:
        print(f"simulator: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
