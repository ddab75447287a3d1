"""Experiment (b): the paper's zero-gravity PD manoeuvre of the floating Fly-Hopper (Fig. 7).

Base at (0, 0, 0.5) m, upright, at rest; nominal leg pose. The hip motors drive hip0
from 30 to 40 degrees and hip2 from 150 to 140 degrees with u = -kp (a - a*) - kd da/dt
(kp = 5 N m/rad, kd = 0.15 N m s/rad, the repo's gains), no input for the first two
steps, h = 10 ms, 1 s. The torques act as equal-and-opposite couples, so the base
counter-rotates and the total linear and angular momentum stay at zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from variational_sim.experiments.common import fly_hopper, output_dir, parser
from variational_sim.multibody.hopper import LEG_JOINTS, nominal_configuration
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import joint_angle

TARGETS_DEG = {"hip0": 40.0, "hip2": 140.0}
KP, KD = 5.0, 0.15


@dataclass(frozen=True)
class ManoeuvreResult:
    """Time series of the manoeuvre: times (s), hip angles (deg, actuator order), base
    pitch (deg), applied torques (N m) and the largest |total momentum| component
    (N s and N m s about the origin) at each step; final leg angles (deg)."""

    times: np.ndarray
    hip_angles: np.ndarray
    pitch: np.ndarray
    torques: np.ndarray
    momentum: np.ndarray
    final_angles: dict[str, float]


def simulate(step: float = 0.01, duration: float = 1.0) -> ManoeuvreResult:
    """Run the PD manoeuvre with the maximal-coordinate integrator."""
    hopper = fly_hopper().with_gravity(np.zeros(3))
    integrator = VariationalMultibody(hopper, step)
    positions, quaternions = nominal_configuration(hopper)
    state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
    names = [actuator.joint for actuator in hopper.actuators]
    targets = np.radians([TARGETS_DEG[name] for name in names])
    previous = np.array([joint_angle(hopper, n, state.quaternions) for n in names])
    times, angles, pitch, torques, momentum = [0.0], [np.degrees(previous)], [0.0], [], []
    for k in range(round(duration / step)):
        current = np.array([joint_angle(hopper, n, state.quaternions) for n in names])
        rate = (current - previous) / step  # backward difference, as the repo
        command = -KP * (current - targets) - KD * rate if k >= 2 else np.zeros(2)
        previous = current
        state = integrator.step(state, command)
        linear, angular = integrator.total_momentum(state)
        times.append(state.time)
        angles.append(np.degrees([joint_angle(hopper, n, state.quaternions) for n in names]))
        pitch.append(float(np.degrees(2.0 * np.arctan2(state.quaternions[0, 1],
                                                       state.quaternions[0, 3]))))
        torques.append(state.torques)
        momentum.append(max(np.max(np.abs(linear)), np.max(np.abs(angular))))
    final = {n: float(np.degrees(joint_angle(hopper, n, state.quaternions))) for n in LEG_JOINTS}
    return ManoeuvreResult(np.array(times), np.array(angles), np.array(pitch),
                           np.array(torques), np.array(momentum), final)


def main(argv: list[str] | None = None) -> None:
    """Run the manoeuvre; print the figures and write the PNG."""
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--step", type=float, default=0.01, help="step size (s)")
    arguments.add_argument("--duration", type=float, default=1.0, help="simulated time (s)")
    args = arguments.parse_args(argv)
    folder = output_dir(args.output_dir)
    result = simulate(args.step, args.duration)
    names = list(TARGETS_DEG)
    print("final joint angles (deg): "
          + ", ".join(f"{n} {v:.3f}" for n, v in result.final_angles.items()))
    print(f"base pitch at the end: {result.pitch[-1]:.3f} deg (counter-rotation)")
    print(f"peak torques: hip0 {np.abs(result.torques[:, 0]).max():.3f} N m, "
          f"hip2 {np.abs(result.torques[:, 1]).max():.3f} N m")
    print("max |total momentum| (linear N s, angular N m s about the origin): "
          f"{result.momentum.max():.2e}")
    figure, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for i, name in enumerate(names):
        axes[0].plot(result.times, result.hip_angles[:, i],
                     label=f"{name} (target {TARGETS_DEG[name]:g})")
    axes[0].set(ylabel="hip angle (deg)", title="Zero-gravity PD manoeuvre (maximal, h = "
                f"{args.step * 1e3:g} ms)")
    axes[0].legend()
    axes[1].plot(result.times, result.pitch)
    axes[1].set(ylabel="base pitch (deg)")
    for i, name in enumerate(names):
        axes[2].plot(result.times[1:], result.torques[:, i], label=name)
    axes[2].set(xlabel="time (s)", ylabel="motor torque (N m)")
    axes[2].legend()
    figure.tight_layout()
    figure.savefig(folder / "pd_manoeuvre.png", dpi=120)
    print(f"plot written to {folder}")


if __name__ == "__main__":
    main()
