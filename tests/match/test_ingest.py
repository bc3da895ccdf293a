"""The compiled scanners agree with the specification: the lark grammar and
``Profile.build`` for profile files, ``parse_json_line`` and ``event_from_dict`` for
event files; same values, and the same first error (kind, message, line, column).

Files are random profiles and events of random schemas, written by the printers and then
mutated (characters inserted, deleted and replaced; spacing, letter case, line ends,
BOM, duplicate ids, blank and comment lines): most mutations make errors, which must be
the specification's."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.lang.profile import PROFILE_LIMITS, ProfileLimits, format_profile, load_profiles
from siftbus.match.conformance import _hot, random_event, random_profile, random_type
from siftbus.match.ingest import load_profile_columns, read_event_chunks
from siftbus.model import Schema, read_events
from siftbus.model.textio import TextLimits

ALPHABET = ' \t,()[]{}=<>!:@#"-+.0123456789aeinxAEINX_MINMAXprefixexists\\\r\n\x00é'


def _schema(rnd: random.Random) -> Schema:
    return Schema((random_type(rnd, "T"), random_type(rnd, "U", 3)))


def _mutate(rnd: random.Random, line: str) -> str:
    kind = rnd.randrange(10)
    if not line or kind == 0:
        return line
    i = rnd.randrange(len(line) + 1)
    if kind == 1:
        return line[:i] + rnd.choice(ALPHABET) + line[i:]
    if kind == 2:
        return line[:i] + line[i + 1:]
    if kind == 3:
        return line[:i] + rnd.choice(ALPHABET) + line[i + 1:]
    if kind == 4:
        return line.replace(" ", rnd.choice(["", "  ", "\t"]))
    if kind == 5:
        return line.replace("in ", rnd.choice(["IN ", "In ", "in", "inx "]), 1)
    if kind == 6:
        return line.replace(", ", ",", rnd.randint(0, 3))
    return line


def _respell(rnd: random.Random, line: str) -> str:
    """Other spellings of the same conditions (or of nearly the same: rounding, quoted
    bounds), each at random: quoted enum labels and ``MIN``/``MAX``, decimals with more
    places, escapes and tabs in strings, blanks inside sets."""
    if rnd.random() < 0.5:  # enum labels of the random schemas are L0..L4
        line = re.sub(r"\bL(\d)\b", lambda m: f'"{m[0]}"' if rnd.random() < 0.7 else m[0],
                      line)
    if rnd.random() < 0.2:
        line = re.sub(r"\b(MIN|MAX)\b", r'"\1"', line, count=1)
    if rnd.random() < 0.3:
        line = re.sub(r"(\d+\.\d+)",
                      lambda m: m[0] + rnd.choice(["5", "49", "50", "0", "9", "4999"]), line)
    if rnd.random() < 0.2:
        line = re.sub(r'"([^"]*)"', lambda m: '"' + m[1].replace(
            "a", rnd.choice(["\\u0061", "\\\"", "\\n", "\\/", "\t"])) + '"', line)
    if rnd.random() < 0.2:
        line = line.replace('"', ' "', 1).replace("{", "{ ", 1)
    return line


def _profile_file(rnd: random.Random, schema: Schema, n: int, mutate: float) -> bytes:
    types = list(schema)
    hot = {t.name: _hot(rnd, t) for t in types}
    lines: list[str] = []
    for i in range(n):
        t = rnd.choice(types)
        p = random_profile(rnd, t, f"p{i}" if rnd.random() < 0.9 else f"p{rnd.randrange(n)}",
                           hot[t.name])
        if p is None:
            continue
        text = format_profile(p, form="bittner" if rnd.random() < 0.05 else "native")
        if rnd.random() < 0.5:
            text = _respell(rnd, text)
        r = rnd.random()
        if r < 0.05:
            text = "   # a comment " + text
        elif r < 0.08:
            text = " \t "
        if rnd.random() < mutate:
            text = _mutate(rnd, text)
        lines.append(text)
    return _as_file(rnd, lines)


def _as_file(rnd: random.Random, lines: list[str]) -> bytes:
    """Lines joined by a random line end (and maybe a BOM), as UTF-8."""
    end = rnd.choice(["\n", "\r\n", "\r"])
    data = end.join(lines) + (end if rnd.random() < 0.8 else "")
    return (b"\xef\xbb\xbf" if rnd.random() < 0.1 else b"") + data.encode("utf-8",
                                                                          "surrogatepass")


def _outcome(fn: Callable[[], Any], shape: Callable[[Any], Any]) -> object:
    """``("ok", shape(value))`` or the error's kind, message and location."""
    try:
        return ("ok", shape(fn()))
    except SiftbusError as exc:
        return ("error", type(exc).__name__, exc.message, exc.line, exc.column, exc.source)


