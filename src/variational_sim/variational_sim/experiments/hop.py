"""Experiment (d): a vertical hop of the Fly-Hopper driven by its hip motors.

The base is kept upright on a vertical guide (free in z) and starts at rest with the
foot on the ground in the nominal pose. The hip motors follow their back-EMF line
(torque = peak (command - speed / no-load speed), saturated at the peak torque), solved
implicitly inside each step. Push: full command opening the leg (hip0 up, hip2 down)
until the hips are ``EXTENDED_DEG`` apart. Then a proportional command on the motor
voltage brings the hips to ``LANDING_DEG`` for the flight and the landing (a leg longer
than the nominal pose, for stroke to absorb the impact); the back-EMF line supplies the
damping, and the motors brake at their current limit on touch-down. Contact: the
interior point of ``multibody.contact``. Reports the apex height of the base and of the
centre of mass and the flight time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from mav_geometry.arrays import FloatArray
from variational_sim.experiments.common import PoseHold, fly_hopper, output_dir, parser
from variational_sim.multibody.contact import (
    DEFAULT_OPTIONS,
    ContactVariationalMultibody,
    InteriorPointOptions,
)
from variational_sim.multibody.hopper import (
    nominal_configuration,
    with_vertical_guide,
)
from variational_sim.multibody.integrator import MultibodyState

EXTENDED_DEG = 60.0
"""Hip separation hip2 - hip0 (deg) that ends the push (nominal 120, flat leg 0)."""
LANDING_DEG = {"hip0": 55.0, "hip2": 125.0}
"""Hip angles (deg) held from the end of the push through flight and landing."""
HOLD_GAIN = 200.0
"""Proportional gain of the pose hold (N m of stall torque per rad of hip error)."""
CONTACT_FORCE = 1e-6
"""Normal force (N) above which the foot counts as on the ground (the interior point
leaves impulses at its complementarity tolerance on a foot just above the ground)."""
PUSH_COMMAND = np.array([1.0, -1.0])
"""Motor commands of the push (hip0, hip2): both hips turn toward the leg's axis."""


@dataclass(frozen=True)
class HopResult:
    """Time series (s) of base height (m), centre-of-mass height (m), normal contact
    force (N, mean over each step) and motor torques (N m, actuator order), plus the
    hop figures: start base height, apex base height, apex centre-of-mass rise above
    lift-off and the ballistic prediction ``v_z^2 / (2 g)`` from the lift-off
    centre-of-mass speed (m), lift-off and touch-down times (s), and the solver's
    iterations per step (contact-free Newton or contact interior point)."""

    times: FloatArray
    base_height: FloatArray
    com_height: FloatArray
    normal_force: FloatArray
    torques: FloatArray
    start_height: float
    apex_height: float
    com_rise: float
    ballistic_rise: float
    liftoff: float
    touchdown: float
    iterations: FloatArray

    @property
    def flight_time(self) -> float:
        """Time between lift-off and touch-down (s)."""
        return self.touchdown - self.liftoff


def standing_state(integrator: ContactVariationalMultibody) -> MultibodyState:
    """Rest in the nominal pose with the foot sphere just touching the ground."""
    positions, quaternions = nominal_configuration(integrator.mechanism)
    state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
    lowered = positions - np.array([0.0, 0.0, float(integrator.gaps(state)[0])])
    return integrator.initial_state(lowered, quaternions, np.zeros((5, 6)))


