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
C_PARSER_MAX_DEPTH = 2000
"""Deepest nesting a text may reach and still go to libyaml's parser. PyYAML builds the
nodes of that parser by recursion on the C stack, which overflows (the process dies) some
tens of thousands of levels down; a text that could nest deeper goes to the pure-Python
parser, which stops at Python's recursion limit with a RecursionError."""


def read_yaml(path: str | Path, kind: str, error: type[ValueError]) -> tuple[str, Any]:
    """The text of the UTF-8 file ``path`` and its YAML document (``parse_yaml``).

    Raises ``error`` with the message ``"<kind> file <path>: cannot be read (<reason>)"`` or
    ``"<kind> file <path>: not valid YAML (<reason>)"``, on one line, the reason cut to
    ``REASON_CHARACTERS``, without a chained cause (the message says it all)."""
    where = f"{kind} file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as reason:
        raise error(f"{where}: cannot be read ({_one_line(reason)})") from None
    try:
        return text, parse_yaml(text)
    except RecursionError:
        raise error(f"{where}: not valid YAML (nested too deeply)") from None
    except (yaml.YAMLError, ValueError) as reason:  # ValueError: an integer too long to read
        raise error(f"{where}: not valid YAML ({_one_line(reason)})") from None


def parse_yaml(text: str) -> Any:
    """The YAML document of ``text`` by PyYAML's safe loader: libyaml's parser (about ten
    times faster) when PyYAML has it and ``text`` cannot nest deeper than
    ``C_PARSER_MAX_DEPTH``, else the pure-Python one. yaml.YAMLError for text that is not
    YAML; RecursionError when nested deeper than Python's recursion allows."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None or depth_bound(text) > C_PARSER_MAX_DEPTH:
        return yaml.safe_load(text)
    return yaml.load(text, Loader=loader)  # CSafeLoader: the safe loader, in C


def depth_bound(text: str) -> int:
    """An upper bound of the nesting depth of the YAML ``text``: a level opens with a flow
    bracket, or on a line of its own at a deeper indentation (a sequence may share its key's
    indentation: two levels per column), or after an indicator ('- ', '? ') on its parent's
    line; so the brackets plus three times the longest line."""
    longest = max(map(len, text.splitlines()), default=0)
    return text.count("[") + text.count("{") + 3 * longest


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
