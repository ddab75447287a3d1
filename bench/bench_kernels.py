"""What the compiled kernels cost before the first step: build time and import time.

Usage: python bench/bench_kernels.py [--repeats K] [--output-dir DIR]

The C kernels (mav_geometry.kernels) are built once by ``tools/bootstrap`` or ``colcon
build``; nothing is compiled when a process starts. For each package with kernels this
bench builds them from scratch into a temporary folder (what a fresh set-up pays, once),
and loads the built modules in a fresh interpreter (what every process pays: the self time
of ``-X importtime``, parents excluded). Baselines in the same run: building is set against
byte-compiling the package's Python sources, and loading against numpy's top module.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Result, append_and_show, write_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"


def kernel_modules() -> dict[str, list[str]]:
    """Package name -> its compiled kernel modules, from the sources in the tree."""
    modules: dict[str, list[str]] = {}
    for source in sorted((ROOT / "src").glob("*/*/**/_kernels.c")):
        package_dir = ROOT / "src" / source.relative_to(ROOT / "src").parts[0]
        name = ".".join(source.relative_to(package_dir).with_suffix("").parts)
        modules.setdefault(package_dir.name, []).append(name)
    return modules


def wall(command: list[str], cwd: Path) -> float:
    """Wall time of one run of ``command`` (s); a failure stops the bench."""
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def build_time(package: str, repeats: int) -> tuple[float, float]:
    """(best build of the package's kernels from scratch, best byte-compile of its sources)."""
    package_dir = ROOT / "src" / package
    builds, compiles = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as scratch:
            builds.append(wall([sys.executable, "setup.py", "-q", "build_ext", "--force",
                                "--build-temp", f"{scratch}/temp", "--build-lib",
                                f"{scratch}/lib"], package_dir))
            compiles.append(wall([sys.executable, "-c", "import compileall, sys; "
                                  "compileall.compile_dir(sys.argv[1], quiet=2, force=True, "
                                  "legacy=False, ddir=None, workers=1)", package],
                                 package_dir))
    return min(builds), min(compiles)


def import_self_time(module: str, repeats: int) -> float:
    """Best time (s) Python spends loading ``module`` itself in a fresh interpreter, its
    parent packages excluded (``-X importtime``'s self time)."""
    times = []
    for _ in range(repeats):
        report = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                                cwd=ROOT, check=True, capture_output=True, text=True).stderr
        rows = [line.split("|") for line in report.splitlines() if line.startswith("import time:")]
        times.append(next(int(row[0].split(":")[1]) for row in rows
                          if row[2].strip() == module) * 1e-6)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (default 3)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    modules = kernel_modules()
    numpy_import = import_self_time("numpy", args.repeats)
    results = []
    lines = ["", "| package | build from scratch | byte-compile | loading the kernels (fresh "
             "process) | numpy's own module |", "|---|---:|---:|---:|---:|"]
    for index, (package, names) in enumerate(modules.items(), start=1):
        print(f"[{index}/{len(modules)}] {package}: building {', '.join(names)}", flush=True)
        build, compile_ = build_time(package, args.repeats)
        imported = sum(import_self_time(name, args.repeats) for name in names)
        results.append(Result(f"{package}: build of {len(names)} kernel module(s)", len(names),
                              build, compile_))
        lines.append(f"| {package} | {build:.2f} s | {compile_:.2f} s | "
                     f"{imported * 1e3:.2f} ms | {numpy_import * 1e3:.1f} ms |")
    _, markdown = write_report(results, "Compiled kernels: build once, import for free",
                               "byte-compiling the package", args.output_dir, "kernels",
                               statistic="wall time of one build, best of repeats")
    lines += ["", "The build is paid once per set-up (tools/bootstrap, colcon build); the "
              "loading is what each process pays."]
    append_and_show(markdown, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
