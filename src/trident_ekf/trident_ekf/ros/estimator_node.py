"""The trident EKF as a ROS 2 node: IMU + GNSS (and the enabled aiding sources: barometer,
magnetometer, external pose, zero-velocity updates) in, odometry, /tf and /diagnostics out,
and services to reset it, set its pose and move its datum.

All the estimation logic lives in ``trident_ekf.core.session`` (shared with trident-replay);
this node declares its parameters, converts messages (``convert``) and publishes. Stamps
come from the messages (sim time, bag replay and real drivers alike); the node clock only
paces /diagnostics. Outputs start once the initializer has levelled the IMU and seen a fix.

Inputs come from ``trident_ekf.adapters``: the profile the ``inputs`` parameter selects (ROS
drivers, MAVROS or PX4 uXRCE-DDS) lists the subscriptions (topic, type, QoS) and converts
each message to session calls, so there is no code here per sensor or per autopilot. An
aiding source's input is subscribed only when the source is enabled. sensor_msgs/Imu
arrives as raw CDR (decoded by ``tools.cdr``); the px4 profile imports px4_msgs only when
it is selected (a clear ParameterError if it is missing).

Run-time parameter changes (the dynamic ones of ``parameters``): the filter takes a new
``FilterConfig`` from the next sample on (its state stays); rates, frame names and
``publish_tf`` hold from the next message or timer tick.

Frames (REP-105): the estimate is published in the world frame, ``map_frame`` by default
(odometry ``frame_id`` and /tf ``map -> base_link``), or ``odom_frame`` when ``world_frame``
names it (``odom -> base_link``; another node then publishes ``map -> odom``). The numbers
are the same in both: the ENU estimate at the datum, GNSS-aided (it moves when GNSS
corrects it). ``world_frame`` must be ``map_frame`` or ``odom_frame`` (empty: ``map_frame``).

Services (every call is logged; a refused one answers ``success`` false with the reason):

- ``~/reset`` (std_srvs/Trigger): drop the state; the node waits for data again (levelling
  and a fix, or ``~/set_pose``); the datum stays.
- ``~/set_pose`` (trident_ekf_interfaces/SetPose): (re)start the filter at a pose in the
  world frame (``header.frame_id`` empty or the world frame; stamp zero: now on the node
  clock), covariance (x, y, z, rot x, rot y, rot z) about the world axes. Refused before a
  datum exists (no datum parameters and no fix yet), or for a covariance that is not
  positive definite. The bias estimates of a running filter stay.
- ``~/set_datum`` (trident_ekf_interfaces/SetDatum): move the map origin (WGS-84 degrees,
  ellipsoidal height m); the estimate stays, its map coordinates change.
- topic ``initial_pose`` (geometry_msgs/PoseWithCovarianceStamped, reliable, with
  ``subscribe_initial_pose``): each message as a ``~/set_pose`` call (robot_localization's
  ``set_pose`` topic).

Status: one /diagnostics status ``trident_ekf`` every ``1 / diagnostics_rate_hz`` s of the
node clock in every phase (``phase``: waiting_for_data, aligning, running): WARN and summary
"waiting for data" / "aligning" before the filter runs, then the filter status: nominal
(OK), outage (WARN: no GNSS position update accepted for the outage timeout, ``outage_timeout``
s, or automatically ``outage_gnss_periods`` nominal GNSS periods measured from the fix
stamps, at least ``outage_timeout_floor``; a shorter gap does not change the status),
diverged (ERROR). An IMU input fault (``core.input_clock``) raises the level and leads the
summary: a blackout, no usable sample for ``imu_timeout`` s of input stamps or of the node
clock (ERROR); a clock change, for 1 s of input time after it (ERROR); saturated samples
(WARN, for 1 s); ``input_fault`` gives the reason (empty: none). So does a raised GNSS
spoofing alarm (``core.divergence``: fixes the GNSS velocity and the IMU contradict, never
fused; ERROR until a fix passes the gate again), ``gnss_alarm``. Besides the session's
values: ``phase``, ``world_frame``,
``outage_timeout_s``, ``gnss_period_s``, ``resets_<kind>`` (the session's reset counters)
and ``<command>_refused``.
"""

