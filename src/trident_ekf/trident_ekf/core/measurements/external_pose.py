"""External pose: position and attitude of the body from another system (motion capture,
visual odometry in the map frame, a pose-graph), fused as one 6-row update.

Inputs are in the ENU map frame at the session's datum: position (m), attitude q
body->ENU (scalar-last) and a 6x6 covariance ordered (x, y, z, rot x, rot y, rot z) with
the rotation error about the map axes, as geometry_msgs/PoseWithCovariance carries them.
They are turned to ECEF here. Residual (trident-ekf.md §5.6): position p_hat - p with the
filter's navigation error block; attitude log(q_meas^* q_hat) = -phi - noise, so H = -I on
the body-frame attitude error, with the noise turned to body axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion
from mav_geometry.settings import check_settings, setting
from trident_ekf.core.measurements.base import (
    AidingSource,
    Linearization,
    Measurement,
)

if TYPE_CHECKING:
    from trident_ekf.core.filter import ErrorStateFilter
    from trident_ekf.core.session import Datum

ATT, POS = slice(0, 3), slice(6, 9)


@dataclass(frozen=True)
class ExternalPoseConfig:
    position_sigma_m: float = setting(0.05, "position noise when the message has no "
                                      "covariance", "m", 1e-5, 1e4)
    attitude_sigma_deg: float = setting(1.0, "attitude noise per axis when the message has "
                                        "no covariance", "deg", 1e-4, 180.0)

    def __post_init__(self) -> None:
        check_settings(self)


class ExternalPose(AidingSource):
    """Body pose in the map frame; the measurement value is [p ECEF (3), q body->ECEF (4)]
    and its covariance 6x6 (ECEF position m^2, attitude rad^2 about ECEF axes)."""

    name: ClassVar[str] = "external_pose"
    dof = 6
    needs_datum: ClassVar[bool] = True
    config: ExternalPoseConfig

    def __init__(self, config: ExternalPoseConfig | None = None) -> None:
        super().__init__(config or ExternalPoseConfig())

    def measurement(self, time: float, datum: Datum, position_enu: ArrayLike,
                    attitude_xyzw: ArrayLike, covariance: ArrayLike | None = None
                    ) -> Measurement:
        R = datum.enu_to_ecef
        position = datum.origin + R @ np.asarray(position_enu, dtype=float)
        q_enu = np.asarray(attitude_xyzw, dtype=float)
        q = quaternion.multiply(quaternion.from_matrix(R), q_enu / np.linalg.norm(q_enu))
        given = None if covariance is None else np.asarray(covariance, dtype=float).reshape(6, 6)
        if given is None or not np.any(given):
            config = self.config
            given = np.diag([config.position_sigma_m**2] * 3
                            + [np.radians(config.attitude_sigma_deg) ** 2] * 3)
        turn = np.zeros((6, 6))
        turn[:3, :3] = turn[3:, 3:] = R
        return Measurement(self.name, float(time), np.concatenate([position, q]),
                           turn @ given @ turn.T)

    def linearize(self, filter_: ErrorStateFilter, m: Measurement) -> Linearization:
        q_hat, _, p_hat = filter_.nominal()
        C = filter_.attitude_matrix()
        H = np.zeros((6, filter_.state_dim))
        H[:3, POS] = filter_.navigation_error_block(C)
        H[3:, ATT] = -np.eye(3)
        attitude = quaternion.to_rotation_vector(
            quaternion.multiply(quaternion.conjugate(m.value[3:]), q_hat))
        body = np.eye(6)
        body[3:, 3:] = C.T  # attitude noise about ECEF axes -> body axes
        return Linearization(np.concatenate([p_hat - m.value[:3], attitude]), H,
                             body @ m.covariance @ body.T)
