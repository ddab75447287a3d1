"""Test bodies of the DQVI acceptance tests (``docs/theory/dqvi.md`` §4).

The paper itself has no experiments; these bodies and initial conditions are the
acceptance fixtures defined in that note.
"""

from __future__ import annotations

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.nilpotent import DUAL
from variational_sim.models.rigid_body import RigidBody, RigidBodyState

STANDARD_GRAVITY = (0.0, 0.0, -9.81)
"""World gravity in ENU (m/s^2)."""


def generic_body(gravity: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> RigidBody:
    """Body B1: m = 2 kg, I_C = diag(0.3, 0.5, 0.8) kg m^2, CoM at (0.2, -0.1, 0.3) m from O."""
    return RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]), (0.2, -0.1, 0.3), gravity)


def generic_initial_state(body: RigidBody) -> RigidBodyState:
    """B1 initial state: q0 = normalize(w=1, x=0.2, y=-0.3, z=0.1), t0 = (1, -2, 0.5) m,
    twist (0.5, -1, 2) rad/s, (0.3, 0.1, -0.2) m/s (body frame, velocity of O)."""
    q0 = Q.normalize([0.2, -0.3, 0.1, 1.0])
    return body.state(DUAL.pack(q0, [1.0, -2.0, 0.5]), [0.5, -1.0, 2.0, 0.3, 0.1, -0.2])


def symmetric_top() -> RigidBody:
    """Torque-free symmetric top at its CoM: m = 2 kg, I = diag(0.5, 0.5, 0.8) kg m^2."""
    return RigidBody.from_mass_properties(2.0, np.diag([0.5, 0.5, 0.8]))


def symmetric_top_rate(
    time: float | np.ndarray, omega0: tuple[float, float, float] = (1.0, 0.0, 3.0)
) -> np.ndarray:
    """Analytic body rate (rad/s) of ``symmetric_top`` from ``omega0 = (w_perp, 0, w3)``.

    Euler's equations give ``omega(t) = (w_perp cos(lambda t), -w_perp sin(lambda t), w3)``
    with ``lambda = (I1 - I3) w3 / I1`` (-1.8 rad/s for the default ``omega0``).
    """
    inertia_1, inertia_3 = 0.5, 0.8
    w_perp, _, w3 = omega0
    rate = (inertia_1 - inertia_3) * w3 / inertia_1
    time = np.asarray(time, dtype=float)
    return np.stack([w_perp * np.cos(rate * time), -w_perp * np.sin(rate * time),
                     np.full_like(time, w3)], axis=-1)
