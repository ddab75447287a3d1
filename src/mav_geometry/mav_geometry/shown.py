"""User values in error messages: short, and cheap to build whatever the value.

A value read from a file can be anything YAML builds: a string of megabytes, lists nested
hundreds deep, a list that contains itself, or a billion-laughs document whose aliases
make 2 KB of text into a list of 9^9 strings. ``repr`` of those is unbounded in length and
in time; ``shown`` looks at a few items of a few levels only. Lives here because every
core that reads files (vehicle, mechanism and scenario files, configs) depends on this
package.
"""

from __future__ import annotations

import reprlib
from typing import Any

SHOWN_CHARACTERS = 80
"""Longest text ``shown`` returns."""


class _Brief(reprlib.Repr):
    """reprlib with small limits; integers by size (their digits can be thousands long)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = 4
        self.maxset = self.maxfrozenset = self.maxdeque = 4
        self.maxstring = self.maxother = SHOWN_CHARACTERS
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<integer of {x.bit_length()} bits>"
        return repr(x)


_BRIEF = _Brief()


def shown(value: Any) -> str:
    """``value`` as an error message shows it: a repr cut to ``SHOWN_CHARACTERS``, built
    from at most a few items on each of three levels."""
    text = _BRIEF.repr(value)
    if len(text) > SHOWN_CHARACTERS:
        text = text[:SHOWN_CHARACTERS - 3] + "..."
    return text
