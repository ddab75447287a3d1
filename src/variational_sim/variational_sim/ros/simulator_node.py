"""ROS 2 node ``simulator``: the vehicle simulator with the contract's topics, services and
lock-step API (``advance``, ``waiting_for_command``, ``sim_time``, ``real_time_factor``,
``finished``) and ``drive``, the loop that runs it.

The node is a thin shell around one ``VehicleSimulator`` per vehicle (``vehicles``: one by
default, or several in namespaces ``uav<k>``, each a ``VehicleChannel``): each physics step
it queues only what fell due (each sensor's readings after its latency, as the messages
the sensor fills (``sensors.base``), ground truth, rotor speeds with the markers,
diagnostics at their own rates), publishes the queue in one go at the lock-step boundary
(``vehicle_channel.Batch``) and then /clock, once per boundary, which is all that
sim-time timers need (each /clock message costs every sim-time node a callback). The
lock-step waits for every vehicle's command. ``main()`` runs it standalone (``drive`` with
an events executor) until ``duration_s`` of sim time.

Run-time parameter changes (the dynamic ones of ``parameters``) take effect at the next
physics step: output rates, the run settings, the fault sizes, and the IMU and GNSS error
models (the sensor models keep their state; the IMU message covariances follow; a ~/reset
keeps the new models). A new ``real_time_factor`` paces from the moment it is set.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from rclpy.executors import Executor
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from mav_ros_common import diagnostics, stamps
from mav_ros_common.node_main import run_node
from mav_ros_common.parameters import ParameterError, Values, declare_parameters
from mav_ros_common.qos import RELIABLE_10, TF, TF_STATIC
from variational_sim.ros import convert
from variational_sim.ros.parameters import SPECS, SimulatorSettings, simulator_settings
from variational_sim.ros.vehicle_channel import Batch, VehicleChannel
from variational_sim.ros.vehicle_setup import vehicle_simulator
from variational_sim.vehicle_sim.simulator import StepOutput, VehicleSimulator

NODE_NAME = "simulator"
SEED_STRIDE = 2**20
"""Vehicle k (from 0) of a multi-vehicle run draws from ``seed + k * SEED_STRIDE``: vehicle 0
is the single-vehicle run, and runs with seeds below the stride never share noise."""
COMMAND_REASONS = ("duplicate_joint", "unknown_joint", "missing_rotor", "missing_tilt",
                   "wrong_length", "non_finite", "stamp_backwards", "duplicate_stamp")
"""Reasons an actuator command is rejected (each reported on /diagnostics)."""
WAIT_FOR_COMMAND_S = 0.01
"""Longest executor wait while the lock-step waits for a command, s (wall); the wait ends
as soon as any message arrives."""


def _vehicle_simulators(settings: SimulatorSettings, scenario: str
                        ) -> list[tuple[str, VehicleSimulator]]:
    """(namespace, simulator) of every vehicle: one without a namespace, or ``uav<k>``
    spaced ``vehicle_spacing_m`` east with their own seeds (ParameterError naming the
    parameter)."""
    config = settings.config
    if not settings.vehicles:
        return [("", vehicle_simulator(config, scenario))]
    x, y, z = config.initial_position
    vehicles = []
    for k, vehicle_file in enumerate(settings.vehicles):
        vehicle = replace(config, vehicle_file=vehicle_file, seed=config.seed + k * SEED_STRIDE,
                          initial_position=(x + k * settings.vehicle_spacing_m, y, z))
        try:
            vehicles.append((f"uav{k + 1}", vehicle_simulator(vehicle, scenario)))
        except ParameterError as error:
            if error.name != "vehicle_file":
                raise
            raise ParameterError(f"parameter 'vehicles', entry {k + 1}: {error}",
                                 "vehicles") from error
    return vehicles


class SimulatorNode(Node):
    """The ``simulator`` node; keyword arguments go to ``rclpy.node.Node``.

    Raises ``ParameterError`` on a bad parameter (see ``parameters``)."""

    _pace_origin: tuple[float, float] | None
    """(wall s, sim s) the ``real_time_factor`` pace counts from (None: the next step)."""

    def __init__(self, node_name: str = NODE_NAME, **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)
        try:
            self.parameters = declare_parameters(self, SPECS, simulator_settings)
            vehicles = _vehicle_simulators(self.parameters.settings,
                                           self.parameters["scenario"])
        except Exception:
            self.destroy_node()
            raise
        self._settings = self.parameters.settings
        self._take_run_values(self.parameters.values)
        self._clock_messages = convert.ClockMessages()
        self._clock_pub = self.create_publisher(Clock, "/clock", RELIABLE_10)
        self._tf_pub = self.create_publisher(TFMessage, "/tf", TF)
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", TF_STATIC)
        self._diagnostics_pub = diagnostics.create_publisher(self)
        self._batch = Batch()
        self.channels = [VehicleChannel(self, simulator, namespace, self._tf_pub, self._batch)
                         for namespace, simulator in vehicles]
        self.simulator = self.channels[0].simulator
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/inject_gnss_outage", self._on_gnss_outage)
        self.create_service(Trigger, "~/inject_imu_spike", self._on_imu_spike)

        self.lockstep_timeouts = 0
        self._created_wall = time.monotonic()
        self._started = False
        self._restart()
        self._publish_static_transforms()
        self._publish_clock()
        config = self.simulator.config
        described = ", ".join(
            f"{channel.prefix}{channel.simulator.vehicle.name} ({channel.simulator.vehicle_path})"
            for channel in self.channels)
        self.get_logger().info(
            f"vehicle {described}, scenario {config.scenario.name}, integrator "
            f"{config.integrator} at {config.physics_rate_hz:g} Hz, lockstep "
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
        for channel in self.channels:
            simulator = channel.simulator
            current = simulator.config
            if (imu, gnss) != (current.imu, current.gnss):
                # The sensor models take the new error laws now; a ~/reset rebuilds them
                # from the simulator's configuration, which therefore holds them too.
                simulator.config = replace(current, imu=imu, gnss=gnss)
                simulator.imu.set_error_model(imu)
                simulator.gnss.set_error_model(gnss)

    # -- lock-step API ----------------------------------------------------------------------

    def _restart(self) -> None:
        """Lock-step and pacing state for a run starting at the simulator's t = 0."""
        self._boundary = 0
        self._boundary_wall = time.monotonic()
        self._released = True
        for channel in self.channels:
            channel.last_command_ns = -1
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
        """True while lock-step waits at a boundary for a command stamped at or after it
        (from every vehicle).

        Once ``lockstep_timeout_s`` of wall time has passed the wait ends (counted in
        ``lockstep_timeouts``) and the held command is used.
        """
        if not self.lockstep or self._released:
            return False
        boundary = self._boundary_ns()
        if all(channel.last_command_ns >= boundary for channel in self.channels):
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
        channels = self.channels
        imu_heard = all(c.imu_publisher.get_subscription_count() > 0 for c in channels)
        commands_heard = not self.lockstep or all(
            c.command_subscription.get_publisher_count() > 0 for c in channels)
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
            for channel in self.channels:
                self._queue_due(channel, channel.simulator.step())
        self._batch.publish()
        self._boundary += 1
        self._publish_clock()
        self._boundary_wall = time.monotonic()
        self._released = False
        return True

    # -- publishing -------------------------------------------------------------------------

    def _queue_due(self, channel: VehicleChannel, output: StepOutput) -> None:
        """Queue what fell due in this physics step (published at the boundary)."""
        steps = channel.simulator.steps
        settings = self._settings
        if output.readings:
            channel.queue_readings(output)
        if steps % settings.truth_every == 0:
            channel.queue_truth()
        if steps % settings.markers_every == 0:
            channel.queue_markers(self._marker_scale)
        if channel is self.channels[-1] and steps % settings.diagnostics_every == 0:
            self._queue_diagnostics()

    def _publish_clock(self) -> None:
        stamp_ns = round(self.simulator.time_s * 1e9)
        if stamp_ns != self._last_clock_ns:
            self._clock_pub.publish(self._clock_messages.fill(self.simulator.time_s))
            self._last_clock_ns = stamp_ns

    def _publish_static_transforms(self) -> None:
        self._tf_static_pub.publish(convert.tf_message(
            [transform for channel in self.channels
             for transform in channel.static_transforms()]))

    def diagnostic_values(self, channel: VehicleChannel | None = None
                          ) -> dict[str, float | int | bool]:
        """The numbers published on /diagnostics for one vehicle (default: the first; units
        in the key names)."""
        channel = channel or self.channels[0]
        return {
            "sim_time_s": self.simulator.time_s,
            "real_time_factor": self.real_time_factor,
            "lockstep_timeouts": self.lockstep_timeouts,
            **channel.diagnostic_values(COMMAND_REASONS),
        }

    def _queue_diagnostics(self) -> None:
        """One status per vehicle: ``simulator``, or ``uav<k>/simulator`` with several (the
        names the vehicle's own nodes get in its namespace)."""
        statuses = []
        for channel in self.channels:
            values = self.diagnostic_values(channel)
            problems = [key for key in values if (key.startswith("rejected_commands_")
                                                  or key == "lockstep_timeouts") and values[key]]
            level = diagnostics.WARN if problems else diagnostics.OK
            summary = ("counted: " + ", ".join(f"{k} {values[k]}" for k in problems)
                       if problems else "running")
            name = channel.prefix + diagnostics.status_name(self)
            statuses.append(diagnostics.status(name, level, summary, values))
        self._batch.add(self._diagnostics_pub, diagnostics.diagnostic_array(
            stamps.from_seconds(self.simulator.time_s), *statuses))

    # -- services ---------------------------------------------------------------------------

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        for channel in self.channels:
            channel.simulator.reset()
            channel.rejected_commands.clear()
        self.lockstep_timeouts = 0
        self._restart()
        self._publish_clock()
        response.success = True
        response.message = "simulator reset to t = 0 s, landed at the initial pose"
        return response

    def _on_gnss_outage(self, _request: Trigger.Request, response: Trigger.Response
                        ) -> Trigger.Response:
        for channel in self.channels:
            channel.simulator.inject_gnss_outage(self._outage_s)
        response.success = True
        response.message = (f"GNSS outage from t = {self.sim_time:.3f} s for "
                            f"{self._outage_s} s")
        return response

    def _on_imu_spike(self, _request: Trigger.Request, response: Trigger.Response
                      ) -> Trigger.Response:
        for channel in self.channels:
            channel.simulator.inject_imu_spike(*self._spike)
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
