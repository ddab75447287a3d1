"""The experiment scripts: the zero-gravity PD manoeuvre's physics and both CLIs' outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from variational_sim.experiments import drop_test, hop, passive_swing, pd_manoeuvre
from variational_sim.experiments.common import fly_hopper
from variational_sim.minimal.planar_loop import PlanarLoopModel
from variational_sim.multibody.hopper import with_welded_base

SWING_S = 1.0  # covers the hip's pass beyond its 30 rad/s no-load speed at about 0.81 s


def test_pd_manoeuvre_reaches_the_targets_and_conserves_momentum() -> None:
    result = pd_manoeuvre.simulate()
    assert result.final_angles["hip0"] == pytest.approx(40.0, abs=0.05)
    assert result.final_angles["hip2"] == pytest.approx(140.0, abs=0.05)
    # the base counter-rotates (zero total angular momentum) and ends turned
    assert abs(result.pitch[-1]) > 1.0
    assert result.momentum.max() < 1e-11
    # the torque peak of the repo's plot (about 0.87 N m) and settling by about 0.6 s
    assert np.abs(result.torques).max() == pytest.approx(0.87, abs=0.05)
    assert np.abs(result.torques[result.times[1:] > 0.7]).max() < 0.05


def test_hop_flies_ballistically_within_the_motor_envelope() -> None:
    result = hop.simulate(step=0.001, duration=0.8)
    weight = 7.7248 * 9.807
    push = (result.times > 0.005) & (result.times < result.liftoff - 0.01)
    # the push carries the robot at well above its weight, without chatter
    assert result.normal_force[push].min() > 2.0 * weight
    assert np.abs(np.diff(result.torques[push], axis=0)).max() < 1.0
    assert np.abs(result.torques).max() <= 50.0 + 1e-9
    assert result.flight_time > 0.4
    assert result.apex_height - result.start_height > 0.4
    # the centre of mass is ballistic in flight: rise = v_z^2 / (2 g) at lift-off
    assert result.com_rise == pytest.approx(result.ballistic_rise, rel=1e-3)
    # the motors brake the landing on the extended leg
    assert result.base_height[result.times > result.touchdown].min() > 0.15


@pytest.fixture(scope="module")
def welded_hopper():
    return with_welded_base(fly_hopper())


def test_passive_swing_energy_error_is_bounded_and_second_order(welded_hopper) -> None:
    """Max |E - E0| over 1 s, measured: 3.20e-2 J (h = 10 ms), 7.38e-3 J (5 ms), 1.83e-3 J
    (2.5 ms); ratios 4.3 and 4.0. The old clamped "passive" motor (a commanded zero torque)
    brakes one step at 0.81 s and loses 0.237 J at h = 2.5 ms, 130 times the band."""
    errors = passive_swing.energy_errors(welded_hopper, SWING_S)
    assert errors[0.01] < 0.04
    assert errors[0.005] < 0.01
    assert errors[0.0025] < 0.0025
    for coarse, fine in ((0.01, 0.005), (0.005, 0.0025)):
        assert 3.0 < errors[coarse] / errors[fine] < 5.5
    braked = passive_swing.energy_errors(welded_hopper, SWING_S, (0.0025,), np.zeros(2))
    assert braked[0.0025] == pytest.approx(0.237, abs=0.01)


def test_passive_swing_minimal_and_maximal_models_agree(welded_hopper) -> None:
    """RK4 + Baumgarte (h = 2 ms; within 1.1e-3 deg of h = 1 ms) against the variational
    model at h = 2.5 ms, both unbraked, every 10 ms over 1 s (through the flat
    parallelogram at about 0.46 s): measured 0.38 deg. With the old clamped motor the
    models part after the braking step at 0.81 s: 61 deg by 1 s."""
    times, angles, _, loop = passive_swing.run_minimal(PlanarLoopModel(welded_hopper), 0.002,
                                                       SWING_S)
    assert loop.max() < 1e-8
    differences = {}
    for name, torques in (("passive", None), ("braked", np.zeros(2))):
        t_max, a_max, _ = passive_swing.run_maximal(welded_hopper, 0.0025, SWING_S, torques)
        difference = passive_swing.angle_difference(t_max[::4], a_max[::4], times, angles)
        assert not np.any(np.isnan(difference))
        differences[name] = np.degrees(difference.max())
    assert differences["passive"] < 0.5
    assert differences["braked"] > 30.0


def test_experiment_scripts_write_their_plots(tmp_path: Path, capsys) -> None:
    pd_manoeuvre.main(["--output-dir", str(tmp_path), "--duration", "0.2"])
    passive_swing.main(["--output-dir", str(tmp_path), "--duration", "0.3"])
    drop_test.main(["--output-dir", str(tmp_path), "--step", "0.002", "--duration", "0.3"])
    hop.main(["--output-dir", str(tmp_path), "--step", "0.002", "--duration", "0.8"])
    output = capsys.readouterr().out
    assert "observed orders" in output
    assert "total weight" in output
    assert "flight time" in output
    for name in ("pd_manoeuvre.png", "passive_swing_energy.png", "passive_swing_agreement.png",
                 "drop_test.png", "hop.png"):
        assert (tmp_path / name).stat().st_size > 10_000
