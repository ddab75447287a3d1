"""Node parameters: declared with descriptors, validated, and either read-only or applied.

A node lists its parameters as ``ParameterSpec`` (name, default, description, unit, range,
choices, ``read_only``) and hands them to ``declare_parameters`` with a ``build`` function
that turns the validated values into the node's settings (and makes the checks that involve
several parameters). Every problem at start-up is one ``ParameterError`` naming the
parameter, its value and what is allowed; the node's ``main`` turns it into exit code 2.

Run-time changes (``ros2 param set``, the ``SetParameters`` services) go through the same
checks. A read-only parameter is refused by rclpy itself, with its own reason. A dynamic one
is checked value by value, then ``build`` runs on the values the node would have; a failure
refuses the whole request with the error as the reason and nothing changes. An accepted
change is stored by rclpy, then ``apply(settings, changed_names)`` makes it take effect.
So no parameter is accepted and ignored: it is read-only, or it is applied.

``apply`` runs in rclpy's post-set callback, on the executor thread that serves the
parameter services: between two callbacks of a single-threaded executor, never in the
middle of one. It must not fail for settings ``build`` accepted: checks belong in ``build``.

Types: every parameter is declared with dynamic typing and its type is checked here, so a
wrong type is refused with the same message as a wrong value (rclpy would only say "Wrong
parameter type"), and a ``float`` parameter (or a list of them) also accepts integers, as
``ros2 param set node speed_mps 2`` sends one. The stored type never changes: other types
are refused. NaN and infinities are refused unless the spec allows NaN (``allow_nan``).
Ranges are in the descriptors too, so rclpy refuses out-of-range numbers with its own
reason before asking.
"""

from __future__ import annotations

import difflib
import math
import reprlib
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
    from rclpy.node import Node
    from rclpy.parameter import Parameter
# rclpy and rcl_interfaces are imported where a node is involved (declaring, describing,
# run-time changes): specs, checks and parameter files work without ROS (the closed-loop
# pipeline of mav_bringup imports no rclpy).


class Kind(IntEnum):
    """rclpy's ``Parameter.Type`` values (equal to them as integers) without importing rclpy;
    the parameter types used here: BOOL, INTEGER, DOUBLE, STRING and DOUBLE_ARRAY."""

    NOT_SET = 0
    BOOL = 1
    INTEGER = 2
    DOUBLE = 3
    STRING = 4
    DOUBLE_ARRAY = 8


SettingsT = TypeVar("SettingsT")
Values = Mapping[str, Any]
"""Validated parameter values by name: bool, int, float, str, tuple of floats or None."""

_RCLPY_PARAMETERS = ("use_sim_time", "qos_overrides.")
"""Parameters (prefixes) rclpy declares or reads itself."""


