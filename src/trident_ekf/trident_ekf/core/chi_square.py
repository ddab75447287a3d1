"""Chi-square quantiles of the NIS gates and consistency bounds, without ``scipy.stats``.

``scipy.stats`` takes about a second to import (its distributions, scipy.optimize and
scipy.spatial), which every estimator process and command-line tool paid at start-up for one
function. The quantile is the inverse regularised lower incomplete gamma function, the same
expression ``scipy.stats.chi2.ppf`` evaluates, so the values are identical.
"""

from __future__ import annotations

from scipy.special import gammaincinv


def quantile(probability: float, dof: int) -> float:
    """The value a chi-square variable with ``dof`` degrees of freedom stays below with
    ``probability`` (in [0, 1]; 1 gives infinity)."""
    return float(2.0 * gammaincinv(0.5 * dof, probability))
