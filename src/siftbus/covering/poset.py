"""Siena's filters poset: every filter linked to its immediate predecessors and successors.

The edges are exactly the immediate-cover relation (the Hasse diagram of ⊒ on the
distinct filters held), so a node's ancestors are *all* the filters covering it and its
descendants all the filters it covers. Insert and delete follow Tarkoma/Bittner
(B Alg. 8.3–8.6): find the immediate predecessors by descending from the roots through
covering nodes, the immediate successors by descending from them through overlapping
nodes, and splice; on delete, reconnect each predecessor to each successor it no longer
reaches. By default (``indexed=True``) the predecessors and successors are read off a
:class:`~siftbus.covering.query.CoveringIndex` of the filters held (all coverers in one
vectorised pass, then the lowest of them) instead of walking from the roots, which tests
every root; ``indexed=False`` keeps the walks. Profiles with equal filters share a node
and keep their own interfaces; unlike Siena's Alg. 1 no subscriber is dropped from
covered filters, so on unsubscription the table itself knows what becomes uncovered (no
re-send from the origin is needed).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from functools import partial

from siftbus.covering.relations import overlaps
from siftbus.covering.table import NO_LINKS, FilterNode, TableBase
from siftbus.errors import DuplicateProfileError
from siftbus.model import EventType, IntervalSet, Profile, StringConstraint
from siftbus.model.domain import StringDomain


class FilterPoset(TableBase):
    """The filters poset (FP). See :class:`~siftbus.covering.table.CoveringTable`."""

    def _below(self, node: FilterNode) -> Iterable[FilterNode]:
        return node.succs

    # --- insertion ----------------------------------------------------------------

    def _im_preds(self, f: Profile) -> list[FilterNode]:
        """Immediate predecessors of ``f``: the lowest covering nodes."""
        queue = deque(r for r in self._roots if self._covers(r.filter, f))
        seen: set[FilterNode] = set(queue)
        res: list[FilterNode] = []
        while queue:
            p = queue.popleft()
            deeper = False
            for c in p.succs:
                if c in seen:
                    deeper = True  # c covers f (it was queued for that reason)
                    continue
                if self._covers(c.filter, f):
                    seen.add(c)
                    queue.append(c)
                    deeper = True
            if not deeper:
                res.append(p)
        return res

    def _im_succs(self, f: Profile, preds: list[FilterNode]) -> list[FilterNode]:
        """Immediate successors of ``f``: the highest nodes it covers."""
        start: Iterable[FilterNode] = (
            {c: None for p in preds for c in p.succs} if preds else self._roots)
        queue = deque(start)
        seen: set[FilterNode] = set(queue)
        cand: list[FilterNode] = []
        while queue:
            c = queue.popleft()
            if self._covers(f, c.filter):
                cand.append(c)
                continue
            self._comparisons += 1
            if not overlaps(f, c.filter):
                continue  # nothing below c can lie inside f either
            for d in c.succs:
                if d not in seen:
                    seen.add(d)
                    queue.append(d)
        if len(cand) <= 1:
            return cand
        return [c for c in cand
                if not any(o is not c and self._covers(o.filter, c.filter) for o in cand)]

    def _insert_filter(self, filter: Profile, node: FilterNode | None = None,
                       covered: bool = True) -> FilterNode:
        """Place ``filter`` (in ``node`` when given, else a new node); ``covered=False``
        skips looking for the nodes it covers (the caller knows there are none)."""
        if self._index is not None:
            # Every node covering the filter, in one vectorised pass; the immediate
            # predecessors are its lowest members: a node with a successor in the set
            # is not one (a Hasse path from a coverer to a lower coverer stays inside).
            above = self._all_covering(filter)
            for p in above:
                if self._covers(filter, p.filter):
                    return p  # equivalent filter written differently
            above_set = set(above)
            preds = [p for p in above if not any(c in above_set for c in p.succs)]
            below = self._all_covered(filter) if covered else []
            below_set = set(below)
            succs = [c for c in below if not any(p in below_set for p in c.preds)]
        else:
            preds = self._im_preds(filter)
            for p in preds:
                if self._covers(filter, p.filter):
                    return p
            succs = self._im_succs(filter, preds) if covered else []
        if node is None:
            node = self._new_node(filter)
        for c in succs:
            for p in preds:
                if c in p.succs:
                    _disconnect(p, c)
            _connect(node, c)
        for p in preds:
            _connect(p, node)
        if not preds:
            for c in succs:
                self._roots.pop(c, None)
            self._roots[node] = None
        self._index_add(node)
        return node

    def add_many(self, items: Sequence[tuple[Profile, str | None, str | None]]
                 ) -> list[FilterNode]:
        """:meth:`add` for each ``(profile, iface, local_id)``, in one step: the same
        structure, nodes (numbered in the order of ``items``), entries and roots as
        adding them one at a time, found with fewer covering queries.

        The new filters are placed widest first: sorted by their per-attribute sizes
        (:func:`_sizes`), which never decrease from a filter to one covering it, in
        lexicographic order, which therefore lists every coverer before what it covers.
        So a filter's coverers are in place before it, and nothing placed before it
        lies below it, except nodes held before the call and filters of equal sizes
        with a string condition (string sizes are estimates): only then is the query
        for the nodes it covers run. A duplicate id, held or in ``items``, raises
        :class:`DuplicateProfileError` before anything changes.
        """
        seen: set[str] = set()
        for profile, _, _ in items:
            if profile.id in self._entries or profile.id in seen:
                raise DuplicateProfileError(f"profile id {profile.id!r} is already "
                                            "registered", field=profile.id)
            seen.add(profile.id)
        held_before = bool(self._by_key)
        keys = [self._key(profile) for profile, _, _ in items]
        fresh: dict[Hashable, FilterNode] = {}  # made in the order of items (their seq)
        for (profile, _, _), key in zip(items, keys, strict=True):
            if key not in self._by_key and key not in fresh:
                fresh[key] = self._new_node(profile)
        bases: dict[str, tuple[EventType, list[float]]] = {}
        sized = [(_sizes(node.filter, bases), node) for node in fresh.values()]
        sized.sort(key=lambda x: x[0][0], reverse=True)  # stable: ties in item order
        placed: dict[FilterNode, FilterNode] = {}  # an equivalent node held may take it
        last: tuple[float, ...] | None = None
        for (size, strings), node in sized:
            tie = strings and size == last
            placed[node] = self._insert_filter(node.filter, node,
                                               covered=held_before or tie)
            last = size
        node_of = {key: placed[node] for key, node in fresh.items()}
        return [self._enter(profile, iface, local_id, key, partial(node_of.__getitem__, key))
                for (profile, iface, local_id), key in zip(items, keys, strict=True)]

    # --- deletion -----------------------------------------------------------------

    def _reaches(self, top: FilterNode, target: FilterNode) -> bool:
        """Whether ``target`` lies below ``top``; only nodes covering ``target`` can be on
        the way, so the search stays among them."""
        stack = [top]
        seen = {top}
        while stack:
            n = stack.pop()
            for c in n.succs:
                if c is target:
                    return True
                if c not in seen:
                    seen.add(c)
                    if self._covers(c.filter, target.filter):
                        stack.append(c)
        return False

    def _delete_node(self, node: FilterNode) -> None:
        self._index_remove(node)
        preds = list(node.preds)
        succs = list(node.succs)
        for p in preds:
            _disconnect(p, node)
        for c in succs:
            _disconnect(node, c)
        for p in preds:
            for c in succs:
                if not self._reaches(p, c):
                    _connect(p, c)
        if node in self._roots:
            del self._roots[node]
            for c in succs:
                if not c.preds:
                    self._roots[c] = None

    # --- router queries -----------------------------------------------------------

    def covered_by_other(self, node: FilterNode, neighbour: str | None) -> bool:
        # Ancestors are exactly the covering filters.
        stack = list(node.preds)
        seen = set(stack)
        while stack:
            n = stack.pop()
            if n.in_scope(neighbour):
                return True
            for p in n.preds:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False

    def coverers(self, node: FilterNode) -> list[FilterNode]:
        out = list(node.preds)
        seen = set(out)
        i = 0
        while i < len(out):
            for p in out[i].preds:
                if p not in seen:
                    seen.add(p)
                    out.append(p)
            i += 1
        return out

    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]:
        out: list[FilterNode] = []
        stack = list(node.succs)
        seen = set(stack)
        while stack:
            n = stack.pop()
            if n.in_scope(neighbour):
                out.append(n)
                continue
            for c in n.succs:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return out

    def edges(self) -> list[tuple[FilterNode, FilterNode]]:
        return sorted(((p, c) for p in self.nodes() for c in p.succs),
                      key=lambda e: (e[0].seq, e[1].seq))

    def immediate_predecessors(self, profile_id: str) -> list[Profile]:
        """One profile per filter immediately covering this profile's filter."""
        return [n.rep_for(None) for n in sorted(self.node_of(profile_id).preds,
                                                key=lambda n: n.seq)]

    def immediate_successors(self, profile_id: str) -> list[Profile]:
        """One profile per filter this profile's filter immediately covers."""
        return [n.rep_for(None) for n in sorted(self.node_of(profile_id).succs,
                                                key=lambda n: n.seq)]


