"""Issue 31, proof: every engine (index and counting with their residual side list) gives
the reference's answers on random workloads of open kinds, shapes, operators and ``or``,
with interleaved add/remove; covering stays sound (never a false "covers"); the compiled
scanners hand the new syntax to the grammar."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.covering.relations import covers, merge
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.match.engines import make_matcher
from siftbus.match.ingest import scan_profile_texts
from siftbus.model import Event, Profile, event_from_dict, parse_schema

SCHEMA = parse_schema("""
[X]
n = "int[0,5]"
s = "string"
f = "optional float"
tags = "array<string>"
b = "optional bool"
ip = "optional ip"
[X.c]
tier = "enum[A,B,C]"
[P]
n = "int[0,5]"
s = "string"
""")

WORDS = ["", "a", "ab", "ba", "abc", "B", "Ab", "b-a"]
PATTERNS = ["a*", "*a", "*b*", "a*c", "ab", "*"]
REGEXES = ["a.*", "[ab]+", "b?a", ".*c"]


def _q(w: str) -> str:
    return json.dumps(w)


@st.composite
def string_cond(draw: st.DrawFn, attr: str) -> str:
    w = _q(draw(st.sampled_from(WORDS)))
    return draw(st.sampled_from([
        f"{attr} = {w}", f"{attr} != {w}", f"{attr} prefix {w}", f"{attr} suffix {w}",
        f"{attr} contains {w}", f"{attr} = {w} ignorecase", f"{attr} prefix {w} ignorecase",
        f"{attr} suffix {w} ignorecase", f"{attr} not prefix {w}", f"{attr} not suffix {w}",
        f"{attr} not contains {w}", f"{attr} not in {{{w}, \"ab\"}}", f"{attr} in {{{w}, \"a\"}}",
        f"{attr} like {_q(draw(st.sampled_from(PATTERNS)))}",
        f"{attr} not like {_q(draw(st.sampled_from(PATTERNS)))}",
        f"{attr} matches {_q(draw(st.sampled_from(REGEXES)))}",
        f"{attr} exists", f"{attr} not exists",
    ]))


@st.composite
def cond(draw: st.DrawFn, tname: str) -> str:
    k = draw(st.integers(0, 5))
    x = draw(st.sampled_from(["-1.5", "0", "0.25", "2"]))
    options = [
        f"n = {k}", f"n > {k}", f"n != {k}", f"n not in {{{k}, 2}}", f"n in [1, {k}]",
        f"n not in [1, {k}]",
    ]
    out = [st.sampled_from(options), string_cond("s")]
    if tname == "X":
        out += [
            st.sampled_from([f"f < {x}", f"f >= {x}", f"f = {x}", "f exists", "f not exists",
                             f"f not in [{x}, 3]"]),
            string_cond("tags"),
            st.sampled_from(["b = true", "b = false", "b not exists", "b exists"]),
            st.sampled_from(['ip cidr "10.0.0.0/8"', 'ip not cidr "10.1.0.0/16"',
                             'ip = "::1"', "ip not exists"]),
            st.sampled_from(["c.tier = A", "c.tier >= B", "c.tier != C"]),
        ]
    return draw(st.one_of(out))


@st.composite
def body(draw: st.DrawFn, tname: str, depth: int = 0) -> str:
    items = []
    for _ in range(draw(st.integers(0 if depth == 0 else 1, 3))):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            alts = [draw(body(tname, depth + 1)) for _ in range(draw(st.integers(2, 3)))]
            items.append(" or ".join(f"({a})" for a in alts))
        else:
            items.append(draw(cond(tname)))
    return ", ".join(items)


@st.composite
def profile(draw: st.DrawFn, pid: str, tname: str | None = None) -> Profile | None:
    """A profile of ``tname`` (default: either type)."""
    tname = tname or draw(st.sampled_from(["X", "P"]))
    text = f"{pid}: {tname}({draw(body(tname))})"
    try:
        return parse_profile(text, SCHEMA)
    except Exception:  # an unsatisfiable draw: skipped
        return None


@st.composite
def event(draw: st.DrawFn, tname: str | None = None) -> Event:
    """An event of ``tname`` (default: either type)."""
    tname = tname or draw(st.sampled_from(["X", "P"]))
    d: dict[str, object] = {"type": tname, "n": draw(st.integers(0, 5)),
                            "s": draw(st.sampled_from(WORDS))}
    if tname == "X":
        if draw(st.booleans()):
            d["f"] = draw(st.sampled_from([-2.0, -1.5, 0.0, 0.25, 1.0, 2.0, 3.5]))
        d["tags"] = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
        if draw(st.booleans()):
            d["b"] = draw(st.booleans())
        if draw(st.booleans()):
            d["ip"] = draw(st.sampled_from(["10.1.2.3", "10.2.0.1", "::1", "192.168.0.1"]))
        d["c"] = {"tier": draw(st.sampled_from("ABC"))}
    return event_from_dict(d, SCHEMA)


PLAIN = parse_schema('[P]\nn = "int[0,5]"\ns = "string"\n')
"""Only finite kinds, so the compiled scanner runs (it steps aside for extended schemas)."""

RUN = settings(max_examples=60, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@RUN
@given(st.data())
def test_engines_agree_with_the_reference_under_add_and_remove(data: st.DataObject) -> None:
    engines = {name: make_matcher(name) for name in ("index", "counting", "reference")}
    live: list[str] = []
    for step in range(data.draw(st.integers(1, 12))):
        action = data.draw(st.sampled_from(["add", "add", "remove", "match"]))
        if action == "add":
            p = data.draw(profile(f"p{step}"))
            if p is None:
                continue
            for m in engines.values():
                m.add(p)
            live.append(p.id)
        elif action == "remove" and live:
            pid = live.pop(data.draw(st.integers(0, len(live) - 1)))
            for m in engines.values():
                m.remove(pid)
        events = data.draw(st.lists(event(), min_size=1, max_size=4))
        want = engines["reference"].match_batch(events)
        for name, m in engines.items():
            assert m.match_batch(events) == want, name
            assert [m.match(e) for e in events] == want, name
            assert len(m) == len(live)


@RUN
@given(st.data())
def test_index_snapshot_with_side_profiles_agrees_on_columns(data: st.DataObject) -> None:
    from siftbus.match.cells import as_columns  # noqa: F401  (the columnar path exists)

    m, ref = make_matcher("index"), make_matcher("reference")
    for i in range(data.draw(st.integers(1, 6))):
        p = data.draw(profile(f"p{i}"))
        if p is not None and p.type_name == "P":
            m.add(p)
            ref.add(p)
    events = [e for e in data.draw(st.lists(event(), min_size=1, max_size=5))
              if e.type_name == "P"]
    cols = {"n": [e["n"] for e in events], "s": [e["s"] for e in events]}
    snap = m.snapshot()
    got = snap.match_columns("P", cols).rows(snap.profile_ids)
    assert got == ref.match_batch(events)


@RUN
@given(st.data())
def test_covers_is_never_false(data: st.DataObject) -> None:
    p = data.draw(profile("p"))
    q = data.draw(profile("q"))
    if p is None or q is None:
        return
    if data.draw(st.booleans()):  # often make q a narrowing of p, so "covers" is tried
        more = data.draw(cond(p.type_name))
        text = format_profile(p, with_id=False)
        inner = text[text.index("(") + 1:-1]
        try:
            q = parse_profile(f"q: {p.type_name}({inner + ', ' if inner else ''}{more})",
                              SCHEMA)
        except Exception:
            return
    events = data.draw(st.lists(event(), min_size=1, max_size=8))
    if covers(p, q):
        for e in events:
            assert not q.matches(e) or p.matches(e)
    m = merge(p, q)
    if m is not None:  # a perfect merge accepts exactly the union
        for e in events:
            assert m.matches(e) == (p.matches(e) or q.matches(e))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.data(), min_size=1, max_size=1))
def test_scanner_never_misreads_new_syntax(datas: list[st.DataObject]) -> None:
    data = datas[0]
    texts = []
    for i in range(data.draw(st.integers(1, 6))):
        b = data.draw(body("P"))
        texts.append(f"p{i}: P({b})")
    fast = scan_profile_texts(texts, PLAIN, fast=True)
    for text, got in zip(texts, fast, strict=True):
        if got is None:  # handed to the grammar
            continue
        assert got == parse_profile(text, PLAIN), text
        assert not got.extended, text  # the scanner only takes what it reads right


def test_old_syntax_still_takes_the_scanner_and_new_is_handed_over() -> None:
    texts = ['a: P(n = 1)', 'b: P(s suffix "x")', 'c: P(n = 1 or n = 2)',
             'd: P(s not in {"x"})', 'e: P(s = "X" ignorecase)']
    got = scan_profile_texts(texts, PLAIN, fast=True)
    want = [parse_profile(t, PLAIN) for t in texts]
    assert got[0] == want[0]  # old syntax: the scanner's
    assert got[1:] == [None] * 4  # new syntax: handed to the grammar, never misread
    assert [p.extended for p in want] == [False, True, True, False, True]
