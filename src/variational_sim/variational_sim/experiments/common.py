"""Shared pieces of the experiment scripts: the robot, output folder, figure backend, pose hold."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib
import numpy as np

from mav_geometry.arrays import FloatArray
from mav_ros_common.resources import find_named_file
from variational_sim.multibody.hopper import load_hopper
from variational_sim.multibody.integrator import MultibodyState
from variational_sim.multibody.kinematics import joint_angle
from variational_sim.multibody.mechanism import Mechanism

matplotlib.use("Agg")  # scripts write files; no display needed

DEFAULT_OUTPUT = Path("/tmp/variational_sim_hopper")


def parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with ``--output-dir`` (PNG destination)."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"folder for the PNG plots (default {DEFAULT_OUTPUT})")
    return result


def fly_hopper() -> Mechanism:
    """The Fly-Hopper robot file installed with the bringup (``config/robots``)."""
    return load_hopper(find_named_file("fly_hopper", "robots"))


def output_dir(path: Path) -> Path:
    """Create the output folder and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path


class PoseHold:
    """Motor commands in [-1, 1] holding the actuated joints at ``targets_deg`` (deg).

    ``gain`` (N m/rad) sets the stall torque per unit angle error, saturating at full
    voltage; the damping comes from the motor's back-EMF line (and the drives' speed
    loop), solved implicitly by the integrator (``motor_commands``). The joints, targets
    and peak torques are looked up once: the experiments call it every step.
    """

    def __init__(self, mechanism: Mechanism, targets_deg: dict[str, float],
                 gain: float) -> None:
        self.mechanism = mechanism
        self.joints = tuple(actuator.joint for actuator in mechanism.actuators)
        """The actuated joints, in actuator order (the order of the commands)."""
        self._targets = np.array([math.radians(targets_deg[j]) for j in self.joints])
        self._gain = gain
        self._peak_torques = np.array([a.peak_torque for a in mechanism.actuators])

    def angles(self, state: MultibodyState) -> FloatArray:
        """The actuated joints' angles (rad), in actuator order."""
        return np.array([joint_angle(self.mechanism, j, state.quaternions)
                         for j in self.joints])

    def commands(self, angles: FloatArray) -> FloatArray:
        """The commands at the joint ``angles`` (rad, in the order ``angles`` returns)."""
        commands = self._gain * (self._targets - angles) / self._peak_torques
        bounded: FloatArray = np.minimum(np.maximum(commands, -1.0), 1.0)
        return bounded  # NaN stays NaN: the step rejects it
