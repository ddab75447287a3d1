"""Configuration dataclass fields that carry what a user needs to set them.

``setting`` declares a field with its description, unit, range, choices and whether NaN
means "not given"; ``check_settings`` enforces them in a config's ``__post_init__``;
``configure`` builds a config from a name -> value mapping. The ROS shells turn the same
metadata into declared parameters (``mav_ros_common.parameters.config_specs``), so a core's
config and a node's parameters cannot disagree. Lives here because this is the one package
every core (estimator, simulator, dynamics) already depends on, and it imports no ROS.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, field, fields
from typing import Any

from mav_geometry.shown import shown


def setting(default: Any, doc: str, unit: str = "", low: float | None = None,
            high: float | None = None, choices: tuple[str, ...] = (),
            allow_nan: bool = False) -> Any:
    """A source-config dataclass field with what a user needs to set it: description, unit
    and range (the node turns these into ROS parameters; ``check_settings`` enforces them)."""
    return field(default=default, metadata={"doc": doc, "unit": unit, "low": low,
                                            "high": high, "choices": choices,
                                            "allow_nan": allow_nan})


def check_settings(config: Any) -> None:
    """ValueError naming the field, its value, unit and range for any value outside it."""
    for item in fields(config):
        meta, value = item.metadata, getattr(config, item.name)
        if not meta:
            continue
        if meta["choices"] and value not in meta["choices"]:
            raise ValueError(f"{item.name} must be one of {meta['choices']}, got "
                             f"{shown(value)}")
        values = value if isinstance(value, tuple) else (value,)
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        low, high, unit = meta["low"], meta["high"], meta["unit"]
        for number in numbers:
            if math.isnan(number) and meta["allow_nan"]:
                continue
            if not math.isfinite(number) or (low is not None and number < low) or (
                    high is not None and number > high):
                span = f"[{low}, {high}]" if low is not None or high is not None else "finite"
                raise ValueError(
                    f"{item.name} must be in {span} {unit}, got {shown(value)}".rstrip())


def configure(config_class: type[Any], values: dict[str, Any]) -> Any:
    """An instance of a source's config dataclass from field values (lists become tuples);
    ValueError naming an unknown field, a value of another kind than the field's default
    (text, a number, a list of numbers, true/false) or a value the config refuses."""
    known = {item.name: item.default for item in fields(config_class)}
    unknown = [name for name in values if name not in known]
    if unknown:
        raise ValueError(f"unknown setting(s) {shown(unknown)} of {config_class.__name__}; "
                         f"known: {sorted(known)}")
    converted = {}
    for name, value in values.items():
        default = known[name]
        if default is not MISSING and not _same_kind(default, value):
            raise ValueError(f"{name} of {config_class.__name__} must be like "
                             f"{shown(default)}, got {shown(value)}")
        converted[name] = tuple(float(c) for c in value) if isinstance(value, list | tuple) \
            else value
    return config_class(**converted)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same_kind(default: Any, value: Any) -> bool:
    """Whether a given value can stand for a field with this default: numbers for numbers
    (an integer for a float), lists of numbers for tuples, the same type otherwise."""
    if _is_number(default):
        return _is_number(value) and (not isinstance(value, int) or abs(value) < 2**63)
    if isinstance(default, tuple):
        return isinstance(value, list | tuple) and all(
            _is_number(c) and (not isinstance(c, int) or abs(c) < 2**63) for c in value)
    return isinstance(value, type(default))

