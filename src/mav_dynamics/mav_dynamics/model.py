"""The exact tree recursion of docs/theory/mav-screw-theory.md §2.8 for any multirotor.

Bodies form a tree: the main body (index 0, integral causality) and children
(links, rotors) on revolute joints whose trajectories ``(q, dq, ddq)`` are inputs
(differential causality). One evaluation does:

1. forward pass, parents before children: ``Ad_{T^k_p}`` from the joint angle,
   twists ``V_k = Ad_{T^k_p}(V_p + S dq)`` (22) and bias accelerations
   ``a_k = Ad_{T^k_p} a_p + ad_{V_k} S_k dq + S_k ddq`` ((26) with zero base
   acceleration);
2. external wrenches per body: gravity ``G_k Ad_{T^k_0} A_grv`` (35), rotor
   thrust/drag ``K_k S_k dq^2`` (42), wing aerodynamics (47), body drag;
3. locked inertia ``G_T = sum Ad^T G_k Ad`` and the base acceleration
   ``G_T dV = sum Ad^T (ad^T_{V_k} G_k V_k + W_ext,k - G_k a_k)``;
4. backward pass, children before parents: the wrench of each parent on its
   child and the joint torque ``tau_k = S_k^T W_k`` (33), e.g. motor torques.

Children at the same depth are processed together as batches of 6x6 matrices,
so the per-call cost grows with the tree depth (at most 3 here), not with the
number of bodies. Rotor speeds are the paper's ``dtheta`` (rad/s, >= 0, spinning
about ``spin * thrust_axis``); tilt angles are the link joint angles (rad).

When ``mav_dynamics._kernels`` is built, ``evaluate`` is one call of its ``tree_evaluate``
(the same recursion body by body, wings and drag included); the numpy code here stays the
reference it is tested against (``MAV_KERNELS=reference`` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import cast

import numpy as np

from mav_dynamics.aero import WingModel, body_drag_wrench
from mav_dynamics.screws import joint_adjoint_terms, revolute_screw, rotation_from_z, rotor_matrix
from mav_dynamics.vehicle import BODY, FloatArray, Link, Vehicle
from mav_geometry import quaternion
from mav_geometry.groups import SE3
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("mav_dynamics._kernels")

_EYE6 = np.eye(6)

# One row of per-body constants for ``_kernels.tree_evaluate``: (name, size) in the order of
# the ``B_*`` offsets of _kernels.c.
_BODY_ROW = (("parent", 1), ("adjoint_zero_inv", 36), ("ad_screw", 36), ("ad_screw_sq", 36),
             ("screw_parent", 6), ("screw_child", 6), ("ad_screw_child", 36), ("inertia", 36),
             ("rotor_column", 6))
_BODY_FIELDS = {name: slice(start - size, start) for (name, size), start in zip(
    _BODY_ROW, np.cumsum([size for _, size in _BODY_ROW]), strict=True)}

# Positions (row*6+col in a 6x6) and sources of the non-zeros of ad_V, V = (w, v):
# ad_V = [[hat(w), 0], [hat(v), hat(w)]].
_HAT = [(0, 1, 2, -1.0), (0, 2, 1, 1.0), (1, 0, 2, 1.0), (1, 2, 0, -1.0), (2, 0, 1, -1.0),
        (2, 1, 0, 1.0)]
_AD_POS = np.array([6 * (r + dr) + (c + dc) for dr, dc, _ in ((0, 0, 0), (3, 3, 0), (3, 0, 3))
                    for r, c, _, _ in _HAT])
_AD_SRC = np.array([k + off for _, _, off in ((0, 0, 0), (3, 3, 0), (3, 0, 3))
                    for _, _, k, _ in _HAT])
_AD_SIGN = np.array([s for _ in range(3) for _, _, _, s in _HAT])


def ad_batch(twists: FloatArray) -> FloatArray:
    """``ad_V`` for a batch of twists (N, 6) -> (N, 6, 6); same as ``SE3.ad``, fewer calls."""
    flat = np.zeros((twists.shape[0], 36))
    flat[:, _AD_POS] = twists[:, _AD_SRC] * _AD_SIGN
    return flat.reshape(-1, 6, 6)


@dataclass(frozen=True)
class DynamicsResult:
    """Output of one model evaluation (body frame {b}, twists/wrenches angular first).

    - ``base_acceleration``: dV^{b,0}_b (rad/s^2, m/s^2), body-frame time derivative.
    - ``rotor_torques`` (N m): motor torque on each rotor about its spin axis.
    - ``tilt_torques`` (N m): actuator torque of each tilting link (file order).
    - ``locked_inertia``: G^b_T (6x6).
    - ``rotor_wrench``: sum of rotor thrust/drag wrenches in {b}, ``K(phi) dtheta^2``.
    - ``base_residual``: backward-pass wrench left at the base (~0; a self-check).
    - ``body_twists`` (N, 6) and ``body_adjoints`` (N, 6, 6) = ``Ad_{T^k_b}`` per body;
      ``body_accelerations`` (N, 6): dV_k = Ad_{T^k_b} dV + a_k, body 0 first (NaN
      without the backward pass).
    """

    base_acceleration: FloatArray
    rotor_torques: FloatArray
    tilt_torques: FloatArray
    locked_inertia: FloatArray
    rotor_wrench: FloatArray
    base_residual: FloatArray
    body_twists: FloatArray
    body_adjoints: FloatArray
    body_accelerations: FloatArray


@dataclass(frozen=True)
class _Level:
    """Children at one depth of the tree, with their constant joint data."""

    children: np.ndarray
    parents: np.ndarray
    ad_screw: FloatArray        # ad(S^{p,p}_k), (n, 6, 6)
    ad_screw_sq: FloatArray     # ad(S^{p,p}_k)^2
    adjoint_zero_inv: FloatArray  # Ad_{T^k_p(0)}
    screw_parent: FloatArray    # S^{p,p}_k, (n, 6)
    screw_child: FloatArray     # S^{k,p}_k = Ad_{T^k_p(0)} S^{p,p}_k (27)
    ad_screw_child: FloatArray  # ad(S^{k,p}_k)


class TreeModel:
    """Multibody model of a vehicle; constant data is precomputed once per vehicle."""

    def __init__(self, vehicle: Vehicle) -> None:
        self.vehicle = vehicle
        links = _topological(vehicle)
        names = [BODY, *(link.name for link in links), *(r.name for r in vehicle.rotors)]
        index = {name: k for k, name in enumerate(names)}
        count = len(names)
        self.body_count = count
        parents = np.zeros(count, dtype=int)
        depth = np.zeros(count, dtype=int)
        screws = np.zeros((count, 6))
        poses = np.repeat(np.eye(4)[None], count, axis=0)
        inertias = np.zeros((count, 6, 6))
        inertias[0] = vehicle.body.spatial()
        for link in links:
            k = index[link.name]
            parents[k] = index[link.parent]
            depth[k] = depth[parents[k]] + 1
            poses[k] = SE3.from_components(quaternion.to_matrix(link.orientation), link.position)
            inertias[k] = link.inertia.spatial()
            if link.joint is not None:
                screws[k] = revolute_screw(link.joint.axis, link.joint.point)
        for rotor in vehicle.rotors:
            k = index[rotor.name]
            parents[k] = index[rotor.parent]
            depth[k] = depth[parents[k]] + 1
            poses[k] = SE3.from_components(rotation_from_z(rotor.thrust_axis), rotor.position)
            inertias[k] = rotor.inertia.spatial()
            screws[k] = revolute_screw(rotor.spin * rotor.thrust_axis,
                                       rotor.position + rotor.axis_offset)
        self.parents = parents
        self.inertias = inertias
        self.zero_poses = poses
        self.screws_parent = screws
        self.rotor_bodies = np.array([index[r.name] for r in vehicle.rotors])
        self.tilt_bodies = np.array([index[k.name] for k in vehicle.tilting_links], dtype=int)
        # K_i S^{i,p}_i in each rotor frame: the aero wrench per squared speed (42)
        self.rotor_aero_columns = np.array([
            rotor_matrix(r.thrust_coefficient, r.drag_coefficient, r.spin) @ s
            for r, s in zip(vehicle.rotors, self.rotor_spin_screws, strict=True)])
        self.wings = [(index[k.name], WingModel(k.aero, vehicle.air_density))
                      for k in links if k.aero is not None]
        self.gravity_world = np.array([0.0, 0.0, -vehicle.gravity])
        self.levels = [self._level(np.flatnonzero(depth == d)) for d in range(1, depth.max() + 1)]
        self._has_drag = bool(np.any(vehicle.drag.linear) or np.any(vehicle.drag.quadratic))
        self._constant_inertia = len(self.tilt_bodies) == 0 and all(
            _balanced(inertias[k], screws_k)
            for k, screws_k in zip(self.rotor_bodies, self.rotor_spin_screws, strict=True)
        )
        self._locked_cache: tuple[FloatArray, FloatArray] | None = None
        self._packed_bodies = self._pack_bodies()
        self._packed_wings = np.concatenate(
            [[len(self.wings)], *([k, *wing.packed] for k, wing in self.wings)]).astype(float)
        drag = vehicle.drag
        self._packed_drag = np.concatenate([drag.linear, drag.quadratic]).astype(float)

    def _pack_bodies(self) -> FloatArray:
        """Per-body constants for the kernel, one ``_BODY_ROW`` per body (zero for the base's
        joint and for bodies other than rotors' columns)."""
        rows = np.zeros((self.body_count, _BODY_FIELDS["rotor_column"].stop))
        rows[:, _BODY_FIELDS["inertia"]] = self.inertias.reshape(-1, 36)
        rows[self.rotor_bodies, _BODY_FIELDS["rotor_column"]] = self.rotor_aero_columns
        for level in self.levels:
            for name in ("parent", "adjoint_zero_inv", "ad_screw", "ad_screw_sq", "screw_parent",
                         "screw_child", "ad_screw_child"):
                values = level.parents if name == "parent" else getattr(level, name)
                rows[level.children, _BODY_FIELDS[name]] = values.reshape(len(level.children), -1)
        return rows

    def _level(self, children: np.ndarray) -> _Level:
        screw = self.screws_parent[children]
        ad_screw, ad_screw_sq = (np.array(t) for t in zip(
            *(joint_adjoint_terms(s) for s in screw), strict=True))
        inv_zero = SE3.adjoint(SE3.inverse(self.zero_poses[children]))
        screw_child = np.einsum("kij,kj->ki", inv_zero, screw)
        return _Level(
            children=children,
            parents=self.parents[children],
            ad_screw=ad_screw,
            ad_screw_sq=ad_screw_sq,
            adjoint_zero_inv=inv_zero,
            screw_parent=screw,
            screw_child=screw_child,
            ad_screw_child=ad_batch(screw_child),
        )

    @property
    def rotor_spin_screws(self) -> FloatArray:
        """S^{i,p}_i of every rotor in its own frame (27), (rotors, 6)."""
        inv = SE3.adjoint(SE3.inverse(self.zero_poses[self.rotor_bodies]))
        result: FloatArray = np.einsum("kij,kj->ki", inv, self.screws_parent[self.rotor_bodies])
        return result

    @property
    def rotor_count(self) -> int:
        return len(self.rotor_bodies)

    @property
    def tilt_count(self) -> int:
        return len(self.tilt_bodies)

    def joint_vectors(
        self, rotor: FloatArray | None, tilt: FloatArray | None
    ) -> FloatArray:
        """One per-body joint vector (index 0, the base, unused) from rotor and tilt values."""
        result = np.zeros(self.body_count)
        if rotor is not None:
            result[self.rotor_bodies] = rotor
        if tilt is not None and self.tilt_count:
            result[self.tilt_bodies] = tilt
        return result

    def kinematics(
        self, twist: FloatArray, q: FloatArray, dq: FloatArray, ddq: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Forward pass: ``(Ad_{T^k_b}, Ad_{T^k_p}, V_k, a_k)`` for every body."""
        n = self.body_count
        ad_kb = np.empty((n, 6, 6))
        ad_kb[0] = _EYE6
        ad_kp = np.empty((n, 6, 6))
        ad_kp[0] = _EYE6
        twists = np.empty((n, 6))
        twists[0] = twist
        bias = np.zeros((n, 6))
        for level in self.levels:
            c, p = level.children, level.parents
            sine = np.sin(q[c])[:, None, None]
            versine = (1.0 - np.cos(q[c]))[:, None, None]
            # Ad_{T^k_p} = Ad_{T^k_p(0)} Ad_{exp(-S q)}, with Ad_exp from §3.5.
            adj = level.adjoint_zero_inv @ (_EYE6 - sine * level.ad_screw
                                            + versine * level.ad_screw_sq)
            ad_kp[c] = adj
            ad_kb[c] = adj @ ad_kb[p]
            rate = dq[c][:, None]
            child_twist = (adj @ (twists[p] + level.screw_parent * rate)[:, :, None])[:, :, 0]
            twists[c] = child_twist
            bias[c] = ((adj @ bias[p][:, :, None])[:, :, 0]
                       - (level.ad_screw_child @ child_twist[:, :, None])[:, :, 0] * rate
                       + level.screw_child * ddq[c][:, None])
        return ad_kb, ad_kp, twists, bias

    def _locked_inertia(self, ad_kb: FloatArray) -> FloatArray:
        result: FloatArray = (np.swapaxes(ad_kb, 1, 2) @ self.inertias @ ad_kb).sum(axis=0)
        return result

    def evaluate(
        self,
        rotation: FloatArray,
        twist: FloatArray,
        rotor_speeds: FloatArray,
        rotor_accelerations: FloatArray | None = None,
        rotor_angles: FloatArray | None = None,
        tilt_angles: FloatArray | None = None,
        tilt_rates: FloatArray | None = None,
        tilt_accelerations: FloatArray | None = None,
        wind: FloatArray | None = None,
        torques: bool = True,
    ) -> DynamicsResult:
        """Evaluate the model at one instant.

        ``rotation``: R^0_b (body to world ENU); ``twist``: V^{b,0}_b (rad/s, m/s) in
        {b}; rotor arrays in rotor file order (rad, rad/s, rad/s^2); tilt arrays
        in the order of ``vehicle.tilting_links`` (rad, rad/s, rad/s^2); ``wind``:
        air velocity in the world frame (m/s). ``torques=False`` skips the
        backward pass (joint torques and residual are then NaN).
        """
        # the kernel checks the finiteness of rotation, twist and the joints itself, with the
        # same messages (numpy reductions would cost more than the whole kernel)
        checked = _kernels is None or self.body_count > _kernels.MAX_BODIES
        _check(rotation, (3, 3), "rotation", finite=checked)
        _check(twist, (6,), "twist", finite=checked)
        _check(rotor_speeds, (self.rotor_count,), "rotor_speeds")
        if (rotor_speeds < 0.0).any():
            raise ValueError("rotor_speeds must be >= 0 (rad/s): each rotor spins about "
                             "spin * thrust_axis and thrusts k_l w^2")
        q = self.joint_vectors(rotor_angles, tilt_angles)
        dq = self.joint_vectors(rotor_speeds, tilt_rates)
        ddq = self.joint_vectors(rotor_accelerations, tilt_accelerations)
        if _kernels is not None and self.body_count <= _kernels.MAX_BODIES:
            return self._evaluate_compiled(_kernels, rotation, twist, q, dq, ddq, wind, torques)
        if not (np.isfinite(q).all() and np.isfinite(dq).all() and np.isfinite(ddq).all()):
            raise ValueError("joint inputs (rotor and tilt arrays) must be finite")
        ad_kb, ad_kp, twists, bias = self.kinematics(twist, q, dq, ddq)
        inertias = self.inertias

        momentum = (inertias @ twists[:, :, None])[:, :, 0]
        velocity_product = (momentum[:, None, :] @ ad_batch(twists))[:, 0, :]  # ad^T_V G V
        gravity_body = ad_kb[:, :, 3:] @ (rotation.T @ self.gravity_world)  # Ad_{T^k_0} A_grv
        aero = np.zeros((self.body_count, 6))
        rotor_aero = self.rotor_aero_columns * (rotor_speeds**2)[:, None]
        aero[self.rotor_bodies] = rotor_aero
        if self.wings or self._has_drag:
            wind_body = np.zeros(6)
            if wind is not None:
                _check(wind, (3,), "wind")
                wind_body[3:] = rotation.T @ wind
            if self._has_drag:
                aero[0] = body_drag_wrench(self.vehicle.drag, twist - wind_body)
            for k, wing in self.wings:
                aero[k] = wing.wrench_link_frame(twists[k] - ad_kb[k] @ wind_body)
        bias_wrench = velocity_product + aero + (
            inertias @ (gravity_body - bias)[:, :, None])[:, :, 0]
        right_hand = (bias_wrench[:, None, :] @ ad_kb)[:, 0, :].sum(axis=0)
        locked, locked_inverse = self._locked(ad_kb)
        acceleration = locked_inverse @ right_hand
        rotor_wrench = (rotor_aero[:, None, :] @ ad_kb[self.rotor_bodies])[:, 0, :].sum(axis=0)

        joint_torques = np.full(self.body_count, np.nan)
        residual = np.full(6, np.nan)
        body_accelerations = np.full((self.body_count, 6), np.nan)
        if torques:
            from_base = ad_kb @ acceleration                  # Ad_{T^k_b} dV
            body_accelerations = from_base + bias
            joint_torques, residual = self._backward(ad_kp, from_base, bias_wrench)
        return self._result(acceleration, locked, rotor_wrench, twists, ad_kb,
                            body_accelerations, joint_torques, residual)

    def _evaluate_compiled(
        self, kernels: ModuleType, rotation: FloatArray, twist: FloatArray, q: FloatArray,
        dq: FloatArray, ddq: FloatArray, wind: FloatArray | None, torques: bool,
    ) -> DynamicsResult:
        """``evaluate`` as one ``_kernels.tree_evaluate`` call (shapes already checked)."""
        if wind is not None and (self.wings or self._has_drag):  # as the reference reads it
            _check(wind, (3,), "wind", finite=False)
        else:
            wind = None
        n = self.body_count
        acceleration, locked, rotor_wrench = np.empty(6), np.empty((6, 6)), np.empty(6)
        twists, adjoints = np.empty((n, 6)), np.empty((n, 6, 6))
        accelerations, joint_torques, residual = np.empty((n, 6)), np.empty(n), np.empty(6)
        kernels.tree_evaluate(
            self._packed_bodies, self._packed_wings, self._packed_drag,
            np.ascontiguousarray(rotation, dtype=np.float64),
            np.ascontiguousarray(twist, dtype=np.float64), q, dq, ddq,
            np.zeros(3) if wind is None else np.ascontiguousarray(wind, dtype=np.float64),
            self.gravity_world, acceleration, locked, rotor_wrench, twists, adjoints,
            accelerations, joint_torques, residual, torques)
        return self._result(acceleration, locked, rotor_wrench, twists, adjoints, accelerations,
                            joint_torques, residual)

    def _result(
        self, acceleration: FloatArray, locked: FloatArray, rotor_wrench: FloatArray,
        twists: FloatArray, adjoints: FloatArray, accelerations: FloatArray,
        joint_torques: FloatArray, residual: FloatArray,
    ) -> DynamicsResult:
        """The result of ``evaluate``, joint torques split into rotors and tilt servos."""
        return DynamicsResult(
            base_acceleration=acceleration,
            rotor_torques=joint_torques[self.rotor_bodies],
            tilt_torques=joint_torques[self.tilt_bodies],
            locked_inertia=locked,
            rotor_wrench=rotor_wrench,
            base_residual=residual,
            body_twists=twists,
            body_adjoints=adjoints,
            body_accelerations=accelerations,
        )

    def _locked(self, ad_kb: FloatArray) -> tuple[FloatArray, FloatArray]:
        """G_T and its inverse; cached when no joint angle can change it."""
        if self._constant_inertia and self._locked_cache is not None:
            return self._locked_cache
        locked = self._locked_inertia(ad_kb)
        # numpy's stubs type linalg results as floating[Any]; a float64 input gives float64.
        pair = (locked, cast(FloatArray, np.linalg.inv(locked)))
        if self._constant_inertia:
            self._locked_cache = pair
        return pair

    def _backward(
        self, ad_kp: FloatArray, from_base: FloatArray, bias_wrench: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """Backward pass: W_k = G_k dV_k - ad^T G V - W_ext + children; tau_k = S_k^T W_k.

        With ``bias_wrench`` = ad^T G V + W_ext - G a_k, the body's own part is
        ``G_k Ad_{T^k_b} dV - bias_wrench``.
        """
        wrench = (self.inertias @ from_base[:, :, None])[:, :, 0] - bias_wrench
        torques = np.zeros(self.body_count)
        for level in reversed(self.levels):
            c = level.children
            torques[c] = np.einsum("ki,ki->k", level.screw_child, wrench[c])
            np.add.at(wrench, level.parents, (wrench[c][:, None, :] @ ad_kp[c])[:, 0, :])
        return torques, wrench[0]

    def locked_inertia(
        self, rotor_angles: FloatArray | None = None, tilt_angles: FloatArray | None = None
    ) -> FloatArray:
        """G^b_T at the given joint angles (rad)."""
        q = self.joint_vectors(rotor_angles, tilt_angles)
        zero = np.zeros(self.body_count)
        return self._locked_inertia(self.kinematics(np.zeros(6), q, zero, zero)[0])

    def gravity_twist(self, rotation: FloatArray) -> FloatArray:
        """``Ad_{T^b_0} A_grv = (0, R^T a^0)``: gravity as a body-frame acceleration twist."""
        return np.concatenate([np.zeros(3), rotation.T @ self.gravity_world])


def _balanced(inertia: FloatArray, screw: FloatArray) -> bool:
    """dG/dtheta = -(ad_S^T G + G ad_S) vanishes: the rotor inertia is invariant in spin."""
    ad = SE3.ad(screw)
    derivative = ad.T @ inertia + inertia @ ad
    return bool(np.abs(derivative).max() <= 1e-12 * np.abs(inertia).max())


def _topological(vehicle: Vehicle) -> list[Link]:
    """Links ordered parents first (the file may list them in any order)."""
    ordered: list[Link] = []
    placed = {BODY}
    remaining = list(vehicle.links)
    while remaining:
        ready = [k for k in remaining if k.parent in placed]
        ordered += ready
        placed |= {k.name for k in ready}
        remaining = [k for k in remaining if k.name not in placed]
    return ordered


def _check(value: FloatArray, shape: tuple[int, ...], name: str, finite: bool = True) -> None:
    array = np.asarray(value)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if finite and not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite")
