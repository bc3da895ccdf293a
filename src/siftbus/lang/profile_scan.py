"""The profile scanner: the common native profile line read without the lark grammar.

The grammar (``profile.lark``, :func:`siftbus.lang.profile.parse_profile_text`) is the
specification of the language; it costs about 200 µs for a line of seven conditions,
most of a large rule file's loading time. :func:`scan_profile` reads the same lines
with one regular expression per condition and a few lines of descent for ``,``, ``or``
and parenthesized groups, and gives exactly the :class:`ProfileText` the grammar gives
(positions included), or ``None`` when it is not sure. The caller then asks the
grammar, which gives the value or the error with its line and column: so the scanner
needs to be right only on the lines it takes, and never reports an error itself.

It leaves to the grammar: Bittner's form, any name or bare word that is also a keyword
of the language, lines with a line break, strings the JSON decoder refuses, groups
nested deeper than :data:`MAX_GROUP_DEPTH`, ``or`` expanding past
:data:`~siftbus.model.checks.MAX_DISJUNCTS`, anything over a :class:`ProfileLimits`
limit, a condition ``Predicate`` refuses, and every line it cannot read.
``tests/lang/test_profile_scan.py`` checks scanner and grammar against each other with
hypothesis on generated lines of every form and on mutations of them.

Each condition's text is also the key under which :mod:`siftbus.lang.profile` keeps what
the condition means for a type (:attr:`ScannedProfile.keys`): rules that share conditions
(``env = "prod"``) have them checked against the schema once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from siftbus.errors import ProfileSyntaxError, SiftbusError
from siftbus.lang.profile_text import (
    MAX_GROUP_DEPTH,
    Bare,
    ProfileLimits,
    ProfileText,
    WrittenCondition,
    split_id,
)
from siftbus.model import Op, Predicate
from siftbus.model.checks import MAX_DISJUNCTS
from siftbus.model.predicate import Operand
from siftbus.model.textio import TEXT_LIMITS, parse_json_line

# The grammar's terminals, with ASCII digits (the grammar's \d takes every Unicode digit:
# such numbers go to it) and the grammar's blanks (common.WS without line breaks).
_WS = r"[ \t\f]*+"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*+"
_PATH = rf"{_NAME}(?:\.{_NAME})*+"
_NUMBER = r"[+-]?+[0-9]++(?:\.[0-9]++)?+"
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_VALUE = rf"(?:{_NUMBER}|{_STRING}|{_NAME})"

_HEAD = re.compile(rf"{_WS}({_NAME}){_WS}\(")
_COND_PATTERN = (
    rf"(?P<path>{_PATH}){_WS}(?:"
    rf"(?P<cmp>!=|<=|>=|=|<|>){_WS}(?P<val>{_VALUE})"
    rf"|(?P<not>not\b{_WS})?+(?:"
    rf"(?i:in)\b{_WS}(?:\[{_WS}(?P<lo>{_VALUE}){_WS},{_WS}(?P<hi>{_VALUE}){_WS}\]"
    rf"|\{{(?P<set>{_WS}{_VALUE}(?:{_WS},{_WS}{_VALUE})*+){_WS}\}})"
    rf"|(?P<prefix>(?i:prefix))\b{_WS}(?P<pstr>{_STRING})"
    rf"|(?P<exists>(?i:exists))\b"
    rf"|(?P<strop>suffix|contains|like|matches|cidr)\b{_WS}(?P<sstr>{_STRING})))"
    rf"(?P<nocase>{_WS}ignorecase\b)?+")
_COND = re.compile(_COND_PATTERN)
_FLAT = re.compile(rf"(?P<cond>{_COND_PATTERN}){_WS}(?P<sep>[,)])")
"""A condition and the ``,`` or ``)`` after it: most lines are such conditions only."""
_SET_VALUE = re.compile(rf"{_WS}({_VALUE}){_WS},?+")
_BLANK = re.compile(_WS)
_OR = re.compile(rf"{_WS}or\b")
_END = re.compile(rf"{_WS}\Z")

_KEYWORDS = frozenset({"in", "prefix", "exists", "not", "or", "ignorecase", "suffix",
                       "contains", "like", "matches", "cidr", "profile", "pri", "type"})
"""Words of the language (in any letter case): as a name or bare word they go to the
grammar, whose lexer decides between keyword and name by context."""

_CACHE_SIZE = 1 << 16
_predicates: dict[str, Predicate] = {}
"""Condition text -> its predicate; taken only for a text no longer than the limits on
a string and a number (so each of its literals is within them)."""


@dataclass(frozen=True, slots=True)
class ScannedProfile:
    """A line the scanner read: what the grammar gives it, and each condition's text."""

    text: ProfileText
    keys: tuple[str, ...]
    """The text of each of ``text.conditions`` (as written, from its attribute on)."""


