"""The experiment scripts: the zero-gravity PD manoeuvre's physics and both CLIs' outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from variational_sim.experiments import drop_test, hop, passive_swing, pd_manoeuvre


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
