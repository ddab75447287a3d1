"""Experiment (a): passive swing of the fixed-base leg, minimal vs maximal coordinates.

Gravity on, nominal pose at rest. Minimal: joint angles with the loop constraint, RK4
with Baumgarte stabilization (h = 1 ms, the paper's setting). Maximal: the variational
integrator (h = 10 ms by default). Both are unbraked: the maximal model's motors get no
command, so they apply no torque (a commanded zero torque would be clamped to the
torque-speed envelope and brake the hip beyond its 30 rad/s no-load speed, which the
swing reaches at about 0.81 s). Plots: energy against time for both, joint-angle
agreement with a DOP853 reference (rtol 1e-12) before the first flat (singular)
parallelogram configuration, and the maximal model's error against step size.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

from variational_sim.experiments.common import fly_hopper, output_dir, parser
from variational_sim.minimal.planar_loop import BaumgarteRK4, PlanarLoopModel, PlanarState
from variational_sim.multibody.hopper import (
    LEG_JOINTS,
    NOMINAL_ANGLES_DEG,
    nominal_configuration,
    with_welded_base,
)
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import joint_angle
from variational_sim.multibody.mechanism import Mechanism

AGREEMENT_HORIZON_S = 0.15
ENERGY_STEPS = (0.01, 0.005, 0.0025)


def run_maximal(hopper: Mechanism, step: float, duration: float,
                torques: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Times (s), joint angles (rad, LEG_JOINTS order) and energies (J) of the maximal model.

    ``torques``: ``None`` leaves the motors passive (zero torque); an array (N m,
    actuator order) is commanded every step and clamped to the torque-speed envelope
    (zeros reproduce the old, braked "passive" run).
    """
    integrator = VariationalMultibody(hopper, step)
    positions, quaternions = nominal_configuration(hopper)
    state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
    times, angles, energies = [0.0], [], [integrator.energy(state)]
    angles.append([joint_angle(hopper, n, state.quaternions) for n in LEG_JOINTS])
    for _ in range(round(duration / step)):
        state = integrator.step(state, torques)
        times.append(state.time)
        angles.append([joint_angle(hopper, n, state.quaternions) for n in LEG_JOINTS])
        energies.append(integrator.energy(state))
    return np.array(times), np.array(angles), np.array(energies)


