"""Aiding sources of the estimator, one module each, and the registry that the filters, the
session, the node, trident-replay and the report discover them from.

Register a new source (``register``) with its class and, for an optional one, its config
dataclass (fields made with ``base.setting``: the node turns them into parameters
``<name>.<field>``, trident-replay into ``--set <name>.<field>=value``). The GNSS sources
are always present: they read ``FilterConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trident_ekf.core.measurements.barometer import Barometer, BarometerConfig
from trident_ekf.core.measurements.base import AidingSource, AidStatus, Measurement
from trident_ekf.core.measurements.external_pose import ExternalPose, ExternalPoseConfig
from trident_ekf.core.measurements.gnss import GnssPosition, GnssVelocity
from trident_ekf.core.measurements.magnetometer import Magnetometer, MagnetometerConfig
from trident_ekf.core.measurements.zero_velocity import ZeroVelocity, ZeroVelocityConfig


@dataclass(frozen=True)
class Registration:
    """An optional source: its class and config dataclass (all fields have defaults)."""

    source: type[AidingSource]
    config: type[Any]

    def build(self, config: Any = None) -> AidingSource:
        return self.source(config if config is not None else self.config())


REGISTRY: dict[str, Registration] = {}


def register(source: type[AidingSource], config: type[Any]) -> None:
    """Make an optional source known by ``source.name`` (ValueError on a clash)."""
    if source.name in REGISTRY or source.name in (GnssPosition.name, GnssVelocity.name):
        raise ValueError(f"an aiding source named {source.name!r} is already registered")
    REGISTRY[source.name] = Registration(source, config)


for _source, _config in ((Barometer, BarometerConfig), (Magnetometer, MagnetometerConfig),
                         (ZeroVelocity, ZeroVelocityConfig),
                         (ExternalPose, ExternalPoseConfig)):
    register(_source, _config)


def build_sources(configs: dict[str, Any]) -> list[AidingSource]:
    """Instances of the named optional sources (value: its config, or None for defaults)."""
    unknown = sorted(set(configs) - set(REGISTRY))
    if unknown:
        raise ValueError(f"unknown aiding source(s) {unknown}; known: {sorted(REGISTRY)}")
    return [REGISTRY[name].build(config) for name, config in configs.items()]


__all__ = ["REGISTRY", "AidStatus", "AidingSource", "Measurement", "Registration",
           "build_sources", "register"]