def _sizes(p: Profile, bases: dict[str, tuple[EventType, list[float]]]
           ) -> tuple[tuple[float, ...], bool]:
    """Per attribute how many values ``p`` accepts (exact for ordered attributes; for a
    string, the estimate of :func:`~siftbus.covering.query._breadth`, which never
    decreases from a constraint to one containing it), and whether ``p`` constrains a
    string attribute. ``bases`` caches the unconstrained sizes per type."""
    cached = bases.get(p.type_name)
    if cached is None or cached[0] is not p.etype:
        cached = bases[p.type_name] = (p.etype, [
            100.0 if isinstance(a.domain, StringDomain) else float(a.domain.size)
            for a in p.etype.attributes])
    size = list(cached[1])
    strings = False
    for c in p.conditions:
        con = c.constraint
        if isinstance(con, IntervalSet):
            size[c.position] = float(con.size)
        else:
            assert isinstance(con, StringConstraint)
            strings = True
            size[c.position] = (math.log(len(con.allowed)) if con.allowed is not None
                                else 60.0 - len(con.prefix))
    return tuple(size), strings


def _connect(upper: FilterNode, lower: FilterNode) -> None:
    if upper.succs is NO_LINKS:
        upper.succs = {}
    if lower.preds is NO_LINKS:
        lower.preds = {}
    upper.succs[lower] = None
    lower.preds[upper] = None


def _disconnect(upper: FilterNode, lower: FilterNode) -> None:
    upper.succs.pop(lower, None)
    lower.preds.pop(upper, None)


__all__ = ["FilterPoset"]
