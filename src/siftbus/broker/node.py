"""The broker core, independent of any transport.

A :class:`BrokerNode` handles one message at a time (each handler is one atomic step, as
in Bittner's DAS) and emits messages through a ``send`` callback. The asyncio server and
the in-process simulator drive the very same object: the server calls :meth:`handle` for
each frame read from a socket, the simulator for each message taken from an in-memory
link.

Links are named: a neighbour broker by its name, a local client by ``@`` + its name.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np

from siftbus.errors import (
    ConfigError,
    SiftbusError,
    WireError,
)
from siftbus.lang.profile import format_profile
from siftbus.match.base import Matcher
from siftbus.match.engines import DEFAULT_ENGINE, make_matcher
from siftbus.model import Schema
from siftbus.security.guard import Guard
from siftbus.security.principal import ANONYMOUS, Principal
from siftbus.security.rights import Rights
from siftbus.wire.events import Block, decode_batch, encode_block
from siftbus.wire.frames import Message, MsgType, error_body, get
from siftbus.wire.limits import DEFAULT_LIMITS, Limits
from siftbus.wire.profiles import (
    check_count,
    decode_profile,
)

from .access import ClientAccess
from .client_profiles import ClientProfiles
from .composite import SERVICE as COMPOSITE_SERVICE
from .composite import CompositeService, CompositeSettings
from .handoff import default_handoff, make_handoff
from .protocols import Routing, make_routing
from .retained import TYPES as RETAINED_TYPES
from .retained import RetainedState
from .session_store import SessionStore
from .session_table import SessionTable
from .sessions import DEFAULT_POLICY, SessionPolicy
from .stats import BrokerStats, Counters, LinkStats
from .store import ProfileStore

log = logging.getLogger("siftbus.broker")
ServiceHandler = Callable[[str, dict[str, Any], str], Any]
"""A broker-hosted service: ``handler(method, args, caller) -> result`` (or an awaitable
of it). ``caller`` is the calling client's name. Raise a ``SiftbusError`` to answer with
an error; the result must be msgpack-serialisable."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def check_name(name: str, what: str) -> str:
    """Broker and client names: letters, digits, ``_ . -``, not starting with a symbol."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 100:
        raise ConfigError(f"{what} name {name!r} must be letters, digits, '_', '.', '-' "
                          "(starting with a letter or digit)", field=what)
    return name


def default_engine() -> str:
    """The engine registry's default (:data:`siftbus.match.engines.DEFAULT_ENGINE`)."""
    return DEFAULT_ENGINE


