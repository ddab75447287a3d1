"""Shared fixtures for the workspace-level tests (real DDS between processes)."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest

# Fast DDS maps the domain id to UDP ports; ids above 232 overflow the port range.
_MAX_DOMAIN_ID = 232


_started_early: list[Any] = []
"""What the selected test modules started at the end of collection (see below)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Let each selected test module start its slow background work (its ``start_early()``,
    e.g. test_colcon's colcon build) as soon as the session knows what it runs, so that the
    work uses the second core while the tests before the module run."""
    if session.config.option.collectonly:
        return
    modules = {module for item in session.items
               if (module := item.getparent(pytest.Module)) is not None}
    for module in sorted(modules, key=lambda module: module.nodeid):
        start = getattr(module.obj, "start_early", None)
        if start is not None:
            _started_early.append(start())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop what was started early and never waited for (its module failed or stopped)."""
    for work in _started_early:
        work.close()
    _started_early.clear()


@pytest.fixture(scope="session")
def ros_env() -> Iterator[dict[str, str]]:
    """Environment for ROS processes of this test session (``isolated_ros_environment``)."""
    with isolated_ros_environment() as environment:
        yield environment


@contextlib.contextmanager
def isolated_ros_environment() -> Iterator[dict[str, str]]:
    """Environment for ROS processes, isolated from any other run, while in the block.

    A random ROS_DOMAIN_ID (1..232) and localhost-only discovery keep parallel
    runs on one machine (and anything on the network) from talking to each
    other. The same values are set in os.environ for in-process rclpy users, and
    restored at the end of the block.
    """
    domain_id = str(random.SystemRandom().randint(1, _MAX_DOMAIN_ID))
    settings = {
        "ROS_DOMAIN_ID": domain_id,
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
        "PYTHONUNBUFFERED": "1",
    }
    with pytest.MonkeyPatch.context() as mp:
        # Static peers would widen discovery beyond localhost.
        mp.delenv("ROS_STATIC_PEERS", raising=False)
        mp.delenv("ROS_LOCALHOST_ONLY", raising=False)  # deprecated; RANGE replaces it
        for key, value in settings.items():
            mp.setenv(key, value)
        yield dict(os.environ)


class PeerProcess:
    """A child Python process speaking a line protocol on stdin/stdout.

    stdout is read on a thread so that every wait has a timeout; stderr goes
    to a file (a full pipe would block the child) and is shown on failure.
    """

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log_dir: Path) -> None:
        self.name = name
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr_file = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            env=dict(env),
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        self._pump_thread = threading.Thread(
            target=self._pump, args=(self.proc.stdout,), daemon=True
        )
        self._pump_thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.strip())
        self._queue.put(None)  # end of stream

    def expect(self, word: str, timeout_s: float) -> None:
        """Wait until the child prints `word` on a line; fail with its stderr otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fail(f"no {word!r} within {timeout_s} s")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.fail(f"exited (code {self.proc.poll()}) before printing {word!r}")
            self.lines.append(line)
            if line == word:
                return

    def send(self, word: str, *, required: bool = True) -> None:
        """Write `word` as a line to the child; `required=False` tolerates a child that
        already finished (e.g. a STOP racing with normal completion)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            if required:
                self.fail(f"exited (code {self.proc.poll()}) before it could be sent {word!r}")

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.fail(f"did not exit within {timeout_s} s")

    def stderr_text(self) -> str:
        self._stderr_file.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def fail(self, what: str) -> NoReturn:
        pytest.fail(
            f"{self.name} {what}; stdout so far {self.lines}; stderr:\n{self.stderr_text()}"
        )

    def close(self) -> None:
        """Terminate (then kill) the child if it is still running; always safe to call."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=3)
        # The pump thread ends at EOF once the child is gone; join it before
        # closing the pipe it reads so it never reads a closed file.
        self._pump_thread.join(timeout=3)
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        if self.proc.stdout is not None and not self._pump_thread.is_alive():
            self.proc.stdout.close()
        self._stderr_file.close()


@pytest.fixture
def spawn_peer(
    ros_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[[str, list[str]], PeerProcess]]:
    """Factory for PeerProcess children that are always cleaned up after the test."""
    peers: list[PeerProcess] = []

    def spawn(name: str, argv: list[str]) -> PeerProcess:
        peer = PeerProcess(name, argv, ros_env, tmp_path)
        peers.append(peer)
        return peer

    try:
        yield spawn
    finally:
        for peer in peers:
            peer.close()


_RUN_IN_CHILD = """
import ast, sys
from pathlib import Path
from mav_bringup.graph.runner import RunOptions, run
result = run(RunOptions(output_dir=Path(sys.argv[2]), progress=False,
                        **ast.literal_eval(sys.argv[1])))
sys.exit(result.exit_code)
"""
"""A ``mav-sim`` run (``mav_bringup.graph.runner.run``) in a child process: argv[1] is the
repr of RunOptions' other fields, argv[2] the output directory."""


@pytest.fixture(scope="session")
def run_in_child(
    ros_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., PeerProcess]]:
    """Factory of lock-step ``mav-sim`` runs in child processes, each on a ROS domain of its
    own (next to the session's), so that independent recorded runs use both cores at once
    and none sees another's topics. ``start(name, output_dir, **options)`` takes the
    RunOptions fields as literals; ``wait()`` on the returned process gives its exit code."""
    logs = tmp_path_factory.mktemp("run_in_child")
    session_domain = int(ros_env["ROS_DOMAIN_ID"])
    offsets = itertools.count(1)
    children: list[PeerProcess] = []

    def start(name: str, output_dir: Path, **options: object) -> PeerProcess:
        domain = (session_domain - 1 + next(offsets)) % _MAX_DOMAIN_ID + 1
        env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
        child = PeerProcess(name, ["-c", _RUN_IN_CHILD, repr(options), str(output_dir)],
                            env, logs)
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.close()
