"""Normalised per-attribute constraints: the set of keys a profile accepts.

A profile's conditions on one attribute collapse to one constraint:

* :class:`IntervalSet` for ordered domains: sorted, disjoint, non-adjacent inclusive key
  intervals. =, <, <=, >, >=, ranges and sets are intervals or unions of them; != makes
  holes. Conjunction is intersection; covering is the superset test; a perfect merge is
  the union. Finite domains make this exact: ``a > 58`` on [-40, 60] *is* {59, 60}.
* :class:`StringConstraint` for string domains: either a finite set of allowed strings,
  or "starts with ``prefix`` and is none of ``excluded``".
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IntervalSet:
    """A finite union of inclusive integer key intervals, kept in canonical form."""

    intervals: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, intervals: Iterable[tuple[int, int]]) -> IntervalSet:
        """Canonicalise: sort, drop empty ones, merge overlapping and adjacent ones."""
        merged: list[list[int]] = []
        for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return cls(tuple((a, b) for a, b in merged))

    @classmethod
    def range(cls, lo: int, hi: int) -> IntervalSet:
        return cls(((lo, hi),)) if lo <= hi else cls(())

    @classmethod
    def points(cls, keys: Iterable[int]) -> IntervalSet:
        return cls.of((k, k) for k in keys)

    @property
    def empty(self) -> bool:
        return not self.intervals

    @property
    def lo(self) -> int:
        return self.intervals[0][0]

    @property
    def hi(self) -> int:
        return self.intervals[-1][1]

    @property
    def size(self) -> int:
        """Number of keys in the set."""
        return sum(b - a + 1 for a, b in self.intervals)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, int):
            return False
        iv = self.intervals
        if len(iv) == 1:  # the common case: one range
            return iv[0][0] <= key <= iv[0][1]
        i = bisect_right(iv, (key, float("inf"))) - 1
        return i >= 0 and iv[i][0] <= key <= iv[i][1]

    def __iter__(self) -> Iterator[int]:
        for a, b in self.intervals:
            yield from range(a, b + 1)

    def intersect(self, other: IntervalSet) -> IntervalSet:
        out: list[tuple[int, int]] = []
        a, b = self.intervals, other.intervals
        i = j = 0
        while i < len(a) and j < len(b):
            lo = max(a[i][0], b[j][0])
            hi = min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return IntervalSet(tuple(out))

    def union(self, other: IntervalSet) -> IntervalSet:
        return IntervalSet.of(self.intervals + other.intervals)

    def complement(self, lo: int, hi: int) -> IntervalSet:
        """The keys of ``lo..hi`` not in this set."""
        out: list[tuple[int, int]] = []
        cur = lo
        for a, b in self.intervals:
            if a > cur:
                out.append((cur, min(a - 1, hi)))
            cur = max(cur, b + 1)
        if cur <= hi:
            out.append((cur, hi))
        return IntervalSet.of(out)

    def issuperset(self, other: IntervalSet) -> bool:
        """Every key of ``other`` is in this set."""
        return other.intersect(self) == other

    def isdisjoint(self, other: IntervalSet) -> bool:
        return self.intersect(other).empty

    def is_full(self, lo: int, hi: int) -> bool:
        """Whether the set is the whole domain ``lo..hi``."""
        return self.intervals == ((lo, hi),)


@dataclass(frozen=True, slots=True)
class StringConstraint:
    """Strings accepted on an unordered attribute.

    With ``allowed`` set, exactly those strings; otherwise every string that starts with
    ``prefix`` and is not in ``excluded``. Kept canonical so that equal sets compare equal.
    """

    allowed: frozenset[str] | None = None
    prefix: str = ""
    excluded: frozenset[str] = frozenset()

    @classmethod
    def make(cls, allowed: frozenset[str] | None = None, prefix: str = "",
             excluded: frozenset[str] = frozenset()) -> StringConstraint:
        if allowed is not None:
            return cls(frozenset(s for s in allowed if s.startswith(prefix) and s not in excluded))
        return cls(None, prefix, frozenset(s for s in excluded if s.startswith(prefix)))

    @property
    def empty(self) -> bool:
        return self.allowed is not None and not self.allowed

    @property
    def unconstrained(self) -> bool:
        return self.allowed is None and not self.prefix and not self.excluded

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if self.allowed is not None:
            return key in self.allowed
        return key.startswith(self.prefix) and key not in self.excluded

    def intersect(self, other: StringConstraint) -> StringConstraint:
        if self.allowed is not None or other.allowed is not None:
            pool = self.allowed if self.allowed is not None else other.allowed
            assert pool is not None
            return StringConstraint.make(frozenset(s for s in pool if s in self and s in other))
        # Two prefix constraints: one prefix must extend the other, or nothing matches.
        if self.prefix.startswith(other.prefix):
            prefix = self.prefix
        elif other.prefix.startswith(self.prefix):
            prefix = other.prefix
        else:
            return StringConstraint(frozenset())
        return StringConstraint.make(None, prefix, self.excluded | other.excluded)

    def issuperset(self, other: StringConstraint) -> bool:
        """Every string accepted by ``other`` is accepted here."""
        if other.allowed is not None:
            return all(s in self for s in other.allowed)
        if self.allowed is not None:
            return False  # an infinite set never fits in a finite one
        if not other.prefix.startswith(self.prefix):
            return False
        return all(s in other.excluded for s in self.excluded if s.startswith(other.prefix))

    def isdisjoint(self, other: StringConstraint) -> bool:
        return self.intersect(other).empty


Constraint = IntervalSet | StringConstraint
