"""The zero-gravity reorientation demonstration: net rotation at zero momentum."""

from __future__ import annotations

import numpy as np
import pytest

from variational_sim.demos.reorientation import main, simulate


def test_closed_wing_cycle_pitches_the_body_at_zero_momentum():
    forward = simulate(cycles=2, step_size=0.02)
    backward = simulate(cycles=2, step_size=0.02, reverse=True)
    assert np.abs(forward.momenta).max() < 1e-13
    # wings back at their start after each cycle, yet the body has turned, about pitch only
    np.testing.assert_allclose(forward.wing_angles[-1], forward.wing_angles[0], atol=1e-12)
    pitch = forward.rotation_vectors[-1]
    assert abs(pitch[1]) > np.radians(30)
    np.testing.assert_allclose(pitch[[0, 2]], 0.0, atol=1e-12)
    # both cycles turn the body by the same angle, and the reversed loop turns it back
    per_cycle = forward.rotation_vectors[len(forward.times) // 2, 1]
    assert pitch[1] == pytest.approx(2 * per_cycle, rel=1e-9)
    assert backward.rotation_vectors[-1, 1] == pytest.approx(-pitch[1], rel=1e-9)
    # the centre of mass does not move with zero linear momentum (reference point bobs only)
    assert np.abs(forward.positions[-1] - forward.positions[0]).max() < 0.05


def test_command_line_writes_the_plot(tmp_path, capsys):
    output = tmp_path / "reorientation.png"
    assert main(["--cycles", "1", "--step-size", "0.05", "--output", str(output)]) == 0
    assert output.stat().st_size > 10_000
    assert "deg per cycle" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--cycles", "0"])