class _Unsure(Exception):
    """The line goes to the grammar."""


def scan_profile(text: str, *, line: int = 1, limits: ProfileLimits) -> ScannedProfile | None:
    """The :class:`ProfileText` the grammar gives ``text`` (read at ``line``, within
    ``limits``), with each condition's text; ``None`` for a line the grammar must read."""
    if len(text) > limits.max_line or "\n" in text or "\r" in text:
        return None
    pid, subscriber, offset = split_id(text)
    head = _HEAD.match(text, offset)
    if head is None or head[1].lower() in _KEYWORDS:
        return None
    try:
        reader = _Reader(text, line, limits)
        pos = _BLANK.match(text, head.end()).end()  # type: ignore[union-attr]
        flat = _flat(reader, text, pos)
        if flat is not None:
            return ScannedProfile(ProfileText(pid, subscriber, head[1], head.start(1) + 1,
                                              flat, "native", line, None),
                                  tuple(reader.keys))
        reader = _Reader(text, line, limits)
        tree: list[object] | None = None
        if pos < len(text) and text[pos] != ")":
            tree, pos = reader.all(pos, 0)
        if text.startswith(")", pos) and _END.match(text, pos + 1) is not None:
            dnf = None if tree is None else reader.dnf(tree, 0)
            if dnf is not None and len(dnf) == 1:
                dnf = None
            return ScannedProfile(
                ProfileText(pid, subscriber, head[1], head.start(1) + 1,
                            tuple(reader.conds), "native", line, dnf),
                tuple(reader.keys))
    except _Unsure:
        pass
    return None


def _flat(reader: _Reader, text: str, pos: int) -> tuple[WrittenCondition, ...] | None:
    """The conditions of a line without ``or`` and groups (its one alternative is
    its conditions: the grammar's ``alternatives`` is ``None``), else ``None``."""
    if text.startswith(")", pos):
        return () if _END.match(text, pos + 1) is not None else None
    while True:
        m = _FLAT.match(text, pos)
        if m is None:
            return None
        reader.condition(m, "cond")
        pos = m.end()
        if m["sep"] == ")":
            return tuple(reader.conds) if _END.match(text, pos) is not None else None
        pos = _BLANK.match(text, pos).end()  # type: ignore[union-attr]


