"""Analytic derivatives of the base acceleration (docs/theory/mav-screw-theory.md §4.2).

Model differentiated: the locked-body equation with rotor gyroscopic terms,

    G_T(phi) dV = ad^T_V G_T V + G_T g^b + K(phi) u + ad^T_V h,   u = dtheta^2,

with ``g^b = (0, R^T a^0)`` and ``h = sum_j G^b_j S^b_j dtheta_j`` the rotor
angular momenta. It equals the exact tree recursion (§2.8) whenever the rotors
are balanced and axisymmetric, the joint accelerations and tilt rates are zero,
and there is no aerodynamics other than the rotors' (body drag, wings): the
state a linearisation is taken about. Identities used (§4.2):

- ``d(ad^T_V W)/dV = ad^T_V (.) + bar_ad(W)`` with ``bar_ad(m, f) = [[m^, f^], [f^, 0]]``;
- pose, right perturbation ``T <- T exp(xi)``: ``d g^b / d xi = ad(g^b)``;
- tilt ``phi_a`` of a link jointed to the body with screw ``S_a`` (in {b}): every
  body of its subtree turns, so ``dG/dphi = -(ad_S^T G + G ad_S)`` for the subtree
  inertia, ``d(K_j S_j)/dphi = K_j ad_S S_j`` and ``d(G_j S_j)/dphi = -ad_S^T G_j S_j``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mav_dynamics.model import TreeModel, ad_batch
from mav_dynamics.screws import rotor_matrix
from mav_dynamics.vehicle import BODY, FloatArray
from mav_geometry.groups import SO3


@dataclass(frozen=True)
class Linearization:
    """Base acceleration dV (6) and its Jacobians (rows: dV components)."""

    acceleration: FloatArray
    pose: FloatArray           # 6x6, w.r.t. xi of T <- T exp(xi) (rotation first)
    twist: FloatArray          # 6x6
    rotor_speeds: FloatArray   # 6 x rotors, w.r.t. dtheta (rad/s)
    tilt_angles: FloatArray    # 6 x tilting links, w.r.t. phi (rad)


def bar_ad(wrench: FloatArray) -> FloatArray:
    """``bar_ad(W)`` with ``ad_V^T W = bar_ad(W) V`` for W = (m, f) (theory §1.4)."""
    result = np.zeros((6, 6))
    result[:3, :3] = SO3.hat(wrench[:3])
    result[:3, 3:] = result[3:, :3] = SO3.hat(wrench[3:])
    return result


class Linearizer:
    """Precomputed per-vehicle data for ``linearize``."""

    def __init__(self, model: TreeModel) -> None:
        self.model = model
        vehicle = model.vehicle
        self.rotor_matrices = np.array([
            rotor_matrix(r.thrust_coefficient, r.drag_coefficient, r.spin) for r in vehicle.rotors
        ])
        names = [BODY, *(k.name for k in vehicle.links), *(r.name for r in vehicle.rotors)]
        subtree = np.zeros((model.tilt_count, model.body_count), dtype=bool)
        for a, body in enumerate(model.tilt_bodies):
            if model.parents[body] != 0:
                raise ValueError(f"links.{names[body]}: linearisation needs tilting links "
                                 "jointed to the body")
            for k in range(model.body_count):
                walk = k
                while walk and walk != body:
                    walk = model.parents[walk]
                subtree[a, k] = walk == body
        self.subtree = subtree
        self.tilt_screws = model.screws_parent[model.tilt_bodies]
        self.rotor_screws_child = model.rotor_spin_screws

    def linearize(
        self, rotation: FloatArray, twist: FloatArray, rotor_speeds: FloatArray,
        tilt_angles: FloatArray | None = None,
    ) -> Linearization:
        """dV and its Jacobians at ``(R^0_b, V, dtheta, phi)``; tilt rates are zero."""
        model = self.model
        zero = np.zeros(model.body_count)
        q = model.joint_vectors(None, tilt_angles)
        ad_kb = model.kinematics(np.zeros(6), q, zero, zero)[0]
        inertia_b = np.swapaxes(ad_kb, 1, 2) @ model.inertias @ ad_kb    # G^b_k
        locked = inertia_b.sum(axis=0)
        locked_inv = np.linalg.inv(locked)
        rotors = ad_kb[model.rotor_bodies]
        screws_b = np.linalg.solve(rotors, self.rotor_screws_child[:, :, None])[:, :, 0]  # S^b_j
        columns = np.einsum("kij,kj->ki", self.rotor_matrices, screws_b)                 # K_j S_j
        spin_momenta = np.einsum("kij,kj->ki", inertia_b[model.rotor_bodies], screws_b)  # G_j S_j
        momentum = spin_momenta.T @ rotor_speeds                                          # h
        gravity = np.concatenate([np.zeros(3), rotation.T @ model.gravity_world])
        ad_v = ad_batch(twist[None])[0]
        body_momentum = locked @ twist
        right = (ad_v.T @ (body_momentum + momentum) + locked @ gravity
                 + columns.T @ rotor_speeds**2)
        acceleration = locked_inv @ right

        d_twist = locked_inv @ (ad_v.T @ locked + bar_ad(body_momentum + momentum))
        d_pose = ad_batch(gravity[None])[0]
        d_speeds = locked_inv @ (2.0 * columns.T * rotor_speeds + ad_v.T @ spin_momenta.T)
        d_tilt = np.zeros((6, model.tilt_count))
        for a in range(model.tilt_count):
            ad_s = ad_batch(self.tilt_screws[a][None])[0]
            sub = self.subtree[a]
            d_locked = -(ad_s.T @ inertia_b[sub].sum(axis=0) + inertia_b[sub].sum(axis=0) @ ad_s)
            on_link = sub[model.rotor_bodies]
            d_columns = np.einsum("kij,jl,kl->i", self.rotor_matrices[on_link], ad_s,
                                  screws_b[on_link] * (rotor_speeds[on_link] ** 2)[:, None])
            d_momentum = -ad_s.T @ (spin_momenta[on_link].T @ rotor_speeds[on_link])
            d_right = (ad_v.T @ (d_locked @ twist + d_momentum) + d_locked @ gravity + d_columns)
            d_tilt[:, a] = locked_inv @ (d_right - d_locked @ acceleration)
        return Linearization(acceleration, d_pose, d_twist, d_speeds, d_tilt)
