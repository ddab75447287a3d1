"""Divergence or spoofing: what GNSS fixes that fail the NIS gate mean
(docs/theory/trident-ekf.md §5.14).

A fix fails the gate when it disagrees with the estimate. Either the estimate has drifted
(a genuine divergence: a long outage with an overconfident IMU model, a skipped IMU gap, a
wrong start) and the fixes are right, or the fixes are wrong (a spoofer moved them, a
receiver glitch) and the estimate is right. How the fixes *move* tells the two apart: their
displacement from one epoch to another must agree with two witnesses the fix does not
control,

- the GNSS velocity, integrated over the interval (trapezoid of the two epochs' values), and
- the inertial solution: the displacement of the filter's antenna position over the
  interval (a rejected fix does not move it), less the corrections other aiding sources
  made (a GNSS velocity update moves the position through their correlation).

A drifted estimate is off in position, but over a short interval its displacement is right,
and real fixes follow the GNSS velocity: every witness agrees. A spoofed jump moves the
fixes while both witnesses say the vehicle did not: both contradict.

Each test is a chi-square test (3 dof, probability ``FilterConfig.consistency_probability``)
of the difference between the fixes' displacement and the witness's, with its covariance:
the white noise of both fixes plus the witness's own uncertainty. Spans tested at a
rejected fix (a *link* joins two consecutive fixes at most the outage threshold apart; a
longer gap breaks the chain):

- the link from the previous fix, both witnesses;
- the span since the anchor (the last accepted fix, at the filter's antenna position after
  its update), both witnesses, while the chain of links from it is unbroken;
- the window: the span since the first fix of the current run of rejected fixes, GNSS
  velocity only (over seconds the inertial displacement carries the very drift that a
  genuine divergence is).

Policy:

- A rejected fix that every available witness contradicts on its link or since the anchor
  is *inconsistent* (counted so instead of gated: it says nothing about divergence). Two in
  a row (a jump that persists) raise the spoofing alarm, as does a fix that is no place on
  Earth (``plausibility.fix_fault``). While the alarm is raised every rejected fix is
  inconsistent; it clears when a fix passes the gate again (the fixes agree with the
  estimate: the spoofing has ended).
- The rejected fixes form a coherent track while every link agrees with every available
  witness and the window agrees with the GNSS velocity; any disagreement restarts the track
  at the latest fix.
- The divergence reset only goes onto a fix that ends a coherent track of at least
  ``max_consecutive_rejections`` fixes (two at least: one link), with no alarm raised.

``FixTrack`` is immutable: the filter keeps it in its snapshots, so a rewind for a delayed
measurement restores it with the rest of the state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from trident_ekf.core import chi_square
from trident_ekf.core.earth import ecef_to_geodetic, gravity_xyz
from trident_ekf.core.measurements.base import Measurement
from trident_ekf.core.measurements.gnss import (
    antenna_terms,
    antenna_velocity,
    compiled_antenna,
)
from trident_ekf.core.plausibility import fix_fault
from trident_ekf.core.skew import skew

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter

_kernels = load_kernels("trident_ekf.core._kernels")  # None: the numpy reference
ALARM_RUN = 2  # contradicted fixes in a row that make a persistent jump (one is an outlier)
_VEL, _ATT_AND_ACCEL_BIAS = slice(3, 6), [0, 1, 2, 12, 13, 14]  # conventional error state


@lru_cache(maxsize=8)
def _threshold(probability: float) -> float:
    return chi_square.quantile(probability, 3)


@dataclass(frozen=True)
class FixRecord:
    """One GNSS position epoch as the tests use it (ECEF, m, m/s, covariances m^2, m^2/s^2).

    fix, noise: the reported antenna position and its white covariance (what the update
    uses). antenna: the filter's antenna position after this fix's outcome, less what the
    other aiding sources' updates have moved it by (their sum since the start): the
    difference between two records is the inertial displacement. velocity: the
    GNSS velocity measurement of the same epoch, or None. shown: the filter's antenna
    velocity minus that GNSS velocity (zero without one), m/s. drift: how the error of the
    inertial displacement from here grows over T s, as the blocks (A_vv, A_va, A_aa) of
    T^2 A_vv + T^3 / 2 (A_va + A_va^T) + T^4 / 4 A_aa (velocity error, and acceleration
    error from the attitude and accelerometer bias errors, from the filter's covariance);
    accel_noise: the accelerometer's white density, whose random walk adds T^3 / 3 per axis.
    """

    time: float
    fix: FloatArray
    noise: FloatArray
    antenna: FloatArray
    velocity: Measurement | None
    shown: FloatArray
    drift: tuple[FloatArray, FloatArray, FloatArray]
    accel_noise: float

    def inertial_noise(self, latest: FixRecord) -> FloatArray:
        """Covariance of the inertial displacement error from this epoch to ``latest``.

        Besides the filter's covariance: a diverged filter's velocity may be off by more
        than that says, by what the GNSS velocity shows at the two ends (r_a, r_b), which
        adds T (r_a + r_b) / 2, bounded by T^2 (r_a r_a^T + r_b r_b^T) / 2."""
        span = latest.time - self.time
        vv, va, aa = self.drift
        shown = np.outer(self.shown, self.shown) + np.outer(latest.shown, latest.shown)
        result: FloatArray = (span**2 * (vv + 0.5 * shown) + 0.5 * span**3 * (va + va.T)
                              + 0.25 * span**4 * aa
                              + np.eye(3) * self.accel_noise**2 * span**3 / 3.0)
        return result


def fix_record(filter_: ErrorStateFilter, m: Measurement, antenna: FloatArray,
               velocity: Measurement | None) -> FixRecord:
    """The record of fix ``m`` at the filter's current state (its time is the fix's)."""
    terms = compiled_antenna(filter_)
    if terms is None or _kernels is None:
        C, v, p, lever, omega_eb = antenna_terms(filter_)
        drift = _drift(filter_, C, p)
        velocity_now = antenna_velocity(C, v, lever, omega_eb)
    else:  # two C calls (core/_kernels.c); _drift and antenna_terms are the reference
        p, blocks = terms
        C, velocity_now = blocks[0], blocks[4, 2]
        drift_blocks = np.empty((3, 3, 3))
        _kernels.fix_drift(filter_.covariance, filter_.navigation_error_block(C), C, p,
                           drift_blocks)
        drift = (drift_blocks[0], drift_blocks[1], drift_blocks[2])
    shown = np.zeros(3) if velocity is None else velocity_now - velocity.value
    return FixRecord(m.time, m.value, filter_.gnss.white_covariance(filter_, m.covariance),
                     antenna, velocity, shown, drift, filter_.config.accel_noise)


def _drift(filter_: ErrorStateFilter, C: FloatArray, p: FloatArray
           ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``FixRecord.drift`` from the filter's covariance, C body->ECEF and the position p."""
    P = filter_.conventional_covariance()
    # The acceleration error is [f x] C phi + C db_a, with the specific force f taken as
    # hover's (minus gravity): a multirotor's stays near it in magnitude.
    force = -np.array(gravity_xyz(*(float(c) for c in p)))
    U = np.hstack([skew(force) @ C, C])
    rest = P[np.ix_(_ATT_AND_ACCEL_BIAS, _ATT_AND_ACCEL_BIAS)]
    return P[_VEL, _VEL], P[_VEL, _ATT_AND_ACCEL_BIAS] @ U.T, U @ rest @ U.T


