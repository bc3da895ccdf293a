"""A covering-ordered forest of subspaces with overlap, covering and covered queries.

One side of Tarkoma's DoubleForest (2006, ch. 6): the stored subspaces (filters, or
persistent notifications) of each event type in a poset-derived forest -- one parent per
node, which covers it; roots pairwise incomparable -- after Tarkoma's PF
(:mod:`siftbus.covering.forest`): insert descends from the roots into the first node
covering the new subspace and adopts the siblings it covers there; delete re-places
each child's subtree from the deleted node's parent. Equal subspaces share a node.

A query ``q`` asks for the stored subspaces that overlap it, that it covers (*within*),
or that cover it (*containing*). The forest order bounds the answer from both sides
(Tarkoma §6.3-6.4; the thesis text of these sections is not in our sources, so this is
our reading of it):

* **upper bound** -- a node's subtree lies inside the node, so a node that does not
  overlap ``q`` (or, for *containing*, does not cover it) removes its whole subtree from
  the answer without a test;
* **lower bound** -- a node ``q`` covers brings its whole subtree into the *within* and
  *overlapping* answers without a test.

Only the difference is tested. Siblings are tested together: a node with many children
(the roots of a type, or a wide filter's children) keeps their key hulls as numpy
columns (:mod:`siftbus.temporal.hulls`), so one vectorised pass leaves only the
candidates for the exact test. Where both the query and a candidate are *plain* (one
interval per constrained attribute) that pass is exact, in both bounds: the candidate is
taken, descended into or collected without an exact test, on insert (descent and
adoption), delete (re-placing) and every query alike. ``trust_hulls=False`` runs the
exact test on every candidate instead (the path the fast one is checked against).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator

from siftbus.covering.relations import constraint_disjoint, covers, same_type
from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.model import EventType, IntervalSet, Profile

from .hulls import COVER, WITHIN, Hulls, Layout, Probe

COLUMNS_FROM = 12
"""Sibling sets larger than this keep hull columns (smaller ones are tested one by one)."""


class _Node:
    """One distinct subspace and the keys stored under it."""

    __slots__ = ("at", "box", "keys", "kids", "parent")

    def __init__(self, box: Profile, parent: _Node | None) -> None:
        self.box = box
        self.keys: list[int] = []
        self.parent = parent
        self.kids: _Kids | None = None
        self.at = -1  # column in the parent's hull columns, if it has them


class _Kids:
    """The children of one node, or the roots of one type."""

    __slots__ = ("hulls", "small")

    def __init__(self) -> None:
        self.small: list[_Node] | None = []
        self.hulls: Hulls[_Node] | None = None

    def __len__(self) -> int:
        return len(self.small) if self.small is not None else len(self.hulls or ())

    def nodes(self) -> list[_Node]:
        if self.small is not None:
            return list(self.small)
        assert self.hulls is not None
        return list(self.hulls)

    def add(self, node: _Node, layout: Layout, probe: Probe | None = None) -> None:
        """Add a child (``probe``: its box's, if the caller has it)."""
        if self.small is not None:
            self.small.append(node)
            if len(self.small) > COLUMNS_FROM:
                hulls: Hulls[_Node] = Hulls(layout.nrows, 2 * COLUMNS_FROM)
                for n in self.small:
                    hulls.add(n, layout.probe(n.box))
                self.hulls, self.small = hulls, None
            return
        assert self.hulls is not None
        self.hulls.add(node, probe if probe is not None else layout.probe(node.box))

    def remove(self, node: _Node) -> None:
        if self.small is not None:
            self.small.remove(node)
        else:
            assert self.hulls is not None
            self.hulls.remove(node)
        node.at = -1

    def split(self, probe: Probe, rel: int) -> tuple[list[_Node], list[_Node]]:
        """The children that may stand in relation ``rel`` to the query, as ``(sure,
        maybe)``: the hull test decided ``sure`` exactly, ``maybe`` need the exact test."""
        if self.small is not None:
            return [], list(self.small)
        assert self.hulls is not None
        return self.hulls.split(probe, rel)

    def split_overlap(self, probe: Probe) -> tuple[list[_Node], list[_Node], list[_Node]]:
        """The children that may overlap the query: ``(inside it, overlapping it but not
        inside, maybe)`` -- the first two decided exactly by the hull test."""
        if self.small is not None:
            return [], [], list(self.small)
        assert self.hulls is not None
        return self.hulls.split_overlap(probe)


class _Top:
    """The roots of one event type."""

    __slots__ = ("etype", "layout", "roots")

    def __init__(self, etype: EventType) -> None:
        self.etype = etype
        self.layout = Layout(etype)
        self.roots = _Kids()


class SubspaceForest:
    """Subspaces (profiles) under integer keys, in a covering-ordered forest per type.

    ``add(key, box)``, ``remove(key)``; queries answer keys: :meth:`overlapping`,
    :meth:`within` (stored subspaces the query covers), :meth:`containing` (stored
    subspaces covering the query). Profiles of different types never relate.
    """

    def __init__(self, *, trust_hulls: bool = True) -> None:
        self.trust_hulls = trust_hulls
        """Take the hull test's word where it is exact (both sides plain); ``False``
        runs the exact test on every candidate (the reference for the fast path)."""
        self._tops: dict[str, list[_Top]] = {}
        self._by_key: dict[int, _Node] = {}
        self._by_filter: dict[Hashable, _Node] = {}
        self.tests = 0
        """Exact relation tests run so far (the rest were decided by bounds)."""

    # ---- bookkeeping -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: int) -> Profile:
        return self._node(key).box

    def _node(self, key: int) -> _Node:
        try:
            return self._by_key[key]
        except KeyError:
            raise UnknownProfileError(f"no subspace with key {key!r}", field=str(key)) from None

    def _top(self, etype: EventType, create: bool) -> _Top | None:
        tops = self._tops.get(etype.name)
        if tops is not None:
            for t in tops:
                if t.etype is etype or t.etype == etype:
                    return t
        if not create:
            return None
        top = _Top(etype)
        self._tops.setdefault(etype.name, []).append(top)
        return top

    def _top_of(self, node: _Node) -> _Top:
        top = self._top(node.box.etype, False)
        assert top is not None
        return top

    def _kids_of(self, parent: _Node | None, top: _Top) -> _Kids:
        if parent is None:
            return top.roots
        if parent.kids is None:
            parent.kids = _Kids()
        return parent.kids

    def _probe(self, top: _Top, box: Profile) -> Probe:
        probe = top.layout.probe(box)
        if probe.plain and not self.trust_hulls:
            return dataclasses.replace(probe, plain=False)  # every candidate tested
        return probe

    @staticmethod
    def _filter_key(box: Profile) -> Hashable:
        return (box.etype.name, box.conditions)

    # ---- insert and delete -----------------------------------------------------------

    def add(self, key: int, box: Profile) -> None:
        """Store ``box`` under ``key``."""
        if key in self._by_key:
            raise DuplicateProfileError(f"key {key!r} is already stored", field=str(key))
        fkey = self._filter_key(box)
        node = self._by_filter.get(fkey)
        if node is None or not same_type(node.box, box):
            top = self._top(box.etype, True)
            assert top is not None
            node = self._place(_Node(box, None), None, top, new=True)
            if node.box is box and fkey not in self._by_filter:
                self._by_filter[fkey] = node
        node.keys.append(key)
        self._by_key[key] = node

    def remove(self, key: int) -> Profile:
        """Forget ``key``; a node left without keys leaves the forest. Returns its box."""
        node = self._node(key)
        del self._by_key[key]
        node.keys.remove(key)
        if not node.keys:
            fkey = self._filter_key(node.box)
            if self._by_filter.get(fkey) is node:
                del self._by_filter[fkey]
            self._delete(node)
        return node.box

    def _place(self, node: _Node, start: _Node | None, top: _Top, *,
               new: bool = False) -> _Node:
        """Hang ``node`` (with its subtree) below ``start``: descend into the first child
        covering it, then adopt the siblings it covers there. For a ``new`` node, an
        equivalent node already stored is returned instead."""
        box = node.box
        probe = self._probe(top, box)
        t = Relations(box, general=not self.trust_hulls)
        parent = start
        while True:
            kids = self._kids_of(parent, top) if parent is not None else top.roots
            sure, maybe = kids.split(probe, COVER)
            nxt = None
            for c in sure:  # covers box: no test
                if c is not node:
                    nxt = c
                    break
            if nxt is None:
                for c in maybe:
                    if c is node:
                        continue
                    self.tests += 1
                    if t.around(c.box):
                        nxt = c
                        break
            if nxt is None:
                break
            if new:
                self.tests += 1
                if t.inside(nxt.box):
                    return nxt  # equivalent subspace written differently
            parent = nxt
        sure, maybe = kids.split(probe, WITHIN)
        for c in maybe:
            self.tests += 1
            if t.inside(c.box):
                sure.append(c)
        for c in sure:
            if c is node:
                continue
            kids.remove(c)
            c.parent = node
            self._kids_of(node, top).add(c, top.layout)
        node.parent = parent
        kids.add(node, top.layout, probe)
        return node

    def _delete(self, node: _Node) -> None:
        top = self._top_of(node)
        parent = node.parent
        self._kids_of(parent, top).remove(node)
        if node.kids is not None:
            for c in node.kids.nodes():
                c.parent = None
                c.at = -1
                self._place(c, parent, top)
            node.kids = None

    # ---- queries -----------------------------------------------------------------------

    def overlapping(self, q: Profile) -> list[int]:
        """Keys of the stored subspaces sharing a point with ``q``."""
        return self._query(q, True)

    def within(self, q: Profile) -> list[int]:
        """Keys of the stored subspaces ``q`` covers."""
        return self._query(q, False)

    def _query(self, q: Profile, overlap: bool) -> list[int]:
        """One traversal for both queries: ``overlap`` keeps every node sharing a point with
        ``q``, else only those inside it; a subtree inside ``q`` is taken whole either way."""
        out: list[int] = []
        top = self._top(q.etype, False)
        if top is None:
            return out
        probe = self._probe(top, q)
        t = Relations(q, general=not self.trust_hulls)
        leaf_test = t.overlaps if overlap else t.inside
        stack = [top.roots]
        while stack:
            kids = stack.pop()
            inside, sure, maybe = kids.split_overlap(probe)
            for n in inside:
                _collect(n, out)
            for n in sure:  # overlaps q, not inside: something below may be
                if overlap:
                    out.extend(n.keys)
                if n.kids is not None:
                    stack.append(n.kids)
            for n in maybe:
                self.tests += 1
                if n.kids is None:
                    if leaf_test(n.box):
                        out.extend(n.keys)
                    continue
                if t.inside(n.box):
                    _collect(n, out)  # the whole subtree lies inside q
                    continue
                self.tests += 1
                if t.overlaps(n.box):  # else nothing below n can lie inside or meet q
                    if overlap:
                        out.extend(n.keys)
                    stack.append(n.kids)
        return out

    def containing(self, q: Profile) -> list[int]:
        """Keys of the stored subspaces covering ``q``."""
        out: list[int] = []
        top = self._top(q.etype, False)
        if top is None:
            return out
        probe = self._probe(top, q)
        around = Relations(q, general=not self.trust_hulls).around
        stack = [top.roots]
        while stack:
            kids = stack.pop()
            sure, maybe = kids.split(probe, COVER)
            for n in sure:
                out.extend(n.keys)
                if n.kids is not None:
                    stack.append(n.kids)
            for n in maybe:
                self.tests += 1
                if around(n.box):  # else no descendant (inside n) covers q
                    out.extend(n.keys)
                    if n.kids is not None:
                        stack.append(n.kids)
        return out

    # ---- inspection --------------------------------------------------------------------

    def roots(self) -> list[Profile]:
        """One subspace per root, every type."""
        return [n.box for tops in self._tops.values() for t in tops for n in t.roots.nodes()]

    def nodes(self) -> Iterator[tuple[Profile, Profile | None, list[int]]]:
        """Every node as ``(box, parent box or None, keys)``."""
        for tops in self._tops.values():
            for t in tops:
                stack = t.roots.nodes()
                while stack:
                    n = stack.pop()
                    yield n.box, (n.parent.box if n.parent else None), list(n.keys)
                    if n.kids is not None:
                        stack.extend(n.kids.nodes())

    def depth(self) -> int:
        """The longest root-to-leaf path, in nodes."""
        best = 0
        for tops in self._tops.values():
            for t in tops:
                stack = [(n, 1) for n in t.roots.nodes()]
                while stack:
                    n, d = stack.pop()
                    best = max(best, d)
                    if n.kids is not None:
                        stack.extend((c, d + 1) for c in n.kids.nodes())
        return best

    def check(self) -> None:
        """Assert the forest's invariants (for tests): each parent covers its child,
        links agree, roots of a type are pairwise incomparable, every key is reachable
        exactly once, and hull columns sit where their nodes think."""
        seen: dict[int, _Node] = {}
        for tops in self._tops.values():
            for t in tops:
                roots = t.roots.nodes()
                for i, a in enumerate(roots):
                    assert a.parent is None
                    for b in roots[i + 1:]:
                        assert not covers(a.box, b.box) and not covers(b.box, a.box), \
                            f"roots {a.box} and {b.box} are comparable"
                stack: list[tuple[_Kids, _Node | None]] = [(t.roots, None)]
                while stack:
                    kids, parent = stack.pop()
                    if kids.hulls is not None:
                        for i, n in enumerate(kids.hulls.items[:kids.hulls.n]):
                            assert n is not None and n.at == i
                    for n in kids.nodes():
                        assert n.parent is parent
                        assert n.keys, "a node without keys stayed in the forest"
                        if parent is not None:
                            assert covers(parent.box, n.box), \
                                f"{parent.box} does not cover its child {n.box}"
                        for k in n.keys:
                            assert k not in seen, f"key {k} is reachable twice"
                            seen[k] = n
                        if n.kids is not None:
                            stack.append((n.kids, n))
        assert seen.keys() == self._by_key.keys()
        for k, n in seen.items():
            assert self._by_key[k] is n


class Relations:
    """The three exact relation tests of one query ``q`` against stored boxes of its type:
    ``overlaps(b)``, ``inside(b)`` (``q`` covers ``b``), ``around(b)`` (``b`` covers
    ``q``). For a plain ``q`` (one non-full interval per constrained attribute) they read
    the boxes' intervals directly instead of calling the general constraint relations;
    ``general=True`` (or a query that is not plain) uses those relations throughout."""

    __slots__ = ("around", "inside", "overlaps")

    def __init__(self, q: Profile, *, general: bool = False) -> None:
        spans = None if general else _plain_spans(q)
        if spans is None:
            self.overlaps = overlap_test(q)
            self.inside: Callable[[Profile], bool] = lambda b: covers(q, b)
            self.around: Callable[[Profile], bool] = lambda b: covers(b, q)
            return
        cons = {c.position: c.constraint for c in q.conditions}
        need = len(spans)

        def overlaps(b: Profile) -> bool:
            for c in b.conditions:
                s = spans.get(c.position)
                if s is not None:
                    iv = c.constraint.intervals  # type: ignore[union-attr]
                    if not iv or iv[-1][1] < s[0] or s[1] < iv[0][0]:
                        return False
                    if len(iv) > 1 and constraint_disjoint(c.constraint, cons[c.position]):
                        return False
            return True

        def inside(b: Profile) -> bool:
            met = 0
            for c in b.conditions:
                s = spans.get(c.position)
                if s is not None:
                    iv = c.constraint.intervals  # type: ignore[union-attr]
                    if iv and (iv[0][0] < s[0] or iv[-1][1] > s[1]):
                        return False
                    met += 1
            return met == need  # b free where q constrains: q's interval is not full

        def around(b: Profile) -> bool:
            for c in b.conditions:
                s = spans.get(c.position)
                if s is None:
                    return covers(b, q)  # b constrains what q leaves free: the general rule
                iv = c.constraint.intervals  # type: ignore[union-attr]
                if not any(lo <= s[0] and s[1] <= hi for lo, hi in iv):
                    return False
            return True

        self.overlaps, self.inside, self.around = overlaps, inside, around


def _plain_spans(q: Profile) -> dict[int, tuple[int, int]] | None:
    """``q``'s interval per constrained attribute, if every constraint is one interval
    that is not the attribute's whole domain (else ``None``)."""
    spans: dict[int, tuple[int, int]] = {}
    attrs = q.etype.attributes
    for c in q.conditions:
        con = c.constraint
        if not isinstance(con, IntervalSet) or len(con.intervals) != 1:
            return None
        lo, hi = con.intervals[0]
        dom = attrs[c.position].domain
        if lo <= dom.min_key and hi >= dom.max_key:  # type: ignore[union-attr]
            return None
        spans[c.position] = (lo, hi)
    return spans


def overlap_test(q: Profile) -> Callable[[Profile], bool]:
    """``overlaps(q, b)`` for boxes ``b`` of ``q``'s type, with ``q``'s constraints looked
    up once instead of once per test."""
    mine = {c.position: c.constraint for c in q.conditions}

    def test(b: Profile) -> bool:
        for c in b.conditions:
            other = mine.get(c.position)
            if other is not None and constraint_disjoint(c.constraint, other):
                return False
        return True

    return test


def _collect(node: _Node, out: list[int]) -> None:
    """Every key of ``node``'s subtree."""
    stack = [node]
    while stack:
        n = stack.pop()
        out.extend(n.keys)
        if n.kids is not None:
            stack.extend(n.kids.nodes())


__all__ = ["COLUMNS_FROM", "SubspaceForest", "Relations", "overlap_test"]
