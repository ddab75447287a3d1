"""Stamp conversions, diagnostics builders and the QoS profiles of the contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus
from hypothesis import given
from hypothesis import strategies as st
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

from mav_ros_common import diagnostics, qos, stamps

NS = 10**9


@given(st.integers(min_value=-(2**31) * NS, max_value=(2**31 - 1) * NS + NS - 1))
def test_nanoseconds_round_trip_through_a_stamp(nanoseconds: int) -> None:
    stamp = stamps.from_ns(nanoseconds)
    assert 0 <= stamp.nanosec < NS
    assert stamps.to_ns(stamp) == nanoseconds


def test_seconds_are_rounded_to_the_nanosecond() -> None:
    stamp = stamps.from_seconds(1.2345678915)
    assert (stamp.sec, stamp.nanosec) == (1, 234567892)
    assert stamps.to_seconds(Time(sec=3, nanosec=500_000_000)) == 3.5
    before_epoch = stamps.from_seconds(-0.25)
    assert (before_epoch.sec, before_epoch.nanosec) == (-1, 750_000_000)
    reused = Time()
    stamps.fill_seconds(reused, 0.01)
    assert (reused.sec, reused.nanosec) == (0, 10_000_000)
    stamps.fill_ns(reused, 5 * NS + 7)
    assert (reused.sec, reused.nanosec) == (5, 7)


def test_diagnostic_values_read_back_exactly() -> None:
    values = {"text": "ok", "flag": True, "off": False, "count": np.int64(3), "ratio": 0.1,
              "numpy": np.float64(1e-7), "single": np.float32(0.5), "missing": math.nan}
    pairs = {kv.key: kv.value for kv in diagnostics.key_values(values)}
    assert pairs == {"text": "ok", "flag": "true", "off": "false", "count": "3",
                     "ratio": "0.1", "numpy": "1e-07", "single": "0.5", "missing": "nan"}
    assert float(pairs["numpy"]) == 1e-7


def test_status_and_array_builders() -> None:
    status = diagnostics.status("controller", 1, "allocation saturated", {"ticks": 4},
                                hardware_id="quadrotor_x")
    assert (status.level, status.name, status.hardware_id) == (
        DiagnosticStatus.WARN, "controller", "quadrotor_x")
    assert [(kv.key, kv.value) for kv in status.values] == [("ticks", "4")]
    assert diagnostics.status("simulator", diagnostics.ERROR, "x").hardware_id == "simulator"
    stamp = stamps.from_seconds(2.5)
    message = diagnostics.diagnostic_array(stamp, status)
    assert message.header.stamp == stamp
    assert list(message.status) == [status]
    assert diagnostics.level(2) == DiagnosticStatus.ERROR
    with pytest.raises(ValueError, match="not one of"):
        diagnostics.level(7)
    assert diagnostics.DIAGNOSTICS_TOPIC == "/diagnostics"


def test_qos_profiles_follow_the_conventions() -> None:
    assert qos.SENSOR_DATA.reliability == ReliabilityPolicy.BEST_EFFORT
    assert qos.SENSOR_DATA.depth == 5
    assert (qos.RELIABLE_10.reliability, qos.RELIABLE_10.depth) == (
        ReliabilityPolicy.RELIABLE, 10)
    assert (qos.TF.depth, qos.TF.durability) == (100, DurabilityPolicy.VOLATILE)
    assert (qos.TF_STATIC.depth, qos.TF_STATIC.durability) == (
        1, DurabilityPolicy.TRANSIENT_LOCAL)
