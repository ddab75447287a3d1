"""Reading a user's YAML file: its text and document, or one short error that names the file.

Every loader of the suite (vehicle, mechanism, scenario, campaign, graph and parameter files)
reads its file here, so that each gives the same reasons in the same words: the file cannot
be read (missing, a folder, not UTF-8), or it is not YAML (a syntax error, an integer of
more digits than Python converts, nesting deeper than the parser's recursion). Lives here
because every package that reads files depends on this one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

REASON_CHARACTERS = 300
"""Longest reason an error quotes: the parser's messages quote lines of the file."""


def read_yaml(path: str | Path, kind: str, error: type[ValueError]) -> tuple[str, Any]:
    """The text of the UTF-8 file ``path`` and its YAML document (``yaml.safe_load``).

    Raises ``error`` with the message ``"<kind> file <path>: cannot be read (<reason>)"`` or
    ``"<kind> file <path>: not valid YAML (<reason>)"``, on one line, the reason cut to
    ``REASON_CHARACTERS``, without a chained cause (the message says it all)."""
    where = f"{kind} file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as reason:
        raise error(f"{where}: cannot be read ({_one_line(reason)})") from None
    try:
        return text, yaml.safe_load(text)
    except RecursionError:
        raise error(f"{where}: not valid YAML (nested too deeply)") from None
    except (yaml.YAMLError, ValueError) as reason:  # ValueError: an integer too long to read
        raise error(f"{where}: not valid YAML ({_one_line(reason)})") from None


def _one_line(reason: BaseException) -> str:
    """The reason's text on one line (the parser's spans several), cut."""
    return " ".join(str(reason).split())[:REASON_CHARACTERS]


def finite_number(value: Any) -> float:
    """A YAML value as a finite float, or NaN when it is not one: not a number (a bool is
    not), infinite, NaN, or an integer of more digits than a float holds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        number = float(value)
    except OverflowError:
        return math.nan
    return number if math.isfinite(number) else math.nan
