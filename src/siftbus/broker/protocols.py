"""Routing protocols: event flooding (EW), profile forwarding (PW), rendezvous nodes (RK).

Every protocol keeps one table per broker, the covering layer's
:class:`~siftbus.covering.forwarding.ForwardingTable` (THE forwarding algorithm): its
entries ``(gid, profile, src)`` hold the profiles of local clients and of neighbour
brokers (a profile a neighbour forwarded is stored as its own: a *transparent*
subscription, as in Bittner's DAS). The protocols differ in where a profile may travel
and how an event does:

* EW never forwards profiles; every event is flooded over the tree and filtered for
  local clients at every broker.
* PW forwards profiles through the tree, pruned by the strategy (``simple``,
  ``identity``, ``covering``, ``merging``); events travel only toward brokers with
  matching interest, once per link, never back to their sender.
* RK forwards profiles only toward the rendezvous node of their type; events travel to
  it and are filtered on the way.

:class:`Routing` applies each table change (one atomic step), keeps the matcher in step
with the table and sends the table's updates as messages: per link ADV, UNADV, then SUB
before UNSUB, so with FIFO links a re-exposed (previously covered) profile is installed
before its coverer leaves and nothing is lost.
"""

from __future__ import annotations

import abc
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from siftbus.covering.forwarding import STRATEGIES, ForwardingTable, Update
from siftbus.covering.table import Entry
from siftbus.errors import ConfigError
from siftbus.match.base import Matcher
from siftbus.model import Profile
from siftbus.wire.events import Block, encode_block
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.profiles import encode_profile

from .matching import BatchMatch, RouteResult

PROTOCOLS = ("flooding", "forwarding", "rendezvous")
"""Protocol names accepted in the network config."""


class RoutingHost(Protocol):
    """What a routing protocol needs from its broker: links and output."""

    name: str

    def neighbours_up(self) -> frozenset[str]:
        """Neighbour brokers whose link is up."""

    def is_broker(self, link: str) -> bool:
        """Whether ``link`` is a neighbour broker (else a local client)."""

    def send(self, link: str, msg: Message) -> None:
        """Queue ``msg`` on ``link`` (FIFO per link)."""

    def deliver(self, link: str, items: list[tuple[Block, np.ndarray, list[str]]]) -> None:
        """Hand notifications to a client: blocks of events, the number of the client's
        matching profiles per row and those profiles' ids, row after row."""


