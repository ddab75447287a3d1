"""Fuzz (Hypothesis) of the simulator's actuator-command parser (``convert.actuator_command``)
on real ``sensor_msgs/JointState`` messages: joint names drawn from the vehicle's, other
vehicles' and arbitrary (long) ones, repeated or missing, with ``velocity`` and ``position``
arrays of any length holding any doubles.

Property: the parser returns one finite speed per rotor and either no tilts or one finite
angle per tilt joint, or raises ``CommandError`` with one of the node's rejection reasons
and a message of at most ``MESSAGE_LIMIT`` characters - never another exception.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sensor_msgs.msg import JointState

from variational_sim.ros.convert import CommandError, actuator_command
from variational_sim.ros.simulator_node import COMMAND_REASONS

MESSAGE_LIMIT = 1000
VEHICLES = [(4, 0), (6, 0), (4, 4), (1, 2)]  # (rotors, tilt joints)
NAMES = st.one_of(
    st.builds("rotor_{}".format, st.integers(0, 7)), st.builds("tilt_{}".format, st.integers(0, 5)),
    st.text(max_size=10), st.just("x" * 5000))
DOUBLES = st.one_of(st.floats(), st.floats(-2000.0, 2000.0),
                    st.sampled_from([math.nan, math.inf, -math.inf, 1e308]))


@st.composite
def commands(draw: st.DrawFn, rotors: int, tilts: int) -> JointState:
    """A command for this vehicle with some damage: its names shuffled, dropped, repeated
    or joined by others; arrays as long as the names, or not."""
    names = [f"rotor_{i}" for i in range(rotors)] + [f"tilt_{i}" for i in range(tilts)]
    names = draw(st.permutations(names))
    names = names[:draw(st.integers(0, len(names)))] if draw(st.booleans()) else names
    names += draw(st.lists(NAMES, max_size=3))
    message = JointState(name=names)
    size = len(names)
    lengths = st.one_of(st.just(size), st.integers(0, size + 2))
    message.velocity = draw(st.lists(DOUBLES, min_size=draw(lengths), max_size=size + 2))
    message.position = draw(st.lists(DOUBLES, min_size=draw(lengths), max_size=size + 2))
    return message


def parsed(message: JointState, rotors: int, tilts: int
           ) -> tuple[list[float], list[float] | None] | CommandError:
    """The parser's result, or the CommandError it raised."""
    try:
        return actuator_command(message, rotors, tilts)
    except CommandError as error:
        return error


@pytest.mark.parametrize(("rotors", "tilts"), VEHICLES)
@settings(max_examples=40)
@given(data=st.data())
def test_a_command_is_parsed_or_rejected_with_a_reason(rotors: int, tilts: int,
                                                       data: st.DataObject) -> None:
    message = data.draw(commands(rotors, tilts))
    result = parsed(message, rotors, tilts)
    if isinstance(result, CommandError):
        assert result.reason in COMMAND_REASONS
        assert len(str(result)) <= MESSAGE_LIMIT, str(result)[:300]
        return
    speeds, angles = result
    assert len(speeds) == rotors
    assert all(map(math.isfinite, speeds))
    assert angles is None or (len(angles) == tilts and all(map(math.isfinite, angles)))


@pytest.mark.parametrize(("names", "reason"), [
    (["x" * 100_000, "rotor_0"], "unknown_joint"),
    ([f"joint_{i}" for i in range(10_000)], "unknown_joint"),
    (["rotor_0"] * 10_000, "duplicate_joint"),
    (["y" * 100_000] * 2, "duplicate_joint"),
    (["tilt_0"], "missing_rotor"),
], ids=["long_name", "many_names", "many_repeats", "long_repeat", "no_rotor"])
def test_huge_commands_are_rejected_with_short_messages(names: list[str], reason: str) -> None:
    message = JointState(name=names, velocity=[0.0] * len(names))
    with pytest.raises(CommandError) as caught:
        actuator_command(message, 1, 1 if reason == "missing_rotor" else 0)
    assert caught.value.reason == reason
    assert len(str(caught.value)) <= MESSAGE_LIMIT
