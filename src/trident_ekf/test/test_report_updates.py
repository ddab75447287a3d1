"""The replay report's per-source update figures are kept in bounded memory: the updates
still replaceable stay within the filter's history window however long the log, and the
figures equal those computed over every update."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from trident_ekf.tools.report import SourceUpdates

RATE_HZ = 50.0
WINDOW_S = 2.0


def _feed(seconds: float) -> tuple[SourceUpdates, int, np.ndarray, np.ndarray]:
    """Updates of a 1-dof source at RATE_HZ with random NIS, every tenth gated; returns the
    source, the most updates held replaceable at once, and every NIS and accepted flag."""
    rng = np.random.default_rng(5)
    n = int(seconds * RATE_HZ)
    nis = rng.chisquare(1, n)
    accepted = np.arange(n) % 10 != 0
    updates = SourceUpdates(1, WINDOW_S)
    most = 0
    for k in range(n):
        updates.add(k / RATE_HZ, float(nis[k]), bool(accepted[k]), np.array([nis[k] ** 0.5]),
                    k / RATE_HZ)
        most = max(most, updates.replaceable)
    return updates, most, nis, accepted


def test_the_replaceable_updates_stay_within_the_window_for_a_log_ten_times_longer():
    held = {seconds: _feed(seconds)[1] for seconds in (10.0, 100.0)}
    assert held[100.0] == held[10.0] == WINDOW_S * RATE_HZ + 1


def test_the_figures_are_those_over_every_update():
    updates, _, nis, accepted = _feed(200.0)
    figures = updates.figures()
    assert figures["updates"] == len(nis)
    assert figures["accepted"] == np.count_nonzero(accepted)
    assert figures["nis_mean"] == pytest.approx(np.mean(nis[accepted]), rel=1e-12)
    assert figures["above_95pct"] == pytest.approx(np.mean(nis > chi2.ppf(0.95, 1)), rel=1e-12)
    rows = updates.rows()
    assert len(rows) < len(nis) / 4  # the plotted rows are decimated
    assert rows[:, 1].max() == nis.max()  # with the largest NIS kept
