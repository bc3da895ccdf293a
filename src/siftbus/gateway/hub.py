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
from siftbus.client import Client, Notification, NotificationBatch, client_tls
from siftbus.client.session import SessionState
from siftbus.errors import (
    AuthenticationError,
    ConnectionLostError,
    DuplicateProfileError,
    QuotaExceeded,
    RemoteError,
    SiftbusError,
    UnknownProfileError,
    WireError,
)
from siftbus.lang.profile import format_profile, parse_profile_text
from siftbus.model import Event, Schema
from siftbus.security.guard import Guard

from .codec import block_events
from .limits import DEFAULT_LIMITS, GatewayLimits
from .streams import Outbox, check_subscription_id, notification_message, notification_object

log = logging.getLogger("siftbus.gateway")

SNAPSHOT_TTL = 0.5
"""Seconds a network snapshot is reused (every dashboard shares one)."""

HEALTH_TIMEOUT = 2.0
"""Seconds ``/api/health`` waits for the broker before it answers 503."""

SESSION_RETRY = 5.0
"""Seconds a session socket waits for its session's previous broker connection to
close (a reconnect right after a disconnect, a take-over)."""


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
        self.routes: dict[str, tuple[Outbox, str]] = {}
        """Broker profile id -> its consumer and the consumer's id for it."""
        self.attached: dict[str, tuple[str | None, Outbox]] = {}
        """Session id -> the token and outbox of the socket attached to it here."""
        self.secured = net.security.authenticates
        """Every request needs a bearer token (the network has no anonymous access)."""
        self.guard = Guard(net.security)
        """Checks tokens here, for what no broker answers (``/metrics``, a request refused
        before it reaches a broker); the brokers' guards decide everything else."""
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
        for ob in [o for o in self.outboxes.values() if o.session is not None]:
            await self.close_outbox(ob)
        for c in list(self._sessions.values()):
            with contextlib.suppress(SiftbusError, ConnectionError, OSError):
                await c.close()
        self._sessions.clear()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task the gateway keeps until it ends (clean-ups)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def authenticate(self, token: str | None) -> None:
        """Refuse a request without valid credentials on a secured network (a counted
        :class:`~siftbus.errors.AuthenticationError`), checked here with the network's
        CA and token key: before a malformed body is looked at, and for ``/metrics``,
        which needs no broker."""
        if not self.secured:
            return
        if token is None:
            raise AuthenticationError("credentials required: send 'Authorization: Bearer "
                                      "<token>' (siftbus certs token NAME)")
        self.guard.client(token)

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
            # the gateway tells its consumers of a lost connection and opens a new one on
            # the next request (_when_lost): the client's own reconnection stays off
            c = await Client.connect(b.host, b.port, timeout=self.timeout, token=token,
                                     tls=self._tls, reconnect=False)
            self._sessions[key] = c
            self.spawn(self._when_lost(c))
            return c

    async def _when_lost(self, c: Client) -> None:
        """When a shared broker connection ends (the broker restarted or went), its
        subscriptions are gone with it: every WebSocket and SSE consumer that used it is
        told (:attr:`Outbox.lost`; the socket is closed with 1012, the SSE stream ends
        with an ``error`` event) so that it connects and subscribes again, and a pull
        subscription answers 503 once. The next request opens a new connection."""
        await c.ended.wait()
        for ob in list(self.outboxes.values()):
            if ob.client is c and ob.session is None:
                ob.lost = True
                ob.ready.set()

    async def health(self) -> tuple[bool, str | None]:
        """Whether the gateway's broker answers now, and the name of the gateway's own
        connection at it (``None`` on a secured network: connections are per token)."""
        if not self.secured:
            try:
                c = await asyncio.wait_for(self.session(None), HEALTH_TIMEOUT)
            except (SiftbusError, OSError, TimeoutError):
                return False, None
            return True, c.name
        if any(k[1] == self.broker and not c.ended.is_set() for k, c in self._sessions.items()):
            return True, None
        b = self.net.broker(self.broker)
        try:  # no connection of ours: does the broker accept one?
            _, writer = await asyncio.wait_for(asyncio.open_connection(b.host, b.port),
                                               HEALTH_TIMEOUT)
        except (OSError, TimeoutError):
            return False, None
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True, None

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
        """Forget a consumer: its profiles leave the broker -- except a session's, which
        the broker keeps (and buffers for) until the session comes back or expires."""
        if self.outboxes.pop(ob.key, None) is None:
            return
        self._account(ob)
        ids = [ob.broker_id(s) for s in ob.subscriptions]
        for i in ids:
            self.routes.pop(i, None)
        ob.subscriptions.clear()
        if ob.session is not None:
            if self.attached.get(ob.session, (None, None))[1] is ob:
                del self.attached[ob.session]
            with contextlib.suppress(SiftbusError, ConnectionError, OSError):
                await ob.client.close()
            return
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
        bid = ob.broker_id(sid)
        self.routes[bid] = (ob, sid)
        try:
            if ob.session is not None:  # numbered one by one (see _session_note)
                await ob.client.subscribe(parsed, ob.client.unclaimed_callback, id=bid)
            else:
                await ob.client.subscribe(parsed, batch_callback=self.on_batch, id=bid)
        except BaseException:
            self.routes.pop(bid, None)
            raise
        line = format_profile(parsed, with_id=False)
        ob.subscriptions[sid] = line
        return {"id": sid, "profile": line}

    async def unsubscribe(self, ob: Outbox, sid: str) -> None:
        if sid not in ob.subscriptions:
            raise UnknownProfileError(f"no subscription {sid!r} on this connection",
                                      field="id")
        del ob.subscriptions[sid]
        await ob.client.unsubscribe(ob.broker_id(sid))
        self.routes.pop(ob.broker_id(sid), None)  # after: what came before still arrives

    def on_batch(self, batch: NotificationBatch) -> None:
        """The broker clients' batch callback: a NOTIFY frame's notifications as JSON
        objects, handed to each consumer at once, in publication order. The event
        objects are built per block and column (:func:`~.codec.block_events`); what
        remains per notification is one small dict."""
        routes = self.routes
        blocks = batch.blocks
        merge = len(blocks) > 1 and all(nb.at is not None for nb in blocks)
        keyed: list[tuple[int, Outbox, dict[str, Any]]] = []
        out: dict[Outbox, list[dict[str, Any]]] = {}
        for nb in blocks:
            evs = block_events(nb.block)
            srcs = nb.block.srcs()
            seqs = nb.seq.tolist()
            stamps = nb.ts.tolist()
            at = nb.at.tolist() if merge and nb.at is not None else None
            for r, pid in zip(nb.rows().tolist(), nb.ids, strict=True):
                route = routes.get(pid)
                if route is None:
                    continue  # unsubscribed meanwhile
                ob, sid = route
                msg = notification_object(sid, srcs[r], seqs[r], stamps[r], evs[r])
                if at is not None:
                    keyed.append((at[r], ob, msg))
                else:
                    out.setdefault(ob, []).append(msg)
        if keyed:
            keyed.sort(key=lambda k: k[0])  # stable: a row's ids stay sorted
            for _, ob, msg in keyed:
                out.setdefault(ob, []).append(msg)
        for ob, msgs in out.items():
            ob.offer(msgs)

    # ---- sessions ---------------------------------------------------------------------

    async def open_session(self, token: str | None, sid: str, *, ack: int = 0,
                           clean: bool = False) -> tuple[Outbox, dict[str, Any]]:
        """A consumer attached to broker session ``sid`` over a broker connection of its
        own: the broker numbers its notifications, keeps them until acknowledged
        (:meth:`ack`) and, when the socket comes back, resends those after the last
        acknowledged number. ``ack``: the consumer's own last processed number (rows up
        to it are not sent again). A socket of the same token attached to ``sid`` here
        is taken over (closed); another token's is refused. Returns the outbox and the
        ``session`` reply."""
        if token is None and self.secured:
            await self.session(None)  # raises: credentials required
        check_subscription_id(sid)
        held = self.attached.get(sid)
        if held is not None:
            if held[0] != token:
                raise DuplicateProfileError(f"session {sid!r} is attached to another "
                                            "socket", field="session")
            held[1].taken_over = True
            held[1].ready.set()
            await self.close_outbox(held[1])
        state = SessionState(sid, last=ack, clean=clean, auto_ack=False)
        b = self.net.broker(self.broker)
        deadline = time.monotonic() + SESSION_RETRY
        while True:
            try:
                c = await Client.connect(b.host, b.port, timeout=self.timeout, token=token,
                                         tls=self._tls, session=state, reconnect=False)
                break
            except (ConnectionLostError, OSError) as exc:
                raise ConnectionLostError(f"broker {self.broker} does not answer: {exc}") \
                    from None
            except RemoteError as exc:
                # the session's previous connection (a socket that just went, or was
                # taken over) may still be closing at the broker: wait for it, briefly
                if "already connected" not in exc.message or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        # the broker's in-flight window (max_inflight rows) bounds what waits here: a
        # session socket drops nothing, it is slowed down by its own acknowledgements
        ob = Outbox(f"w{next(self._keys)}", 2**62, c)  # a WebSocket consumer
        ob.session = sid
        c.unclaimed_callback = lambda n: self._session_note(ob, n)
        for pid in c.restored:
            ob.subscriptions[pid] = ""
            self.routes[pid] = (ob, pid)
        self.outboxes[ob.key] = ob
        self.attached[sid] = (token, ob)
        status = state.status
        return ob, {"type": "session", "id": sid, "state": status.get("state"),
                    "acked": max(ack, int(status.get("acked", 0))),
                    "subscriptions": list(c.restored), "lost": status.get("lost", 0),
                    "overflow": status.get("overflow", {})}

    def _session_note(self, ob: Outbox, n: Notification) -> None:
        session = ob.client.session
        assert session is not None
        ob.offer([notification_message(n.profile, n, session.numbers.get((n.src, n.seq)))])

    def ack(self, ob: Outbox, upto: Any) -> int:
        """A session socket has processed every notification numbered up to ``upto``."""
        session = ob.client.session
        if ob.session is None or session is None:
            raise WireError("ack needs a session (send {\"op\": \"session\", \"id\": ...} "
                            "first)", field="session")
        if type(upto) is not int or not 0 <= upto <= session.last:
            raise WireError(f"ack: a session number from 0 to {session.last} (the last "
                            "one sent)", field="n")
        ob.client.ack_nowait(upto)
        return upto

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


__all__ = ["HEALTH_TIMEOUT", "SNAPSHOT_TTL", "Gateway", "GatewayCounters"]
