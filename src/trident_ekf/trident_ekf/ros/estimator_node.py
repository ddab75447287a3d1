"""The trident EKF as a ROS 2 node: IMU + GNSS (and the enabled aiding sources: barometer,
magnetometer, external pose, zero-velocity updates) in, odometry, /tf and /diagnostics out.

All the estimation logic lives in ``trident_ekf.core.session`` (shared with trident-replay);
this node declares its parameters, converts messages (``convert``) and publishes. Stamps
come from the messages (sim time, bag replay and real drivers alike); the node clock only
paces /diagnostics. Outputs start once the initializer has levelled the IMU and seen a fix.

Aiding inputs come from ``trident_ekf.inputs``: every enabled source with a message input
gets a subscription to its topic, with no code here per sensor.

Run-time parameter changes (the dynamic ones of ``parameters``): the filter takes a new
``FilterConfig`` from the next sample on (its state stays); rates, frame names and
``publish_tf`` hold from the next message or timer tick.
"""

from __future__ import annotations

import importlib
import struct
import sys
from functools import partial
from typing import Any

from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.publisher import Publisher
from sensor_msgs.msg import Imu, NavSatFix
from tf2_msgs.msg import TFMessage

from mav_ros_common import diagnostics
from mav_ros_common.node_main import run_node
from mav_ros_common.parameters import ParameterError, declare_parameters
from mav_ros_common.qos import RELIABLE_10, SENSOR_DATA, TF
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.inputs import MESSAGE_INPUTS, MessageInput
from trident_ekf.ros import convert
from trident_ekf.ros.parameters import FILTERS, SPECS, EstimatorSettings, estimator_settings
from trident_ekf.tools import cdr

NODE_NAME = "trident_ekf"


class EstimatorNode(Node):
    """Node ``trident_ekf``; ``node_kwargs`` go to ``rclpy.node.Node`` (context,
    parameter_overrides, cli_args, ...). Raises ``ParameterError`` on a bad parameter."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        try:
            self.parameters = declare_parameters(self, SPECS, estimator_settings)
        except ParameterError:
            self.destroy_node()
            raise
        values, settings = self.parameters.values, self.parameters.settings
        filter_ = FILTERS[values["filter"]](settings.filter_config,
                                            build_sources(settings.aiding))
        self.session = EstimationSession(filter_, settings.initializer, settings.datum,
                                         settings.imu_rotation, settings.gnss_receiver)
        self._schedule = OutputSchedule(values["output_rate_hz"])
        self._announced = False
        self._odometry = self.create_publisher(Odometry, "trident_ekf/odometry", RELIABLE_10)
        self._tf: Publisher[Any] | None = None
        self._take_values()
        self._diagnostics = diagnostics.create_publisher(self)
        sensor = SENSOR_DATA
        self.create_subscription(Imu, "imu/data", self._on_imu, sensor, raw=True)
        self.create_subscription(NavSatFix, "gnss/fix", self._on_fix, sensor)
        self.create_subscription(TwistWithCovarianceStamped, "gnss/vel", self._on_velocity,
                                 sensor)
        for name in settings.aiding:
            message_input = MESSAGE_INPUTS.get(name)
            if message_input is not None:
                self.create_subscription(_message_class(message_input.msgtype),
                                         message_input.topic,
                                         partial(self._on_aiding, message_input), sensor)
        self._diagnostics_timer = self.create_timer(1.0 / values["diagnostics_rate_hz"],
                                                    self.publish_diagnostics)
        self.get_logger().info(
            f"{values['filter']} filter; waiting for {values['level_duration_s']} s of static "
            f"IMU and a GNSS fix; outputs at {values['output_rate_hz']} Hz in "
            f"'{self._frames[0]}' -> '{self._frames[1]}'")
        self.parameters.enable_updates(self._apply)

    # ----- run-time parameter changes -----------------------------------------------------
    def _take_values(self) -> None:
        """Frames, sensor noise and the /tf publisher from the current values."""
        values = self.parameters.values
        self._frames: tuple[str, str] = (values["map_frame"], values["base_frame"])
        if values["publish_tf"] and self._tf is None:
            self._tf = self.create_publisher(TFMessage, "/tf", TF)
        elif not values["publish_tf"] and self._tf is not None:
            self.destroy_publisher(self._tf)
            self._tf = None

    def _apply(self, settings: EstimatorSettings, changed: frozenset[str]) -> None:
        """Make accepted parameter changes take effect (between two callbacks)."""
        if settings.filter_config != self.session.filter.config:
            self.session.filter.set_config(settings.filter_config)
        if "output_rate_hz" in changed:
            self._schedule = OutputSchedule(self.parameters["output_rate_hz"])
        if "diagnostics_rate_hz" in changed:
            self._diagnostics_timer.timer_period_ns = round(
                1e9 / self.parameters["diagnostics_rate_hz"])
            self._diagnostics_timer.reset()  # the new period counts from now
        self._take_values()

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
        datum_set = self.session.datum  # set at the latest by the fix that starts the filter
        if self.session.started and not self._announced and datum_set is not None:
            self._announced = True
            datum = ", ".join(f"{c:.7g}" for c in datum_set.geodetic)
            self.get_logger().info(f"initialized; map datum ({datum}); publishing odometry")

    def _on_aiding(self, message_input: MessageInput, message: Any) -> None:
        try:
            stamp, fields = message_input.arguments(message)
        except (ValueError, TypeError):
            self.session.rejected[f"{message_input.source}_malformed"] += 1
            return
        self.session.aid(message_input.source, stamp, **fields)

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
        self._diagnostics.publish(diagnostics.diagnostic_array(
            stamp, diagnostics.status(NODE_NAME, level, summary, values)))


def _message_class(msgtype: str) -> Any:
    """The rclpy message class of a type name like ``sensor_msgs/msg/FluidPressure``."""
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def main(args: list[str] | None = None) -> int:
    """Run the node until shutdown (Ctrl-C or the launch system); exit codes as
    ``mav_ros_common.node_main`` (2 on a bad parameter)."""
    return run_node(EstimatorNode, args, name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
