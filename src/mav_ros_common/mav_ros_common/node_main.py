"""The ``main()`` of every node: init, construct, spin, shut down, and the exit codes.

``run_node`` is what each node's console script calls::

    def main(args: list[str] | None = None) -> int:
        return run_node(ControllerNode, args, name="controller")

Exit codes: ``EXIT_OK`` (0) at a normal end, on Ctrl-C and when the context is shut down
from outside (``ros2 launch`` stopping the node); ``EXIT_BAD_PARAMETER`` (2) with one line
on stderr naming the parameter, its value and what is allowed, when the node refuses its
parameters (``ParameterError``); ``EXIT_UNEXPECTED`` (1) with the traceback and a last line
for anything else.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Protocol, TypeVar

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from mav_ros_common.exit_codes import EXIT_FAILED as EXIT_UNEXPECTED
from mav_ros_common.exit_codes import EXIT_OK
from mav_ros_common.exit_codes import EXIT_USAGE as EXIT_BAD_PARAMETER
from mav_ros_common.parameters import ParameterError

NodeT = TypeVar("NodeT", bound=Node)


class ExecutorFactory(Protocol):
    """An executor class or factory: ``SingleThreadedExecutor``, ``EventsExecutor``."""

    def __call__(self, *, context: Context | None = None) -> Executor: ...


SPIN_TIMEOUT_S = 0.1
"""Longest wait of one ``spin_once`` in ``spin_events`` (s): how soon a shutdown is noticed
when nothing arrives."""


def spin(node: Node, executor: Executor) -> None:
    """The default run: spin until shutdown."""
    executor.spin()


def spin_events(node: Node, executor: Executor) -> None:
    """The run for rclpy's EventsExecutor: deliver one event at a time until shutdown (its
    ``spin()`` delivers nothing in rclpy 9.1.2; its ``spin_once`` does)."""
    while executor.context.ok():
        executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)


def run_node(node_factory: Callable[[], NodeT], args: list[str] | None = None, *,
             name: str, executor: ExecutorFactory = SingleThreadedExecutor,
             run: Callable[[NodeT, Executor], None] = spin) -> int:
    """Init rclpy with ``args`` (None: ``sys.argv``), build the node, add it to a new
    ``executor`` and ``run`` it (default: spin until shutdown); clean up whatever happens
    and return the exit code. ``name`` prefixes the messages on stderr."""
    rclpy.init(args=args)
    node: NodeT | None = None
    runner: Executor | None = None
    try:
        node = node_factory()
        runner = executor(context=node.context)
        runner.add_node(node)
        run(node, runner)
    except ParameterError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    except (KeyboardInterrupt, ExternalShutdownException):
        return EXIT_OK
    except Exception as error:
        traceback.print_exc()
        print(f"{name}: unexpected error: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_UNEXPECTED
    finally:
        if runner is not None:
            runner.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return EXIT_OK
