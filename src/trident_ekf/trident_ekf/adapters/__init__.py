"""Vehicle interfaces behind one adapter layer: whichever publishes the sensors, the session
sees the same measurements.

A profile (``PROFILES``) is the list of subscriptions one interface needs: topic, message
type, QoS and the converter from a message to session calls (``base``). The estimator node
subscribes from the selected profile (parameter ``inputs``), trident-replay reads the same
topics from a bag (``--inputs``, ``--mavros-namespace``, ``--px4-namespace``) through the
same converters and ``deliver``:

- ``ros`` (``adapters.ros``): standard drivers on imu/data, gnss/fix, gnss/vel
  (TwistWithCovarianceStamped or TwistStamped), already ENU/FLU.
- ``mavros`` (``adapters.mavros``): MAVROS topics under /mavros, already ENU/FLU.
- ``px4`` (``adapters.px4``): PX4 uXRCE-DDS topics under /fmu, NED/FRD and PX4 units
  converted here; the node needs the px4_msgs interface package at run time,
  trident-replay reads the types from the message definitions the bag carries.

Aiding sources a profile does not feed keep their standard topics (``trident_ekf.inputs``).
"""

from __future__ import annotations

from collections.abc import Callable

from trident_ekf.adapters import mavros, px4, ros
from trident_ekf.adapters.base import (
    MALFORMED,
    SENSOR_QOS,
    VELOCITY_TYPES,
    Aid,
    Fix,
    Input,
    InputOptions,
    Profile,
    Qos,
    Sample,
    Velocity,
    deliver,
)
from trident_ekf.tools.cdr import ImuSample

PROFILES: dict[str, Callable[[InputOptions], Profile]] = {
    "ros": ros.profile, "mavros": mavros.profile, "px4": px4.profile}
PROFILE_NAMES = tuple(PROFILES)
# The ROS interface package each profile's message types need beyond the standard ones.
EXTRA_PACKAGES = {"px4": px4.PACKAGE}


def build_profile(options: InputOptions) -> Profile:
    """The profile ``options.profile`` names (ValueError for an unknown one)."""
    factory = PROFILES.get(options.profile)
    if factory is None:
        raise ValueError(f"unknown inputs profile {options.profile!r}; one of "
                         f"{list(PROFILES)}")
    return factory(options)


__all__ = ["EXTRA_PACKAGES", "MALFORMED", "PROFILES", "PROFILE_NAMES", "SENSOR_QOS",
           "VELOCITY_TYPES", "Aid",
           "Fix", "ImuSample", "Input", "InputOptions", "Profile", "Qos", "Sample",
           "Velocity", "build_profile", "deliver"]
