"""Benchmark harness: time our code and a baseline in the same process, report ratios.

Each case is a pair of zero-argument callables doing the same work. Before
timing, the harness checks that both give the same answer (through a
case-specific comparison), so a fast wrong result cannot pass as a speed-up.
Times are the best of several repeats of an auto-sized loop (the usual way to
suppress scheduler noise); results go to JSON and a Markdown table.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
import timeit
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    ours: Callable[[], Any]
    baseline: Callable[[], Any]
    agree: Callable[[Any, Any], bool]


@dataclass(frozen=True)
class Result:
    name: str
    size: int
    ours_s: float
    baseline_s: float

    @property
    def ratio(self) -> float:
        """Our time over the baseline's: below 1 is faster than the baseline."""
        return self.ours_s / self.baseline_s


@contextlib.contextmanager
def installed_bytecode() -> Iterator[None]:
    """Child interpreters started inside keep their compiled modules in a temporary folder
    (``PYTHONPYCACHEPREFIX``), as an installed package has them (pip and colcon byte-compile
    on install), even where ``PYTHONDONTWRITEBYTECODE`` is set, as some containers do: there
    a source tree never byte-compiled would compile every module at every start. A child's
    first run fills the cache; the environment is restored on leaving."""
    saved = {name: os.environ.get(name)
             for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as cache:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = cache
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def best_time(function: Callable[[], Any], repeats: int, min_loop_s: float = 0.05) -> float:
    """Best per-call time (s) over ``repeats`` loops, each lasting at least ``min_loop_s``."""
    timer = timeit.Timer(function)
    number = 1
    while timer.timeit(number) < min_loop_s:
        number *= 2
    return min(timer.repeat(repeat=repeats, number=number)) / number


def run(cases: list[Case], repeats: int, progress: Callable[[str], None] = print) -> list[Result]:
    results = []
    for index, case in enumerate(cases, start=1):
        if not case.agree(case.ours(), case.baseline()):
            raise AssertionError(f"{case.name}: our result disagrees with the baseline")
        ours = best_time(case.ours, repeats)
        baseline = best_time(case.baseline, repeats)
        results.append(Result(case.name, case.size, ours, baseline))
        progress(f"[{index}/{len(cases)}] {case.name} n={case.size}: ratio {ours / baseline:.2f}")
    return results


def _format_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def write_report(
    results: list[Result], title: str, baseline_name: str, output_dir: Path, stem: str,
    statistic: str = "per call, best of repeats",
) -> tuple[Path, Path]:
    """Write ``stem.json`` and ``stem.md`` into ``output_dir``; return both paths.
    ``statistic`` says what the times are, in the table's caption."""
    output_dir.mkdir(parents=True, exist_ok=True)
    machine = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
    }
    rows = [asdict(r) | {"ratio": r.ratio} for r in results]
    json_path = output_dir / f"{stem}.json"
    json_path.write_text(json.dumps({"title": title, "baseline": baseline_name,
                                     "machine": machine, "results": rows}, indent=2))
    lines = [
        f"# {title}",
        "",
        f"Ratio = ours / {baseline_name} ({statistic}; below 1 is faster).",
        "",
        f"| case | n | ours | {baseline_name} | ratio |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r.name} | {r.size} | {_format_time(r.ours_s)} | {_format_time(r.baseline_s)} "
            f"| {r.ratio:.2f} |"
            for r in results
        ),
        "",
        f"Python {machine['python']}, numpy {machine['numpy']}, {machine['machine']}.",
    ]
    markdown_path = output_dir / f"{stem}.md"
    markdown_path.write_text("\n".join(lines) + "\n")
    return json_path, markdown_path


def append_and_show(markdown: Path, lines: list[str]) -> None:
    """Append ``lines`` (a table of figures the bench adds) to its Markdown report and print
    the whole report."""
    with markdown.open("a") as file:
        file.write("\n".join(lines) + "\n")
    print(markdown.read_text())