def _read_only(array: FloatArray) -> FloatArray:
    array.flags.writeable = False
    return array


# Every new span's: shared (read-only) rather than two fresh arrays per accepted fix.
_NO_DISPLACEMENT = (_read_only(np.zeros(3)), _read_only(np.zeros((3, 3))))


@dataclass(frozen=True)
class Span:
    """Fixes from ``start`` on, joined by ``links`` links, with ``by_velocity``: the
    GNSS-velocity displacement over them and the sum of the links' covariances of it (the
    span's covariance is ``links`` times that sum: a bound for any correlation between the
    epochs' velocity errors); None once a link lacks a velocity."""

    start: FixRecord
    links: int = 0
    by_velocity: tuple[FloatArray, FloatArray] | None = _NO_DISPLACEMENT

    def extended(self, previous: FixRecord, latest: FixRecord) -> Span:
        a, b = previous.velocity, latest.velocity
        if a is None or b is None or self.by_velocity is None:
            return replace(self, links=self.links + 1, by_velocity=None)
        dt = latest.time - previous.time
        change = b.value - a.value
        moved = 0.5 * dt * (a.value + b.value)
        # Either epoch's error, correlated or not: 2 (V_a + V_b) dt^2 / 4; the velocity
        # between the epochs anywhere between the two: dt^2 / 12 dv dv^T.
        noise = (0.5 * dt**2 * (a.covariance + b.covariance)
                 + dt**2 / 12.0 * np.outer(change, change))
        total, total_noise = self.by_velocity
        return Span(self.start, self.links + 1, (total + moved, total_noise + noise))


@dataclass(frozen=True)
class Verdict:
    """Each witness's answer on a span (None: unavailable) and the fix displacement the
    inertial solution does not explain, m."""

    velocity: bool | None
    imu: bool | None
    unexplained_m: float

    @property
    def answers(self) -> list[bool]:
        return [answer for answer in (self.velocity, self.imu) if answer is not None]

    @property
    def contradicted(self) -> bool:
        return bool(self.answers) and not any(self.answers)

    @property
    def agreed(self) -> bool:
        return all(self.answers)


