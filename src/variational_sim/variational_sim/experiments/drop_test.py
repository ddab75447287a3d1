"""Experiment (c): drop test of the Fly-Hopper onto the ground, leg held by PD.

The base is kept upright on a vertical guide (free in z) and the robot is released at
rest in the nominal pose with the base CoM at 0.5 m (foot about 0.19 m above the
ground). The hip motors hold the nominal hip angles through the implicit motor model:
a proportional voltage command (``HOLD_GAIN``) with the back-EMF line and the drives'
speed loop (``SPEED_FEEDBACK``) as the derivative term. On impact the motors brake at
their current limit and the leg yields, then the hold lifts the robot back to its PD
standing height without the foot leaving the ground. Contact: the primal-dual interior
point of ``multibody.contact`` (inelastic, friction 0.5). Reports the gap, the
complementarity residual and the normal force, which settles at the total weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from variational_sim.experiments.common import PoseHold, fly_hopper, output_dir, parser
from variational_sim.multibody.contact import (
    DEFAULT_OPTIONS,
    ContactVariationalMultibody,
    InteriorPointOptions,
)
from variational_sim.multibody.hopper import (
    NOMINAL_ANGLES_DEG,
    nominal_configuration,
    with_vertical_guide,
)

HOLD_GAIN = 800.0
"""Stall torque per rad of hip error (N m/rad) of the hold."""
SPEED_FEEDBACK = 40.0
"""Damping of the drives' speed loop (N m s/rad): enough that the foot never leaves
the ground after the impact, low enough for the saturated motors to lift the robot."""


@dataclass(frozen=True)
class DropResult:
    """Times (s), base height (m), foot gap (m), normal force (N, mean over each step),
    complementarity ``normal impulse * gap`` (N s m), total weight (N) and the solver's
    iterations per step (contact-free Newton or contact interior point)."""

    times: np.ndarray
    base_height: np.ndarray
    gap: np.ndarray
    normal_force: np.ndarray
    complementarity: np.ndarray
    weight: float
    iterations: np.ndarray


def simulate(step: float = 0.002, duration: float = 1.5,
             options: InteriorPointOptions = DEFAULT_OPTIONS) -> DropResult:
    """Run the drop test (``options``: the contact solver's switches)."""
    hopper = with_vertical_guide(fly_hopper())
    integrator = ContactVariationalMultibody(hopper, step, motor_commands=True,
                                             speed_feedback=SPEED_FEEDBACK, options=options)
    positions, quaternions = nominal_configuration(hopper)
    state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
    hold = PoseHold(hopper, NOMINAL_ANGLES_DEG, HOLD_GAIN)
    # The loop only steps and keeps what it needs; the figures come after, in numpy.
    times, heights, gaps, impulses, iterations = [], [], [], [], []
    for _ in range(round(duration / step)):
        state = integrator.step(state, hold.commands(hold.angles(state)))
        times.append(state.time)
        heights.append(state.positions[0, 2])
        gaps.append(integrator.gaps(state)[0])
        impulses.append(state.contact_impulses[0, 2])
        iterations.append(integrator.statistics.last_iterations)
    weight = float(-hopper.masses.sum() * hopper.gravity[2])
    gap, normal = np.array(gaps), np.array(impulses)
    return DropResult(np.array(times), np.array(heights), gap, normal / step, normal * gap,
                      weight, np.array(iterations))


def main(argv: list[str] | None = None) -> None:
    """Run the drop test; print the figures and write the PNG."""
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--step", type=float, default=0.001, help="step size (s)")
    arguments.add_argument("--duration", type=float, default=1.5, help="simulated time (s)")
    args = arguments.parse_args(argv)
    folder = output_dir(args.output_dir)
    result = simulate(args.step, args.duration)
    settled = result.times > result.times[-1] - 0.1
    print(f"minimum gap: {result.gap.min():.3e} m; max |normal impulse * gap|: "
          f"{np.abs(result.complementarity).max():.2e} N s m")
    print(f"normal force over the last 0.1 s: {result.normal_force[settled].mean():.3f} N "
          f"(total weight {result.weight:.3f} N)")
    figure, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    axes[0].plot(result.times, result.base_height)
    axes[0].set(ylabel="base height (m)", title=f"Drop test, h = {args.step * 1e3:g} ms")
    axes[1].plot(result.times, result.gap)
    axes[1].set(ylabel="foot gap (m)")
    axes[2].plot(result.times, result.normal_force, label="normal force")
    axes[2].axhline(result.weight, color="grey", linestyle=":", label="total weight")
    axes[2].set(xlabel="time (s)", ylabel="force (N)")
    axes[2].legend()
    figure.tight_layout()
    figure.savefig(folder / "drop_test.png", dpi=120)
    print(f"plot written to {folder}")


if __name__ == "__main__":
    main()
