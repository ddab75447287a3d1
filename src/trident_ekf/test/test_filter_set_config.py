"""``ErrorStateFilter.set_config``: the estimator node's dynamic parameters reach the filter
as a new ``FilterConfig``; what it derives from it matches a filter built with it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF


@pytest.mark.parametrize("kind", [TridentEKF, BaselineESKF])
def test_a_new_configuration_matches_a_filter_built_with_it(kind: type) -> None:
    old = FilterConfig(gnss_bias_sigma_horizontal=0.1, gnss_bias_sigma_vertical=0.2)
    new = replace(old, gyro_noise=3e-3, accel_noise=5e-2, gyro_bias_walk=2e-5,
                  accel_bias_walk=3e-4, lever_arm=(0.1, -0.2, 0.3), gate_probability=0.99,
                  covariance_decimation=2, history_length=0.5)
    running, fresh = kind(old), kind(new)
    running.set_config(new)
    assert running.config == new
    assert running._lever == fresh._lever
    assert running._gate == fresh._gate
    assert np.array_equal(running._q_error, fresh._q_error)


def test_the_state_model_cannot_change() -> None:
    config = FilterConfig()
    running = TridentEKF(config)
    with pytest.raises(ValueError, match="gnss_bias_sigma_horizontal"):
        running.set_config(replace(config, gnss_bias_sigma_horizontal=0.1,
                                   gnss_bias_sigma_vertical=0.1))
    assert running.config == config
