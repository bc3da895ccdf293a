"""A tree of five real brokers on 127.0.0.1 port 0 (in this process) with a handoff
protocol, for the session and mobility tests and ``bench/mobility.py``: its small schema,
start, close, and a bounded wait for a condition."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from siftbus.broker.node import BrokerNode
from siftbus.broker.protocols import rendezvous_directions
from siftbus.broker.server import BrokerServer
from siftbus.broker.store import ProfileStore
from siftbus.model import parse_schema

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
    servers: dict[str, BrokerServer] = {}
    rn = {"T": "B1"}
    for i, b in enumerate(names):
        nbrs = tuple(x for a, c in edges for x in (a, c) if b in (a, c) and x != b)
        node = BrokerNode(
            b, SCHEMA, protocol=protocol, neighbours=nbrs, handoff=handoff, edges=edges,
            rendezvous=rendezvous_directions(edges, b, rn) if protocol == "rendezvous"
            else None, store=ProfileStore(store) if store else None)
        dial = {n: ("127.0.0.1", servers[n].port) for n in nbrs if names.index(n) < i}
        srv = BrokerServer(node, dial=dial)
        await srv.start()
        servers[b] = srv
    for srv in servers.values():
        await srv.wait_neighbours(10)
    return servers


async def close_all(servers: dict[str, BrokerServer]) -> None:
    for s in servers.values():
        await s.close()


async def wait_for(cond: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)
