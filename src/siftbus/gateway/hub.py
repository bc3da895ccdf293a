"""The gateway's state: one broker client shared by every HTTP consumer.

:class:`Gateway` connects to its broker as one ordinary client (``siftbus gateway -c
net.toml -n B1``) and multiplexes it: each WebSocket, SSE response or REST pull
subscription is an :class:`~siftbus.gateway.streams.Outbox` whose profiles are
subscribed at the broker under ``<outbox key>/<id>``. It also reads the other brokers of
the network config (stats, routing tables) through clients it opens on demand, and
forwards channel administration to a broker that hosts the channel service.

Credentials pass through. On a network with ``[security]`` (docs/security.md) every
request carries a bearer token and is served over a broker connection authenticated with
that token (one per distinct token, shared by that token's requests and streams; TLS to
the brokers with the config's CA): the brokers' own guard decides what it may publish,
subscribe and call, so the gateway grants nothing a native client with the same token
would not have. On an open network one unauthenticated connection serves everyone.
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
from siftbus.client import Client, client_tls
from siftbus.errors import (
    AuthenticationError,
    ConnectionLostError,
    DuplicateProfileError,
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
        self.secured = net.security.authenticates
        """Every request needs a bearer token (the network has no anonymous access)."""
        self._tls = client_tls(net.security.ca) if net.security.ca is not None else None
        self._keys = itertools.count(1)
        self._sessions: dict[tuple[str | None, str], Client] = {}
        """Broker connections by (token, broker); ``None``: no credentials."""
        self._session_lock = asyncio.Lock()
        self._snapshots: dict[str | None, tuple[float, dict[str, Any]]] = {}
        self._snapshot_lock = asyncio.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()
        self.schema: Schema = net.schema

    # ---- life cycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Check the broker answers (on an open or anonymous network, connect at once)."""
        if not self.secured:
            await self.session(None)

    async def close(self) -> None:
        for c in list(self._sessions.values()):
            with contextlib.suppress(SiftbusError, ConnectionError, OSError):
                await c.close()
        self._sessions.clear()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task the gateway keeps until it ends (clean-ups)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def session(self, token: str | None, broker: str | None = None) -> Client:
        """The connection to ``broker`` (default: the gateway's own) authenticated with
        ``token``; opened on first use, again after it was lost. At most
        ``max_sessions`` are kept: idle ones (no consumer uses them) go first."""
        if token is None and self.secured:
            raise AuthenticationError("credentials required: send 'Authorization: Bearer "
                                      "<token>' (siftbus certs token NAME)")
        key = (token, broker or self.broker)
        async with self._session_lock:
            c = self._sessions.get(key)
            if c is not None and not c.ended.is_set():
                return c
            self._sessions.pop(key, None)
            await self._evict()
            b = self.net.broker(key[1])
            c = await Client.connect(b.host, b.port, timeout=self.timeout, token=token,
                                     tls=self._tls)
            self._sessions[key] = c
            return c

    @property
    def session_count(self) -> int:
        """Broker connections open now."""
        return sum(1 for c in self._sessions.values() if not c.ended.is_set())

    async def _evict(self) -> None:
        if len(self._sessions) < self.limits.max_sessions:
            return
        used = {id(o.client) for o in self.outboxes.values()}
        idle = [k for k, c in self._sessions.items() if id(c) not in used]
        if not idle:
            raise QuotaExceeded(f"at most {self.limits.max_sessions} broker sessions "
                                "(distinct tokens) at once", quota="max_sessions",
                                limit=self.limits.max_sessions)
        with contextlib.suppress(SiftbusError, ConnectionError, OSError):
            await self._sessions.pop(idle[0]).close()

    # ---- consumers ----------------------------------------------------------------------

    def open_outbox(self, kind: str, client: Client) -> Outbox:
        """A new consumer (``kind``: ``w`` WebSocket, ``e`` SSE, ``p`` pull) whose
        profiles are subscribed through ``client``."""
        ob = Outbox(f"{kind}{next(self._keys)}", self.limits.queue_size, client)
        self.outboxes[ob.key] = ob
        return ob

    async def close_outbox(self, ob: Outbox) -> None:
        """Forget a consumer: its profiles leave the broker."""
        self.outboxes.pop(ob.key, None)
        self._account(ob)
        ids = [ob.broker_id(s) for s in ob.subscriptions]
        ob.subscriptions.clear()
        if ids and not ob.client.ended.is_set():
            with contextlib.suppress(SiftbusError, ConnectionError, TimeoutError):
                await ob.client.unsubscribe(*ids)

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
        parsed = ob.client.profile(profile, "_")  # parse first: a ProfileError
        if sid is None:
            sid = parse_profile_text(profile).id or next(f"s{i}" for i in itertools.count(1)
                              if f"s{i}" not in ob.subscriptions)
        check_subscription_id(sid)
        if sid in ob.subscriptions:
            raise DuplicateProfileError(f"subscription {sid!r} exists on this connection",
                                        field="id")
        await ob.client.subscribe(parsed, lambda n: ob.notify(sid, n),
                                  id=ob.broker_id(sid))
        line = format_profile(parsed, with_id=False)
        ob.subscriptions[sid] = line
        return {"id": sid, "profile": line}

    async def unsubscribe(self, ob: Outbox, sid: str) -> None:
        if sid not in ob.subscriptions:
            raise UnknownProfileError(f"no subscription {sid!r} on this connection",
                                      field="id")
        del ob.subscriptions[sid]
        await ob.client.unsubscribe(ob.broker_id(sid))

    # ---- publishing ---------------------------------------------------------------------

    async def publish(self, client: Client, events: Sequence[Event]) -> int:
        """Publish ``events`` through ``client`` and wait until the broker has routed
        them (a refused publication raises, and nothing of it was routed)."""
        if not events:
            return 0
        n = await client.publish_batch(events, ack=True)
        self.counters.published += n
        return n

    # ---- the network --------------------------------------------------------------------

    async def call(self, broker: str, service: str, method: str, *,
                   token: str | None = None, **args: Any) -> Any:
        """Call a service hosted by broker ``broker`` of the network, as ``token``."""
        try:  # what the wire cannot carry (an integer over 64 bits) is the caller's error
            msgpack.packb(args, use_bin_type=True)
        except (OverflowError, TypeError, ValueError) as exc:
            raise WireError(f"arguments the wire protocol cannot carry: {exc}") from None
        try:
            c = await self.session(token, broker)
            return await c.call(service, method, self.limits.request_timeout, **args)
        except (ConnectionLostError, TimeoutError) as exc:
            raise ConnectionLostError(f"broker {broker} does not answer: {exc}") from None

    def topology(self) -> dict[str, Any]:
        """The brokers of the config and the edges of the tree."""
        return {"gateway_broker": self.broker, "protocol": self.net.protocol,
                "strategy": self.net.strategy,
                "brokers": {n: {"host": b.host, "port": b.port,
                                "neighbours": list(b.neighbours)}
                            for n, b in self.net.brokers.items()},
                "edges": [list(e) for e in self.net.edges]}

    async def _broker_snapshot(self, name: str, token: str | None) -> dict[str, Any]:
        try:
            stats = await self.call(name, "broker", "stats", token=token)
            table = await self.call(name, "inspect", "table", token=token, limit=0)
        except SiftbusError as exc:
            return {"error": str(exc)}
        lat = stats.get("latency_ms", {})
        return {"stats": stats, "by_type": table.get("by_type", {}),
                "roots": table.get("root_count", 0),
                "p50_ms": histogram_quantile(lat, 0.5),
                "p99_ms": histogram_quantile(lat, 0.99)}

    async def network(self, token: str | None = None) -> dict[str, Any]:
        """Topology, every broker's stats and table summary (as far as ``token`` may
        read them: a refusal is that broker's ``error``), and the gateway's own counters
        (shared by the requests of one token for :data:`SNAPSHOT_TTL` seconds)."""
        if token is None and self.secured:
            await self.session(None)  # raises: credentials required
        async with self._snapshot_lock:
            now = time.monotonic()
            cached = self._snapshots.get(token)
            if cached is not None and now - cached[0] < SNAPSHOT_TTL:
                return cached[1]
            names = list(self.net.brokers)
            snaps = await asyncio.gather(*(self._broker_snapshot(n, token) for n in names))
            out = {**self.topology(), "time": time.time(),
                   "gateway": self.own_stats(),
                   "stats": dict(zip(names, snaps, strict=True))}
            for k in [k for k, (t, _) in self._snapshots.items() if now - t >= SNAPSHOT_TTL]:
                del self._snapshots[k]
            self._snapshots[token] = (time.monotonic(), out)
            return out

    def own_stats(self) -> dict[str, Any]:
        delivered, dropped = self.totals()
        return {"published": self.counters.published, "rejected": self.counters.rejected,
                "delivered": delivered, "dropped": dropped,
                "consumers": len(self.outboxes),
                "subscriptions": sum(len(o.subscriptions) for o in self.outboxes.values()),
                "connections": dict(self.counters.connections)}


__all__ = ["SNAPSHOT_TTL", "Gateway", "GatewayCounters"]