def _outcome_profiles(fn: Callable[[], Any]) -> object:
    return _outcome(fn, lambda ps: sorted(ps, key=lambda p: p.id))


def _outcome_events(fn: Callable[[], Any]) -> object:
    return _outcome(fn, lambda es: [(e.etype.name, e.keys) for e in es])


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), mutate=st.sampled_from([0.0, 0.02, 0.3]),
       n=st.integers(0, 40), chunk=st.sampled_from([7, 64, 1 << 20]),
       limits=st.sampled_from([PROFILE_LIMITS, ProfileLimits(max_string=4, max_number=3)]))
def test_profiles_scanned_equal_the_specification(seed: int, mutate: float, n: int,
                                                  chunk: int, limits: ProfileLimits,
                                                  tmp_path: Path) -> None:
    rnd = random.Random(seed)
    schema = _schema(rnd)
    path = tmp_path / f"p{seed}.txt"
    path.write_bytes(_profile_file(rnd, schema, n, mutate))
    want = _outcome_profiles(lambda: load_profiles(path, schema, limits=limits))
    got = _outcome_profiles(lambda: [p for c in load_profile_columns(
        path, schema, fast=True, chunk_bytes=chunk, limits=limits) for p in c.profiles()])
    assert got == want, path.read_bytes()


def test_scanners_take_the_common_lines() -> None:
    """The scanners do take ordinary lines (if every line went to the slow path, the
    agreement tests would pass trivially): all but strings, Bittner's form and repeated
    attributes on random profiles; every line of printed standard events."""
    import numpy as np

    from siftbus.match.events_numba import scan_events
    from siftbus.match.ingest import SchemaTables
    from siftbus.match.scan_numba import OK, SLOW, scan_profiles

    rnd = random.Random(1)
    schema = Schema((random_type(rnd, "T"), random_type(rnd, "U", 3)))
    types = list(schema)
    hot = {t.name: _hot(rnd, t) for t in types}
    lines, events = [], []
    for i in range(300):
        t = types[i % 2]
        p = random_profile(rnd, t, f"p{i}", hot[t.name])
        if p is not None:
            lines.append(format_profile(p))
        events.append(random_event(rnd, t, hot[t.name]).to_json())
    tables = SchemaTables.of(schema)
    status = scan_profiles(np.frombuffer("\n".join(lines).encode(), np.uint8),
                           *tables.args(), 65536, 256, 16384, 1000)[0]
    easy = [not ("PROFILE" in x or "\\" in x) for x in lines]
    assert (status[np.array(easy)] == OK).mean() > 0.6
    quoted = np.array(['"' in x for x in lines]) & np.array(easy)
    assert quoted.sum() > 20 and (status[quoted] == OK).mean() > 0.6
    ev = scan_events(np.frombuffer("\n".join(events).encode(), np.uint8), *tables.args(),
                     tables.max_attrs, 1 << 20)[0]
    plain = np.array(['\\' not in x for x in events])
    assert (ev[plain] != SLOW).all()


def _event_file(rnd: random.Random, schema: Schema, n: int, mutate: float,
                clean: bool = False) -> bytes:
    types = list(schema)
    hot = {t.name: _hot(rnd, t) for t in types}
    lines = []
    for _ in range(n):
        t = rnd.choice(types)
        e = random_event(rnd, t, hot[t.name])
        text = e.to_json()
        r = 1.0 if clean else rnd.random()
        if r < 0.05:
            text = text.replace(": ", ":")
        elif r < 0.1:
            d = json.loads(text)
            k = rnd.choice(list(d))
            text = text[:-1] + f', "{k}": {json.dumps(d[k])}' + "}"  # a repeated key
        elif r < 0.13:
            text = ""
        if rnd.random() < mutate:
            text = _mutate(rnd, text)
        lines.append(text)
    return _as_file(rnd, lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), mutate=st.sampled_from([0.0, 0.02, 0.3]),
       n=st.integers(0, 40), chunk=st.sampled_from([7, 64, 1 << 20]))
