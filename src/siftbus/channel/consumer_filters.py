"""The consumer-side filters of one channel, in one constraint index.

Filters attached to consumer admins and proxy suppliers are registered once each (by
filter, however many objects share it); an event then costs the index's match plus work
for the filters it satisfies, not a loop over every consumer. :meth:`ConsumerFilters.hits`
answers which admins and which proxies' filters let an event through; the admins combine
that with their InterFilterGroupOperator
(:meth:`~siftbus.channel.admin.ConsumerAdmin.targets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from siftbus.channel.event_types import EventType
from siftbus.channel.filter import EventTypes, Filter
from siftbus.channel.filter_index import ConstraintIndex
from siftbus.channel.node import Node
from siftbus.channel.proxy import ProxySupplier
from siftbus.lang.etcl import Constraint


@dataclass(slots=True)
class _Use:
    """Where one filter is attached: node identity -> (node, attach count)."""

    filter: Filter
    nodes: dict[int, tuple[Node, int]] = field(default_factory=dict)


_NO_ADMINS: frozenset[int] = frozenset()
_NO_PROXIES: Mapping[int, list[ProxySupplier]] = MappingProxyType({})


def _key(fid: int, cid: int) -> str:
    return f"f{fid}/{cid}"


class ConsumerFilters:
    """Consumer-side filter attachments of a channel and their constraint index (the
    channel's lock guards it)."""

    def __init__(self, engine: str | None, compile_filters: bool) -> None:
        self._index = ConstraintIndex(engine, compile=compile_filters)
        self._uses: dict[int, _Use] = {}  # filter id -> attachments
        self._key_filter: dict[str, int] = {}  # index key -> filter id

    def __bool__(self) -> bool:
        return bool(self._uses)

    def attach(self, node: Node, f: Filter) -> bool:
        """Count ``f`` attached to ``node``; True when the channel did not use ``f``
        before (its constraints are indexed now)."""
        use = self._uses.get(f.id)
        first = use is None
        if use is None:
            use = self._uses[f.id] = _Use(f)
            for cid, c, types in f.constraints():
                self._add(f.id, cid, c, types)
        _, n = use.nodes.get(id(node), (node, 0))
        use.nodes[id(node)] = (node, n + 1)
        return first

    def detach(self, node: Node, f: Filter) -> bool:
        """Count one attachment of ``f`` to ``node`` less; True when the channel uses
        ``f`` no more (its constraints left the index)."""
        use = self._uses.get(f.id)
        if use is None:
            return False
        _, n = use.nodes.get(id(node), (node, 0))
        if n <= 1:
            use.nodes.pop(id(node), None)
        else:
            use.nodes[id(node)] = (node, n - 1)
        if use.nodes:
            return False
        del self._uses[f.id]
        for cid, _, _ in f.constraints():
            self._remove(_key(f.id, cid))
        return True

    def update(self, f: Filter, added: list[tuple[int, Constraint, EventTypes]],
               removed: list[int]) -> None:
        """A used filter's constraints changed."""
        if f.id not in self._uses:
            return
        for cid in removed:
            self._remove(_key(f.id, cid))
        for cid, c, types in added:
            self._add(f.id, cid, c, types)

    def _add(self, fid: int, cid: int, c: Constraint, types: EventTypes) -> None:
        key = _key(fid, cid)
        self._index.add(key, c, types)
        self._key_filter[key] = fid

    def _remove(self, key: str) -> None:
        if key in self._index:
            self._index.remove(key)
            del self._key_filter[key]

    def hits(self, view: Any) -> tuple[AbstractSet[int], Mapping[int, list[ProxySupplier]]]:
        """For an event (what filters see): the ids of the consumer admins whose filters
        pass it, and per admin id the connected proxies whose filters pass it."""
        if not self._uses:
            return _NO_ADMINS, _NO_PROXIES
        hit_admins: set[int] = set()
        hit_proxies: dict[int, list[ProxySupplier]] = {}
        key_filter = self._key_filter
        seen: set[int] = set()
        for key in self._index.match(view):
            fid = key_filter[key]
            if fid in seen:
                continue
            seen.add(fid)
            for node, _ in self._uses[fid].nodes.values():
                if isinstance(node, ProxySupplier):
                    if node.connected:
                        hit_proxies.setdefault(node.admin.id, []).append(node)
                else:
                    hit_admins.add(node.id)
        return hit_admins, hit_proxies


def filter_types(f: Filter) -> list[EventType]:
    """The event types of a filter's constraints (they count as subscriptions)."""
    return [t for _, _, ts in f.constraints() for t in ts]


__all__ = ["ConsumerFilters", "filter_types"]
