"""Instructions executed by the hot loops (valgrind's callgrind): a measure the machine's load
cannot move, for changes too small to time on a shared machine.

Usage: python bench/bench_instructions.py [--before-tree DIR] [--workloads NAME ...]
                                          [--output-dir DIR]

Each workload runs in a fresh interpreter under ``valgrind --tool=callgrind``. Its set-up
runs uninstrumented (several times faster) until the child asks for instrumentation
(``callgrind_control --instr=on``); then only what runs inside ``itertools.starmap``
(``--toggle-collect=starmap_next``), which calls the workload, is counted. The figure is
instructions per unit (IMU sample, update, step, run), for this tree and for a baseline in
the same run:

- without ``--before-tree``: this tree with ``MAV_KERNELS=reference`` (the numpy code the
  compiled kernels replace);
- with ``--before-tree DIR``: the packages of another source tree (``DIR/src/*``, e.g. from
  ``git worktree add DIR REV``), compiled kernels on; a package of DIR whose kernels are not
  built is built in place first (``setup.py build_ext --inplace``).

Both runs must end with the same result (each workload's check value, to its tolerance), so
a change that alters the answer cannot pass as a saving. An instruction count is not a
time: cache misses, branch mispredictions and vector width are not in it. But it ranks
changes of the same code where timings cannot: two runs of one command differ by 20-40 %
on the loaded 2-core CI machine. A workload takes 0.5-3 min. Without valgrind the bench
says so and counts nothing.

Writes ``instructions.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness import installed_bytecode

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
DEFAULT_OUTPUT = BENCH / "results"
COUNTED_FUNCTION = "starmap_next"
"""The C function inside which callgrind counts: the workload is called from
``itertools.starmap``, which nothing else in these loops uses."""
CHILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Workload:
    """A child program: ``setup`` (not counted), the body of ``work()`` (counted), and
    ``check``, an expression whose float value both runs must agree on (``tolerance``,
    relative); ``units`` units of ``unit`` run inside ``work()``."""

    title: str
    unit: str
    units: int
    setup: str
    work: str
    check: str
    tolerance: float = 1e-9


_EKF_SETUP = """
import numpy as np
from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate
data = simulate(Trajectory(), SensorModel(), 12.0, imu_rate=200.0, gnss_rate=5.0,
                rng=np.random.default_rng(0))
filter_ = TridentEKF(FilterConfig(covariance_decimation={decimation}))
truth = data.truth
filter_.initialize(0.0, truth["q"][0], truth["v"][0], truth["p"][0],
                   np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3))
samples = [(t, tuple(g), tuple(a))
           for t, g, a in zip(data.imu_time[1:], data.gyro[1:], data.accel[1:])]
for t, g, a in samples[:200]:
    filter_.process_imu(t, g, a)
"""
_EKF_WORK = """
    for t, g, a in samples[200:2200]:
        filter_.process_imu(t, g, a)
"""
_EKF_CHECK = "np.linalg.norm(filter_.nominal()[2]) + np.trace(filter_.covariance)"

WORKLOADS = {
    "ekf-imu": Workload(
        "TridentEKF, IMU alone, covariance every sample", "IMU sample", 2000,
        _EKF_SETUP.format(decimation=1), _EKF_WORK, _EKF_CHECK),
    "ekf-imu-default": Workload(
        "TridentEKF, IMU alone, covariance every 4th sample (the default)", "IMU sample",
        2000, _EKF_SETUP.format(decimation=4), _EKF_WORK, _EKF_CHECK),
    "ekf-barometer": Workload(
        "TridentEKF, a barometer reading and the IMU sample that applies it", "update", 1000,
        """
import math
import numpy as np
from trident_ekf.core import FilterConfig, TridentEKF
from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.measurements.barometer import Barometer
barometer = Barometer()
filter_ = TridentEKF(FilterConfig(), sources=[barometer])
filter_.initialize(0.0, (0.1, 0.2, 0.3, 0.9), (0.0, 0.0, 0.0),
                   geodetic_to_ecef(47.4, 8.5, 500.0),
                   np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3 + [0.01] * 3 + [0.1] * 3))
for k in range(1, 201):
    filter_.process_imu(0.004 * k, (0.001, -0.002, 0.003), (0.1, 0.2, 9.8))
height = 500.0 + 0.3
readings = [barometer.measurement(0.8 + 0.004 * k - 0.001, height_m=height + 0.1 * math.sin(k))
            for k in range(1, 1001)]
""",
        """
    for k, reading in enumerate(readings, start=1):
        filter_.process(reading)
        filter_.process_imu(0.8 + 0.004 * k, (0.001, -0.002, 0.003), (0.1, 0.2, 9.8))
""",
        "np.linalg.norm(filter_.nominal()[2]) + np.trace(filter_.covariance)"),
    "hopper-step": Workload(
        "Fly-Hopper with contact, h = 1 ms: the integrator step on the hop's 1000 states",
        "step", 1000,
        """
from bench_hopper import recorded_hop
from variational_sim.multibody.contact import ContactVariationalMultibody
mechanism, states, commands = recorded_hop()
integrator = ContactVariationalMultibody(mechanism, 0.001, motor_commands=True)
pairs = list(zip(states, commands))
""",
        """
    global last
    for state, command in pairs:
        last = integrator.step(state, command)
