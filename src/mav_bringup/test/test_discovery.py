"""The discovery range: this machine only unless the user chose one (launch files, mav-sim)."""

from __future__ import annotations

import os

import pytest
import rclpy

from mav_bringup import discovery, launch_support
from mav_bringup.graph import runner

VARIABLE = discovery.VARIABLE


@pytest.mark.parametrize(("given", "expected"), [
    (None, ("LOCALHOST", True)), ("", ("LOCALHOST", True)), ("  ", ("LOCALHOST", True)),
    ("SUBNET", ("SUBNET", False)), ("OFF", ("OFF", False)),
    ("SYSTEM_DEFAULT", ("SYSTEM_DEFAULT", False)),
    # rcl reads a value it does not know as LOCALHOST (with a warning): so do we.
    ("subnet", ("LOCALHOST", False)), ("anywhere", ("LOCALHOST", False)),
])
def test_the_users_range_is_kept_and_none_means_localhost(given, expected):
    environment = {} if given is None else {VARIABLE: given}
    assert discovery.chosen_range(environment) == expected


def test_the_default_is_set_for_the_block_only():
    environment = {"OTHER": "1"}
    with discovery.localhost_by_default(environment) as value:
        assert value == "LOCALHOST"
        assert environment == {"OTHER": "1", VARIABLE: "LOCALHOST"}
    assert environment == {"OTHER": "1"}
    empty = {VARIABLE: ""}
    with discovery.localhost_by_default(empty):
        assert empty == {VARIABLE: "LOCALHOST"}
    assert empty == {VARIABLE: ""}
    chosen = {VARIABLE: "SUBNET"}
    with discovery.localhost_by_default(chosen) as value:
        assert (value, chosen) == ("SUBNET", {VARIABLE: "SUBNET"})
    assert chosen == {VARIABLE: "SUBNET"}


def test_the_launch_argument_default_follows_the_environment(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert launch_support.discovery_range_default() == "LOCALHOST"
    monkeypatch.setenv(VARIABLE, "SUBNET")
    assert launch_support.discovery_range_default() == "SUBNET"
    assert list(discovery.RANGES) == launch_support.DISCOVERY_RANGES


class _StopRunError(Exception):
    """Ends a run right after rclpy.init."""


@pytest.mark.parametrize(("given", "seen"), [(None, "LOCALHOST"), ("SUBNET", "SUBNET")])
def test_mav_sim_starts_rcl_with_localhost_discovery_by_default(monkeypatch, tmp_path, given,
                                                                 seen):
    if given is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, given)
    at_init = []
    real_init = rclpy.init

    def init(**arguments):
        at_init.append(os.environ.get(VARIABLE))
        return real_init(**arguments)

    def no_nodes(*_arguments):
        raise _StopRunError

    monkeypatch.setattr(rclpy, "init", init)
    monkeypatch.setattr(runner, "_create_nodes", no_nodes)
    with pytest.raises(_StopRunError):
        runner.run(runner.RunOptions(duration_s=1.0, output_dir=tmp_path / "run", record=False,
                                     report=False, progress=False))
    assert at_init == [seen]
    assert os.environ.get(VARIABLE) == given  # the process environment is left as it was
