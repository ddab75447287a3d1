"""Chi-square quantiles of the NIS gates and consistency bounds, without ``scipy.stats``.

``scipy.stats`` takes about a second to import (its distributions, scipy.optimize and
scipy.spatial), which every estimator process and command-line tool paid at start-up for one
function. The quantile is the inverse regularised lower incomplete gamma function, the same
expression ``scipy.stats.chi2.ppf`` evaluates, so the values are identical.

Even ``scipy.special`` costs a few tenths of a second to import (its array-API layer), as
much as a whole replay of a short log: the quantiles of the default gate and consistency
probability (0.9999) and of the report's bound (0.95) are tabulated here, as scipy gives
them (``test_chi_square`` compares every one), and scipy is imported only for another one.
"""

from __future__ import annotations

KNOWN: dict[float, tuple[float, ...]] = {
    0.95: (3.841458820694124, 5.991464547107979, 7.814727903251179, 9.487729036781154,
           11.070497693516351, 12.591587243743977, 14.067140449340169, 15.50731305586545,
           16.918977604620448, 18.307038053275146, 19.67513757268249, 21.02606981748307,
           22.362032494826934, 23.684791304840576, 24.995790139728616),
    0.9999: (15.136705226623606, 18.420680743952584, 21.107513466160444, 23.512742444991076,
             25.74483195905612, 27.85634123601417, 29.87750390922517, 31.827628001262585,
             33.719948438964906, 35.564013941952396, 37.366986437997284, 39.13440388194981,
             40.8706550138363, 42.5792889531133, 44.26322494417528),
}
"""probability -> quantiles for 1, 2, ... degrees of freedom, exactly scipy's."""


def quantile(probability: float, dof: int) -> float:
    """The value a chi-square variable with ``dof`` degrees of freedom stays below with
    ``probability`` (in [0, 1]; 1 gives infinity)."""
    known = KNOWN.get(probability, ())
    if 1 <= dof <= len(known):
        return known[dof - 1]
    from scipy.special import gammaincinv  # on use: see the module docstring

    return float(2.0 * gammaincinv(0.5 * dof, probability))
