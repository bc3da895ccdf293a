"""A deterministic in-process simulator of a broker network.

It runs the same :class:`~siftbus.broker.node.BrokerNode` objects as the asyncio server,
connected by in-memory links: every link is FIFO, and at each step the simulator takes
the head message of a link chosen at random (seeded), so delivery is reordered across
links but never within one -- exactly the transport assumption of the protocols. With
``roundtrip=True`` every message is encoded to a frame and decoded again, so the wire
codec is exercised too and bytes per link are counted.

Sessions and mobility (``docs/mobility.md``): clients may have sessions
(``add_client(..., session=True)``) and move between brokers (:meth:`Simulator.move`);
timers (ping/pong's pings, the sessions' ticks) run on a virtual clock that advances a
little with every step, and the handoff's out-of-band messages travel on direct links.
Every message carries a logical time (one more than its sender's), so the critical path
of a handoff is measured in hops, whatever the random schedule.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from siftbus.errors import ConfigError, SiftbusError
from siftbus.model import Event, Profile, Schema
from siftbus.wire.events import Envelope, decode_batch, encode_envelope_blocks
from siftbus.wire.frames import Message, MsgType, decode_payload, encode
from siftbus.wire.profiles import encode_profile

from .composite import CompositeSettings
from .node import BrokerNode
from .protocols import rendezvous_directions
from .session_table import SessionBusy
from .sessions import SessionPolicy
from .stats import BrokerStats

STEP_TIME = 1e-5
"""Virtual seconds one step takes."""

HORIZON = 0.5
"""When no message is in flight, timers due within this many virtual seconds still run
(pings); later ones (periodic ticks) do not keep the network busy."""


_EOF = Message(MsgType.PING, {})
"""Queued on a client's link by a late :meth:`Simulator.disconnect`: its end."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification a client received: which of its profiles, which publication."""

    subscriber: str
    profile: str
    event: tuple[str, int]
    """The publication's identity ``(src, seq)``."""