def _agrees(difference: FloatArray, covariance: FloatArray, threshold: float) -> bool:
    return float(difference @ np.linalg.solve(covariance, difference)) <= threshold


def judge(span: Span, latest: FixRecord, threshold: float, inertial: bool = True) -> Verdict:
    """The witnesses on the displacement of the fixes from ``span.start`` to ``latest``."""
    start = span.start
    moved = latest.fix - start.fix
    fixes = start.noise + latest.noise
    unexplained = moved - (latest.antenna - start.antenna)
    imu = None
    if inertial:
        imu = _agrees(unexplained, fixes + start.inertial_noise(latest), threshold)
    velocity = None
    if span.links and span.by_velocity is not None:
        by_velocity, noise = span.by_velocity
        velocity = _agrees(moved - by_velocity, fixes + span.links * noise, threshold)
    return Verdict(velocity, imu, float(np.linalg.norm(unexplained)))


def _moved(record: FixRecord, seconds: float) -> FixRecord:
    return replace(record, time=record.time + seconds)


def _spoofing(verdict: Verdict) -> str:
    witnesses = " and ".join(name for name, answer in (("velocity", verdict.velocity),
                                                       ("IMU", verdict.imu))
                             if answer is not None)
    return (f"GNSS position inconsistent with {witnesses}: suspected spoofing, "
            f"{verdict.unexplained_m:.0f} m jump")


@dataclass(frozen=True)
class FixTrack:
    """What the recent GNSS positions say (see the module docstring).

    previous: the latest fix. anchor: the span since the last accepted fix (None before one,
    or once a gap broke the chain). window: the coherent track of rejected fixes (None after
    an accepted fix). contradicted: contradicted fixes in a row. alarm: why spoofing is
    suspected ("" when it is not). alarms: how many times the alarm was raised.
    """

    previous: FixRecord | None = None
    anchor: Span | None = None
    window: Span | None = None
    contradicted: int = 0
    alarm: str = ""
    alarms: int = 0

    def anchored(self, record: FixRecord) -> FixTrack:
        """After a fix the filter accepted (or reset onto): the alarm clears."""
        return FixTrack(record, Span(record), alarms=self.alarms)

    def screened(self, record: FixRecord, probability: float, horizon: float
                 ) -> tuple[FixTrack, bool]:
        """The track after a rejected fix, and whether that fix is inconsistent. ``horizon``
        (s): the longest interval a link spans (the outage threshold)."""
        threshold = _threshold(probability)
        previous = self.previous
        verdicts = []
        anchor = window = None
        coherent = False
        if previous is not None and 0.0 < record.time - previous.time <= horizon:
            link = judge(Span(previous).extended(previous, record), record, threshold)
            verdicts.append(link)
            if self.anchor is not None:
                anchor = self.anchor.extended(previous, record)
                verdicts.append(judge(anchor, record, threshold))
            if self.window is not None:
                window = self.window.extended(previous, record)
                coherent = link.agreed and judge(window, record, threshold,
                                                 inertial=False).agreed
        contradicted = next((v for v in reversed(verdicts) if v.contradicted), None)
        run = self.contradicted + 1 if contradicted is not None else 0
        alarm = self.alarm
        if contradicted is not None and (alarm or run >= ALARM_RUN):
            alarm = _spoofing(contradicted)
        latitude, longitude, height = ecef_to_geodetic(record.fix)
        if fix_fault(latitude, longitude, height) is not None:
            alarm = f"GNSS position implausible (height {height:.3g} m): suspected spoofing"
        raised = bool(alarm) and not self.alarm
        track = FixTrack(record, anchor, window if coherent else Span(record), run, alarm,
                         self.alarms + raised)
        return track, contradicted is not None or bool(alarm)

    def shifted(self, seconds: float) -> FixTrack:
        """The same track with every stamp moved by ``seconds`` (the input clock stepped:
        the estimate, and so the antenna positions, continue on the new time base)."""
        def moved(span: Span | None) -> Span | None:
            return None if span is None else replace(span, start=_moved(span.start, seconds))

        previous = None if self.previous is None else _moved(self.previous, seconds)
        return replace(self, previous=previous, anchor=moved(self.anchor),
                       window=moved(self.window))

    def ready_to_reset(self, min_fixes: int) -> bool:
        """A divergence reset may go onto the latest fix: no alarm, and it ends a coherent
        track of at least ``min_fixes`` (and two) fixes."""
        window = self.window
        return (not self.alarm and window is not None
                and window.links + 1 >= max(min_fixes, 2))

