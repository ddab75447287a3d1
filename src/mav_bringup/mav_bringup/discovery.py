"""How far DDS discovery reaches: this machine only, unless the user says otherwise.

ROS 2 (Iron and later: Jazzy, Kilted) reads ``ROS_AUTOMATIC_DISCOVERY_RANGE`` when a context
starts. Unset, the middleware's default is the whole subnet, so anyone on the network and
the same ROS domain sees the simulator's topics and can call its reset and fault-injection
services or publish actuator commands. The launch files, the Docker image and ``mav-sim``
therefore default to ``LOCALHOST``, and keep any range the user set. docs/security.md says
how to widen it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager

VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
RANGES = ("LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT")
"""The values rcl accepts (it reads anything else as LOCALHOST, with a warning)."""
DEFAULT = "LOCALHOST"


def chosen_range(environment: Mapping[str, str] = os.environ) -> tuple[str, bool]:
    """(discovery range to use, whether it is our default rather than the user's value).

    An empty variable counts as unset, as in rcl; a value rcl does not know is read as
    LOCALHOST, as rcl reads it."""
    given = environment.get(VARIABLE, "").strip()
    if not given:
        return DEFAULT, True
    return (given if given in RANGES else DEFAULT), False


@contextmanager
def localhost_by_default(environment: MutableMapping[str, str] = os.environ) -> Iterator[str]:
    """Set the discovery range to our default while the block runs (an ``rclpy.init``)
    when the user has not chosen one; restore the environment afterwards."""
    value, picked = chosen_range(environment)
    if not picked:
        yield value
        return
    with forced_range(value, environment):
        yield value


@contextmanager
def forced_range(value: str, environment: MutableMapping[str, str] = os.environ
                 ) -> Iterator[None]:
    """The discovery range ``value`` while the block runs, whatever the user set (``OFF``
    for a context that must talk to nobody); the environment is restored afterwards."""
    previous = environment.get(VARIABLE)
    environment[VARIABLE] = value
    try:
        yield
    finally:
        if previous is None:
            environment.pop(VARIABLE, None)
        else:
            environment[VARIABLE] = previous
