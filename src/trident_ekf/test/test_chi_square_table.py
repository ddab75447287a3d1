"""The tabulated chi-square quantiles are scipy's, bit for bit, and need no scipy import."""

import subprocess
import sys

from scipy.special import gammaincinv

from trident_ekf.core import chi_square


def test_every_tabulated_quantile_is_scipys():
    mismatches = [(p, dof) for p, values in chi_square.KNOWN.items()
                  for dof, value in enumerate(values, start=1)
                  if value != float(2.0 * gammaincinv(0.5 * dof, p))]
    assert mismatches == []
    assert all(len(values) == 15 for values in chi_square.KNOWN.values())


def test_a_tabulated_quantile_imports_no_scipy_and_another_one_does():
    probe = ("import sys; from trident_ekf.core import chi_square as c; "
             "c.quantile(0.9999, 3); c.quantile(0.95, 15); print('scipy' in sys.modules); "
             "c.quantile(0.99, 3); print('scipy.special' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.split() == ["False", "True"]
