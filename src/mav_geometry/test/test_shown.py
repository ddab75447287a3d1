"""``shown``: user values in error messages, short whatever they are."""

from __future__ import annotations

import pytest
import yaml

from mav_geometry.shown import SHOWN_CHARACTERS, shown

BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{key}: &{key} [{', '.join([f'*{below}'] * 9)}]\n"
    for below, key in zip("abcdefgh", "bcdefghi", strict=True))


def _contains_itself() -> list[object]:
    value: list[object] = [1]
    value.append(value)
    return value


@pytest.mark.parametrize("value", [
    "x" * 100_000, 10**5000 - 1, yaml.safe_load(BILLION_LAUGHS)["i"], _contains_itself(),
    {f"key_{i}": [i] * 1000 for i in range(1000)}, b"\x00" * 10_000,
], ids=["long_text", "huge_integer", "billion_laughs", "contains_itself", "big_mapping",
        "bytes"])
def test_any_value_is_shown_in_at_most_the_limit(value: object) -> None:
    text = shown(value)
    assert 0 < len(text) <= SHOWN_CHARACTERS


def test_short_values_are_shown_as_repr() -> None:
    assert shown("ccw") == "'ccw'"
    assert shown([1.0, 2.5, None]) == "[1.0, 2.5, None]"
    assert shown(float("nan")) == "nan"
    assert shown(10**400) == "<integer of 1329 bits>"
