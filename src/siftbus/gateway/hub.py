"""The gateway's state: one broker client shared by every HTTP consumer.

:class:`Gateway` connects to its broker as one ordinary client (``siftbus gateway -c
net.toml -n B1``) and multiplexes it: each WebSocket, SSE response or REST pull
subscription is an :class:`~siftbus.gateway.streams.Outbox` whose profiles are
subscribed at the broker under ``<outbox key>/<id>``. It also reads the other brokers of
the network config (stats, routing tables) through clients it opens on demand, and
forwards channel administration to a broker that hosts the channel service.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from siftbus.broker.config import NetworkConfig
from siftbus.broker.stats import histogram_quantile
from siftbus.client import Client
from siftbus.errors import (
    ConnectionLostError,
    DuplicateProfileError,
    EnvironmentProblem,
    QuotaExceeded,
    SiftbusError,
    UnknownProfileError,
    WireError,
)
from siftbus.lang.profile import format_profile, parse_profile_text
from siftbus.model import Event, Schema

from .limits import DEFAULT_LIMITS, GatewayLimits
from .streams import Outbox, check_subscription_id

log = logging.getLogger("siftbus.gateway")

SNAPSHOT_TTL = 0.5
"""Seconds a network snapshot is reused (every dashboard shares one)."""


@dataclass(slots=True)
class GatewayCounters:
    """What the gateway counts (read by :mod:`siftbus.gateway.metrics`)."""

    published: int = 0
    """Events published to the broker."""
    rejected: int = 0
    """Publish lines or items refused (bad JSON, not in the schema)."""
    requests: dict[str, int] = field(default_factory=dict)
    """HTTP answers by status class (``2xx`` ...)."""
    connections: dict[str, int] = field(default_factory=lambda: {"websocket": 0, "sse": 0})
    """Streaming connections accepted since start, by kind."""
    delivered: int = 0
    """Notifications queued toward consumers (closed ones included)."""
    dropped: int = 0
    """Notifications dropped because a consumer's queue was full (closed ones included)."""