def test_events_scanned_equal_the_specification(seed: int, mutate: float, n: int,
                                                chunk: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    schema = _schema(rnd)
    path = tmp_path / f"e{seed}.jsonl"
    path.write_bytes(_event_file(rnd, schema, n, mutate))
    want = _outcome_events(lambda: list(read_events(path, schema)))
    got = _outcome_events(lambda: [e for c in read_event_chunks(path, schema, fast=True,
                                                                chunk_bytes=chunk)
                                   for e in c.events()])
    assert got == want, path.read_bytes()


@pytest.mark.parametrize("fast", [True, False])
def test_event_chunks_number_events_across_chunks(fast: bool, tmp_path: Path) -> None:
    rnd = random.Random(3)
    schema = _schema(rnd)
    path = tmp_path / "e.jsonl"
    path.write_bytes(_event_file(rnd, schema, 200, 0.0, clean=True))
    want = [(e.etype.name, e.keys) for e in read_events(path, schema)]
    chunks = list(read_event_chunks(path, schema, fast=fast, chunk_bytes=300))
    assert [c.first for c in chunks] == [sum(c.n for c in chunks[:i])
                                         for i in range(len(chunks))]
    assert [(e.etype.name, e.keys) for c in chunks for e in c.events()] == want


def _hostile_cases() -> list[tuple[str, str, bytes | tuple[bytes, bytes]]]:
    from hostile_inputs import EVENT_LINES, PROFILE_LINES

    return ([("events", k, v) for k, v in EVENT_LINES.items()]
            + [("profiles", k, v) for k, v in PROFILE_LINES.items()])


@pytest.mark.parametrize(("kind", "name", "bad"), _hostile_cases(),
                         ids=[f"{k}: {n}" for k, n, _ in _hostile_cases()])
def test_hostile_lines_give_the_specifications_error(kind: str, name: str,
                                                     bad: bytes | tuple[bytes, bytes],
                                                     tmp_path: Path) -> None:
    """The hostile corpus of the parsers (as line 2 of a file) through the scanners: the
    same outcome as the specification's readers."""
    from hostile_inputs import GOOD_EVENT, GOOD_PROFILE, SCHEMA, file_with_bad_line_2
    from siftbus.model import load_schema

    schema = load_schema(SCHEMA)
    if kind == "events":
        path = file_with_bad_line_2(tmp_path / "e.jsonl", GOOD_EVENT, bad)
        want = _outcome_events(lambda: list(read_events(path, schema)))
        got = _outcome_events(lambda: [e for c in read_event_chunks(path, schema, fast=True)
                                       for e in c.events()])
    else:
        path = file_with_bad_line_2(tmp_path / "p.txt", GOOD_PROFILE, bad)
        want = _outcome_profiles(lambda: load_profiles(path, schema))
        got = _outcome_profiles(lambda: [p for c in load_profile_columns(path, schema,
                                                                          fast=True)
                                         for p in c.profiles()])
    assert got == want


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), mutate=st.sampled_from([0.0, 0.02, 0.3]),
       n=st.integers(0, 40))
def test_event_texts_scanned_equal_the_specification(seed: int, mutate: float,
                                                     n: int) -> None:
    """Spark's parse stage: each text the scanner answers is exactly parse_event's event
    (bad texts never get one), and ordinary texts are answered."""
    from siftbus.match.ingest import scan_event_texts
    from siftbus.model import parse_event

    rnd = random.Random(seed)
    schema = _schema(rnd)
    raw = _event_file(rnd, schema, n, mutate).decode("utf-8", "replace")
    texts: list[str | None] = [*raw.splitlines(), None, "", "{", "\\u0000"]
    got = scan_event_texts(texts, schema, fast=True)
    assert len(got) == len(texts)
    for text, ev in zip(texts, got, strict=True):
        want = _outcome(lambda t=text: parse_event(t, schema), lambda e: e) \
            if text is not None else None
        if ev is not None:
            assert want == ("ok", ev), text
        elif mutate == 0.0 and isinstance(want, tuple) and want[0] == "ok":
            assert "\\" in str(text) or not str(text).isascii(), text  # taken when plain
    as_bytes = [t.encode("utf-8", "surrogatepass") if t is not None else None for t in texts]
    assert scan_event_texts(as_bytes, schema, fast=True) == got  # Spark hands over bytes
    assert scan_event_texts(texts, schema, fast=False) == [None] * len(texts)
    tight = TextLimits(max_int_digits=3)  # tighter than the scanner: the specification's
    assert scan_event_texts(texts, schema, fast=True, limits=tight) == [None] * len(texts)


@pytest.mark.parametrize("mutate", [0.0, 0.3])
def test_spark_profile_file_loads_as_the_specification(mutate: float, tmp_path: Path) -> None:
    """Spark's subscription loading (a profile file, strict) takes the scanners' path:
    the same profiles, or the same first error, as load_profiles."""
    from siftbus.match import kernel
    from siftbus.spark.subscriptions import ProfileFile

    for seed in range(8):
        rnd = random.Random(seed)
        schema = _schema(rnd)
        path = tmp_path / f"p{seed}.txt"
        path.write_bytes(_profile_file(rnd, schema, 60, mutate))
        kernel.use("numba")  # the scanners, whatever the file's size
        try:
            got = _outcome_profiles(lambda p=path, s=schema: ProfileFile(p).load(s))
        finally:
            kernel.use()
        assert got == _outcome_profiles(lambda p=path, s=schema: load_profiles(p, s)), seed


