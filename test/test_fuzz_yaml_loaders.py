"""Fuzz (Hypothesis) of every YAML file loader of the suite: vehicle files and the controller
gains in them, mechanism files, scenario files, the estimator's parameter files (as
trident-replay reads them), mav-sim's graph file, and ``mav_geometry.settings.configure``
that turns their blocks into configs.

Property: a document either loads or raises the loader's one error type, with a message of
at most ``MESSAGE_LIMIT`` characters that names the file - never another exception type,
never a user value copied out in full. Documents come from three sources: arbitrary nested
mappings and lists of awkward scalars; the shipped files with one edit at a random place
(a key deleted or renamed, a value replaced by a wrong type, NaN, a huge number or string,
deep nesting, the document itself or another node by alias); and a 2 KB billion-laughs
document (nine levels of nine aliases: 9^9 leaves if anything walked or printed it). A
loader that printed or walked the bomb would hang: pytest's timeout ends that test.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mav_bringup.graph.components import load_graph
from mav_dynamics.vehicle_file import load_controller_gains, load_vehicle
from mav_geometry.settings import configure
from trident_ekf.core.measurements import BarometerConfig, MagnetometerConfig
from trident_ekf.core.measurements.gnss import GnssConfig
from trident_ekf.tools.parameter_file import read_parameter_file
from variational_sim.multibody.loader import MechanismFileError, load_mechanism
from variational_sim.vehicle_sim.scenario import ScenarioError, load_scenario

CONFIG = Path(__file__).resolve().parents[1] / "config"
MESSAGE_LIMIT = 1000
HUGE_TEXT = "x" * 3000  # three times the message limit


@dataclass(frozen=True)
class Loader:
    load: Callable[[Path], Any]
    error: type[Exception]
    shipped: tuple[Path, ...]


LOADERS = {
    "vehicle": Loader(load_vehicle, ValueError, tuple(sorted(CONFIG.glob("vehicles/*.yaml")))),
    "controller_gains": Loader(load_controller_gains, ValueError,
                               tuple(sorted(CONFIG.glob("vehicles/*.yaml")))),
    "mechanism": Loader(load_mechanism, MechanismFileError,
                        tuple(sorted(CONFIG.glob("robots/*.yaml")))),
    "scenario": Loader(load_scenario, ScenarioError,
                       tuple(sorted(CONFIG.glob("scenarios/*.yaml")))),
    "estimator_parameters": Loader(
        read_parameter_file, ValueError,
        (CONFIG / "estimator.yaml", CONFIG / "estimator_live.yaml",
         *sorted(CONFIG.glob("replay/*.yaml")))),
    "graph": Loader(load_graph, ValueError, (CONFIG / "graph.yaml",)),
}


def _keys(value: Any) -> set[str]:
    """Every mapping key of a document: fuzzed documents use the real field names too, so
    they get past the first check."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


SHIPPED_DOCUMENTS = {name: [yaml.safe_load(path.read_text()) for path in loader.shipped]
                     for name, loader in LOADERS.items()}
FIELD_NAMES = sorted(set().union(*(_keys(d) for ds in SHIPPED_DOCUMENTS.values() for d in ds)))

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(10**300, 10**400),
    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
    st.text(max_size=8), st.sampled_from(FIELD_NAMES), st.just(HUGE_TEXT))
KEYS = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8), st.integers(),
                 st.just(HUGE_TEXT))
DOCUMENTS = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(KEYS, inner, max_size=5), max_leaves=25)


def nested(depth: int) -> Any:
    """A value nested ``depth`` lists deep."""
    value: Any = 1.0
    for _ in range(depth):
        value = [value]
    return value


def billion_laughs() -> list[Any]:
    """Nine levels of nine references to the level below: yaml.safe_dump writes it as
    anchors and aliases, a document of under 2 KB."""
    level: list[Any] = ["lol"] * 9
    for _ in range(8):
        level = [level] * 9
    return level


BOMB_TEXT = yaml.safe_dump({"bomb": billion_laughs()}, default_flow_style=True)
# A hand-written bomb as an attacker writes it: every level under a key of its own.
BOMB_DOCUMENT = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{key}: &{key} [{', '.join([f'*{below}'] * 9)}]\n"
    for below, key in zip("abcdefgh", "bcdefghi", strict=True))


