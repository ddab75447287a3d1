"""The tree recursion against the paper's closed forms and mav-screw-theory.md §6 (tests)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.aero import WingModel
from mav_dynamics.allocation import ControlAllocator, allocation_matrix
from mav_dynamics.closed_form import (
    QuadrotorParameters,
    point_offset_inertia,
    quadrotor_acceleration,
    quadrotor_allocation_matrix,
    quadrotor_locked_diagonal,
    quadrotor_motor_torques,
    winged_quadrotor_acceleration,
    winged_quadrotor_allocation_matrix,
)
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle, parse_vehicle
from mav_geometry import quaternion
from mav_geometry.groups import SE3, SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
PARAMS = QuadrotorParameters()
SIGNS = np.array([-1.0, 1.0, -1.0, 1.0])


def _quad_model(params: QuadrotorParameters = PARAMS) -> TreeModel:
    return TreeModel(parse_vehicle(params.vehicle_data()))


def _yaml(name: str) -> dict:
    return yaml.safe_load((VEHICLES / f"{name}.yaml").read_text())


def _no_drag(data: dict) -> dict:
    data = copy.deepcopy(data)
    data["body"].pop("drag", None)
    return data


# ---------------------------------------------------------------- standard quadrotor (16)

@pytest.mark.parametrize("seed", range(6))
def test_tree_reproduces_quadrotor_closed_form(seed: int) -> None:
    """(69)-(74) with (74) corrected, random state; body I_x != I_y allowed."""
    rng = np.random.default_rng(seed)
    params = QuadrotorParameters(body_inertia=(0.01, 0.013, 0.02))
    model = _quad_model(params)
    rotation = SO3.exp(rng.normal(size=3))
    twist = rng.normal(size=6)
    speeds, accels = rng.uniform(300, 700, 4), rng.normal(size=4) * 100
    result = model.evaluate(rotation, twist, speeds, accels, rotor_angles=rng.normal(size=4))
    expected = quadrotor_acceleration(params, rotation, twist, speeds, accels)
    assert np.allclose(result.base_acceleration, expected, rtol=1e-10, atol=1e-10)
    assert np.allclose(np.diag(result.locked_inertia), quadrotor_locked_diagonal(params))
    assert np.allclose(result.rotor_torques,
                       quadrotor_motor_torques(params, speeds, accels, expected), rtol=1e-10)
    assert np.allclose(allocation_matrix(model), quadrotor_allocation_matrix(params))
    assert np.abs(result.base_residual).max() < 1e-12


def test_printed_equation_74_is_wrong_and_the_correction_is_right() -> None:
    """Erratum: the sixth entry of ad^T G_T V is m_T (v_x w_y - v_y w_x), not (.. - v_y w_z)."""
    twist = np.array([0.3, -0.2, 0.5, 1.0, 0.5, -0.2])
    locked = np.diag(quadrotor_locked_diagonal(PARAMS))
    velocity_product = SE3.ad(twist).T @ locked @ twist
    wx, wy, wz, vx, vy, _ = twist
    m_t = PARAMS.total_mass
    assert velocity_product[5] == pytest.approx(m_t * (vx * wy - vy * wx), rel=1e-12)
    assert abs(velocity_product[5] - m_t * (vx * wy - vy * wz)) > 0.1


# ---------------------------------------------------------------- regression cases (§5.6)

def test_case_a_hover_is_an_equilibrium_with_drag_torques() -> None:
    model = _quad_model()
    speeds = np.full(4, PARAMS.hover_speed)
    result = model.evaluate(np.eye(3), np.zeros(6), speeds)
    assert np.abs(result.base_acceleration).max() < 1e-12
    assert np.allclose(result.rotor_torques, PARAMS.drag_coefficient * PARAMS.hover_speed**2,
                       rtol=1e-12)


def test_case_b_gyroscopic_moment_sign() -> None:
    """(72)/(20): with w = (w_x, 0, 0) the pitch moment is -w_x I_rz s = (h x w)_y."""
    model = _quad_model()
    speeds = np.array([600.0, 500.0, 600.0, 500.0])
    twist = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    result = model.evaluate(np.eye(3), twist, speeds)
    j = quadrotor_locked_diagonal(PARAMS)
    irz = PARAMS.rotor_inertia[2]
    spin_sum = speeds[0] - speeds[1] + speeds[2] - speeds[3]
    angular_momentum = irz * (speeds * SIGNS)[:, None] * np.array([0.0, 0.0, 1.0])
    physical = np.cross(angular_momentum.sum(axis=0), twist[:3])   # tau = h x w
    assert result.base_acceleration[1] * j[1] == pytest.approx(-irz * spin_sum, rel=1e-10)
    assert result.base_acceleration[1] * j[1] == pytest.approx(physical[1], rel=1e-10)
    yaw = PARAMS.drag_coefficient * (-(SIGNS @ speeds**2)) / j[2]
    assert result.base_acceleration[2] == pytest.approx(yaw, rel=1e-10)
    lift = (PARAMS.thrust_coefficient * np.sum(speeds**2) - PARAMS.total_mass * PARAMS.gravity)
    assert result.base_acceleration[5] == pytest.approx(lift / PARAMS.total_mass, rel=1e-10)
    assert result.base_acceleration[0] == pytest.approx(0.0, abs=1e-12)


def test_case_c_spin_up_gives_pure_yaw() -> None:
    """(71)/(21): dw_z = I_rz (a1 - a2 + a3 - a4) / (I_Tz + 4 m_r d^2) from rest at hover."""
    model = _quad_model()
    accels = np.array([100.0, -100.0, 100.0, -100.0])
    result = model.evaluate(np.eye(3), np.zeros(6), np.full(4, PARAMS.hover_speed), accels)
    irz = PARAMS.rotor_inertia[2]
    i_tz = PARAMS.body_inertia[2] + 4 * irz
    expected = irz * 400.0 / (i_tz + 4 * PARAMS.rotor_mass * PARAMS.arm**2)
    assert result.base_acceleration[2] == pytest.approx(expected, rel=1e-12)
    assert np.abs(np.delete(result.base_acceleration, 2)).max() < 1e-12


def test_case_d_generic_state_linear_part_is_newton() -> None:
    model = _quad_model()
    twist = np.array([0.3, -0.2, 0.5, 1.0, 0.5, -0.2])
    speeds = np.array([520.0, 510.0, 500.0, 530.0])
    accels = np.array([10.0, -20.0, 5.0, 0.0])
    result = model.evaluate(np.eye(3), twist, speeds, accels)
    force = np.array([0.0, 0.0, PARAMS.thrust_coefficient * np.sum(speeds**2)
                      - PARAMS.total_mass * PARAMS.gravity])
    expected = np.cross(twist[3:], twist[:3]) + force / PARAMS.total_mass
    assert np.allclose(result.base_acceleration[3:], expected, rtol=1e-12)
    closed = quadrotor_acceleration(PARAMS, np.eye(3), twist, speeds, accels)
    assert np.allclose(result.base_acceleration, closed, rtol=1e-10)


def test_case_e_rolled_hover_accelerates_sideways_only() -> None:
    model = _quad_model()
    rotation = SO3.exp(np.array([0.1, 0.0, 0.0]))
    result = model.evaluate(rotation, np.zeros(6), np.full(4, PARAMS.hover_speed))
    expected = np.array([0.0, 0.0, PARAMS.gravity]) + rotation.T @ [0.0, 0.0, -PARAMS.gravity]
    assert np.abs(result.base_acceleration[:3]).max() < 1e-12
    assert np.allclose(result.base_acceleration[3:], expected, atol=1e-12)


# ---------------------------------------------------------------- rotors off their axis (22)

def test_off_axis_rotor_moment_is_drag_plus_offset_cross_thrust() -> None:
    data = PARAMS.vehicle_data()
    offset = np.array([0.01, -0.02, 0.0])
    data["rotors"][1]["axis_offset"] = offset.tolist()
    model = TreeModel(parse_vehicle(data))
    column = allocation_matrix(model)[:, 1]
    n = np.array([0.0, 0.0, 1.0])        # rotor 2 spins CCW about +z and thrusts along +z
    f = PARAMS.thrust_coefficient * n
    position = PARAMS.arm * PARAMS.rotor_positions[1] + offset
    assert np.allclose(column[3:], f)
    assert np.allclose(column[:3], -PARAMS.drag_coefficient * n + np.cross(position, f))


def test_unbalanced_rotor_shakes_the_body_once_per_revolution() -> None:
    """A rotor COM off its spin axis: the base acceleration depends on the rotor angle."""
    data = PARAMS.vehicle_data()
    data["rotors"][0]["axis_offset"] = [0.002, 0.0, 0.0]
    model = TreeModel(parse_vehicle(data))
    speeds = np.full(4, PARAMS.hover_speed)
    accel = [model.evaluate(np.eye(3), np.zeros(6), speeds, rotor_angles=np.array([a, 0, 0, 0]))
             .base_acceleration for a in np.linspace(0, 2 * np.pi, 9)[:-1]]
    lateral = np.array([a[3:5] for a in accel])
    amplitude = PARAMS.rotor_mass * 0.002 * PARAMS.hover_speed**2 / PARAMS.total_mass
    assert np.ptp(lateral[:, 0]) == pytest.approx(2 * amplitude, rel=0.05)
    assert np.abs(lateral.mean(axis=0)).max() < 1e-3 * amplitude  # no net shove, only shaking


# ---------------------------------------------------------------- gravity and frames (8, 9, 19)

def _move_body_frame(data: dict, rotation: np.ndarray, origin: np.ndarray) -> dict:
    """The same vehicle described in a body frame {a} with T^b_a = (rotation, origin)."""
    data = copy.deepcopy(data)

    def point(p: list) -> list:
        return (rotation.T @ (np.asarray(p) - origin)).tolist()

    def axis(v: list) -> list:
        return (rotation.T @ np.asarray(v)).tolist()

    body = data["body"]
    body["com"] = point(body["com"])
    inertia = np.asarray(body["inertia"], dtype=float)
    inertia = np.diag(inertia) if inertia.ndim == 1 else inertia
    body["inertia"] = (rotation.T @ inertia @ rotation).tolist()
    for link in data.get("links", []):
        if link["parent"] != "body":
            continue
        link["position"] = point(link["position"])
        orientation = rotation.T @ quaternion.to_matrix(link.get("orientation", [0, 0, 0, 1]))
        link["orientation"] = quaternion.from_matrix(orientation).tolist()
        if "joint" in link:
            link["joint"]["axis"] = axis(link["joint"]["axis"])
            link["joint"]["point"] = point(link["joint"].get("point", link["position"]))
    for rotor in data["rotors"]:
        if rotor["parent"] != "body":
            continue
        rotor["position"] = point(rotor["position"])
        rotor["thrust_axis"] = axis(rotor["thrust_axis"])
        rotor["axis_offset"] = axis(rotor.get("axis_offset", [0.0, 0.0, 0.0]))
    return data


@pytest.mark.parametrize("name", ["quadrotor_x", "tilting_quadrotor", "quadrotor_two_wings"])
def test_dynamics_are_invariant_under_change_of_body_frame(name: str) -> None:
    """(19): same motion in {b} and in an offset, rotated {a}: dV^a = Ad_{T^a_b} dV^b."""
    rng = np.random.default_rng(7)
    data = _no_drag(_yaml(name))
    for link in data.get("links", []):
        if "joint" in link:
            link["joint"]["point"] = link["position"]
    moved_rotation, moved_origin = SO3.exp(rng.normal(size=3)), rng.normal(size=3) * 0.1
    original = TreeModel(parse_vehicle(data))
    moved = TreeModel(parse_vehicle(_move_body_frame(data, moved_rotation, moved_origin)))
    adjoint = SE3.adjoint(SE3.inverse(SE3.from_components(moved_rotation, moved_origin)))
    rotation = SO3.exp(rng.normal(size=3))
    twist = rng.normal(size=6)
    kwargs = {"rotor_speeds": rng.uniform(400, 600, original.rotor_count),
              "rotor_accelerations": rng.normal(size=original.rotor_count) * 50,
              "wind": np.array([3.0, -1.0, 0.5])}
    if original.tilt_count:
        kwargs |= {"tilt_angles": rng.uniform(-0.5, 0.5, original.tilt_count),
                   "tilt_rates": rng.normal(size=original.tilt_count),
                   "tilt_accelerations": rng.normal(size=original.tilt_count) * 10}
    in_b = original.evaluate(rotation, twist, **kwargs)
    in_a = moved.evaluate(rotation @ moved_rotation, adjoint @ twist, **kwargs)
    assert np.allclose(in_a.base_acceleration, adjoint @ in_b.base_acceleration,
                       rtol=1e-9, atol=1e-9)
    assert np.allclose(in_a.rotor_torques, in_b.rotor_torques, rtol=1e-9, atol=1e-12)
    assert np.allclose(in_a.tilt_torques, in_b.tilt_torques, rtol=1e-9, atol=1e-12)


def test_gravity_in_an_offset_frame_is_free_fall_with_moment_c_cross_mg() -> None:
    """(35)/(9): the locked gravity wrench has moment c x m g; stopped rotors fall freely."""
    rng = np.random.default_rng(3)
    moved_rotation, moved_origin = SO3.exp(rng.normal(size=3)), np.array([0.05, -0.03, 0.1])
    data = _move_body_frame(PARAMS.vehicle_data(), moved_rotation, moved_origin)
    model = TreeModel(parse_vehicle(data))
    rotation = SO3.exp(rng.normal(size=3))
    result = model.evaluate(rotation, np.zeros(6), np.zeros(4))
    gravity_body = rotation.T @ np.array([0.0, 0.0, -PARAMS.gravity])
    assert np.allclose(result.base_acceleration, np.concatenate([np.zeros(3), gravity_body]),
                       atol=1e-12)
    locked = model.locked_inertia()
    mass = locked[3, 3]
    com = np.array([locked[2, 4], locked[0, 5], locked[1, 3]]) / mass   # G = [[., m[c]], ...]
    wrench = locked @ model.gravity_twist(rotation)
    assert np.allclose(wrench[:3], np.cross(com, mass * gravity_body), atol=1e-12)
    assert np.allclose(com, -moved_rotation.T @ moved_origin, atol=1e-12)


@pytest.mark.parametrize("path", sorted(VEHICLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_vehicle_hovers_at_the_allocated_speeds(path: Path) -> None:
    """(19): K u = -G_T Ad A_grv solved by the allocator gives dV = 0 exactly."""
    model = TreeModel(load_vehicle(path))
    allocation = ControlAllocator(model).allocate(-model.locked_inertia()
                                                  @ model.gravity_twist(np.eye(3)))
    assert not allocation.status.saturated
    result = model.evaluate(
        np.eye(3), np.zeros(6), allocation.rotor_speeds,
        tilt_angles=allocation.tilt_angles if model.tilt_count else None)
    assert np.abs(result.base_acceleration).max() < 1e-9
    assert np.all(result.rotor_torques > 0.0)


def test_asymmetric_off_com_vehicle_hovers() -> None:
    data = PARAMS.vehicle_data()
    data["body"]["com"] = [0.04, -0.02, -0.05]
    data["body"]["inertia"] = [[0.011, 0.001, 0.0], [0.001, 0.012, -0.0005], [0.0, -0.0005, 0.02]]
    data["rotors"][0]["position"] = [-0.3, 0.05, 0.02]
    data["rotors"][2]["position"] = [0.22, -0.04, -0.03]
    model = TreeModel(parse_vehicle(data))
    rotation = SO3.exp(np.array([0.0, 0.0, 0.7]))
    allocator = ControlAllocator(model)
    hover = allocator.allocate(-model.locked_inertia() @ model.gravity_twist(rotation))
    assert not hover.status.saturated
    result = model.evaluate(rotation, np.zeros(6), hover.rotor_speeds)
    assert np.abs(result.base_acceleration).max() < 1e-9
    assert np.ptp(hover.rotor_speeds) > 10.0   # genuinely unequal speeds


# ---------------------------------------------------------------- tilting quadrotor (18)

def test_tilting_quadrotor_allocation_closed_forms() -> None:
    model = TreeModel(load_vehicle(VEHICLES / "tilting_quadrotor.yaml"))
    assert np.allclose(allocation_matrix(model), quadrotor_allocation_matrix(PARAMS), atol=1e-15)
    speed, tilt = 500.0, 0.3
    wrench = allocation_matrix(model, np.full(4, tilt)) @ np.full(4, speed**2)
    kl, d = PARAMS.thrust_coefficient, PARAMS.arm
    expected = [0.0, 0.0, -4 * d * kl * speed**2 * np.sin(tilt), 0.0, 0.0,
                4 * kl * speed**2 * np.cos(tilt)]
    assert np.allclose(wrench, expected, atol=1e-12)


def _paper_78(model: TreeModel, rotation, twist, speeds, accels, tilt, rate, tilt_accel,
              with_missing_term: bool) -> np.ndarray:
    """(78) built independently with SE3 (plus the erratum term of §2.9 when asked)."""
    vehicle = model.vehicle
    ad_v = SE3.ad(twist)
    locked = vehicle.body.spatial().copy()
    right = np.zeros(6)
    for a, (link, rotor) in enumerate(zip(vehicle.links, vehicle.rotors, strict=True)):
        joint = link.joint
        s_alpha = np.concatenate([joint.axis, np.cross(joint.point, joint.axis)])
        t_alpha = SE3.exp(s_alpha * tilt[a]) @ SE3.from_components(np.eye(3), link.position)
        t_rotor = t_alpha @ SE3.from_components(np.eye(3), rotor.position)
        ad_alpha, ad_rotor = SE3.adjoint(SE3.inverse(t_alpha)), SE3.adjoint(SE3.inverse(t_rotor))
        g_alpha = ad_alpha.T @ link.inertia.spatial() @ ad_alpha
        g_rotor = ad_rotor.T @ rotor.inertia.spatial() @ ad_rotor
        s_rotor = SE3.adjoint(t_rotor) @ np.array([0, 0, rotor.spin, 0, 0, 0.0])
        k = np.zeros((6, 6))
        k[:3, :3] = -rotor.drag_coefficient * np.eye(3)
        k[:3, 3:] = k[3:, :3] = rotor.thrust_coefficient * rotor.spin * np.eye(3)
        g_c = g_alpha + g_rotor
        locked += g_c
        right += k @ s_rotor * speeds[a] ** 2
        right += -g_c @ s_alpha * tilt_accel[a] - g_rotor @ s_rotor * accels[a]
        right += ad_v.T @ (g_c @ s_alpha * rate[a] + g_rotor @ s_rotor * speeds[a])
        right += SE3.ad(s_alpha).T @ g_rotor @ s_rotor * speeds[a] * rate[a]
        if with_missing_term:
            ad_s = SE3.ad(s_alpha)
            d_g = -(ad_s.T @ g_c + g_c @ ad_s)
            right += -d_g @ (twist + s_alpha * rate[a]) * rate[a]
    gravity = np.concatenate([np.zeros(3), rotation.T @ [0.0, 0.0, -vehicle.gravity]])
    right += ad_v.T @ locked @ twist + locked @ gravity
    return np.linalg.solve(locked, right)


def test_paper_78_needs_the_missing_tilt_term() -> None:
    """(78) + the §2.9 term equals the tree; (78) alone fails while tilting, holds when not."""
    rng = np.random.default_rng(11)
    model = TreeModel(parse_vehicle(_no_drag(_yaml("tilting_quadrotor"))))
    rotation, twist = SO3.exp(rng.normal(size=3)), rng.normal(size=6)
    speeds, accels = rng.uniform(400, 600, 4), rng.normal(size=4) * 50
    tilt, rate, tilt_accel = rng.uniform(-0.5, 0.5, 4), rng.uniform(2, 4, 4), rng.normal(size=4)
    tree = model.evaluate(rotation, twist, speeds, accels, tilt_angles=tilt, tilt_rates=rate,
                          tilt_accelerations=tilt_accel).base_acceleration
    args = (model, rotation, twist, speeds, accels, tilt)
    full = _paper_78(*args, rate, tilt_accel, with_missing_term=True)
    assert np.allclose(full, tree, rtol=1e-10, atol=1e-10)
    printed = _paper_78(*args, rate, tilt_accel, with_missing_term=False)
    assert np.abs(printed - tree).max() > 1e-3
    still = model.evaluate(rotation, twist, speeds, accels, tilt_angles=tilt,
                           tilt_rates=np.zeros(4), tilt_accelerations=tilt_accel)
    printed_still = _paper_78(*args, np.zeros(4), tilt_accel, with_missing_term=False)
    assert np.allclose(printed_still, still.base_acceleration, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- winged quadrotor (17)

def test_winged_quadrotor_matches_80_and_79() -> None:
    rng = np.random.default_rng(5)
    data = _no_drag(_yaml("quadrotor_two_wings"))
    vehicle = parse_vehicle(data)
    model = TreeModel(vehicle)
    rotor = vehicle.rotors[0]
    d, h = 0.25, 0.25
    allocation = winged_quadrotor_allocation_matrix(d, h, rotor.thrust_coefficient,
                                                    rotor.drag_coefficient)
    assert np.allclose(allocation_matrix(model), allocation, atol=1e-15)
    locked = vehicle.body.spatial()
    for link in vehicle.links:
        locked = locked + point_offset_inertia(link.inertia.mass, link.inertia.inertia,
                                               link.position)
    for r in vehicle.rotors:
        parent = next(k for k in vehicle.links if k.name == r.parent)
        locked = locked + point_offset_inertia(r.inertia.mass, r.inertia.inertia,
                                               parent.position + r.position)
    rotation, twist = SO3.exp(rng.normal(size=3) * 0.3), rng.normal(size=6)
    speeds, accels = rng.uniform(400, 600, 4), rng.normal(size=4) * 50
    wind = np.array([4.0, 1.0, -0.5])
    wings = []
    for link in vehicle.links:
        p = link.position
        w, v = twist[:3], twist[3:] - rotation.T @ wind
        air = np.concatenate([w, v + np.cross(w, p)])       # Ad_{T^alpha_b} of the air twist
        wrench = WingModel(link.aero, vehicle.air_density).wrench_link_frame(air)
        wings.append(np.concatenate([wrench[:3] + np.cross(p, wrench[3:]), wrench[3:]]))
    expected = winged_quadrotor_acceleration(
        locked, allocation, rotor.inertia.inertia[2, 2], rotation, twist, speeds, accels,
        np.array(wings), vehicle.gravity)
    result = model.evaluate(rotation, twist, speeds, accels, wind=wind)
    assert np.allclose(result.locked_inertia, locked, atol=1e-14)
    assert np.allclose(result.base_acceleration, expected, rtol=1e-10, atol=1e-10)
    assert np.abs(np.array(wings)).max() > 0.01      # the wings did contribute


# ---------------------------------------------------------------- momentum and power (13, 14)

def _random_tree() -> TreeModel:
    """Body off its COM; an oblique tilting wing carrying an unbalanced tilted rotor; a body
    rotor off its axis. No gravity, negligible rotor aerodynamics: momentum is conserved."""
    rotor = {"thrust_coefficient": 1e-14, "drag_coefficient": 0.0, "mass": 0.03,
             "inertia": [2e-5, 3e-5, 4e-5], "speed_limits": [0.0, 2000.0], "time_constant": 0.02}
    data = {
        "name": "tree", "gravity": 0.0,
        "body": {"mass": 1.2, "com": [0.03, -0.02, 0.05],
                 "inertia": [[0.012, 0.001, -0.002], [0.001, 0.015, 0.0005],
                             [-0.002, 0.0005, 0.021]]},
        "links": [{"name": "wing", "parent": "body", "position": [0.2, 0.1, -0.05],
                   "orientation": quaternion.from_rotation_vector([0.2, -0.4, 0.3]).tolist(),
                   "mass": 0.15, "com": [0.02, 0.01, -0.01],
                   "inertia": [[0.002, 0.0002, 0.0], [0.0002, 0.001, 0.0001],
                               [0.0, 0.0001, 0.0025]],
                   "joint": {"axis": (np.array([0.3, 0.9, 0.2]) / np.linalg.norm(
                       [0.3, 0.9, 0.2])).tolist(), "point": [0.18, 0.12, -0.04],
                       "limits": [-3.0, 3.0], "rate_max": 10.0}}],
        "rotors": [
            {"name": "wing_rotor", "parent": "wing", "position": [0.05, 0.0, 0.03],
             "thrust_axis": (np.array([0.1, -0.2, 1.0]) / np.linalg.norm([0.1, -0.2, 1.0]))
             .tolist(), "spin": "cw", "axis_offset": [0.004, -0.003, 0.0], **rotor},
            {"name": "body_rotor", "parent": "body", "position": [-0.2, 0.05, 0.02],
             "thrust_axis": [0.0, 0.0, 1.0], "spin": "ccw", "axis_offset": [0.0, 0.005, 0.0],
             **rotor},
        ],
        "controller": {k: [1.0, 1.0, 1.0]
                       for k in ("position", "velocity", "attitude", "angular_rate")},
    }
    return TreeModel(parse_vehicle(data))


def _joints(t: float) -> tuple[np.ndarray, ...]:
    """Prescribed joint motion: wing oscillating, rotors spinning up (angles, rates, accels)."""
    tilt = np.array([0.4 * np.sin(3 * t)])
    tilt_rate = np.array([1.2 * np.cos(3 * t)])
    tilt_accel = np.array([-3.6 * np.sin(3 * t)])
    rotor_accel = np.array([300.0, -200.0])
    rotor_rate = np.array([150.0, 200.0]) + rotor_accel * t
    rotor_angle = np.array([0.3, -1.0]) + np.array([150.0, 200.0]) * t + 0.5 * rotor_accel * t**2
    return rotor_angle, rotor_rate, rotor_accel, tilt, tilt_rate, tilt_accel


def _evaluate(model: TreeModel, pose: np.ndarray, twist: np.ndarray, t: float):
    angle, rate, accel, tilt, tilt_rate, tilt_accel = _joints(t)
    return model.evaluate(pose[:3, :3], twist, rate, accel, rotor_angles=angle, tilt_angles=tilt,
                          tilt_rates=tilt_rate, tilt_accelerations=tilt_accel)


def _rk4_trajectory(model: TreeModel, dt: float, steps: int):
    """Base pose/twist under the prescribed joint motion (RK4 on the matrix ODE dT = T hat V)."""
    pose, twist = SE3.exp(np.array([0.1, -0.2, 0.3, 0.0, 0.0, 1.0])), np.array(
        [0.5, -0.3, 0.2, 0.1, 0.4, -0.2])

    def derivative(t, pose, twist):
        return pose @ SE3.hat(twist), _evaluate(model, pose, twist, t).base_acceleration

    states = [(0.0, pose, twist)]
    for k in range(steps):
        t = k * dt
        k1 = derivative(t, pose, twist)
        k2 = derivative(t + dt / 2, pose + dt / 2 * k1[0], twist + dt / 2 * k1[1])
        k3 = derivative(t + dt / 2, pose + dt / 2 * k2[0], twist + dt / 2 * k2[1])
        k4 = derivative(t + dt, pose + dt * k3[0], twist + dt * k3[1])
        pose = pose + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        twist = twist + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        states.append((t + dt, pose, twist))
    return states


def _momentum_and_energy(model: TreeModel, t: float, pose: np.ndarray, twist: np.ndarray):
    result = _evaluate(model, pose, twist, t)
    to_world = SE3.adjoint(SE3.inverse(pose))                      # Ad_{T^b_0}
    body_momenta = np.einsum("kij,kj->ki", model.inertias, result.body_twists)
    momentum = np.einsum("kji,kj->i", result.body_adjoints @ to_world, body_momenta)
    energy = 0.5 * np.einsum("ki,ki->", result.body_twists, body_momenta)
    return momentum, energy, result


def test_total_momentum_is_conserved_with_prescribed_joint_motion() -> None:
    model = _random_tree()
    states = _rk4_trajectory(model, dt=5e-4, steps=200)
    momenta = np.array([_momentum_and_energy(model, *s)[0] for s in states])
    scale = np.abs(momenta).max()
    assert scale > 0.1
    assert np.abs(momenta - momenta[0]).max() < 1e-8 * scale
    # ... while the base itself is visibly pushed around by the joints
    assert np.abs(states[-1][2] - states[0][2]).max() > 0.05


def test_body_accelerations_match_finite_differences_of_body_twists() -> None:
    """(26), test 12: dV_k = Ad_{T^k_b} dV + ad_{V_k} S_k dq + S_k ddq along a trajectory."""
    model = _random_tree()
    dt = 5e-4
    states = _rk4_trajectory(model, dt=dt, steps=40)
    twists = np.array([_evaluate(model, pose, twist, t).body_twists
                       for t, pose, twist in states])
    for k in (10, 25):
        t, pose, twist = states[k]
        result = _evaluate(model, pose, twist, t)
        rate = (twists[k - 2] - 8 * twists[k - 1] + 8 * twists[k + 1] - twists[k + 2]) / (12 * dt)
        scale = np.abs(result.body_accelerations).max()
        assert np.allclose(result.body_accelerations, rate, atol=1e-5 * scale)  # FD ~(w dt)^4


def test_power_balance_kinetic_energy_rate_equals_joint_power() -> None:
    model = _random_tree()
    dt = 5e-4
    states = _rk4_trajectory(model, dt=dt, steps=120)
    energies = np.array([_momentum_and_energy(model, *s)[1] for s in states])
    for k in (20, 60, 100):
        t, pose, twist = states[k]
        result = _momentum_and_energy(model, t, pose, twist)[2]
        _, rate, _, _, tilt_rate, _ = _joints(t)
        joint_power = result.rotor_torques @ rate + result.tilt_torques @ tilt_rate
        energy_rate = (energies[k - 2] - 8 * energies[k - 1] + 8 * energies[k + 1]
                       - energies[k + 2]) / (12 * dt)   # fourth-order central difference
        assert energy_rate == pytest.approx(joint_power, rel=2e-4)  # FD error ~(w dt)^4
        assert np.abs(result.base_residual).max() < 1e-10
    assert np.ptp(energies) > 0.01   # the joints do work on the system


def test_bad_inputs_are_rejected_by_name() -> None:
    model = _quad_model()
    with pytest.raises(ValueError, match="rotor_speeds must have shape"):
        model.evaluate(np.eye(3), np.zeros(6), np.zeros(3))
    with pytest.raises(ValueError, match="twist must be finite"):
        model.evaluate(np.eye(3), np.array([np.nan, 0, 0, 0, 0, 0]), np.zeros(4))
    with pytest.raises(ValueError, match="joint inputs"):
        model.evaluate(np.eye(3), np.zeros(6), np.zeros(4), np.full(4, np.inf))
    with pytest.raises(ValueError, match="rotor_speeds must be >= 0"):
        model.evaluate(np.eye(3), np.zeros(6), np.array([1.0, -1.0, 1.0, 1.0]))
