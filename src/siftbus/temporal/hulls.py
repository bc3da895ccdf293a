"""Hull columns: the key bounds of many subspaces, tested against one subspace at a time.

A subspace (a :class:`~siftbus.model.Profile`) has on every ordered attribute a key
*hull* ``[lo, hi]`` (the whole domain where it is free) and a *signature*, the set of
attributes it constrains. Three necessary conditions on hulls and signatures decide most
relations between a stored subspace ``s`` and a query ``q`` without the exact test:

* ``s`` overlaps ``q`` only if their hulls intersect on every attribute ``q`` constrains;
* ``s`` covers ``q`` only if ``s`` constrains no attribute ``q`` leaves free and
  ``hull(s) ⊇ hull(q)`` on the attributes ``q`` constrains;
* ``q`` covers ``s`` only if ``s`` constrains every attribute ``q`` constrains and
  ``hull(s) ⊆ hull(q)`` there.

These are the *upper bounds* of Tarkoma's result set: whatever fails them cannot be in
the result. :class:`Hulls` keeps them as numpy columns (growable, O(1) add and remove),
so one vectorised pass over a large set of siblings keeps only the candidates; the exact
test (holes in interval sets, strings) runs on those alone. Signatures cover the first 63
attributes (one int64); beyond them the exact test decides.

A subspace is *plain* when every constraint it has is one interval of keys, not the whole
domain, on one of the first 63 attributes (no strings, no holes). Between two plain
subspaces the three conditions are also sufficient: the hull test *is* the relation, and
:meth:`Hulls.split` hands those candidates back as certain (no exact test). "``q``
covers ``s``" needs only ``q`` plain (a hull inside one interval lies inside it, holes
or not). Elsewhere the exact test still runs.

Keys wider than int64 (``ip``, ``timestamp``) are held through a monotone map
(:class:`~siftbus.covering.keymap.KeySquash`): the hull tests keep every true candidate,
and a subspace constraining such an attribute is not plain (the exact test decides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from siftbus.covering.keymap import KeySquash
from siftbus.model import EventType, IntervalSet, Profile
from siftbus.model.domain import StringDomain

OVERLAP = 0
"""Relation: the stored subspace overlaps the query."""
COVER = 1
"""Relation: the stored subspace covers the query."""
WITHIN = 2
"""Relation: the query covers the stored subspace."""

_BITS = 63


@dataclass(frozen=True, slots=True)
class Probe:
    """A subspace as hull columns see it."""

    lo: tuple[int, ...]
    """Per ordered attribute (row), the lowest key (the domain's when free)."""
    hi: tuple[int, ...]
    rows: tuple[tuple[int, int, int], ...]
    """``(row, lo, hi)`` of every ordered attribute the subspace constrains, narrowest
    (relative to its domain) first."""
    sig: int
    """Bits of the constrained attributes among the first 63 (strings included)."""
    plain: bool = False
    """Every constraint one non-full interval on one of the first 63 attributes: the
    hull relations with another plain subspace are then exact."""


class Layout:
    """Where each ordered attribute of one event type sits in the hull columns."""

    __slots__ = ("dom_hi", "dom_lo", "etype", "row", "squash")

    def __init__(self, etype: EventType) -> None:
        self.etype = etype
        ordered = [a for a in etype.attributes if not isinstance(a.domain, StringDomain)]
        self.row = {a.position: r for r, a in enumerate(ordered)}
        self.dom_lo = tuple(a.domain.min_key for a in ordered)  # type: ignore[union-attr]
        self.dom_hi = tuple(a.domain.max_key for a in ordered)  # type: ignore[union-attr]
        self.squash = tuple(KeySquash(lo, hi) for lo, hi in zip(self.dom_lo, self.dom_hi,
                                                                strict=True))

    @property
    def nrows(self) -> int:
        return len(self.dom_lo)

    def probe(self, p: Profile) -> Probe:
        sq = self.squash
        lo = [f(k) for f, k in zip(sq, self.dom_lo, strict=True)]
        hi = [f(k) for f, k in zip(sq, self.dom_hi, strict=True)]
        rows: list[tuple[float, int, int, int]] = []
        sig = 0
        plain = True
        for c in p.conditions:
            if c.position < _BITS:
                sig |= 1 << c.position
            else:
                plain = False
            con = c.constraint
            if isinstance(con, IntervalSet):
                r = self.row[c.position]
                f = sq[r]
                lo[r], hi[r] = f(con.lo), f(con.hi)
                width = self.dom_hi[r] - self.dom_lo[r] + 1
                if (len(con.intervals) != 1 or con.hi - con.lo + 1 >= width
                        or not f.exact):
                    plain = False  # holes, a full constraint, or squashed keys
                rows.append(((con.hi - con.lo + 1) / width, r, lo[r], hi[r]))
            else:
                plain = False
        rows.sort()
        return Probe(tuple(lo), tuple(hi), tuple((r, a, b) for _, r, a, b in rows), sig,
                     plain)


class Placed(Protocol):
    """An item of :class:`Hulls`: it keeps its own column number (no lookup table)."""

    at: int


T = TypeVar("T", bound=Placed)


class Hulls(Generic[T]):
    """Hull columns of a changing set of items (each added with its :class:`Probe`)."""

    __slots__ = ("hi", "items", "lo", "n", "plain", "sig")

    def __init__(self, nrows: int, cap: int = 64) -> None:
        self.lo = np.zeros((nrows, cap), dtype=np.int64)
        self.hi = np.zeros((nrows, cap), dtype=np.int64)
        self.sig = np.zeros(cap, dtype=np.int64)
        self.plain = np.zeros(cap, dtype=np.bool_)
        self.items: list[T | None] = [None] * cap
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items[:self.n])

    def _grow(self) -> None:
        cap = 2 * len(self.items)
        for name in ("lo", "hi"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], cap), dtype=np.int64)
            new[:, :self.n] = old[:, :self.n]
            setattr(self, name, new)
        sig = np.zeros(cap, dtype=np.int64)
        sig[:self.n] = self.sig[:self.n]
        self.sig = sig
        plain = np.zeros(cap, dtype=np.bool_)
        plain[:self.n] = self.plain[:self.n]
        self.plain = plain
        self.items.extend([None] * (cap - len(self.items)))

    def add(self, item: T, probe: Probe) -> None:
        if self.n == len(self.items):
            self._grow()
        i = self.n
        self.lo[:, i] = probe.lo
        self.hi[:, i] = probe.hi
        self.sig[i] = probe.sig
        self.plain[i] = probe.plain
        self.items[i] = item
        item.at = i
        self.n += 1

    def remove(self, item: T) -> None:
        i = item.at
        self.n -= 1
        last = self.n
        if i != last:  # move the last column into the gap
            moved = self.items[last]
            self.lo[:, i] = self.lo[:, last]
            self.hi[:, i] = self.hi[:, last]
            self.sig[i] = self.sig[last]
            self.plain[i] = self.plain[last]
            self.items[i] = moved
            assert moved is not None
            moved.at = i
        self.items[last] = None

    def select(self, q: Probe, rel: int) -> list[T]:
        """The items that may stand in relation ``rel`` to ``q`` (a superset)."""
        return self._items(self._candidates(q, rel))

    def split(self, q: Probe, rel: int) -> tuple[list[T], list[T]]:
        """The items that may stand in relation ``rel`` to ``q``, as ``(sure, maybe)``:
        ``sure`` do (both plain: the hull test was exact), ``maybe`` need the exact test."""
        idx = self._candidates(q, rel)
        if not q.plain:
            return [], self._items(idx)
        if rel == WITHIN:
            return self._items(idx), []
        if idx is None:
            idx = np.arange(self.n)
        p = self.plain[idx]
        return self._items(idx[p]), self._items(idx[~p])

    def split_overlap(self, q: Probe) -> tuple[list[T], list[T], list[T]]:
        """The items that may overlap ``q``, as ``(inside, overlap, maybe)``: ``inside``
        lie inside ``q`` (the lower bound; exact for a plain ``q``), ``overlap`` overlap
        it and do not lie inside (exact: both plain), ``maybe`` need the exact tests."""
        idx = self._candidates(q, OVERLAP)
        if not q.plain:
            return [], [], self._items(idx)
        if idx is None:
            idx = np.arange(self.n)
        inside = (self.sig[idx] & np.int64(q.sig)) == q.sig
        for r, a, b in q.rows:
            inside &= (self.lo[r, idx] >= a) & (self.hi[r, idx] <= b)
        rest = ~inside
        p = self.plain[idx]
        return (self._items(idx[inside]), self._items(idx[rest & p]),
                self._items(idx[rest & ~p]))

    def _items(self, idx: np.ndarray | None) -> list[T]:
        items = self.items
        if idx is None:
            return items[:self.n]  # type: ignore[return-value]
        return [items[i] for i in idx.tolist()]

    def _candidates(self, q: Probe, rel: int) -> np.ndarray | None:
        """Column numbers passing the hull test (``None``: all of them)."""
        n = self.n
        idx: np.ndarray | None = None
        if rel == COVER:
            sig = self.sig[:n]
            idx = np.flatnonzero((sig & np.int64(~q.sig & ((1 << _BITS) - 1))) == 0)
            for r, a, b in q.rows:
                if not len(idx):
                    break
                keep = (self.lo[r, idx] <= a) & (self.hi[r, idx] >= b)
                idx = idx[keep]
        else:
            for r, a, b in q.rows:
                if idx is None:
                    lo, hi = self.lo[r, :n], self.hi[r, :n]
                    m = (lo >= a) & (hi <= b) if rel == WITHIN else (lo <= b) & (hi >= a)
                    idx = np.flatnonzero(m)
                elif not len(idx):
                    break
                else:
                    lo, hi = self.lo[r, idx], self.hi[r, idx]
                    keep = (lo >= a) & (hi <= b) if rel == WITHIN else (lo <= b) & (hi >= a)
                    idx = idx[keep]
            if rel == WITHIN and q.sig:
                if idx is None:
                    idx = np.arange(n)
                idx = idx[(self.sig[idx] & np.int64(q.sig)) == q.sig]
        return idx


__all__ = ["COVER", "OVERLAP", "WITHIN", "Hulls", "Layout", "Probe"]
