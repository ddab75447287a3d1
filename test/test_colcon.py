"""The workspace as a ROS 2 user builds and tests it: `colcon build`, then `colcon test`.

One colcon build of the repository (default base path: the repository root, so that what
colcon crawls is checked too) into a temporary build, install and log space, then:

- exactly the product packages are found (not tools/tf2_msgs or tools/px4_msgs, not the
  venv's links): the ament_python packages and the interface package
  trident_ekf_interfaces (ament_cmake, rosidl);
- the bringup's launch, parameter, vehicle, robot and rviz files land in
  `share/mav_bringup/`, every node executable the launch files start is where launch_ros
  looks (`lib/<package>/<executable>`), and `ament_index_python` plus the suite's own lookup
  resolve them from the sourced install;
- `colcon test` finds, per package, exactly the tests `pytest` collects for it, and no
  package has zero tests. It runs the fast suites in full (mav_ros_common, and the
  interface package, whose suite, registered with ament_add_test, checks the generated
  types it installed and runs through ctest): none skipped, none failed. The other suites
  it collects from the install; they run once, in the same pytest session as this test.

The build runs as in the activated venv, with the venv as the ament and CMake underlay (the
PyPI wheels of ament_cmake, rosidl and the message packages), and passes the interface
package the cmake arguments that tools/bootstrap passes its own builds: the wheels need the
fix-up of tools/cmake/ros_wheels_fixup.cmake. On a ROS distro none of this is needed.
The colcon commands after the build run with the install sourced (`. install/setup.sh`),
without the venv on the ament path, as a user does after a build: nodes look their vehicle
files up in the installed mav_bringup.

Wall time: the build starts in the background as soon as the session has collected this
module (``start_early``, called by test/conftest.py), with pytest's collection of the source
tree beside it, and the two `colcon test` runs start in the background as soon as the build
succeeded: all of it overlaps the tests that run before this module, on the second core,
and the last test only reads what they found.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in (ROOT / "src").glob("*/package.xml"))
# Built with cmake (rosidl) rather than setup.py.
INTERFACE_PACKAGES = {p.parent.name for p in (ROOT / "src").glob("*/CMakeLists.txt")}
BRINGUP = "mav_bringup"
VENV_BIN = Path(sys.executable).parent
VENV = Path(sys.prefix)
# A colcon build with an interface package, then `colcon test`: minutes, not the default 300 s.
BUILD_TIMEOUT_S = 1200
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S)


def _clean_environment() -> dict[str, str]:
    """The caller's environment without any ROS overlay, with the venv's tools on PATH."""
    env = {key: value for key, value in os.environ.items() if key not in {
        "AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH", "CMAKE_PREFIX_PATH", "PYTHONPATH",
        "LD_LIBRARY_PATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE", "PYTEST_ADDOPTS",
        "PYTEST_CURRENT_TEST"}}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


class _Background:
    """`command` in bash from the repository root (after sourcing the install if asked),
    running while the caller does something else; its output goes to files, so that no
    full pipe stalls it."""

    def __init__(self, command: str, workspace: Path, name: str, sourced: bool = True,
                 extra_env: dict[str, str] | None = None) -> None:
        self.command = command
        prefix = f". {shlex.quote(str(workspace / 'install' / 'setup.sh'))} && " if sourced \
            else ""
        env = {**_clean_environment(), **(extra_env or {})}
        self._outputs = [(workspace / f"{name}.{stream}").open("w+")
                         for stream in ("stdout", "stderr")]
        self.proc = subprocess.Popen(["bash", "-c", prefix + command], cwd=ROOT, env=env,
                                     stdout=self._outputs[0], stderr=self._outputs[1],
                                     text=True)

    def finish(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Wait for the command; its exit code and output (AssertionError if it failed and
        ``check``)."""
        try:
            code = self.proc.wait(timeout=BUILD_TIMEOUT_S)
            for output in self._outputs:
                output.seek(0)
            stdout, stderr = (output.read() for output in self._outputs)
        finally:
            self.close()
        if check and code != 0:
            raise AssertionError(f"{self.command} failed ({code}):\n"
                                 f"{stdout[-4000:]}\n{stderr[-4000:]}")
        return subprocess.CompletedProcess(self.command, code, stdout, stderr)

    def close(self) -> None:
        """Stop the command if it still runs; always safe to call."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for output in self._outputs:
            output.close()


def _run(command: str, workspace: Path, sourced: bool = True, check: bool = True,
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`command` in bash from the repository root, after sourcing the install if asked."""
    prefix = f". {shlex.quote(str(workspace / 'install' / 'setup.sh'))} && " if sourced \
        else ""
    env = {**_clean_environment(), **(extra_env or {})}
    result = subprocess.run(["bash", "-c", prefix + command], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{command} failed ({result.returncode}):\n"
                             f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def _spaces(workspace: Path) -> str:
    """colcon's build and install space options for `workspace`."""
    return f"--build-base {workspace / 'build'} --install-base {workspace / 'install'}"


def _wheels_cmake_args() -> str:
    """colcon's --cmake-args for building against the PyPI ROS wheels (see tools/bootstrap)."""
    import numpy  # the venv's: the wheels' Python type support is built against it

    args = [f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_PROJECT_INCLUDE={ROOT / 'tools' / 'cmake' / 'ros_wheels_fixup.cmake'}",
            f"-DROS_WHEELS_PYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
            f"-DROS_WHEELS_NUMPY_INCLUDE_DIR={numpy.get_include()}"]
    return "--cmake-args " + " ".join(shlex.quote(arg) for arg in args)


class _Build:
    """A colcon build of the repository into a new temporary build/install/log space,
    running in the background, and the checks of the last test, in the background too:
    pytest's collection of the source tree (``collection``: it needs no build, so it runs
    beside it) and, once the build succeeded, the two `colcon test` runs
    (``colcon_tests()``)."""

    def __init__(self) -> None:
        self.space = Path(tempfile.mkdtemp(prefix="colcon-"))
        # --test-result-base at build time: ament_cmake packages write their test results
        # there (AMENT_TEST_RESULTS_DIR), next to the pytest results of `colcon test`.
        self.process = _Background(
            f"colcon --log-base {self.space / 'log'} build {_spaces(self.space)} "
            f"--test-result-base {self.space / 'results'} {_wheels_cmake_args()} "
            "--event-handlers console_direct-",
            self.space, "build", sourced=False,
            extra_env={"AMENT_PREFIX_PATH": str(VENV), "CMAKE_PREFIX_PATH": str(VENV)})
        self.collection = _start_collection(self.space)
        self._lock = threading.Lock()  # a close() never races the start of the test runs
        self._closed = False
        self._colcon_tests: list[_Background] = []
        self._starter = threading.Thread(target=self._test_once_built, daemon=True)
        self._starter.start()

    def _test_once_built(self) -> None:
        if self.process.proc.wait() != 0:
            return  # the workspace fixture reports the failed build
        with self._lock:
            if not self._closed:
                self._colcon_tests = _start_colcon_tests(self.space)

    def colcon_tests(self) -> list[_Background]:
        """The `colcon test` runs (``_start_colcon_tests``) once the build finished; empty
        if it failed."""
        self._starter.join()
        return self._colcon_tests

    def close(self) -> None:
        """Stop the build and the checks still running and remove the space; always safe
        to call."""
        with self._lock:
            self._closed = True
            started = [self.process, self.collection, *self._colcon_tests]
        for background in started:
            background.close()
        shutil.rmtree(self.space, ignore_errors=True)


_early_build: list[_Build] = []
"""The build started by ``start_early`` and not yet taken by ``build`` (at most one)."""


def start_early() -> _Build:
    """Start the build when the session has collected this module (test/conftest.py calls
    it): a minute or two of compiling, on the second core while the other tests run rather
    than on the critical path. The conftest closes it at the end of the session."""
    build = _Build()
    _early_build.append(build)
    return build


@pytest.fixture(scope="module")
def build() -> Iterator[_Build]:
    """The build once it finished (the build started early, or a new one), removed with
    its checks after the module."""
    build = _early_build.pop() if _early_build else _Build()
    try:
        build.process.finish()
        yield build
    finally:
        build.close()


@pytest.fixture(scope="module")
def workspace(build: _Build) -> Path:
    """The finished build's space (build, install, log and test results)."""
    return build.space


def test_colcon_finds_exactly_the_product_packages(workspace: Path) -> None:
    built = sorted(p.name for p in (workspace / "install").iterdir() if p.is_dir())
    assert built == PACKAGES
    assert set(PACKAGES) == {"mav_geometry", "mav_dynamics", "variational_sim", "trident_ekf",
                             "mav_ros_common", BRINGUP, "trident_ekf_interfaces"}
    assert sorted(INTERFACE_PACKAGES) == ["trident_ekf_interfaces"]


def test_bringup_files_are_installed_and_resolved_by_the_ament_index(workspace: Path) -> None:
    share = workspace / "install" / BRINGUP / "share" / BRINGUP
    for folder in ("launch", "config"):
        for source in (ROOT / folder).rglob("*"):
            if source.is_file() and "__pycache__" not in source.parts:
                installed = share / source.relative_to(ROOT)
                assert installed.is_file(), f"{source.relative_to(ROOT)} is not installed"
                assert installed.read_bytes() == source.read_bytes()
    probe = (
        "from ament_index_python.packages import get_package_share_directory as share\n"
        "from mav_ros_common.resources import config_file, find_named_file\n"
        f"for package in {PACKAGES!r}:\n"
        "    print(package, share(package))\n"
        "print('vehicle', find_named_file('quadrotor_x', 'vehicles'))\n"
        "print('robot', find_named_file('fly_hopper', 'robots'))\n"
        "print('graph', config_file('graph.yaml'))\n"
    )
    output = _run(f"python -c {shlex.quote(probe)}", workspace).stdout
    resolved = dict(line.split(" ", 1) for line in output.splitlines())
    for package in PACKAGES:
        assert Path(resolved[package]) == workspace / "install" / package / "share" / package
    assert Path(resolved["vehicle"]) == share / "config" / "vehicles" / "quadrotor_x.yaml"
    assert Path(resolved["robot"]) == share / "config" / "robots" / "fly_hopper.yaml"
    assert Path(resolved["graph"]) == share / "config" / "graph.yaml"


def test_every_launched_executable_is_where_launch_ros_looks(workspace: Path) -> None:
    started = set()
    for launch_file in (ROOT / "launch").glob("*.launch.py"):
        text = launch_file.read_text()
        started |= set(re.findall(r'package="(\w+)",\s*executable="([\w-]+)"', text))
    started = {(package, exe) for package, exe in started if package in PACKAGES}
    assert {package for package, _ in started} == {"variational_sim", "mav_dynamics",
                                                   "trident_ekf"}
    for package, executable in started:
        path = workspace / "install" / package / "lib" / package / executable
        assert path.is_file(), f"{package}/{executable}: no {path}"
        assert os.access(path, os.X_OK), f"{path} is not executable"
    mav_sim = workspace / "install" / BRINGUP / "lib" / BRINGUP / "mav-sim"
    assert _run(f"{mav_sim} --help", workspace).stdout.startswith("usage: mav-sim")


COLCON_RUNS = frozenset({"mav_ros_common", *INTERFACE_PACKAGES})
"""Packages whose suites `colcon test` runs in full here: seconds, and enough to prove that
colcon runs, counts and reports pytest and ctest suites from the install. The other suites
run in this pytest session itself (minutes: running them twice would double CI); colcon
collects them from the install, which imports every test module, conftest and fixture."""
_COLLECTED = re.compile(r"^(\d+) tests? collected(.*)$", re.MULTILINE)


def _collected_count(output: str, what: str) -> int:
    """The test count of a `pytest --collect-only -q` run; fails on collection errors or
    module-level skips (reported after the count)."""
    match = _COLLECTED.search(output)
    assert match, f"{what}: no collection summary in\n{output[-2000:]}"
    assert "error" not in match.group(2), match.group(0)
    assert "skipped" not in match.group(2), match.group(0)
    return int(match.group(1))


def _start_collection(workspace: Path) -> _Background:
    """pytest's collection of every package's test folder in the source tree: one
    interpreter start and one import of the stack, not one per package."""
    folders = [f"src/{package}/test" for package in PACKAGES]
    return _Background(shlex.join([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                   "-p", "no:cacheprovider", *folders]),
                       workspace, "pytest_collection", sourced=False)


def _collected(collection: _Background) -> dict[str, int]:
    """Number of tests pytest collects for each package's test folder (the test ids of the
    collection, split by the folder each starts with)."""
    result = collection.finish(check=False)
    total = _collected_count(result.stdout + result.stderr, "pytest --collect-only")
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    assert len(ids) == total, f"{len(ids)} test ids listed, {total} collected"
    return {package: sum(1 for test_id in ids if test_id.startswith(f"src/{package}/test/"))
            for package in PACKAGES}


def _start_colcon_tests(workspace: Path) -> list[_Background]:
    """Two independent `colcon test` runs at once: the suites of ``COLCON_RUNS`` in full,
    and colcon's collection of the others."""
    collected_only = [package for package in PACKAGES if package not in COLCON_RUNS]
    return [_start_colcon_test(workspace, sorted(COLCON_RUNS), "", "run"),
            _start_colcon_test(workspace, collected_only, " --collect-only -q", "collect")]


def _start_colcon_test(workspace: Path, packages: list[str], pytest_args: str,
                       name: str) -> _Background:
    """`colcon test` of `packages`, one after the other, with a log space of its own (so
    that two of them can run at once)."""
    return _Background(
        f"colcon --log-base {workspace / f'log_{name}'} test {_spaces(workspace)} "
        f"--test-result-base {workspace / 'results'} --executor sequential "
        # Selected by path: colcon-package-selection is not among the pinned tools.
        f"--paths {' '.join(str(ROOT / 'src' / package) for package in packages)} "
        f"--event-handlers console_direct+ console_start_end+ "
        # Reproducible property tests, as tools/test runs them in CI.
        f"--pytest-args ' --hypothesis-profile=ci'{pytest_args}", workspace, name)


def _colcon_test_output(colcon_test: _Background) -> dict[str, str]:
    """Each package's console output of a finished `colcon test`."""
    output = colcon_test.finish().stdout
    # Sequential: each package's output lies between its start and end lines.
    parts = re.split(r"^Starting >>> (\S+)$", output, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _junit_counts(workspace: Path, package: str) -> dict[str, int]:
    """Totals of the JUnit files `colcon test` wrote for a package: pytest.xml from colcon's
    pytest step (ament_python), one <test>.xunit.xml per ament_add_test (ament_cmake)."""
    name = "*.xunit.xml" if package in INTERFACE_PACKAGES else "pytest.xml"
    reports = sorted((workspace / "results" / package).glob(name))
    assert reports, f"colcon test wrote no result for {package}"
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for report in reports:
        root = ElementTree.parse(report).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        assert suite is not None
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    return counts


def test_colcon_test_runs_or_collects_every_package_suite(build: _Build,
                                                         workspace: Path) -> None:
    # Started in the background with the build (see _Build): here they are only awaited.
    full_run, collect_run = build.colcon_tests()
    _colcon_test_output(full_run)
    collection = _colcon_test_output(collect_run)
    collected = _collected(build.collection)
    print("\npackage                colcon test   pytest --collect-only")
    for package in PACKAGES:
        if package in COLCON_RUNS:
            counts = _junit_counts(workspace, package)
            count = counts["tests"]
            assert counts["failures"] == counts["errors"] == 0, f"{package}: {counts}"
            assert counts["skipped"] == 0, f"{package}: {counts['skipped']} skipped"
        else:
            assert package in collection, f"colcon test did not start {package}"
            count = _collected_count(collection[package], f"colcon test {package}")
        expected = collected[package]
        print(f"{package:<22} {count:>11}   {expected:>21}"
              f"{'' if package in COLCON_RUNS else '   (collected)'}")
        assert count > 0, f"colcon test found no test of {package}"
        assert count == expected, f"{package}: colcon {count}, pytest collects {expected}"
    result = _run(f"colcon test-result --test-result-base {workspace / 'results'}", workspace,
                  check=False)
    assert result.returncode == 0, result.stdout