""",
        "last.positions[0, 2]", 1e-8),
    "pipeline": Workload(
        "closed-loop pipeline (what mav-campaign runs), 4 s of the default demo, set-up "
        "included", "run", 1,
        """
from mav_bringup.pipeline import LoopOptions, run_closed_loop
""",
        """
    global result
    result = run_closed_loop(LoopOptions(duration_s=4.0))
""",
        "result.metrics['position_rms_m']", 1e-6),
}

INSTRUMENT = """
# Instrument from here on (set-up ran uninstrumented, several times faster); the call
# returns once valgrind has taken the command.
subprocess.run(["callgrind_control", "--instr=on", str(os.getpid())], check=True,
               capture_output=True)
"""


def child_code(workload: Workload, instrumented: bool = True) -> str:
    """The child program of ``workload``; ``instrumented=False`` for a plain interpreter."""
    return "\n".join([
        "import itertools, os, subprocess, sys",
        f"sys.path.insert(0, {str(BENCH)!r})",
        workload.setup,
        "def work():",
        workload.work,
        INSTRUMENT if instrumented else "",
        "list(itertools.starmap(work, [()]))",
        f"print('check', repr(float({workload.check})))",
    ])


def tree_packages(tree: Path) -> list[Path]:
    """The package folders of a source tree (``tree/src/*`` with a setup.py)."""
    packages = sorted(p for p in (tree / "src").glob("*") if (p / "setup.py").is_file())
    if not packages:
        raise ValueError(f"{tree} has no src/<package>/setup.py")
    return packages


def build_kernels(tree: Path) -> None:
    """Build in place the C kernels of the packages of ``tree`` that lack them."""
    for package in tree_packages(tree):
        sources = list(package.rglob("_kernels.c"))
        if all(list(source.parent.glob("_kernels.*.so")) for source in sources):
            continue
        print(f"building the kernels of {package} ...", flush=True)
        with tempfile.TemporaryDirectory() as build:
            subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace",
                            "--build-temp", build], cwd=package, check=True,
                           stdout=subprocess.DEVNULL)


def count(workload: Workload, environment: dict[str, str]) -> tuple[int, float]:
    """(instructions counted, check value) of one run of ``workload``."""
    code = child_code(workload)
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", "--trace-children=yes",
             "--trace-children-skip=*callgrind_control*,*perl*", "--instr-atstart=no",
             f"--toggle-collect={COUNTED_FUNCTION}",
             f"--callgrind-out-file={out}/callgrind.%p", sys.executable, "-c", code],
            env=environment, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"workload failed under valgrind:\n{result.stderr[-3000:]}")
        total = 0
        for file in out.glob("callgrind.*"):
            for line in file.read_text().splitlines():
                if line.startswith("totals:"):
                    total += int(line.split()[1])
    checks = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("check")]
    if total == 0 or not checks:
        raise RuntimeError(f"nothing counted (is {COUNTED_FUNCTION} in the interpreter's "
                           f"symbols?):\n{result.stdout[-2000:]}")
    return total, float(checks[-1])


def agree(ours: float, baseline: float, tolerance: float) -> bool:
    return abs(ours - baseline) <= tolerance * max(1.0, abs(baseline))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-tree", type=Path,
                        help="source tree to compare with (its src/*; kernels built in place "
                             "when missing); default: this tree with MAV_KERNELS=reference")
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS),
                        default=list(WORKLOADS), help="what to count (default: all)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind not installed: nothing counted (apt install valgrind)")
        return 0
    if args.before_tree is not None:
        build_kernels(args.before_tree)
        baseline_name = f"before tree {args.before_tree}"
    else:
        baseline_name = "MAV_KERNELS=reference"
    rows = []
    with installed_bytecode():  # the children's modules compiled once, as installed
        environment = os.environ | {"OPENBLAS_NUM_THREADS": "1"}
        if args.before_tree is not None:
            baseline_environment = environment | {"PYTHONPATH": os.pathsep.join(
                str(p) for p in tree_packages(args.before_tree))}
        else:
            baseline_environment = environment | {"MAV_KERNELS": "reference"}
        for index, name in enumerate(args.workloads, start=1):
            workload = WORKLOADS[name]
            print(f"[{index}/{len(args.workloads)}] {name}: {workload.title} ...", flush=True)
            ours, ours_check = count(workload, environment)
            baseline, baseline_check = count(workload, baseline_environment)
            if not agree(ours_check, baseline_check, workload.tolerance):
                raise AssertionError(f"{name}: results differ ({ours_check!r} against "
                                     f"{baseline_check!r})")
            rows.append({"workload": name, "title": workload.title, "unit": workload.unit,
                         "ours_per_unit": ours / workload.units,
                         "baseline_per_unit": baseline / workload.units,
                         "ratio": ours / baseline})
    lines = [f"# Instructions per unit (callgrind): this tree against {baseline_name}", "",
             "| workload | unit | this tree | baseline | ratio |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['title']} | {r['unit']} | {r['ours_per_unit']:,.0f} "
              f"| {r['baseline_per_unit']:,.0f} | {r['ratio']:.3f} |" for r in rows]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "instructions.json").write_text(
        json.dumps({"baseline": baseline_name, "workloads": rows}, indent=2))
    (args.output_dir / "instructions.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