class ParameterError(ValueError):
    """A parameter value the node does not accept; ``name`` is the parameter (None when the
    problem involves several)."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


SHOWN_CHARACTERS = 120
"""Longest value text in a message: a value may be anything a user or a file passed."""
_NESTED = reprlib.Repr()
# A nested value from a parameter file is printed a few levels and items deep: YAML aliases
# can make a list of billions of items (or one that contains itself) from a few lines.
_NESTED.maxlevel, _NESTED.maxlist, _NESTED.maxdict = 3, 16, 8
_NESTED.maxstring = _NESTED.maxother = SHOWN_CHARACTERS


def show(value: Any) -> str:
    """A parameter value as it appears in messages (arrays as lists), cut to
    ``SHOWN_CHARACTERS``."""
    if isinstance(value, array | tuple):
        value = list(value)
    nested = isinstance(value, dict) or (isinstance(value, list) and any(
        isinstance(item, list | dict) for item in value))
    text = _NESTED.repr(value) if nested else repr(value)
    if len(text) > SHOWN_CHARACTERS:
        text = f"{text[:SHOWN_CHARACTERS - 30]}... ({len(text)} characters)"
    return text


def invalid(name: str, value: Any, allowed: str) -> ParameterError:
    """The error for ``name = value``: ``allowed`` says what would be valid."""
    return ParameterError(f"parameter '{name}' = {show(value)} is invalid: must be {allowed}",
                          name)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_float(number: int | float) -> float:
    """A number as a float; an integer beyond float range as infinity (out of any range)."""
    try:
        return float(number)
    except OverflowError:  # only an int: its sign by comparison (copysign converts it too)
        return math.inf if number > 0 else -math.inf


def _sequence(value: Any) -> list[Any] | None:
    return list(value) if isinstance(value, list | tuple | array) else None


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter of a node.

    ``default`` fixes the type: bool, int, float, str, or a list of numbers; None declares a
    list of numbers that may stay unset. ``low``/``high`` bound a number (each element of a
    list). ``choices`` lists the valid strings. ``length`` is the exact length of a list,
    otherwise its length is a multiple of ``length_multiple`` and at least ``min_length``.
    ``allow_nan`` lets a number be NaN (meaning "not given"; the range then applies to the
    other values). ``read_only`` parameters can only be set at start-up (launch arguments,
    parameter files): the structural ones that the node is built from.
    """

    name: str
    default: bool | int | float | str | Sequence[float] | None
    description: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False
    length: int | None = None
    length_multiple: int = 1
    min_length: int = 1
    allow_nan: bool = False
    allow_empty: bool = False
    """A string parameter may be empty (meaning "not given", as its description says)."""

    def __post_init__(self) -> None:
        if isinstance(self.default, list | tuple):
            object.__setattr__(self, "default", tuple(self.default))
        if (self.low is None) != (self.high is None) or (
                self.low is not None and self.high is not None and not self.low <= self.high):
            raise ValueError(f"{self.name}: give both low <= high or neither")
        if self.kind not in (Kind.BOOL, Kind.INTEGER, Kind.DOUBLE, Kind.STRING,
                             Kind.DOUBLE_ARRAY):
            raise ValueError(f"{self.name}: default {self.default!r} of an unsupported type")
        if self.choices and self.kind != Kind.STRING:
            raise ValueError(f"{self.name}: choices are for strings")
        if self.default is not None:
            self.check(self.default)  # a spec whose default is invalid is a programming error

    @property
    def kind(self) -> Kind:
        """The rclpy type of the parameter."""
        default = self.default
        if default is None or isinstance(default, tuple):
            return Kind.DOUBLE_ARRAY
        if isinstance(default, bool):
            return Kind.BOOL
        if isinstance(default, int):
            return Kind.INTEGER
        if isinstance(default, float):
            return Kind.DOUBLE
        if isinstance(default, str):
            return Kind.STRING
        return Kind.NOT_SET

    @property
    def optional(self) -> bool:
        """True for a list that may stay unset (value None)."""
        return self.default is None

    def _unit(self) -> str:
        return f" ({self.unit})" if self.unit else ""

    def _range(self) -> str:
        return f" in [{self.low}, {self.high}]" if self.low is not None else ""

    def allowed(self) -> str:
        """What a valid value looks like, with the unit and the range."""
        kind = self.kind
        if kind == Kind.BOOL:
            return "true or false"
        if kind == Kind.STRING:
            if self.choices:
                return f"one of {list(self.choices)}"
            return "a string (may be empty)" if self.allow_empty else "a non-empty string"
        if kind == Kind.INTEGER:
            return f"an integer{self._range()}{self._unit()}"
        if kind == Kind.DOUBLE:
            number = f"a number{self._range()}" if self.low is not None else "a finite number"
            return f"{number}{self._unit()}" + (", or NaN" if self.allow_nan else "")
        numbers = f"numbers{self._range()}" if self.low is not None else "finite numbers"
        if self.length is not None:
            shape = f"a list of {self.length} {numbers}"
        else:
            shape = f"a list of {numbers}"
            if self.length_multiple > 1:
                shape += f", a multiple of {self.length_multiple} long"
            shape += ", may be empty" if self.min_length == 0 else ", not empty"
        return shape + self._unit() + (", or unset" if self.optional else "")

    def descriptor(self) -> ParameterDescriptor:
        """The descriptor rclpy enforces and ``ros2 param describe`` shows: description with
        unit and range, ``read_only``, the range of a number; dynamic typing (``check``
        checks the type)."""
        from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

        change = ("read-only: set at start-up" if self.read_only
                  else "can be changed at run time")
        descriptor = ParameterDescriptor(
            name=self.name, description=f"{self.description}; {self.allowed()}; {change}",
            additional_constraints=self.allowed(), read_only=self.read_only,
            dynamic_typing=True)
        if self.low is not None and self.high is not None:
            if self.kind == Kind.INTEGER:
                descriptor.integer_range = [IntegerRange(
                    from_value=int(self.low), to_value=int(self.high), step=1)]
            elif self.kind == Kind.DOUBLE and not self.allow_nan:  # rclpy refuses NaN there
                descriptor.floating_point_range = [FloatingPointRange(
                    from_value=float(self.low), to_value=float(self.high), step=0.0)]
        return descriptor

    def declared_default(self) -> Any:
        """The default as rclpy declares it (a list for lists)."""
        return list(self.default) if isinstance(self.default, tuple) else self.default

    def _number_ok(self, value: float, nan_ok: bool) -> bool:
        if math.isnan(value):
            return nan_ok
        if math.isinf(value):
            return False
        return self.low is None or self.high is None or self.low <= value <= self.high

    def _length_ok(self, size: int) -> bool:
        if self.length is not None:
            return size == self.length
        return size >= self.min_length and size % self.length_multiple == 0

    def check(self, value: Any) -> Any:
        """``value`` as the node uses it (float for numbers, tuple of floats for lists, None
        for an unset optional list), or ParameterError naming the parameter, the value and
        what is allowed."""
        kind = self.kind
        if value is None:
            if self.optional:
                return None
        elif kind == Kind.BOOL:
            if isinstance(value, bool):
                return value
        elif kind == Kind.INTEGER:
            if isinstance(value, int) and not isinstance(value, bool) and self._number_ok(
                    _as_float(value), nan_ok=False):
                return int(value)
        elif kind == Kind.DOUBLE:
            if _is_number(value) and self._number_ok(_as_float(value),
                                                     nan_ok=self.allow_nan):
                return float(value)
        elif kind == Kind.STRING:
            if isinstance(value, str) and (value or self.allow_empty) and (
                    not self.choices or value in self.choices):
                return value
        else:
            items = _sequence(value)
            if items is not None and self._length_ok(len(items)) and all(
                    _is_number(v) and self._number_ok(_as_float(v), nan_ok=self.allow_nan)
                    for v in items):
                return tuple(float(v) for v in items)
        raise invalid(self.name, value, self.allowed())


