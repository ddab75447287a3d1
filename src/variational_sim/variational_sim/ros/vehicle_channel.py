"""One simulated vehicle on the simulator node: its topics, frames and command input.

With one vehicle the names are the contract's (``imu/data``, ``base_link``); with several,
vehicle ``uav<k>`` publishes ``uav<k>/imu/data`` and its frames are ``uav<k>/base_link``,
``uav<k>/imu_link``... (one ``map``, one ``/clock``, one ``/tf``). The channel owns the
reused messages of its streams and counts the commands it rejects; the node owns time.

What falls due while the node steps to a lock-step boundary is queued, serialized, on the
node's ``Batch`` and published in one go at the boundary (in the order it fell due): the
physics loop stays free of DDS, and every message is converted once.
"""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from visualization_msgs.msg import MarkerArray

from mav_ros_common import stamps
from mav_ros_common.qos import RELIABLE_10, SENSOR_DATA
from variational_sim.ros import convert
from variational_sim.sensors.base import Output
from variational_sim.vehicle_sim.simulator import StepOutput, VehicleSimulator

MAP_FRAME = "map"
BASE_FRAME = "base_link"
TRUTH_FRAME = "base_link_ground_truth"
IMU_FRAME = "imu_link"
GNSS_FRAME = "gnss_link"


class Batch:
    """Messages waiting for the next lock-step boundary: (publisher, message object or
    serialized bytes), in the order they fell due."""

    def __init__(self) -> None:
        self.pending: list[tuple[Publisher[Any], Any]] = []

    def add(self, publisher: Publisher[Any], message: Any) -> None:
        """Queue a message that is not refilled before ``publish`` (bytes or a new object)."""
        self.pending.append((publisher, message))

    def add_copy(self, publisher: Publisher[Any], message: Any) -> None:
        """Queue a reused message object as it is now (serialized)."""
        self.pending.append((publisher, serialize_message(message)))

    def publish(self) -> None:
        """Publish everything queued, in order."""
        for publisher, message in self.pending:
            publisher.publish(message)
        self.pending.clear()


def _message_class(output: Output) -> Any:
    """The message class of ``package/msg/Type``."""
    package, _, name = output.msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