# ----- one edit of a shipped document -----------------------------------------------------
def _places(document: Any) -> list[tuple[Any, Any]]:
    """(container, key or index) of every value in the document."""
    found: list[tuple[Any, Any]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            found += [(document, key), *_places(value)]
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += [(document, index), *_places(value)]
    return found


REPLACEMENTS = st.one_of(
    SCALARS, st.just([]), st.just({}), st.just(nested(60)),
    st.lists(st.floats(), min_size=0, max_size=12), st.just(["x"] * 3),
    st.just({"unexpected": 1}), st.just(billion_laughs()))
EDITS = ("delete", "rename", "replace", "alias_root", "alias_sibling")


@st.composite
def edited_documents(draw: st.DrawFn, name: str) -> Any:
    """A shipped document of loader ``name`` with one edit at a random place."""
    documents = SHIPPED_DOCUMENTS[name]
    document = copy.deepcopy(documents[draw(st.integers(0, len(documents) - 1))])
    places = _places(document)
    container, key = places[draw(st.integers(0, len(places) - 1))]
    edit = draw(st.sampled_from(EDITS))
    if edit == "delete":
        del container[key]
    elif edit == "rename" and isinstance(container, dict):
        container[draw(KEYS)] = container.pop(key)
    elif edit == "alias_root":
        container[key] = document  # a document that contains itself
    elif edit == "alias_sibling":
        container[key] = places[draw(st.integers(0, len(places) - 1))][0]
    else:
        container[key] = draw(REPLACEMENTS)
    return document


# ----- the property ------------------------------------------------------------------------
def dumped(document: Any) -> str:
    """YAML text of a document: keys as they are, shared and recursive values as aliases
    (libyaml's emitter when there is one: the loaders' pure-Python parser is slow enough)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return str(yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True,
                         width=200))


def rejection(name: str, text: str | bytes, directory: Path) -> Exception | None:
    """Load ``text`` as a file with loader ``name``: None when it loads, else its error,
    checked to be the loader's type, short, and naming the file (any other exception
    propagates and fails the test)."""
    loader = LOADERS[name]
    path = directory / f"fuzzed_{name}.yaml"
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    try:
        loader.load(path)
    except loader.error as error:
        message = str(error)
        assert len(message) <= MESSAGE_LIMIT, f"{len(message)} characters: {message[:300]}"
        assert path.stem in message, message
        return error
    return None


# Few examples: every one is a pure-Python YAML parse of up to 15 kB (0.1 s on a busy CI
# machine). No shrinking: a failing document is reported as drawn (shrinking would parse
# hundreds more).
SETTINGS = dict(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large],
                phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.mark.parametrize("name", LOADERS)
@settings(max_examples=20, **SETTINGS)
@given(document=DOCUMENTS)
def test_arbitrary_documents_load_or_raise_the_loaders_error(
        name: str, document: Any, tmp_path: Path) -> None:
    rejection(name, dumped(document), tmp_path)


@pytest.mark.parametrize("name", LOADERS)
@settings(max_examples=8, **SETTINGS)
@given(data=st.data())
def test_shipped_files_with_one_edit_load_or_raise_the_loaders_error(
        name: str, data: st.DataObject, tmp_path: Path) -> None:
    rejection(name, dumped(data.draw(edited_documents(name))), tmp_path)


MALFORMED_TEXTS = {
    "billion_laughs": BOMB_DOCUMENT,
    "billion_laughs_value": BOMB_TEXT,
    "nested_550_deep": "[" * 550 + "]" * 550,  # beyond what PyYAML recursion allows
    "integer_of_5000_digits": "value: " + "9" * 5000,
    "not_utf8": b"name: \xff\xfe\x00\x81",
    "unknown_parameters": "trident_ekf:\n  ros__parameters:\n" + "".join(
        f"    {'unknown' * 6}_{index}: 1\n" for index in range(300)),
    "tab_indented": "a:\n\tb: 1",
    "unclosed": "{a: [1, 2",
}


@pytest.mark.parametrize(("name", "text"), [
    pytest.param(name, text, id=f"{case}-{name}")
    for case, text in MALFORMED_TEXTS.items() for name in LOADERS])
def test_malformed_text_raises_the_loaders_error(name: str, text: str | bytes,
                                                 tmp_path: Path) -> None:
    assert rejection(name, text, tmp_path) is not None


def test_the_billion_laughs_documents_are_small() -> None:
    assert len(BOMB_DOCUMENT) < 2048
    assert len(BOMB_TEXT) < 2048
    assert len(yaml.safe_load(BOMB_DOCUMENT)["i"]) == 9


# ----- configure: a config block as a file gives it ----------------------------------------
CONFIG_CLASSES = (GnssConfig, BarometerConfig, MagnetometerConfig)


@st.composite
def config_blocks(draw: st.DrawFn) -> tuple[type[Any], dict[Any, Any]]:
    config_class = draw(st.sampled_from(CONFIG_CLASSES))
    names = list(config_class.__dataclass_fields__)
    values = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.just(billion_laughs()))
    block = draw(st.dictionaries(st.sampled_from(names) | KEYS, values, max_size=4))
    return config_class, block


@settings(max_examples=40)
@given(config_blocks())
def test_configure_builds_a_config_or_raises_a_short_value_error(
        case: tuple[type[Any], dict[Any, Any]]) -> None:
    config_class, block = case
    message = ""
    try:
        configure(config_class, block)
    except ValueError as error:
        message = str(error)
    assert len(message) <= MESSAGE_LIMIT, message[:300]
