"""Fuzz (Hypothesis) of the controller's odometry path: a real ``nav_msgs/Odometry`` with
any field values is serialized, read as the node's raw subscription reads it
(``convert.odometry_sample``), screened by the node's own rule
(``mav_dynamics.flight.odometry_rejection``, which the node's core applies) and, when
accepted, controlled and allocated as the node's control tick does.

Property: a message is rejected with one of the node's reasons, or the rotor speeds sent on
are finite and inside the rotors' limits (with finite tilts) - never NaN passed on, never
an exception. Values: NaN, infinities, 1e308 and other huge or tiny numbers, non-unit
quaternions, stamps at 0, negative, the largest, and repeated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nav_msgs.msg import Odometry
from rclpy.serialization import serialize_message

from mav_dynamics import flight
from mav_dynamics.allocation import ControlAllocator
from mav_dynamics.controller import TrackingController, TrackingReference
from mav_dynamics.model import TreeModel
from mav_dynamics.ros import convert
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion
from mav_ros_common.resources import find_named_file

REASONS = {"non_finite", "non_unit_quaternion", "out_of_range", "stamp_backwards",
           "stamp_duplicate"}
LAST_STAMP_NS = 5 * 10**9
DOUBLES = st.one_of(st.floats(), st.floats(-100.0, 100.0),
                    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324]))
STAMPS = st.one_of(st.sampled_from([(0, 0), (-1, 0), (5, 0), (2**31 - 1, 999_999_999)]),
                   st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(0, 999_999_999)))
UNIT_QUATERNIONS = st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(
    lambda q: np.linalg.norm(q) > 0.1).map(lambda q: list(np.asarray(q) / np.linalg.norm(q)))


@pytest.fixture(scope="module", params=["quadrotor_x.yaml", "tilting_quadrotor.yaml"])
def vehicle(request: pytest.FixtureRequest) -> tuple[TrackingController, ControlAllocator]:
    model = TreeModel(load_vehicle(find_named_file(request.param, "vehicles")))
    allocator = ControlAllocator(model)
    assert model.vehicle.gains is not None
    return TrackingController(model, model.vehicle.gains, rank=allocator.rank), allocator


@st.composite
def odometries(draw: st.DrawFn) -> Odometry:
    message = Odometry()
    message.header.stamp.sec, message.header.stamp.nanosec = draw(STAMPS)
    pose, twist = message.pose.pose, message.twist.twist
    for vector in (pose.position, twist.linear, twist.angular):
        vector.x, vector.y, vector.z = draw(st.lists(DOUBLES, min_size=3, max_size=3))
    o = pose.orientation
    o.x, o.y, o.z, o.w = draw(st.one_of(UNIT_QUATERNIONS,
                                        st.lists(DOUBLES, min_size=4, max_size=4)))
    return message


@settings(max_examples=60)
@given(message=odometries())
def test_odometry_is_rejected_with_a_reason_or_gives_usable_commands(
        vehicle: tuple[TrackingController, ControlAllocator], message: Odometry) -> None:
    controller, allocator = vehicle
    sample = convert.odometry_sample(serialize_message(message))
    # an earlier message, stamped LAST_STAMP_NS, was accepted
    reason = flight.odometry_rejection(sample.stamp_ns, sample.orientation, sample.position,
                                       sample.twist, LAST_STAMP_NS)
    if reason is not None:
        assert reason in REASONS
        return
    rotation = quaternion.to_matrix(sample.orientation / np.linalg.norm(sample.orientation))
    output = controller.update(rotation, sample.position, sample.twist,
                               TrackingReference(np.array([0.0, 0.0, 1.5])))
    tilting = allocator.tilt_min.size > 0
    idle_tilts = np.clip(0.0, allocator.tilt_min, allocator.tilt_max)  # the node's first
    allocation = allocator.allocate(output.wrench, idle_tilts if tilting else None,
                                    0.01 if tilting else None)
    speeds = allocation.rotor_speeds
    assert np.all(np.isfinite(speeds)), (sample, speeds)
    assert np.all(np.isfinite(allocation.tilt_angles))
    assert np.all(speeds >= allocator.speed_min - 1e-9)
    assert np.all(speeds <= allocator.speed_max + 1e-9)
