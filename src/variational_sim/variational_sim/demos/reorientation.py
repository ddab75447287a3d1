"""Zero-gravity inertial reorientation of the morphing UAV by wing motion alone (cat-style).

The body starts with zero total momentum; the wings sweep and flap in a closed loop of
shape space and return to their start each cycle. Momentum stays zero (the midpoint
QVI conserves it to round-off), yet the attitude changes by a fixed pitch angle per
cycle: a geometric phase. Usage::

    python -m variational_sim.demos.reorientation --cycles 4 --output reorientation.png
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.integrators.qvi_midpoint import MidpointQVI
from variational_sim.models.coupled_body import zero_momentum_state
from variational_sim.models.morphing_uav import reorientation_schedule, small_morphing_uav


@dataclass(frozen=True)
class Manoeuvre:
    """Sampled manoeuvre: times (s), wing angles (rad), attitude rotation vectors (rad),
    reference-point positions (m, world) and canonical momenta (N m s, N s, world)."""

    times: FloatArray
    wing_angles: FloatArray
    rotation_vectors: FloatArray
    positions: FloatArray
    momenta: FloatArray


def simulate(cycles: int = 4, period: float = 2.0, step_size: float = 0.01,
             reverse: bool = False,
             progress: Callable[[str], object] | None = None) -> Manoeuvre:
    """Run ``cycles`` shape cycles of ``period`` seconds with the midpoint QVI.

    ``reverse`` runs the loop the other way round (sweep and dihedral amplitudes swap sign).
    """
    if cycles < 1:
        raise ValueError(f"cycles must be >= 1, got {cycles!r}")
    if not 0.0 < step_size <= period / 10:
        raise ValueError(f"step_size must be in (0, period/10] s, got {step_size!r}")
    dihedral = -0.6 if reverse else 0.6
    uav = small_morphing_uav(reorientation_schedule(period, dihedral=dihedral))
    integrator = MidpointQVI(uav, step_size)
    state = zero_momentum_state(uav, Q.identity(), np.zeros(3))
    steps_per_cycle = round(period / step_size)
    samples = [state]
    for cycle in range(cycles):
        for _ in range(steps_per_cycle):
            state = integrator.step(state)
            samples.append(state)
        if progress is not None:
            progress(f"cycle {cycle + 1}/{cycles}: pitch "
                     f"{np.degrees(Q.to_rotation_vector(state.attitude)[1]):.2f} deg")
    times = np.array([s.time for s in samples])
    return Manoeuvre(
        times=times,
        wing_angles=np.array([uav.schedule(t)[0] for t in times]),
        rotation_vectors=np.unwrap(
            np.array([Q.to_rotation_vector(s.attitude) for s in samples]), axis=0),
        positions=np.array([s.position for s in samples]),
        momenta=np.array([s.momentum for s in samples]),
    )


def plot(manoeuvre: Manoeuvre, output: Path) -> None:
    """Three panels: wing angles, attitude, momentum (PNG at ``output``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    t = manoeuvre.times
    for index, label in ((0, "dihedral"), (2, "sweep")):
        axes[0].plot(t, np.degrees(manoeuvre.wing_angles[:, index]), label=label)
    axes[0].set_ylabel("wing angle (deg)")
    axes[0].legend()
    axes[0].set_title("Zero-gravity reorientation by wing motion alone (midpoint QVI)")
    for index, label in enumerate(("roll", "pitch", "yaw")):
        axes[1].plot(t, np.degrees(manoeuvre.rotation_vectors[:, index]), label=label)
    axes[1].set_ylabel("attitude, rotation vector (deg)")
    axes[1].legend()
    floor = 1e-20  # exact zeros at the start would leave the log axis
    axes[2].semilogy(t, np.maximum(np.abs(manoeuvre.momenta[:, :3]).max(axis=1), floor),
                     label="|angular momentum| (N m s)")
    axes[2].semilogy(t, np.maximum(np.abs(manoeuvre.momenta[:, 3:]).max(axis=1), floor),
                     label="|linear momentum| (N s)")
    axes[2].set_ylim(floor, 1.0)
    axes[2].set_ylabel("momentum (max abs, world)")
    axes[2].set_xlabel("time (s)")
    axes[2].legend()
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Command line: simulate, print the pitch change per cycle, write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=4, help="shape cycles (count)")
    parser.add_argument("--period", type=float, default=2.0, help="cycle period (s)")
    parser.add_argument("--step-size", type=float, default=0.01, help="integrator step (s)")
    parser.add_argument("--output", type=Path, default=Path("reorientation.png"),
                        help="PNG plot path")
    args = parser.parse_args(argv)
    try:
        manoeuvre = simulate(args.cycles, args.period, args.step_size,
                             progress=lambda line: print(line, flush=True))
    except ValueError as error:
        parser.error(str(error))
    per_cycle = manoeuvre.rotation_vectors[-1, 1] / args.cycles
    print(f"net pitch change {np.degrees(per_cycle):.3f} deg per cycle; "
          f"max |momentum| {np.abs(manoeuvre.momenta).max():.2e} (N m s, N s)")
    plot(manoeuvre, args.output)
    print(f"plot written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
