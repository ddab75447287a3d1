"""A report's figures drawn on the machine's other cores.

The figures of a report (``trident-replay --report``, ``mav-sim``'s report) do not depend on
one another, but matplotlib draws them one after the other in one process, and importing it
takes about a second on a small machine. A run or a replay keeps one core busy and leaves the
others idle. ``PlotWorkers``, made when a reported run starts, starts worker processes that
import matplotlib and the plot module on those idle cores while the run goes on; ``draw``
then draws the figures in them, one figure a task, and returns when every file is written.
With one CPU (or ``workers=0``) the figures are drawn in this process, in order: the files
are the same either way.

The workers are forked, all of them when ``PlotWorkers`` is made: they start with what the
process has imported, and run no ``__main__`` again (a spawned worker would re-run the
calling script). So make it before the process starts threads (rclpy's DDS threads): a
fork copies every lock as it is at that moment. The workers ignore SIGINT, so that Ctrl-C
stops the run but not the drawing of the report of its simulated part, and take SIGTERM's
default action; one whose parent is killed exits within ``ORPHAN_CHECK_S``. A worker that
dies (killed, out of memory) breaks the pool: the figures it had not written are then drawn
in this process. An error raised by a plot function is raised by ``draw``, with the
worker's traceback as its cause.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on use: a command that never reports does not load them
    from concurrent.futures import Future, ProcessPoolExecutor

ORPHAN_CHECK_S = 1.0
"""How often a worker checks that the process that made it is still alive, s."""

Plot = Callable[[Any, Path], None]
"""Draws one figure of the report's data into the file at the path."""


@dataclass(frozen=True)
class PlotFunction:
    """The plot ``module.name(*arguments, data, path)``, its module imported when it is
    called: a process that hands its figures to workers never loads the plotting code
    (and matplotlib with it)."""

    module: str
    name: str
    arguments: tuple[Any, ...] = ()

    def __call__(self, data: Any, path: Path) -> None:
        getattr(importlib.import_module(self.module), self.name)(*self.arguments, data, path)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _use_agg() -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: a run or a replay may have no display


def _exit_when_orphaned(parent: int) -> None:
    """A forked worker holds both ends of its task pipe, so it never sees the pipe close:
    without this it would wait forever once its parent is killed (SIGKILL, out of memory)."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_S)
    os._exit(1)


def _start_worker(parent: int, modules: Sequence[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()
    _use_agg()
    for module in modules:
        importlib.import_module(module)


def _started() -> None:
    """A task that does nothing: the first submitted forks every worker."""


def _draw_pickled(plot: Plot, data: bytes, path: Path) -> None:
    plot(pickle.loads(data), path)


def draw_here(plots: Mapping[str, Plot], data: Any, directory: Path) -> None:
    """Draw every plot of ``data`` into ``directory / name`` in this process, in order."""
    _use_agg()
    for name, plot in plots.items():
        plot(data, directory / name)


def draw(plots: Mapping[str, Plot], data: Any, directory: Path,
         workers: PlotWorkers | None = None) -> None:
    """Draw every plot of ``data`` into ``directory / name``: in ``workers`` when given
    (``PlotWorkers.draw``), else in this process."""
    if workers is None:
        draw_here(plots, data, directory)
    else:
        workers.draw(plots, data, directory)


class PlotWorkers:
    """Worker processes that import ``modules`` (after matplotlib, Agg) as soon as they are
    made, and draw figures with ``draw``: ``workers`` of them (None: one per figure up to
    the CPUs available; fewer than 2: none, the figures are drawn in this process). Close
    it (or use it as a context manager) to stop them."""

    def __init__(self, modules: Sequence[str], figures: int, workers: int | None = None
                 ) -> None:
        count = min(figures, available_cpus()) if workers is None else workers
        self._pool: ProcessPoolExecutor | None = None
        self._started: list[Future[None]] = []
        if count >= 2:
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing import get_context

            self._pool = ProcessPoolExecutor(count, mp_context=get_context("fork"),
                                             initializer=_start_worker,
                                             initargs=(os.getpid(), tuple(modules)))
            self._started = [self._pool.submit(_started) for _ in range(count)]

    @property
    def parallel(self) -> bool:
        """True while the figures go to worker processes."""
        return self._pool is not None

    def wait_started(self) -> None:
        """Block until the workers have imported their modules (or failed to start); a
        benchmark's helper: the pool hands its first tasks to whichever worker is free, so a
        slow worker may still be importing."""
        from concurrent.futures.process import BrokenProcessPool

        for future in self._started:
            try:
                future.result()
            except BrokenProcessPool:
                return

    def draw(self, plots: Mapping[str, Plot], data: Any, directory: Path) -> None:
        """Draw every plot of ``data`` into ``directory / name``; each plot must be
        picklable (a module-level function, or a ``PlotFunction``) and so must ``data``
        when the figures go to workers."""
        from concurrent.futures.process import BrokenProcessPool

        left = dict(plots)
        if self._pool is not None:
            payload = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)  # once, not per task
            try:
                futures = {name: self._pool.submit(_draw_pickled, plot, payload, directory / name)
                           for name, plot in plots.items()}
                for name, future in futures.items():
                    future.result()
                    del left[name]
            except BrokenProcessPool:
                self.close()  # a worker died: what it had not written is drawn below
        if left:  # (matplotlib is loaded here only then)
            draw_here(left, data, directory)

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> PlotWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
