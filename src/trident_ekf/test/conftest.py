"""Shared fixtures of the trident_ekf tests: the real ArduCopter and PX4 flights as imported
bags, with the tuning each flight needs (``config/replay/``; data/README.md describes the
logs), and a private rclpy context for the real-DDS tests."""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rclpy.context import Context

from mav_ros_common.parameters import group
from mav_ros_common.testing import private_context
from trident_ekf.core import FilterConfig
from trident_ekf.core.initialization import Initializer
from trident_ekf.ros.parameters import estimator_settings
from trident_ekf.tools.flightlog import read_log, write_bag
from trident_ekf.tools.parameter_file import read_parameter_file
from trident_ekf.tools.replay import aiding_groups

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data"
LOG171 = DATA / "ardupilot" / "log171.bin"
REPLAY_CONFIG = ROOT / "config" / "replay"


class TunedLog:
    """An imported real log and its tuning, the parameter file ``config/replay/<name>.yaml``
    that users replay it with (``trident-replay --params-file``)."""

    tuning: ClassVar[str] = ""

    def __init__(self, bag: Path) -> None:
        self.bag = bag
        self.values = read_parameter_file(REPLAY_CONFIG / f"{self.tuning}.yaml")

    @property
    def config(self) -> FilterConfig:
        return estimator_settings(self.values).filter_config

    @property
    def settings(self) -> dict[str, dict[str, Any]]:
        """The GNSS, yaw-estimator and aiding-source settings (``Aiding.settings``)."""
        return {name: group(self.values, name) for name in aiding_groups()}

    def initializer(self) -> Initializer:
        """A fresh initializer with this log's priors (an initializer is used once)."""
        return estimator_settings(self.values).initializer


class Log171(TunedLog):
    """ArduCopter ``log171.bin``. The vehicle hits the ground at 226 s (35 rad/s, 108 m/s^2:
    the gyro saturates, and the autopilot's EKF1 is no reference from then on); until about
    70 s EKF1's yaw is magnetic heading (no declination)."""

    tuning = "log171"
    crash = 225.5  # s after the first IMU sample: the last flying moment
    magnetic_reference_until = 70.0  # s
    take_off = 72.0  # s


class Px4Real(TunedLog):
    """The PX4 flight of ``data/px4_real`` (no magnetometer, no reference)."""

    tuning = "px4_real"


@pytest.fixture(scope="session")
def log171(tmp_path_factory: pytest.TempPathFactory) -> Log171:
    path = tmp_path_factory.mktemp("log171") / "log171"
    write_bag(read_log(LOG171), path)
    return Log171(path)


@pytest.fixture(scope="session")
def px4_real(tmp_path_factory: pytest.TempPathFactory) -> Px4Real:
    path = tmp_path_factory.mktemp("px4_real") / "px4_real"
    write_bag(read_log(DATA / "px4_real"), path)
    return Px4Real(path)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    """A private rclpy context for the real-DDS tests of a module."""
    with private_context() as context:
        yield context


@pytest.fixture(scope="session")
def replay_pool() -> Iterator[ProcessPoolExecutor]:
    """Worker processes, one per core, for independent replays: a module submits its
    replays at once (``replay_pool.submit(replay, ...)``) so that they run side by side.

    Workers are spawned (never forked from a process with rclpy's threads) and, as pytest's
    ``filterwarnings`` does here, turn a RuntimeWarning into an error. At the end of the
    session replays that no test waited for (tests deselected) are cancelled."""
    pool = ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=warnings.simplefilter,
                               initargs=("error", RuntimeWarning))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
