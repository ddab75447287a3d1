"""The generated trident_ekf_interfaces types as a client uses them.

Fields and types are the ones srv/*.srv define, the C type support serialises them
(CDR round trip), and both services answer a call over real DDS (a private context on
a random, localhost-only domain).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterator

import pytest
import rclpy
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.client import Client
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message

from trident_ekf_interfaces.srv import SetDatum, SetPose

WAIT = 10.0  # s: bound of every wait
REPLY = {"success": "boolean", "message": "string"}


def test_set_pose_fields() -> None:
    assert SetPose.Request.get_fields_and_field_types() == {
        "pose": "geometry_msgs/PoseWithCovarianceStamped"}
    assert SetPose.Response.get_fields_and_field_types() == REPLY
    request = SetPose.Request()
    assert isinstance(request.pose, PoseWithCovarianceStamped)
    assert len(request.pose.pose.covariance) == 36


def test_set_datum_fields() -> None:
    assert SetDatum.Request.get_fields_and_field_types() == {
        "latitude_deg": "double", "longitude_deg": "double", "height_m": "double"}
    assert SetDatum.Response.get_fields_and_field_types() == REPLY
    request = SetDatum.Request(latitude_deg=47.3977, longitude_deg=8.5456, height_m=488.0)
    assert (request.latitude_deg, request.longitude_deg, request.height_m) == (
        47.3977, 8.5456, 488.0)
    assert SetDatum.Response() == SetDatum.Response(success=False, message="")


def pose_request() -> SetPose.Request:
    request = SetPose.Request()
    pose = request.pose
    pose.header.frame_id = "map"
    pose.header.stamp.sec, pose.header.stamp.nanosec = 1_000, 5_000_000
    pose.pose.pose.position.x, pose.pose.pose.position.y, pose.pose.pose.position.z = (
        1.5, -2.0, 10.25)
    half = math.radians(30.0) / 2
    pose.pose.pose.orientation.z, pose.pose.pose.orientation.w = math.sin(half), math.cos(half)
    # x, y, z, rot x, rot y, rot z: 0.1 m, 0.1 m, 0.2 m, 0.01 rad, 0.01 rad, 0.05 rad (1 sigma)
    sigmas = (0.1, 0.1, 0.2, 0.01, 0.01, 0.05)
    pose.pose.covariance = [sigmas[i] ** 2 if i == j else 0.0
                            for i in range(6) for j in range(6)]
    return request


@pytest.mark.parametrize("message", [
    pose_request(),
    SetPose.Response(success=False, message="frame 'odom' is not the estimator's world frame"),
    SetDatum.Request(latitude_deg=-33.8688, longitude_deg=151.2093, height_m=-12.5),
    SetDatum.Response(success=True, message="datum set"),
], ids=["SetPose.Request", "SetPose.Response", "SetDatum.Request", "SetDatum.Response"])
def test_cdr_round_trip(message: object) -> None:
    data = serialize_message(message)
    assert deserialize_message(data, type(message)) == message


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    """A private rclpy context on a random, localhost-only DDS domain."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        patch.delenv("ROS_STATIC_PEERS", raising=False)
        patch.delenv("ROS_LOCALHOST_ONLY", raising=False)
        context = Context()
        rclpy.init(context=context)
        try:
            yield context
        finally:
            rclpy.try_shutdown(context=context)


class Estimator(Node):
    """Stands in for the estimator: keeps what it was sent, refuses a datum off the globe."""

    def __init__(self, context: Context) -> None:
        super().__init__("estimator_stand_in", context=context)
        self.poses: list[SetPose.Request] = []
        self.datums: list[SetDatum.Request] = []
        self.create_service(SetPose, "~/set_pose", self.set_pose)
        self.create_service(SetDatum, "~/set_datum", self.set_datum)

    def set_pose(self, request: SetPose.Request, response: SetPose.Response
                 ) -> SetPose.Response:
        self.poses.append(request)
        response.success, response.message = True, "pose set"
        return response

    def set_datum(self, request: SetDatum.Request, response: SetDatum.Response
                  ) -> SetDatum.Response:
        self.datums.append(request)
        response.success = abs(request.latitude_deg) <= 90.0
        response.message = "datum set" if response.success else "latitude out of range"
        return response


def call(client: Client, request: object) -> object:
    """The answer to one call, waited for with a bound (the nodes spin elsewhere)."""
    answered = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _: answered.set())
    assert answered.wait(WAIT), f"{client.srv_name}: no answer within {WAIT} s"
    return future.result()


def test_both_services_answer_over_dds(context: Context) -> None:
    server, operator = Estimator(context), Node("operator", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(server)
    executor.add_node(operator)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        set_pose = operator.create_client(SetPose, "/estimator_stand_in/set_pose")
        set_datum = operator.create_client(SetDatum, "/estimator_stand_in/set_datum")
        for client in (set_pose, set_datum):
            assert client.wait_for_service(timeout_sec=WAIT), f"no {client.srv_name}"

        assert call(set_pose, pose_request()) == SetPose.Response(success=True,
                                                                  message="pose set")
        assert server.poses == [pose_request()]
        good = SetDatum.Request(latitude_deg=47.3977, longitude_deg=8.5456, height_m=488.0)
        assert call(set_datum, good) == SetDatum.Response(success=True, message="datum set")
        off_globe = SetDatum.Request(latitude_deg=91.0)
        assert call(set_datum, off_globe) == SetDatum.Response(
            success=False, message="latitude out of range")
        assert server.datums == [good, off_globe]
    finally:
        executor.shutdown()
        spinner.join(timeout=WAIT)
        server.destroy_node()
        operator.destroy_node()
