"""The parameter layer on real rclpy nodes (private context, no peers): descriptors, checks,
start-up errors and run-time changes (accepted and applied, or refused with a reason)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter

from mav_ros_common.parameters import (
    NodeParameters,
    ParameterError,
    ParameterSpec,
    declare_parameters,
    invalid,
)

SPECS = (
    ParameterSpec("rate_hz", 100.0, "control rate", "Hz", 1.0, 2000.0, read_only=True),
    ParameterSpec("gain", 2.0, "proportional gain", "1/s", 0.1, 10.0),
    ParameterSpec("count", 4, "samples per update", "", 1, 100),
    ParameterSpec("mode", "fast", "how it runs", choices=("fast", "slow")),
    ParameterSpec("frame", "map", "frame of the outputs"),
    ParameterSpec("enabled", True, "publish the outputs"),
    ParameterSpec("offset_m", [0.0, 0.0, 0.0], "offset in base_link", "m", length=3),
    ParameterSpec("points", [0.0, 1.0], "pairs", "s", 0.0, 100.0, length_multiple=2,
                  min_length=0),
    ParameterSpec("override", None, "optional per-axis override", "1/s", 1e-6, 1e3, length=3),
    ParameterSpec("datum_deg", math.nan, "origin, NaN for the first fix", "deg", -90.0, 90.0,
                  allow_nan=True),
    ParameterSpec("low", 1.0, "lower bound", "m", 0.0, 100.0),
    ParameterSpec("high", 5.0, "upper bound", "m", 0.0, 100.0),
)


@dataclass(frozen=True)
class Settings:
    gain: float
    span_m: float


def build(values: Mapping[str, Any]) -> Settings:
    """The cross-parameter check of the example node: low < high."""
    if not values["low"] < values["high"]:
        raise invalid("high", values["high"], f"> low = {values['low']} m")
    return Settings(values["gain"], values["high"] - values["low"])


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        patch.delenv("ROS_STATIC_PEERS", raising=False)
        context = Context()
        rclpy.init(context=context, args=[])
        try:
            yield context
        finally:
            rclpy.try_shutdown(context=context)


class Example:
    """A node with ``SPECS``; ``applied`` records every ``apply`` call."""

    def __init__(self, context: Context, **overrides: Any) -> None:
        self.node = Node("example", context=context, parameter_overrides=[
            Parameter(name, value=value) for name, value in overrides.items()])
        try:
            self.parameters: NodeParameters[Settings] = declare_parameters(
                self.node, SPECS, build)
        except ParameterError:
            self.node.destroy_node()
            raise
        self.applied: list[tuple[Settings, frozenset[str]]] = []
        self.parameters.enable_updates(lambda s, names: self.applied.append((s, names)))

    def set(self, name: str, value: Any) -> Any:
        return self.node.set_parameters([Parameter(name, value=value)])[0]


@pytest.fixture
def example(context: Context) -> Iterator[Example]:
    node = Example(context)
    try:
        yield node
    finally:
        node.node.destroy_node()


# ---------------------------------------------------------------- specs and descriptors

def test_descriptors_carry_units_ranges_and_read_only() -> None:
    rate, gain, count = (SPECS[0].descriptor(), SPECS[1].descriptor(), SPECS[2].descriptor())
    assert rate.read_only
    assert not gain.read_only
    (band,) = rate.floating_point_range
    assert (band.from_value, band.to_value) == (1.0, 2000.0)
    assert "control rate" in rate.description
    assert "[1.0, 2000.0] (Hz)" in rate.description
    assert "read-only" in rate.description
    assert "run time" in gain.description
    assert rate.dynamic_typing  # integers accepted for floats
    (steps,) = count.integer_range
    assert (steps.from_value, steps.to_value) == (1, 100)
    assert not count.floating_point_range
    assert count.dynamic_typing
    nan_ok = SPECS[9].descriptor()
    assert not nan_ok.floating_point_range  # rclpy would refuse NaN against a range
    assert "[-90.0, 90.0] (deg), or NaN" in nan_ok.description
    assert SPECS[3].descriptor().additional_constraints == "one of ['fast', 'slow']"


@pytest.mark.parametrize(("index", "value", "expected"), [
    (1, 3, 3.0), (1, 2.5, 2.5), (2, 7, 7), (3, "slow", "slow"), (5, False, False),
    (6, [1, 2.5, -3], (1.0, 2.5, -3.0)), (7, [], ()), (7, [1.0, 2.0, 3.0, 4.0],
                                                        (1.0, 2.0, 3.0, 4.0)),
    (8, None, None), (9, math.nan, math.nan), (9, 45.0, 45.0),
])
def test_check_accepts_and_normalises(index: int, value: Any, expected: Any) -> None:
    result = SPECS[index].check(value)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(result)
    else:
        assert result == expected
        assert type(result) is type(expected)


@pytest.mark.parametrize(("index", "value", "words"), [
    (1, 11.0, ["'gain' = 11.0", "a number in [0.1, 10.0] (1/s)"]),
    (1, math.nan, ["'gain' = nan", "[0.1, 10.0]"]),
    (1, math.inf, ["'gain' = inf"]),
    (1, "2", ["'gain' = '2'"]),
    (1, True, ["'gain' = True"]),
    (2, 2.0, ["'count' = 2.0", "an integer in [1, 100]"]),
    (2, 0, ["'count' = 0"]),
    (3, "medium", ["'mode' = 'medium'", "one of ['fast', 'slow']"]),
    (4, "", ["'frame' = ''", "a non-empty string"]),
    (5, 1, ["'enabled' = 1", "true or false"]),
    (6, [0.0, 1.0], ["'offset_m' = [0.0, 1.0]", "a list of 3 finite numbers (m)"]),
    (6, [0.0, math.nan, 1.0], ["'offset_m' = [0.0, nan, 1.0]"]),
    (7, [1.0, 2.0, 3.0], ["'points' = [1.0, 2.0, 3.0]", "a multiple of 2 long, may be empty"]),
    (7, [1.0, 200.0], ["in [0.0, 100.0]"]),
    (8, [1.0, 0.0, 1.0], ["'override' = [1.0, 0.0, 1.0]", "or unset"]),
    (6, None, ["'offset_m' = None"]),
    (9, 91.0, ["'datum_deg' = 91.0", "or NaN"]),
    (1, 10**400, ["'gain' = ", "[0.1, 10.0]"]),  # beyond float range, either sign
    (1, -(10**400), ["'gain' = ", "[0.1, 10.0]"]),
    (7, [1.0, 10**400], ["in [0.0, 100.0]"]),
])
def test_check_refuses_with_name_value_and_what_is_allowed(index: int, value: Any,
                                                           words: list[str]) -> None:
    with pytest.raises(ParameterError) as error:
        SPECS[index].check(value)
    assert error.value.name == SPECS[index].name
    message = str(error.value)
    assert message.startswith(f"parameter '{SPECS[index].name}' = ")
    for word in words:
        assert word in message


def test_a_spec_whose_default_is_invalid_is_a_programming_error() -> None:
    with pytest.raises(ParameterError):
        ParameterSpec("gain", 20.0, "gain", "1/s", 0.1, 10.0)
    with pytest.raises(ValueError, match="both low <= high"):
        ParameterSpec("gain", 2.0, "gain", "1/s", 0.1)
    with pytest.raises(ValueError, match="choices are for strings"):
        ParameterSpec("gain", 2.0, "gain", choices=("a",))


# ---------------------------------------------------------------- start-up

def test_declaration_reads_overrides_and_builds_settings(context: Context) -> None:
    example = Example(context, gain=4, points=[1.0, 2.0, 3.0, 4.0], override=[1, 2, 3],
                      high=9.0)
    try:
        values = example.parameters.values
        assert values["gain"] == 4.0
        assert isinstance(values["gain"], float)
        assert values["points"] == (1.0, 2.0, 3.0, 4.0)
        assert values["override"] == (1.0, 2.0, 3.0)
        assert values["mode"] == "fast"
        assert math.isnan(values["datum_deg"])
        assert example.parameters.settings == Settings(4.0, 8.0)
        assert example.node.describe_parameter("rate_hz").read_only
        # Dynamic typing, yet `ros2 param describe` shows each parameter's type (that of
        # the value given: `gain` came as an integer and stays one in rclpy's store).
        assert [example.node.describe_parameter(name).type for name in (
            "low", "count", "mode", "enabled", "offset_m")] == [
            t.value for t in (Parameter.Type.DOUBLE, Parameter.Type.INTEGER,
                              Parameter.Type.STRING, Parameter.Type.BOOL,
                              Parameter.Type.DOUBLE_ARRAY)]
        assert sorted(example.parameters.dynamic()) == sorted(
            spec.name for spec in SPECS if not spec.read_only)
        with pytest.raises(TypeError):
            values["gain"] = 1.0  # type: ignore[index]
    finally:
        example.node.destroy_node()


@pytest.mark.parametrize(("overrides", "message"), [
    ({"rate_hz": 5000.0}, r"^parameter 'rate_hz' = 5000.0 is invalid: must be a number in "
                          r"\[1.0, 2000.0\] \(Hz\)$"),
    ({"count": 1.5}, r"^parameter 'count' = 1.5 is invalid: must be an integer in \[1, 100\]"),
    ({"mode": 3}, r"^parameter 'mode' = 3 is invalid: must be one of \['fast', 'slow'\]$"),
    ({"gain": math.nan}, r"^parameter 'gain' = nan is invalid"),
    ({"offset_m": [1.0]}, r"^parameter 'offset_m' = \[1.0\] is invalid: must be a list of 3"),
    ({"low": 7.0}, r"^parameter 'high' = 5.0 is invalid: must be > low = 7.0 m$"),
])
def test_bad_values_at_start_up_raise_one_parameter_error(
        context: Context, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        Example(context, **overrides)


def test_an_unknown_parameter_stops_the_node_with_the_closest_name(context: Context) -> None:
    with pytest.raises(ParameterError, match=r"^unknown parameter 'gian' \(did you mean "
                                             r"'gain'\?\): this node has no such parameter"):
        Example(context, gian=2.0)
    with pytest.raises(ParameterError) as error:
        Example(context, **{f"x{k}": 1.0 for k in range(7)})
    assert "and 2 more" in str(error.value)
    Example(context, use_sim_time=True).node.destroy_node()  # rclpy's own: not unknown


# ---------------------------------------------------------------- run time

def test_an_accepted_change_is_stored_and_applied(example: Example) -> None:
    result = example.set("gain", 5)
    assert result.successful, result.reason
    assert example.parameters["gain"] == 5.0
    assert example.applied == [(Settings(5.0, 4.0), frozenset({"gain"}))]
    assert example.parameters.settings == Settings(5.0, 4.0)
    assert example.node.get_parameter("gain").value == 5


def test_several_parameters_at_once_are_checked_together(example: Example) -> None:
    # Each alone would break low < high; together they are fine: one apply for both.
    result = example.node.set_parameters_atomically([
        Parameter("low", value=20.0), Parameter("high", value=30.0)])
    assert result.successful, result.reason
    assert example.applied == [(Settings(2.0, 10.0), frozenset({"low", "high"}))]
    refused = example.node.set_parameters_atomically([
        Parameter("low", value=50.0), Parameter("gain", value=3.0)])
    assert not refused.successful
    assert refused.reason == "parameter 'high' = 30.0 is invalid: must be > low = 50.0 m"
    assert (example.parameters["low"], example.parameters["gain"]) == (20.0, 2.0)
    assert len(example.applied) == 1


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("gain", 50.0, "Parameter gain out of range"),            # rclpy's own range check
    ("gain", math.nan, "out of range"),
    ("gain", "high", "parameter 'gain' = 'high' is invalid: must be a number in [0.1, 10.0]"),
    ("count", 3.0, "parameter 'count' = 3.0 is invalid: must be an integer in [1, 100]"),
    ("enabled", "yes", "parameter 'enabled' = 'yes' is invalid: must be true or false"),
    ("count", 500, "Parameter count out of range"),
    ("mode", "medium", "parameter 'mode' = 'medium' is invalid: must be one of"),
    ("frame", "", "parameter 'frame' = '' is invalid: must be a non-empty string"),
    ("offset_m", [1.0, 2.0], "parameter 'offset_m' = [1.0, 2.0] is invalid"),
    ("points", [1.0, math.inf], "parameter 'points' = [1.0, inf] is invalid"),
    ("datum_deg", 100.0, "parameter 'datum_deg' = 100.0 is invalid"),
    ("high", 0.5, "parameter 'high' = 0.5 is invalid: must be > low = 1.0 m"),
])
def test_an_invalid_change_is_refused_with_a_reason_and_changes_nothing(
        example: Example, name: str, value: Any, reason: str) -> None:
    before = example.parameters[name]
    result = example.set(name, value)
    assert not result.successful
    assert reason in result.reason
    assert example.applied == []
    assert example.parameters[name] == before or (
        math.isnan(before) and math.isnan(example.parameters[name]))
    stored = example.node.get_parameter(name).value
    assert stored == before or (isinstance(before, tuple) and tuple(stored) == before) or (
        isinstance(before, float) and math.isnan(before) and math.isnan(stored))


def test_read_only_parameters_are_refused_by_rclpy_with_its_reason(example: Example) -> None:
    result = example.set("rate_hz", 50.0)
    assert not result.successful
    assert result.reason == "Trying to set a read-only parameter: rate_hz."
    assert example.parameters["rate_hz"] == 100.0
    assert example.applied == []
    # The layer refuses them too when asked directly (not through rclpy).
    direct = example.parameters.review([Parameter("rate_hz", value=50.0)])
    assert not direct.successful
    assert "read-only" in direct.reason


def test_a_parameter_cannot_be_unset_and_foreign_ones_pass_through(example: Example) -> None:
    result = example.set("override", [1.0, 2.0, 3.0])
    assert result.successful, result.reason
    unset = example.node.set_parameters([Parameter("override", Parameter.Type.NOT_SET)])[0]
    assert not unset.successful
    assert "cannot be unset" in unset.reason
    assert example.node.has_parameter("override")
    assert example.parameters["override"] == (1.0, 2.0, 3.0)
    assert example.set("use_sim_time", True).successful  # rclpy's own parameter
    assert [names for _, names in example.applied] == [frozenset({"override"})]


def test_an_apply_that_fails_is_reported_loudly(context: Context) -> None:
    node = Node("failing", context=context)
    try:
        parameters = declare_parameters(node, SPECS[1:2], lambda values: dict(values))

        def broken(settings: dict[str, Any], names: frozenset[str]) -> None:
            raise RuntimeError("bug")

        parameters.enable_updates(broken)
        with pytest.raises(RuntimeError, match="bug"):
            node.set_parameters([Parameter("gain", value=3.0)])
        with pytest.raises(RuntimeError, match="already enabled"):
            parameters.enable_updates(broken)
    finally:
        node.destroy_node()
