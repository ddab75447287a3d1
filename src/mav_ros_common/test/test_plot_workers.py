"""Figures drawn by worker processes: the same files as drawn here, errors raised where the
report is made, a dead worker's figures drawn here, workers that outlive Ctrl-C, and the
plotting module never loaded by the process that hands its figures out."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mav_ros_common.plot_workers import (
    ORPHAN_CHECK_S,
    PlotFunction,
    PlotWorkers,
    available_cpus,
    draw,
)

DATA = {"t": np.linspace(0.0, 10.0, 500), "seed": 3}


def line_plot(data: dict[str, object], path: Path) -> None:
    import matplotlib.pyplot as plt

    t = np.asarray(data["t"])
    figure, axis = plt.subplots(figsize=(4, 3))
    axis.plot(t, np.sin(t) * float(data["seed"]))  # type: ignore[arg-type]
    axis.set(xlabel="t (s)", ylabel="value")
    figure.savefig(path, dpi=60)
    plt.close(figure)


def scatter_plot(data: dict[str, object], path: Path) -> None:
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(int(data["seed"]))  # type: ignore[call-overload]
    figure, axis = plt.subplots(figsize=(3, 3))
    axis.scatter(*rng.normal(size=(2, 200)), s=4)
    figure.savefig(path, dpi=60)
    plt.close(figure)


def failing_plot(data: dict[str, object], path: Path) -> None:
    raise ValueError(f"no data for {path.name}")


def pid_plot(data: dict[str, object], path: Path) -> None:
    path.write_text(str(os.getpid()))


def dying_plot(parent: int, data: dict[str, object], path: Path) -> None:
    """Kills the worker it runs in; draws like ``line_plot`` in the parent."""
    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    line_plot(data, path)


PLOTS = {"line.png": line_plot, "scatter.png": scatter_plot, "line_again.png": line_plot}


def test_workers_write_the_same_files_as_this_process(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    draw(PLOTS, DATA, here)
    with PlotWorkers((__name__,), len(PLOTS), workers=2) as workers:
        assert workers.parallel
        draw(PLOTS, DATA, there, workers)
    for name in PLOTS:
        assert (here / name).read_bytes() == (there / name).read_bytes(), name


def test_a_plot_error_is_raised_by_draw(tmp_path: Path) -> None:
    with PlotWorkers((__name__,), 2, workers=2) as workers, \
            pytest.raises(ValueError, match=r"no data for bad\.png"):
        workers.draw({"good.png": line_plot, "bad.png": failing_plot}, DATA, tmp_path)


def test_the_figures_of_a_worker_that_dies_are_drawn_here(tmp_path: Path) -> None:
    plots = {"dies.png": PlotFunction(__name__, "dying_plot", (os.getpid(),)),
             "line.png": line_plot, "scatter.png": scatter_plot}
    with PlotWorkers((__name__,), len(plots), workers=2) as workers:
        workers.draw(plots, DATA, tmp_path)
        assert not workers.parallel  # the pool broke: later figures are drawn here
    reference = tmp_path / "reference.png"
    line_plot(DATA, reference)
    assert (tmp_path / "dies.png").read_bytes() == reference.read_bytes()
    assert {p.name for p in tmp_path.iterdir()} == {"dies.png", "line.png", "scatter.png",
                                                    "reference.png"}


def _ignores_sigint(pid: int) -> bool:
    """From the process's signal dispositions (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def test_workers_ignore_ctrl_c_and_keep_drawing(tmp_path: Path) -> None:
    before = set(multiprocessing.active_children())
    with PlotWorkers((__name__,), 2, workers=2) as workers:
        started = [p for p in multiprocessing.active_children() if p not in before]
        assert len(started) == 2  # every worker forked when the pool is made
        pids = {p.pid for p in started}
        deadline = time.monotonic() + 30.0
        while not all(_ignores_sigint(p.pid) for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            os.kill(pid, signal.SIGINT)  # what Ctrl-C sends to the whole process group
        plots = {f"{k}.txt": pid_plot for k in range(8)}
        workers.draw(plots, DATA, tmp_path)
        assert workers.parallel
        assert all(p.is_alive() for p in started)
        assert {int((tmp_path / name).read_text()) for name in plots} <= pids


def test_workers_exit_when_their_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL, out of memory) leaves no worker behind."""
    script = f"""
import os, sys, time
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parent)!r})
from mav_ros_common.plot_workers import PlotWorkers
import multiprocessing
workers = PlotWorkers((), 2, workers=2)
workers.draw({{"pid.txt": __import__("test_plot_workers").pid_plot}}, None,
             Path({str(tmp_path)!r}))
print(*(p.pid for p in multiprocessing.active_children()), flush=True)
time.sleep(60)
"""
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = {int(pid) for pid in parent.stdout.readline().split()}
    assert len(pids) == 2
    assert int((tmp_path / "pid.txt").read_text()) in pids
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10.0 * ORPHAN_CHECK_S
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:  # not to leave them to the rest of the session
        os.kill(pid, signal.SIGKILL)
    assert not left


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_worker_or_one_cpu_draws_here(tmp_path: Path) -> None:
    assert not PlotWorkers((), 5, workers=1).parallel
    assert not PlotWorkers((), 5, workers=0).parallel
    assert not PlotWorkers((), 1).parallel  # one figure: nothing to share
    with PlotWorkers((), 5) as automatic:
        assert automatic.parallel == (available_cpus() >= 2)
    workers = PlotWorkers((), 2, workers=0)
    workers.draw({"pid.txt": pid_plot}, DATA, tmp_path)
    assert int((tmp_path / "pid.txt").read_text()) == os.getpid()


def test_a_plot_function_imports_its_module_only_when_called(tmp_path: Path) -> None:
    """The process that hands figures to workers never loads matplotlib: the plot is named
    by module and function, and nothing here draws."""
    script = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parent)!r})
from mav_ros_common.plot_workers import PlotFunction, PlotWorkers
with PlotWorkers(("matplotlib.pyplot",), 2, workers=2) as workers:
    plots = {{name: PlotFunction("test_plot_workers", "line_plot") for name in ("a.png", "b.png")}}
    workers.draw(plots, {{"t": [0.0, 1.0], "seed": 1}}, Path({str(tmp_path)!r}))
print("matplotlib" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    assert result.stdout.split() == ["False"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png"]
