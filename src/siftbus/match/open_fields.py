"""Per-field tables of the open index: which distinct conditions an event's value satisfies.

A *condition* is one distinct :class:`~siftbus.model.checks.Check` of one attribute,
numbered once however many profiles use it (100,000 rules saying ``env = "prod"`` share
one number). A :class:`FieldTable` holds every condition of one attribute, sorted into the
structure that answers it without looking at the others:

============================  ===================================================
condition                     structure
============================  ===================================================
``=``, ``in {...}``, points   hash of value -> conditions (``eq``)
``= ... ignorecase``          hash of the case-folded value (``eqi``)
``prefix``, ``suffix``        hash of the value's head/tail for each length used
``... ignorecase`` forms      the same on the case-folded value
``not in``, ``not prefix``    "all except": the field's negated conditions minus those
``not suffix``, ``!= ... i``  the value hits in the same hashes (``neg``)
``exists`` / ``not exists``   a list for present / absent values
ranges, prefix with holes     each distinct one tested (``generic``)
``contains``, ``like``,       *lazy*: never evaluated for the whole table, only for
``matches`` (and ``not``)     the few candidate profiles that still need them (RE2)
============================  ===================================================

An array value satisfies a condition when one of its elements does, so the tables run per
element and the negated conditions are "all except" per element too (``tags not in {"a"}``
holds when some element is not ``"a"``), exactly :meth:`Check.holds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from siftbus.model.checks import Check
from siftbus.model.constraint import IntervalSet, StringConstraint

MAX_POINTS = 64
"""An interval condition with at most this many keys, all single points, is hashed by key;
a wider one is tested as a range."""

EQ, EQI, PREFIX, PREFIXI, SUFFIX, SUFFIXI = range(6)
"""The hashed tables of a field (``_TABLES`` names them)."""
_TABLES = ("eq", "eqi", "prefix", "prefixi", "suffix", "suffixi")

# a condition's kind, also its rank as an access condition (lower is more selective)
HASHED, GENERIC, NEGATED, PRESENT, ABSENT, LAZY = range(6)


@dataclass(slots=True)
class Placement:
    """Where one condition sits in its field table."""

    kind: int
    table: int = -1
    """The hashed table (``EQ``...) for ``HASHED`` and ``NEGATED`` conditions."""
    keys: tuple[Any, ...] = ()
    """The table keys it is filed under (values, folded values, prefixes...)."""


def place(check: Check, lo: int, hi: int) -> Placement:
    """The structure answering ``check`` on an attribute whose ordered keys run from
    ``lo`` to ``hi`` (ignored for strings)."""
    op, neg, operand = check.op, check.negated, check.operand
    if op == "absent":
        return Placement(ABSENT)
    if op == "in":
        if neg:
            return Placement(GENERIC)
        if isinstance(operand, StringConstraint):
            if operand.allowed is not None:
                return Placement(HASHED, EQ, tuple(sorted(operand.allowed)))
            if operand.unconstrained:
                return Placement(PRESENT)
            if not operand.excluded:
                return Placement(HASHED, PREFIX, (operand.prefix,))
            if not operand.prefix:
                return Placement(NEGATED, EQ, tuple(sorted(operand.excluded)))
            return Placement(GENERIC)
        assert isinstance(operand, IntervalSet)
        if operand.is_full(lo, hi):
            return Placement(PRESENT)
        if operand.size <= MAX_POINTS and len(operand.intervals) == operand.size:
            return Placement(HASHED, EQ, tuple(operand))
        return Placement(GENERIC)
    table = {"eqi": EQI, "prefix": PREFIX, "prefixi": PREFIXI, "suffix": SUFFIX,
             "suffixi": SUFFIXI}.get(op)
    if table is None:  # contains, like, matches
        return Placement(LAZY)
    key = check._program if table in (EQI, PREFIXI, SUFFIXI) else operand
    return Placement(NEGATED if neg else HASHED, table, (key,))


def _fold(s: str) -> str:
    return s.casefold()


@dataclass(slots=True)
class FieldTable:
    """Every condition on one attribute (see the module text)."""

    position: int
    pos: list[dict[Any, set[int]]] = field(default_factory=lambda: [{} for _ in _TABLES])
    """Per table: key -> conditions the key satisfies."""
    neg: list[dict[Any, set[int]]] = field(default_factory=lambda: [{} for _ in _TABLES])
    """Per table: key -> negated conditions the key *fails*."""
    lengths: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in _TABLES])
    """Per prefix/suffix table: key length -> how many keys of that length are filed."""
    neg_all: set[int] = field(default_factory=set)
    present: set[int] = field(default_factory=set)
    absent: set[int] = field(default_factory=set)
    generic: dict[int, Check] = field(default_factory=dict)
    _plan: Any = None

    def __len__(self) -> int:
        return (sum(len(t) for t in self.pos) + sum(len(t) for t in self.neg)
                + len(self.present) + len(self.absent) + len(self.generic))

    def insert(self, cid: int, check: Check, where: Placement) -> None:
        self._plan = None
        if where.kind == ABSENT:
            self.absent.add(cid)
        elif where.kind == PRESENT:
            self.present.add(cid)
        elif where.kind == GENERIC:
            self.generic[cid] = check
        elif where.kind in (HASHED, NEGATED):
            tables = self.pos if where.kind == HASHED else self.neg
            if where.kind == NEGATED:
                self.neg_all.add(cid)
            t = where.table
            for k in where.keys:
                tables[t].setdefault(k, set()).add(cid)
                if t >= PREFIX:
                    self.lengths[t][len(k)] = self.lengths[t].get(len(k), 0) + 1

    def delete(self, cid: int, where: Placement) -> None:
        self._plan = None
        self.absent.discard(cid)
        self.present.discard(cid)
        self.generic.pop(cid, None)
        self.neg_all.discard(cid)
        if where.kind not in (HASHED, NEGATED):
            return
        tables = self.pos if where.kind == HASHED else self.neg
        t = where.table
        for k in where.keys:
            got = tables[t].get(k)
            if got is None:
                continue
            got.discard(cid)
            if not got:
                del tables[t][k]
            if t >= PREFIX:
                n = self.lengths[t][len(k)] - 1
                if n:
                    self.lengths[t][len(k)] = n
                else:
                    del self.lengths[t][len(k)]

    def plan(self) -> tuple[Any, ...]:
        """The tables to consult, frozen until the next change: (eq, eq_neg, eqi pair,
        prefix/suffix tables with their lengths, neg_all, present, absent, generic)."""
        if self._plan is None:
            fixes = []
            for t in (PREFIX, PREFIXI, SUFFIX, SUFFIXI):
                if self.pos[t] or self.neg[t]:
                    fixes.append((t, tuple(sorted(self.lengths[t])), self.pos[t], self.neg[t]))
            self._plan = (
                self.pos[EQ] or None, self.neg[EQ] or None,
                (self.pos[EQI], self.neg[EQI]) if self.pos[EQI] or self.neg[EQI] else None,
                tuple(fixes), frozenset(self.neg_all), frozenset(self.present),
                frozenset(self.absent), tuple(self.generic.items()))
        return self._plan

    def collect(self, key: Any, sat: set[int]) -> None:
        """Add to ``sat`` every condition of this field that ``key`` (an event's key of
        the attribute: ``None`` absent, a tuple for an array) satisfies, lazy ones aside."""
        eq, eq_neg, eqi, fixes, neg_all, present, absent, generic = self.plan()
        if key is None or key == ():
            if absent:
                sat.update(absent)
            return
        if present:
            sat.update(present)
        for k in key if type(key) is tuple else (key,):
            if eq is not None:
                hit = eq.get(k)
                if hit is not None:
                    sat.update(hit)
            if not neg_all and not fixes and eqi is None:
                for cid, check in generic:
                    if check._one(k):
                        sat.add(cid)
                continue
            miss: set[int] = set()
            if eq_neg is not None:
                hit = eq_neg.get(k)
                if hit is not None:
                    miss.update(hit)
            if type(k) is str:
                folded = _fold(k) if eqi is not None or fixes else k
                if eqi is not None:
                    hit = eqi[0].get(folded)
                    if hit is not None:
                        sat.update(hit)
                    hit = eqi[1].get(folded)
                    if hit is not None:
                        miss.update(hit)
                for t, lens, tpos, tneg in fixes:
                    s = folded if t in (PREFIXI, SUFFIXI) else k
                    n = len(s)
                    for ln in lens:
                        if ln > n:
                            break
                        piece = s[:ln] if t <= PREFIXI else s[n - ln:]
                        hit = tpos.get(piece)
                        if hit is not None:
                            sat.update(hit)
                        hit = tneg.get(piece)
                        if hit is not None:
                            miss.update(hit)
            if neg_all:
                sat.update(neg_all.difference(miss) if miss else neg_all)
            for cid, check in generic:
                if check._one(k):
                    sat.add(cid)
