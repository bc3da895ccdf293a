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

import bisect
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from siftbus.errors import SubscriptionError
from siftbus.xmlfilter.limits import quoted

Kind = Literal["exists", "equals", "in-set", "match", "epc", "numeric"]

_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")


def parse_number(text: str) -> float | None:
    """The decimal number a value spells, or None (no NaN, infinity or underscores)."""
    if not _NUMBER.match(text):
        return None
    x = float(text)
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


def _epc_split(text: str) -> tuple[str, list[str]] | None:
    parts = text.strip().split(":")
    if len(parts) < 4 or parts[0].lower() != "urn" or parts[1].lower() != "epc":
        return None
    rest = parts[2:]
    if rest[0] in _EPC_KINDS:
        rest = rest[1:]
    if len(rest) != 2 or not rest[0] or not rest[1]:
        return None
    return rest[0], rest[1].split(".")


_RANGE = re.compile(r"^\[(\d+)-(\d+)\]$")


@dataclass(frozen=True, slots=True)
class EpcPattern:
    """A parsed EPC pattern URN."""

    scheme: str
    fields: tuple[str | tuple[int, int] | None, ...]  # literal, (lo, hi) or None = '*'

    @staticmethod
    def parse(text: str) -> EpcPattern:
        split = _epc_split(text)
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

    def literal_prefix(self) -> int:
        """How many leading fields are literals (the index key)."""
        k = 0
        for f in self.fields:
            if not isinstance(f, str):
                break
            k += 1
        return k

    def matches(self, value: str) -> bool:
        split = _epc_split(value)
        if split is None:
            return False
        scheme, got = split
        return scheme == self.scheme and self.matches_fields(got)

    def matches_fields(self, got: list[str]) -> bool:
        """Do a value's fields (same scheme) match?"""
        if len(got) != len(self.fields):
            return False
        for want, g in zip(self.fields, got, strict=True):
            if want is None:
                continue
            if isinstance(want, tuple):
                if not g.isdigit() or not (want[0] <= int(g) <= want[1]):
                    return False
            elif want != g:
                return False
        return True


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


# -- the per-(target, path) index --------------------------------------------------------


#: what a slot index holds per constraint: an id, or the constraint object itself (items
#: are compared by equality, so objects should compare by identity)
T = TypeVar("T")


@dataclass(slots=True)
class _Sorted(Generic[T]):
    """Thresholds in ascending order with their constraints (parallel lists)."""

    keys: list[float] = field(default_factory=list)
    ids: list[T] = field(default_factory=list)

    def add(self, k: float, cid: T) -> None:
        i = bisect.bisect_right(self.keys, k)
        self.keys.insert(i, k)
        self.ids.insert(i, cid)

    def remove(self, k: float, cid: T) -> None:
        i = bisect.bisect_left(self.keys, k)
        while self.ids[i] != cid:
            i += 1
        del self.keys[i]
        del self.ids[i]


# Buckets are tuples, not lists: a tuple keeps its items inline, so a hit costs one memory
# access less (at 100,000 subscriptions matching is bound by cache misses); updates copy
# the bucket, which holds a handful of constraints because equal conditions are shared.
def _add_to(d: dict[str, tuple[T, ...]], key: str, cid: T) -> None:
    d[key] = (*d.get(key, ()), cid)


def _remove_from(d: dict[str, tuple[T, ...]], key: str, cid: T) -> None:
    kept = list(d[key])
    kept.remove(cid)
    if kept:
        d[key] = tuple(kept)
    else:
        del d[key]


