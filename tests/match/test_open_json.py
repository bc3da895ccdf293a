"""Issue 31 item 8: JSON events matched by the compiled open index (``match.open_batch``,
``match.open_numba``) answer exactly what the specification's parser and the reference
answer, line by line and for whole files (blank lines, CRLF, a BOM), and raise the same
first error; the Python path (``compiled=False``) is held to the same."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.lang.profile import parse_profile
from siftbus.match.engines import make_matcher
from siftbus.match.open_batch import JsonEventMatcher
from siftbus.model import Profile, parse_event, parse_schema, read_events

SCHEMA = parse_schema("""
[W]
s = "string"
o = "optional string"
tags = "array<string>"
ot = "optional array<string>"
[N]
s = "string"
n = "int"
""")
WORDS = ["", "a", "ab", "ba", "abc", "B", "Ab", "b-a", "aB*c", "é", 'x"y', "Ab\\u"]

RUN = settings(max_examples=40, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def string_cond(draw: st.DrawFn, attr: str) -> str:
    """Conditions the kernel answers (``matches`` only now and then: it sends the type's
    events to the Python path)."""
    w = json.dumps(draw(st.sampled_from(WORDS[:8])))
    pattern = json.dumps(draw(st.sampled_from(["a*", "*a", "*b*", "a*c", "ab", "*", "*-*"])))
    return draw(st.sampled_from([
        f"{attr} = {w}", f"{attr} != {w}", f"{attr} prefix {w}", f"{attr} suffix {w}",
        f"{attr} contains {w}", f"{attr} = {w} ignorecase", f"{attr} prefix {w} ignorecase",
        f"{attr} suffix {w} ignorecase", f"{attr} not prefix {w}", f"{attr} not suffix {w}",
        f"{attr} not contains {w}", f"{attr} not in {{{w}, \"ab\"}}",
        f"{attr} in {{{w}, \"a\"}}", f"{attr} like {pattern}", f"{attr} not like {pattern}",
        f"{attr} exists", f"{attr} not exists", f"{attr} = {w}", f"{attr} not in {{{w}}}",
    ] + ([f"{attr} matches \"a.*\""] if draw(st.integers(0, 20)) == 0 else [])))


@st.composite
def profile(draw: st.DrawFn, pid: str) -> Profile | None:
    tname = draw(st.sampled_from(["W", "W", "W", "N"]))
    attrs = ["s", "o", "tags", "ot"] if tname == "W" else ["s"]
    conds = [draw(string_cond(draw(st.sampled_from(attrs))))
             for _ in range(draw(st.integers(0, 3)))]
    if tname == "N" and draw(st.booleans()):
        conds.append(f"n > {draw(st.integers(-2, 2))}")
    if len(conds) >= 2 and draw(st.booleans()):
        conds = [f"({conds[0]}) or ({conds[1]})", *conds[2:]]
    try:
        return parse_profile(f"{pid}: {tname}({', '.join(conds)})", SCHEMA)
    except SiftbusError:
        return None


def _value(draw: st.DrawFn, array: bool) -> object:
    word = st.sampled_from(WORDS[:9])  # mostly what the kernel reads
    if draw(st.integers(0, 9)) == 0:  # and now and then what it leaves to the parser
        return draw(st.one_of(st.sampled_from(WORDS[9:]), st.none(), st.integers(-3, 3),
                              st.booleans(), st.just({"x": 1}), st.just([1])))
    if array and draw(st.booleans()):
        return draw(st.lists(word, max_size=3))
    return draw(word)


@st.composite
def line(draw: st.DrawFn) -> str:
    tname = draw(st.sampled_from(["W"] * 6 + ["N", "Q"]))
    d: dict[str, object] = {"type": tname}
    names = ["s", "o", "tags", "ot"] if tname != "N" else ["s", "n"]
    for name in names:
        if draw(st.integers(0, 5)):
            d[name] = (draw(st.integers(-3, 3)) if name == "n"
                       else _value(draw, name in ("tags", "ot")))
    for extra in draw(st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True)):
        d[extra] = draw(st.one_of(st.integers(-5, 5), st.floats(-2, 2), st.booleans(),
                                  st.none(), st.sampled_from(WORDS), st.just({"z": [1]}),
                                  st.just([{"a": [1, "b", None]}, {}, []]), st.just([])))
    keys = list(d)
    order = draw(st.permutations(keys))
    sep = draw(st.sampled_from([", ", ",", " ,\t"]))
    body = sep.join(f"{json.dumps(k)}: {json.dumps(d[k], ensure_ascii=draw(st.booleans()))}"
                    for k in order)
    text = "{" + body + "}"
    twist = draw(st.integers(0, 20))
    if twist == 0:
        text = text[:-1]  # broken JSON
    elif twist == 1 and len(order) > 1:
        text = text[:-1] + f', {json.dumps(order[0])}: "a"}}'  # a repeated key
    elif twist == 2:
        text = "  " + text + " \t"
    elif twist == 3:  # a repeated key in an undeclared object (the reader refuses it)
        text = text[:-1] + ', "u": {"z": 1, "y": [{"z": 1}], "z": 2}}'
    elif twist == 4:  # the same keys in sibling objects are fine
        text = text[:-1] + ', "u": [{"z": 1, "y": {"z": 1}}, {"z": 2}]}'

    return text


def _expect(matcher: object, text: str) -> list[str] | type[SiftbusError]:
    try:
        event = parse_event(text, SCHEMA)
    except SiftbusError as exc:
        return type(exc)
    return matcher.match(event)  # type: ignore[attr-defined, no-any-return]


@RUN
@given(st.data())
def test_json_lines_match_as_the_specification_says(data: st.DataObject) -> None:
    matcher, ref = make_matcher("index"), make_matcher("reference")
    json_fast = JsonEventMatcher(matcher, SCHEMA, compiled=True)
    json_slow = JsonEventMatcher(matcher, SCHEMA, compiled=False)
    live: list[str] = []
    for step in range(data.draw(st.integers(1, 8))):
        if live and data.draw(st.integers(0, 3)) == 0:
            pid = live.pop(data.draw(st.integers(0, len(live) - 1)))
            matcher.remove(pid)
            ref.remove(pid)
        p = data.draw(profile(f"p{step}"))
        if p is not None:
            matcher.add(p)
            ref.add(p)
            live.append(p.id)
        for text in data.draw(st.lists(line(), min_size=1, max_size=5)):
            want = _expect(ref, text)
            for jm in (json_fast, json_slow):
                if isinstance(want, list):
                    assert jm.match(text) == want, text
                    assert jm.match(text.encode()) == want, text
                else:
                    with pytest.raises(want):
                        jm.match(text)


@settings(max_examples=20, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_json_files_match_as_read_events_says(tmp_path: Path, data: st.DataObject) -> None:
    matcher = make_matcher("index")
    for i in range(data.draw(st.integers(1, 6))):
        p = data.draw(profile(f"p{i}"))
        if p is not None:
            matcher.add(p)
    lines = data.draw(st.lists(st.one_of(line(), st.just(""), st.just("  ")), max_size=12))
    end = data.draw(st.sampled_from(["\n", "\r\n", "\r"]))
    raw = end.join(lines).encode() + (end.encode() if data.draw(st.booleans()) else b"")
    if data.draw(st.booleans()):
        raw = b"\xef\xbb\xbf" + raw
    path = tmp_path / "events.jsonl"
    path.write_bytes(raw)
    try:
        want: object = matcher.match_batch(list(read_events(path, SCHEMA)))
    except SiftbusError as exc:
        want = str(exc)
    for compiled in (True, False):
        jm = JsonEventMatcher(matcher, SCHEMA, compiled=compiled)
        try:
            rows: list[list[str]] = []
            for chunk in jm.match_file(path):
                if chunk.rows is not None:
                    rows.extend(chunk.rows)
                else:
                    ids = chunk.ids.profile_ids  # type: ignore[union-attr]
                    off = chunk.offsets.tolist()
                    rows.extend([str(ids[k]) for k in chunk.profiles[off[i]:off[i + 1]]]
                                for i in range(chunk.n))
            got: object = rows
        except SiftbusError as exc:
            got = str(exc)
        assert got == want
        try:
            got = _rows_of_arrays(jm, path)
        except SiftbusError as exc:
            got = str(exc)
        assert got == want


def _rows_of_arrays(jm: JsonEventMatcher, path: Path) -> list[list[str]]:
    rows: list[list[str]] = []
    for a in jm.match_file_arrays(path):
        assert a.first == len(rows) and a.events.dtype == np.int64
        part: list[list[str]] = [[] for _ in range(a.n)]
        for e, k in zip(a.events.tolist(), a.profiles.tolist(), strict=True):
            part[e - a.first].append(str(a.ids[k]))
        rows.extend(part)
    return rows


@pytest.mark.parametrize("compiled", [True, False])
def test_a_key_repeated_in_a_nested_undeclared_object_is_the_readers_error(
        compiled: bool) -> None:
    matcher = make_matcher("index")
    matcher.add(parse_profile('p: W(s = "a")', SCHEMA))
    jm = JsonEventMatcher(matcher, SCHEMA, compiled=compiled)
    head = '{"type": "W", "s": "a", "tags": "x", '
    assert jm.match(head + '"u": [{"z": 1, "y": {"z": 1}}, {"z": 2}]}') == ["p"]
    with pytest.raises(SiftbusError, match="given twice"):
        jm.match(head + '"u": {"z": 1, "y": [{"z": 1}], "z": 2}}')


@RUN
@given(st.data())
def test_rules_sharing_their_conditions_match_as_the_reference_says(
        data: st.DataObject) -> None:
    """The kernel checks alternatives with the same conditions once (one access record)
    and emits their profiles together; a profile with several alternatives (``or``), some
    in such a group, still appears once and rows stay sorted by id."""
    matcher, ref = make_matcher("index"), make_matcher("reference")
    jm = JsonEventMatcher(matcher, SCHEMA, compiled=True)
    for i in range(data.draw(st.integers(1, 6))):
        p = data.draw(profile(f"p{i}"))
        if p is None:
            continue
        for k in range(data.draw(st.integers(1, 4))):  # copies: ids sort around others
            copy = dataclasses.replace(p, id=f"{'zab'[k % 3]}{k}{p.id}")
            matcher.add(copy)
            ref.add(copy)
    live = sorted(q.id for q in ref.profiles())
    if live and data.draw(st.booleans()):
        gone = data.draw(st.sampled_from(live))
        matcher.remove(gone)
        ref.remove(gone)
    for text in data.draw(st.lists(line(), min_size=1, max_size=6)):
        want = _expect(ref, text)
        if isinstance(want, list):
            assert jm.match(text) == want, text
        else:
            with pytest.raises(want):
                jm.match(text)


def test_keys_of_every_length_are_told_apart_by_all_their_bytes() -> None:
    """A hash slot holds a key's first 16 bytes: keys that differ only after them, or
    only in one of them, and ignore-case and prefix/suffix keys of those lengths."""
    words = ["a" * n for n in (7, 8, 9, 15, 16, 17, 24, 40)]
    words += [w[:-1] + "b" for w in words] + [w[:3] + "B" + w[4:] for w in words[1:]]
    matcher, ref = make_matcher("index"), make_matcher("reference")
    for i, w in enumerate(words):
        for j, cond in enumerate([f's = "{w}"', f's = "{w}" ignorecase', f's prefix "{w}"',
                                  f's suffix "{w}" ignorecase', f'o not in {{"{w}"}}',
                                  f'tags prefix "{w}" ignorecase']):
            p = parse_profile(f"p{i}_{j}: W({cond})", SCHEMA)
            matcher.add(p)
            ref.add(p)
    for i in range(0, 400, 2):  # many keys alike in their first 16 bytes: slots they
        p = parse_profile(f'q{i}: W(s = "{"k" * 16}{i:03d}")', SCHEMA)  # share with
        matcher.add(p)  # the lookups of the odd ones, which are in no slot
        ref.add(p)
    jm = JsonEventMatcher(matcher, SCHEMA, compiled=True)
    assert jm.program() is not None
    for w in words + [w + "c" for w in words] + ["c" + w for w in words] + [
            w[:-1] + "c" for w in words] + [w[:3] + "C" + w[4:] for w in words] + [
            f"{'k' * 16}{i:03d}" for i in range(400)]:
        for other in ("x", w.upper(), w[:-1]):
            text = json.dumps({"type": "W", "s": w, "o": other, "tags": [other, w]})
            assert jm.match(text) == ref.match(parse_event(text, SCHEMA)), text
