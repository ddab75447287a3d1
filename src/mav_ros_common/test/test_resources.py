"""Installed-file lookup: ament index, pip's record, the venv prefix; vehicle and robot names."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from mav_ros_common import resources
from mav_ros_common.resources import (
    ShareNotFoundError,
    config_file,
    find_named_file,
    package_share,
    share_file,
)

PACKAGE = "fake_bringup_for_tests"


def make_prefix(root: Path, package: str = PACKAGE, *, marker: bool = True) -> Path:
    """An install prefix as colcon (or tools/bootstrap) lays it out, with one vehicle file."""
    share = root / "share" / package
    (share / "config" / "vehicles").mkdir(parents=True)
    (share / "package.xml").write_text("<package/>")
    (share / "config" / "vehicles" / "quad.yaml").write_text("name: quad\n")
    (share / "config" / "graph.yaml").write_text("nodes: []\n")
    if marker:
        index = root / "share" / "ament_index" / "resource_index" / "packages"
        index.mkdir(parents=True)
        (index / package).write_text("")
    return share


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ament prefix path, an empty interpreter prefix: nothing is installed."""
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    empty = tmp_path / "empty_prefix"
    empty.mkdir()
    monkeypatch.setattr(sys, "prefix", str(empty))
    return empty


def test_the_ament_index_on_the_prefix_path_comes_first(monkeypatch, tmp_path, nowhere):
    colcon = make_prefix(tmp_path / "install" / PACKAGE)
    venv = make_prefix(tmp_path / "venv")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "install" / PACKAGE))
    assert package_share(PACKAGE) == colcon
    monkeypatch.delenv("AMENT_PREFIX_PATH")
    assert package_share(PACKAGE) == venv


def test_a_package_missing_from_the_ament_path_falls_back(monkeypatch, tmp_path, nowhere):
    other = tmp_path / "other"
    make_prefix(other, "some_other_package")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(other))
    venv = make_prefix(tmp_path / "venv")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert package_share(PACKAGE) == venv


def test_a_pip_install_is_found_through_its_record(monkeypatch, tmp_path, nowhere):
    site = tmp_path / "prefix" / "lib" / "site-packages"
    site.mkdir(parents=True)
    share = make_prefix(tmp_path / "prefix", marker=False)

    class Recorded:
        """One RECORD entry, relative to site-packages as pip writes data files."""

        def __init__(self, relative: str) -> None:
            self.relative = relative

        def as_posix(self) -> str:
            return self.relative

        def locate(self) -> Path:
            return site / self.relative

    class Distribution:
        def __init__(self) -> None:
            self.files = [Recorded(f"../../share/{PACKAGE}/package.xml"),
                          Recorded("fake_bringup_for_tests/__init__.py")]

    monkeypatch.setattr(metadata, "distribution",
                        lambda name: Distribution() if name == PACKAGE else None)
    assert package_share(PACKAGE) == share.resolve()


def test_a_missing_package_says_how_to_install_it(nowhere):
    with pytest.raises(ShareNotFoundError, match=r"install/setup\.bash.*tools/bootstrap"):
        package_share(PACKAGE)


def test_share_file_names_what_is_missing(monkeypatch, tmp_path, nowhere):
    make_prefix(tmp_path / "venv")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert share_file(PACKAGE, "config/graph.yaml").read_text() == "nodes: []\n"
    with pytest.raises(ShareNotFoundError, match=r"nope\.yaml is not installed"):
        share_file(PACKAGE, "config/nope.yaml")


@pytest.fixture
def bringup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, nowhere: Path) -> Path:
    """A fake installed mav_bringup with config/vehicles/quad.yaml."""
    share = make_prefix(tmp_path / "venv", resources.BRINGUP)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    return share


def test_vehicle_names_resolve_in_the_installed_bringup(bringup, monkeypatch, tmp_path):
    vehicles = bringup / "config" / "vehicles"
    assert find_named_file("quad", "vehicles") == vehicles / "quad.yaml"
    assert find_named_file("quad.yaml", "vehicles") == vehicles / "quad.yaml"
    assert config_file("graph.yaml") == bringup / "config" / "graph.yaml"
    with pytest.raises(ShareNotFoundError, match=r"no vehicle file 'hexa'.*\['quad'\]"):
        find_named_file("hexa", "vehicles")


def test_a_path_wins_over_an_installed_name(bringup, monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "quad.yaml").write_text("name: mine\n")
    monkeypatch.chdir(work)
    assert find_named_file("quad.yaml", "vehicles") == work / "quad.yaml"
    assert find_named_file(work / "quad.yaml", "vehicles") == work / "quad.yaml"
    with pytest.raises(ShareNotFoundError, match=r"vehicle file .*missing\.yaml does not exist"):
        find_named_file(work / "missing.yaml", "vehicles")
    with pytest.raises(ShareNotFoundError, match="does not exist"):
        find_named_file(work, "vehicles")  # a folder is not a vehicle file