def _index(specs: Sequence[ParameterSpec]) -> dict[str, ParameterSpec]:
    index: dict[str, ParameterSpec] = {}
    for spec in specs:
        if spec.name in index:
            raise ValueError(f"parameter {spec.name} is specified twice")
        index[spec.name] = spec
    return index


def _override(node: Node, name: str) -> Any:
    """The start-up value given for ``name`` (launch, parameter file), if any: what rclpy
    refused when a declaration fails."""
    overrides: Mapping[str, Parameter[Any]] = getattr(node, "_parameter_overrides", {})
    parameter = overrides.get(name)
    return None if parameter is None else parameter.value


def _declare(node: Node, spec: ParameterSpec) -> Any:
    """Declare ``spec`` on ``node``; its validated value (ParameterError)."""
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    try:
        parameter = node.declare_parameter(spec.name, spec.declared_default(),
                                           spec.descriptor())
    except (InvalidParameterValueException, InvalidParameterTypeException) as error:
        spec.check(_override(node, spec.name))  # names value and range in our words
        raise ParameterError(f"parameter '{spec.name}': {error}", spec.name) from None
    return spec.check(parameter.value)


def _refuse_unknown(specs: Mapping[str, ParameterSpec], given: Mapping[str, Any]) -> None:
    """ParameterError for a parameter given (file, ``-p``, ``--set``) that the node does not
    have: a misspelt name would otherwise leave the default in force without a word."""
    unknown = sorted(name for name in given
                     if name not in specs and not name.startswith(_RCLPY_PARAMETERS))
    if not unknown:
        return
    hints = []
    for name in unknown[:5]:
        close = difflib.get_close_matches(name, list(specs), n=1)
        hints.append(f"{show(name)}" + (f" (did you mean '{close[0]}'?)" if close else ""))
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    raise ParameterError(f"unknown parameter {', '.join(hints)}{more}: this node has no such "
                         "parameter; check its spelling in the parameter file or override",
                         unknown[0])


