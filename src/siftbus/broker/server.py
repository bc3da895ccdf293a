"""The asyncio TCP server around a :class:`~siftbus.broker.node.BrokerNode`.

One event loop per broker process; every frame is handled by the node in one atomic,
synchronous step, so handling is single-threaded per broker. The server accepts clients
and neighbour brokers on one port, dials the neighbours it is told to (retrying with
exponential backoff: :mod:`.links`), and turns frame-level problems (malformed,
oversized, unknown type, a limit exceeded) into an ERROR followed by closing only that
connection. The connections themselves are
:class:`~siftbus.wire.transport.FrameConnection` objects of the shared frame transport,
under the server's :class:`~siftbus.wire.limits.Limits`.

Connection handshake: the first frame must be HELLO (within ``hello_timeout``). A client
sends ``{"role": "client", "name": optional, "token": optional, "session": optional}`` and
gets ACK ``{"name", "profiles", "session"}`` (its durable profiles, its session's status:
``docs/mobility.md``) followed by SCHEMA. On a secured network the ACK of a session this
broker does not hold waits until its holders confirm the client's principal owns it
(:mod:`.claims`), and on every network the ACK of a client that knows only its session
id waits until the newest copy is found; a refused claim gets one ERROR instead. A
broker sends ``{"role": "broker", "name", "schema"}``; the acceptor checks that it is a
configured neighbour with the same schema and answers with its own HELLO.

Security (``docs/security.md``): with TLS contexts (:class:`~siftbus.security.tls.
ContextSet`) the port and the links to neighbours speak TLS, the links mutual TLS. The
node's :class:`~siftbus.security.guard.Guard` authenticates each HELLO before anything
is revealed: a client by its token or certificate (an unauthenticated one gets one ERROR
and learns nothing, not even the schema), a neighbour by its certificate, whose common
name must be the name it claims (both ends check). A token's expiry closes the
connection. Notifications beyond a principal's ``max_queued_bytes`` are dropped, counted
and reported to it with one ERROR per episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import siftbus.telemetry as telemetry
from siftbus.errors import (
    AuthenticationError,
    EnvironmentProblem,
    QuotaExceeded,
    SiftbusError,
    WireError,
)
from siftbus.security.guard import check_bind
from siftbus.security.principal import Principal
from siftbus.security.tls import ContextSet
from siftbus.wire.counters import TransportStats
from siftbus.wire.events import notify_count, split_block
from siftbus.wire.frames import Message, MsgType, encode, error_body, get
from siftbus.wire.limits import DEFAULT_LIMITS, Limits
from siftbus.wire.listener import Listener, cancel_all
from siftbus.wire.transport import FrameConnection, read_frame

from .inspect import InspectService
from .links import NeighbourLinks
from .node import BrokerNode, ServiceHandler
from .session_request import session_id
from .warmup import load_kernels

log = logging.getLogger("siftbus.broker")

REUSE_WAIT = 1.0
"""Seconds a client's HELLO waits for an earlier connection under its name to end."""

CLIENT_BUFFER_LIMIT = DEFAULT_LIMITS.max_out_buffer
"""Default bytes queued for one client beyond which notifications to it are dropped
(counted); ``Limits.max_out_buffer`` sets it per server."""

TICK_INTERVAL = 0.1
"""Seconds between the clock ticks the node's tickers get."""

BROKER_HIGH_WATER = 4 * 1024 * 1024
COMPOSITE_HIGH_WATER = 10_000
"""Events waiting for composite evaluation above which no more frames are read from the
connection that sent the last (its sender waits, everyone else is served)."""
"""Bytes queued toward a neighbour beyond which a reader waits for the link to drain."""

TLS_RELOAD_INTERVAL = 10.0
"""Seconds between checks for replaced certificate files (reloaded without restart)."""


