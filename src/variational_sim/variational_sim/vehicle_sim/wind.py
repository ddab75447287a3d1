"""Wind at the vehicle: a constant mean, discrete "1-cosine" gusts and Dryden turbulence.

Frames and units: every velocity is the velocity of the air relative to the ground, in
the map frame (ENU, REP-103), in m/s; times in s, heights and lengths in m.

- Mean wind: one constant ENU vector.
- Gusts: each is a pulse ``A (1 - cos(2 pi tau / d)) / 2`` for ``0 <= tau = t - start <= d``
  and zero outside, with ``A`` the ENU peak vector and ``d`` the duration. It is the
  "1-cosine" discrete gust of MIL-F-8785C / MIL-HDBK-1797 rising over ``d / 2`` and
  falling back symmetrically (peak at ``start + d / 2``, time integral ``A d / 2``); the
  specification's ramp-and-hold variant (rise, then stay at the peak) is not modelled.
- Turbulence: the Dryden model of MIL-F-8785C for low altitude. With ``h`` the height
  above ground in feet and ``W20`` the mean wind speed at 20 ft (6.096 m) the vertical
  sigma is ``0.1 W20``, the horizontal ones ``sigma_w / (0.177 + 0.000823 h)^0.4``, the
  scale lengths ``L_w = h`` and ``L_u = L_v = h / (0.177 + 0.000823 h)^1.2`` (converted to
  SI). Alternatively the horizontal sigma is given directly; it is then constant in height
  and the vertical one follows from the same ratio. The model is defined for 10 ft to
  1000 ft: the height is clamped to ``[min_height_m, 304.8 m]`` (above 1000 ft the
  specification blends into its medium/high-altitude model, which is not modelled here).

  Components: ``u`` along the horizontal direction of the mean wind (East when the mean
  wind has no horizontal part), ``v`` horizontal to the left of it, ``w`` up (the
  low-altitude axes of the specification, with ``w`` up instead of down, which the
  statistics do not see); they are turned into ENU. The spatial spectra are turned into
  time with the speed ``V`` at which the vehicle crosses the frozen field:
  ``V = max(airspeed, |mean wind|, min_speed_mps)``. The airspeed is what the caller
  passes; the mean-wind speed keeps the field moving past a vehicle drifting with the air
  (where the frozen-field picture has no time scale at all) and the floor keeps ``V > 0``
  in calm air with no mean wind.

  Discretisation (exact, so the sampled covariance is the Dryden one at any step): ``u``
  is a first-order Gauss-Markov process of time constant ``T = L_u / V`` (autocorrelation
  ``exp(-tau / T)``). ``v`` and ``w`` have the second-order Dryden spectrum, proportional
  to ``(1 + 3 (T f)^2) / (1 + (T f)^2)^2`` at angular frequency ``f`` (autocorrelation
  ``(1 - tau / (2 T)) exp(-tau / T)``, transfer function ``(1 + sqrt(3) T s) / (1 + T s)^2``),
  realised as two cascaded first-order lags ``z1' = -a z1 + sqrt(2 a) n(t)`` (``n`` unit
  white noise, so ``z1`` has unit variance), ``z2' = a (z1 - z2)``, ``a = 1 / T``, and the
  output ``sigma (sqrt(3) z1 + (1 - sqrt(3)) z2) / sqrt(2)``. The transition over ``dt``
  is ``exp(-a dt) [[1, 0], [a dt, 1]]`` and the process noise covariance follows from the
  lower incomplete gamma function (series for small ``a dt``: no cancellation). The
  states are advanced every ``turbulence_interval_s`` (10 ms by default, a whole number
  of physics steps) and held in between; the scaled states keep their law when ``h`` or
  ``V`` change, and the coefficients are recomputed only when one of them changes by more
  than 1 %.

Reproducibility: the field owns the generator it is given; ``reset()`` rewinds it to its
state at construction, so a reset run repeats the same series, and equal seeds give equal
series. Turbulence states start in their stationary law.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from variational_sim.sensors._validation import (
    require_finite_vector,
    require_in_range,
    require_positive,
)
from variational_sim.sensors.noise import StandardNormalStream, gauss_markov_coefficients

Vector3 = tuple[float, float, float]

FEET = 0.3048
"""m per international foot."""
MAX_HEIGHT_M = 1000.0 * FEET
"""Top of the low-altitude Dryden model (1000 ft); heights above are clamped to it."""
W20_HEIGHT_M = 20.0 * FEET
"""Height of the reference wind speed ``W20`` (20 ft = 6.096 m)."""

_SQRT3 = math.sqrt(3.0)
_SQRT_HALF = math.sqrt(0.5)
_RETUNE_TOLERANCE = 0.01  # relative change of h or V that recomputes the filter coefficients


def _as_vector3(owner: str, field: str, value: Sequence[float]) -> Vector3:
    require_finite_vector(owner, field, value, 3)
    return (float(value[0]), float(value[1]), float(value[2]))


@dataclass(frozen=True)
class Gust:
    """A "1-cosine" gust: starts at ``start_s`` (s), lasts ``duration_s`` (s, > 0) and peaks
    at ``amplitude_enu_mps`` (m/s, ENU air velocity) at ``start_s + duration_s / 2``."""

    start_s: float
    duration_s: float
    amplitude_enu_mps: tuple[float, float, float]

    def __post_init__(self) -> None:
        owner = type(self).__name__
        require_in_range(owner, "start_s", self.start_s, 0.0, 1.0e7)
        require_in_range(owner, "duration_s", self.duration_s, 1.0e-3, 1.0e5)
        amplitude = _as_vector3(owner, "amplitude_enu_mps", self.amplitude_enu_mps)
        require_in_range(owner, "|amplitude_enu_mps|", math.hypot(*amplitude), 0.0, 100.0)
        object.__setattr__(self, "amplitude_enu_mps", amplitude)

    def velocity(self, time_s: float) -> Vector3:
        """Gust air velocity (m/s, ENU) at ``time_s`` (s)."""
        tau = time_s - self.start_s
        if not 0.0 <= tau <= self.duration_s:
            return (0.0, 0.0, 0.0)
        shape = 0.5 * (1.0 - math.cos(2.0 * math.pi * tau / self.duration_s))
        a = self.amplitude_enu_mps
        return (shape * a[0], shape * a[1], shape * a[2])


@dataclass(frozen=True)
class WindConfig:
    """Wind of a scenario (SI units, ENU air velocity; see the module docstring).

    ``mean_enu_mps``: constant mean wind (m/s). ``gusts``: discrete gusts. Turbulence
    intensity, at most one of: ``turbulence_w20_mps`` the wind speed at 6.096 m (20 ft)
    (MIL-F-8785C: light 7.7, moderate 15.4, severe 23.2 m/s; ``sigma_w = 0.1 W20``), or
    ``turbulence_sigma_horizontal_mps`` the horizontal sigma itself (m/s); both 0 = no
    turbulence. ``min_height_m``: floor of the height used by the turbulence model (m;
    the model is undefined at the ground; 3.048 m = 10 ft, the specification's lower
    limit). ``min_speed_mps``: floor of the crossing speed ``V`` (m/s).
    """

    mean_enu_mps: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gusts: tuple[Gust, ...] = ()
    turbulence_w20_mps: float = 0.0
    turbulence_sigma_horizontal_mps: float = 0.0
    min_height_m: float = 10.0 * FEET
    min_speed_mps: float = 0.5

    def __post_init__(self) -> None:
        owner = type(self).__name__
        mean = _as_vector3(owner, "mean_enu_mps", self.mean_enu_mps)
        require_in_range(owner, "|mean_enu_mps|", math.hypot(*mean), 0.0, 100.0)
        object.__setattr__(self, "mean_enu_mps", mean)
        gusts = tuple(self.gusts)
        for index, gust in enumerate(gusts):
            if not isinstance(gust, Gust):
                raise ValueError(f"{owner}.gusts[{index}] = {gust!r} is invalid: allowed "
                                 "Gust(start_s, duration_s, amplitude_enu_mps)")
        object.__setattr__(self, "gusts", gusts)
        require_in_range(owner, "turbulence_w20_mps", self.turbulence_w20_mps, 0.0, 50.0)
        require_in_range(owner, "turbulence_sigma_horizontal_mps",
                         self.turbulence_sigma_horizontal_mps, 0.0, 20.0)
        if self.turbulence_w20_mps > 0.0 and self.turbulence_sigma_horizontal_mps > 0.0:
            raise ValueError(
                f"{owner}.turbulence_w20_mps = {self.turbulence_w20_mps!r} and "
                f"{owner}.turbulence_sigma_horizontal_mps = "
                f"{self.turbulence_sigma_horizontal_mps!r} are invalid together: allowed "
                "at most one of them > 0")
        require_in_range(owner, "min_height_m", self.min_height_m, 0.1, MAX_HEIGHT_M)
        require_in_range(owner, "min_speed_mps", self.min_speed_mps, 0.01, 100.0)

    @property
    def turbulent(self) -> bool:
        """Whether the turbulence is on."""
        return self.turbulence_w20_mps > 0.0 or self.turbulence_sigma_horizontal_mps > 0.0


class DrydenParameters(NamedTuple):
    """Sigmas (m/s) and scale lengths (m) of the ``u``, ``v``, ``w`` components."""

    sigma_u: float
    sigma_v: float
    sigma_w: float
    length_u: float
    length_v: float
    length_w: float


def dryden_parameters(height_m: float, w20_mps: float = 0.0,
                      sigma_horizontal_mps: float = 0.0) -> DrydenParameters:
    """MIL-F-8785C low-altitude Dryden sigmas and scale lengths at ``height_m`` (m above
    ground, used as given: clamp it first) for an intensity given either as the wind speed
    at 20 ft ``w20_mps`` or as the horizontal sigma ``sigma_horizontal_mps`` (m/s)."""
    require_positive("dryden_parameters", "height_m", height_m)
    factor = 0.177 + 0.000823 * (height_m / FEET)
    length_horizontal = height_m / factor**1.2
    ratio = factor**0.4  # sigma_w / sigma_u
    if sigma_horizontal_mps > 0.0:
        sigma_h, sigma_w = sigma_horizontal_mps, sigma_horizontal_mps * ratio
    else:
        sigma_w = 0.1 * w20_mps
        sigma_h = sigma_w / ratio
    return DrydenParameters(sigma_h, sigma_h, sigma_w, length_horizontal, length_horizontal,
                            height_m)


def _exponential_tail(order: int, x: float) -> float:
    """``sum_{k >= order} x^k / k!`` for ``x >= 0``, without cancellation for small ``x``."""
    if x >= 1.0:
        head = sum(x**k / math.factorial(k) for k in range(order))
        return math.exp(x) - head
    term = x**order / math.factorial(order)
    total, k = term, order
    while term > 1e-17 * total:
        k += 1
        term *= x / k
        total += term
    return total


Coefficients = tuple[float, float, float, float, float, float, float, float, float, float,
                     float, float, float, float, float]
"""Exact transition over one interval, a plain tuple (unpacked per update):
``(phi_u, drive_u)`` of ``u``, ``(rho, r, l11, l21, l22)`` of ``v`` then of ``w``, then
``(sigma_u, sigma_v, sigma_w)``."""


def _second_order_transition(r: float) -> tuple[float, float, float, float, float]:
    """``(rho, r, l11, l21, l22)`` of the scaled cascade over ``r = dt / T``.

    With stationary covariance ``P = [[1, 1/2], [1/2, 1/2]]`` the process noise is
    ``Q = 2 int_0^r exp(-2 s) [[1, s], [s, s^2]] ds``, i.e. ``Q11 = 1 - exp(-2 r)``,
    ``Q12 = P(2, 2 r) / 2``, ``Q22 = P(3, 2 r) / 2`` with ``P`` the regularised lower
    incomplete gamma function ``P(n, x) = exp(-x) sum_{k >= n} x^k / k!``.
    """
    x = 2.0 * r
    decay = math.exp(-x)
    q11 = -math.expm1(-x)
    q12 = 0.5 * decay * _exponential_tail(2, x)
    q22 = 0.5 * decay * _exponential_tail(3, x)
    l11 = math.sqrt(q11)
    l21 = q12 / l11
    l22 = math.sqrt(max(q11 * q22 - q12 * q12, 0.0) / q11)
    return math.exp(-r), r, l11, l21, l22


def filter_coefficients(parameters: DrydenParameters, speed_mps: float,
                        interval_s: float) -> Coefficients:
    """Exact transition of the scaled Dryden states over ``interval_s`` (s) at the crossing
    speed ``speed_mps`` (m/s) and the output sigmas (see ``Coefficients``)."""
    p = parameters
    phi_u, drive_u = gauss_markov_coefficients(interval_s, p.length_u / speed_mps)
    lateral = _second_order_transition(interval_s * speed_mps / p.length_v)
    vertical = _second_order_transition(interval_s * speed_mps / p.length_w)
    return (phi_u, drive_u, *lateral, *vertical, p.sigma_u, p.sigma_v, p.sigma_w)


class WindField:
    """ENU air velocity at the vehicle from a ``WindConfig``; see the module docstring.

    ``rng`` is owned by the field (``reset()`` rewinds it). ``step_s`` (s) is the interval
    between ``velocity`` calls (the physics step); the turbulence states are advanced every
    ``turbulence_interval_s`` (s, rounded to a whole number >= 1 of steps) and held between.
    """

    def __init__(self, config: WindConfig, rng: np.random.Generator, step_s: float = 1e-3,
                 turbulence_interval_s: float = 0.01) -> None:
        owner = type(self).__name__
        require_in_range(owner, "step_s", step_s, 1e-6, 10.0)
        require_in_range(owner, "turbulence_interval_s", turbulence_interval_s, 0.0, 10.0)
        self.config = config
        self.step_s = step_s
        self.turbulence_interval_s = max(1, round(turbulence_interval_s / step_s)) * step_s
        self._rng = rng
        self._rng_state = copy.deepcopy(rng.bit_generator.state)
        self._mean = config.mean_enu_mps
        mx, my, mz = self._mean
        horizontal = math.hypot(mx, my)
        self._axis = (mx / horizontal, my / horizontal) if horizontal > 0.0 else (1.0, 0.0)
        self._mean_speed = math.sqrt(mx * mx + my * my + mz * mz)
        gusts = sorted(config.gusts, key=lambda g: g.start_s)
        self._gusts = tuple(
            (g.start_s, g.start_s + g.duration_s, 2.0 * math.pi / g.duration_s,
             0.5 * g.amplitude_enu_mps[0], 0.5 * g.amplitude_enu_mps[1],
             0.5 * g.amplitude_enu_mps[2]) for g in gusts)
        self._gust_start = min((g[0] for g in self._gusts), default=math.inf)
        self._gust_end = max((g[1] for g in self._gusts), default=-math.inf)
        self._coefficients: Coefficients | None = None
        # bands of the raw height and airspeed that keep the cached coefficients
        self._height_low = self._height_high = self._speed_low = self._speed_high = 0.0
        self.reset()

    def reset(self) -> None:
        """Restart: rewind the generator, draw the turbulence states from their stationary
        law, and take the next ``velocity`` call's time as the new origin."""
        self._rng.bit_generator.state = copy.deepcopy(self._rng_state)
        self._normals = StandardNormalStream(self._rng, 5)
        n = self._normals.next_row()
        self._coefficients = None
        # u, then v and w: z1 ~ N(0, 1), z2 = z1 / 2 + n / 2 (covariance [[1, .5], [.5, .5]])
        self._state = (n[0], n[1], 0.5 * (n[1] + n[2]), n[3], 0.5 * (n[3] + n[4]))
        self._turbulence: Vector3 = (0.0, 0.0, 0.0)
        self._held = self._mean  # mean + held turbulence
        self._origin: float | None = None
        self._updates = 0
        self._next_update = -math.inf if self.config.turbulent else math.inf

    @property
    def turbulence_enu(self) -> Vector3:
        """The turbulence part (m/s, ENU) of the last ``velocity``."""
        return self._turbulence

    def deterministic_velocity(self, time_s: float) -> Vector3:
        """Mean wind plus gusts (m/s, ENU) at ``time_s`` (s): no turbulence, no state."""
        return self._add_gusts(time_s, self._mean)

    def _add_gusts(self, time_s: float, base: Vector3) -> Vector3:
        x, y, z = base
        for start, end, omega, ax, ay, az in self._gusts:
            if start <= time_s <= end:
                shape = 1.0 - math.cos(omega * (time_s - start))
                x += shape * ax
                y += shape * ay
                z += shape * az
        return (x, y, z)

    def refreshes_at(self, time_s: float) -> bool:
        """Whether ``velocity`` at ``time_s`` (s) refreshes the turbulence: the only calls
        that read the height and airspeed (the others may pass NaN)."""
        return time_s >= self._next_update

    def velocity(self, time_s: float, height_above_ground_m: float,
                 airspeed_mps: float) -> Vector3:
        """Air velocity (m/s, ENU) at the vehicle at ``time_s`` (s, increasing from call to
        call), ``height_above_ground_m`` (m) and ``airspeed_mps`` (m/s, the vehicle's speed
        relative to the air, used by the turbulence time scales)."""
        if time_s >= self._next_update:
            self._advance(time_s, height_above_ground_m, airspeed_mps)
        if self._gust_start <= time_s <= self._gust_end:
            return self._add_gusts(time_s, self._held)
        return self._held

    # -- turbulence ---------------------------------------------------------------------

    def _tuned(self, height: float, speed: float, interval: float) -> Coefficients:
        """Coefficients at the clamped height and floored speed; those of the regular
        interval are cached while height and speed stay within 1 % of theirs."""
        config = self.config
        height = min(max(height, config.min_height_m), MAX_HEIGHT_M)
        speed = max(speed, self._mean_speed, config.min_speed_mps)
        parameters = dryden_parameters(height, config.turbulence_w20_mps,
                                       config.turbulence_sigma_horizontal_mps)
        if interval != self.turbulence_interval_s:  # catching up over a gap: not cached
            return filter_coefficients(parameters, speed, interval)
        self._coefficients = filter_coefficients(parameters, speed, interval)
        # Raw inputs in these bands keep the coefficients: within 1 % of the clamped value,
        # and anything beyond a clamp the value sits at (it would clamp to the same).
        low, high = 1.0 - _RETUNE_TOLERANCE, 1.0 + _RETUNE_TOLERANCE
        self._height_low = -math.inf if height == config.min_height_m else low * height
        self._height_high = math.inf if height == MAX_HEIGHT_M else high * height
        floored = speed == max(self._mean_speed, config.min_speed_mps)
        self._speed_low = -math.inf if floored else low * speed
        self._speed_high = high * speed
        return self._coefficients

    def _advance(self, time_s: float, height: float, airspeed: float) -> None:
        """Advance the states to the last update instant at or before ``time_s`` and
        refresh the held turbulence (written out: this runs at the update rate)."""
        interval = self.turbulence_interval_s
        if self._origin is None:  # first call after reset: hold the initial states
            self._origin = time_s
            due = 0
        else:
            due = math.floor((time_s + 0.5 * self.step_s - self._origin) / interval)
            due -= self._updates
        c = self._coefficients
        if (due != 1 or c is None or not self._height_low <= height <= self._height_high
                or not self._speed_low <= airspeed <= self._speed_high):
            c = self._tuned(height, airspeed, interval * max(due, 1))
        phi_u, drive_u, rho, shear, l11, l21, l22, rho_w, shear_w, m11, m21, m22, \
            sigma_u, sigma_v, sigma_w = c
        s0, s1, s2, s3, s4 = self._state
        if due > 0:
            self._updates += due
            n0, n1, n2, n3, n4 = self._normals.next_row()
            s0 = phi_u * s0 + drive_u * n0
            s1, s2 = rho * s1 + l11 * n1, rho * (shear * s1 + s2) + l21 * n1 + l22 * n2
            s3, s4 = rho_w * s3 + m11 * n3, rho_w * (shear_w * s3 + s4) + m21 * n3 + m22 * n4
            self._state = (s0, s1, s2, s3, s4)
        self._next_update = self._origin + (self._updates + 1) * interval - 0.5 * self.step_s
        u = sigma_u * s0
        v = sigma_v * _SQRT_HALF * (_SQRT3 * s1 + (1.0 - _SQRT3) * s2)
        w = sigma_w * _SQRT_HALF * (_SQRT3 * s3 + (1.0 - _SQRT3) * s4)
        cos_axis, sin_axis = self._axis
        east, north = cos_axis * u - sin_axis * v, sin_axis * u + cos_axis * v
        self._turbulence = (east, north, w)
        mx, my, mz = self._mean
        self._held = (mx + east, my + north, mz + w)
