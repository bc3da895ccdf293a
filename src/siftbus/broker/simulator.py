"""A deterministic in-process simulator of a broker network.

It runs the same :class:`~siftbus.broker.node.BrokerNode` objects as the asyncio server,
connected by in-memory links: every link is FIFO, and at each step the simulator takes
the head message of a link chosen at random (seeded), so delivery is reordered across
links but never within one -- exactly the transport assumption of the protocols. With
``roundtrip=True`` every message is encoded to a frame and decoded again, so the wire
codec is exercised too and bytes per link are counted.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from siftbus.errors import ConfigError
from siftbus.model import Event, Profile, Schema
from siftbus.wire.events import Envelope, decode_batch, encode_envelope_blocks
from siftbus.wire.frames import Message, MsgType, decode_payload, encode
from siftbus.wire.profiles import encode_profile

from .composite import CompositeSettings
from .node import BrokerNode
from .protocols import rendezvous_directions
from .stats import BrokerStats


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
    replies: list[dict[str, Any]] = field(default_factory=list)
    """REPLY bodies: answers to calls and service pushes (``service``, ``event``)."""
    seq: int = 0
    connected: bool = True

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
        for b in brokers:
            dirs = rendezvous_directions(self.edges, b, rn) if protocol == "rendezvous" \
                else None
            node = BrokerNode(b, schema, protocol=protocol, strategy=strategy,
                              imperfect=imperfect, advertisements=advertisements,
                              neighbours=tuple(nbrs[b]), rendezvous=dirs, engine=engine,
                              composite=composite)
            node.transport_send = self._sender(b)
            self.nodes[b] = node
        self.clients: dict[str, SimClient] = {}
        self.links: dict[tuple[str, str], deque[Message]] = defaultdict(deque)
        self.steps = 0
        for a, b in self.edges:
            self.nodes[a].broker_up(b)
            self.nodes[b].broker_up(a)
        self.run()

    # ---- transport ---------------------------------------------------------------------

    def _sender(self, broker: str) -> Any:
        def send(link: str, msg: Message) -> None:
            if self.roundtrip:
                frame = encode(msg)
                self.nodes[broker].counters.count_out(link, len(frame))
                msg = decode_payload(frame[4:])
            self.links[(broker, link)].append(msg)

        return send

    def _deliver(self, src: str, dst: str, msg: Message) -> None:
        if dst.startswith("@"):
            self._to_client(self.clients[dst[1:]], msg)
            return
        node = self.nodes[dst]
        if self.roundtrip:
            node.counters.count_in(src, len(encode(msg)))
        node.handle(src, msg)

    def _to_client(self, c: SimClient, msg: Message) -> None:
        if not c.connected:
            return  # the connection is gone: nobody reads what was in flight
        if msg.type is MsgType.NOTIFY:
            for block, counts, pids in decode_batch(msg.body, self.schema, notify=True):
                at = 0
                for src, seq, k in zip(block.srcs(), block.seq.tolist(), counts.tolist(),
                                       strict=True):
                    for pid in pids[at:at + k]:
                        c.deliveries.append(Delivery(c.name, pid, (src, seq)))
                    at += k
        elif msg.type is MsgType.ERROR:
            c.errors.append(msg.body)
        elif msg.type is MsgType.REPLY:
            c.replies.append(msg.body)

    def step(self) -> bool:
        """Deliver the head message of one non-empty link (random); ``False`` when idle."""
        busy = [k for k, q in self.links.items() if q]
        if not busy:
            return False
        key = busy[self.rng.randrange(len(busy))] if len(busy) > 1 else busy[0]
        msg = self.links[key].popleft()
        src, dst = key
        self.steps += 1
        self._deliver(src, dst, msg)
        return True

    def run(self, max_steps: int = 10_000_000) -> int:
        """Run until no message is in flight; returns the steps taken."""
        n = 0
        while self.step():
            n += 1
            if n >= max_steps:
                raise RuntimeError(f"network not quiescent after {max_steps} steps")
        return n

    # ---- clients -------------------------------------------------------------------------

    def add_client(self, name: str, broker: str) -> SimClient:
        node = self.nodes[broker]
        node.client_up(name)
        c = SimClient(name, broker)
        self.clients[name] = c
        return c

    def disconnect(self, client: str) -> None:
        """Close a client's connection: its broker handles what the client already sent
        (a server reads a connection to its end), then detaches it
        (:meth:`~siftbus.broker.node.BrokerNode.client_down`)."""
        c = self.clients[client]
        pending = self.links[(c.link, c.broker)]
        while pending:
            self.steps += 1
            self._deliver(c.link, c.broker, pending.popleft())
        c.connected = False
        self.nodes[c.broker].client_down(c.link)

    def _client_send(self, c: SimClient, msg: Message) -> None:
        if self.roundtrip:
            msg = decode_payload(encode(msg)[4:])
        self.links[(c.link, c.broker)].append(msg)

    def subscribe(self, client: str, profiles: Profile | Sequence[Profile]) -> None:
        """Queue a SUB from ``client`` (profile ids are the client's own)."""
        ps = [profiles] if isinstance(profiles, Profile) else list(profiles)
        c = self.clients[client]
        self._client_send(c, Message(MsgType.SUB, {
            "profiles": [encode_profile(p) for p in ps]}))

    def unsubscribe(self, client: str, ids: str | Sequence[str]) -> None:
        c = self.clients[client]
        self._client_send(c, Message(MsgType.UNSUB, {"ids": [ids] if isinstance(ids, str)
                                                     else list(ids)}))

    def advertise(self, client: str, adverts: Sequence[Profile]) -> None:
        c = self.clients[client]
        self._client_send(c, Message(MsgType.ADV, {
            "adverts": [encode_profile(p) for p in adverts]}))

    def unadvertise(self, client: str, ids: Sequence[str]) -> None:
        c = self.clients[client]
        self._client_send(c, Message(MsgType.UNADV, {"ids": list(ids)}))

    def call(self, client: str, service: str, method: str, **args: Any) -> None:
        """Queue a CALL of a broker-hosted service (the answer lands in ``replies``)."""
        c = self.clients[client]
        self._client_send(c, Message(MsgType.CALL, {"service": service, "method": method,
                                                    "args": args, "corr": 0}))

    def publish(self, client: str, events: Sequence[Event]) -> list[tuple[str, int]]:
        """Queue a PUB batch; returns the publication identities the network will use."""
        c = self.clients[client]
        envs = []
        for e in events:
            envs.append(Envelope(e, client, c.seq, 0.0))
            c.seq += 1
        self._client_send(c, Message(MsgType.PUB, {"blocks": encode_envelope_blocks(envs)}))
        return [(f"{c.broker}/{client}", env.seq) for env in envs]

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
