"""The campaign's progress line on stderr: runs done of the total, failures, runs per minute
and the time left at that rate. On a terminal the line is rewritten in place; in a log (CI,
a file) a new line is written every ``LOG_EVERY_S`` seconds and at the end."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

LOG_EVERY_S = 5.0


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}h{minute:02d}m" if hours else f"{minute}m{second:02d}s"


class Progress:
    """Counts finished runs; ``done_before`` of ``total`` were finished by an earlier
    invocation (they count as done, not in the rate)."""

    def __init__(self, total: int, done_before: int, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, quiet: bool = False) -> None:
        self.total = total
        self.done = done_before
        self.failed = 0
        self._done_here = 0
        self._stream = sys.stderr if stream is None else stream
        self._clock = clock
        self._start = clock()
        self._last_log = -math.inf
        self._on_terminal = self._stream.isatty()
        self._quiet = quiet

    def finished(self, ok: bool) -> None:
        """One more run done (failed unless ``ok``)."""
        self.done += 1
        self._done_here += 1
        self.failed += not ok
        self.show()

    def line(self) -> str:
        elapsed = self._clock() - self._start
        rate = 60.0 * self._done_here / elapsed if elapsed > 0 and self._done_here else 0.0
        left = 60.0 * (self.total - self.done) / rate if rate > 0 else math.inf
        return (f"[mav-campaign] {self.done}/{self.total} runs, {self.failed} failed, "
                f"{rate:.1f} runs/min, {_duration(left)} left")

    def show(self, final: bool = False) -> None:
        """Write the line: always on a terminal, every ``LOG_EVERY_S`` in a log (never when
        ``quiet``)."""
        now = self._clock()
        if self._quiet:
            return
        if self._on_terminal:
            self._stream.write(f"\r{self.line()}\033[K" + ("\n" if final else ""))
        elif final or now - self._last_log >= LOG_EVERY_S:
            self._stream.write(self.line() + "\n")
            self._last_log = now
        self._stream.flush()