class Gateway:
    """One gateway: a client of broker ``broker`` of ``net`` (see the module docstring)."""

    def __init__(self, net: NetworkConfig, broker: str, *,
                 limits: GatewayLimits = DEFAULT_LIMITS, timeout: float = 10.0) -> None:
        net.broker(broker)  # a ConfigError for an unknown name
        self.net = net
        self.broker = broker
        self.limits = limits
        self.timeout = timeout
        self.counters = GatewayCounters()
        self.outboxes: dict[str, Outbox] = {}
        self.pulls: dict[str, Outbox] = {}
        self._keys = itertools.count(1)
        self._client: Client | None = None
        self._peers: dict[str, Client] = {}
        self._snapshot: tuple[float, dict[str, Any]] | None = None
        self._snapshot_lock = asyncio.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()

    # ---- life cycle ---------------------------------------------------------------------

    async def start(self) -> None:
        b = self.net.broker(self.broker)
        self._client = await Client.connect(b.host, b.port, timeout=self.timeout)

    async def close(self) -> None:
        for c in [*self._peers.values(), *([self._client] if self._client else [])]:
            with contextlib.suppress(SiftbusError, ConnectionError, OSError):
                await c.close()
        self._peers.clear()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task the gateway keeps until it ends (clean-ups)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def client(self) -> Client:
        if self._client is None:
            raise EnvironmentProblem("the gateway is not connected to its broker")
        return self._client

    @property
    def schema(self) -> Schema:
        assert self.client.schema is not None
        return self.client.schema

    # ---- consumers ----------------------------------------------------------------------

    def open_outbox(self, kind: str) -> Outbox:
        """A new consumer (``kind``: ``w`` WebSocket, ``e`` SSE, ``p`` pull)."""
        ob = Outbox(f"{kind}{next(self._keys)}", self.limits.queue_size)
        self.outboxes[ob.key] = ob
        return ob

    async def close_outbox(self, ob: Outbox) -> None:
        """Forget a consumer: its profiles leave the broker."""
        self.outboxes.pop(ob.key, None)
        self._account(ob)
        ids = [ob.broker_id(s) for s in ob.subscriptions]
        ob.subscriptions.clear()
        if ids and self._client is not None:
            with contextlib.suppress(SiftbusError, ConnectionError, TimeoutError):
                await self._client.unsubscribe(*ids)

    def _account(self, ob: Outbox) -> None:
        self.counters.delivered += ob.delivered
        self.counters.dropped += ob.dropped
        ob.delivered = ob.dropped = 0

    def totals(self) -> tuple[int, int]:
        """Notifications delivered and dropped so far, open consumers included."""
        live = list(self.outboxes.values())
        return (self.counters.delivered + sum(o.delivered for o in live),
                self.counters.dropped + sum(o.dropped for o in live))

    async def subscribe(self, ob: Outbox, profile: str, sid: str | None = None
                        ) -> dict[str, str]:
        """Subscribe ``profile`` for consumer ``ob`` as ``sid`` (default: the profile
        line's own id, else ``s<n>``); returns ``{"id", "profile"}``."""
        if len(ob.subscriptions) >= self.limits.max_subscriptions:
            raise QuotaExceeded(f"at most {self.limits.max_subscriptions} subscriptions "
                                "per connection", field="max_subscriptions")
        parsed = self.client.profile(profile, "_")  # parse first: a ProfileError
        if sid is None:
            sid = parse_profile_text(profile).id or next(f"s{i}" for i in itertools.count(1)
                              if f"s{i}" not in ob.subscriptions)
        check_subscription_id(sid)
        if sid in ob.subscriptions:
            raise DuplicateProfileError(f"subscription {sid!r} exists on this connection",
                                        field="id")
        await self.client.subscribe(parsed, lambda n: ob.notify(sid, n),
                                    id=ob.broker_id(sid))
        line = format_profile(parsed, with_id=False)
        ob.subscriptions[sid] = line
        return {"id": sid, "profile": line}

    async def unsubscribe(self, ob: Outbox, sid: str) -> None:
        if sid not in ob.subscriptions:
            raise UnknownProfileError(f"no subscription {sid!r} on this connection",
                                      field="id")
        del ob.subscriptions[sid]
        await self.client.unsubscribe(ob.broker_id(sid))

    # ---- publishing ---------------------------------------------------------------------

    async def publish(self, events: Sequence[Event]) -> int:
        """Publish ``events`` and wait until the broker has routed them."""
        if not events:
            return 0
        n = await self.client.publish_batch(events, ack=True)
        self.counters.published += n
        return n

    # ---- the network --------------------------------------------------------------------

    async def _peer(self, name: str) -> Client:
        if name == self.broker:
            return self.client
        c = self._peers.get(name)
        if c is None or c.ended.is_set():
            b = self.net.broker(name)
            c = await Client.connect(b.host, b.port, timeout=min(self.timeout, 2.0))
            self._peers[name] = c
        return c

    async def call(self, broker: str, service: str, method: str, **args: Any) -> Any:
        """Call a service hosted by broker ``broker`` of the network."""
        try:  # what the wire cannot carry (an integer over 64 bits) is the caller's error
            msgpack.packb(args, use_bin_type=True)
        except (OverflowError, TypeError, ValueError) as exc:
            raise WireError(f"arguments the wire protocol cannot carry: {exc}") from None
        try:
            c = await self._peer(broker)
            return await c.call(service, method, self.limits.request_timeout, **args)
        except (ConnectionLostError, TimeoutError) as exc:
            bad = self._peers.pop(broker, None)
            if bad is not None:
                with contextlib.suppress(Exception):
                    await bad.close()
            raise ConnectionLostError(f"broker {broker} does not answer: {exc}") from None

    def topology(self) -> dict[str, Any]:
        """The brokers of the config and the edges of the tree."""
        return {"gateway_broker": self.broker, "protocol": self.net.protocol,
                "strategy": self.net.strategy,
                "brokers": {n: {"host": b.host, "port": b.port,
                                "neighbours": list(b.neighbours)}
                            for n, b in self.net.brokers.items()},
                "edges": [list(e) for e in self.net.edges]}

    async def _broker_snapshot(self, name: str) -> dict[str, Any]:
        try:
            stats = await self.call(name, "broker", "stats")
            table = await self.call(name, "inspect", "table", limit=0)
        except SiftbusError as exc:
            return {"error": str(exc)}
        lat = stats.get("latency_ms", {})
        return {"stats": stats, "by_type": table.get("by_type", {}),
                "roots": table.get("root_count", 0),
                "p50_ms": histogram_quantile(lat, 0.5),
                "p99_ms": histogram_quantile(lat, 0.99)}

    async def network(self) -> dict[str, Any]:
        """Topology, every broker's stats and table summary, and the gateway's own
        counters (shared for :data:`SNAPSHOT_TTL` seconds)."""
        async with self._snapshot_lock:
            now = time.monotonic()
            if self._snapshot is not None and now - self._snapshot[0] < SNAPSHOT_TTL:
                return self._snapshot[1]
            names = list(self.net.brokers)
            snaps = await asyncio.gather(*(self._broker_snapshot(n) for n in names))
            out = {**self.topology(), "time": time.time(),
                   "gateway": self.own_stats(),
                   "stats": dict(zip(names, snaps, strict=True))}
            self._snapshot = (time.monotonic(), out)
            return out

    def own_stats(self) -> dict[str, Any]:
        delivered, dropped = self.totals()
        return {"published": self.counters.published, "rejected": self.counters.rejected,
                "delivered": delivered, "dropped": dropped,
                "consumers": len(self.outboxes),
                "subscriptions": sum(len(o.subscriptions) for o in self.outboxes.values()),
                "connections": dict(self.counters.connections)}


__all__ = ["SNAPSHOT_TTL", "Gateway", "GatewayCounters"]
