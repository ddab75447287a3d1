"""The rviz2 check the launch files run before starting any node."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mav_bringup import launch_support


def context(**configurations: str) -> SimpleNamespace:
    """The part of a launch context the check reads."""
    return SimpleNamespace(launch_configurations=configurations)


def fake_distro(root: Path, with_rviz: bool) -> Path:
    """An ament prefix holding rviz2, or only some other package."""
    index = root / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / ("rviz2" if with_rviz else "rclpy")).write_text("")
    return root


@pytest.mark.parametrize("with_rviz", [True, False])
def test_rviz_defaults_to_whether_rviz2_is_installed(monkeypatch, tmp_path, with_rviz):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(fake_distro(tmp_path, with_rviz)))
    assert launch_support.rviz2_installed() is with_rviz
    assert launch_support.rviz_default() == ("true" if with_rviz else "false")


def test_no_ament_prefix_path_means_no_rviz2(monkeypatch):
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    assert launch_support.rviz_default() == "false"


def test_asking_for_rviz_without_rviz2_stops_before_any_node(monkeypatch, tmp_path):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(fake_distro(tmp_path, with_rviz=False)))
    with pytest.raises(RuntimeError, match=r"rviz2 is not installed.*nothing was started"):
        launch_support.require_rviz2(context(rviz="true"))
    assert launch_support.require_rviz2(context(rviz="false")) == []


def test_rviz_with_rviz2_installed_adds_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(fake_distro(tmp_path, with_rviz=True)))
    assert launch_support.require_rviz2(context(rviz="true")) == []