class VehicleChannel:
    """The ROS side of one ``VehicleSimulator`` in namespace ``namespace`` ("" = none)."""

    def __init__(self, node: Node, simulator: VehicleSimulator, namespace: str,
                 tf_publisher: Publisher[Any], batch: Batch) -> None:
        self.simulator = simulator
        self._batch = batch
        self.namespace = namespace
        self.prefix = f"{namespace}/" if namespace else ""
        prefix = self.prefix
        self._tf_pub = tf_publisher
        self._sensor_outputs = {
            name: [self._sensor_publisher(node, output) for output in sensor.outputs]
            for name, sensor in simulator.sensors.items()}
        self._odometry_messages = convert.OdometryMessages(MAP_FRAME, prefix + TRUTH_FRAME)
        self._truth_tf_messages = convert.TransformMessages(MAP_FRAME, prefix + TRUTH_FRAME)
        self._actuator_messages = convert.ActuatorStateMessages(simulator.rotor_count,
                                                                simulator.tilt_count)
        self._marker_messages = convert.RotorMarkerMessages(prefix + TRUTH_FRAME,
                                                            simulator.rotor_count)
        self._odometry_pub = node.create_publisher(Odometry, prefix + "ground_truth/odometry",
                                                   RELIABLE_10)
        self._rotor_pub = node.create_publisher(JointState, prefix + "simulator/rotor_speeds",
                                                RELIABLE_10)
        self._markers_pub = node.create_publisher(MarkerArray, prefix + "simulator/markers",
                                                  RELIABLE_10)
        self.command_subscription = node.create_subscription(
            JointState, prefix + "actuator_commands", self.on_command, RELIABLE_10)
        self.rejected_commands: Counter[str] = Counter()
        self.last_command_ns = -1

    def _sensor_publisher(self, node: Node, output: Output) -> tuple[Publisher[Any], Any]:
        """The publisher of one sensor output and the message it refills (frame set once)."""
        message_class = _message_class(output)
        message = message_class()
        message.header.frame_id = self.prefix + output.frame_id
        return node.create_publisher(message_class, self.prefix + output.topic,
                                     SENSOR_DATA), message

    @property
    def imu_publisher(self) -> Publisher[Any]:
        """The IMU publisher (the node's start waits for its first subscriber)."""
        return self._sensor_outputs["imu"][0][0]

    def frame(self, name: str) -> str:
        """A body-fixed frame of this vehicle (``base_link``, ``imu_link``...)."""
        return self.prefix + name

    # -- publishing -------------------------------------------------------------------------

    def queue_readings(self, output: StepOutput) -> None:
        """Every sensor reading that fell due, as the messages its sensor fills."""
        batch = self._batch
        for sensor, reading in output.readings:
            pairs = self._sensor_outputs[sensor.name]
            flags = sensor.fill(reading, [message for _, message in pairs])
            for (publisher, message), publish in zip(pairs, flags, strict=True):
                if publish:
                    batch.add_copy(publisher, message)

    def queue_truth(self) -> None:
        truth = self.simulator.truth
        batch = self._batch
        batch.add(self._odometry_pub, self._odometry_messages.fill(
            truth.time_s, truth.position_enu, truth.orientation_xyzw, truth.twist_body))
        batch.add(self._tf_pub, self._truth_tf_messages.fill(
            truth.time_s, truth.position_enu, truth.orientation_xyzw))

    def queue_markers(self, length_per_newton: float) -> None:
        """Rotor speeds and thrust arrows: for people and plots, at the (low) markers rate."""
        truth = self.simulator.truth
        batch = self._batch
        batch.add_copy(self._rotor_pub, self._actuator_messages.fill(
            truth.time_s, truth.rotor_speeds, truth.tilt_angles))
        positions, axes, thrusts = self.simulator.rotor_thrusts()
        batch.add_copy(self._markers_pub, self._marker_messages.fill(
            truth.time_s, positions, axes, length_per_newton * thrusts))

    def static_transforms(self) -> list[Any]:
        """base_link -> imu_link and base_link -> gnss_link of this vehicle."""
        imu = self.simulator.config.imu
        gnss = self.simulator.config.gnss
        return [
            convert.transform(0.0, self.frame(BASE_FRAME), self.frame(IMU_FRAME),
                              imu.mount_position_m, imu.mount_rotation_xyzw),
            convert.transform(0.0, self.frame(BASE_FRAME), self.frame(GNSS_FRAME),
                              gnss.antenna_position_m, (0.0, 0.0, 0.0, 1.0)),
        ]

    # -- commands ---------------------------------------------------------------------------

    def on_command(self, message: JointState) -> None:
        """Hold a valid actuator command; count and drop a bad one (never raises).

        A malformed message is counted for its content whatever its stamp (the more useful
        reason, and independent of how it raced the controller's next command); a newer one
        still answers the lock-step boundary.
        """
        stamp_ns = stamps.to_ns(message.header.stamp)
        newer = stamp_ns > self.last_command_ns
        try:
            speeds, tilts = convert.actuator_command(
                message, self.simulator.rotor_count, self.simulator.tilt_count)
        except convert.CommandError as error:
            self.rejected_commands[error.reason] += 1
            if newer:
                self.last_command_ns = stamp_ns
            return
        if not newer:
            reason = "duplicate_stamp" if stamp_ns == self.last_command_ns else "stamp_backwards"
            self.rejected_commands[reason] += 1
            return
        self.last_command_ns = stamp_ns
        self.simulator.set_command(speeds, tilts)

    def diagnostic_values(self, reasons: tuple[str, ...]) -> dict[str, float | int | bool]:
        """The vehicle's numbers for /diagnostics (units in the key names)."""
        core = self.simulator.diagnostics()
        rejected = Counter(core.rejected_commands) + self.rejected_commands
        # The sensors' true errors: a report can tell a rare GNSS error from a filter fault.
        sensor_values = {f"{name}_{key}": value
                         for name, sensor in self.simulator.sensors.items()
                         for key, value in sensor.report_values().items()}
        return {
            "energy_error_J": core.energy_error_j,
            "momentum_error_Ns": core.linear_momentum_error,
            "angular_momentum_error_Nms": core.angular_momentum_error,
            "newton_iterations": core.newton_iterations,
            "max_newton_iterations": core.max_newton_iterations,
            "landed": core.landed,
            "touchdowns": core.touchdowns,
            "clamped_commands": core.clamped_commands,
            **sensor_values,
            **{f"rejected_commands_{reason}": rejected[reason] for reason in reasons},
        }
