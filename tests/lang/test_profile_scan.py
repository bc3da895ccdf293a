"""The profile scanner (``lang.profile_scan``) agrees with the lark grammar, the
specification: on generated lines of every form of the language (every operator, ``not``,
``ignorecase``, sets and ranges, numbers, strings with escapes, bare words, dotted paths,
``or`` and nested groups, odd spacing, ids with subscribers, Bittner's form) and on
mutations of them, a line the scanner takes reads exactly as the grammar reads it
(positions included), and ``parse_profile`` gives the same profile or the same error
(kind, message, line, column) with the scanner as without it."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.lang.profile import (
    PROFILE_LIMITS,
    ProfileLimits,
    parse_profile,
    parse_profile_text,
)
from siftbus.lang.profile_scan import scan_profile
from siftbus.model import Profile, parse_schema

SCHEMA = parse_schema("""
[T]
n = "int[0,100]"
d = "decimal[-10,10,2]"
e = "enum[A,B,MAX]"
s = "string"
i = "int"
f = "optional float"
b = "optional bool"
ts = "optional timestamp"
ip = "optional ip"
tags = "array<string>"
[T.c]
tier = "enum[A,B,C]"
[U]
s = "string"
e = "enum[B,C,D]"
n = "int[-10,10]"
""")

PATHS = ["n", "d", "e", "s", "i", "f", "b", "ts", "ip", "tags", "c.tier", "c", "zz",
         "order", "x_1", "a.b.c"]
NUMBERS = ["0", "5", "-3", "+7", "007", "1.5", "-2.25", "0.125", "99.999", "2.50", "-0.0",
           "+10.00", "12345678901234567890"]
WORDS = ["A", "B", "C", "MAX", "MIN", "true", "false", "x"]
ODD = ["In", "in", "or", "not", "exists", "ignorecase", "prefix", "PROFILE", "type", "١",
       "1e3", "1.", "Or"]
"""Keywords as names or words, numbers the grammar reads and the scanner does not, or
neither: now and then, anywhere a name or value goes."""
STRINGS = ["", "a", "ab", "a*b", "*-myapp-*", "10.0.0.0/8", "::1", "[ab]+",
           "2024-05-01T12:00:00Z", "é€😀", "a,b)", 'q"uote', "back\\slash", "tab\there",
           "\x00", "\u2028", "or", ") or (", "x" * 30]
OPS = ["=", "!=", "<", "<=", ">", ">="]
STROPS = ["suffix", "contains", "like", "matches", "cidr"]


def _blank(rnd: random.Random) -> str:
    return rnd.choice(["", " ", " ", " ", "  ", "\t", "\f", " \t "])


def _string(rnd: random.Random) -> str:
    text = json.dumps(rnd.choice(STRINGS), ensure_ascii=rnd.random() < 0.3)
    if rnd.random() < 0.1:  # escapes JSON refuses, or that spell plain characters
        text = text[:-1] + rnd.choice(["\\x", "\\u12", "\\/", "\\u0041", "\\ud800"]) + '"'
    return text


def _value(rnd: random.Random) -> str:
    r = rnd.random()
    return (rnd.choice(ODD) if r < 0.03 else rnd.choice(NUMBERS) if r < 0.35
            else rnd.choice(WORDS) if r < 0.6 else _string(rnd))


def _kw(rnd: random.Random, word: str) -> str:
    """The keyword in another letter case now and then (in, prefix, exists: any case)."""
    return rnd.choice([word, word, word, word.upper(), word.capitalize()])


TYPED = [
    "n = 5", "n > 3", "n in [1, 50]", "n not in {1, 2}", "n != 7", "n <= 100", "n IN {5}",
    "d < 1.25", "d >= -2.5", "d = 0.125", "d in [-1, 2.50]", "d not in [0, 1]",
    "e = A", "e >= B", "e in {A, MAX}", 'e = "B"', "e < MAX", "e > MIN",
    's = "x"', 's prefix "a"', 's not in {"a", "b"}', 's suffix "b" ignorecase',
    's like "*a*"', 's matches "[ab]+"', 's contains "x"', 's = "X" ignorecase',
    's not prefix "q"', 's Prefix "a" ignorecase', 's not like "a*"', 's != "y"',
    "i > -5", "i = 12345678901", "i not in [3, 4]",
    "f < 1.5", "f exists", "f not exists", "f in [0, 2.5]", "f != 0.1",
    "b = true", "b = false", "b not exists",
    'ts > "2024-05-01T12:00:00Z"', "ts exists", 'ts <= "2024-05-01T12:00:00+02:00"',
    'ip cidr "10.0.0.0/8"', 'ip not cidr "10.1.0.0/16"', 'ip = "::1"',
    'tags = "a"', 'tags prefix "x"', 'tags not in {"moon"}', 'tags suffix "z"',
    "c.tier = A", "c.tier != C", "c.tier in {A, B}",
]
TYPED_U = [c for c in TYPED if c[0] in "nes" and c[1] == " "]
PATHS_U = ["n", "e", "s"]
"""Conditions each attribute of :data:`SCHEMA` accepts (or nearly: some exclude every
value together), so that lines become profiles."""


def _cond(rnd: random.Random, typed: list[str], paths: list[str]) -> str:
    if rnd.random() < 0.5:
        return rnd.choice(typed)
    b = lambda: _blank(rnd)  # noqa: E731
    path = rnd.choice(ODD if rnd.random() < 0.03 else paths)
    # words run together now and then: the grammar's \b decides
    g = lambda: "" if rnd.random() < 0.15 else b() or " "  # noqa: E731
    neg = "not" + g() if rnd.random() < 0.3 else ""
    nocase = g() + "ignorecase" if rnd.random() < 0.2 else ""
    form = rnd.randrange(7)
    if form == 0:
        body = f"{rnd.choice(OPS)}{b()}{_value(rnd)}{nocase}"
        neg = "not " if rnd.random() < 0.03 else ""
    elif form == 1:
        body = f"{_kw(rnd, 'in')}{b()}[{b()}{_value(rnd)}{b()},{b()}{_value(rnd)}{b()}]"
    elif form == 2:
        items = f"{b()},{b()}".join(_value(rnd) for _ in range(rnd.randint(1, 4)))
        body = f"{_kw(rnd, 'in')}{b()}{{{b()}{items}{b()}}}"
    elif form == 3:
        body = f"{_kw(rnd, 'prefix')}{g()}{_string(rnd)}{nocase}"
    elif form == 4:
        body = _kw(rnd, "exists") + (nocase if rnd.random() < 0.1 else "")
    else:
        body = f"{rnd.choice(STROPS)}{g()}{_string(rnd)}{nocase}"
    return f"{path}{g()}{neg}{body}"


def _all(rnd: random.Random, typed: list[str], paths: list[str], depth: int = 0) -> str:
    items = []
    for _ in range(rnd.randint(1, 4)):
        groups = []
        for _ in range(rnd.choice([1, 1, 1, 2, 3]) if depth < 3 else 1):
            if depth < 3 and rnd.random() < 0.2:
                groups.append(f"({_blank(rnd)}{_all(rnd, typed, paths, depth + 1)}"
                              f"{_blank(rnd)})")
            else:
                groups.append(_cond(rnd, typed, paths))
        items.append(f"{_blank(rnd) or ' '}or{_blank(rnd) or ' '}".join(groups))
    return f"{_blank(rnd)},{_blank(rnd)}".join(items)


def _line(rnd: random.Random) -> str:
    ident = rnd.choice(["p1: ", "p-2@alice: ", " r/3 :", "", "p1 @x: "])
    etype = rnd.choice(["T"] * 14 + ["U"] * 6 + ["V", "PROFILE", "in"])
    # U has n, e and s too, as other kinds: a condition's meaning depends on its type
    typed, paths = (TYPED_U, PATHS_U) if etype == "U" and rnd.random() < 0.8 else (TYPED,
                                                                                   PATHS)
    body = "" if rnd.random() < 0.05 else _all(rnd, typed, paths)
    if rnd.random() < 0.05:  # Bittner's form: the grammar's alone
        return f"{ident}PROFILE(PRI({body or 'n = 1'},TYPE={etype}))"
    return f"{ident}{_blank(rnd)}{etype}{_blank(rnd)}({_blank(rnd)}{body}{_blank(rnd)})"


ALPHABET = ' \t,()[]{}=<>!:@"\\-+.0123456789aeinorxAEIN_prefixexistsnot\n\x00é'


def _mutate(rnd: random.Random, line: str) -> str:
    i = rnd.randrange(len(line) + 1)
    kind = rnd.randrange(3)
    if kind == 0:
        return line[:i] + rnd.choice(ALPHABET) + line[i:]
    if kind == 1:
        return line[:i] + line[i + 1:]
    return line[:i] + rnd.choice(ALPHABET) + line[i + 1:]


def _outcome(fn: Callable[[], object]) -> object:
    try:
        value = fn()
    except SiftbusError as exc:
        return ("error", type(exc).__name__, exc.message, exc.line, exc.column, exc.source)
    return ("ok", value, repr(value))


LIMITS = [PROFILE_LIMITS, ProfileLimits(max_string=6, max_number=3, max_conditions=3),
          ProfileLimits(max_line=40)]
RUN = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RUN
@given(rnd=st.randoms(use_true_random=True), mutations=st.sampled_from([0, 0, 1, 3]),
       limits=st.sampled_from(LIMITS))
def test_scanner_reads_a_line_as_the_grammar_does(rnd: random.Random, mutations: int,
                                                  limits: ProfileLimits) -> None:
    for _ in range(4):  # several lines, so that conditions kept from one meet the next
        text = _line(rnd)
        for _ in range(mutations):
            text = _mutate(rnd, text)
        _agree(text, rnd.randint(1, 9), limits)


def _agree(text: str, line: int, limits: ProfileLimits) -> None:
    want = _outcome(lambda: parse_profile_text(text, line=line, limits=limits, scanner=False))
    scanned = scan_profile(text, line=line, limits=limits)
    if scanned is not None:  # taken: exactly the grammar's value (never one of its errors)
        assert want == ("ok", scanned.text, repr(scanned.text)), text
        assert len(scanned.keys) == len(scanned.text.conditions)
    assert _outcome(lambda: parse_profile_text(text, line=line, limits=limits)) == want, text
    for schema in (SCHEMA, SCHEMA.get("T")):
        assert schema is not None
        got, spec = (_outcome(partial(parse_profile, text, schema, line=line, limits=limits,
                                      source="rules.txt", scanner=scanner))
                     for scanner in (True, False))
        assert got == spec, text


def test_the_scanner_takes_the_lines_of_every_form() -> None:
    """Without mutations most generated lines are the scanner's (else the agreement test
    above would hold trivially), profiles made by the rule engine of every form among
    them; the EventBridge rules all are."""
    rnd = random.Random(7)
    lines = [_line(rnd) for _ in range(2000)]
    valid = [t for t in lines if _outcome(partial(parse_profile_text, t))[0] == "ok"]
    taken = [t for t in valid if scan_profile(t, limits=PROFILE_LIMITS) is not None]
    assert len(valid) > 0.3 * len(lines)
    assert len(taken) > 0.7 * len(valid)
    made: list[Profile] = []
    for t in taken:
        try:
            made.append(parse_profile(t, SCHEMA))
        except SiftbusError:
            continue
    assert len(made) > 100
    assert any(p.extra is not None and len(p.extra) > 1 for p in made)  # "or"
    for word in ("ignorecase", "not ", " or ", "(", "cidr", "like", "matches", "contains",
                 "suffix", "prefix", "exists", "[", "{", "c.tier", "\\"):
        assert any(word in t for t in taken), word
    rule = ('r7: Ev(env = "prod", number = "7", tags = "tag1", tags = "tag2", '
            'region not in {"moon"}, kind in {"app", "database"}, name like "*-myapp-*")')
    assert scan_profile(rule, limits=PROFILE_LIMITS) is not None


def test_a_kept_condition_still_meets_tighter_limits() -> None:
    """Conditions read once are kept by their text; a later line under tighter limits
    still gets the grammar's error for them."""
    text = 'p: U(s = "abcdefgh")'
    assert parse_profile(text, SCHEMA).id == "p"
    tight = ProfileLimits(max_string=5)
    want = _outcome(lambda: parse_profile(text, SCHEMA, limits=tight, scanner=False))
    assert want[0] == "error"
    assert _outcome(lambda: parse_profile(text, SCHEMA, limits=tight)) == want