def run_minimal(model: PlanarLoopModel, step: float, duration: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Times, angles, energies and loop-closure violation (m) of RK4 + Baumgarte."""
    integrator = BaumgarteRK4(model, step)
    q0 = np.radians([NOMINAL_ANGLES_DEG[n] for n in LEG_JOINTS])
    state = PlanarState(0.0, q0, np.zeros(4))
    times, angles, energies, loop = [0.0], [q0], [model.energy(q0, state.qdot)], [0.0]
    for _ in range(round(duration / step)):
        state = integrator.step(state)
        times.append(state.time)
        angles.append(state.q)
        energies.append(model.energy(state.q, state.qdot))
        loop.append(float(np.max(np.abs(model.constraint(state.q, state.qdot)[0]))))
    return np.array(times), np.array(angles), np.array(energies), np.array(loop)


def angle_difference(times: np.ndarray, angles: np.ndarray, reference_times: np.ndarray,
                     reference_angles: np.ndarray) -> np.ndarray:
    """Largest joint-angle difference (rad, wrapped to [0, pi]) at each of ``times`` that
    is also a sample of the reference (within 1 us); NaN where none is."""
    index = np.clip(np.searchsorted(reference_times, times), 1, len(reference_times) - 1)
    index -= ((times - reference_times[index - 1]) < (reference_times[index] - times)).astype(int)
    difference = np.abs(np.angle(np.exp(1j * (angles - reference_angles[index])))).max(axis=1)
    return np.where(np.abs(reference_times[index] - times) < 1e-6, difference, np.nan)


def energy_errors(hopper: Mechanism, duration: float, steps: tuple[float, ...] = ENERGY_STEPS,
                  torques: np.ndarray | None = None) -> dict[float, float]:
    """Largest |E - E_0| (J) of the maximal model over ``duration`` (s) at each step (s)."""
    return {step: float(np.max(np.abs(energies - energies[0])))
            for step in steps
            for _, _, energies in [run_maximal(hopper, step, duration, torques)]}


def first_singular_time(model: PlanarLoopModel, times: np.ndarray, angles: np.ndarray) -> float:
    """First time (s) at which the loop Jacobian's smaller singular value has a minimum
    below 1 % of its initial value (the flat parallelogram)."""
    values = np.array([np.linalg.svd(model.constraint(q, np.zeros(4))[1], compute_uv=False)[-1]
                       for q in angles])
    below = np.where(values < 0.01 * values[0])[0]
    return float(times[below[0]]) if len(below) else float("nan")


def main(argv: list[str] | None = None) -> None:
    """Run the experiment; print the figures and write the PNGs."""
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--duration", type=float, default=2.0, help="simulated time (s)")
    arguments.add_argument("--step", type=float, default=0.01, help="maximal step (s)")
    args = arguments.parse_args(argv)
    folder = output_dir(args.output_dir)
    hopper = with_welded_base(fly_hopper())
    model = PlanarLoopModel(hopper)

    t_min, a_min, e_min, loop = run_minimal(model, 0.001, args.duration)
    t_max, a_max, e_max = run_maximal(hopper, args.step, args.duration)
    singular = first_singular_time(model, t_min, a_min)
    regular = t_max < singular if np.isfinite(singular) else np.ones(len(t_max), dtype=bool)
    print(f"first flat parallelogram (minimal model): t = {singular:.3f} s")
    print(f"minimal RK4+Baumgarte h=1 ms: energy band {np.ptp(e_min):.3e} J over "
          f"{args.duration} s, max loop violation {loop.max():.2e} m")
    print(f"maximal variational h={args.step * 1e3:g} ms: energy band {np.ptp(e_max):.3e} J, "
          f"before the singularity {np.ptp(e_max[regular]):.3e} J")
    difference = angle_difference(t_max, a_max, t_min, a_min)
    print(f"minimal vs maximal (both passive): max joint-angle difference "
          f"{np.degrees(np.nanmax(difference)):.3e} deg over {args.duration} s")
    errors_by_step = energy_errors(hopper, args.duration)
    print("maximal max |E - E0| over the run: " + ", ".join(
        f"h={step * 1e3:g} ms {error:.3e} J" for step, error in errors_by_step.items()))

    figure, axis = plt.subplots(figsize=(8, 4))
    axis.plot(t_min, e_min - e_min[0], label="minimal, RK4 + Baumgarte, h = 1 ms")
    axis.plot(t_max, e_max - e_max[0], label=f"maximal, variational, h = {args.step * 1e3:g} ms")
    if np.isfinite(singular):
        axis.axvline(singular, color="grey", linestyle=":", label="first flat parallelogram")
    axis.set(xlabel="time (s)", ylabel="energy change (J)",
             title="Passive swing of the fixed-base Fly-Hopper leg")
    axis.legend()
    figure.tight_layout()
    figure.savefig(folder / "passive_swing_energy.png", dpi=120)

    q0 = np.concatenate([np.radians([NOMINAL_ANGLES_DEG[n] for n in LEG_JOINTS]), np.zeros(4)])
    reference = solve_ivp(
        lambda _, y: np.concatenate([y[4:], model.accelerations(y[:4], y[4:], np.zeros(4))]),
        (0.0, AGREEMENT_HORIZON_S), q0, method="DOP853", rtol=1e-12, atol=1e-12,
        dense_output=True)
    dense = reference.sol
    assert dense is not None  # set by dense_output=True
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    steps, errors = [0.01, 0.005, 0.0025, 0.00125], []
    for step in steps:
        times, angles, _ = run_maximal(hopper, step, AGREEMENT_HORIZON_S)
        error = np.abs(angles - dense(times)[:4].T).max(axis=1)
        errors.append(error.max())
        left.semilogy(times[1:], np.degrees(error[1:]), label=f"h = {step * 1e3:g} ms")
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    for step, error in zip(steps, errors, strict=True):
        print(f"maximal h={step * 1e3:g} ms: max joint-angle error over "
              f"{AGREEMENT_HORIZON_S} s = {np.degrees(error):.3e} deg")
    print("observed orders: " + ", ".join(f"{o:.2f}" for o in orders))
    left.set(xlabel="time (s)", ylabel="max joint-angle error (deg)",
             title="maximal vs DOP853 minimal reference")
    left.legend()
    right.loglog(steps, np.degrees(errors), "o-", label="maximal (variational)")
    right.loglog(steps, np.degrees(errors[0]) * (np.array(steps) / steps[0]) ** 2, "k--",
                 label="slope 2")
    right.set(xlabel="step (s)", ylabel="max error (deg)", title="convergence before 0.15 s")
    right.legend()
    figure.tight_layout()
    figure.savefig(folder / "passive_swing_agreement.png", dpi=120)
    print(f"plots written to {folder}")


if __name__ == "__main__":
    main()
