"""A run's scenario in its report: JSON-ready facts, shaded spans on the time plots and the
markdown list of the timed events."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from variational_sim.vehicle_sim.scenario import EVENT_TYPES, Scenario, ScenarioEvent

if TYPE_CHECKING:  # the runner imports this module: matplotlib only for the report's plots
    from matplotlib.axes import Axes

EVENT_GID = "scenario_event"
"""``gid`` of every artist that marks an event (shaded span or line of a one-sample event)."""
_COLOURS = ("#ff7f0e", "#17becf", "#bcbd22", "#9467bd", "#e377c2", "#8c564b", "#7f7f7f",
            "#2ca02c")
"""Span colours by event type, in order of first appearance (not the blue and red the
plotted series use)."""


def event_facts(event: ScenarioEvent) -> dict[str, Any]:
    """One event as JSON: type, label, start_s, end_s (None: to the end of the run; equal to
    start_s for a one-sample event such as an IMU spike without a duration) and ``values``,
    its value fields by their scenario-file names (a number or a 3-vector)."""
    event_type = EVENT_TYPES[event.type]
    end: float | None = event.end_s
    if math.isinf(event.end_s):
        end = event.start_s if event_type.one_sample else None
    values: dict[str, Any] = {}
    position = 0
    for name, size in event_type.values:
        chunk = list(event.value[position:position + size])
        position += size
        values[name] = chunk if size > 1 else (int(chunk[0]) if name == "rotor" else chunk[0])
    return {"type": event.type, "label": event.label, "start_s": event.start_s,
            "end_s": end, "values": values}


def scenario_facts(scenario: Scenario) -> dict[str, Any]:
    """The run facts of a scenario: ``scenario`` (name), ``scenario_description`` and
    ``events`` (``event_facts`` of each, by start time)."""
    return {"scenario": scenario.name, "scenario_description": scenario.description,
            "events": [event_facts(e) for e in scenario.events]}


def event_span(event: dict[str, Any], end_of_run_s: float) -> tuple[float, float] | None:
    """(start, end) s of an event clipped to the run, None if it starts after the run;
    start == end for a one-sample event."""
    start = float(event["start_s"])
    end = end_of_run_s if event.get("end_s") is None else min(float(event["end_s"]),
                                                              end_of_run_s)
    if start > end_of_run_s or end < start:
        return None
    return start, end


def event_legend_label(event: dict[str, Any]) -> str:
    """``label start-end s`` (``to end`` for an open-ended event)."""
    start = float(event["start_s"])
    if event.get("end_s") is None:
        return f"{event['label']} {start:g} s to end"
    if event["end_s"] == start:
        return f"{event['label']} at {start:g} s"
    return f"{event['label']} {start:g}-{float(event['end_s']):g} s"


def mark_events(axes: Iterable[Axes], events: list[dict[str, Any]],
                end_of_run_s: float) -> int:
    """Shade each event's span on every axis in ``axes`` (a line for a one-sample event),
    labelled on the first axis only so that its legend names each event once; the number
    of marks per axis."""
    colours: dict[str, str] = {}
    for event in events:
        colours.setdefault(event["type"], _COLOURS[len(colours) % len(_COLOURS)])
    drawn = 0
    for index, axis in enumerate(axes):
        drawn = 0
        for event in events:
            span = event_span(event, end_of_run_s)
            if span is None:
                continue
            label = event_legend_label(event) if index == 0 else None
            colour = colours[event["type"]]
            if span[1] > span[0]:
                axis.axvspan(*span, color=colour, alpha=0.18, lw=0, label=label,
                             gid=EVENT_GID, zorder=0)
            else:
                axis.axvline(span[0], color=colour, lw=1.5, ls=":", label=label,
                             gid=EVENT_GID, zorder=0)
            drawn += 1
    return drawn


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    """The scenario section of report.md: name, description and the events' table."""
    name = summary.get("scenario")
    if name is None:
        return []
    lines = [f"## Scenario `{name}`", ""]
    if summary.get("scenario_description"):
        lines += [str(summary["scenario_description"]), ""]
    events = summary.get("events") or []
    if not events:
        return [*lines, "No timed events.", ""]
    end_of_run = summary.get("sim_time_s")
    lines += ["| event | start (s) | end (s) | value |", "|---|---|---|---|"]
    for event in events:
        start = float(event["start_s"])
        if event.get("end_s") is None:
            end = "end of run"
        elif event["end_s"] == start:
            end = "one sample"
        else:
            end = f"{float(event['end_s']):g}"
        note = (" (after the end of the run)" if end_of_run is not None
                and start > float(end_of_run) else "")
        value = ", ".join(f"{name} {_value(v)}" for name, v
                          in (event.get("values") or {}).items()) or "-"
        lines.append(f"| {event['type']}{note} | {start:g} | {end} | {value} |")
    return [*lines, ""]


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(f"{v:g}" for v in value) + "]"
    return f"{value:g}"
