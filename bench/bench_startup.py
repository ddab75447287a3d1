"""Start-up time of the commands (issue 2): importing each one's module, and ``--help``.

Usage: python bench/bench_startup.py [--repeats K] [--commands NAME ...] [--output-dir DIR]

Every figure is the median over ``--repeats`` fresh interpreters, ours and the baseline
alternating (so a change of machine load hits both), after one untimed run of each that
fills the bytecode cache (``harness.installed_bytecode``: compiled modules kept as an
installed package keeps them; a source tree never byte-compiled, run with
``PYTHONDONTWRITEBYTECODE`` set, compiles every module of ours at every start: 0.2-0.3 s
more for a whole run):

- ``import``: the import of a command's entry module, timed inside the child around the
  import alone (interpreter start-up excluded) in CPU time of the importing thread (imports
  are CPU-bound; CPU time holds on a machine other work shares, wall time does not; the
  process's CPU time would also count the 0.1 s that OpenBLAS's worker threads spin on
  other cores while numpy loads, which delays nothing), against importing ``rclpy``, which
  every node and ``mav-sim`` needs anyway;
- ``--help``: wall time of the command with ``--help``, run as its console script runs it
  (``from module import main; sys.exit(main())``), against the wall time of
  ``python -c "import rclpy"``;
- ``mav-sim run``: the import of the runner and of the node modules of config/graph.yaml:
  what a ``mav-sim --no-record`` run imports before its first step (making the nodes loads
  nothing more: test/test_startup_imports.py), against ``rclpy``.

Commands come from the ``console_scripts`` of ``src/*/setup.py``, so the figures do not depend
on the venv's installed scripts being current. The nodes have no ``--help`` (ROS arguments
only): import figures alone. Target (issue 2): under 0.5 s of imports on a quiet machine.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml
from harness import Result, installed_bytecode, write_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
TOOLS = ["mav-sim", "mav-keystore", "mav-campaign", "trident-replay", "trident-import",
         "trident-bag-recover"]
"""Commands with ``--help``."""
NODES = ["estimator_node", "controller_node", "simulator_node"]
"""Node executables: ROS arguments only, no ``--help``."""
MAV_SIM_RUN = "mav-sim run"
RUNNER_MODULE = "mav_bringup.graph.runner"
BASELINE_MODULE = "rclpy"
CHILD_TIMEOUT_S = 120.0

# Child: import the modules named on its command line; print the CPU seconds that took in
# this thread (not the process: OpenBLAS starts spinning worker threads when numpy loads).
IMPORT_PROBE = """
import importlib, sys, time
start = time.thread_time()
for module in sys.argv[1:]:
    importlib.import_module(module)
print(time.thread_time() - start)
"""


def console_scripts() -> dict[str, str]:
    """Command -> ``module:function`` from the ``console_scripts`` of every src/*/setup.py."""
    scripts: dict[str, str] = {}
    for setup in sorted(ROOT.glob("src/*/setup.py")):
        call = next(node for node in ast.walk(ast.parse(setup.read_text()))
                    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup")
        for keyword in call.keywords:
            if keyword.arg == "entry_points":
                for line in ast.literal_eval(keyword.value).get("console_scripts", []):
                    name, _, target = line.partition("=")
                    scripts[name.strip()] = target.strip()
    return scripts


def graph_node_modules() -> list[str]:
    """The modules of the nodes of ``mav-sim``'s graph (config/graph.yaml)."""
    graph = yaml.safe_load((ROOT / "config" / "graph.yaml").read_text())
    return [str(node["plugin"]).partition(":")[0] for node in graph["nodes"]]


def _child(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run([sys.executable, *arguments], capture_output=True, text=True,
                               timeout=CHILD_TIMEOUT_S)
    if completed.returncode != 0:
        raise RuntimeError(f"{arguments[:3]} exited {completed.returncode}: "
                           f"{completed.stderr[-500:]}")
    return completed


def import_time(modules: list[str]) -> float:
    """CPU seconds a fresh interpreter's main thread takes to import ``modules`` (in
    order)."""
    return float(_child(["-c", IMPORT_PROBE, *modules]).stdout.split()[-1])


def help_wall_time(name: str, target: str) -> float:
    """Wall seconds of ``name --help`` run like its console script; checks it printed usage."""
    module, _, function = target.partition(":")
    code = f"import sys; from {module} import {function}; sys.argv[0] = {name!r}; " \
           f"sys.exit({function}())"
    start = time.perf_counter()
    completed = _child(["-c", code, "--help"])
    wall = time.perf_counter() - start
    if not completed.stdout.startswith("usage:"):
        raise RuntimeError(f"{name} --help printed no usage")
    return wall


def baseline_wall_time() -> float:
    """Wall seconds of ``python -c "import rclpy"``."""
    start = time.perf_counter()
    _child(["-c", f"import {BASELINE_MODULE}"])
    return time.perf_counter() - start


def median_pair(ours: Callable[[], float], baseline: Callable[[], float], repeats: int
                ) -> tuple[float, float]:
    """Medians of ``repeats`` alternating measurements of ours and the baseline, after one
    untimed run of each (it fills the bytecode cache, when there is one)."""
    ours(), baseline()
    samples = [(ours(), baseline()) for _ in range(repeats)]
    return (statistics.median(s[0] for s in samples),
            statistics.median(s[1] for s in samples))


def cases(commands: list[str]) -> list[tuple[str, Callable[[], float], Callable[[], float]]]:
    """(name, ours, baseline) for each command asked for."""
    scripts = console_scripts()
    result: list[tuple[str, Callable[[], float], Callable[[], float]]] = []

    def rclpy_import() -> float:
        return import_time([BASELINE_MODULE])

    for command in commands:
        if command == MAV_SIM_RUN:
            modules = [RUNNER_MODULE, *graph_node_modules()]
            result.append((f"{MAV_SIM_RUN}: import", partial(import_time, modules),
                           rclpy_import))
            continue
        target = scripts[command]
        module = target.partition(":")[0]
        result.append((f"{command}: import", partial(import_time, [module]), rclpy_import))
        if command in TOOLS:
            result.append((f"{command} --help", partial(help_wall_time, command, target),
                           baseline_wall_time))
    return result


def main(argv: list[str] | None = None) -> int:
    every = [*TOOLS, *NODES, MAV_SIM_RUN]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7,
                        help="fresh interpreters per figure, median taken (default 7)")
    parser.add_argument("--commands", nargs="+", choices=every, default=every,
                        help="commands to measure (default: all)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    load_before = os.getloadavg()[0]
    results = []
    todo = cases(args.commands)
    with installed_bytecode():
        for index, (name, ours, baseline) in enumerate(todo, start=1):
            ours_s, baseline_s = median_pair(ours, baseline, args.repeats)
            results.append(Result(name, args.repeats, ours_s, baseline_s))
            print(f"[{index}/{len(todo)}] {name}: {ours_s:.3f} s, "
                  f"ratio {ours_s / baseline_s:.2f}")
    _, markdown = write_report(
        results, "Command start-up (bytecode cached, as installed): import of the entry "
        "module and --help", "rclpy (import, or python -c 'import rclpy' for --help)",
        args.output_dir, "startup", statistic="median of n fresh interpreters")
    with markdown.open("a") as file:
        file.write(f"\nLoad average (1 min) {load_before:.2f} before, "
                   f"{os.getloadavg()[0]:.2f} after, on {os.cpu_count()} CPUs.\n")
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
