"""ROS 2 node ``simulator``: the vehicle simulator with the contract's topics, services and
lock-step API (``advance``, ``waiting_for_command``, ``sim_time``, ``real_time_factor``,
``finished``) and ``drive``, the loop that runs it.

The node is a thin shell around ``VehicleSimulator``: each physics step it publishes only
what fell due (IMU, GNSS after its latency, ground truth, rotor speeds with the markers,
diagnostics at their own rates) and /clock once per lock-step boundary, which is all that
sim-time timers need (each /clock message costs every sim-time node a callback). ``main()``
runs it standalone (``drive`` with an events executor) until ``duration_s`` of sim time.

Run-time parameter changes (the dynamic ones of ``parameters``) take effect at the next
physics step: output rates, the run settings, the fault sizes, and the IMU and GNSS error
models (the sensor models keep their state; the IMU message covariances follow; a ~/reset
keeps the new models). A new ``real_time_factor`` paces from the moment it is set.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.executors import Executor
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState, NavSatFix
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from mav_ros_common import diagnostics, stamps
from mav_ros_common.node_main import run_node
from mav_ros_common.parameters import ParameterError, Values, declare_parameters, show
from mav_ros_common.qos import RELIABLE_10, SENSOR_DATA, TF, TF_STATIC
from mav_ros_common.resources import ShareNotFoundError, find_named_file
from variational_sim.ros import convert
from variational_sim.ros.parameters import SPECS, SimulatorSettings, simulator_settings
from variational_sim.sensors.gnss import GnssFix
from variational_sim.sensors.imu import ImuConfig
from variational_sim.vehicle_sim.simulator import SimulatorConfig, StepOutput, VehicleSimulator

NODE_NAME = "simulator"
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


def _imu_variances(imu: ImuConfig) -> tuple[float, float]:
    """White-noise variances of one gyro and accelerometer sample: density^2 * rate."""
    return imu.gyro_noise_density**2 * imu.rate_hz, imu.accel_noise_density**2 * imu.rate_hz


def _vehicle_simulator(config: SimulatorConfig) -> VehicleSimulator:
    """The simulator of ``config`` with its vehicle file resolved (ParameterError)."""
    try:
        path = find_named_file(config.vehicle_file, "vehicles")
        return VehicleSimulator(replace(config, vehicle_file=str(path)))
    except (ValueError, ShareNotFoundError) as error:
        raise ParameterError(f"parameter 'vehicle_file' = {show(config.vehicle_file)} is "
                             f"invalid: {error}", "vehicle_file") from error


class SimulatorNode(Node):
    """The ``simulator`` node; keyword arguments go to ``rclpy.node.Node``.

    Raises ``ParameterError`` on a bad parameter (see ``parameters``)."""

    _pace_origin: tuple[float, float] | None
    """(wall s, sim s) the ``real_time_factor`` pace counts from (None: the next step)."""

    def __init__(self, node_name: str = NODE_NAME, **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)
        try:
            self.parameters = declare_parameters(self, SPECS, simulator_settings)
            self.simulator = _vehicle_simulator(self.parameters.settings.config)
        except Exception:
            self.destroy_node()
            raise
        self._settings = self.parameters.settings
        self._take_run_values(self.parameters.values)
        config = self.simulator.config
        self._imu_messages = convert.ImuMessages(IMU_FRAME, *_imu_variances(config.imu))
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
        self._diagnostics_pub = diagnostics.create_publisher(self)
        self._command_sub = self.create_subscription(JointState, "actuator_commands",
                                                     self._on_command, RELIABLE_10)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/inject_gnss_outage", self._on_gnss_outage)
        self.create_service(Trigger, "~/inject_imu_spike", self._on_imu_spike)

        self.lockstep_timeouts = 0
        self.rejected_commands: Counter[str] = Counter()
        self._created_wall = time.monotonic()
        self._started = False
        self._restart()
        self._publish_static_transforms()
        self._publish_clock()
        self.get_logger().info(
            f"vehicle {self.simulator.vehicle.name} ({self.simulator.vehicle_path}), "
            f"integrator {config.integrator} at {config.physics_rate_hz:g} Hz, lockstep "
            f"{'on' if self.lockstep else 'off'} every {self.lockstep_period_s} s")
        self.parameters.enable_updates(self._apply)

    def _take_run_values(self, values: Values) -> None:
        """The run settings the node reads directly (tests may also set ``lockstep``)."""
        self.lockstep_period_s: float = values["lockstep_period_s"]
        self.lockstep: bool = values["lockstep"]
        self.lockstep_timeout_s: float = values["lockstep_timeout_s"]
        self.start_wait_s: float = values["start_wait_s"]
        self.duration_s: float = values["duration_s"]
        self._pace: float = values["real_time_factor"]
        self._marker_scale: float = values["marker_length_per_newton"]
        self._spike = (np.array(values["fault_imu_spike_gyro"]),
                       np.array(values["fault_imu_spike_accel"]))
        self._outage_s: float = values["fault_gnss_outage_s"]

    def _apply(self, settings: SimulatorSettings, changed: frozenset[str]) -> None:
        """Make accepted parameter changes take effect (between two ``advance`` calls)."""
        self._settings = settings
        self._take_run_values(self.parameters.values)
        if "real_time_factor" in changed:
            self._pace_origin = None  # pace from now on
        imu, gnss = settings.config.imu, settings.config.gnss
        current = self.simulator.config
        if (imu, gnss) != (current.imu, current.gnss):
            # The sensor models take the new error laws now; a ~/reset rebuilds them from
            # the simulator's configuration, which therefore holds them too.
            self.simulator.config = replace(current, imu=imu, gnss=gnss)
            self.simulator.imu.set_error_model(imu)
            self.simulator.gnss.set_error_model(gnss)
            self._imu_messages.set_variances(*_imu_variances(imu))

    # -- lock-step API ----------------------------------------------------------------------

    def _restart(self) -> None:
        """Lock-step and pacing state for a run starting at the simulator's t = 0."""
        self._boundary = 0
        self._boundary_wall = time.monotonic()
        self._released = True
        self._last_command_ns = -1
        self._start_wall: float | None = None
        self._pace_origin = None
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

    @property
    def waiting_to_start(self) -> bool:
        """True while t = 0 is held for the graph to connect (at most ``start_wait_s``).

        Nodes started with the simulator (``ros2 launch``) discover it a few seconds late;
        holding the start keeps them from missing the take-off. Checked once per node life:
        a ``~/reset`` restarts at once.
        """
        if self._started:
            return False
        imu_heard = self._imu_pub.get_subscription_count() > 0
        commands_heard = not self.lockstep or self._command_sub.get_publisher_count() > 0
        waited = time.monotonic() - self._created_wall
        if imu_heard and commands_heard:
            self._started = True
            if waited > 0.5:
                self.get_logger().info(f"graph connected after {waited:.1f} s: starting")
        elif waited >= self.start_wait_s:
            self._started = True
            if self.start_wait_s > 0.0:
                missing = [what for what, heard in (("an IMU subscriber", imu_heard),
                                                    ("an actuator command publisher",
                                                     commands_heard)) if not heard]
                self.get_logger().warning(f"starting without {' or '.join(missing)} after "
                                          f"start_wait_s = {self.start_wait_s} s")
        return not self._started

    def _boundary_ns(self) -> int:
        return round(self._boundary * self._settings.boundary_every
                     * self.simulator.step_size * 1e9)

    def advance(self) -> bool:
        """Step physics to the next lock-step boundary, publishing what falls due on the way.

        Never blocks: returns False without stepping when finished, waiting for the graph
        to connect or for a command, or ahead of the ``real_time_factor`` pace.
        """
        if self.finished or self.waiting_to_start or self.waiting_for_command:
            return False
        now = time.monotonic()
        if self._start_wall is None:
            self._start_wall = now
        if self._pace_origin is None:
            self._pace_origin = (now, self.simulator.time_s)
        elif self._pace > 0.0 and (self.simulator.time_s - self._pace_origin[1]
                                   > (now - self._pace_origin[0]) * self._pace):
            return False
        target = (self._boundary + 1) * self._settings.boundary_every
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
        settings = self._settings
        if output.imu is not None:
            sample = output.imu
            self._imu_pub.publish(self._imu_messages.fill(output.time_s, sample.gyro,
                                                          sample.accel))
        for fix in output.gnss:
            self._publish_fix(fix)
        if steps % settings.truth_every == 0:
            self._publish_truth()
        if steps % settings.markers_every == 0:
            self._publish_markers()
        if steps % settings.diagnostics_every == 0:
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
        level = diagnostics.WARN if problems else diagnostics.OK
        summary = ("counted: " + ", ".join(f"{k} {values[k]}" for k in problems)
                   if problems else "running")
        self._diagnostics_pub.publish(diagnostics.diagnostic_array(
            stamps.from_seconds(self.simulator.time_s),
            diagnostics.status(NODE_NAME, level, summary, values)))

    # -- inputs -----------------------------------------------------------------------------

    def _on_command(self, message: JointState) -> None:
        """Hold a valid actuator command; count and drop a bad one (never raises).

        A malformed message is counted for its content whatever its stamp (the more useful
        reason, and independent of how it raced the controller's next command); a newer one
        still answers the lock-step boundary.
        """
        stamp_ns = stamps.to_ns(message.header.stamp)
        newer = stamp_ns > self._last_command_ns
        try:
            speeds, tilts = convert.actuator_command(
                message, self.simulator.rotor_count, self.simulator.tilt_count)
        except convert.CommandError as error:
            self.rejected_commands[error.reason] += 1
            if newer:
                self._last_command_ns = stamp_ns
            return
        if not newer:
            reason = "duplicate_stamp" if stamp_ns == self._last_command_ns else "stamp_backwards"
            self.rejected_commands[reason] += 1
            return
        self._last_command_ns = stamp_ns
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


def _run(node: SimulatorNode, executor: Executor) -> None:
    drive(node, executor)
    node.get_logger().info(f"finished at {node.sim_time:.3f} s sim time, "
                           f"{node.real_time_factor:.2f}x real time")


def main(args: list[str] | None = None) -> int:
    """Run the simulator alone until ``duration_s`` (forever when 0); exit codes as
    ``mav_ros_common.node_main``."""
    return run_node(SimulatorNode, args, name=NODE_NAME, executor=EventsExecutor, run=_run)


if __name__ == "__main__":
    sys.exit(main())