class SlotIndex(Generic[T]):
    """All constraints on one (target, attribute path): Siena's multi-operator index.

    ``satisfied(v)`` lists each constraint satisfied by the value ``v`` exactly once:
    string equality and set membership by one hash lookup, prefix globs by one lookup per
    distinct prefix length, numeric comparisons by binary search in sorted thresholds.
    A constraint is whatever item ``add`` was given: an id, or the constraint object.
    """

    __slots__ = (
        "_epc",
        "_globs",
        "_num",
        "_num_eq",
        "_num_ne",
        "_prefix",
        "eq",
        "exists",
        "n",
    )

    def __init__(self) -> None:
        self.exists: list[T] = []
        self.eq: dict[str, tuple[T, ...]] = {}
        self._prefix: dict[int, dict[str, tuple[T, ...]]] = {}
        self._globs: list[tuple[Glob, T]] = []
        # (scheme, fields, literal prefix length) -> literal prefix -> [(pattern, cid)]
        self._epc: dict[tuple[str, int, int], dict[tuple[str, ...], list[tuple[EpcPattern, T]]]]
        self._epc = {}
        self._num: dict[str, _Sorted[T]] = {}
        self._num_eq: dict[float, list[T]] = {}
        self._num_ne: list[tuple[float, T]] = []
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def _apply(self, spec: OperatorSpec, values: tuple[str, ...], cid: T, add: bool) -> None:
        kind = spec.kind
        if kind == "exists":
            if add:
                self.exists.append(cid)
            else:
                self.exists.remove(cid)
        elif kind in ("equals", "in-set"):
            for v in values:
                (_add_to if add else _remove_from)(self.eq, v, cid)
        elif kind == "match":
            pat = values[0]
            body = pat[:-1]
            if "*" not in pat and "?" not in pat:
                (_add_to if add else _remove_from)(self.eq, pat, cid)
            elif pat.endswith("*") and "*" not in body and "?" not in body:
                d = self._prefix.setdefault(len(body), {})
                (_add_to if add else _remove_from)(d, body, cid)
                if not d:
                    del self._prefix[len(body)]
            else:
                item = (Glob(pat), cid)
                if add:
                    self._globs.append(item)
                else:
                    self._globs = [g for g in self._globs if g[1] != cid]
        elif kind == "epc":
            epat = EpcPattern.parse(values[0])
            k = epat.literal_prefix()
            key = (epat.scheme, len(epat.fields), k)
            prefix = tuple(str(f) for f in epat.fields[:k])
            buckets = self._epc.setdefault(key, {})
            if add:
                buckets.setdefault(prefix, []).append((epat, cid))
            else:
                kept = [e for e in buckets[prefix] if e[1] != cid]
                if kept:
                    buckets[prefix] = kept
                else:
                    del buckets[prefix]
                    if not buckets:
                        del self._epc[key]
        else:
            c = float(values[0])
            if spec.cmp == "eq":
                lst = self._num_eq.setdefault(c, [])
                if add:
                    lst.append(cid)
                else:
                    lst.remove(cid)
                    if not lst:
                        del self._num_eq[c]
            elif spec.cmp == "ne":
                if add:
                    self._num_ne.append((c, cid))
                else:
                    self._num_ne.remove((c, cid))
            else:
                s = self._num.setdefault(spec.cmp, _Sorted[T]())
                if add:
                    s.add(c, cid)
                else:
                    s.remove(c, cid)
                    if not s.ids:
                        del self._num[spec.cmp]
        self.n += 1 if add else -1

    def selectivity(self, spec: OperatorSpec, values: tuple[str, ...]) -> float:
        """A rough probability that an event value satisfies the constraint.

        Values are untyped, so the only evidence is the subscriptions themselves: the more
        distinct operands the slot's equality (or prefix, EPC) index holds, the rarer one
        of them is assumed to be. Only the order matters (choosing access constraints).
        """
        kind = spec.kind
        if kind in ("equals", "in-set") or (kind == "match" and "*" not in values[0]
                                             and "?" not in values[0]):
            return min(1.0, len(values) / max(1, len(self.eq)))
        if kind == "match":
            body = values[0][:-1]
            if values[0].endswith("*") and "*" not in body and "?" not in body:
                return 1.0 / max(1, sum(len(d) for d in self._prefix.values()))
            return 0.5
        if kind == "epc":
            return 1.0 / max(1, sum(len(b) for b in self._epc.values()))
        if kind == "numeric":
            if spec.cmp == "eq":
                return 1.0 / max(1, len(self._num_eq))
            return 1.0 if spec.cmp == "ne" else 0.5
        return 1.0

    def add(self, spec: OperatorSpec, values: tuple[str, ...], cid: T) -> None:
        self._apply(spec, values, cid, True)

    def remove(self, spec: OperatorSpec, values: tuple[str, ...], cid: T) -> None:
        self._apply(spec, values, cid, False)

    def satisfied(self, v: str) -> list[T]:
        """Constraints the value satisfies (each at most once)."""
        out: list[T] = []
        self.collect(v, out)
        return out

    def collect(self, v: str, out: list[T]) -> None:
        """Append the constraints the value satisfies (each once) to ``out``."""
        if self.exists:
            out.extend(self.exists)
        hit = self.eq.get(v)
        if hit:
            out.extend(hit)
        if self._prefix:
            for n, d in self._prefix.items():
                if len(v) >= n:
                    hit = d.get(v[:n])
                    if hit:
                        out.extend(hit)
        if self._globs:
            for g, cid in self._globs:
                if g.match(v):
                    out.append(cid)
        if self._epc:
            split = _epc_split(v)
            if split is not None:
                scheme, got = split
                n = len(got)
                for (sch, nf, k), buckets in self._epc.items():
                    if sch != scheme or nf != n:
                        continue
                    hit2 = buckets.get(tuple(got[:k]))
                    if hit2:
                        for pat, cid in hit2:
                            if pat.matches_fields(got):
                                out.append(cid)
        if self._num or self._num_eq or self._num_ne:
            x = parse_number(v)
            if x is not None:
                same = self._num_eq.get(x)
                if same:
                    out.extend(same)
                for c, cid in self._num_ne:
                    if c != x:
                        out.append(cid)
                for cmp, s in self._num.items():
                    if cmp == "lt":
                        out.extend(s.ids[bisect.bisect_right(s.keys, x) :])
                    elif cmp == "le":
                        out.extend(s.ids[bisect.bisect_left(s.keys, x) :])
                    elif cmp == "gt":
                        out.extend(s.ids[: bisect.bisect_left(s.keys, x)])
                    else:
                        out.extend(s.ids[: bisect.bisect_right(s.keys, x)])
