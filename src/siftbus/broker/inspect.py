"""The ``inspect`` service of a broker: what an operator looks at besides the counters.

Every :class:`~siftbus.broker.server.BrokerServer` hosts it (``client.call("inspect",
method, ...)``); the gateway's dashboard and the Prometheus collector
(:mod:`siftbus.broker.metrics`) read it. Methods::

    table(limit=100) -> {"structure", "profiles", "filters", "roots": [root, ...],
                         "truncated", "by_type": {type: {"local": n, "neighbour": m}}}
    queues() -> {"clients", "queued_bytes", "max_queued_bytes"}

A root is a filter of the broker's covering structure that no other filter covers (the
roots of the poset or poset-derived forest: the minimal cover of the whole table, what a
parent broker needs to hold), ``{"filter", "profiles", "subscribers", "covers"}``:
the filter as a profile line, how many profiles share it, the interfaces holding it
(``@client`` or a neighbour broker) and how many filters it covers directly. ``limit``
(at most :data:`MAX_ROOTS`) bounds the answer; the oldest roots come first.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from siftbus.covering.table import FilterNode
from siftbus.errors import WireError
from siftbus.lang.profile import format_profile

from .node import BrokerNode

MAX_ROOTS = 1000
"""Most roots one ``table`` call returns."""


class Connections(Protocol):
    """What the service reads of a server's listener: its open connections."""

    @property
    def connections(self) -> Any: ...


def profiles_by_type(node: BrokerNode) -> dict[str, dict[str, int]]:
    """Profile-table entries per event type: from local clients and from neighbours
    (every type of the schema is present, with zeros)."""
    counts: Counter[tuple[str, bool]] = Counter(
        (e.profile.etype.name, node.is_broker(e.src))
        for e in node.routing.table.entries.values())
    return {t: {"local": counts[(t, False)], "neighbour": counts[(t, True)]}
            for t in node.schema.names}


def _root(n: FilterNode) -> dict[str, Any]:
    below = n.children if n.children else n.succs
    return {"filter": format_profile(n.filter, with_id=False), "profiles": len(n.entries),
            "subscribers": sorted(n.subscribers), "covers": len(below)}


def table_summary(node: BrokerNode, limit: int = 100) -> dict[str, Any]:
    """The ``table`` answer (see the module docstring)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_ROOTS:
        raise WireError(f"limit must be an integer 0..{MAX_ROOTS}", field="limit")
    structure = node.routing.table.structure
    roots = structure.root_nodes()
    return {"structure": type(structure).__name__, "profiles": len(structure),
            "filters": len(structure.nodes()), "roots": [_root(n) for n in roots[:limit]],
            "root_count": len(roots), "truncated": len(roots) > limit,
            "by_type": profiles_by_type(node)}


def queue_depths(listener: Connections | None) -> dict[str, int]:
    """Bytes written toward local clients and not yet sent (now, summed and the largest)."""
    queued = [c.buffered for c in (listener.connections if listener is not None else ())
              if c.link.startswith("@")]
    return {"clients": len(queued), "queued_bytes": sum(queued),
            "max_queued_bytes": max(queued, default=0)}


class InspectService:
    """The ``inspect`` service handler (``handler(method, args, caller)``)."""

    name = "inspect"

    def __init__(self, node: BrokerNode, listener: Connections | None = None) -> None:
        self.node = node
        self.listener = listener

    def __call__(self, method: str, args: dict[str, Any], caller: str) -> Any:
        if method == "table":
            return table_summary(self.node, args.get("limit", 100))
        if method == "queues":
            return queue_depths(self.listener)
        raise WireError(f"the inspect service has no method {method!r} (table, queues)",
                        field="method")


__all__ = ["MAX_ROOTS", "InspectService", "profiles_by_type", "queue_depths", "table_summary"]
