"""The one reader for text input: line rules, UTF-8, limits, safe JSON and TOML.

Every reader is checked against a reference written for clarity (decode the whole input,
split with one regex) and fuzzed: the only outcomes are a value or a SiftbusError.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import ConfigError, EventError, InputError, SiftbusError
from siftbus.model.textio import (
    TEXT_LIMITS,
    TextLimits,
    decode_line,
    parse_json_line,
    parse_toml,
    read_lines,
    read_text,
    split_lines,
)

EVENT = '{"type": "T", "a": 1}'


def lines_of(data: bytes, **kw: Any) -> list[tuple[int, str]]:
    return list(read_lines(io.BytesIO(data), source="f.txt", kind=EventError, **kw))


# --- line rules ----------------------------------------------------------------------

@pytest.mark.parametrize(("data", "expected"), [
    (b"a\nb\n", ["a", "b"]),
    (b"a\r\nb\r\n", ["a", "b"]),
    (b"a\rb\r", ["a", "b"]),  # a lone CR ends a line (as check did and match did not)
    (b"a\r\r\nb", ["a", "", "b"]),
    (b"a\n\nb", ["a", "", "b"]),
    (b"last line without end", ["last line without end"]),
    (b"", []),
    (b"\n", [""]),
    (b"\xef\xbb\xbfa\nb", ["a", "b"]),  # a leading BOM is skipped (the pipeline did)
    (b"\xef\xbb\xbf", []),
    (b"a\xef\xbb\xbf\n", ["a\ufeff"]),  # U+FEFF elsewhere is an ordinary character
    (b"a\x0cb\x0bc\xe2\x80\xa8d\n", ["a\x0cb\x0bc\u2028d"]),  # no other line breaks
])
def test_one_rule_for_line_ends_and_bom(data: bytes, expected: list[str]) -> None:
    assert [t for _, t in lines_of(data)] == expected
    assert [t for _, t in split_lines(data.decode("utf-8"))] == expected
    assert [n for n, _ in lines_of(data)] == list(range(1, len(expected) + 1))


def reference_lines(data: bytes, limit: int) -> list[tuple[int, str | None]]:
    """Clear reference: decode all, strip a BOM, split by one regex; None = refused line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    parts = re.split(rb"\r\n|\r|\n", data)
    if parts[-1] == b"":
        parts.pop()
    out: list[tuple[int, str | None]] = []
    for n, p in enumerate(parts, start=1):
        try:
            out.append((n, p.decode("utf-8") if len(p) <= limit else None))
        except UnicodeDecodeError:
            out.append((n, None))
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"\xc3\xa9", b"\xff",
                                 b"\xef\xbb\xbf", b"xxxxxxx"]), max_size=40),
       st.integers(1, 12))
def test_read_lines_agrees_with_a_reference(pieces: list[bytes], limit: int) -> None:
    data = b"".join(pieces)
    errors: list[InputError] = []
    got: dict[int, str | None] = dict(lines_of(data, limits=TextLimits(max_line_bytes=limit),
                                               on_error=errors.append))
    for err in errors:
        assert isinstance(err, EventError) and err.source == "f.txt" and err.line is not None
        got[err.line] = None
    assert sorted(got.items()) == reference_lines(data, limit)


def test_read_lines_locates_bad_utf8_and_goes_on_with_on_error() -> None:
    with pytest.raises(EventError) as info:
        lines_of(b"ok\n\xc3\xa9t\xff\n")
    assert (info.value.line, info.value.column) == (2, 3)  # é counts as one column
    assert "not UTF-8: byte 0xff" in str(info.value)
    errors: list[InputError] = []
    assert lines_of(b"a\n\xff\nb\n", on_error=errors.append) == [(1, "a"), (3, "b")]
    assert [e.line for e in errors] == [2]


def test_a_too_long_line_is_refused_without_being_held() -> None:
    limit = 1 << 16
    data = b"a\n" + b"x" * (50 * limit) + b"\nb\r" + b"y" * (3 * limit) + b"\rc"
    errors: list[InputError] = []
    tracemalloc.start()
    try:
        got = lines_of(data, limits=TextLimits(max_line_bytes=limit), on_error=errors.append)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [(1, "a"), (3, "b"), (5, "c")]
    assert [(e.line, e.column) for e in errors] == [(2, 1), (4, 1)]
    assert "line longer than 65536 bytes (TextLimits.max_line_bytes)" in str(errors[0])
    assert peak < 8 * limit  # not the 3.2 MB line


def test_read_lines_of_a_path_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"a\r\nb")
    assert list(read_lines(p)) == [(1, "a"), (2, "b")]
    with pytest.raises(EventError, match="cannot read") as info:
        list(read_lines(tmp_path / "none", kind=EventError))
    assert info.value.source == str(tmp_path / "none")


