"""Campaign files: which closed-loop runs to make, in one YAML file, and their expansion.

::

    name: consistency                 # required: letters a-z, digits, '_' and '-'
    description: text
    duration_s: 60.0                  # simulated time of every run, s (default 60)
    trajectory: figure_eight          # or a list of them (controller 'trajectory' choices)
    vehicles: [quadrotor_x, hexarotor]  # names in config/vehicles/ or paths (default quadrotor_x)
    scenarios: [calm, gusty]          # names in config/scenarios/ or paths (default calm)
    seeds: {start: 0, count: 10}      # or a list [0, 1, 5] (default [0])
    overrides: {trident_ekf.output_rate_hz: 50.0}    # NODE.PARAM: value, every run
    grid: {trident_ekf.gyro_noise: [1.0e-3, 2.0e-3]}  # every combination
    random:                           # draws, each combined with every grid combination
      draws: 20
      seed: 1
      parameters:
        trident_ekf.accel_noise: {log_uniform: [1.0e-3, 1.0e-1]}
        controller.figure_eight_period_s: {uniform: [8.0, 16.0]}
        trident_ekf.filter: {choice: [trident, baseline]}
    rank_by: position_rms_m           # metric the report ranks parameter sets by (lower wins)

Paths are relative to the campaign file's folder. Nodes are ``simulator``, ``controller`` and
``trident_ekf``; each parameter is checked against the node's own specification (name,
type, range) when the file is read, so a typo fails before any run. Every problem is one
``CampaignError`` naming the file and the entry.

Expansion: vehicles x scenarios x trajectories x parameter sets x seeds, one ``RunSpec``
each. A run's ``run_id`` is a short hash of everything that defines it (vehicle and
scenario as written, trajectory, duration, every parameter, seed); its ``config_hash`` is
the same without the seed, so the runs of one parameter set share it. Vehicle and scenario
files are identified by how the campaign names them, not by their contents.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mav_geometry.shown import shown
from mav_geometry.yaml_file import finite_number, read_yaml
from mav_ros_common.resources import ShareNotFoundError, find_named_file

if TYPE_CHECKING:
    from mav_ros_common.parameters import ParameterSpec

KEYS = ("name", "description", "duration_s", "trajectory", "vehicles", "scenarios", "seeds",
        "overrides", "grid", "random", "rank_by")
RANDOM_KEYS = ("draws", "seed", "parameters")
DISTRIBUTIONS = ("uniform", "log_uniform", "choice")
DEFAULT_RANK_BY = "position_rms_m"
MAX_DURATION_S = 86400.0
MAX_SEED = 2**31 - 1
MAX_RUNS = 1_000_000
"""Most runs a campaign may expand to: a larger product is almost certainly a mistake."""
ID_LENGTH = 12
"""Hex digits of ``run_id`` and ``config_hash`` (48 bits: no collision in any campaign)."""

RESERVED = {
    "simulator.vehicle_file": "vehicles", "simulator.vehicles": "vehicles",
    "controller.vehicle_file": "vehicles", "simulator.scenario": "scenarios",
    "simulator.seed": "seeds", "simulator.duration_s": "duration_s",
    "controller.trajectory": "trajectory",
}
"""Parameters the campaign's own keys set (a run's identity is made of those keys)."""

_NAME = re.compile(r"[a-z0-9_-]{1,64}")


class CampaignError(ValueError):
    """A campaign file or entry that cannot be used."""


def node_specs() -> dict[str, dict[str, ParameterSpec]]:
    """The parameter specifications of the nodes a closed-loop run has, by node name."""
    from mav_dynamics.ros.parameters import SPECS as CONTROLLER
    from trident_ekf.ros.parameters import SPECS as ESTIMATOR
    from variational_sim.ros.parameters import SPECS as SIMULATOR

    return {node: {spec.name: spec for spec in specs} for node, specs in (
        ("simulator", SIMULATOR), ("controller", CONTROLLER), ("trident_ekf", ESTIMATOR))}


@dataclass(frozen=True)
class NamedFile:
    """A vehicle or scenario as the campaign names it (``label``, part of the run's identity)
    and what the run is given: the name itself, or the path resolved to an absolute one."""

    label: str
    reference: str


@dataclass(frozen=True)
class Distribution:
    """How a parameter is drawn: ``uniform`` or ``log_uniform`` in [low, high], or a
    ``choice`` among values (equally likely)."""

    kind: str
    values: tuple[Any, ...]

    def draw(self, generator: np.random.Generator) -> Any:
        if self.kind == "choice":
            return self.values[int(generator.integers(len(self.values)))]
        low, high = self.values
        if self.kind == "uniform":
            return float(generator.uniform(low, high))
        return float(math.exp(generator.uniform(math.log(low), math.log(high))))


@dataclass(frozen=True)
class RandomDraws:
    """``draws`` parameter sets drawn with ``numpy.random.default_rng(seed)``."""

    draws: int
    seed: int
    parameters: tuple[tuple[str, Distribution], ...]


@dataclass(frozen=True)
class Campaign:
    """A validated campaign file; ``text`` is the file as read (its identity on disk)."""

    name: str
    description: str
    duration_s: float
    trajectories: tuple[str, ...]
    vehicles: tuple[NamedFile, ...]
    scenarios: tuple[NamedFile, ...]
    seeds: tuple[int, ...]
    overrides: tuple[tuple[str, Any], ...]
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    random: RandomDraws | None
    rank_by: str
    source: Path
    text: str


@dataclass(frozen=True)
class RunSpec:
    """One closed-loop run of a campaign; ``parameters`` are (``NODE.PARAM``, value) pairs,
    the campaign's overrides and the run's parameter set, sorted by name."""

    run_id: str
    config_hash: str
    vehicle: NamedFile
    scenario: NamedFile
    trajectory: str
    duration_s: float
    seed: int
    parameters: tuple[tuple[str, Any], ...]

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The parameters as node -> parameter -> value (``mav-sim --set`` form)."""
        nodes: dict[str, dict[str, Any]] = {}
        for key, value in self.parameters:
            node, _, name = key.partition(".")
            nodes.setdefault(node, {})[name] = list(value) if isinstance(value, tuple) else value
        return nodes


def _closest(word: str, known: list[str]) -> str:
    match = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


def _check_keys(where: str, entry: Mapping[Any, Any], known: tuple[str, ...]) -> None:
    for key in entry:
        if key not in known:
            raise CampaignError(f"{where}: unknown key {shown(key)}"
                                f"{_closest(str(key), list(known))}; known: {', '.join(known)}")


def _integer(where: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CampaignError(f"{where} = {shown(value)} must be an integer in [{low}, {high}]")
    return value


def _number(where: str, value: Any, low: float, high: float) -> float:
    number = finite_number(value)
    if not low <= number <= high:  # NaN: not a finite number
        raise CampaignError(f"{where} = {shown(value)} must be a number in [{low}, {high}]")
    return number


def _text_list(where: str, value: Any) -> list[str]:
    """A string or a non-empty list of strings, without repeats."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(
            isinstance(item, str) and item for item in items):
        raise CampaignError(f"{where} = {shown(value)} must be a name or a non-empty list "
                            "of names")
    if len(set(items)) != len(items):
        raise CampaignError(f"{where} = {shown(value)} names one entry twice")
    return list(items)


def _named_files(where: str, value: Any, kind: str, folder: Path) -> tuple[NamedFile, ...]:
    files = []
    for index, label in enumerate(_text_list(where, value)):
        is_path = "/" in label or label.endswith((".yaml", ".yml"))
        candidate = folder / label if is_path and not Path(label).is_absolute() else Path(label)
        try:
            found = find_named_file(candidate if is_path else label, kind)
        except ShareNotFoundError as error:
            raise CampaignError(f"{where}[{index}]: {str(error)[:300]}") from None
        files.append(NamedFile(label, str(found) if is_path else label))
    return tuple(files)


def _check_scenarios(where: str, scenarios: tuple[NamedFile, ...]) -> None:
    from variational_sim.vehicle_sim.scenario import ScenarioError, load_scenario

    for index, scenario in enumerate(scenarios):
        try:
            load_scenario(find_named_file(scenario.reference, "scenarios"))
        except ScenarioError as error:
            raise CampaignError(f"{where}[{index}]: {str(error)[:300]}") from None


def _parameter(where: str, key: Any, specs: dict[str, dict[str, ParameterSpec]]
               ) -> ParameterSpec:
    """The spec of ``NODE.PARAM`` ``key``; unknown nodes and names with the closest one."""
    if not isinstance(key, str) or "." not in key:
        raise CampaignError(f"{where}: {shown(key)} must be NODE.PARAM, NODE one of "
                            f"{', '.join(specs)}")
    node, _, name = key.partition(".")
    if node not in specs:
        raise CampaignError(f"{where}: unknown node {shown(node)}{_closest(node, list(specs))}"
                            f"; nodes: {', '.join(specs)}")
    if key in RESERVED:
        raise CampaignError(f"{where}: {key} is set by the campaign's '{RESERVED[key]}' key")
    spec = specs[node].get(name)
    if spec is None:
        raise CampaignError(f"{where}: node {node} has no parameter {shown(name)}"
                            f"{_closest(name, list(specs[node]))}")
    return spec


def _value(where: str, spec: ParameterSpec, value: Any) -> Any:
    """``value`` as the node takes it (``spec.check``), or CampaignError with its reason."""
    from mav_ros_common.parameters import ParameterError

    try:
        return spec.check(value)
    except ParameterError as error:
        raise CampaignError(f"{where}: {error}") from None


def _mapping(where: str, value: Any) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CampaignError(f"{where} must be a mapping of NODE.PARAM: ..., got {shown(value)}")
    return value


def _seeds(where: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, dict):
        _check_keys(where, value, ("start", "count"))
        start = _integer(f"{where}.start", value.get("start", 0), 0, MAX_SEED)
        count = _integer(f"{where}.count", value.get("count"), 1, MAX_RUNS)
        if start + count - 1 > MAX_SEED:
            raise CampaignError(f"{where}: seeds {start} to {start + count - 1} go beyond "
                                f"{MAX_SEED}")
        return tuple(range(start, start + count))
    if not isinstance(value, list) or not value:
        raise CampaignError(f"{where} = {shown(value)} must be {{start: S, count: N}} or a "
                            "non-empty list of seeds")
    seeds = tuple(_integer(f"{where}[{i}]", seed, 0, MAX_SEED) for i, seed in enumerate(value))
    if len(set(seeds)) != len(seeds):
        raise CampaignError(f"{where} = {shown(value)} names one seed twice")
    return seeds


def _grid(where: str, value: Any, specs: dict[str, dict[str, ParameterSpec]]
          ) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    grid = []
    for key, values in _mapping(where, value).items():
        spec = _parameter(where, key, specs)
        if not isinstance(values, list) or not values:
            raise CampaignError(f"{where}: {key} = {shown(values)} must be a non-empty list "
                                "of values")
        checked = tuple(_value(f"{where}: {key}[{i}]", spec, v) for i, v in enumerate(values))
        if len(set(map(repr, checked))) != len(checked):
            raise CampaignError(f"{where}: {key} = {shown(values)} has a value twice")
        grid.append((key, checked))
    return tuple(grid)


def _distribution(where: str, spec: ParameterSpec, value: Any) -> Distribution:
    if not isinstance(value, dict) or len(value) != 1:
        raise CampaignError(f"{where} = {shown(value)} must be one of {{uniform: [low, high]}}, "
                            "{log_uniform: [low, high]}, {choice: [values]}")
    kind, values = next(iter(value.items()))
    if kind not in DISTRIBUTIONS:
        raise CampaignError(f"{where}: unknown distribution {shown(kind)}"
                            f"{_closest(str(kind), list(DISTRIBUTIONS))}; known: "
                            f"{', '.join(DISTRIBUTIONS)}")
    if kind == "choice":
        if not isinstance(values, list) or not values:
            raise CampaignError(f"{where}.choice = {shown(values)} must be a non-empty list")
        return Distribution(kind, tuple(_value(f"{where}.choice[{i}]", spec, v)
                                        for i, v in enumerate(values)))
    if not isinstance(spec.default, float):
        raise CampaignError(f"{where}: {kind} draws real numbers; parameter {spec.name} is "
                            "not real-valued (use choice)")
    if not isinstance(values, list) or len(values) != 2:
        raise CampaignError(f"{where}.{kind} = {shown(values)} must be [low, high]")
    low, high = (_value(f"{where}.{kind}[{i}]", spec, v) for i, v in enumerate(values))
    smallest = 0.0 if kind == "log_uniform" else -math.inf
    if not (math.isfinite(low) and math.isfinite(high) and smallest < low <= high):
        raise CampaignError(f"{where}.{kind} = {shown(values)} must be finite with "
                            f"{'0 < ' if kind == 'log_uniform' else ''}low <= high")
    return Distribution(kind, (low, high))


def _random(where: str, value: Any, specs: dict[str, dict[str, ParameterSpec]]
            ) -> RandomDraws | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CampaignError(f"{where} = {shown(value)} must be a mapping of "
                            f"{', '.join(RANDOM_KEYS)}")
    _check_keys(where, value, RANDOM_KEYS)
    draws = _integer(f"{where}.draws", value.get("draws"), 1, MAX_RUNS)
    seed = _integer(f"{where}.seed", value.get("seed", 0), 0, MAX_SEED)
    parameters = _mapping(f"{where}.parameters", value.get("parameters"))
    if not parameters:
        raise CampaignError(f"{where}.parameters: give at least one parameter to draw")
    return RandomDraws(draws, seed, tuple(
        (key, _distribution(f"{where}.parameters.{key}",
                            _parameter(f"{where}.parameters", key, specs), spec_value))
        for key, spec_value in parameters.items()))


def parse_campaign(document: Any, source: Path, text: str = "") -> Campaign:
    """A campaign from a parsed YAML document read from ``source``; errors name the entry."""
    where = f"campaign file {source}"
    if not isinstance(document, dict):
        raise CampaignError(f"{where}: must be a mapping with keys {', '.join(KEYS)}")
    _check_keys(where, document, KEYS)
    name = document.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise CampaignError(f"{where}: name = {shown(name)} must be 1-64 characters of a-z, "
                            "0-9, '_' and '-' (it names the output folder)")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise CampaignError(f"{where}: description must be text")
    specs = node_specs()
    duration = _number(f"{where}: duration_s", document.get("duration_s", 60.0), 1e-3,
                       MAX_DURATION_S)
    trajectories = tuple(
        _value(f"{where}: trajectory", specs["controller"]["trajectory"], trajectory)
        for trajectory in _text_list(f"{where}: trajectory",
                                     document.get("trajectory", "figure_eight")))
    folder = source.parent
    vehicles = _named_files(f"{where}: vehicles", document.get("vehicles", "quadrotor_x"),
                            "vehicles", folder)
    scenarios = _named_files(f"{where}: scenarios", document.get("scenarios", "calm"),
                             "scenarios", folder)
    _check_scenarios(f"{where}: scenarios", scenarios)
    seeds = _seeds(f"{where}: seeds", document.get("seeds", [0]))
    overrides = tuple(
        (key, _value(f"{where}: overrides: {key}", _parameter(f"{where}: overrides", key, specs),
                     value))
        for key, value in _mapping(f"{where}: overrides", document.get("overrides")).items())
    grid = _grid(f"{where}: grid", document.get("grid"), specs)
    random = _random(f"{where}: random", document.get("random"), specs)
    varied = [key for key, _ in grid] + ([key for key, _ in random.parameters] if random else [])
    for key in varied:
        if varied.count(key) > 1 or key in dict(overrides):
            raise CampaignError(f"{where}: {key} is given in more than one of overrides, grid "
                                "and random")
    rank_by = document.get("rank_by", DEFAULT_RANK_BY)
    if not isinstance(rank_by, str) or not re.fullmatch(r"[A-Za-z0-9_.]{1,100}", rank_by):
        raise CampaignError(f"{where}: rank_by = {shown(rank_by)} must be a metric name")
    campaign = Campaign(name, description, duration, trajectories, vehicles, scenarios, seeds,
                        overrides, grid, random, rank_by, source, text)
    total = count_runs(campaign)
    if total > MAX_RUNS:
        raise CampaignError(f"{where}: expands to {total} runs, more than {MAX_RUNS}")
    if random is not None:
        drawn = [repr(sorted(values.items())) for values in parameter_sets(campaign)]
        if len(set(drawn)) != len(drawn):
            raise CampaignError(f"{where}: random draws repeat a parameter set (the same runs "
                                "twice): draw fewer, or from a continuous distribution")
    return campaign


def load_campaign(path: Path) -> Campaign:
    """A campaign file (CampaignError for an unreadable file or any bad entry)."""
    text, document = read_yaml(path, "campaign", CampaignError)
    return parse_campaign(document, Path(path), text)


def find_campaign(name_or_path: str) -> Path:
    """A campaign file given as a path or as a name in the installed ``config/campaigns/``."""
    try:
        return find_named_file(name_or_path, "campaigns")
    except ShareNotFoundError as error:
        raise CampaignError(str(error)[:400]) from None


def parameter_sets(campaign: Campaign) -> Iterator[dict[str, Any]]:
    """Every grid combination with every random draw (the grid alone, the draws alone, or
    one empty set)."""
    draws: list[dict[str, Any]] = [{}]
    if campaign.random is not None:
        generator = np.random.default_rng(campaign.random.seed)
        draws = [{key: distribution.draw(generator)
                  for key, distribution in campaign.random.parameters}
                 for _ in range(campaign.random.draws)]
    keys = [key for key, _ in campaign.grid]
    for combination in itertools.product(*(values for _, values in campaign.grid)):
        for draw in draws:
            yield dict(zip(keys, combination, strict=True)) | draw


def count_runs(campaign: Campaign) -> int:
    """How many runs the campaign expands to (without expanding it)."""
    sets = math.prod(len(values) for _, values in campaign.grid)
    sets *= campaign.random.draws if campaign.random is not None else 1
    return (len(campaign.vehicles) * len(campaign.scenarios) * len(campaign.trajectories)
            * sets * len(campaign.seeds))


def _short_hash(identity: dict[str, Any]) -> str:
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


def expand(campaign: Campaign) -> list[RunSpec]:
    """The campaign's runs: vehicles x scenarios x trajectories x parameter sets x seeds,
    in that nesting order (the seeds of one configuration next to each other)."""
    runs = []
    sets = list(parameter_sets(campaign))
    for vehicle, scenario, trajectory, chosen in itertools.product(
            campaign.vehicles, campaign.scenarios, campaign.trajectories, sets):
        parameters = tuple(sorted((dict(campaign.overrides) | chosen).items()))
        identity = {"vehicle": vehicle.label, "scenario": scenario.label,
                    "trajectory": trajectory, "duration_s": campaign.duration_s,
                    "parameters": [[key, value] for key, value in parameters]}
        config_hash = _short_hash(identity)
        for seed in campaign.seeds:
            runs.append(RunSpec(_short_hash(identity | {"seed": seed}), config_hash, vehicle,
                                scenario, trajectory, campaign.duration_s, seed, parameters))
    return runs
