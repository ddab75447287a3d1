"""``ErrorStateFilter.set_config``: the estimator node's dynamic parameters reach the filter
as a new ``FilterConfig``; what it derives from it matches a filter built with it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core.earth import geodetic_to_ecef
from trident_ekf.core.measurements.base import Measurement


@pytest.mark.parametrize("kind", [TridentEKF, BaselineESKF])
def test_a_new_configuration_matches_a_filter_built_with_it(kind: type) -> None:
    old = FilterConfig(gnss_bias_sigma_horizontal=0.1, gnss_bias_sigma_vertical=0.2)
    new = replace(old, gyro_noise=3e-3, accel_noise=5e-2, gyro_bias_walk=2e-5,
                  accel_bias_walk=3e-4, lever_arm=(0.1, -0.2, 0.3), gate_probability=0.99,
                  covariance_decimation=2, history_length=0.5)
    running, fresh = kind(old), kind(new)
    stale = {dof: running._threshold(dof) for dof in (1, 3, 6)}  # cached at the old gate
    running.set_config(new)
    assert running.config == new
    for dof, threshold in stale.items():
        assert running._threshold(dof) == fresh._threshold(dof) < threshold
    assert np.array_equal(running._q_error, fresh._q_error)
    # The GNSS models (lever arm) read the new configuration: same residual and H.
    q = quaternion.normalize(np.array([0.1, -0.3, 0.5, 0.8]))
    p = geodetic_to_ecef(-34.6, -58.4, 40.0)
    for filter_ in (running, fresh):
        filter_.initialize(0.0, q, [3.0, -2.0, 1.0], p, np.full(15, 0.1))
        filter_.last_omega = (0.2, -0.1, 0.4)
    for name in ("gnss_position", "gnss_velocity"):
        m = Measurement(name, 0.0, np.zeros(3), np.eye(3))
        a = running.sources[name].linearize(running, m)
        b = fresh.sources[name].linearize(fresh, m)
        assert np.array_equal(a.residual, b.residual)
        assert np.array_equal(a.H, b.H)
        assert np.array_equal(a.R, b.R)
    lever = np.array(new.lever_arm)
    C = quaternion.to_matrix(q)
    m = Measurement("gnss_position", 0.0, np.zeros(3), np.eye(3))
    assert np.allclose(running.gnss.linearize(running, m).residual, p + C @ lever)


def test_the_state_model_cannot_change() -> None:
    config = FilterConfig()
    running = TridentEKF(config)
    with pytest.raises(ValueError, match="gnss_bias_sigma_horizontal"):
        running.set_config(replace(config, gnss_bias_sigma_horizontal=0.1,
                                   gnss_bias_sigma_vertical=0.1))
    assert running.config == config