class Routing(abc.ABC):
    """Base of the three protocols: the forwarding table, the matcher, how events travel.

    Every change of the table goes through the methods below (one atomic step each),
    which keep the matcher in step and send the resulting messages.
    """

    name = ""

    def __init__(self, host: RoutingHost, matcher: Matcher, strategy: str = "covering", *,
                 imperfect: bool = False, advertisements: bool = False,
                 rendezvous: dict[str, str | None] | None = None) -> None:
        self.host = host
        self.rendezvous = rendezvous or {}
        self.matcher = matcher
        self.table = ForwardingTable(strategy=strategy, imperfect=imperfect,
                                     advertisements=advertisements, toward=self.toward,
                                     name=host.name)
        self.batch_match = BatchMatch(matcher, self.table.entries, host.is_broker)

    @abc.abstractmethod
    def toward(self, profile: Profile) -> Collection[str] | None:
        """Neighbours a profile may be forwarded to (``None``: any neighbour)."""

    # ---- table changes (one atomic step each) ------------------------------------------------

    def subscribe(self, src: str, profile: Profile, local_id: str | None = None) -> None:
        """Store ``profile`` (its id is the network-wide gid) from ``src`` and forward it."""
        updates = self.table.subscribe(profile, src, local_id)
        self.matcher.add(profile)
        self._send(updates)

    def unsubscribe(self, src: str, gid: str) -> None:
        """Remove the profile ``gid`` that ``src`` stored; re-expose what it covered."""
        updates = self.table.unsubscribe(gid, src)
        self.matcher.remove(gid)
        self._send(updates)

    def unsubscribe_all(self, src: str) -> list[Entry]:
        """Remove every profile from ``src`` (a client that left, a neighbour that
        failed), one step each; returns them."""
        gone = self.table.entries_from(src)
        for e in gone:
            self.unsubscribe(src, e.id)
        return gone

    def advertise(self, src: str, advert: Profile) -> None:
        """Store an advertisement and flood it; subscriptions may now flow toward ``src``."""
        self._send(self.table.advertise(advert, src))

    def unadvertise(self, src: str, gid: str) -> None:
        """Withdraw an advertisement wherever it went."""
        self._send(self.table.unadvertise(gid, src))

    def unadvertise_all(self, src: str) -> list[str]:
        """Withdraw every advertisement of ``src`` (a publisher that left, a neighbour
        that failed), one step each; returns their ids."""
        gone = self.table.adverts_from(src)
        for gid in gone:
            self.unadvertise(src, gid)
        return gone

    def neighbour_up(self, z: str) -> None:
        """Export to a neighbour that just connected whatever it needs."""
        self._send({z: self.table.add_neighbour(z)})

    def neighbour_down(self, z: str) -> None:
        """Forget what we exported to ``z`` and what ``z`` exported to us."""
        self.table.remove_neighbour(z)
        self.unadvertise_all(z)
        self.unsubscribe_all(z)

    def _send(self, updates: dict[str, Update]) -> None:
        """One step's messages, per link: ADV and UNADV (one per advertisement), then
        SUB, then UNSUB."""
        send = self.host.send
        for z, u in updates.items():
            for a in u.advertise:
                send(z, Message(MsgType.ADV, {"adverts": [encode_profile(a)]}))
            for a in u.unadvertise:
                send(z, Message(MsgType.UNADV, {"ids": [a.id]}))
            if u.subscribe:
                send(z, Message(MsgType.SUB, {
                    "profiles": [encode_profile(p) for p in u.subscribe]}))
        for z, u in updates.items():
            if u.unsubscribe:
                send(z, Message(MsgType.UNSUB, {"ids": [p.id for p in u.unsubscribe]}))

    # ---- events --------------------------------------------------------------------------------

    def route(self, src: str, kind: MsgType, blocks: Sequence[Block]) -> RouteResult:
        """Deliver and forward a batch of events (blocks) that arrived on ``src``.

        Each matched event goes once to every neighbour broker with a matching entry
        (never back to ``src``) and once to every local client with matching profiles,
        with that client's profile ids; rows keep their order on every link.
        """
        bm = self.batch_match
        res = RouteResult(filtered=sum(len(b) for b in blocks))
        src_code = bm.code(src)
        to_brokers: dict[int, list[dict[str, Any]]] = {}
        to_clients: dict[int, list[tuple[Block, np.ndarray, list[str]]]] = {}
        for b in blocks:
            offsets, lk, lids = bm.match(b)
            if not len(lk):
                continue
            res.matches += len(lk)
            ev = np.repeat(np.arange(len(b)), np.diff(offsets))
            isb = bm.is_broker[lk]
            if isb.any():
                blk, bev = lk[isb], ev[isb]
                for z in np.unique(blk).tolist():
                    if z == src_code:
                        continue  # never back to the sender
                    rows = np.unique(bev[blk == z])
                    to_brokers.setdefault(z, []).append(encode_block(b.take(rows)))
                    res.events_out += len(rows)
                keep = ~isb
                lk, ev, lids = lk[keep], ev[keep], lids[keep]
                if not len(lk):
                    continue
            if lk[0] == lk[-1] and (lk == lk[0]).all():
                groups: list[tuple[int, np.ndarray]] = [(int(lk[0]), np.arange(len(lk)))]
            else:
                order = np.argsort(lk, kind="stable")
                sl = lk[order]
                cut = np.flatnonzero(sl[1:] != sl[:-1]) + 1
                groups = [(int(sl[i]), idx) for i, idx in
                          zip(np.concatenate(([0], cut)).tolist(), np.split(order, cut),
                              strict=True)]
            for c, idx in groups:
                rows, counts = np.unique(ev[idx], return_counts=True)
                pids = lids[idx].tolist()
                to_clients.setdefault(c, []).append((b.take(rows), counts, pids))
                res.notifications += len(pids)
        links = bm.links
        for z, encoded in to_brokers.items():
            self.host.send(links[z], Message(MsgType.NOTIFY, {"blocks": encoded}))
        res.events_out += self.forward(src, kind, blocks)
        for c, items in to_clients.items():
            self.host.deliver(links[c], items)
        return res

    def forward(self, src: str, kind: MsgType, blocks: Sequence[Block]) -> int:
        """Protocol-specific forwarding of the events themselves; returns events sent."""
        return 0