class NodeParameters(Generic[SettingsT]):
    """The declared parameters of one node: specs, validated values and the settings
    ``build`` made of them; ``enable_updates`` lets dynamic ones change at run time.

    Construction declares every spec on ``node`` (descriptors with units and ranges), reads
    and checks the values and runs ``build``; any problem raises ``ParameterError``.
    """

    def __init__(self, node: Node, specs: Sequence[ParameterSpec],
                 build: Callable[[Values], SettingsT]) -> None:
        self._node = node
        self._specs = _index(specs)
        self._build = build
        values = {spec.name: _declare(node, spec) for spec in specs}
        self._values: Values = MappingProxyType(values)
        self._settings = build(self._values)
        self._apply: Callable[[SettingsT, frozenset[str]], None] | None = None
        self._pending: tuple[list[Parameter[Any]], Values, SettingsT] | None = None
        _refuse_unknown(self._specs, getattr(node, "_parameter_overrides", {}))

    @property
    def specs(self) -> Mapping[str, ParameterSpec]:
        return MappingProxyType(self._specs)

    @property
    def values(self) -> Values:
        """Current validated values by name (read-only view)."""
        return self._values

    @property
    def settings(self) -> SettingsT:
        """What ``build`` made of the current values."""
        return self._settings

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def dynamic(self) -> list[str]:
        """Names of the parameters that can change at run time."""
        return [name for name, spec in self._specs.items() if not spec.read_only]

    def candidate(self, changes: Mapping[str, Any]) -> tuple[Values, SettingsT]:
        """The values and settings the node would have with ``changes`` (name -> new value
        as received): ParameterError if any is invalid or ``build`` refuses them."""
        values = dict(self._values)
        for name, value in changes.items():
            values[name] = self._specs[name].check(value)
        frozen: Values = MappingProxyType(values)
        return frozen, self._build(frozen)

    def enable_updates(self, apply: Callable[[SettingsT, frozenset[str]], None]) -> None:
        """Accept run-time changes of the dynamic parameters: each accepted set calls
        ``apply(settings, names)`` with the new settings and the names that were set."""
        if self._apply is not None:
            raise RuntimeError("updates are already enabled")
        self._apply = apply
        self._node.add_on_set_parameters_callback(self.review)
        self._node.add_post_set_parameters_callback(self._commit)

    def review(self, parameters: list[Parameter[Any]]) -> SetParametersResult:
        """The on-set callback: accept ``parameters`` or refuse them with the reason."""
        from rcl_interfaces.msg import SetParametersResult
        from rclpy.parameter import Parameter

        ours = [p for p in parameters if p.name in self._specs]
        if not ours:
            return SetParametersResult(successful=True)
        for parameter in ours:
            spec = self._specs[parameter.name]
            if spec.read_only:  # rclpy refuses these before asking; kept for direct calls
                return SetParametersResult(
                    successful=False, reason=f"parameter '{spec.name}' is read-only: it can "
                                             "only be set at start-up")
            if parameter.type_ == Parameter.Type.NOT_SET:
                return SetParametersResult(
                    successful=False, reason=f"parameter '{spec.name}' cannot be unset at run "
                                             f"time: it must be {spec.allowed()}")
        try:
            values, settings = self.candidate({p.name: p.value for p in ours})
        except ParameterError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self._pending = (parameters, values, settings)
        return SetParametersResult(successful=True)

    def _commit(self, parameters: list[Parameter[Any]]) -> None:
        """The post-set callback: the change is stored, make it take effect."""
        names = frozenset(p.name for p in parameters if p.name in self._specs)
        pending, self._pending = self._pending, None
        if not names or self._apply is None:
            return
        if pending is not None and pending[0] is parameters:
            values, settings = pending[1], pending[2]
        else:  # not reviewed just before (cannot happen through rclpy): check again
            values, settings = self.candidate(
                {p.name: p.value for p in parameters if p.name in names})
        self._values, self._settings = values, settings
        try:
            self._apply(settings, names)
        except Exception as error:
            self._node.get_logger().error(
                f"parameters {sorted(names)} were accepted but applying them failed: "
                f"{type(error).__name__}: {error}")
            raise