def test_read_text_applies_the_same_rules(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_bytes(b"\xef\xbb\xbfa\rb\r\nc\n")
    assert read_text(p) == "a\nb\nc\n"
    p.write_bytes(b"a\rb\r\xc3\xa9\xff\n")
    with pytest.raises(ConfigError) as info:
        read_text(p, kind=ConfigError)
    assert (info.value.line, info.value.column) == (3, 2)
    p.write_bytes(b"x" * 2000)
    with pytest.raises(ConfigError, match="larger than 1000 bytes"):
        read_text(p, kind=ConfigError, limits=TextLimits(max_file_bytes=1000))


# --- JSON ----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "column", "fragment"), [
    ("[" * 100_000, 65, "JSON nested deeper than 64"),
    ('{"a": ' * 100_000, 6 * 64 + 1, "JSON nested deeper than 64"),
    ('{"type": "T", "a": ' + "9" * 5000 + "}", 20, "JSON integer of more than 1000 digits"),
    ('{"a": [1, -' + "9" * 1001 + "]}", 11, "more than 1000 digits"),
    ('{"a": NaN}', 7, "NaN is not a JSON value"),
    ('{"a": -Infinity}', 7, "-Infinity is not a JSON value"),
    ('{"a": 1, "b": 2, "a": 3}', 18, "key 'a' is given twice"),
    ('{"a": "\\ud800"}', 8, "lone UTF-16 surrogate"),
    ('{"a": "\\udc00x"}', 8, "lone UTF-16 surrogate"),
    ('{"a": 1e99999999999999999999}', 7, "out of range"),
    ('{"a": 1', 8, "invalid JSON"),
    ("", 1, "invalid JSON"),
])
def test_bad_json_is_one_located_error(text: str, column: int, fragment: str) -> None:
    with pytest.raises(EventError) as info:
        parse_json_line(text, source="e.jsonl", line=7, kind=EventError, decimals=True,
                        unique_keys=True)
    err = info.value
    assert (err.source, err.line, err.column) == ("e.jsonl", 7, column), str(err)
    assert fragment in str(err)
    assert len(str(err)) < 200


def test_json_limits_are_configurable_and_strings_do_not_count() -> None:
    deep = "[" * 10 + "]" * 10
    assert parse_json_line(deep, limits=TextLimits(max_json_depth=10)) is not None
    with pytest.raises(InputError):
        parse_json_line(deep, limits=TextLimits(max_json_depth=9))
    brackets = json.dumps({"s": "[" * 500 + "{" * 500, "n": "9" * 5000})
    assert parse_json_line(brackets)["s"].startswith("[[[")
    assert parse_json_line("9" * 20, limits=TextLimits(max_int_digits=20)) == int("9" * 20)
    with pytest.raises(InputError, match="more than 19 digits"):
        parse_json_line("9" * 20, limits=TextLimits(max_int_digits=19))


def test_json_lines_and_columns_in_multi_line_text() -> None:
    with pytest.raises(InputError) as info:
        parse_json_line('{\n  "a": [1,\n   ]\n}', line=10)
    assert (info.value.line, info.value.column) == (12, 4)
    assert parse_json_line('"\\ud83d\\ude00"') == "\U0001f600"  # a proper pair is fine
    assert parse_json_line("[1.5]", decimals=True) == [Decimal("1.5")]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids,
                                                              max_size=3),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_parse_json_line_reads_what_json_writes(value: Any) -> None:
    assert parse_json_line(json.dumps(value)) == value
    assert parse_json_line(json.dumps(value, ensure_ascii=False)) == value


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(alphabet='[]{}",:0123456789.-eE \\ntrufalsNI\ud800', max_size=60),
    st.builds(lambda v, cut, junk: json.dumps(v)[:cut] + junk, json_values,
              st.integers(0, 40), st.text(max_size=4)),
))
def test_parse_json_line_fuzz_gives_a_value_or_an_input_error(text: str) -> None:
    for kw in ({}, {"decimals": True, "unique_keys": True},
               {"limits": TextLimits(max_json_depth=2, max_int_digits=3)}):
        try:
            parse_json_line(text, kind=EventError, **kw)  # type: ignore[arg-type]
        except EventError as exc:
            assert exc.line is not None and exc.column is not None
            assert 1 <= exc.column <= len(text) + 1


