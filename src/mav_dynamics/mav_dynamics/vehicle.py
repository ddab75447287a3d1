"""Vehicle description: a main body, articulated links (wings, tilt mechanisms) and rotors.

Frames follow REP-103 (body FLU, world ENU, z up). Every pose is given in the
frame of the parent (``"body"`` or a link name); the body frame itself may sit
anywhere on the main body (it need not be at the centre of mass). Twists and
wrenches are ``(angular, linear)``. Construct vehicles with
``mav_dynamics.vehicle_file.load_vehicle`` / ``parse_vehicle``, which validate
every field; the dataclasses here hold already-validated numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mav_geometry.groups import SO3

FloatArray = NDArray[np.float64]

BODY = "body"
"""Name of the main body, the root of the kinematic tree."""

WIND_AXES = "wind"
"""Coefficient tables in wind axes: (Cl, Cm, Cn, CD, CC, CL), paper (56)-(57)."""
WING_AXES = "wing"
"""Coefficient tables in wing axes: (Cl, Cm, Cn, CA, CY, CN), paper (51)-(52)."""


def spatial_inertia(mass: float, com: FloatArray, inertia_com: FloatArray) -> FloatArray:
    """6x6 generalised inertia in a frame whose origin is not necessarily the COM.

    ``G = [[I_c - m [c]^2, m [c]], [-m [c], m 1]]`` (mav-screw-theory.md §1.5) for twists
    ``(omega, v)``; ``com`` (m) and ``inertia_com`` (kg m^2, about the COM) are in
    that frame's axes.
    """
    c_hat = SO3.hat(com)
    result = np.zeros((6, 6))
    result[:3, :3] = inertia_com - mass * c_hat @ c_hat
    result[:3, 3:] = mass * c_hat
    result[3:, :3] = -mass * c_hat
    result[3:, 3:] = mass * np.eye(3)
    return result


@dataclass(frozen=True)
class RigidBodyInertia:
    """Mass (kg), COM (m, link frame) and rotational inertia about the COM (kg m^2, link axes)."""

    mass: float
    com: FloatArray
    inertia: FloatArray

    def spatial(self) -> FloatArray:
        """The 6x6 generalised inertia in the link frame."""
        return spatial_inertia(self.mass, self.com, self.inertia)


@dataclass(frozen=True)
class BodyDrag:
    """Placeholder body drag ``W = -D1 V_air - D2 |V_air| * V_air`` (mav-screw-theory.md §2.3, [X]).

    ``linear`` (N s/m and N m s/rad) and ``quadratic`` (N s^2/m^2, N m s^2/rad^2)
    are the diagonals of D1, D2 for the air-relative body twist ``(omega, v)``.
    """

    linear: FloatArray
    quadratic: FloatArray


@dataclass(frozen=True)
class WingAerodynamics:
    """Static-coefficient wing model (paper §3.3, Table 1).

    ``position``/``orientation`` place the aerodynamic frame {a'} (x along the
    chord, forward; z normal, up; origin at the wing COM) in the link frame.
    ``coefficients[k]`` are the six coefficients at ``alpha_deg[k]`` in the order
    of ``convention`` (WIND_AXES or WING_AXES); ``sideslip_slopes`` (per rad) add a
    term linear in the sideslip angle. Moments are normalised by ``span`` (roll,
    yaw) and ``chord`` (pitch).
    """

    area: float
    chord: float
    span: float
    position: FloatArray
    orientation: FloatArray
    convention: str
    alpha_deg: FloatArray
    coefficients: FloatArray
    sideslip_slopes: FloatArray


@dataclass(frozen=True)
class TiltJoint:
    """Revolute joint of a link: unit ``axis`` through ``point`` (parent frame).

    Angle limits in rad, rate limit in rad/s; ``servo_bandwidth`` (rad/s) is the
    natural frequency of the second-order servo the simulator may use.
    """

    axis: FloatArray
    point: FloatArray
    angle_min: float
    angle_max: float
    rate_max: float
    servo_bandwidth: float


@dataclass(frozen=True)
class Link:
    """A wing or tilt mechanism (a tilt mechanism is a wing without aerodynamics).

    ``position``/``orientation`` (quaternion ``[x, y, z, w]``) give the link frame
    in the parent frame at zero joint angle; ``joint`` is None for a fixed link.
    """

    name: str
    parent: str
    position: FloatArray
    orientation: FloatArray
    inertia: RigidBodyInertia
    joint: TiltJoint | None
    aero: WingAerodynamics | None


@dataclass(frozen=True)
class Rotor:
    """A propeller on a motor, revolute-jointed to its parent.

    ``position`` is the rotor COM (the rotor frame origin) in the parent frame,
    ``thrust_axis`` the unit thrust direction (parent frame), ``spin`` +1 for
    counter-clockwise and -1 for clockwise seen from the thrust side (the paper's
    epsilon: the spin axis is ``spin * thrust_axis``). ``axis_offset`` (m, parent
    frame) runs from the COM to the spin axis (nonzero = an unbalanced rotor).
    The rotor frame has its z axis along ``thrust_axis``; ``inertia`` is given in
    that frame about the COM. Thrust ``k_l w^2`` (N), drag moment ``k_d w^2`` (N m)
    with ``w`` in rad/s; speed limits in rad/s; motor time constant in s.
    """

    name: str
    parent: str
    position: FloatArray
    thrust_axis: FloatArray
    spin: int
    axis_offset: FloatArray
    thrust_coefficient: float
    drag_coefficient: float
    inertia: RigidBodyInertia
    speed_min: float
    speed_max: float
    time_constant: float


@dataclass(frozen=True)
class ControllerGains:
    """Mass-normalised gains of the SE(3) tracking controller, per body axis.

    Position (1/s^2), velocity (1/s), attitude (1/s^2) and angular rate (1/s).
    """

    position: FloatArray
    velocity: FloatArray
    attitude: FloatArray
    angular_rate: FloatArray


@dataclass(frozen=True)
class Vehicle:
    """A validated vehicle description (see ``config/vehicles/*.yaml``)."""

    name: str
    gravity: float
    air_density: float
    body: RigidBodyInertia
    drag: BodyDrag
    links: tuple[Link, ...]
    rotors: tuple[Rotor, ...]
    gains: ControllerGains | None
    """Tracking-controller gains from the file's optional ``controller`` block."""

    @property
    def tilting_links(self) -> tuple[Link, ...]:
        """Links with a joint, in file order (the order of tilt-angle arrays)."""
        return tuple(link for link in self.links if link.joint is not None)

    @property
    def total_mass(self) -> float:
        """Mass of every body (kg)."""
        return self.body.mass + sum(k.inertia.mass for k in self.links) + sum(
            r.inertia.mass for r in self.rotors
        )
