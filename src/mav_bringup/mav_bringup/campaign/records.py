"""What a campaign keeps of one run: its row of the results table and its two small tables
(time series, measurement updates), made from what the closed loop returned or from the
error that stopped it."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.campaign_file import RunSpec

ERROR_CHARACTERS = 600
"""Longest error text kept in a row (type, message and the innermost frames)."""
WALL_TIME = "wall_time_s"
REPRODUCE = "reproduce"
ROW_COLUMNS = (*C.RESULTS_COLUMNS, REPRODUCE, WALL_TIME)
"""The columns every row has, before its ``param.*`` and ``metric.*`` ones."""


class LoopOutput(Protocol):
    """What a run function returns (``mav_bringup.pipeline.closed_loop.LoopResult``)."""

    @property
    def metrics(self) -> Mapping[str, float | int | bool | str]: ...

    @property
    def series(self) -> Mapping[str, np.ndarray]: ...

    @property
    def updates(self) -> Mapping[str, np.ndarray]: ...


RunFunction = Callable[[RunSpec], LoopOutput]
"""Runs one closed-loop run."""


@dataclass
class RunRecord:
    """A finished run: its row and, when it succeeded, its columns of series and updates."""

    row: dict[str, Any]
    series: dict[str, np.ndarray] = field(default_factory=dict)
    updates: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.row[C.STATUS] == C.STATUS_OK)


def _plain(value: Any) -> Any:
    """A value as JSON and Parquet hold it (tuples as lists, numpy scalars as Python's)."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def base_row(spec: RunSpec, status: str, error: str, reproduce: str,
             wall_time_s: float) -> dict[str, Any]:
    """The row's columns that do not depend on the run's outcome, and the outcome."""
    row: dict[str, Any] = {
        C.RUN_ID: spec.run_id, C.CONFIG_HASH: spec.config_hash, C.STATUS: status,
        C.ERROR: error, C.SEED: spec.seed, C.VEHICLE: spec.vehicle.label,
        C.SCENARIO: spec.scenario.label, C.TRAJECTORY: spec.trajectory,
        C.DURATION: spec.duration_s, REPRODUCE: reproduce, WALL_TIME: wall_time_s}
    row.update((f"{C.PARAM_PREFIX}{key}", _plain(value)) for key, value in spec.parameters)
    return row


def error_text(error: BaseException) -> str:
    """The error's type and message and where it was raised, cut to ``ERROR_CHARACTERS``."""
    frames = traceback.extract_tb(error.__traceback__)[-3:]
    where = " <- ".join(f"{frame.name} ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
                        for frame in reversed(frames))
    text = " ".join(f"{type(error).__name__}: {error}".split())
    if where:
        text = f"{text} [at {where}]"
    if len(text) > ERROR_CHARACTERS:
        half = ERROR_CHARACTERS // 2 - 3
        text = f"{text[:half]} ... {text[-half:]}"
    return text


def failed_record(spec: RunSpec, error: str, reproduce: str,
                  wall_time_s: float = float("nan")) -> RunRecord:
    """The record of a run that raised ``error`` (already text) or whose worker died."""
    return RunRecord(base_row(spec, C.STATUS_FAILED, error, reproduce, wall_time_s))


def execute(spec: RunSpec, run_function: RunFunction, reproduce: str,
            show_traceback: bool = False) -> RunRecord:
    """Run ``spec`` and make its record; an exception in the run is the record of a failed
    run (a worker that dies is recorded by the engine), its traceback printed to stderr
    when ``show_traceback``."""
    start = time.perf_counter()
    try:
        result = run_function(spec)
        row = base_row(spec, C.STATUS_OK, "", reproduce, time.perf_counter() - start)
        row.update((f"{C.METRIC_PREFIX}{name}", _plain(value))
                   for name, value in result.metrics.items())
        return RunRecord(row, {name: np.asarray(values) for name, values in result.series.items()},
                         {name: np.asarray(values) for name, values in result.updates.items()})
    except Exception as error:  # any failure of the run is its result: the campaign goes on
        if show_traceback:
            traceback.print_exc()
        return failed_record(spec, error_text(error), reproduce, time.perf_counter() - start)
