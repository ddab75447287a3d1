"""``run_node``: exit codes and clean shutdown, with a real rclpy context."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.executors import Executor
from rclpy.node import Node

from mav_ros_common.node_main import (
    EXIT_BAD_PARAMETER,
    EXIT_OK,
    EXIT_UNEXPECTED,
    run_node,
)
from mav_ros_common.parameters import ParameterError, ParameterSpec, declare_parameters


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 232)))
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    yield
    assert not rclpy.ok(), "run_node left the context running"


class Tiny(Node):
    def __init__(self) -> None:
        super().__init__("tiny")
        self.parameters = declare_parameters(
            self, [ParameterSpec("rate_hz", 10.0, "rate", "Hz", 1.0, 100.0)], dict)
        self.destroyed = False

    def destroy_node(self) -> None:
        self.destroyed = True
        super().destroy_node()


def test_a_bad_parameter_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_node(Tiny, ["tiny", "--ros-args", "-p", "rate_hz:=500.0"], name="tiny")
    assert code == EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("tiny: parameter 'rate_hz' = 500.0 is invalid: must be a number in "
                       "[1.0, 100.0] (Hz)")


def test_a_normal_end_and_ctrl_c_exit_0_and_clean_up() -> None:
    nodes: list[Tiny] = []

    def make() -> Tiny:
        nodes.append(Tiny())
        return nodes[-1]

    def finish(node: Tiny, executor: Executor) -> None:
        assert node.get_parameter("rate_hz").value == 20.0
        executor.spin_once(timeout_sec=0.0)

    assert run_node(make, ["tiny", "--ros-args", "-p", "rate_hz:=20.0"], name="tiny",
                    run=finish) == EXIT_OK

    def interrupted(node: Tiny, executor: Executor) -> None:
        raise KeyboardInterrupt

    assert run_node(make, [], name="tiny", run=interrupted) == EXIT_OK
    assert all(node.destroyed for node in nodes)
    assert len(nodes) == 2


def test_an_unexpected_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(node: Tiny, executor: Executor) -> None:
        raise RuntimeError("wheels fell off")

    assert run_node(Tiny, [], name="tiny", run=broken) == EXIT_UNEXPECTED
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.strip().splitlines()[-1] == "tiny: unexpected error: RuntimeError: wheels fell off"


def test_a_parameter_error_is_never_an_unexpected_one() -> None:
    def refuse() -> Node:
        raise ParameterError("parameter 'x' = 1 is invalid: must be 2", "x")

    assert run_node(refuse, [], name="x") == EXIT_BAD_PARAMETER
