"""Keeping a ``mav-sim`` run to itself: its ROS domain and a lock on its output directory.

Two runs on one ROS domain (two users, two CI jobs) would each record and consume the
other's topics and still exit 0 with reports that look valid. So a run uses
``ROS_DOMAIN_ID`` when the user set it (to watch the run live, say), and otherwise a domain
of its own derived from its process id. (Counting another graph's publishers on the domain
is no check: DDS keeps a killed process's publishers for its lease time, 20 s with Fast
DDS, so a run after a killed one would be refused.) Two runs writing one output directory
would delete each other's bag: a run holds an advisory lock on ``<output>/.mav-sim.lock``
while it writes, and a second run, even with ``--overwrite``, is refused.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import TextIO

AUTOMATIC_DOMAINS = (1, 101)
"""Domains an unset ``ROS_DOMAIN_ID`` maps into (inclusive; 0 is everyone's default, and
domains up to 101 keep DDS ports out of Linux's ephemeral range)."""
LOCK_NAME = ".mav-sim.lock"


def run_domain_id() -> tuple[int, bool]:
    """(ROS domain of this run, whether it was picked here rather than set by the user)."""
    given = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if given:
        return int(given), False
    low, high = AUTOMATIC_DOMAINS
    return low + os.getpid() % (high - low + 1), True


class OutputLock:
    """An advisory lock on an output directory, held while a run writes it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._file: TextIO | None = None

    def __enter__(self) -> OutputLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        file = (self.directory / LOCK_NAME).open("a+")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "unknown"
            file.close()
            raise FileExistsError(
                f"output directory {self.directory} is being written by another mav-sim run "
                f"(pid {holder}); wait for it or choose another --output-dir") from None
        file.seek(0)
        file.truncate()
        file.write(f"{os.getpid()}\n")
        file.flush()
        self._file = file
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._file is not None:
            (self.directory / LOCK_NAME).unlink(missing_ok=True)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