class BrokerNode:
    """One broker: profile table, routing protocol, local client sessions, services."""

    def __init__(self, name: str, schema: Schema, *, protocol: str = "forwarding",
                 strategy: str = "covering", imperfect: bool = False,
                 advertisements: bool = False, neighbours: tuple[str, ...] = (),
                 rendezvous: dict[str, str | None] | None = None,
                 engine: str | None = None, store: ProfileStore | None = None,
                 clock: Callable[[], float] = time.time, limits: Limits | None = None,
                 guard: Guard | None = None, handoff: str | None = None,
                 sessions: SessionPolicy | None = None,
                 edges: Iterable[tuple[str, str]] | None = None,
                 composite: CompositeSettings | None = None) -> None:
        self.name = check_name(name, "broker")
        self.schema = schema
        self.protocol = protocol
        self.neighbours = tuple(neighbours)
        self._up: set[str] = set()
        self._up_frozen: frozenset[str] = frozenset()
        self.clients: set[str] = set()
        self.counters = Counters()
        self.clock = clock
        self.store = store
        #: what one client request may hold (profiles, conditions, text); the server
        #: sets its own limits here
        self.limits = limits or DEFAULT_LIMITS
        self.engine = engine or default_engine()
        matcher: Matcher = make_matcher(self.engine)
        if protocol == "flooding":
            strategy = "simple"  # profiles never leave the broker
        self.routing: Routing = make_routing(
            protocol, self, matcher, strategy=strategy, imperfect=imperfect,
            advertisements=advertisements, rendezvous=rendezvous)
        #: transport hooks, set by the server or the simulator
        self.transport_send: Callable[[str, Message], None] = _unconnected
        self.run_async: Callable[[Awaitable[Any], str, int | None], None] = _no_async
        self.transport_stats: Callable[[], dict[str, Any]] = dict
        #: persistent notifications and temporal filters (retained state, docs/temporal.md)
        self.retained = RetainedState(self, protocol=protocol, toward=self.routing.toward,
                                      direction=getattr(self.routing, "direction", None))
        self.services: dict[str, ServiceHandler] = {"broker": self._broker_service,
                                                    "retained": self.retained.service}
        #: called with a client's name when its connection goes (hosted services own
        #: per-connection state, e.g. the channel service's push proxies)
        self.client_down_listeners: list[Callable[[str], None]] = []
        #: the security layer's gatekeeper (open: everything allowed) and this broker's
        #: view of it: principals of clients, name bindings, rights, quotas
        self.guard = guard or Guard()
        self.access = ClientAccess(self.guard, self.name, store)
        #: the local clients' profiles and advertisements in the routing table
        self.client_profiles = ClientProfiles(self)
        self._init_sessions(handoff, sessions, edges, protocol, strategy)
        #: called with the clock's time by the server's timer (``tick_interval``)
        self.tickers: list[Callable[[float], None]] = []
        #: composite profiles of the local clients (docs/composite.md)
        self.composites = CompositeService(self, composite)
        self.services[COMPOSITE_SERVICE] = self.composites.handle
        self.client_down_listeners.append(self.composites.client_down)
        self.tickers.append(self.composites.tick)
        if store is not None:
            self.client_profiles.restore(store)

    def _init_sessions(self, handoff: str | None, policy: SessionPolicy | None,
                       edges: Iterable[tuple[str, str]] | None, protocol: str,
                       strategy: str) -> None:
        """Sessions and the handoff protocol (:mod:`.session_table`, :mod:`.handoff`);
        the whole tree (``edges``) gives the overlay addresses a handoff travels by."""
        #: timers: ``call_later(seconds, fn)``, set by the server or the simulator
        self.call_later: Callable[[float, Callable[[], None]], Any] = _no_timer
        policy = policy or DEFAULT_POLICY
        self.sessions = SessionTable(
            self, policy, SessionStore(self.store) if self.store is not None else None)
        tree = list(edges) if edges is not None else [(self.name, n) for n in self.neighbours]
        self.handoff = make_handoff(handoff or default_handoff(protocol, strategy), self, tree,
                                    policy, protocol=protocol, strategy=strategy)
        self.sessions.mover = self.handoff
        self.routing.session_epoch = self.handoff.session_epoch
        #: told when a client's session claim left pending by :meth:`session_hello` is
        #: settled (the status for its ACK, or the error refusing it); set by the server
        self.on_session_settled: Callable[[str, dict[str, Any] | SiftbusError], None] = \
            _unsettled
        if not self.guard.open:  # stored before owners were: the name binding says
            for s in self.sessions.sessions.values():
                s.principal = s.principal or self.access.owners.get(s.id, "")

    def session_hello(self, link: str, body: Any, principal: Principal = ANONYMOUS
                      ) -> dict[str, Any] | None:
        """A client's HELLO asked for a session: the status for its ACK. On a secured
        network a session held elsewhere is only taken over once its holders confirm
        that ``principal`` owns it, and a client that knows only the session id (no
        epoch) is answered once the newest copy is found, on every network: then
        ``None``, and :attr:`session_settled` tells the outcome (``docs/mobility.md``,
        "Whose session", "A fresh process")."""
        if self.guard.open:
            return self.sessions.hello(link, body)

        def refuse(why: str) -> SiftbusError:
            return self.guard.deny(principal, "connect", f"as session {link[1:]!r}", why)

        status = self.sessions.hello(link, body, principal.name, refuse)
        if status is not None:
            self.access.bind(link)
        return status

    def session_settled(self, link: str, result: dict[str, Any] | SiftbusError) -> None:
        """A pending session claim is settled: the client's name is bound to it if it
        got the session (a refused claim binds nothing), and the transport is told."""
        if not isinstance(result, SiftbusError):
            self.access.bind(link)
        self.on_session_settled(link, result)

    def forget_client(self, link: str) -> None:
        """Remove every profile and advertisement of a client (its session ended)."""
        self.client_profiles.forget(link)

    # ---- RoutingHost -----------------------------------------------------------------

    def neighbours_up(self) -> frozenset[str]:
        return self._up_frozen

    def is_broker(self, link: str) -> bool:
        return not link.startswith("@")

    def send(self, link: str, msg: Message) -> None:
        if self.is_broker(link) and link not in self._up:
            return  # the link is down; neighbour_up re-exports what it needs
        self.transport_send(link, msg)

    def deliver(self, link: str, items: list[tuple[Block, np.ndarray, list[str]]]) -> None:
        items = self.composites.intercept(link, items)  # component rows feed the automata
        if not items:
            return
        if self.sessions.deliver(link, items):
            return  # a session client's: numbered, buffered, sent by its session
        n = sum(len(pids) for _, _, pids in items)
        if link not in self.clients:
            self.counters.drop("offline", n)
            return
        c = self.counters
        c.notifications += n
        now = self.clock()
        for block, counts, _ in items:
            c.observe_latencies(now - block.ts, counts)
        self.transport_send(link, Message(MsgType.NOTIFY, {
            "blocks": [encode_block(b, counts, pids) for b, counts, pids in items]}))

    # ---- links -------------------------------------------------------------------------

    def broker_up(self, name: str) -> None:
        """A neighbour's link is up (after the HELLO/SCHEMA handshake)."""
        if name not in self.neighbours:
            raise ConfigError(f"{name} is not a neighbour of {self.name}", field="neighbours")
        self._up.add(name)
        self._up_frozen = frozenset(self._up)
        self.routing.neighbour_up(name)
        self.retained.neighbour_up(name)
        self.handoff.link_up(name)

    def broker_down(self, name: str) -> None:
        if name not in self._up:
            return
        self._up.discard(name)
        self._up_frozen = frozenset(self._up)
        self.routing.neighbour_down(name)
        self.retained.neighbour_down(name)
        self.handoff.link_down(name)

    def client_up(self, name: str, principal: Principal = ANONYMOUS, *,
                  chosen: bool = True, bind: bool = True) -> tuple[str, list[str]]:
        """Attach a local client of ``principal`` (``chosen``: it asked for the name);
        returns its link and the ids of its stored profiles. A name bound to another
        principal is refused (:class:`~siftbus.errors.AccessDenied`); a free one is
        bound to it, unless ``bind`` is false (a session client: :meth:`session_hello`
        binds it once the session is its own)."""
        check_name(name, "client")
        link = "@" + name
        if link in self.clients:
            holder = self.access.principals.get(link)
            if holder is not None and holder.name != principal.name and not self.guard.open:
                # the same counted refusal as once it has left: whether another
                # principal's client is online is not this one's to learn
                raise self.guard.deny(principal, "connect", f"as client {name!r}",
                                      "the name belongs to another principal")
            raise ConfigError(f"a client named {name!r} is already connected to {self.name}",
                              field="name")
        self.access.attach(link, principal, chosen=chosen, bind=bind)
        self.clients.add(link)
        return link, self.profile_ids(link)

    def profile_ids(self, link: str) -> list[str]:
        """The ids of the profiles client ``link`` holds here, sorted."""
        return sorted({e.local_id for e in self.routing.table.entries.values()
                       if e.src == link})

    def assign_name(self, principal: Principal = ANONYMOUS) -> str:
        """A free client name for a client of ``principal`` that chose none."""
        return self.access.assign_name(principal, lambda n: "@" + n in self.clients)

    def client_down(self, link: str) -> None:
        """Detach a client. Its advertisements go (it can no longer publish here);
        without a store its profiles go too, with one they stay (durable)."""
        self.clients.discard(link)
        self.sessions.cancel_claim(link)
        if not self.sessions.detach(link):  # a session keeps profiles and adverts
            self.client_profiles.detach(link)
        self.access.detach(link)
        self.retained.client_down(link)
        for listener in self.client_down_listeners:
            try:
                listener(link[1:])
            except Exception:  # a service bug must not keep the broker from detaching
                log.exception("%s: client-down listener failed", self.name)

    def hello_body(self) -> dict[str, Any]:
        return {"role": "broker", "name": self.name, "protocol": self.protocol}

    def schema_message(self) -> Message:
        return Message(MsgType.SCHEMA, {"schema": self.schema.to_dict()})

    # ---- message handling (one atomic step per message) ---------------------------------------

    def handle(self, link: str, msg: Message) -> None:
        """Handle one message from ``link``; bad requests are answered with ERROR."""
        corr = msg.body.get("corr")
        corr = corr if isinstance(corr, int) and not isinstance(corr, bool) else None
        try:
            if msg.type in RETAINED_TYPES:
                self.retained.handle(link, msg, corr)
            elif self.is_broker(link):
                self._from_broker(link, msg)
            else:
                self._from_client(link, msg, corr)
        except SiftbusError as exc:
            self.transport_send(link, Message(MsgType.ERROR, error_body(exc, corr)))

    def _from_broker(self, z: str, msg: Message) -> None:
        t, body = msg.type, msg.body
        routing = self.routing
        if "plane" in body:  # the handoff's control plane (ping/pong)
            self.handoff.on_plane(z, msg)
        elif t is MsgType.PUB or t is MsgType.NOTIFY:
            self._route(z, t, [b for b, _, _ in decode_batch(body, self.schema)])
        elif t is MsgType.SUB:  # a neighbour's (possibly merged) profiles: no request limits
            for item in get(body, "profiles", list):
                p = decode_profile(item, self.schema, None)
                if self.handoff.accepts(z, p.id, body.get("se")):
                    routing.neighbour_subscribe(z, p)
        elif t is MsgType.UNSUB:
            for gid in get(body, "ids", list):
                if self.handoff.accepts(z, str(gid), body.get("se"), subscribe=False):
                    routing.neighbour_unsubscribe(z, str(gid))
        elif t is MsgType.ADV:
            for item in get(body, "adverts", list):
                routing.advertise(z, decode_profile(item, self.schema, None))
        elif t is MsgType.UNADV:
            for gid in get(body, "ids", list):
                routing.unadvertise(z, str(gid))
        elif t is MsgType.SCHEMA:
            self.check_schema(body, z)
        elif t is MsgType.PING:
            self.transport_send(z, Message(MsgType.ACK, {"corr": body.get("corr")}))
        elif t is MsgType.HANDOFF:
            self.handoff.receive(z, body)
        elif t not in (MsgType.ACK, MsgType.ERROR):  # the server logs a neighbour's ERROR
            raise WireError(f"{t.name} is not expected from a broker")

    def check_schema(self, body: dict[str, Any], peer: str) -> None:
        theirs = get(body, "schema", dict, where="SCHEMA")
        if theirs != self.schema.to_dict():
            raise ConfigError(f"{peer} uses a different schema than {self.name}",
                              field="schema")

    def _route(self, src: str, kind: MsgType, blocks: list[Block]) -> None:
        c = self.counters
        c.events_in += sum(len(b) for b in blocks)
        start = time.perf_counter()
        res = self.routing.route(src, kind, blocks)
        c.observe_route(time.perf_counter() - start)
        self.composites.end_step()  # the step's component rows, once per event
        c.filter_ops += res.filtered
        c.matches += res.matches
        c.events_out += res.events_out

    def _from_client(self, link: str, msg: Message, corr: int | None) -> None:
        t, body = msg.type, msg.body
        if self.sessions.defer(link, msg):
            return  # its session is still arriving: handled once it is here
        client = link[1:]
        reply: dict[str, Any] = {"corr": corr}
        if t is MsgType.PUB:
            # the broker stamps src: what a client wrote there is ignored
            blocks = [b for b, _, _ in decode_batch(body, self.schema)]
            src = self.sessions.publisher_src(client, blocks) or f"{self.name}/{client}"
            blocks = [b.with_src(src) for b in blocks]
            self.access.check_publish(link, blocks)
            n = sum(len(b) for b in blocks)
            self.counters.events_published += n
            self._route(link, MsgType.PUB, blocks)
            if corr is None:
                return
            reply["count"] = n
        elif t is MsgType.SUB:
            profiles = self.client_profiles.decode(body, client)
            self.client_profiles.subscribe_all(client, profiles)
            reply["ids"] = [p.id for p in profiles]
        elif t is MsgType.UNSUB:
            ids = [str(i) for i in check_count(get(body, "ids", list), "ids", self.limits)]
            self.client_profiles.unsubscribe_all(client, ids)
            reply["ids"] = ids
        elif t is MsgType.ADV:
            cp = self.client_profiles
            cp.advertise_all(link, client, cp.decode(body, client, key="adverts"))
        elif t is MsgType.UNADV:
            for pid in check_count(get(body, "ids", list), "ids", self.limits):
                self.client_profiles.unadvertise(link, client, str(pid))
        elif t is MsgType.PING:
            pass
        elif t is MsgType.SACK:
            self.sessions.ack(link, get(body, "ack", int, where="SACK"),
                              body.get("resend") is True)
            return
        elif t is MsgType.CALL:
            self._call(link, client, body, corr)
            return
        elif t is MsgType.SCHEMA:
            self.transport_send(link, self.schema_message())
            return
        else:
            raise WireError(f"{t.name} is not a client request")
        if corr is not None:
            self.transport_send(link, Message(MsgType.ACK, reply))

    # ---- services ------------------------------------------------------------------------------

    def register_service(self, name: str, handler: ServiceHandler, *,
                         on_client_down: Callable[[str], None] | None = None,
                         authorizes: bool = False) -> None:
        """Host a service reachable with ``client.call(name, method, **args)``;
        ``on_client_down(client)`` is told when a client's connection goes.

        On a secured network a caller needs the service right ``name.method``, unless
        the service ``authorizes`` its callers itself (with :meth:`rights_of`)."""
        if name in self.services:
            raise ConfigError(f"service {name!r} is already registered", field=name)
        self.services[name] = handler
        if authorizes:
            self.access.self_authorizing.add(name)
        if on_client_down is not None:
            self.client_down_listeners.append(on_client_down)

    def principal_of(self, client: str) -> Principal:
        """The principal of a local client (for hosted services)."""
        return self.access.owner(client)

    def rights_of(self, client: str) -> Rights:
        """What a local client may do (for services that authorize their callers)."""
        return self.guard.rights(self.access.owner(client))

    def _call(self, link: str, client: str, body: dict[str, Any], corr: int | None) -> None:
        service = get(body, "service", str, where="CALL")
        method = get(body, "method", str, where="CALL")
        args = body.get("args") or {}
        if not isinstance(args, dict):
            raise WireError("CALL args must be a map", field="args")
        handler = self.services.get(service)
        if handler is None:
            raise WireError(f"no service {service!r} at broker {self.name} "
                            f"(have {', '.join(sorted(self.services))})", field="service")
        self.access.check_call(link, service, method)
        result = handler(method, args, client)
        if inspect.isawaitable(result):
            self.run_async(result, link, corr)
            return
        self.transport_send(link, Message(MsgType.REPLY, {"corr": corr, "result": result}))

    def _broker_service(self, method: str, args: dict[str, Any], caller: str) -> Any:
        if method == "stats":
            return self.stats().to_dict()
        if method == "profiles":
            return [{"id": e.id, "source": e.src, "text": format_profile(e.profile)}
                    for e in self.routing.table.entries.values()]
        if method == "schema":
            return self.schema.to_dict()
        if method == "transport":
            return {**self.transport_stats(), "limits": self.limits.to_dict()}
        raise WireError(f"the broker service has no method {method!r} "
                        "(stats, profiles, schema, transport)", field="method")

    # ---- stats -----------------------------------------------------------------------------

    def stats(self) -> BrokerStats:
        c = self.counters
        table = self.routing.table
        bl = [lk for n, lk in c.links.items() if self.is_broker(n)]
        return BrokerStats(
            name=self.name, protocol=self.protocol, events_in=c.events_in,
            events_published=c.events_published, events_out=c.events_out,
            filter_ops=c.filter_ops, matches=c.matches, notifications=c.notifications,
            dropped=c.dropped, table_size=len(table),
            local_profiles=sum(1 for e in table.entries.values() if not self.is_broker(e.src)),
            exported=table.exported_count(), adverts=table.advert_count,
            covering_tests=table.covering_tests, clients=len(self.clients),
            neighbours_up=len(self._up),
            messages_in=sum(lk.messages_in for lk in bl),
            messages_out=sum(lk.messages_out for lk in bl),
            bytes_in=sum(lk.bytes_in for lk in bl), bytes_out=sum(lk.bytes_out for lk in bl),
            latency_ms=c.latency_dict(),
            links={n: LinkStats(lk.messages_in, lk.messages_out, lk.bytes_in, lk.bytes_out)
                   for n, lk in sorted(c.links.items())},
            dropped_by=dict(c.dropped_by), latency_sum_s=c.latency_sum,
            route_s=c.route_dict(), route_sum_s=c.route_sum,
            denials=self.guard.audit.to_dict(),
            sessions={**self.sessions.stats(), "handoff": self.handoff.name,
                      "handoff_messages": dict(self.handoff.counts)},
        )


def _no_timer(delay: float, fn: Callable[[], None]) -> None:
    """Without a transport nothing runs later (the node alone has no clock to run on)."""


def _unsettled(link: str, result: dict[str, Any] | SiftbusError) -> None:
    raise RuntimeError("broker node has no transport to settle a session claim")


def _unconnected(link: str, msg: Message) -> None:
    raise RuntimeError("broker node has no transport")


def _no_async(result: Awaitable[Any], link: str, corr: int | None) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()
    raise WireError("this transport cannot run asynchronous services")


__all__ = ["BrokerNode", "ServiceHandler", "check_name", "default_engine"]
