"""Real broker servers for tests: a tree of ``BrokerServer``s on 127.0.0.1 port 0 in this
process, a wait until the network is quiet, and a bounded wait for a condition. Shared by
the broker, client, temporal, security and gateway tests."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from broker_strategies import SCHEMA
from siftbus.broker.node import BrokerNode
from siftbus.broker.protocols import rendezvous_directions
from siftbus.broker.server import BrokerServer
from siftbus.broker.simulator import Delivery
from siftbus.client import Client
from siftbus.model import Schema
from siftbus.security.tls import ContextSet


async def start_network(names: list[str], edges: list[tuple[str, str]], protocol: str,
                        strategy: str = "covering",
                        rendezvous: dict[str, str] | None = None,
                        advertisements: bool = False, schema: Schema = SCHEMA, *,
                        tls: Callable[[str], ContextSet] | None = None,
                        per_broker: Callable[[str], dict[str, Any]] | None = None,
                        wait: float | None = 10, **node: Any) -> dict[str, BrokerServer]:
    """Brokers of a tree, each its own server; a broker dials its neighbours listed
    before it and knows the whole tree (as ``siftbus network up`` does). ``node``: more
    ``BrokerNode`` options; ``per_broker(name)``: options of one broker (its guard, its
    store); ``tls(name)``: its TLS contexts; ``wait``: seconds to wait for the links."""
    servers: dict[str, BrokerServer] = {}
    for i, b in enumerate(names):
        nbrs = tuple(x for a, c in edges for x in (a, c) if b in (a, c) and x != b)
        dirs = rendezvous_directions(edges, b, rendezvous) if rendezvous else None
        own = per_broker(b) if per_broker is not None else {}
        bn = BrokerNode(b, schema, protocol=protocol, strategy=strategy, neighbours=nbrs,
                        rendezvous=dirs, advertisements=advertisements, edges=edges,
                        **node, **own)
        dial = {n: ("127.0.0.1", servers[n].port) for n in nbrs
                if n in servers and names.index(n) < i}
        srv = BrokerServer(bn, dial=dial, tls=tls(b) if tls is not None else None)
        await srv.start()
        servers[b] = srv
    if wait is not None:
        for srv in servers.values():
            await srv.wait_neighbours(wait)
    return servers


async def restart(servers: dict[str, BrokerServer], name: str, node: BrokerNode, *,
                  tls: ContextSet | None = None, wait: float = 10) -> BrokerServer:
    """Close broker ``name`` and start ``node`` (the same broker, e.g. on its store) in
    its place, dialing every neighbour (their ports are unchanged)."""
    await servers[name].close()
    dial = {n: ("127.0.0.1", servers[n].port) for n in node.neighbours if n in servers}
    srv = BrokerServer(node, dial=dial, tls=tls)
    await srv.start()
    servers[name] = srv
    await srv.wait_neighbours(wait)
    return srv


async def settle(servers: dict[str, BrokerServer], clients: list[Client]) -> None:
    """Wait until no broker-to-broker message is in flight and clients have read all."""
    prev = None
    for _ in range(500):
        snap = tuple((s.node.stats().messages_in, s.node.stats().messages_out)
                     for s in servers.values())
        if snap == prev and sum(a for a, _ in snap) == sum(b for _, b in snap):
            break
        prev = snap
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("network did not settle")
    for c in clients:
        await c.ping()


def delivered(clients: Iterable[Client]) -> Counter[Delivery]:
    """Every notification the clients' subscriptions have queued (taken out), counted
    as the oracle counts them."""
    got: Counter[Delivery] = Counter()
    for c in clients:
        for s in c.subscriptions.values():
            while not s.queue.empty():
                nt = s.queue.get_nowait()
                got[Delivery(c.name, nt.profile, (nt.src, nt.seq))] += 1
    return got


async def close_all(servers: dict[str, BrokerServer], clients: Iterable[Client] = ()) -> None:
    """Close the clients, then the brokers."""
    for c in clients:
        await c.close()
    for srv in servers.values():
        await srv.close()


async def eventually(pred: Callable[[], Any], timeout: float = 20.0) -> None:
    """Wait until ``pred()`` is true, at most ``timeout`` seconds (then fail the test)."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)
