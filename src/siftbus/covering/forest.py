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
prunes at the first node that does not.
"""

from __future__ import annotations

from collections.abc import Iterable

from siftbus.covering.relations import overlaps
from siftbus.covering.table import FilterNode, TableBase
from siftbus.model import Profile


class PosetForest(TableBase):
    """The poset-derived forest (PF). See :class:`~siftbus.covering.table.CoveringTable`."""

    def _below(self, node: FilterNode) -> Iterable[FilterNode]:
        return node.children

    def _children(self, node: FilterNode | None) -> dict[FilterNode, None]:
        return self._roots if node is None else node.children

    def _attach(self, parent: FilterNode | None, node: FilterNode) -> None:
        node.parent = parent
        self._children(parent)[node] = None

    def _detach(self, node: FilterNode) -> None:
        del self._children(node.parent)[node]
        node.parent = None

    def _place(self, node: FilterNode, start: FilterNode | None) -> FilterNode:
        """Put ``node`` (with its subtree) below ``start``: adopt the children it covers,
        else hang it where nothing covers it, else descend into the first covering child.
        Returns an existing equivalent node instead of placing, if one is met."""
        f = node.filter
        cur = start
        while True:
            kids = self._children(cur)
            covered = [c for c in kids if self._covers(f, c.filter)]
            if covered:
                for c in covered:
                    if self._covers(c.filter, f):
                        return c  # equivalent
                for c in covered:
                    self._detach(c)
                    self._attach(node, c)
                self._attach(cur, node)
                return node
            nxt = None
            for c in kids:
                if self._covers(c.filter, f):
                    nxt = c
                    break
            if nxt is None:
                self._attach(cur, node)
                return node
            cur = nxt

    def _insert_filter(self, filter: Profile) -> FilterNode:
        return self._place(self._new_node(filter), None)

    def _delete_node(self, node: FilterNode) -> None:
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
        stack = [r for r in self._roots if r is not node and self._covers(r.filter, f)]
        while stack:
            n = stack.pop()
            if n.in_scope(neighbour):
                return True
            stack.extend(c for c in n.children
                         if c is not node and self._covers(c.filter, f))
        return False

    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]:
        f = node.filter
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
            self.comparisons += 1
            if overlaps(f, n.filter):
                outside.extend(c for c in n.children if c is not node)
        while inside:
            n = inside.pop()
            if n.in_scope(neighbour):
                out.append(n)
            else:
                inside.extend(n.children)
        return out

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


__all__ = ["PosetForest"]
