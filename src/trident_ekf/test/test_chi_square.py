"""The chi-square quantile without scipy.stats is scipy.stats' own, value for value."""

import math

import numpy as np
from scipy.stats import chi2

from trident_ekf.core import chi_square

# The gate probabilities of the configs and tests (0.9999, 0.95, 0.025/0.975 bounds), the
# tails, and an even grid; every degree of freedom a measurement or a bound uses.
PROBABILITIES = [1e-12, 0.025, 0.5, 0.95, 0.975, 0.99, 0.999, 0.9999, 0.999999, 1.0 - 1e-12,
                 *np.linspace(0.001, 0.999, 100)]
DEGREES_OF_FREEDOM = range(1, 16)


def test_quantiles_equal_scipy_stats_exactly():
    mismatches = [(p, dof) for p in PROBABILITIES for dof in DEGREES_OF_FREEDOM
                  if chi_square.quantile(float(p), dof) != float(chi2.ppf(p, dof))]
    assert mismatches == []


def test_the_ends_of_the_probability_range():
    assert chi_square.quantile(0.0, 3) == 0.0
    assert chi_square.quantile(1.0, 3) == math.inf


def test_known_values():
    # Tabulated 95% points: 3.841 (1 dof), 7.815 (3 dof); the median of 2 dof is 2 ln 2.
    assert round(chi_square.quantile(0.95, 1), 3) == 3.841
    assert round(chi_square.quantile(0.95, 3), 3) == 7.815
    assert math.isclose(chi_square.quantile(0.5, 2), 2.0 * math.log(2.0), rel_tol=1e-14)