# --- TOML ----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("a = " + "[" * 100_000, 1, "arrays and inline tables nested deeper than 32"),
    ("x = 1\na = " + "{b = " * 50_000, 2, "nested deeper than 32"),
    ("a = [\n" * 40, 33, "nested deeper than 32"),
    (".".join(["k"] * 100_000) + " = 1", 1, "of more parts than 32"),
    ("[" + ".".join(["k"] * 100_000) + "]", 1, "of more parts than 32"),
    ("x = {" + ".".join(["k"] * 100_000) + " = 1}", 1, "of more parts than 32"),
    ("a = " + "9" * 5000, 1, "integer of more than 4300 digits"),
    ("[a\n", 1, "invalid TOML"),
])
def test_bad_toml_is_one_located_error(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_toml(text, source="c.toml", kind=ConfigError)
    assert (info.value.source, info.value.line) == ("c.toml", line), str(info.value)
    assert fragment in str(info.value)


def test_toml_depth_counts_structure_not_text() -> None:
    text = ('a.b.c = 1\n"x.y.z" = 2\n[t.u]\nv = [[1.5, 2.5, 3.5, 4.5, 5.5]]\n'
            'w = {p.q = 1, r = [1.1, 2.2], s = {}}\n# a.b.c.d.e [[[[\n'
            's = """a.b.c.d[[[[ "" """\nl = \'\'\'[[[[.....\'\'\'\n[[arr.of.t]]\n'
            'm = [\n  [1, 2],  # [[[[ . . . .\n  ["[[[[", \'.....\'],\n]\n')
    limits = TextLimits(max_toml_depth=3)
    assert parse_toml(text, limits=limits) == tomllib.loads(text)
    for deeper in ("a.b.c.d = 1", "[a.b.c.d]", "x = [[[[1]]]]", "x = [{a.b.c.d = 1}]",
                   "x = {a = {b = {c = {}}}}"):
        with pytest.raises(InputError, match="max_toml_depth"):
            parse_toml(deeper, limits=limits)


KEYS = [("a", 1), ("a.b", 2), ('"q.r".s', 2), ("m.n.o", 3), ("'x.y'", 1)]


def toml_values(depth: int) -> st.SearchStrategy[tuple[str, int, int]]:
    """TOML value text, with its bracket nesting and the most parts of a key inside it."""
    leaf = st.sampled_from(["1", "2.5", '"[{."', "'].}'", "true", '"""a\n[["""', "{}"]).map(
        lambda t: (t, 1 if t == "{}" else 0, 0))
    if depth == 0:
        return leaf
    inner = toml_values(depth - 1)
    arrays = st.lists(inner, min_size=1, max_size=2).map(
        lambda xs: ("[" + ", ".join(x[0] for x in xs) + "]", 1 + max(x[1] for x in xs),
                    max(x[2] for x in xs)))
    tables = st.tuples(st.sampled_from(KEYS), inner).map(
        lambda kv: ("{" + kv[0][0] + " = " + kv[1][0] + "}", 1 + kv[1][1],
                    max(kv[0][1], kv[1][2])))
    return st.one_of(leaf, arrays, tables)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), toml_values(5)), min_size=1, max_size=4),
       st.integers(1, 6))
def test_toml_depth_limit_is_exact_on_valid_toml(items: list[tuple[tuple[str, int],
                                                             tuple[str, int, int]]],
                                                 limit: int) -> None:
    # each top-level key gets its own first part, so no table is defined twice
    text = "".join(f"t{i}.{key} = {value}\n" for i, ((key, _), (value, _, _))
                   in enumerate(items))
    expected = tomllib.loads(text)
    depth = max(v[1] for _, v in items)
    parts = max(max(1 + k[1], v[2]) for k, v in items)
    try:
        assert parse_toml(text, limits=TextLimits(max_toml_depth=limit)) == expected
        assert depth <= limit and parts <= limit, (text, limit)
    except InputError as exc:
        assert depth > limit or parts > limit, (text, limit, str(exc))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="[]{}\"'=.,#\n ab1\\", max_size=60))
def test_parse_toml_fuzz_gives_a_value_or_an_input_error(text: str) -> None:
    try:
        value = parse_toml(text, kind=ConfigError, limits=TextLimits(max_toml_depth=2))
    except ConfigError:
        return
    assert value == tomllib.loads(text)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_json_depth"):
        TextLimits(max_json_depth=0)
    assert TEXT_LIMITS.max_line_bytes == 16 << 20


def test_every_outcome_is_a_siftbus_error() -> None:
    assert issubclass(EventError, SiftbusError)
    with pytest.raises(SiftbusError):
        parse_json_line("[" * 100_000)


def test_decode_line_for_readers_that_split_lines_themselves() -> None:
    assert decode_line("é".encode()) == "é"
    with pytest.raises(EventError) as info:
        decode_line(b"ab\xc3\xa9\xfe", source="s", line=4, kind=EventError)
    assert (info.value.source, info.value.line, info.value.column) == ("s", 4, 4)
