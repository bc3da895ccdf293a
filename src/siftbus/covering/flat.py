"""A covering table that ignores covering: the ``simple`` and ``identity`` strategies.

Every node is a root and nothing covers anything, so out(Y) is every node some
interface other than ``Y`` holds. What a node groups decides the strategy:

* ``by="id"`` (``simple``): one node per profile, so every profile is forwarded;
* ``by="filter"`` (``identity``): one node per filter key, so of profiles with equal
  filters only the oldest not from ``Y`` is forwarded to ``Y``.

The forwarding algorithm (:class:`~siftbus.covering.forwarding.ForwardingTable`) runs
unchanged on it; only the structure's answers differ.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Literal

from siftbus.covering.table import FilterNode, TableBase
from siftbus.model import Profile


class FlatTable(TableBase):
    """Nodes without covering edges. See :class:`~siftbus.covering.table.CoveringTable`."""

    def __init__(self, by: Literal["id", "filter"] = "filter") -> None:
        super().__init__(indexed=False)
        self.by = by

    def _key(self, profile: Profile) -> Hashable:
        return profile.id if self.by == "id" else profile.filter_key

    def _insert_filter(self, filter: Profile) -> FilterNode:
        node = self._new_node(filter)
        self._roots[node] = None
        return node

    def _delete_node(self, node: FilterNode) -> None:
        del self._roots[node]

    def _below(self, node: FilterNode) -> Iterable[FilterNode]:
        return ()

    def covered_by_other(self, node: FilterNode, neighbour: str | None) -> bool:
        return False

    def coverers(self, node: FilterNode) -> list[FilterNode]:
        return []

    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]:
        return []

    def edges(self) -> list[tuple[FilterNode, FilterNode]]:
        return []


__all__ = ["FlatTable"]
