"""A tree of five real brokers on 127.0.0.1 port 0 (in this process) with a handoff
protocol, for the session and mobility tests and ``bench/mobility.py``: its small schema,
start, close, and a bounded wait for a condition."""

from __future__ import annotations

from pathlib import Path

from siftbus.broker.server import BrokerServer
from siftbus.broker.store import ProfileStore
from siftbus.model import parse_schema

from .servers import close_all as close_all  # the mobility tests take it from here
from .servers import eventually as wait_for  # noqa: F401 -- the mobility tests' name for it
from .servers import start_network

SCHEMA = parse_schema("""
[T]
a = "int[0,99]"
b = "int[0,1000000]"
""")
T = SCHEMA["T"]
TREE = [("B0", "B1"), ("B0", "B2"), ("B1", "B3"), ("B1", "B4")]
NAMES = ["B0", "B1", "B2", "B3", "B4"]


async def start_tree(handoff: str, protocol: str = "forwarding",
                     names: list[str] = NAMES, edges: list[tuple[str, str]] = TREE,
                     store: Path | None = None) -> dict[str, BrokerServer]:
    """The tree's brokers with ``handoff`` (rendezvous routing meets at B1)."""
    return await start_network(
        names, edges, protocol, schema=SCHEMA, handoff=handoff,
        rendezvous={"T": "B1"} if protocol == "rendezvous" else None,
        store=ProfileStore(store) if store else None)