from __future__ import annotations

import importlib
import math
import sys
from functools import partial
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.experimental.events_executor import EventsExecutor
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from mav_ros_common import diagnostics, stamps
from mav_ros_common.node_main import run_node, spin_events
from mav_ros_common.parameters import ParameterError, declare_parameters
from mav_ros_common.qos import RELIABLE_10, TF
from trident_ekf.adapters import (
    EXTRA_PACKAGES,
    MALFORMED,
    Aid,
    ImuSample,
    Input,
    Qos,
    build_profile,
    deliver,
)
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.ros import convert
from trident_ekf.ros.parameters import FILTERS, SPECS, EstimatorSettings, estimator_settings
from trident_ekf_interfaces.srv import SetDatum, SetPose

NODE_NAME = "trident_ekf"
COMMANDS = ("reset", "set_pose", "set_datum", "initial_pose")
EXECUTOR = EventsExecutor
"""The executor of ``main``: rclpy's EventsExecutor dispatches a message in about a tenth of
the SingleThreadedExecutor's time (bench/bench_estimator_node.py), which at a 250 Hz IMU is
most of the node's cost. Its sim-time timers may fire twice for one /clock value and skip
the next period (``mav_ros_common.ticks``); the node's only timer is the diagnostics', where
that is harmless."""


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
                                         settings.imu_rotation, settings.gnss_receiver,
                                         settings.yaw_estimator)
        self._schedule = OutputSchedule(values["output_rate_hz"])
        self._announced = False
        self._last_usable_imu = (math.nan, 0)  # (its stamp s, node clock ns on arrival)
        self._odometry = self.create_publisher(Odometry, "trident_ekf/odometry", RELIABLE_10)
        self._tf: Publisher[Any] | None = None
        self._take_values()
        self._diagnostics = diagnostics.create_publisher(self)
        self._subscribe_inputs(settings)
        self._diagnostics_timer = self.create_timer(1.0 / values["diagnostics_rate_hz"],
                                                    self.publish_diagnostics)
        self._create_services()
        self.get_logger().info(
            f"{values['filter']} filter; waiting for {values['level_duration_s']} s of static "
            f"IMU and a GNSS fix; outputs at {values['output_rate_hz']} Hz in "
            f"'{self._frames[0]}' -> '{self._frames[1]}'")
        self.parameters.enable_updates(self._apply)

    # ----- run-time parameter changes -----------------------------------------------------
    def _take_values(self) -> None:
        """Frames, sensor noise and the /tf publisher from the current values."""
        values = self.parameters.values
        self._frames: tuple[str, str] = self.parameters.settings.frames  # (world, base)
        self._outputs = convert.EstimateMessages(*self._frames)
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
    def _subscribe_inputs(self, settings: EstimatorSettings) -> None:
        """One subscription per input of the selected profile (aiding ones only for the
        enabled sources); ParameterError when the profile's message package is missing."""
        profile = build_profile(settings.inputs)
        self.inputs = profile.selected(settings.aiding)
        for item in self.inputs:
            try:
                message_class = _message_class(item.msgtype)
            except ImportError as error:
                self.destroy_node()
                package = EXTRA_PACKAGES.get(profile.name, item.msgtype.split("/")[0])
                raise ParameterError(
                    f"parameter 'inputs' = '{profile.name}' needs the {package} interface "
                    f"package ({item.msgtype} for {item.topic}), which cannot be imported "
                    f"({error}): build it into the workspace or choose another inputs "
                    "profile", "inputs") from error
            self.create_subscription(message_class, item.topic, partial(self._on_input, item),
                                     _qos(item.qos, settings.input_queue_depth),
                                     raw=item.raw)
        self.get_logger().info(f"inputs '{profile.name}': " + ", ".join(
            f"{self.resolve_topic_name(item.topic)} ({item.msgtype.rsplit('/', 1)[1]})"
            for item in self.inputs))

    def _on_input(self, item: Input, message: Any) -> None:
        """One message of a profile input: converted (raw CDR for the IMU fast path: at
        200 Hz building Imu message objects costs more than the filter), then each sample to
        the session; outputs after an integrated IMU sample when due."""
        try:
            samples = item.convert(message)
        except MALFORMED:
            rejected = self.session.rejected
            key = f"{item.kind}_malformed"
            rejected[key] = rejected.get(key, 0) + 1
            return
        for sample in samples:
            used = deliver(self.session, sample)
            if isinstance(sample, ImuSample):
                self._note_usable_imu()
                if used and self._schedule.due(sample.stamp_ns):
                    self._publish_estimate(sample.stamp_ns)
            elif not isinstance(sample, Aid):
                self._announce_start()

    def _note_usable_imu(self) -> None:
        """Remember when (node clock) the session last took an IMU sample: a blackout
        without any message shows only on this clock."""
        stamp = self.session.input_clock.last_usable
        if stamp != self._last_usable_imu[0]:
            self._last_usable_imu = (stamp, self.get_clock().now().nanoseconds)

    def _imu_silence(self) -> float:
        """Node-clock seconds since the session last took an IMU sample (0 before any)."""
        stamp, arrival_ns = self._last_usable_imu
        if math.isnan(stamp):  # no usable sample yet
            return 0.0
        return max(0.0, (self.get_clock().now().nanoseconds - arrival_ns) * 1e-9)

    def _announce_start(self) -> None:
        """Log once when the initializer starts the filter (only GNSS input can start it)."""
        datum_set = self.session.datum  # set at the latest by the fix that starts the filter
        if self.session.started and not self._announced and datum_set is not None:
            self._announced = True
            datum = ", ".join(f"{c:.7g}" for c in datum_set.geodetic)
            self.get_logger().info(f"initialized; map datum ({datum}); publishing odometry")

    # ----- services -----------------------------------------------------------------------
    def _create_services(self) -> None:
        """~/reset, ~/set_pose, ~/set_datum and, with ``subscribe_initial_pose``, the
        ``initial_pose`` topic."""
        self.refused = dict.fromkeys(COMMANDS, 0)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(SetPose, "~/set_pose", self._on_set_pose)
        self.create_service(SetDatum, "~/set_datum", self._on_set_datum)
        if self.parameters["subscribe_initial_pose"]:
            self.create_subscription(PoseWithCovarianceStamped, "initial_pose",
                                     self._on_initial_pose, RELIABLE_10)

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        self.session.reset()
        self._announced = False
        self._schedule = OutputSchedule(self.parameters["output_rate_hz"])
        response.success, response.message = True, "state dropped: waiting for data"
        self._log_command("reset", True, response.message)
        return response

    def _on_set_pose(self, request: SetPose.Request, response: SetPose.Response
                     ) -> SetPose.Response:
        response.success, response.message = self._set_pose("set_pose", request.pose)
        return response

    def _on_initial_pose(self, message: PoseWithCovarianceStamped) -> None:
        self._set_pose("initial_pose", message)

    def _set_pose(self, command: str, message: PoseWithCovarianceStamped) -> tuple[bool, str]:
        """(Re)start the filter at the pose of ``message`` (world frame); (success, reason)."""
        world = self._frames[0]
        frame = message.header.frame_id
        stamp = stamps.to_ns(message.header.stamp) or self.get_clock().now().nanoseconds
        pose = message.pose.pose
        p, q = pose.position, pose.orientation
        try:
            if frame not in ("", world):
                raise ValueError(f"the pose must be in the world frame '{world}' (or have an "
                                 f"empty frame_id), not in '{frame}'")
            self.session.set_pose(stamp, (p.x, p.y, p.z), (q.x, q.y, q.z, q.w),
                                  np.asarray(message.pose.covariance, dtype=float).reshape(6, 6))
        except ValueError as error:
            return self._log_command(command, False, str(error))
        self._announced = True
        return self._log_command(command, True, f"filter (re)started at ({p.x:.3f}, {p.y:.3f}, "
                                                f"{p.z:.3f}) m in '{world}'")

    def _on_set_datum(self, request: SetDatum.Request, response: SetDatum.Response
                      ) -> SetDatum.Response:
        datum = (request.latitude_deg, request.longitude_deg, request.height_m)
        try:
            self.session.set_datum(*datum)
        except ValueError as error:
            response.success, response.message = self._log_command("set_datum", False,
                                                                    str(error))
            return response
        response.success, response.message = self._log_command(
            "set_datum", True, "map origin at ({:.7f} deg, {:.7f} deg, {:.3f} m)".format(*datum))
        return response

    def _log_command(self, command: str, success: bool, message: str) -> tuple[bool, str]:
        """Log one command and what came of it; (success, message) for the reply."""
        self._log_events()
        if success:
            self.get_logger().info(f"{command}: {message}")
        else:
            self.refused[command] += 1
            self.get_logger().warning(f"{command} refused: {message}")
        return success, message

    def _log_events(self) -> None:
        """Log what the session reports (resets, of its own or commanded), once each."""
        events = self.session.events
        for event in events:
            self.get_logger().info(f"session: {event}")
        events.clear()

    # ----- outputs ------------------------------------------------------------------------
    def _publish_estimate(self, stamp: int) -> None:
        outputs = self._outputs
        outputs.fill(self.session.estimate())
        self._odometry.publish(outputs.odometry.stamped(stamp))
        if self._tf is not None:
            self._tf.publish(outputs.transform.stamped(stamp))

    def publish_diagnostics(self) -> None:
        """One /diagnostics status ``trident_ekf`` stamped with the node clock, in every
        phase (a failure to describe the session is reported as an ERROR status, so the
        stream never stops)."""
        values: dict[str, str] = {}
        try:
            self._log_events()
            self.session.drain_updates()
            level, summary, values = self.session.diagnostics(
                imu_silence_s=self._imu_silence())
            values = dict(values)
            filter_ = self.session.filter
            values.update({"phase": self.session.phase, "world_frame": self._frames[0],
                           "outage_timeout_s": f"{filter_.outage_threshold:.3f}",
                           "gnss_period_s": f"{filter_.gnss_period:.3f}"})
            values.update({f"resets_{kind}": str(count)
                           for kind, count in self.session.resets.items()})
            values.update({f"{command}_refused": str(count)
                           for command, count in self.refused.items()})
        except Exception as error:  # diagnostics must keep coming whatever fails
            level, summary = 2, f"diagnostics failed: {type(error).__name__}: {error}"
            self.get_logger().error(summary, throttle_duration_sec=10.0)
        stamp = self.get_clock().now().to_msg()
        self._diagnostics.publish(diagnostics.diagnostic_array(
            stamp, diagnostics.status(diagnostics.status_name(self), level, summary,
                                      values)))


def _qos(qos: Qos, depth: int) -> QoSProfile:
    """The rclpy profile of an input's QoS, keeping the last ``depth`` messages."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy[qos.reliability.upper()],
                      durability=DurabilityPolicy[qos.durability.upper()])


def _message_class(msgtype: str) -> Any:
    """The rclpy message class of a type name like ``sensor_msgs/msg/FluidPressure``."""
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def main(args: list[str] | None = None) -> int:
    """Run the node until shutdown (Ctrl-C or the launch system); exit codes as
    ``mav_ros_common.node_main`` (2 on a bad parameter)."""
    return run_node(EstimatorNode, args, name=NODE_NAME, executor=EXECUTOR, run=spin_events)


if __name__ == "__main__":
    sys.exit(main())