@dataclass(slots=True)
class SimClient:
    """A client attached to a broker; records notifications and errors."""

    name: str
    broker: str
    deliveries: list[Delivery] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    retained: list[Message] = field(default_factory=list)
    """Retained-state messages received (TNOTIFY changes, ACKs), in order."""
    replies: list[dict[str, Any]] = field(default_factory=list)
    """REPLY bodies: answers to calls and service pushes (``service``, ``event``)."""
    seq: int = 0
    connected: bool = True
    session: bool = False
    """Whether the client has a session (then ``last``, ``epoch``, ``tag`` track it)."""
    last: int = 0
    """The highest session number handed to the application."""
    epoch: int = 0
    tag: int = 0
    statuses: list[dict[str, Any]] = field(default_factory=list)
    """Session statuses received (the HELLO's and the pushes)."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """Session numbers skipped (rows the broker dropped over a limit)."""
    redelivered: int = 0
    """Rows received again with a number already handed out (dropped, as the client
    library does)."""
    profiles: dict[str, Profile] = field(default_factory=dict)
    adverts: dict[str, Profile] = field(default_factory=dict)
    auto_ack: bool = True
    refused: int = 0
    """Connections refused (:class:`~siftbus.broker.session_table.SessionBusy`)."""
    pending: bool = False
    """Connected, its HELLO not answered yet (a fresh process's broker is finding its
    session): what it sends waits in ``held``, as a client library waits for its ACK."""
    held: list[Message] = field(default_factory=list)

    @property
    def link(self) -> str:
        return "@" + self.name


class Simulator:
    """Brokers of a tree on in-memory FIFO links, driven step by step."""

    def __init__(self, schema: Schema, brokers: Sequence[str],
                 edges: Iterable[tuple[str, str]], *, protocol: str = "forwarding",
                 strategy: str = "covering", imperfect: bool = False,
                 advertisements: bool = False, rendezvous: dict[str, str] | None = None,
                 engine: str | None = None, seed: int = 0, roundtrip: bool = False,
                 clock: Callable[[], float] | None = None,
                 handoff: str | None = None, sessions: SessionPolicy | None = None,
                 out_of_band: bool = True,
                 composite: CompositeSettings | None = None) -> None:
        self.schema = schema
        self.edges = [(a, b) for a, b in edges]
        self.rng = random.Random(seed)
        self.roundtrip = roundtrip
        nbrs: dict[str, list[str]] = {b: [] for b in brokers}
        for a, b in self.edges:
            if a not in nbrs or b not in nbrs:
                raise ConfigError(f"edge {a}-{b} names an unknown broker", field="edges")
            nbrs[a].append(b)
            nbrs[b].append(a)
        rn = dict(rendezvous or {})
        if protocol == "rendezvous":
            for t in schema.names:
                rn.setdefault(t, brokers[0])
        self.nodes: dict[str, BrokerNode] = {}
        # the virtual clock first: a node reads its clock while it is made
        self.now = 0.0
        self._timers: list[tuple[float, int, Any]] = []
        self._tseq = itertools.count()
        for b in brokers:
            dirs = rendezvous_directions(self.edges, b, rn) if protocol == "rendezvous" \
                else None
            node = BrokerNode(b, schema, protocol=protocol, strategy=strategy,
                              imperfect=imperfect, advertisements=advertisements,
                              neighbours=tuple(nbrs[b]), rendezvous=dirs, engine=engine,
                              clock=clock if clock is not None else self.clock,
                              handoff=handoff, sessions=sessions, edges=self.edges,
                              composite=composite)
            node.transport_send = self._sender(b)
            node.call_later = self.call_later
            node.on_session_settled = self._settled(b)
            if out_of_band:
                node.handoff.direct = self._direct(b)
            self.nodes[b] = node
        self.clients: dict[str, SimClient] = {}
        self.links: dict[tuple[str, str], deque[Message]] = defaultdict(deque)
        self.steps = 0
        for a, b in self.edges:
            self.nodes[a].broker_up(b)
            self.nodes[b].broker_up(a)
        self.run()

    # ---- transport ---------------------------------------------------------------------

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, fn: Any) -> None:
        heapq.heappush(self._timers, (self.now + delay, next(self._tseq), fn))

    def _fire(self, until: float) -> bool:
        """Run the timers due by ``until``; whether one ran."""
        ran = False
        while self._timers and self._timers[0][0] <= until:
            due, _, fn = heapq.heappop(self._timers)
            self.now = max(self.now, due)
            fn()
            ran = True
        return ran

    def _sender(self, broker: str) -> Any:
        def send(link: str, msg: Message) -> None:
            if self.roundtrip:
                frame = encode(msg)
                self.nodes[broker].counters.count_out(link, len(frame))
                msg = decode_payload(frame[4:])
            self.links[(broker, link)].append(msg)

        return send

    def _direct(self, broker: str) -> Any:
        def send(dest: str, msg: Message) -> None:
            if self.roundtrip:
                frame = encode(msg)
                self.nodes[broker].counters.count_out(f"{dest}~oob", len(frame))
                msg = decode_payload(frame[4:])
            self.links[(f"{broker}~oob", dest)].append(msg)

        return send

    def _deliver(self, src: str, dst: str, msg: Message) -> None:
        if msg is _EOF:  # a client's connection read to its end late: now it goes
            self.nodes[dst].client_down(src)
            return
        if dst.startswith("@"):
            self._to_client(self.clients[dst[1:]], msg, src)
            return
        node = self.nodes[dst]
        src = src.removesuffix("~oob")
        if self.roundtrip:
            node.counters.count_in(src, len(encode(msg)))
        node.handle(src, msg)

    def _to_client(self, c: SimClient, msg: Message, broker: str) -> None:
        if not c.connected or broker != c.broker:
            return  # the connection is gone: nobody reads what was in flight
        if msg.type is MsgType.NOTIFY:
            raw = msg.body.get("blocks", [])
            for d, (block, counts, pids) in zip(
                    raw, decode_batch(msg.body, self.schema, notify=True), strict=True):
                first = d.get("ss")
                at = 0
                for i, (src, seq, k) in enumerate(zip(block.srcs(), block.seq.tolist(),
                                                      counts.tolist(), strict=True)):
                    row = pids[at:at + k]
                    at += k
                    if first is not None:
                        n = first + i
                        if n <= c.last:
                            c.redelivered += 1
                            continue
                        if n > c.last + 1:
                            c.gaps.append((c.last + 1, n - 1))
                        c.last = n
                    for pid in row:
                        c.deliveries.append(Delivery(c.name, pid, (src, seq)))
            if c.session and c.auto_ack:
                self.ack(c.name)
        elif msg.type is MsgType.REPLY and msg.body.get("service") == "session":
            st = msg.body["event"]
            c.statuses.append(st)
            c.epoch, c.tag = st["epoch"], st["tag"]
        elif msg.type is MsgType.ERROR:
            c.errors.append(msg.body)
        elif msg.type in (MsgType.TNOTIFY, MsgType.ACK):
            c.retained.append(msg)
        elif msg.type is MsgType.REPLY:
            c.replies.append(msg.body)

    def step(self) -> bool:
        """Deliver the head message of one non-empty link (random); ``False`` when idle."""
        self._fire(self.now)
        busy = [k for k, q in self.links.items() if q]
        if not busy:
            return False
        key = busy[self.rng.randrange(len(busy))] if len(busy) > 1 else busy[0]
        msg = self.links[key].popleft()
        src, dst = key
        self.steps += 1
        self.now += STEP_TIME
        self._deliver(src, dst, msg)
        return True

    def run(self, max_steps: int = 10_000_000) -> int:
        """Run until no message is in flight and no timer is due soon (a ping/pong
        handoff's next ping); returns the steps taken."""
        n = 0
        while True:
            if self.step():
                n += 1
                if n >= max_steps:
                    raise RuntimeError(f"network not quiescent after {max_steps} steps")
                continue
            if not self._fire(self.now + HORIZON):
                return n

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass (timers due meanwhile run), then run."""
        self._fire(self.now + seconds)
        self.now += seconds
        self.run()

    # ---- clients -------------------------------------------------------------------------

    def add_client(self, name: str, broker: str, *, session: bool = False,
                   limits: dict[str, Any] | None = None, clean: bool = False) -> SimClient:
        """Connect a client; with ``session`` it has a session named like itself (a new
        one, or resumed wherever it is held: the handoff fetches it)."""
        c = self.clients.get(name) or SimClient(name, broker, session=session)
        c.broker, c.connected, c.session = broker, True, session or c.session
        self.clients[name] = c
        node = self.nodes[broker]
        node.client_up(name)
        if c.session:
            req: dict[str, Any] = {"ack": c.last, "clean": clean}
            if limits:
                req["limits"] = limits
            if c.epoch:
                req.update(epoch=c.epoch, tag=c.tag)
            self._hello(c, req)
        return c

    def _hello(self, c: SimClient, req: dict[str, Any]) -> None:
        if req.get("epoch") is None:
            c.epoch = c.tag = 0  # it knows none: until its ACK says
        st = self.nodes[c.broker].session_hello(c.link, req)
        c.pending = st is None
        c.held.clear()
        if st is not None:
            c.statuses.append(st)
            c.epoch, c.tag = st["epoch"], st["tag"]

    def _settled(self, broker: str) -> Callable[[str, Any], None]:
        def settled(link: str, result: Any) -> None:
            c = self.clients[link[1:]]
            if not c.pending or c.broker != broker or not c.connected:
                return
            c.pending = False
            if isinstance(result, SiftbusError):
                # refused (as SessionBusy): it is not connected until it tries again
                c.errors.append({"message": str(result), "kind": type(result).__name__})
                c.connected = False
                c.refused += 1
                self.nodes[broker].client_down(link)
                return
            c.statuses.append(result)
            c.epoch, c.tag = result["epoch"], result["tag"]
            for msg in c.held:
                self.links[(c.link, c.broker)].append(msg)
            c.held.clear()

        return settled

    def move(self, client: str, broker: str, *, tell: bool = True,
             fresh: bool = False, late: bool = False) -> bool:
        """Move a session client to ``broker``: disconnect, connect there with the same
        session. With ``tell`` it names its last broker and its profiles (as the client
        library does); without, the new broker has to locate the session; ``fresh``: as
        a new process that knows only the session id and its last number (no epoch, no
        broker); ``late``: its old broker reads its closed connection to the end later
        (:meth:`disconnect`). ``False`` if the broker refused it for now
        (:class:`SessionBusy`): it stays disconnected."""
        c = self.clients[client]
        old = c.broker
        if c.connected:
            self.disconnect(client, late=late and broker != old)
        self._read_to_end(c.link, broker)
        if c.pending:  # it gave up waiting for its ACK: still knows no epoch
            c.pending, fresh = False, True
        c.broker, c.connected = broker, True
        node = self.nodes[broker]
        node.client_up(client)
        req: dict[str, Any] = {"ack": c.last,
                               "adverts": [encode_profile(p) for p in c.adverts.values()]}
        if not fresh:
            req.update(epoch=c.epoch, tag=c.tag)
        if tell and not fresh:
            req.update({"from": old,
                        "profiles": [encode_profile(p) for p in c.profiles.values()]})
        try:
            self._hello(c, req)
        except SessionBusy:
            # refused (an older state of its session is still arriving there): it is
            # not connected anywhere until it tries again
            c.connected = False
            c.refused += 1
            node.client_down(c.link)
            c.broker = old
            return False
        return True

    def ack(self, client: str) -> None:
        """Queue the client's acknowledgement of every row it has."""
        c = self.clients[client]
        self._client_send(c, Message(MsgType.SACK, {"ack": c.last}))

    def disconnect(self, client: str, *, late: bool = False) -> None:
        """Close a client's connection: its broker handles what the client already sent
        (a server reads a connection to its end), then detaches it
        (:meth:`~siftbus.broker.node.BrokerNode.client_down`) -- at once, or with
        ``late`` as a message among the others: on real sockets the client may connect
        elsewhere, and that broker's handoff messages reach this one, before it has
        read the closed connection to its end."""
        c = self.clients[client]
        self.links.pop((c.broker, c.link), None)  # unread: gone with the connection
        c.connected = False
        if late:
            self.links[(c.link, c.broker)].append(_EOF)
            return
        self._read_to_end(c.link, c.broker)
        self.nodes[c.broker].client_down(c.link)

    def _read_to_end(self, link: str, broker: str) -> None:
        """Handle what is still queued from ``link`` at ``broker`` (an earlier
        connection's frames, and its end), before the client connects there again."""
        pending = self.links.get((link, broker))
        while pending:
            self.steps += 1
            self._deliver(link, broker, pending.popleft())

    def send(self, client: str, msg: Message) -> None:
        """Queue any message from ``client`` to its broker."""
        self._client_send(self.clients[client], msg)

    def tick(self) -> None:
        """Every broker activates and expires retained notifications by its clock (the
        ``clock`` given to the simulator)."""
        for node in self.nodes.values():
            node.retained.tick()

    def _client_send(self, c: SimClient, msg: Message) -> None:
        if self.roundtrip:
            msg = decode_payload(encode(msg)[4:])
        if c.pending:
            c.held.append(msg)
            return
        self.links[(c.link, c.broker)].append(msg)

    def subscribe(self, client: str, profiles: Profile | Sequence[Profile]) -> None:
        """Queue a SUB from ``client`` (profile ids are the client's own)."""
        ps = [profiles] if isinstance(profiles, Profile) else list(profiles)
        c = self.clients[client]
        c.profiles.update((p.id, p) for p in ps)
        self._client_send(c, Message(MsgType.SUB, {
            "profiles": [encode_profile(p) for p in ps]}))

    def unsubscribe(self, client: str, ids: str | Sequence[str]) -> None:
        c = self.clients[client]
        for i in [ids] if isinstance(ids, str) else ids:
            c.profiles.pop(i, None)
        self._client_send(c, Message(MsgType.UNSUB, {"ids": [ids] if isinstance(ids, str)
                                                     else list(ids)}))

    def advertise(self, client: str, adverts: Sequence[Profile]) -> None:
        c = self.clients[client]
        c.adverts.update((p.id, p) for p in adverts)
        self._client_send(c, Message(MsgType.ADV, {
            "adverts": [encode_profile(p) for p in adverts]}))

    def unadvertise(self, client: str, ids: Sequence[str]) -> None:
        c = self.clients[client]
        for i in ids:
            c.adverts.pop(i, None)
        self._client_send(c, Message(MsgType.UNADV, {"ids": list(ids)}))

    def call(self, client: str, service: str, method: str, **args: Any) -> None:
        """Queue a CALL of a broker-hosted service (the answer lands in ``replies``)."""
        c = self.clients[client]
        self._client_send(c, Message(MsgType.CALL, {"service": service, "method": method,
                                                    "args": args, "corr": 0}))

    def publish(self, client: str, events: Sequence[Event]) -> list[tuple[str, int]]:
        """Queue a PUB batch; returns the publication identities the network will use."""
        c = self.clients[client]
        if c.pending:
            raise ConfigError(f"client {client} waits for its HELLO's ACK: it cannot "
                              "publish yet (its session's epoch names what it publishes)",
                              field="pending")
        envs = []
        for e in events:
            envs.append(Envelope(e, client, c.seq, 0.0))
            c.seq += 1
        self._client_send(c, Message(MsgType.PUB, {"blocks": encode_envelope_blocks(envs)}))
        src = f"~{client}/{c.epoch}" if c.session else f"{c.broker}/{client}"
        return [(src, env.seq) for env in envs]

    # ---- observation -----------------------------------------------------------------------

    def deliveries(self) -> list[Delivery]:
        return [d for c in self.clients.values() for d in c.deliveries]

    def clear_deliveries(self) -> None:
        for c in self.clients.values():
            c.deliveries.clear()

    def stats(self) -> dict[str, BrokerStats]:
        return {b: n.stats() for b, n in self.nodes.items()}

    def table_sizes(self) -> dict[str, int]:
        return {b: len(n.routing.table) for b, n in self.nodes.items()}


__all__ = ["Delivery", "SimClient", "Simulator"]
