"""The interface packages tools/bootstrap builds into the venv, over real DDS.

px4_msgs (tools/px4_msgs) must carry PX4 v1.15's wire layout: CDR is positional, so the
field names, types and order below are checked against the generated classes. Then two
DDS participants in one process (two rclpy contexts on the isolated domain of the
`ros_env` fixture, so discovery and transport are real) exchange SensorCombined and
SensorGps and make a SetDatum call (trident_ekf_interfaces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import rclpy
from px4_msgs.msg import SensorCombined, SensorGps, VehicleAirData, VehicleMagnetometer
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from mav_ros_common.testing import spinning
from trident_ekf_interfaces.srv import SetDatum

WAIT = 10.0  # s: bound of every wait
pytestmark = pytest.mark.timeout(60)

# PX4-Autopilot v1.15, msg/*.msg: (field, rosidl type) in wire order.
PX4_V1_15 = {
    SensorCombined: [
        ("timestamp", "uint64"), ("gyro_rad", "float[3]"), ("gyro_integral_dt", "uint32"),
        ("accelerometer_timestamp_relative", "int32"), ("accelerometer_m_s2", "float[3]"),
        ("accelerometer_integral_dt", "uint32"), ("accelerometer_clipping", "uint8"),
        ("gyro_clipping", "uint8"), ("accel_calibration_count", "uint8"),
        ("gyro_calibration_count", "uint8"),
    ],
    SensorGps: [
        ("timestamp", "uint64"), ("timestamp_sample", "uint64"), ("device_id", "uint32"),
        ("latitude_deg", "double"), ("longitude_deg", "double"), ("altitude_msl_m", "double"),
        ("altitude_ellipsoid_m", "double"), ("s_variance_m_s", "float"),
        ("c_variance_rad", "float"), ("fix_type", "uint8"), ("eph", "float"), ("epv", "float"),
        ("hdop", "float"), ("vdop", "float"), ("noise_per_ms", "int32"),
        ("automatic_gain_control", "uint16"), ("jamming_state", "uint8"),
        ("jamming_indicator", "int32"), ("spoofing_state", "uint8"), ("vel_m_s", "float"),
        ("vel_n_m_s", "float"), ("vel_e_m_s", "float"), ("vel_d_m_s", "float"),
        ("cog_rad", "float"), ("vel_ned_valid", "boolean"),
        ("timestamp_time_relative", "int32"), ("time_utc_usec", "uint64"),
        ("satellites_used", "uint8"), ("heading", "float"), ("heading_offset", "float"),
        ("heading_accuracy", "float"), ("rtcm_injection_rate", "float"),
        ("selected_rtcm_instance", "uint8"), ("rtcm_crc_failed", "boolean"),
        ("rtcm_msg_used", "uint8"),
    ],
    VehicleAirData: [
        ("timestamp", "uint64"), ("timestamp_sample", "uint64"), ("baro_device_id", "uint32"),
        ("baro_alt_meter", "float"), ("baro_temp_celcius", "float"),
        ("baro_pressure_pa", "float"), ("rho", "float"), ("eas2tas", "float"),
        ("calibration_count", "uint8"),
    ],
    VehicleMagnetometer: [
        ("timestamp", "uint64"), ("timestamp_sample", "uint64"), ("device_id", "uint32"),
        ("magnetometer_ga", "float[3]"), ("calibration_count", "uint8"),
    ],
}


@pytest.mark.parametrize("message_type", list(PX4_V1_15), ids=lambda t: t.__name__)
def test_px4_msgs_have_the_v1_15_wire_layout(message_type: type) -> None:
    assert list(message_type.get_fields_and_field_types().items()) == PX4_V1_15[message_type]


def sensor_combined() -> SensorCombined:
    return SensorCombined(
        timestamp=123_456_789, gyro_rad=[0.01, -0.02, 0.5], gyro_integral_dt=4_000,
        accelerometer_timestamp_relative=-250, accelerometer_m_s2=[0.1, -0.2, -9.80665],
        accelerometer_integral_dt=4_000, accelerometer_clipping=SensorCombined.CLIPPING_Z,
        gyro_clipping=0, accel_calibration_count=2, gyro_calibration_count=3)


def sensor_gps() -> SensorGps:
    return SensorGps(
        timestamp=123_456_789, timestamp_sample=123_450_000, device_id=11_141_125,
        latitude_deg=47.397742, longitude_deg=8.545594, altitude_msl_m=488.25,
        altitude_ellipsoid_m=535.5, s_variance_m_s=0.25, c_variance_rad=0.5,
        fix_type=SensorGps.FIX_TYPE_RTK_FIXED, eph=0.5, epv=0.75, hdop=0.75, vdop=1.0,
        noise_per_ms=72, automatic_gain_control=1_234, jamming_state=SensorGps.JAMMING_STATE_OK,
        jamming_indicator=13, spoofing_state=SensorGps.SPOOFING_STATE_NONE, vel_m_s=3.0,
        vel_n_m_s=1.5, vel_e_m_s=-2.5, vel_d_m_s=0.25, cog_rad=-1.0, vel_ned_valid=True,
        timestamp_time_relative=-5, time_utc_usec=1_700_000_000_000_000, satellites_used=23,
        heading=1.0, heading_offset=-1.5, heading_accuracy=0.125, rtcm_injection_rate=1.0,
        selected_rtcm_instance=1, rtcm_crc_failed=True,
        rtcm_msg_used=SensorGps.RTCM_MSG_USED_USED)


@contextmanager
def participant(name: str) -> Iterator[Node]:
    """A node in its own context (its own DDS participant), spun on a thread."""
    context = Context()
    rclpy.init(context=context, args=[])
    try:
        node = Node(name, context=context)
        with spinning(node):
            yield node
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture(scope="module")
def flight_controller(ros_env: dict[str, str]) -> Iterator[Node]:
    with participant("fake_px4") as node:
        yield node


@pytest.fixture(scope="module")
def companion(ros_env: dict[str, str]) -> Iterator[Node]:
    with participant("companion") as node:
        yield node


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT} s waiting for {what}")
        time.sleep(0.01)


@pytest.mark.parametrize(("message_type", "make", "topic"), [
    (SensorCombined, sensor_combined, "/fmu/out/sensor_combined"),
    (SensorGps, sensor_gps, "/fmu/out/vehicle_gps_position"),
], ids=["SensorCombined", "SensorGps"])
def test_px4_sensor_topics_cross_dds(flight_controller: Node, companion: Node,
                                     message_type: type, make: Callable[[], object],
                                     topic: str) -> None:
    # PX4's bridge publishes /fmu/out/* best effort, as sensor data.
    received: list[object] = []
    subscription = companion.create_subscription(message_type, topic, received.append,
                                                 qos_profile_sensor_data)
    publisher = flight_controller.create_publisher(message_type, topic,
                                                   qos_profile_sensor_data)
    try:
        wait_for(lambda: publisher.get_subscription_count() == 1, f"a reader of {topic}")
        sent = make()

        def delivered() -> bool:  # best effort: resend until a sample arrives
            if not received:
                publisher.publish(sent)
            return bool(received)

        wait_for(delivered, f"{topic} across DDS")
        assert received[0] == sent
    finally:
        companion.destroy_subscription(subscription)
        flight_controller.destroy_publisher(publisher)


def test_set_datum_call_crosses_dds(flight_controller: Node, companion: Node) -> None:
    requests: list[SetDatum.Request] = []

    def set_datum(request: SetDatum.Request, response: SetDatum.Response
                  ) -> SetDatum.Response:
        requests.append(request)
        response.success, response.message = True, "datum set"
        return response

    service = companion.create_service(SetDatum, "/trident_ekf/set_datum", set_datum)
    client = flight_controller.create_client(SetDatum, "/trident_ekf/set_datum")
    try:
        assert client.wait_for_service(timeout_sec=WAIT), "no /trident_ekf/set_datum"
        request = SetDatum.Request(latitude_deg=47.397742, longitude_deg=8.545594,
                                   height_m=535.5)
        answered = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: answered.set())
        assert answered.wait(WAIT), f"no answer within {WAIT} s"
        assert future.result() == SetDatum.Response(success=True, message="datum set")
        assert requests == [request]
    finally:
        flight_controller.destroy_client(client)
        companion.destroy_service(service)
