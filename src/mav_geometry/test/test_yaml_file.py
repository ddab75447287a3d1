"""``read_yaml``: a file's text and YAML document, or the caller's error naming the file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mav_geometry.yaml_file import (
    C_PARSER_MAX_DEPTH,
    REASON_CHARACTERS,
    depth_bound,
    finite_number,
    parse_yaml,
    read_yaml,
)


class WidgetError(ValueError):
    """The error class of an imaginary loader: read_yaml must raise exactly it."""


def _rejected(path: Path) -> str:
    """The message read_yaml gives for ``path``, checked to be one line of the caller's class,
    naming the file, with no chained cause."""
    with pytest.raises(WidgetError) as caught:
        read_yaml(path, "widget", WidgetError)
    message = str(caught.value)
    assert message.startswith(f"widget file {path}: "), message
    assert "\n" not in message
    assert len(message) <= len(f"widget file {path}: not valid YAML ()") + REASON_CHARACTERS
    assert caught.value.__cause__ is None
    return message


def test_a_good_file_gives_its_text_and_document(tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text("name: wing\nspan_m: 1.5\nparts: [a, b]\n")
    text, document = read_yaml(path, "widget", WidgetError)
    assert text == "name: wing\nspan_m: 1.5\nparts: [a, b]\n"
    assert document == {"name": "wing", "span_m": 1.5, "parts": ["a", "b"]}
    assert read_yaml(str(path), "widget", WidgetError)[1] == document  # a str path too


def test_an_empty_file_is_an_empty_document(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert read_yaml(path, "widget", WidgetError) == ("", None)


@pytest.mark.parametrize("name", ["missing.yaml", "."], ids=["missing", "folder"])
def test_an_unreadable_path_cannot_be_read(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    message = _rejected(path)
    assert message.startswith(f"widget file {path}: cannot be read ("), message


def test_invalid_utf8_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"name: \xff\xfe\x00\x81")
    assert _rejected(path) == (f"widget file {path}: cannot be read ('utf-8' codec can't "
                               "decode byte 0xff in position 6: invalid start byte)")


def test_bad_yaml_is_not_valid_yaml_with_the_parsers_reason_on_one_line(
        tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("parts: [a, b\n")
    message = _rejected(path)
    assert message.startswith(f"widget file {path}: not valid YAML (while parsing a flow "
                              "sequence in \"<unicode string>\", line 1, column 8"), message


def test_an_integer_of_5000_digits_is_not_valid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("span_m: " + "9" * 5000 + "\n")
    message = _rejected(path)
    assert message.startswith(f"widget file {path}: not valid YAML (Exceeds the limit "), message
    assert "9" * 50 not in message  # the digits are not copied out


def test_a_long_reason_is_cut(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 250 + ".yaml")  # the reason quotes the path: over the limit
    message = _rejected(path)
    reason = message.removeprefix(f"widget file {path}: cannot be read (").removesuffix(")")
    assert reason.startswith("[Errno 2] No such file or directory: "), reason
    assert len(reason) == REASON_CHARACTERS


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    "- " * 50_000 + "x\n",
    "".join(" " * depth + "key:\n" for depth in range(3000)),
], ids=["flow", "compact-block", "indented-block"])
def test_nesting_too_deep_for_python_is_nested_too_deeply_not_a_crash(
        tmp_path: Path, text: str) -> None:
    """libyaml's parser would overflow the C stack on these (the process dies): they go to
    the pure-Python parser, which stops at the recursion limit."""
    assert depth_bound(text) > C_PARSER_MAX_DEPTH
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    assert _rejected(path) == f"widget file {path}: not valid YAML (nested too deeply)"


def test_600_deep_nesting_is_nested_too_deeply(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 600 + "]" * 600)
    assert _rejected(path) == f"widget file {path}: not valid YAML (nested too deeply)"


SHIPPED = sorted((Path(__file__).resolve().parents[3] / "config").rglob("*.yaml"))

awkward = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=40)


def test_the_shipped_files_read_the_same_with_either_parser() -> None:
    assert len(SHIPPED) > 20
    for path in SHIPPED:
        text = path.read_text()
        assert parse_yaml(text) == yaml.safe_load(text), path


@settings(max_examples=150, deadline=None)
@given(document=awkward, flow=st.booleans())
def test_any_document_reads_the_same_with_either_parser_and_within_its_depth_bound(
        document: Any, flow: bool) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow)
    expected = yaml.safe_load(text)
    loaded = parse_yaml(text)
    assert _same(loaded, expected)
    assert _depth(expected) <= depth_bound(text)


def test_without_libyaml_the_python_parser_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(yaml, "CSafeLoader")
    assert parse_yaml("a: [1, {b: .nan}]\n")["a"][0] == 1


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _depth(document: Any) -> int:
    if isinstance(document, list | dict):
        items = document.values() if isinstance(document, dict) else document
        return 1 + max(map(_depth, items), default=0)
    return 0


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3.0), (-2.5, -2.5), (0, 0.0), (10**300, 1e300),
])
def test_finite_numbers_come_back_as_floats(value, expected):
    assert finite_number(value) == expected


@pytest.mark.parametrize("value", [
    True, False, "1.0", None, [1.0], math.inf, -math.inf, math.nan, 10**400, -(10**4000),
])
def test_anything_else_is_nan(value):
    assert math.isnan(finite_number(value))
