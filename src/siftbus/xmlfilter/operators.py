"""Condition operators: names, operand checks, reference semantics and per-path indexes.

Every operator compares one event value (a string: an element's string-value or an attribute
value) with the condition's operand values. Operators are looked up by ``operatorId``; the
registry accepts the thesis's spellings (``string-equal``, ``attribute-exist``) as aliases,
and unknown ids are refused when the subscription is made.

=====================  ========  ==========================================================
operator               operands  the event value ``v`` satisfies it iff
=====================  ========  ==========================================================
``attribute-exists``   0         always (the path is present; that is checked before)
``string-equals``      1         ``v == x``
``string-in-set``      >= 1      ``v`` is one of the operands
``string-match``       1         ``v`` matches the glob ``x`` as a whole: ``*`` = any
                                 sequence, ``?`` = one character, nothing else is special
``match-epc``          1         ``v`` is an EPC URN matched by the pattern ``x`` (below)
``numeric-eq`` …       1         ``v`` is a decimal number and ``v OP x`` (eq, ne, lt, le,
                                 gt, ge)
=====================  ========  ==========================================================

EPC patterns: ``urn:epc:[id:|idpat:|pat:|tag:]SCHEME:F1.F2...``; each field is a literal, ``*``
(any field) or ``[lo-hi]`` (a decimal field in that inclusive range). The value must be
``urn:epc:[id:|tag:]SCHEME:G1.G2...`` with the same scheme and the same number of fields.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from siftbus.errors import SubscriptionError
from siftbus.xmlfilter.limits import quoted

Kind = Literal["exists", "equals", "in-set", "match", "epc", "numeric"]

_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")


def parse_number(text: str) -> float | None:
    """The decimal number a value spells, or None (no NaN, infinity or underscores)."""
    if not _NUMBER.match(text):
        return None
    try:
        x = float(text)
    except ValueError:  # the pattern's \s takes separators float() refuses ('0\x1f')
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class OperatorSpec:
    """One operator: canonical name, kind and the number of operands it takes."""

    name: str
    kind: Kind
    min_values: int
    max_values: int | None
    #: for numeric operators: eq, ne, lt, le, gt, ge
    cmp: str = ""


_SPECS: dict[str, OperatorSpec] = {}
_ALIASES: dict[str, str] = {}


def _register(spec: OperatorSpec, *aliases: str) -> None:
    _SPECS[spec.name] = spec
    for a in (spec.name, *aliases):
        _ALIASES[a] = spec.name


_register(OperatorSpec("attribute-exists", "exists", 0, 0), "attribute-exist", "exists")
_register(OperatorSpec("string-equals", "equals", 1, 1), "string-equal", "equals")
_register(OperatorSpec("string-in-set", "in-set", 1, None), "string-in", "in-set")
_register(OperatorSpec("string-match", "match", 1, 1), "string-matches", "glob")
_register(OperatorSpec("match-epc", "epc", 1, 1), "epc-match")
for _cmp, _long in (
    ("eq", "equals"),
    ("ne", "not-equals"),
    ("lt", "less-than"),
    ("le", "less-or-equal"),
    ("gt", "greater-than"),
    ("ge", "greater-or-equal"),
):
    _register(OperatorSpec(f"numeric-{_cmp}", "numeric", 1, 1, _cmp), f"numeric-{_long}")


def operator_names() -> list[str]:
    """Canonical names of all operators."""
    return sorted(_SPECS)


def lookup(operator_id: str) -> OperatorSpec:
    """The operator for an id or alias; :class:`SubscriptionError` if unknown."""
    name = _ALIASES.get(operator_id.strip())
    if name is None:
        raise SubscriptionError(
            f"unknown operatorId {quoted(operator_id)} (known: {', '.join(operator_names())})",
            field="operatorId",
        )
    return _SPECS[name]


# -- operand normalisation --------------------------------------------------------------


def normalise_values(spec: OperatorSpec, values: Iterable[str]) -> tuple[str, ...]:
    """Check the operands of a condition and return them in canonical order."""
    vals = tuple(values)
    n = len(vals)
    if n < spec.min_values or (spec.max_values is not None and n > spec.max_values):
        want = (
            f"exactly {spec.min_values}"
            if spec.min_values == spec.max_values
            else f"at least {spec.min_values}"
        )
        raise SubscriptionError(
            f"operator {spec.name!r} takes {want} value(s), got {n}", field="value"
        )
    if spec.kind == "in-set":
        return tuple(sorted(set(vals)))
    if spec.kind == "numeric":
        x = parse_number(vals[0])
        if x is None:
            raise SubscriptionError(
                f"operator {spec.name!r} needs a decimal number, got {quoted(vals[0])}",
                field="value",
            )
        return (repr(x),)
    if spec.kind == "epc":
        EpcPattern.parse(vals[0])
    return vals


# -- reference semantics ------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (``*`` any sequence, ``?`` one character) to an anchored regex.

    The reference reading of a glob, for the oracle; a run of stars is one star. The
    matcher uses :class:`Glob`, which cannot backtrack.
    """
    out: list[str] = []
    for ch in pattern:
        if ch == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class _Segment:
    """A star-free piece of a glob: a literal, or fixed-length text with ``?`` in it."""

    __slots__ = ("rx", "size", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)
        # a pattern of fixed length without quantifiers: no backtracking is possible
        self.rx = (re.compile("".join("." if c == "?" else re.escape(c) for c in text),
                              re.DOTALL) if "?" in text else None)

    def at(self, v: str, i: int) -> bool:
        """Does the segment occur at ``v[i:]``?"""
        if self.rx is None:
            return v.startswith(self.text, i)
        return self.rx.match(v, i) is not None

    def find(self, v: str, start: int, end: int) -> int:
        """The leftmost occurrence within ``v[start:end]``, or -1."""
        if self.rx is None:
            return v.find(self.text, start, end)
        m = self.rx.search(v, start, end)
        return -1 if m is None else m.start()


