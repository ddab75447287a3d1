"""The aiding-source interface every measurement plug-in implements.

A source turns plain sensor values into a ``Measurement`` (``measurement``), and, at the
filter's time, predicts it, linearizes it against the error state and gives its noise
(``linearize``). The filter owns everything else: time ordering, the history for delayed
measurements, the NIS gate, the Joseph update and the per-source ``AidStatus``.

A source may own extra error states (``augmented``: a barometer offset, magnetometer
hard-iron biases, a GNSS position bias). Each is a first-order Gauss-Markov process per
component (or a random walk with an infinite correlation time), appended after the 15
navigation and IMU-bias states in registration order, with the convention of the IMU
biases: the error is estimate minus truth and a correction subtracts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from mav_geometry.arrays import FloatArray

if TYPE_CHECKING:  # the filter imports this module
    from trident_ekf.core.filter import ErrorStateFilter

COMMON_REASONS = ("accepted", "gated", "nonfinite", "late", "duplicate", "overflow",
                  "delayed")
"""Outcomes the filter counts for every source (``delayed``: applied in the past)."""
NOT_REJECTIONS = ("accepted", "delayed", "resets")


@dataclass(frozen=True)
class AugmentedState:
    """Extra error states of one source: per component a first-order Gauss-Markov process
    db/dt = -b / tau + w (tau = ``correlation_time``, s; infinite: a random walk) driven by
    white noise of density ``noise_density`` (state unit / sqrt(s)), starting at zero with
    ``initial_sigma``."""

    initial_sigma: tuple[float, ...]
    correlation_time: float
    noise_density: tuple[float, ...]

    @classmethod
    def gauss_markov(cls, sigma: tuple[float, ...], correlation_time: float
                     ) -> AugmentedState:
        """Stationary sigma per component: density sigma sqrt(2 / tau), starting stationary."""
        density = tuple(s * math.sqrt(2.0 / correlation_time) for s in sigma)
        return cls(tuple(sigma), correlation_time, density)

    @classmethod
    def random_walk(cls, initial_sigma: tuple[float, ...], density: tuple[float, ...]
                    ) -> AugmentedState:
        return cls(tuple(initial_sigma), math.inf, tuple(density))

    @property
    def size(self) -> int:
        return len(self.initial_sigma)


@dataclass(frozen=True)
class Measurement:
    """One sample of source ``source`` at ``time`` (s): its value vector and covariance
    (units as the source defines them)."""

    source: str
    time: float
    value: FloatArray
    covariance: FloatArray


@dataclass(frozen=True)
class Linearization:
    """residual = predicted - measured, with residual ~ H dx + noise of covariance R."""

    residual: FloatArray
    H: FloatArray
    R: FloatArray


@dataclass
class AidStatus:
    """Per-source record of the updates, in the spirit of PX4 EKF2's aid status: counts by
    outcome, and the latest innovation (measured - predicted), NIS and test ratio (NIS over
    the gate threshold: above 1 is rejected). ``nis_sum`` / ``nis_count`` over the accepted
    updates give the mean NIS to compare with ``dof``."""

    source: str
    dof: int
    counts: dict[str, int]
    last_time: float = math.nan
    last_innovation: FloatArray | None = None
    last_nis: float = math.nan
    last_test_ratio: float = math.nan
    nis_sum: float = 0.0
    nis_count: int = 0

    @property
    def nis_mean(self) -> float:
        return self.nis_sum / self.nis_count if self.nis_count else math.nan

    @property
    def rejected(self) -> int:
        return sum(n for reason, n in self.counts.items()
                   if reason not in NOT_REJECTIONS)

    def summary(self) -> dict[str, Any]:
        """Plain values (for JSON, diagnostics and the report)."""
        innovation = ([] if self.last_innovation is None
                      else [float(c) for c in self.last_innovation])
        return {"source": self.source, "dof": self.dof, **self.counts,
                "rejected": self.rejected, "nis_mean": self.nis_mean,
                "nis_expected": self.dof, "last_time": self.last_time,
                "last_nis": self.last_nis, "last_test_ratio": self.last_test_ratio,
                "last_innovation": innovation}


class AidingSource:
    """Base of every aiding source; subclasses set the class attributes and implement
    ``linearize`` (and usually ``measurement``).

    name: registry key and counter prefix. dof: update size (an instance may set its own,
    e.g. a mode with fewer rows). reasons: extra rejection
    reasons this source may report (e.g. ``disturbed``). drives_status: its accepted
    updates keep the filter out of OUTAGE and its gated ones count towards divergence (the
    GNSS position).
    """

    name: ClassVar[str] = ""
    dof: int = 0
    reasons: ClassVar[tuple[str, ...]] = ()
    drives_status: ClassVar[bool] = False
    body_frame: ClassVar[bool] = False  # sampled in the IMU frame (the session rotates it)
    needs_datum: ClassVar[bool] = False  # ``measurement`` takes the session's map datum

    def __init__(self, config: Any = None) -> None:
        self.config = config

    @property
    def delay_s(self) -> float:
        """How much older a reading is than its stamp, s: the ``delay_s`` setting of the
        source's config (0 without one). The session applies the reading at stamp - delay,
        through the filter history."""
        return float(getattr(self.config, "delay_s", 0.0))

    @property
    def augmented(self) -> tuple[AugmentedState, ...]:
        """Extra error states this source owns (none by default)."""
        return ()

    def start(self, filter_: ErrorStateFilter) -> None:
        """Called by ``ErrorStateFilter.initialize`` once the state is set."""

    def first_value(self, filter_: ErrorStateFilter, m: Measurement) -> tuple[float, ...] | None:
        """The augmented states' value on the first measurement after ``initialize`` (None:
        keep zero), e.g. a barometer offset from the first reading."""
        return None

    def check(self, filter_: ErrorStateFilter, m: Measurement) -> str | None:
        """A rejection reason (one of ``reasons``) before the update, or None to go on."""
        return None

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        raise NotImplementedError

    def new_status(self) -> AidStatus:
        return AidStatus(self.name, self.dof,
                         dict.fromkeys((*COMMON_REASONS, *self.reasons), 0))


def as_vector(value: Any, size: int, name: str) -> FloatArray:
    """``value`` as a float vector of ``size`` elements (ValueError naming it otherwise)."""
    array = np.asarray(value, dtype=float).reshape(-1)
    if array.size != size:
        raise ValueError(f"{name} must have {size} elements, got shape {np.shape(value)}")
    return array


def as_covariance(value: Any, size: int, name: str) -> FloatArray:
    """A size x size covariance from a matrix, a vector of variances or a scalar variance."""
    matrix = np.asarray(value, dtype=float)
    if matrix.ndim == 0:
        matrix = np.eye(size) * float(matrix)
    elif matrix.shape == (size,):
        matrix = np.diag(matrix)
    if matrix.shape != (size, size):
        raise ValueError(f"{name} must be {size}x{size}, {size} variances or one variance, "
                         f"got shape {matrix.shape}")
    return matrix


def usable(m: Measurement) -> bool:
    """Finite time, value and covariance, with a positive covariance diagonal."""
    # Plain floats: a few numpy reductions on 3-element arrays cost 5x more, and np.diag
    # (a Python function) 3x the method ``diagonal``.
    covariance = np.asarray(m.covariance)
    diagonal = covariance.diagonal() if covariance.ndim == 2 else np.diag(covariance)
    return (math.isfinite(m.time) and all(map(math.isfinite, np.ravel(m.value).tolist()))
            and all(map(math.isfinite, covariance.ravel().tolist()))
            and all(variance > 0.0 for variance in diagonal.ravel().tolist()))
