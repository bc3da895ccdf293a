"""The poset-derived forest: each filter under one parent that covers it.

Tarkoma's PF keeps only one covering edge per node, so adding a filter costs one descent
(the children of each node on the way) and deleting one re-inserts its children's
subtrees from its parent. Invariants, kept by both operations:

1. every node is covered by its parent, hence by all its ancestors;
2. the roots are pairwise incomparable, so they are the minimal cover of all filters
   held — the same root set as the poset;
3. siblings below the roots may be comparable (harmless).

Covering edges to other branches are not kept, so questions about *all* covering nodes
(``covered_by_other``) search every branch whose root covers the filter; the descent
prunes at the first node that does not. By default (``indexed=True``) a
:class:`~siftbus.covering.query.CoveringIndex` of the filters answers "which nodes cover
(are covered by) this filter" in one vectorised pass, so the descent only looks up
children in those sets instead of testing every root; ``indexed=False`` tests literally.
"""

from __future__ import annotations

from collections.abc import Iterable

from siftbus.covering.relations import overlaps
from siftbus.covering.table import NO_LINKS, FilterNode, TableBase
from siftbus.model import Profile


class PosetForest(TableBase):
    """The poset-derived forest (PF). See :class:`~siftbus.covering.table.CoveringTable`."""

    def _below(self, node: FilterNode) -> Iterable[FilterNode]:
        return node.children

    def _children(self, node: FilterNode | None) -> dict[FilterNode, None]:
        return self._roots if node is None else node.children

    def _attach(self, parent: FilterNode | None, node: FilterNode) -> None:
        node.parent = parent
        if parent is not None and parent.children is NO_LINKS:
            parent.children = {}
        self._children(parent)[node] = None

    def _detach(self, node: FilterNode) -> None:
        del self._children(node.parent)[node]
        node.parent = None

    def _place(self, node: FilterNode, start: FilterNode | None, *,
               new: bool = False) -> FilterNode:
        """Put ``node`` (with its subtree) below ``start``: adopt the children it covers,
        else hang it where nothing covers it, else descend into the first covering child.
        For a ``new`` node, returns an existing equivalent node instead, if one exists."""
        f = node.filter
        below: set[FilterNode] | None = None
        above: set[FilterNode] | None = None
        if self._index is not None:
            # All coverers and all covered nodes at once; each level then only asks
            # which of its children are in these sets.
            above = {n for n in self._all_covering(f) if n is not node}
            below = {n for n in self._all_covered(f) if n is not node}
            if new:
                for n in above & below:
                    return n  # equivalent filter written differently
        cur = start
        while True:
            kids = self._children(cur)
            if below is not None:
                pool = below if len(below) < len(kids) else kids
                covered = sorted((c for c in pool if c in kids and c in below),
                                 key=lambda c: c.seq)
            else:
                covered = [c for c in kids if self._covers(f, c.filter)]
                if new:
                    for c in covered:
                        if self._covers(c.filter, f):
                            return c  # equivalent
            if covered:
                for c in covered:
                    self._detach(c)
                    self._attach(node, c)
                self._attach(cur, node)
                return node
            nxt = None
            if above is not None:
                pool = above if len(above) < len(kids) else kids
                ups = [c for c in pool if c in kids and c in above]
                nxt = min(ups, key=lambda c: c.seq) if ups else None
            else:
                for c in kids:
                    if self._covers(c.filter, f):
                        nxt = c
                        break
            if nxt is None:
                self._attach(cur, node)
                return node
            cur = nxt

    def _insert_filter(self, filter: Profile) -> FilterNode:
        node = self._new_node(filter)
        placed = self._place(node, None, new=True)
        if placed is node:
            self._index_add(node)
        return placed

    def _delete_node(self, node: FilterNode) -> None:
        self._index_remove(node)
        parent = node.parent
        self._detach(node)
        for c in list(node.children):
            del node.children[c]
            c.parent = None
            placed = self._place(c, parent)
            assert placed is c  # distinct nodes are never equivalent

    # --- router queries -----------------------------------------------------------

    def covered_by_other(self, node: FilterNode, neighbour: str | None) -> bool:
        f = node.filter
        if self._index is not None:
            return any(n is not node and n.in_scope(neighbour) for n in self._all_covering(f))
        stack = [r for r in self._roots if r is not node and self._covers(r.filter, f)]
        while stack:
            n = stack.pop()
            if n.in_scope(neighbour):
                return True
            stack.extend(c for c in n.children
                         if c is not node and self._covers(c.filter, f))
        return False

    def coverers(self, node: FilterNode) -> list[FilterNode]:
        f = node.filter
        if self._index is not None:
            return [n for n in self._all_covering(f) if n is not node]
        out: list[FilterNode] = []
        stack = [r for r in self._roots if r is not node and self._covers(r.filter, f)]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(c for c in n.children
                         if c is not node and self._covers(c.filter, f))
        return out

    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]:
        f = node.filter
        if self._index is not None:
            return _topmost(self._all_covered(f), node, neighbour)
        out: list[FilterNode] = []
        # Inside a subtree whose top ``node`` covers, everything is covered: keep the
        # topmost in-scope nodes. Elsewhere descend only where ``f`` overlaps, since a
        # node covered by f has ancestors that all overlap f.
        inside: list[FilterNode] = list(node.children)
        outside: list[FilterNode] = [r for r in self._roots if r is not node]
        while outside:
            n = outside.pop()
            if self._covers(f, n.filter):
                inside.append(n)
                continue
            self._comparisons += 1
            if overlaps(f, n.filter):
                outside.extend(c for c in n.children if c is not node)
        while inside:
            n = inside.pop()
            if n.in_scope(neighbour):
                out.append(n)
            else:
                inside.extend(n.children)
        return out

    def topmost_below_each(self, node: FilterNode, neighbours: Iterable[str]
                           ) -> dict[str, list[FilterNode]]:
        if self._index is None:
            return {y: self.topmost_below(node, y) for y in neighbours}
        below = self._all_covered(node.filter)  # one index query for every neighbour
        return {y: _topmost(below, node, y) for y in neighbours}

    def edges(self) -> list[tuple[FilterNode, FilterNode]]:
        return sorted(((n.parent, n) for n in self.nodes() if n.parent is not None),
                      key=lambda e: (e[0].seq, e[1].seq))

    def parent_of(self, profile_id: str) -> Profile | None:
        """One profile of the parent filter, or ``None`` for a root."""
        parent = self.node_of(profile_id).parent
        return None if parent is None else parent.rep_for(None)

    def depth(self) -> int:
        """Longest root-to-leaf path, in nodes (0 when empty)."""
        best = 0
        stack = [(r, 1) for r in self._roots]
        while stack:
            n, d = stack.pop()
            best = max(best, d)
            stack.extend((c, d + 1) for c in n.children)
        return best


def _topmost(below: list[FilterNode], node: FilterNode,
             neighbour: str | None) -> list[FilterNode]:
    scope = {n for n in below if n is not node and n.in_scope(neighbour)}
    return sorted((n for n in scope if not _has_ancestor_in(n, scope)), key=lambda n: n.seq)


def _has_ancestor_in(node: FilterNode, nodes: set[FilterNode]) -> bool:
    p = node.parent
    while p is not None:
        if p in nodes:
            return True
        p = p.parent
    return False


__all__ = ["PosetForest"]
