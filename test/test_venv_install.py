"""The development venv is an ament prefix, as launch_ros needs it.

`tools/bootstrap` installs the Python packages editable, which leaves out setup.py's data files,
and then registers them in the venv as a colcon install would be laid out; it builds the
interface packages with cmake into the venv, which registers them itself. launch_ros resolves a
`Node(package=..., executable=...)` as `<ament prefix of package>/lib/<package>/<executable>`
and `FindPackageShare` as `<prefix>/share/<package>`: both must work with the venv on
`AMENT_PREFIX_PATH` (which `source .venv/bin/activate` sets).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ament_index_python.packages import get_package_prefix, get_package_share_directory

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in (ROOT / "src").glob("*/package.xml"))
VENV = Path(sys.prefix)


@pytest.fixture
def venv_on_ament_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(VENV))
    return VENV


def launched_executables() -> set[tuple[str, str]]:
    """(package, executable) of every workspace node the launch files start."""
    pairs: set[tuple[str, str]] = set()
    for launch_file in (ROOT / "launch").glob("*.launch.py"):
        pairs |= set(re.findall(r'package="(\w+)",\s*executable="([\w-]+)"',
                                launch_file.read_text()))
    return {(package, executable) for package, executable in pairs if package in PACKAGES}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_in_the_venv_ament_index(venv_on_ament_path, package):
    assert Path(get_package_prefix(package)) == VENV
    share = Path(get_package_share_directory(package))
    source = ROOT / "src" / package / "package.xml"
    if (source.parent / "setup.py").is_file():
        # Editable: the registration links to the checkout.
        assert (share / "package.xml").resolve() == source
    else:
        # An interface package is built and installed by cmake (a copy), and rebuilt
        # by tools/bootstrap whenever its definition changes.
        assert (share / "package.xml").read_bytes() == source.read_bytes(), \
            f"the venv's {package} is stale: run tools/bootstrap"


def test_launch_ros_finds_every_launched_executable(venv_on_ament_path):
    pairs = launched_executables()
    assert {package for package, _ in pairs} == {"variational_sim", "mav_dynamics",
                                                 "trident_ekf"}
    for package, executable in pairs:
        path = Path(get_package_prefix(package)) / "lib" / package / executable
        assert path.is_file(), f"launch_ros would not find {package}/{executable} at {path}"
        assert os.access(path, os.X_OK)


def test_the_bringup_share_is_the_repository_launch_and_config(venv_on_ament_path):
    share = Path(get_package_share_directory("mav_bringup"))
    assert (share / "launch").resolve() == ROOT / "launch"
    assert (share / "config").resolve() == ROOT / "config"


def test_activating_the_venv_puts_it_on_the_ament_prefix_path():
    activate = VENV / "bin" / "activate"
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"AMENT_PREFIX_PATH", "VIRTUAL_ENV"}}
    result = subprocess.run(["bash", "-c", f". {activate} && echo $AMENT_PREFIX_PATH"],
                            env=environment, capture_output=True, text=True, check=True)
    assert result.stdout.strip().split(":")[0] == str(VENV)