class _Reader:
    """Descent over ``all: any ("," any)*``, ``any: group ("or" group)*`` and
    ``group: cond | "(" all ")"``; trees are ``["all" | "any", children]``, a condition
    is its index in :attr:`conds`."""

    def __init__(self, text: str, line: int, limits: ProfileLimits) -> None:
        self.text = text
        self.line = line
        self.limits = limits
        self.max_conditions = limits.max_conditions
        self.short = min(limits.max_string, limits.max_number)
        self.conds: list[WrittenCondition] = []
        self.keys: list[str] = []

    def all(self, pos: int, nest: int) -> tuple[list[object], int]:
        anys: list[object] = []
        text = self.text
        while True:
            node, pos = self.any(pos, nest)
            anys.append(node)
            pos = _BLANK.match(text, pos).end()  # type: ignore[union-attr]
            if not text.startswith(",", pos):
                return ["all", anys], pos
            pos += 1

    def any(self, pos: int, nest: int) -> tuple[list[object], int]:
        groups: list[object] = []
        text = self.text
        while True:
            pos = _BLANK.match(text, pos).end()  # type: ignore[union-attr]
            if text.startswith("(", pos):
                if nest >= MAX_GROUP_DEPTH - 1:
                    raise _Unsure
                node, pos = self.all(pos + 1, nest + 1)
                pos = _BLANK.match(text, pos).end()  # type: ignore[union-attr]
                if not text.startswith(")", pos):
                    raise _Unsure
                groups.append(node)
                pos += 1
            else:
                m = _COND.match(text, pos)
                if m is None:
                    raise _Unsure
                groups.append(self.condition(m))
                pos = m.end()
            more = _OR.match(text, pos)
            if more is None:
                return ["any", groups], pos
            pos = more.end()

    def condition(self, m: re.Match[str], group: int | str = 0) -> int:
        conds = self.conds
        n = len(conds)
        if n >= self.max_conditions:
            raise _Unsure
        key = m[group]
        pred = _predicates.get(key)
        if pred is None or len(key) > self.short:
            pred = _predicate(m, self.limits)  # a text within these limits is within any
            if len(_predicates) >= _CACHE_SIZE:
                _predicates.clear()
            _predicates[key] = pred
        conds.append(WrittenCondition(pred, self.line, m.start() + 1))
        self.keys.append(key)
        return n

    def dnf(self, tree: list[object] | int, depth: int
            ) -> tuple[tuple[WrittenCondition, ...], ...]:
        """The grammar's ``_dnf``: the same alternatives, or ``_Unsure`` where it refuses."""
        if depth > MAX_GROUP_DEPTH:
            raise _Unsure
        if isinstance(tree, int):
            return ((self.conds[tree],),)
        kind, children = tree
        assert isinstance(children, list)
        if kind == "all":
            out: list[tuple[WrittenCondition, ...]] = [()]
            for child in children:
                alts = self.dnf(child, depth)
                if len(out) * len(alts) > MAX_DISJUNCTS:
                    raise _Unsure
                out = [a + b for a in out for b in alts]
            return tuple(out)
        found: list[tuple[WrittenCondition, ...]] = []
        for child in children:
            found.extend(self.dnf(child, depth + 1))
            if len(found) > MAX_DISJUNCTS:
                raise _Unsure
        return tuple(found)


def _predicate(m: re.Match[str], limits: ProfileLimits) -> Predicate:
    path = m["path"]
    if path.lower() in _KEYWORDS:
        raise _Unsure
    negated, nocase = m["not"] is not None, m["nocase"] is not None
    op: Op
    if m["cmp"] is not None:
        op, values = Op(m["cmp"]), [_literal(m["val"], limits)]
    elif m["lo"] is not None:
        op, values = Op.RANGE, [_literal(m["lo"], limits), _literal(m["hi"], limits)]
    elif m["set"] is not None:
        op = Op.IN
        values = [_literal(v, limits) for v in _SET_VALUE.findall(m["set"])]
    elif m["prefix"] is not None:
        op, values = Op.PREFIX, [_literal(m["pstr"], limits)]
    elif m["exists"] is not None:
        op, values = Op.EXISTS, []
    else:
        op, values = Op(m["strop"]), [_literal(m["sstr"], limits)]
    if nocase and (m["cmp"] is None and m["prefix"] is None and m["strop"] is None):
        raise _Unsure  # the grammar has no ignorecase after sets, ranges and exists
    try:
        return Predicate(path, op, tuple(values), negated, nocase)
    except SiftbusError:
        raise _Unsure from None


def _literal(token: str, limits: ProfileLimits) -> Operand:
    """The grammar's value of a NUMBER, STRING or NAME token."""
    first = token[0]
    if first == '"':
        if len(token) > limits.max_string:
            raise _Unsure
        inner = token[1:-1]
        if "\\" not in inner and inner.isprintable():  # JSON's string, nothing to decode
            return inner
        try:
            value = parse_json_line(token, kind=ProfileSyntaxError, limits=TEXT_LIMITS)
        except SiftbusError:
            raise _Unsure from None
        assert isinstance(value, str)
        return value
    if first == "+" or first == "-" or "0" <= first <= "9":
        if len(token) > limits.max_number:
            raise _Unsure
        return Decimal(token) if "." in token else int(token)
    if token.lower() in _KEYWORDS:
        raise _Unsure
    return Bare(token)  # type: ignore[return-value]  # resolved against the schema later