def simulate(step: float = 0.001, duration: float = 1.0,
             options: InteriorPointOptions = DEFAULT_OPTIONS) -> HopResult:
    """Run the hop for ``duration`` seconds with steps of ``step`` seconds (``options``:
    the contact solver's switches)."""
    hopper = with_vertical_guide(fly_hopper())
    integrator = ContactVariationalMultibody(hopper, step, motor_commands=True,
                                             options=options)
    state = standing_state(integrator)
    start_height = float(state.positions[0, 2])
    hold = PoseHold(hopper, LANDING_DEG, HOLD_GAIN)
    hip0, hip2 = hold.joints.index("hip0"), hold.joints.index("hip2")
    pushing = True
    # The loop only steps and keeps what it needs; the figures come after, in numpy.
    times, heights, impulses, momenta, torques, iterations = [], [], [], [], [], []
    for _ in range(round(duration / step)):
        angles = hold.angles(state)
        pushing = pushing and bool(math.degrees(angles[hip2] - angles[hip0]) > EXTENDED_DEG)
        state = integrator.step(state, PUSH_COMMAND if pushing else hold.commands(angles))
        times.append(state.time)
        heights.append(state.positions[:, 2].copy())  # copies: the states can go
        impulses.append(state.contact_impulses[0, 2])
        momenta.append(state.momenta[:, 5].copy())
        torques.append(state.torques)
        iterations.append(integrator.statistics.last_iterations)
    masses = hopper.masses
    times_array, forces = np.array(times), np.array(impulses) / step
    body_heights = np.array(heights)  # (steps, bodies): every body's centre of mass
    coms = body_heights @ masses / masses.sum()
    lifted = np.flatnonzero(forces <= CONTACT_FORCE)
    liftoff = touchdown = float("nan")
    liftoff_com = liftoff_speed = 0.0
    if lifted.size:
        first = int(lifted[0])
        liftoff, liftoff_com = float(times_array[first]), float(coms[first])
        liftoff_speed = float(np.sum(momenta[first]) / masses.sum())
        landed = np.flatnonzero(forces[first + 1:] > CONTACT_FORCE)
        if landed.size:
            touchdown = float(times_array[first + 1 + int(landed[0])])
    flight = (times_array >= liftoff) & (times_array < touchdown)
    if not np.any(flight):
        weight = float(-masses.sum() * hopper.gravity[2])
        raise RuntimeError(f"no flight phase in {duration} s (normal force vs weight "
                           f"{forces.max():.1f} N / {weight:.1f} N)")
    return HopResult(
        times_array, body_heights[:, 0], coms, forces, np.array(torques),
        start_height=start_height,
        apex_height=float(body_heights[flight, 0].max()),
        com_rise=float(coms[flight].max() - liftoff_com),
        ballistic_rise=liftoff_speed**2 / (2.0 * float(-hopper.gravity[2])),
        liftoff=liftoff, touchdown=touchdown, iterations=np.array(iterations),
    )


def main(argv: list[str] | None = None) -> None:
    """Run the hop; print the figures and write the PNG."""
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--step", type=float, default=0.001, help="step size (s)")
    arguments.add_argument("--duration", type=float, default=1.0, help="simulated time (s)")
    args = arguments.parse_args(argv)
    folder = output_dir(args.output_dir)
    result = simulate(args.step, args.duration)
    print(f"base height: start {result.start_height:.4f} m, apex {result.apex_height:.4f} m "
          f"(+{result.apex_height - result.start_height:.4f} m)")
    print(f"centre-of-mass rise after lift-off: {result.com_rise:.4f} m "
          f"(ballistic v_z^2/2g {result.ballistic_rise:.4f} m)")
    print(f"flight time: {result.flight_time:.3f} s (lift-off {result.liftoff:.3f} s, "
          f"touch-down {result.touchdown:.3f} s)")
    print(f"peak |motor torque|: {np.abs(result.torques).max():.2f} N m")
    figure, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    axes[0].plot(result.times, result.base_height, label="base")
    axes[0].plot(result.times, result.com_height, label="centre of mass")
    axes[0].set(ylabel="height (m)", title=f"Vertical hop, h = {args.step * 1e3:g} ms")
    axes[0].legend()
    axes[1].plot(result.times, result.normal_force)
    axes[1].set(ylabel="normal force (N)")
    for i, name in enumerate(("hip0", "hip2")):
        axes[2].plot(result.times, result.torques[:, i], label=name)
    axes[2].set(xlabel="time (s)", ylabel="motor torque (N m)")
    axes[2].legend()
    for axis in axes:
        axis.axvspan(result.liftoff, result.touchdown, color="grey", alpha=0.15)
    figure.tight_layout()
    figure.savefig(folder / "hop.png", dpi=120)
    print(f"plot written to {folder}")


if __name__ == "__main__":
    main()