class Glob:
    """A glob matched without backtracking: ``*`` is any sequence, ``?`` one character.

    The pattern is cut at its stars: the first piece must start the value, the last must
    end it, and each piece between is taken at its leftmost occurrence after the previous
    one (taking it any later can only leave less room for the rest). Each piece is looked
    for once, so the time is at most ``len(value) x len(pattern)`` and linear for literal
    pieces, whatever the pattern (a regex for ``************b`` backtracks exponentially).
    """

    __slots__ = ("_head", "_middle", "_min", "_tail", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts = pattern.split("*")
        self._head = _Segment(parts[0])
        self._tail = None if len(parts) == 1 else _Segment(parts[-1])
        self._middle = tuple(_Segment(p) for p in parts[1:-1] if p)
        self._min = sum(len(p) for p in parts)

    def match(self, v: str) -> bool:
        """Does the whole value match?"""
        n = len(v)
        head, tail = self._head, self._tail
        if tail is None:  # no star
            return n == head.size and head.at(v, 0)
        if n < self._min or not head.at(v, 0):
            return False
        end = n - tail.size
        if not tail.at(v, end):
            return False
        pos = head.size
        for seg in self._middle:
            i = seg.find(v, pos, end)
            if i < 0:
                return False
            pos = i + seg.size
        return True

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


_EPC_KINDS = {"id", "idpat", "pat", "tag"}


def epc_split(text: str) -> tuple[str, list[str]] | None:
    """(scheme, fields) of an EPC URN (``urn:epc:[id:|idpat:|pat:|tag:]SCHEME:F1.F2...``),
    or None."""
    parts = text.strip().split(":")
    if len(parts) < 4 or parts[0].lower() != "urn" or parts[1].lower() != "epc":
        return None
    rest = parts[2:]
    if rest[0] in _EPC_KINDS:
        rest = rest[1:]
    if len(rest) != 2 or not rest[0] or not rest[1]:
        return None
    return rest[0], rest[1].split(".")


_RANGE = re.compile(r"^\[([0-9]{1,30})-([0-9]{1,30})\]$")
#: significant digits of the longest EPC field number compared with a range
_MAX_DIGITS = 30


@dataclass(frozen=True, slots=True)
class EpcPattern:
    """A parsed EPC pattern URN."""

    scheme: str
    fields: tuple[str | tuple[int, int] | None, ...]  # literal, (lo, hi) or None = '*'

    @staticmethod
    def parse(text: str) -> EpcPattern:
        """The pattern a URN spells (remembered: a subscription's pattern is parsed when it
        is checked and again when it is indexed); :class:`SubscriptionError` if none."""
        return _parse_epc(text)

    def literal_prefix(self) -> int:
        """How many leading fields are literals (the index key)."""
        k = 0
        for f in self.fields:
            if not isinstance(f, str):
                break
            k += 1
        return k

    def matches(self, value: str) -> bool:
        split = epc_split(value)
        if split is None:
            return False
        scheme, got = split
        return scheme == self.scheme and self.matches_fields(got)

    @staticmethod
    def field_number(g: str) -> int | None:
        """The number an EPC field spells (ASCII digits only), or None; a number of more
        than 30 significant digits is above every range a pattern can give, so None."""
        if not (g.isascii() and g.isdigit()):
            return None
        digits = g.lstrip("0")
        return int(digits or "0") if len(digits) <= _MAX_DIGITS else None

    def matches_fields(self, got: list[str]) -> bool:
        """Do a value's fields (same scheme) match?"""
        if len(got) != len(self.fields):
            return False
        for want, g in zip(self.fields, got, strict=True):
            if want is None:
                continue
            if isinstance(want, tuple):
                x = EpcPattern.field_number(g)
                if x is None or not (want[0] <= x <= want[1]):
                    return False
            elif want != g:
                return False
        return True


@functools.lru_cache(maxsize=4096)
def _parse_epc(text: str) -> EpcPattern:
    split = epc_split(text)
    if split is None:
        raise SubscriptionError(
            f"not an EPC pattern URN: {quoted(text)} "
            "(expected urn:epc:[idpat:]SCHEME:F1.F2...)",
            field="value",
        )
    scheme, raw = split
    fields: list[str | tuple[int, int] | None] = []
    for f in raw:
        if f == "*":
            fields.append(None)
        elif m := _RANGE.match(f):
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise SubscriptionError(f"empty EPC range {quoted(f)} in {quoted(text)}",
                                        field="value")
            fields.append((lo, hi))
        elif not f or "*" in f or "[" in f or "]" in f:
            raise SubscriptionError(f"bad EPC pattern field {quoted(f)} in {quoted(text)}",
                                    field="value")
        else:
            fields.append(f)
    return EpcPattern(scheme, tuple(fields))


def reference_test(spec: OperatorSpec, values: tuple[str, ...]) -> Callable[[str], bool]:
    """A literal predicate on one event value (the oracle's semantics)."""
    kind = spec.kind
    if kind == "exists":
        return lambda v: True
    if kind == "equals":
        x = values[0]
        return lambda v: v == x
    if kind == "in-set":
        s = frozenset(values)
        return lambda v: v in s
    if kind == "match":
        rx = glob_regex(values[0])
        return lambda v: rx.match(v) is not None
    if kind == "epc":
        pat = EpcPattern.parse(values[0])
        return pat.matches
    c = float(values[0])
    ops: dict[str, Callable[[float, float], bool]] = {
        "eq": lambda a, b: a == b,
        "ne": lambda a, b: a != b,
        "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b,
        "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b,
    }
    op = ops[spec.cmp]

    def numeric(v: str) -> bool:
        x = parse_number(v)
        return x is not None and op(x, c)

    return numeric


def fast_test(spec: OperatorSpec, values: tuple[str, ...]) -> Callable[[str], object] | None:
    """The predicate of :func:`reference_test` as a C-level callable where there is one.

    The result is only used for its truth value (a regex match object counts as true).
    None means "always true" (``attribute-exists``). The matcher evaluates the non-access
    constraints of candidate filters with it, so it avoids a Python frame per call.
    """
    kind = spec.kind
    if kind == "exists":
        return None
    if kind == "equals":
        return values[0].__eq__
    if kind == "in-set":
        return frozenset(values).__contains__
    if kind == "match":
        return glob_test(values[0])
    return reference_test(spec, values)


def glob_test(pattern: str) -> Callable[[str], object]:
    """A glob as a predicate, C-level for the common shapes (literal, ``x*``, ``*x``,
    ``*x*``) and :meth:`Glob.match` otherwise; never a backtracking regex."""
    body = pattern.strip("*")
    if "?" in pattern or "*" in body:
        return Glob(pattern).match
    if not body:  # "" or only stars
        return _always if pattern else "".__eq__
    lead, trail = pattern[0] == "*", pattern[-1] == "*"
    if not lead and not trail:
        return pattern.__eq__
    if not lead:
        return operator.methodcaller("startswith", body)
    if not trail:
        return operator.methodcaller("endswith", body)
    return operator.methodcaller("__contains__", body)
    return Glob(pattern).match


def _always(_v: str) -> bool:
    return True