@pytest.mark.parametrize("mutate", [0.0, 0.3])
def test_spark_profile_file_refresh_skips_what_the_grammar_skips(
        mutate: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A running stream's refresh (``strict=False``): the scanners for a good file, and for
    a file with bad lines exactly the grammar's line-by-line reading, which reports each
    bad line and keeps the rest."""
    from siftbus.lang.profile import iter_profile_lines, read_profile_lines
    from siftbus.match import kernel
    from siftbus.spark.subscriptions import ProfileFile

    for seed in range(8):
        rnd = random.Random(seed)
        schema = _schema(rnd)
        path = tmp_path / f"p{seed}.txt"
        path.write_bytes(_profile_file(rnd, schema, 60, mutate))
        kernel.use("numba")
        try:
            got = ProfileFile(path).load(schema, strict=False)
        finally:
            kernel.use()
        items = list(iter_profile_lines(read_profile_lines(path), schema, source=str(path)))
        bad = [str(x) for x in items if isinstance(x, SiftbusError)]
        assert sorted(got, key=lambda p: p.id) == sorted(
            (x for x in items if not isinstance(x, SiftbusError)), key=lambda p: p.id), seed
        printed = [x for x in capsys.readouterr().err.splitlines() if x]
        assert printed == [f"siftbus: skipped profile: {b}" for b in bad], seed


ESCAPES_SCHEMA = '[E]\nn = "int[0,99]"\ns = "string"\nt = "string"\nc = "enum[red,green]"\n'


def _json_escaped(rnd: random.Random, s: str) -> str:
    """``s`` as a JSON string literal, each character written plain or escaped at random
    (short escapes, ``\\u`` in either letter case, ``\\/``); control characters, quotes,
    backslashes and everything beyond printable ASCII always escaped."""
    out = ['"']
    for ch in s:
        cp = ord(ch)
        r = rnd.random()
        if ch in '"\\' or not 32 <= cp < 127 or r < 0.3:
            if r < 0.5 or cp >= 0x10000:
                out.append(json.dumps(ch)[1:-1] if ch not in "/" else "\\/")
            else:
                out.append(("\\u%04x" if r < 0.75 else "\\u%04X") % cp)
        else:
            out.append(ch)
    return "".join(out) + '"'


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1),
       values=st.lists(st.tuples(st.text(st.one_of(st.sampled_from('ab/"\\\n\t\x00\x7f\x01é€😀'),
                                                    st.characters()), max_size=6),
                                 st.text('ab/"\\é', max_size=4)), min_size=1, max_size=12),
       mutate=st.sampled_from([0.0, 0.2]))
def test_escaped_strings_scanned_equal_json_loads(seed: int, values: list[tuple[str, str]],
                                                  mutate: float, tmp_path: Path) -> None:
    """Event strings with JSON escapes (values, keys, the type, enum labels) stay on the
    compiled path when they decode to ASCII (NUL aside), and every event the scanner
    gives is exactly ``json.loads`` and the specification's: per text (Spark's stage) and
    per file (``siftbus match``), errors included."""
    from siftbus.match.ingest import scan_event_texts
    from siftbus.model import parse_event, parse_schema

    rnd = random.Random(seed)
    schema = parse_schema(ESCAPES_SCHEMA)
    lines, plain = [], []
    for s, t in values:
        fields = {"type": "E", "n": rnd.randrange(100), "s": s, "t": t,
                  "c": rnd.choice(["red", "green"])}
        items = list(fields.items())
        rnd.shuffle(items)
        line = "{" + ", ".join(
            f"{_json_escaped(rnd, k) if rnd.random() < 0.2 else json.dumps(k)}: "
            f"{_json_escaped(rnd, v) if isinstance(v, str) else v}" for k, v in items) + "}"
        mutated = rnd.random() < mutate
        if mutated:
            line = _mutate(rnd, line)
        lines.append(line)
        plain.append(not mutated and all(0 < ord(ch) < 128 for ch in s + t))
    got = scan_event_texts(lines, schema, fast=True)
    for line, ev, easy in zip(lines, got, plain, strict=True):
        want = _outcome(lambda x=line: parse_event(x, schema), lambda e: e)
        if ev is not None:
            assert want == ("ok", ev), line
            assert ev.keys[1:3] == tuple(json.loads(line)[k] for k in "st"), line
        else:
            assert not easy, line  # escapes of ASCII are the compiled path's
    path = tmp_path / f"e{seed}.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    want_file = _outcome_events(lambda: list(read_events(path, schema)))
    assert _outcome_events(lambda: [e for c in read_event_chunks(path, schema, fast=True)
                                    for e in c.events()]) == want_file
