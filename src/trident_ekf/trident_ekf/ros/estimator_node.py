"""The trident EKF as a ROS 2 node: IMU + GNSS (optional magnetometer, barometer) in,
odometry, /tf and /diagnostics out.

All the estimation logic lives in ``trident_ekf.core.session`` (shared with trident-replay);
this node declares its parameters, converts messages (``convert``) and publishes. Stamps
come from the messages (sim time, bag replay and real drivers alike); the node clock only
paces /diagnostics. Outputs start once the initializer has levelled the IMU and seen a fix.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, MagneticField, NavSatFix
from tf2_msgs.msg import TFMessage

from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.ros import convert
from trident_ekf.ros.parameters import ParameterError, declare
from trident_ekf.tools import cdr

NODE_NAME = "trident_ekf"
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)
OUTPUT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class EstimatorNode(Node):
    """Node ``trident_ekf``; ``node_kwargs`` go to ``rclpy.node.Node`` (context,
    parameter_overrides, cli_args, ...). Raises ``ParameterError`` on a bad parameter."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        try:
            settings = declare(self)
        except ParameterError:
            self.destroy_node()
            raise
        values = settings.values
        self.session = EstimationSession(settings.filter, settings.initializer, settings.datum,
                                         settings.imu_rotation)
        self._schedule = OutputSchedule(values["output_rate_hz"])
        self._frames = (values["map_frame"], values["base_frame"])
        self._magnetometer_sigma = values["magnetometer_sigma"]
        self._barometer_variance = values["barometer_sigma"] ** 2
        self._announced = False
        self._odometry = self.create_publisher(Odometry, "trident_ekf/odometry", OUTPUT_QOS)
        self._tf = (self.create_publisher(TFMessage, "/tf", TF_QOS)
                    if values["publish_tf"] else None)
        self._diagnostics = self.create_publisher(DiagnosticArray, "/diagnostics", OUTPUT_QOS)
        sensor = qos_profile_sensor_data
        self.create_subscription(Imu, "imu/data", self._on_imu, sensor, raw=True)
        self.create_subscription(NavSatFix, "gnss/fix", self._on_fix, sensor)
        self.create_subscription(TwistWithCovarianceStamped, "gnss/vel", self._on_velocity,
                                 sensor)
        if values["use_magnetometer"]:
            self.create_subscription(MagneticField, "magnetic_field", self._on_magnetometer,
                                     sensor)
        if values["use_barometer"]:
            self.create_subscription(PointStamped, "barometer/height", self._on_barometer,
                                     sensor)
        self.create_timer(1.0 / values["diagnostics_rate_hz"], self.publish_diagnostics)
        self.get_logger().info(
            f"{values['filter']} filter; waiting for {values['level_duration_s']} s of static "
            f"IMU and a GNSS fix; outputs at {values['output_rate_hz']} Hz in "
            f"'{self._frames[0]}' -> '{self._frames[1]}'")

    # ----- inputs -------------------------------------------------------------------------
    def _on_imu(self, data: bytes) -> None:
        # Raw CDR: at 200 Hz building Imu message objects costs more than the filter.
        try:
            stamp, gyro, accel = cdr.decode_imu(data)
        except (ValueError, struct.error):
            self.session.rejected["imu_malformed"] += 1
            return
        if self.session.imu(stamp, gyro, accel) and self._schedule.due(stamp):
            self._publish_estimate(stamp)

    def _on_fix(self, message: NavSatFix) -> None:
        self.session.fix(**convert.fix_fields(message))
        self._announce_start()

    def _on_velocity(self, message: TwistWithCovarianceStamped) -> None:
        self.session.velocity(*convert.velocity_fields(message))
        self._announce_start()

    def _announce_start(self) -> None:
        """Log once when the initializer starts the filter (only GNSS input can start it)."""
        if self.session.started and not self._announced:
            self._announced = True
            datum = ", ".join(f"{c:.7g}" for c in self.session.datum.geodetic)
            self.get_logger().info(f"initialized; map datum ({datum}); publishing odometry")

    def _on_magnetometer(self, message: MagneticField) -> None:
        self.session.magnetometer(*convert.magnetic_field(message, self._magnetometer_sigma))

    def _on_barometer(self, message: PointStamped) -> None:
        stamp, height = convert.barometer_height(message)
        self.session.barometer(stamp, height, self._barometer_variance)

    # ----- outputs ------------------------------------------------------------------------
    def _publish_estimate(self, stamp: int) -> None:
        estimate = self.session.estimate()
        self._odometry.publish(cdr.encode_odometry(stamp, *self._frames, estimate))
        if self._tf is not None:
            self._tf.publish(convert.transform(estimate, stamp, *self._frames))

    def publish_diagnostics(self) -> None:
        """One /diagnostics status ``trident_ekf`` stamped with the node clock."""
        self.session.drain_updates()
        level, summary, values = self.session.diagnostics()
        stamp = self.get_clock().now().to_msg()
        self._diagnostics.publish(convert.diagnostics(stamp, NODE_NAME, level, summary, values))


def main(args: list[str] | None = None) -> int:
    """Run the node until shutdown (Ctrl-C or the launch system); 1 on a bad parameter."""
    rclpy.init(args=args)
    node = None
    try:
        node = EstimatorNode()
        rclpy.spin(node)
    except ParameterError as error:
        print(f"{NODE_NAME}: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