class EventFlooding(Routing):
    """EW: profiles stay at the subscriber's broker; every event reaches every broker."""

    name = "flooding"

    def toward(self, profile: Profile) -> Collection[str] | None:
        return ()

    def forward(self, src: str, kind: MsgType, blocks: Sequence[Block]) -> int:
        n = sum(len(b) for b in blocks)
        if kind is not MsgType.PUB or not n:
            return 0
        sent = 0
        body = {"blocks": [encode_block(b) for b in blocks]}
        for z in sorted(self.host.neighbours_up() - {src}):
            self.host.send(z, Message(MsgType.PUB, body))
            sent += n
        return sent


class ProfileForwarding(Routing):
    """PW: profiles spread through the tree (pruned by the strategy); events follow them."""

    name = "forwarding"

    def toward(self, profile: Profile) -> Collection[str] | None:
        return None


class RendezvousNodes(Routing):
    """RK: profiles travel toward their type's rendezvous node; events go there too."""

    name = "rendezvous"

    def toward(self, profile: Profile) -> Collection[str] | None:
        d = self.direction(profile.etype.name)
        return () if d is None else (d,)

    def direction(self, tname: str) -> str | None:
        """The neighbour toward the type's RN, or ``None`` at the RN itself."""
        return self.rendezvous.get(tname)

    def forward(self, src: str, kind: MsgType, blocks: Sequence[Block]) -> int:
        if kind is not MsgType.PUB:
            return 0
        by_dir: dict[str, list[dict[str, Any]]] = defaultdict(list)
        up = self.host.neighbours_up()
        sent = 0
        for b in blocks:
            d = self.direction(b.etype.name)
            if d is not None and d != src and d in up and len(b):
                by_dir[d].append(encode_block(b))
                sent += len(b)
        for d, encoded in by_dir.items():
            self.host.send(d, Message(MsgType.PUB, {"blocks": encoded}))
        return sent


def make_routing(protocol: str, host: RoutingHost, matcher: Matcher, *,
                 strategy: str = "covering", imperfect: bool = False,
                 advertisements: bool = False,
                 rendezvous: dict[str, str | None] | None = None) -> Routing:
    """The routing protocol named in a config (``flooding``, ``forwarding``, ``rendezvous``)."""
    classes: dict[str, type[Routing]] = {
        "flooding": EventFlooding, "forwarding": ProfileForwarding,
        "rendezvous": RendezvousNodes,
    }
    cls = classes.get(protocol)
    if cls is None:
        raise ConfigError(f"unknown protocol {protocol!r}; choose one of "
                          f"{', '.join(PROTOCOLS)}", field="protocol")
    if advertisements and protocol != "forwarding":
        raise ConfigError("advertisements apply to profile forwarding only",
                          field="advertisements")
    return cls(host, matcher, strategy, imperfect=imperfect, advertisements=advertisements,
               rendezvous=rendezvous)


def rendezvous_directions(edges: Iterable[tuple[str, str]], me: str,
                          rn: dict[str, str]) -> dict[str, str | None]:
    """For each type, the neighbour of ``me`` on the tree path to its RN (``None`` at it)."""
    adj: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    # BFS from me: first hop toward every broker
    first: dict[str, str | None] = {me: None}
    frontier = [me]
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(adj[u]):
                if v not in first:
                    first[v] = v if u == me else first[u]
                    nxt.append(v)
        frontier = nxt
    out: dict[str, str | None] = {}
    for tname, node in rn.items():
        if node not in first:
            raise ConfigError(f"rendezvous node {node!r} of {tname} is not reachable from "
                              f"{me}", field=tname)
        out[tname] = first[node]
    return out


__all__ = [
    "PROTOCOLS",
    "STRATEGIES",
    "EventFlooding",
    "ProfileForwarding",
    "RendezvousNodes",
    "Routing",
    "RoutingHost",
    "make_routing",
    "rendezvous_directions",
]
