"""Multirotor plant: one rigid body (rotors and links locked) under rotor, drag and wing wrenches.

The vehicle file is turned into a ``mav_dynamics.model.TreeModel``; its locked spatial
inertia about the body origin O (``(omega, v)`` order, at zero tilt) becomes a
``RigidBody`` stepped by a selectable integrator (``dqvi`` default, ``rk4``, ``rkmk4``,
``dop853``). Per physics step the applied body wrench ``(m, f)`` about O is held:

- rotors: ``K(tilt) u`` with ``u_i = w_i |w_i|`` (``mav_dynamics.allocation``: K holds the
  wrench per squared speed, speeds are >= 0 about ``spin * thrust_axis``); K is cached
  while the tilt angles are unchanged and otherwise evaluated in closed form
  (``AllocationMatrix``);
- body drag (``mav_dynamics.aero.body_drag_wrench``) and wing aerodynamics at the
  air-relative twist of the step's first node: the body twist with ``R^T w`` taken off its
  linear part, ``w`` the uniform wind (air velocity, m/s, ENU) set by ``set_wind`` and held
  over the step (zero by default: still air, the same arithmetic as without wind).

Gravity is ENU ``(0, 0, -g)`` acting on the total mass at its centre. The ground is the
plane ``z = ground_height`` under O: a landed vehicle rests there (zero twist) until the
world-vertical applied force exceeds its weight; O crossing the plane downwards is an
inelastic touchdown (counted) that leaves it landed with its attitude unchanged.

Balances (flight only; re-anchored at every touchdown and reset, since the ground's
reaction is not an applied wrench): energy error ``E - E_0 - work`` of the applied
non-gravity wrench (trapezoidal power ``W . xi`` at both nodes of a step, ``xi`` the
ground-relative twist, so the wind's work on the drag and wings is counted) and world
momentum error ``(L_W, p_W) - initial - impulse`` of applied wrench plus gravity
(trapezoidal, about the world origin).

Cost: the rotor and drag wrench, the bookkeeping after the integrator (twist, node,
balances) and the flight accelerations run in ``integrators/_kernels.c`` (``plant_wrench``,
``plant_advance``, ``plant_accelerations``) when it is built, and the wings reuse their
links' adjoints while the tilts hold; the Python methods here are the reference
(``MAV_KERNELS=reference``), equal to round-off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from mav_dynamics.allocation import allocation_matrix
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle import Vehicle
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.nilpotent import DUAL
from mav_geometry.scalar import Vector3, cross, to_matrix, unpack_translation
from variational_sim.integrators.adaptive import ScipyAdaptive
from variational_sim.integrators.base import Integrator
from variational_sim.integrators.dqvi import DQVI
from variational_sim.integrators.rk4 import RK4
from variational_sim.integrators.rkmk import RKMK4
from variational_sim.models.rigid_body import RigidBody, RigidBodyState

STANDARD_GRAVITY = 9.80665
"""m/s^2, the world gravity of the simulator (ENU: (0, 0, -g))."""

INTEGRATORS = {"dqvi": DQVI, "rk4": RK4, "rkmk4": RKMK4, "dop853": ScipyAdaptive}
"""Selectable rigid-body integrators by name."""

_kernels = load_kernels("variational_sim.integrators._kernels")


def locked_rigid_body(model: TreeModel, gravity: float) -> RigidBody:
    """The whole vehicle as one rigid body about O: locked inertia at zero joint angles.

    ``M6 = [[I_O, m [c]x], [-m [c]x, m 1]]`` gives the mass ``m`` (kg) and the centre of
    mass ``c`` (m, body frame) on which gravity ``(0, 0, -gravity)`` (m/s^2, ENU) acts.
    """
    inertia = model.locked_inertia()
    mass = float(inertia[3, 3])
    coupling = inertia[:3, 3:] / mass
    com = (coupling[2, 1], coupling[0, 2], coupling[1, 0])
    return RigidBody(inertia, mass, np.array(com), np.array((0.0, 0.0, -gravity)))


Matrix3 = tuple[Vector3, Vector3, Vector3]


def rotate_rows(rows: Matrix3, v: Sequence[float]) -> Vector3:
    """``R v`` with ``R`` given by its rows."""
    return (rows[0][0] * v[0] + rows[0][1] * v[1] + rows[0][2] * v[2],
            rows[1][0] * v[0] + rows[1][1] * v[1] + rows[1][2] * v[2],
            rows[2][0] * v[0] + rows[2][1] * v[1] + rows[2][2] * v[2])


def level_quaternion(yaw: float) -> tuple[float, float, float, float]:
    """Body->ENU quaternion ``[x, y, z, w]`` of a level attitude with heading ``yaw`` (rad)."""
    return (0.0, 0.0, math.sin(0.5 * yaw), math.cos(0.5 * yaw))


def _single_tilt_of_each_rotor(vehicle: Vehicle) -> list[int] | None:
    """Index (order of ``vehicle.tilting_links``) of the one tilt joint between each rotor and
    the body, -1 for rotors without one; None if a rotor hangs below several joints."""
    links = {link.name: link for link in vehicle.links}
    tilt_index = {link.name: k for k, link in enumerate(vehicle.tilting_links)}
    result = []
    for rotor in vehicle.rotors:
        joints, parent = [], rotor.parent
        while parent in links:
            if parent in tilt_index:
                joints.append(tilt_index[parent])
            parent = links[parent].parent
        if len(joints) > 1:
            return None
        result.append(joints[0] if joints else -1)
    return result


class AllocationMatrix:
    """``K(tilt)`` (6 x rotors): body wrench ``(m, f)`` per squared rotor speed (rad/s)^2.

    A rotor below one revolute joint of angle ``phi`` moves by ``Ad(exp(S phi)) = 1 +
    sin(phi) ad_S + (1 - cos(phi)) ad_S^2``, so its column is exactly
    ``a + cos(phi) c + sin(phi) b``; ``a, b, c`` come from ``mav_dynamics``'
    ``allocation_matrix`` at 0, pi/2 and pi once, and a new tilt costs a few us instead of
    a kinematics pass. Other trees use ``allocation_matrix`` at every new tilt. The last
    matrix is cached while the tilt angles are unchanged.
    """

    def __init__(self, model: TreeModel) -> None:
        self.model = model
        count = model.tilt_count
        self._fixed = allocation_matrix(model) if count == 0 else None
        owners = _single_tilt_of_each_rotor(model.vehicle) if count else None
        self._separable = owners is not None
        if owners is not None:
            at_zero = allocation_matrix(model, np.zeros(count))
            at_half = allocation_matrix(model, np.full(count, 0.5 * math.pi))
            at_pi = allocation_matrix(model, np.full(count, math.pi))
            self._constant = 0.5 * (at_zero + at_pi)
            self._cosine = 0.5 * (at_zero - at_pi)
            self._sine = at_half - self._constant
            self._owner = np.array(owners)
            self._tilted = self._owner >= 0
        self._key: tuple[float, ...] | None = None
        self._matrix = np.zeros((6, model.rotor_count))
        self._columns_of: FloatArray | None = None
        self._columns = self._matrix

    def __call__(self, tilt_angles: Sequence[float] = ()) -> FloatArray:
        """``K`` at the tilt angles (rad, order of ``vehicle.tilting_links``)."""
        if self._fixed is not None:
            return self._fixed
        key = tuple(tilt_angles)
        if key != self._key:
            self._matrix = self._evaluate(np.array(key))
            self._key = key
        return self._matrix

    def columns(self, tilt_angles: Sequence[float] = ()) -> FloatArray:
        """``K^T`` as a C-contiguous (rotors x 6) array, the layout of the compiled wrench;
        cached with ``K`` (a copy: ``K`` keeps the layout its products were rounded with)."""
        matrix = self(tilt_angles)
        if matrix is not self._columns_of:
            self._columns = np.ascontiguousarray(matrix.T)
            self._columns_of = matrix
        return self._columns

    def _evaluate(self, tilts: FloatArray) -> FloatArray:
        if not self._separable:
            return allocation_matrix(self.model, tilts)
        angles = np.where(self._tilted, tilts[self._owner], 0.0)
        result: FloatArray = (self._constant + self._cosine * np.cos(angles)
                              + self._sine * np.sin(angles))
        return result


class MultirotorPlant:
    """Rigid-body multirotor with ground contact and balance diagnostics.

    ``step_size`` (s) is the physics step; ``gravity`` (m/s^2) the magnitude of ENU gravity;
    ``ground_height`` (m) the ground plane's z in ENU.
    """

    def __init__(self, vehicle: Vehicle, integrator: str = "dqvi", step_size: float = 1e-3,
                 gravity: float = STANDARD_GRAVITY, ground_height: float = 0.0) -> None:
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator must be one of {sorted(INTEGRATORS)}, got {integrator!r}")
        self.vehicle = vehicle
        self.model = TreeModel(vehicle)
        self.body = locked_rigid_body(self.model, gravity)
        self.integrator: Integrator[RigidBodyState, Sequence[float]] = INTEGRATORS[integrator](
            self.body, step_size)
        self.integrator_name = integrator
        self.step_size = self.integrator.step_size
        self.gravity = gravity
        self.ground_height = ground_height
        self.weight = self.body.mass * gravity
        self.rotor_count = self.model.rotor_count
        self.tilt_count = self.model.tilt_count
        self._inverse_inertia = np.linalg.inv(self.body.inertia)
        self._com = tuple(self.body.com_offset.tolist())
        self._com_offset = any(self._com)
        drag = vehicle.drag
        self._drag = (tuple(drag.linear.tolist()), tuple(drag.quadratic.tolist())) if (
            np.any(drag.linear) or np.any(drag.quadratic)) else None
        self._wings = self.model.wings  # (TreeModel body index, WingModel)
        self._wing_key: tuple[float, ...] | None = None
        self._wing_adjoints = np.zeros((len(self._wings), 6, 6))
        self._wing_twists = np.zeros((len(self._wings), 6))
        self._wing_wrenches = np.zeros((len(self._wings), 6))
        self.kernels: ModuleType | None = _kernels
        """The compiled wrench and step bookkeeping (``integrators/_kernels.c``), or None to
        run the Python reference below."""
        # the layouts plant_wrench and plant_advance read
        self._drag_coefficients = None if self._drag is None else np.array(
            self._drag[0] + self._drag[1])
        self._constants = np.concatenate([self._inverse_inertia.ravel(), (self.weight,),
                                          self._com, (float(self._com_offset),)])
        self.allocation = AllocationMatrix(self.model)
        self._wind: Vector3 | None = None  # None: still air (the zero-wind fast path)
        self._node: tuple[Matrix3, Vector3]
        self.reset()

    # -- state --------------------------------------------------------------------------

    def reset(self, position: Sequence[float] = (0.0, 0.0, 0.0), yaw: float = 0.0,
              twist: Sequence[float] | None = None,
              orientation: Sequence[float] | None = None) -> None:
        """Place O at ``position`` (m, ENU) with a level attitude of heading ``yaw`` (rad) or
        the unit quaternion ``orientation`` ([x, y, z, w], body->ENU) and body ``twist``
        ``(omega, v)`` (rad/s, m/s). Landed when at the ground plane with zero twist. The
        wind is kept.
        """
        if position[2] < self.ground_height:
            raise ValueError(f"position z {position[2]} m is below the ground plane "
                             f"z = {self.ground_height} m")
        q = level_quaternion(yaw) if orientation is None else tuple(map(float, orientation))
        twist = (0.0,) * 6 if twist is None else tuple(map(float, twist))
        self.state = self.body.state(DUAL.pack(q, position), twist)
        self.landed = position[2] == self.ground_height and not any(twist)
        self._cache_node()
        self.touchdowns = 0
        self.impact_speed_mps = 0.0
        """Downward speed at the last touchdown, m/s (0 before any)."""
        self._twist = list(twist)
        self._held = [0.0] * 6
        self._anchor_balances()

    def _cache_node(self) -> None:
        """Rotation rows and position of the current node (reused by the next step)."""
        pose = self.state.pose.tolist()
        q = pose[:4]
        self._node = (to_matrix(q), unpack_translation(pose[4:], q))

    def _anchor_balances(self) -> None:
        self._energy0 = self.body.energy(self.state)
        self._momentum0 = self.body.spatial_momentum(self.state)
        self._work = 0.0
        self._impulse = [0.0] * 6

    @property
    def orientation(self) -> tuple[float, float, float, float]:
        """Body->ENU unit quaternion ``[x, y, z, w]``."""
        x, y, z, w = self.state.pose[:4].tolist()
        return (x, y, z, w)

    @property
    def position(self) -> tuple[float, float, float]:
        """World position of O (m, ENU)."""
        return self._node[1]

    @property
    def twist(self) -> tuple[float, ...]:
        """Body twist ``(omega_B, v_B)`` (rad/s, m/s) of O."""
        return tuple(self._twist)

    @property
    def velocity_enu(self) -> tuple[float, float, float]:
        """World velocity of O (m/s, ENU)."""
        return rotate_rows(self._node[0], self._twist[3:])

    @property
    def wind_enu(self) -> Vector3:
        """Uniform wind, the air velocity (m/s, ENU) the drag and wings see."""
        return (0.0, 0.0, 0.0) if self._wind is None else self._wind

    def set_wind(self, velocity_enu: Sequence[float] | FloatArray) -> None:
        """Hold the wind (air velocity, m/s, ENU) from the next step on."""
        try:
            x, y, z = velocity_enu
            x, y, z = float(x), float(y), float(z)
        except (TypeError, ValueError):
            x = y = z = math.nan
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            raise ValueError(f"wind velocity_enu = {tuple(velocity_enu)!r}: must be 3 finite "
                             "numbers (m/s, ENU)")
        self._wind = (x, y, z) if (x or y or z) else None

    @property
    def air_velocity_enu(self) -> tuple[float, float, float]:
        """Velocity of O relative to the air (m/s, ENU)."""
        vx, vy, vz = self.velocity_enu
        wx, wy, wz = self.wind_enu
        return (vx - wx, vy - wy, vz - wz)

    def air_twist(self) -> list[float]:
        """Body twist relative to the air ``(omega, v - R^T w)`` (rad/s, m/s)."""
        twist = self._twist
        if self._wind is None:
            return list(twist)
        r0, r1, r2 = self._node[0]
        wx, wy, wz = self._wind
        return [twist[0], twist[1], twist[2],
                twist[3] - (r0[0] * wx + r1[0] * wy + r2[0] * wz),
                twist[4] - (r0[1] * wx + r1[1] * wy + r2[1] * wz),
                twist[5] - (r0[2] * wx + r1[2] * wy + r2[2] * wz)]

    @property
    def rotation(self) -> FloatArray:
        """Body->ENU rotation matrix (3x3)."""
        return np.array(self._node[0])

    @property
    def rotation_rows(self) -> Matrix3:
        """Rows of the body->ENU rotation matrix, as Python floats."""
        return self._node[0]

    @property
    def held_wrench(self) -> tuple[float, ...]:
        """Applied non-gravity body wrench ``(m, f)`` about O (N m, N) of the last step."""
        return tuple(self._held)

    @property
    def newton_iterations(self) -> int:
        """Newton iterations of the last implicit step (0 for explicit integrators)."""
        statistics = getattr(self.integrator, "statistics", None)
        return 0 if statistics is None else statistics.last_iterations

    def energy_error(self) -> float:
        """``E - E_0 - work`` (J) since the last anchor (reset or touchdown)."""
        return self.body.energy(self.state) - self._energy0 - self._work

    def momentum_error(self) -> FloatArray:
        """``(L_W, p_W) - initial - impulse`` (N m s about the world origin, N s)."""
        result: FloatArray = (self.body.spatial_momentum(self.state) - self._momentum0
                              - np.array(self._impulse))
        return result

    def accelerations(self) -> tuple[Vector3, Vector3]:
        """Body angular acceleration (rad/s^2) and ENU acceleration of O (m/s^2) at the
        current node under the last held wrench (zeros when landed).

        Euler-Poincare ``d pi/dt = (pi_a x omega + pi_l x v + tau, pi_l x omega + f)`` with
        gravity in ``(tau, f)``, then ``d xi/dt = M6^-1 d pi/dt`` and the world acceleration
        ``R (dv/dt + omega x v)``; on Python floats (numpy's per-call cost dominates here).
        """
        if self.landed:
            return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        if self.kernels is not None:
            return self.kernels.plant_accelerations(  # type: ignore[no-any-return]
                self._constants, self._node[0], self._held, self._twist, self.state.momentum)
        rows = self._node[0]
        held = self._held
        omega, velocity = self._twist[:3], self._twist[3:]
        momentum = self.state.momentum.tolist()
        angular, linear = momentum[:3], momentum[3:]
        # gravity in the body frame: R^T (0, 0, -m g) is -m g times the third row of R
        weight = (-self.weight * rows[2][0], -self.weight * rows[2][1], -self.weight * rows[2][2])
        gravity_torque = cross(self._com, weight)
        a1, a2, l1 = cross(angular, omega), cross(linear, velocity), cross(linear, omega)
        rate = [a1[i] + a2[i] + gravity_torque[i] + held[i] for i in range(3)] + [
            l1[i] + weight[i] + held[3 + i] for i in range(3)]
        twist_rate = self._body_twist(rate)
        transport = cross(omega, velocity)
        body_acceleration = [twist_rate[3 + i] + transport[i] for i in range(3)]
        return (twist_rate[0], twist_rate[1], twist_rate[2]), rotate_rows(rows, body_acceleration)

    # -- wrenches -----------------------------------------------------------------------

    def applied_wrench(self, rotor_speeds: Sequence[float],
                       tilt_angles: Sequence[float] = ()) -> list[float]:
        """Rotor + drag + wing wrench ``(m, f)`` about O (N m, N, body) at the current twist
        relative to the air."""
        if self.kernels is None:
            wrench = self._rotor_and_drag_wrench(rotor_speeds, tilt_angles)
        else:
            wrench = self.kernels.plant_wrench(
                self.allocation.columns(tilt_angles), rotor_speeds, self._twist,
                self._drag_coefficients, self._node[0], self._wind)
        if self._wings:
            air = self._twist if self._wind is None else self.air_twist()
            wrench = [w + a for w, a in
                      zip(wrench, self._wing_wrench(tilt_angles, air), strict=True)]
        return wrench

    def _rotor_and_drag_wrench(self, rotor_speeds: Sequence[float],
                               tilt_angles: Sequence[float]) -> list[float]:
        """Rotor + drag part of ``applied_wrench`` (the reference of ``plant_wrench``)."""
        squared = np.array([w * abs(w) for w in rotor_speeds])
        wrench: list[float] = (self.allocation(tilt_angles) @ squared).tolist()
        if self._drag is None:
            return wrench
        air = self._twist if self._wind is None else self.air_twist()
        linear, quadratic = self._drag
        return [w - a * x - b * abs(x) * x for w, a, b, x in
                zip(wrench, linear, quadratic, air, strict=True)]

    def _wing_wrench(self, tilt_angles: Sequence[float],
                     air_twist: Sequence[float]) -> list[float]:
        """Sum of the wing wrenches moved to O at the body's air-relative twist (a uniform
        wind is a pure translation, so every link's air twist follows by the same
        kinematics)."""
        if self.kernels is not None:
            return self._wing_wrench_at_held_tilts(tilt_angles, air_twist)
        model = self.model
        zero = np.zeros(model.body_count)
        angles = model.joint_vectors(None, np.array(tilt_angles) if tilt_angles else None)
        adjoints, _, twists, _ = model.kinematics(np.array(air_twist), angles, zero, zero)
        total = np.zeros(6)
        for index, wing in self._wings:
            total += adjoints[index].T @ wing.wrench_link_frame(twists[index])
        result: list[float] = total.tolist()
        return result

    def _wing_wrench_at_held_tilts(self, tilt_angles: Sequence[float],
                                   air_twist: Sequence[float]) -> list[float]:
        """``_wing_wrench`` with the links' adjoints ``Ad_{T^k_b}`` kept while the tilts are
        unchanged: with the joints at rest a link's twist is ``Ad_{T^k_b}`` times the body's,
        so the kinematics pass (hundreds of us) runs only when a tilt moves; the twists
        differ from that pass's chained products by round-off."""
        assert self.kernels is not None
        key = tuple(tilt_angles)
        if key != self._wing_key:
            model = self.model
            zero = np.zeros(model.body_count)
            angles = model.joint_vectors(None, np.array(key) if key else None)
            adjoints = model.kinematics(np.zeros(6), angles, zero, zero)[0]
            self._wing_adjoints = np.ascontiguousarray(
                adjoints[[index for index, _ in self._wings]])
            self._wing_key = key
        twists, wrenches = self._wing_twists, self._wing_wrenches
        self.kernels.adjoints_apply(self._wing_adjoints, air_twist, twists)
        for k, (_, wing) in enumerate(self._wings):
            wrenches[k] = wing.wrench_link_frame(twists[k])
        result: list[float] = self.kernels.adjoints_transpose_sum(self._wing_adjoints, wrenches)
        return result

    def rotor_frames(self, tilt_angles: Sequence[float] = ()) -> tuple[FloatArray, FloatArray]:
        """Rotor positions (m) and unit thrust axes in the body frame, (rotors, 3) each."""
        model = self.model
        zero = np.zeros(model.body_count)
        angles = model.joint_vectors(None, np.array(tilt_angles) if tilt_angles else None)
        adjoints = model.kinematics(np.zeros(6), angles, zero, zero)[0][model.rotor_bodies]
        # Ad_{T^k_b} = [[R, 0], [[p]x R, R]] with T^k_b = (R, p): the rotor frame's z axis
        # in {b} is R[2, :] and its origin is -R^T p.
        rotations = adjoints[:, :3, :3]
        hats = adjoints[:, 3:, :3] @ np.swapaxes(rotations, 1, 2)
        p = np.stack([hats[:, 2, 1], hats[:, 0, 2], hats[:, 1, 0]], axis=1)
        positions = -np.einsum("kji,kj->ki", rotations, p)
        return positions, rotations[:, 2, :]

    # -- stepping -----------------------------------------------------------------------

    def _body_twist(self, momentum: FloatArray | list[float]) -> list[float]:
        """``M6^-1 momentum`` (or of a momentum rate) as Python floats."""
        result: list[float] = (self._inverse_inertia @ momentum).tolist()
        return result

    def _world_wrench(self, rows: Matrix3, t: Sequence[float],
                      held: Sequence[float]) -> list[float]:
        """Applied wrench plus gravity about the world origin, world frame (N m, N), at the
        node with rotation rows ``rows`` and position ``t`` of O."""
        r0, r1, r2 = rows
        m0, m1, m2, f0, f1, f2 = held
        force = (r0[0] * f0 + r0[1] * f1 + r0[2] * f2, r1[0] * f0 + r1[1] * f1 + r1[2] * f2,
                 r2[0] * f0 + r2[1] * f1 + r2[2] * f2 - self.weight)
        c0, c1, c2 = cross(t, force)
        c0 += r0[0] * m0 + r0[1] * m1 + r0[2] * m2
        c1 += r1[0] * m0 + r1[1] * m1 + r1[2] * m2
        c2 += r2[0] * m0 + r2[1] * m1 + r2[2] * m2
        if self._com_offset:
            # the weight acts at the centre of mass R c: (R c) x (0, 0, -m g)
            x, y, _ = rotate_rows(rows, self._com)
            c0 -= y * self.weight
            c1 += x * self.weight
        return [c0, c1, c2, *force]

    def step(self, rotor_speeds: Sequence[float], tilt_angles: Sequence[float] = ()) -> None:
        """Advance one physics step with the rotor speeds (rad/s) and tilts (rad) held."""
        held = self.applied_wrench(rotor_speeds, tilt_angles)
        self._held = held
        state = self.state
        h = self.step_size
        if self.landed:
            upward = sum([r * f for r, f in zip(self._node[0][2], held[3:], strict=True)])
            if upward <= self.weight:
                self.state = RigidBodyState(state.time + h, state.pose, state.momentum)
                return
            self.landed = False
        new = self.integrator.step(state, held)
        if self.kernels is None:
            self._advance(new, held)
        else:
            self._twist, self._node, self._work, self._impulse = self.kernels.plant_advance(
                self._constants, h, held, self._twist, *self._node, new.pose, new.momentum,
                self._work, self._impulse)
            self.state = new
        position = self._node[1]
        if position[2] < self.ground_height and self.velocity_enu[2] < 0.0:
            self._touch_down(position)

    def _advance(self, new: RigidBodyState, held: list[float]) -> None:
        """Take the integrator's new state with the balances of the step under ``held``
        (the reference of ``plant_advance``)."""
        h = self.step_size
        twist = self._body_twist(new.momentum)
        power = sum([w * (a + b) for w, a, b in zip(held, self._twist, twist, strict=True)])
        self._work += 0.5 * h * power
        start = self._world_wrench(*self._node, held)
        self.state = new
        self._twist = twist
        self._cache_node()
        end = self._world_wrench(*self._node, held)
        self._impulse = [i + 0.5 * h * (a + b) for i, a, b in
                         zip(self._impulse, start, end, strict=True)]

    def _touch_down(self, position: Sequence[float]) -> None:
        """Inelastic contact: stop on the ground plane, attitude kept (re-levelling it here
        would be a rotation the IMU never measures, and the estimator would keep the tilt)."""
        time = self.state.time
        self.impact_speed_mps = -self.velocity_enu[2]
        self.state = self.body.state(
            DUAL.pack(self.orientation, (position[0], position[1], self.ground_height)),
            np.zeros(6), time)
        self._twist = [0.0] * 6
        self._cache_node()
        self.landed = True
        self.touchdowns += 1
        self._anchor_balances()