class BrokerServer(NeighbourLinks):
    """Serve one broker node on TCP (clients and neighbour brokers on the same port).

    ``limits`` bound what each peer may send (see :class:`~siftbus.wire.limits.Limits`);
    ``max_frame`` is a shorthand for ``limits.max_frame``. ``tls`` makes the port and
    the neighbour links speak TLS; the node's guard authenticates and authorizes.
    Without TLS and authentication the server listens on a loopback address only,
    unless ``insecure`` (logged loudly).
    """

    def __init__(self, node: BrokerNode, host: str = "127.0.0.1", port: int = 0, *,
                 dial: dict[str, tuple[str, int]] | None = None,
                 max_frame: int | None = None, retry_max: float = 2.0,
                 limits: Limits | None = None, tls: ContextSet | None = None,
                 insecure: bool = False) -> None:
        limits = limits or DEFAULT_LIMITS
        if max_frame is not None:
            limits = limits.replace(max_frame=max_frame)
        self.node = node
        self.host = host
        self.dial = dict(dial or {})
        self.limits = limits
        self.max_frame = limits.max_frame
        self.retry_max = retry_max
        self.tls = tls
        self.insecure = insecure
        self.listener = Listener(self._accept, host, port, limits, name=f"broker {node.name}",
                                 ssl=tls.server if tls is not None else None)
        self._conns: dict[str, FrameConnection] = {}
        self._dialed: set[FrameConnection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._expiry: dict[FrameConnection, asyncio.TimerHandle] = {}
        self._of_principal: dict[str, set[FrameConnection]] = {}
        """Principal -> its client connections (for its ``max_queued_bytes``)."""
        self._over_quota: set[str] = set()
        """Client links told that notifications are dropped (until they drain)."""
        self._claims: dict[str, tuple[FrameConnection, Principal, dict[str, Any],
                                      asyncio.Future[None]]] = {}
        """Client links whose ACK waits for their session's owner check."""
        node.limits = limits
        node.transport_send = self._send
        node.on_session_settled = self._settled
        node.run_async = self._run_async
        node.transport_stats = lambda: self.transport_stats().to_dict()
        node.register_service(InspectService.name, InspectService(node, self.listener))
        #: set whenever a neighbour link comes up (for waiters)
        self.links_changed = asyncio.Event()

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, and start dialing the neighbours in ``dial``."""
        check_bind(self.host, tls=self.tls is not None and self.tls.server is not None,
                   authenticated=self.node.guard.policy.authenticates,
                   insecure=self.insecure, what=f"broker {self.node.name}")
        loop = asyncio.get_running_loop()
        self.node.call_later = lambda delay, fn: loop.call_later(delay, fn)  # session timers
        # composite evaluation goes on in time slices with a pause between (a quarter of
        # a slice), in which everything else that is ready is served
        composites = self.node.composites
        composites.wake = lambda: loop.call_later(composites.time_slice / 4,
                                                  self._resume_composites)
        await self.listener.start()
        load_kernels(self.node.engine)  # in a thread when wanted, not in the middle of serving
        for name, addr in self.dial.items():
            self._spawn(self._dial_loop(name, addr))
        if self.node.tickers:
            self._spawn(self._tick_loop())
        if self.tls is not None:
            self._spawn(self._reload_certificates())

    async def _reload_certificates(self) -> None:
        """Load replaced certificate files into the live contexts (later handshakes use
        them; open connections keep theirs)."""
        assert self.tls is not None
        await self.tls.watch(self.node.name, TLS_RELOAD_INTERVAL)

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def errors_sent(self) -> int:
        """ERRORs that closed a connection (malformed frames, exceeded limits)."""
        return sum(self.listener.counters.refused.values())

    def transport_stats(self) -> TransportStats:
        """Connections, refusals by limit, dropped frames, buffered bytes."""
        return self.listener.stats()

    async def close(self) -> None:
        self._closing = True
        for conn in list(self._dialed):
            conn.close()
        await self.listener.close()
        await cancel_all(self._tasks)
        for conn in list(self._dialed):
            await conn.wait_closed(2.0)
        if self.node.store is not None:
            self.node.store.close()

    async def __aenter__(self) -> BrokerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def register_service(self, name: str, handler: ServiceHandler, *,
                         on_client_down: Callable[[str], None] | None = None,
                         authorizes: bool = False) -> None:
        """Host a service in this broker, reachable with ``client.call(name, method, ...)``.

        ``handler(method, args, caller)`` returns a msgpack-serialisable result or an
        awaitable of one; a raised ``SiftbusError`` reaches the caller as its error.
        ``on_client_down(caller)`` is called when that client's connection closes. On a
        secured network callers need the right ``name.method`` unless the service
        ``authorizes`` them itself (``node.rights_of(caller)``).
        """
        self.node.register_service(name, handler, on_client_down=on_client_down,
                                   authorizes=authorizes)

    def push(self, client: str, service: str, payload: Any) -> bool:
        """Send an unsolicited service message to a connected client (``False`` if gone)."""
        link = "@" + client
        if link not in self._conns:
            return False
        self._send(link, Message(MsgType.REPLY, {"service": service, "event": payload}))
        return True

    # ---- output ----------------------------------------------------------------------------

    def _handle_traced(self, link: str, msg: Message) -> None:
        """A frame with a trace context (a client's PUB, a neighbour's PUB or NOTIFY)
        handled inside a ``process`` span (``docs/tracing.md``): child of the context the
        frame carries, current while the frames it causes are sent."""
        with telemetry.span("process", parent=msg.body.get(telemetry.KEY),
                            destination=telemetry.destinations(msg.body.get("blocks", ())),
                            attributes={"siftbus.broker": self.node.name,
                                        "siftbus.link": link}):
            self.node.handle(link, msg)

    def _send(self, link: str, msg: Message) -> None:
        if telemetry.TRACER is not None and msg.type in (MsgType.PUB, MsgType.NOTIFY):
            tc = telemetry.carrier()
            if tc is not None:
                msg = Message(msg.type, {**msg.body, telemetry.KEY: tc})
        conn = self._conns.get(link)
        notify = msg.type is MsgType.NOTIFY and link.startswith("@")
        # a transport already closing (the peer went while this step runs, e.g. UNSUBs
        # sent on while a broker shuts down) is as good as gone: writing raises on uvloop
        if conn is None or conn.closing or (notify and conn.congested):
            # a session's rows are not lost: the session sends them again once the
            # client catches up (counting them would report drops that never were)
            if notify and not self.node.sessions.unsent(link, msg.body):
                self.node.counters.drop("slow_consumer", notify_count(msg.body))
                if conn is not None:
                    conn.count_dropped()
            return
        frame = encode(msg)
        if len(frame) - 4 > self.max_frame:
            self._split_send(link, msg)
            return
        if notify and self._of_principal and self._over_queue_quota(link, conn, msg,
                                                                   len(frame)):
            self.node.sessions.unsent(link, msg.body)
            return
        self.node.counters.count_out(link, len(frame))
        conn.write(frame)

    def _over_queue_quota(self, link: str, conn: FrameConnection, msg: Message,
                          size: int) -> bool:
        """Whether a notification would pass its principal's ``max_queued_bytes`` (over
        all its connections): then it is dropped, counted, and the client is told once
        per episode with an ERROR naming the quota."""
        node = self.node
        principal = node.access.principals.get(link)
        if principal is None:
            return False
        usage = node.guard.usage(principal)
        limit = usage.quotas.max_queued_bytes
        if limit is None:
            return False
        queued = size + sum(c.buffered for c in self._of_principal.get(principal.name, ()))
        try:
            usage.check_queued(queued)
        except QuotaExceeded as exc:
            n = notify_count(msg.body)
            node.counters.dropped += n
            conn.count_dropped()
            node.guard.refuse(exc, principal.name, "notify", f"{n} notifications")
            if link not in self._over_quota:
                self._over_quota.add(link)
                conn.send(Message(MsgType.ERROR, error_body(QuotaExceeded(
                    f"{exc.message}; notifications are dropped until the client catches "
                    "up", quota="max_queued_bytes", limit=limit))))
            return True
        self._over_quota.discard(link)
        return False

    def _split_send(self, link: str, msg: Message) -> None:
        key = "blocks" if "blocks" in msg.body else "events"
        items = msg.body.get(key)
        if (key == "blocks" and isinstance(items, list) and len(items) == 1
                and items[0]["n"] >= 2):
            items = list(split_block(items[0]))  # one big block: cut its rows
        if not isinstance(items, list) or len(items) < 2:
            log.error("%s: dropping an unsplittable %s frame over the size limit",
                      self.node.name, msg.type.name)
            if msg.type is MsgType.NOTIFY and link.startswith("@"):
                self.node.counters.drop("oversize", notify_count(msg.body))
            return
        half = len(items) // 2
        for part in (items[:half], items[half:]):
            self._send(link, Message(msg.type, {**msg.body, key: part}))

    def _run_async(self, result: Awaitable[Any], link: str, corr: int | None) -> None:
        async def run() -> None:
            try:
                value = await result
                self._send(link, Message(MsgType.REPLY, {"corr": corr, "result": value}))
            except SiftbusError as exc:
                self._send(link, Message(MsgType.ERROR, error_body(exc, corr)))
            except Exception as exc:  # a service bug must not kill the broker
                log.exception("service call failed")
                self._send(link, Message(MsgType.ERROR, error_body(exc, corr)))

        self._spawn(run())

    async def _tick_loop(self) -> None:
        """Tell the node's tickers the time (composite windows close without events)."""
        while not self._closing:
            await asyncio.sleep(TICK_INTERVAL)
            now = self.node.clock()
            for tick in self.node.tickers:
                try:
                    tick(now)
                except Exception:  # a ticker's bug must not stop the others
                    log.exception("%s: ticker failed", self.node.name)

    def _resume_composites(self) -> None:
        try:
            self.node.composites.resume()
        except Exception:  # a bug: log it, keep serving
            log.exception("%s: composite evaluation failed", self.node.name)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _backpressure(self, conn: FrameConnection) -> None:
        """Wait for congested neighbour links, and for a client's own connection when
        more than ``max_out_buffer`` waits toward it (its requests are not read
        meanwhile)."""
        for name in self.node.neighbours_up():
            out = self._conns.get(name)
            if out is not None and out.buffered > BROKER_HIGH_WATER:
                with contextlib.suppress(ConnectionError):
                    await out.drain()
        if conn.congested:
            await conn.drain()
        composites = self.node.composites
        while composites.backlog > COMPOSITE_HIGH_WATER and not self._closing:
            await asyncio.sleep(composites.time_slice)

    # ---- connections -----------------------------------------------------------------------

    def _drop(self, conn: FrameConnection) -> None:
        link = conn.link
        timer = self._expiry.pop(conn, None)
        if timer is not None:
            timer.cancel()
        if link and self._conns.get(link) is conn:
            del self._conns[link]
            if link.startswith("@"):
                self._forget_client_conn(link, conn)
                self.node.client_down(link)
            else:
                self.node.broker_down(link)
                self.links_changed.set()
        conn.close()

    async def _accept(self, conn: FrameConnection) -> None:
        msg = await conn.read_hello()
        role = get(msg.body, "role", str, where="HELLO")
        if role == "client":
            principal = self.node.guard.client(msg.body.get("token"), conn.ssl_object,
                                               peer=conn.peer)
            await self._earlier_connection_ends(msg, principal)
            link = self._client_hello(conn, msg, principal)
            if link is not None:  # the session's owner is being checked
                await self._await_claim(link)
        elif role == "broker":
            name = get(msg.body, "name", str, where="HELLO")
            self.node.guard.broker(name, conn.ssl_object, peer=conn.peer)
            self._check_peer(name, msg.body)
            conn.send(Message(MsgType.HELLO, {
                **self.node.hello_body(), "schema": self.node.schema.to_dict()}))
            self._link_up(conn, name)
        else:
            raise WireError(f"HELLO role must be 'client' or 'broker', got {role!r}")
        await self._serve(conn)

    async def _earlier_connection_ends(self, msg: Message, principal: Principal) -> None:
        """A client back under a name whose earlier connection is still open here: it
        closed that one (to move away and back, or to reconnect), and this broker has
        not read it to its end yet -- wait a moment for that, as the simulator's broker
        reads a connection to its end before its client connects again (the client was
        refused: "a client named ... is already connected"). A live one is refused after
        :data:`REUSE_WAIT` as before."""
        session = msg.body.get("session")
        name = session.get("id") if isinstance(session, dict) else msg.body.get("name")
        if not isinstance(name, str) or not name:
            return
        link = "@" + name
        holder = self.node.access.principals.get(link)
        if link not in self._conns or holder is None or holder.name != principal.name:
            return  # only its own principal's connection is waited for: nobody else
            # learns from the time taken whether a name is in use
        end = time.monotonic() + REUSE_WAIT
        while link in self._conns and time.monotonic() < end:
            await asyncio.sleep(0.02)

    def _client_hello(self, conn: FrameConnection, msg: Message,
                      principal: Principal) -> str | None:
        """Bind the name of a client authenticated first (a refused client learns
        nothing; a session's client is named by its session id: bound to its principal
        alike). Returns the link when the ACK waits for the session's owner check."""
        session = msg.body.get("session")
        sid = session_id(session) if session is not None else None
        chosen = sid or msg.body.get("name")
        if chosen is not None and not isinstance(chosen, str):
            raise WireError("HELLO name must be a string", field="name")
        name = chosen or self.node.assign_name(principal)
        link, profiles = self.node.client_up(name, principal, chosen=bool(chosen),
                                             bind=session is None)
        ack: dict[str, Any] = {"corr": msg.body.get("corr"), "name": name,
                               "broker": self.node.name, "profiles": profiles}
        if session is not None:
            try:  # rows it sends before this ACK go nowhere: resent below
                status = self.node.session_hello(link, session, principal)
            except BaseException:
                self.node.client_down(link)
                raise
            if session.get("clean"):  # a clean start forgot the profiles found above
                ack["profiles"] = self.node.profile_ids(link)
            if status is None:  # ACK once the holders confirm the owner (or refuse)
                self._claims[link] = (conn, principal, ack,
                                      asyncio.get_running_loop().create_future())
                return link
            ack["session"] = status
        self._attach(conn, link, principal, ack, session is not None)
        return None

    def _attach(self, conn: FrameConnection, link: str, principal: Principal,
                ack: dict[str, Any], session: bool) -> None:
        conn.link = link
        self._conns[link] = conn
        try:
            self._remember_client_conn(principal, conn)
            self._send(link, Message(MsgType.ACK, ack))
            self._send(link, self.node.schema_message())
            if session:
                self.node.sessions.resend(link)
        except BaseException:  # an attachment that failed leaves nothing behind
            self._drop(conn)
            raise

    def _settled(self, link: str, result: dict[str, Any] | SiftbusError) -> None:
        """The node settled a session claim: ACK the client now (in the same step, so
        nothing the handoff sends it next is lost), or refuse it."""
        pending = self._claims.pop(link, None)
        if pending is None:
            return
        conn, principal, ack, done = pending
        if isinstance(result, SiftbusError):
            self.node.client_down(link)
            done.set_exception(result)
            return
        ack["session"] = result
        try:
            self._attach(conn, link, principal, ack, True)
        except Exception as exc:  # the client waiting for its ACK gets the failure now
            done.set_exception(exc)
            return
        done.set_result(None)

    async def _await_claim(self, link: str) -> None:
        """Wait until the node settles the client's claim: it ACKs or refuses it after
        at most the policy's ``claim_timeout`` (this bound only guards a lost timer)."""
        done = self._claims[link][3]
        bound = 2 * self.node.sessions.policy.claim_timeout + 1
        try:
            await asyncio.wait_for(asyncio.shield(done), bound)
        except TimeoutError:
            raise EnvironmentProblem(f"session {link[1:]}: its owner check did not end "
                                     f"within {bound:g} s") from None
        finally:
            if self._claims.pop(link, None) is not None:  # never settled: give it up
                self.node.client_down(link)

    def _remember_client_conn(self, principal: Principal, conn: FrameConnection) -> None:
        """Track the principal's connections (queued-bytes quota) and close this one when
        the principal's credentials expire."""
        if self.node.guard.open:
            return
        self._of_principal.setdefault(principal.name, set()).add(conn)
        if principal.expires is not None:
            delay = max(0.0, principal.expires - time.time())
            self._expiry[conn] = asyncio.get_running_loop().call_later(
                delay, self._expire, conn)

    def _forget_client_conn(self, link: str, conn: FrameConnection) -> None:
        self._over_quota.discard(link)
        principal = self.node.access.principals.get(link)
        if principal is not None:
            conns = self._of_principal.get(principal.name)
            if conns is not None:
                conns.discard(conn)
                if not conns:
                    del self._of_principal[principal.name]

    def _expire(self, conn: FrameConnection) -> None:
        self._expiry.pop(conn, None)
        if not conn.closing:
            exc = AuthenticationError("the token has expired: connect again with a new one")
            self.node.guard.refuse(exc, conn.link[1:], "connect")
            conn.refuse(exc)

    async def _serve(self, conn: FrameConnection) -> None:
        node = self.node
        link = conn.link
        is_broker = not link.startswith("@")
        try:
            while True:
                try:
                    msg, size = await conn.read()
                except WireError as exc:
                    conn.refuse(exc)
                    return
                node.counters.count_in(link, size)
                if is_broker and msg.type is MsgType.ERROR:
                    log.warning("%s: neighbour %s reports: %s", node.name, link,
                                msg.body.get("message"))
                try:
                    if telemetry.TRACER is not None and telemetry.KEY in msg.body:
                        self._handle_traced(link, msg)
                    else:
                        node.handle(link, msg)
                except Exception as exc:  # a bug: answer it, keep serving this peer
                    log.exception("%s: handling %s from %s failed", node.name,
                                  msg.type.name, link)
                    corr = msg.body.get("corr")
                    conn.send(Message(MsgType.ERROR, error_body(
                        exc, corr if isinstance(corr, int) else None)))
                await self._backpressure(conn)
        except ConnectionError:
            pass
        finally:
            self._drop(conn)

def install_uvloop() -> bool:
    """Use uvloop for new event loops when it is installed; returns whether it is."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


__all__ = ["BrokerServer", "install_uvloop", "read_frame"]
