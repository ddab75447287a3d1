"""GNSS antenna position and velocity (ECEF), with the lever arm and the optional
Gauss-Markov position bias (docs/theory/trident-ekf.md §5.5, §5.8).

Both sources read their settings from the filter's ``FilterConfig`` (the lever arm, and for
the position the bias model and ``gnss_covariance_includes_bias``), so that
``ErrorStateFilter.set_config`` retunes them. The filters differ only in how position and
velocity errors enter (``ErrorStateFilter.navigation_error_block``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from mav_geometry import quaternion
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.scalar import cross
from mav_geometry.settings import check_settings, setting
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.earth import OMEGA_ECEF, ecef_to_geodetic, enu_to_ecef_rotation
from trident_ekf.core.measurements.base import (
    AidingSource,
    AugmentedState,
    Linearization,
    Measurement,
)
from trident_ekf.core.skew import skew

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter

ATT, VEL, POS, BG = slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 12)
_kernels = load_kernels("trident_ekf.core._kernels")  # None: the numpy reference


@dataclass(frozen=True)
class GnssConfig:
    """The receiver model: its latency, and how its reported accuracies become measurement
    noise: the reported sigmas (from eph/epv and the speed accuracy, as drivers fill the
    covariances) times ``accuracy_scale`` / ``speed_accuracy_scale``, each at least its
    floor; the defaults stand in
    when a message reports none (docs/theory/trident-ekf.md §5.5)."""

    delay_s: float = setting(
        0.0, "how much older a fix and velocity are than their stamps (receiver and "
        "driver latency; applied through the filter history, so at most history_length)",
        "s", 0.0, 10.0)
    accuracy_scale: float = setting(
        1.0, "factor on the receiver-reported position sigmas", "", 0.01, 100.0)
    speed_accuracy_scale: float = setting(
        1.0, "factor on the receiver-reported velocity sigmas", "", 0.01, 100.0)
    horizontal_floor_m: float = setting(
        0.3, "smallest horizontal position sigma", "m", 1e-4, 100.0)
    vertical_floor_m: float = setting(0.5, "smallest vertical position sigma", "m", 1e-4,
                                      100.0)
    speed_floor_mps: float = setting(0.1, "smallest velocity sigma per axis", "m/s", 1e-4,
                                     100.0)
    default_horizontal_m: float = setting(
        2.5, "horizontal sigma of a fix without a covariance", "m", 1e-3, 1000.0)
    default_vertical_m: float = setting(
        5.0, "vertical sigma of a fix without a covariance", "m", 1e-3, 1000.0)
    default_speed_mps: float = setting(
        0.2, "velocity sigma of a velocity without a covariance", "m/s", 1e-3, 100.0)

    def __post_init__(self) -> None:
        check_settings(self)

    def position(self, covariance_enu: FloatArray | None) -> FloatArray:
        """ENU position covariance (m^2) of a fix (None: it reported none)."""
        if covariance_enu is None:
            return np.diag([self.default_horizontal_m**2, self.default_horizontal_m**2,
                            self.default_vertical_m**2])
        floors = np.square([self.horizontal_floor_m, self.horizontal_floor_m,
                            self.vertical_floor_m])
        return _floored(covariance_enu * self.accuracy_scale**2, floors)

    def velocity(self, covariance_enu: FloatArray | None) -> FloatArray:
        """ENU velocity covariance (m^2/s^2) (None: it reported none)."""
        if covariance_enu is None:
            return np.eye(3) * self.default_speed_mps**2
        return _floored(covariance_enu * self.speed_accuracy_scale**2,
                        np.full(3, self.speed_floor_mps**2))


def _floored(covariance: FloatArray, floors: FloatArray) -> FloatArray:
    """Raise each variance to its floor, keeping the correlation coefficients."""
    variances = np.diag(covariance)
    raised = np.maximum(variances, floors)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(np.where(variances > 0.0, raised / variances, 1.0))
    result: FloatArray = covariance * np.outer(ratio, ratio)
    return result


def antenna_terms(filter_: ErrorStateFilter
                  ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """(C body->ECEF, v, p, lever arm (body, m), Earth-relative body rate) at the filter."""
    q, v, p = filter_.nominal()
    C = quaternion.to_matrix(q)
    omega_eb = np.array(filter_.last_omega) - C.T @ OMEGA_ECEF
    return C, v, p, np.array(filter_.config.lever_arm, dtype=float), omega_eb


def compiled_antenna(filter_: ErrorStateFilter) -> tuple[FloatArray, FloatArray] | None:
    """(p, blocks) in one C call when the filter runs its compiled kernels (None
    otherwise: ``antenna_terms`` and the models' numpy code are the reference). blocks
    (5 x 3 x 3): C, the Jacobian blocks C [l x] (position, attitude), C [(omega_eb x l) x]
    - C [l x] [(C^T Omega) x] (velocity, attitude), -C [l x] (velocity, gyro bias), then
    the rows omega_eb, the antenna position p + C l and its velocity (``antenna_velocity``).
    """
    if _kernels is None or not filter_.compiled:
        return None
    q, v, p = filter_.nominal()
    blocks = np.empty((5, 3, 3))
    _kernels.gnss_antenna(q, v, p, filter_.last_omega, filter_.config.lever_arm, blocks)
    return p, blocks


class GnssPosition(AidingSource):
    """Antenna ECEF position (m), covariance m^2; with ``FilterConfig.gnss_bias_states`` it
    owns the position bias b (ENU axes at the start), measured as antenna position + A b."""

    name: ClassVar[str] = "gnss_position"
    dof = 3
    # Divergence resets onto a fix; fixes the GNSS velocity and the IMU contradict
    # (core.divergence).
    reasons: ClassVar[tuple[str, ...]] = ("resets", "inconsistent")
    drives_status: ClassVar[bool] = True

    config: FilterConfig  # the bias model (its fields cannot change for the filter's life)

    def __init__(self, filter_config: FilterConfig) -> None:
        super().__init__(filter_config)
        self.axes = np.eye(3)  # A: ENU -> ECEF of the bias axes, set by ``start``
        self.bias_covariance_ecef = np.zeros((3, 3))  # stationary, m^2

    @property
    def augmented(self) -> tuple[AugmentedState, ...]:
        config = self.config
        if not config.gnss_bias_states:
            return ()
        sigma = np.sqrt(config.gnss_bias_variance())
        return (AugmentedState.gauss_markov(tuple(float(s) for s in sigma),
                                            config.gnss_bias_correlation_time),)

    def start(self, filter_: ErrorStateFilter) -> None:
        if not self.augmented:
            return
        latitude, longitude, _ = ecef_to_geodetic(filter_.nominal()[2])
        self.axes = enu_to_ecef_rotation(latitude, longitude)
        variance = filter_.config.gnss_bias_variance()
        self.bias_covariance_ecef = (self.axes * variance) @ self.axes.T

    def bias_offset(self, filter_: ErrorStateFilter) -> FloatArray:
        """A b: the estimated bias in ECEF (zero without the bias states), m."""
        if not self.augmented:
            return np.zeros(3)
        result: FloatArray = self.axes @ np.array(filter_.augmented[self.name])
        return result

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        H = np.zeros((3, filter_.state_dim))
        antenna = compiled_antenna(filter_)
        if antenna is None:
            C, _, p, lever, _ = antenna_terms(filter_)
            H[:, ATT] = C @ skew(lever)
            predicted = p + C @ lever
        else:
            blocks = antenna[1]
            C, H[:, ATT], predicted = blocks[0], blocks[1], blocks[4, 1]
        H[:, POS] = filter_.navigation_error_block(C)
        if self.augmented:
            H[:, filter_.state_slice(self.name)] = self.axes
            predicted = predicted + self.bias_offset(filter_)
        return Linearization(predicted - m.value, H, self.white_covariance(filter_, m.covariance))

    def white_covariance(self, filter_: ErrorStateFilter, reported: FloatArray) -> FloatArray:
        """R of a fix (ECEF m^2): the reported covariance, except with the bias states and
        ``gnss_covariance_includes_bias``, where the reported covariance is white plus
        correlated: the bias's stationary covariance is subtracted and the eigenvalues
        floored at ``gnss_white_sigma_floor``^2 (kept positive definite)."""
        config = filter_.config
        if not (self.augmented and config.gnss_covariance_includes_bias):
            return reported
        white = reported - self.bias_covariance_ecef
        eigenvalues, vectors = np.linalg.eigh(0.5 * (white + white.T))
        floored = np.maximum(eigenvalues, config.gnss_white_sigma_floor**2)
        result: FloatArray = (vectors * floored) @ vectors.T
        return result


class GnssVelocity(AidingSource):
    """Antenna ECEF velocity (m/s), covariance m^2/s^2: v + C (omega_eb x lever)."""

    name: ClassVar[str] = "gnss_velocity"
    dof = 3

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        antenna = compiled_antenna(filter_)
        if antenna is not None:
            blocks = antenna[1]
            H = np.zeros((3, filter_.state_dim))
            H[:, ATT] = blocks[2]
            H[:, VEL] = filter_.navigation_error_block(blocks[0])
            H[:, BG] = blocks[3]
            return Linearization(blocks[4, 2] - m.value, H, m.covariance)
        C, v, _, lever, omega_eb = antenna_terms(filter_)
        lever_skew = skew(lever)
        earth_body = C.T @ OMEGA_ECEF
        H = np.zeros((3, filter_.state_dim))
        arm_velocity = cross(omega_eb.tolist(), lever.tolist())  # np.cross costs 10x more
        rotated_lever_skew = C @ lever_skew
        H[:, ATT] = C @ skew(arm_velocity) - rotated_lever_skew @ skew(earth_body)
        H[:, VEL] = filter_.navigation_error_block(C)
        H[:, BG] = -rotated_lever_skew
        return Linearization(antenna_velocity(C, v, lever, omega_eb) - m.value, H,
                             m.covariance)


def antenna_velocity(C: FloatArray, v: FloatArray, lever: FloatArray, omega_eb: FloatArray
                     ) -> FloatArray:
    """v + C (omega_eb x lever): the antenna's ECEF velocity (m/s) from ``antenna_terms``."""
    result: FloatArray = v + C @ (skew(omega_eb) @ lever)  # np.cross costs 10x more
    return result
