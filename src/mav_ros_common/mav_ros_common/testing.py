"""Helpers for tests that run nodes over real DDS: a private rclpy context, nodes spun on a
thread, bounded waits; and loading a sibling test file as a module.

``private_context`` puts the context on a random DDS domain limited to this host, so test
runs on one machine (parallel CI jobs, a developer's live graph) never see each other.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

WAIT = 10.0  # s: default bound of a wait
_ISOLATION = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
_CLEARED = ("ROS_STATIC_PEERS", "ROS_LOCALHOST_ONLY")


@contextmanager
def private_context() -> Iterator[Context]:
    """An initialized rclpy context on a random localhost-only domain (1-232); the
    environment is restored and the context shut down on exit."""
    saved = {name: os.environ.get(name)
             for name in ("ROS_DOMAIN_ID", *_ISOLATION, *_CLEARED)}
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 232))
    os.environ.update(_ISOLATION)
    for name in _CLEARED:
        os.environ.pop(name, None)
    context = Context()
    try:
        rclpy.init(context=context)
        yield context
    finally:
        rclpy.try_shutdown(context=context)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def spinning(*nodes: Node) -> Iterator[None]:
    """Spin ``nodes`` (of one context) on a background thread; on exit stop the executor,
    join the thread and destroy the nodes. Create their publishers and subscriptions before:
    nothing else touches them while the executor runs."""
    executor = SingleThreadedExecutor(context=nodes[0].context)
    for node in nodes:
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        executor.shutdown()
        spinner.join(timeout=WAIT)
        for node in nodes:
            node.destroy_node()


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT,
             poll: float = 1e-3) -> None:
    """Return once ``condition()`` is true; AssertionError naming ``what`` after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def module_from_file(path: Path, name: str) -> ModuleType:
    """Load a Python file as module ``name`` (test folders are not packages, and pytest runs
    with --import-mode=importlib): registered in ``sys.modules`` before it runs, because
    dataclasses look their module up there while it loads. ImportError if there is none."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