def declare_parameters(node: Node, specs: Sequence[ParameterSpec],
                       build: Callable[[Values], SettingsT]) -> NodeParameters[SettingsT]:
    """Declare ``specs`` on ``node`` and validate them (``ParameterError``); see
    ``NodeParameters``."""
    return NodeParameters(node, specs, build)


MAX_FILE_ENTRIES = 100_000
"""Most keys ``flattened`` visits: far more than any node has parameters, few enough that a
file whose aliases repeat a mapping billions of times is refused at once."""
MAX_FILE_NESTING = 16
"""Deepest nesting of parameter names (``a.b.c``) ``flattened`` accepts: a mapping that an
alias nests in itself would otherwise make ever longer names."""


def flattened(parameters: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameter-file values (``a: {b: 1}``) under the names ROS gives them
    (``a.b``); ValueError beyond ``MAX_FILE_ENTRIES`` keys or ``MAX_FILE_NESTING`` levels."""
    flat: dict[str, Any] = {}
    pending = [(prefix, parameters, 1)]
    visited = 0
    while pending:
        name, mapping, depth = pending.pop()
        visited += len(mapping)
        if visited > MAX_FILE_ENTRIES or depth > MAX_FILE_NESTING:
            raise ValueError(f"more than {MAX_FILE_ENTRIES} parameter entries or "
                             f"{MAX_FILE_NESTING} levels (YAML aliases repeating a mapping or "
                             "nesting it in itself?)")
        for key, value in mapping.items():
            if isinstance(value, Mapping):
                pending.append((f"{name}{key}.", value, depth + 1))
            else:
                flat[f"{name}{key}"] = value
    return flat


def config_specs(prefix: str, config_class: type[Any]) -> list[ParameterSpec]:
    """Read-only parameters ``<prefix>.<field>`` from a config dataclass made with
    ``mav_geometry.settings.setting`` (description, unit, range, choices)."""
    specs = []
    for item in fields(config_class):
        meta = item.metadata
        default: Any = item.default
        specs.append(ParameterSpec(
            f"{prefix}.{item.name}", list(default) if isinstance(default, tuple) else default,
            meta["doc"], meta["unit"], meta["low"], meta["high"], meta["choices"],
            read_only=True, length=len(default) if isinstance(default, tuple) else None,
            allow_nan=meta["allow_nan"]))
    return specs


def group(values: Values, prefix: str) -> dict[str, Any]:
    """The ``<prefix>.<field>`` values (except ``enabled``) as field -> value."""
    start = f"{prefix}."
    return {name[len(start):]: value for name, value in values.items()
            if name.startswith(start) and name != f"{prefix}.enabled"}
