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
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from siftbus.covering.forwarding import STRATEGIES, ForwardingTable, Update
from siftbus.covering.table import Entry
from siftbus.errors import ConfigError
from siftbus.match.base import Matcher
from siftbus.model import IntervalSet, Profile
from siftbus.wire.events import Block, encode_block
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.profiles import encode_profile

from .matching import BatchMatch, RouteResult

PROTOCOLS = ("flooding", "forwarding", "rendezvous")
"""Protocol names accepted in the network config."""

SESSION_GID = "~"
"""How the gids of session profiles begin (``sessions.SESSION_PREFIX``: sessions sit
above this module)."""


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
        self.session_epoch: Callable[[str], int | None] = _no_epoch
        """The newest attachment of a session this broker knows (set by the handoff
        protocol): stamped on SUB and UNSUB of session gids (``se``), so a receiver that
        knows a newer one can tell a stale view from a current one."""
        self.transitional: dict[tuple[str, str], list[Profile]] = {}
        """Extra routes kept while a session handoff moves profiles (:mod:`.handoff`):
        ``(session, link) -> profiles`` whose events still go to ``link`` (the way they
        went before), outside the table and its exports; see :meth:`keep_route`."""

    @abc.abstractmethod
    def toward(self, profile: Profile) -> Collection[str] | None:
        """Neighbours a profile may be forwarded to (``None``: any neighbour)."""

    # ---- table changes (one atomic step each) ------------------------------------------------

    def subscribe(self, src: str, profile: Profile, local_id: str | None = None) -> None:
        """Store ``profile`` (its id is the network-wide gid) from ``src`` and forward it."""
        updates = self.table.subscribe(profile, src, local_id)
        self.matcher.add(profile)
        self._send(updates)

    def subscribe_many(self, src: str, items: Sequence[tuple[Profile, str]]) -> None:
        """:meth:`subscribe` for each ``(profile, local_id)``, or none (a duplicate id
        raises first); a client's whole SUB frame in one table step when it can."""
        self.subscribe_from([(p, src, lid) for p, lid in items])

    def subscribe_from(self, items: Sequence[tuple[Profile, str, str]]) -> None:
        """:meth:`subscribe` for each ``(profile, src, local_id)``, or none, from several
        sources in one table step when it can (a restart restoring its stored profiles)."""
        updates = self.table.subscribe_many(items)
        for p, _, _ in items:
            self.matcher.add(p)
        for step in updates:
            self._send(step)

    def unsubscribe(self, src: str, gid: str) -> None:
        """Remove the profile ``gid`` that ``src`` stored; re-expose what it covered."""
        updates = self.table.unsubscribe(gid, src)
        self.matcher.remove(gid)
        self._send(updates)

    def neighbour_subscribe(self, z: str, profile: Profile) -> None:
        """A neighbour's SUB. A session's profile keeps its gid while the session moves
        (:mod:`.handoff_paths`), and where it lies is decided by the handoff's moves,
        which carry the session's epoch: a plain SUB of a session gid held here already
        comes from a neighbour whose view a move will correct (it uncovered the profile
        before it heard of the move), so it is left out -- never an error that would
        drop the rest of the message."""
        if profile.id.startswith(SESSION_GID) and profile.id in self.table:
            return
        self.subscribe(z, profile)

    def neighbour_unsubscribe(self, z: str, gid: str) -> None:
        """A neighbour's UNSUB; one of a session gid that ``z`` does not give us (a move
        already redirected it, see :meth:`neighbour_subscribe`) is left out."""
        if gid.startswith(SESSION_GID):
            e = self.table.entries.get(gid)
            if e is None or e.src != z:
                return
        self.unsubscribe(z, gid)

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

    def relocate(self, src: str, items: Sequence[tuple[Profile, str | None, bool]]
                 ) -> dict[str, Update]:
        """Make each profile (by gid) come from ``src`` (``keep``) or go (not ``keep``),
        in one step: the session handoff's primitive (:mod:`.handoff`). Returns the net
        change of what each neighbour must hold, **not sent**: a gid leaving and coming
        back in the step cancels out, so neighbours that hold it before and after are
        told nothing. ``items``: ``(profile, local_id, keep)``."""
        steps: list[dict[str, Update]] = []
        table = self.table
        for profile, local_id, keep in items:
            gid = profile.id
            e = table.entries.get(gid)
            if e is not None:
                if keep and e.src == src:
                    continue
                steps.append(table.unsubscribe(gid, e.src))
                self.matcher.remove(gid)
            if keep:
                steps.append(table.subscribe(profile, src, local_id))
                self.matcher.add(profile)
        return net_updates(steps)

    def keep_route(self, key: str, link: str, profile: Profile) -> None:
        """Keep sending events that match ``profile`` to ``link`` until
        :meth:`drop_routes` (a handoff redirected ``profile`` away from ``link``, but
        profiles it covered beyond ``link`` have not been uncovered toward us yet)."""
        self.transitional.setdefault((key, link), []).append(profile)

    def drop_routes(self, key: str, link: str | None = None) -> None:
        """Forget the routes kept for ``key`` toward ``link`` (every link: ``None``)."""
        for k in [k for k in self.transitional if k[0] == key and link in (None, k[1])]:
            del self.transitional[k]

    def send_updates(self, updates: dict[str, Update]) -> None:
        """Send updates computed elsewhere (e.g. by :meth:`relocate`)."""
        self._send(updates)

    def update_messages(self, updates: dict[str, Update]
                        ) -> tuple[list[tuple[str, Message]], list[tuple[str, Message]]]:
        """The messages of one step: first ADV, UNADV and SUB per link, then UNSUB."""
        first: list[tuple[str, Message]] = []
        last: list[tuple[str, Message]] = []
        for z, u in updates.items():
            for a in u.advertise:
                first.append((z, Message(MsgType.ADV, {"adverts": [encode_profile(a)]})))
            for a in u.unadvertise:
                first.append((z, Message(MsgType.UNADV, {"ids": [a.id]})))
            if u.subscribe:
                body: dict[str, Any] = {"profiles": [encode_profile(p) for p in u.subscribe]}
                self._stamp(body, u.subscribe)
                first.append((z, Message(MsgType.SUB, body)))
            if u.unsubscribe:
                body = {"ids": [p.id for p in u.unsubscribe]}
                self._stamp(body, u.unsubscribe)
                last.append((z, Message(MsgType.UNSUB, body)))
        return first, last

    def _stamp(self, body: dict[str, Any], profiles: Sequence[Profile]) -> None:
        """Add the epochs of the sessions whose profiles ``body`` names (``se``)."""
        se: dict[str, int] = {}
        for p in profiles:
            sid = gid_session(p.id)
            if sid is not None and sid not in se:
                e = self.session_epoch(sid)
                if e is not None:
                    se[sid] = e
        if se:
            body["se"] = se

    def _send(self, updates: dict[str, Update]) -> None:
        """One step's messages, per link: ADV and UNADV (one per advertisement), then
        SUB, then UNSUB."""
        send = self.host.send
        first, last = self.update_messages(updates)
        for z, msg in first:
            send(z, msg)
        for z, msg in last:
            send(z, msg)

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
        matched: list[Block] = []
        for b in blocks:
            offsets, lk, lids = bm.match(b)
            if not len(lk):
                continue
            matched.append(b)
            res.matches += len(lk)
            ev = np.repeat(np.arange(len(b)), np.diff(offsets))
            isb = bm.is_broker[lk]
            if isb.any() or self.transitional:
                by_z: dict[int, np.ndarray] = {}
                if isb.any():
                    blk, bev = lk[isb], ev[isb]
                    by_z = {z: np.unique(bev[blk == z]) for z in np.unique(blk).tolist()}
                if self.transitional:
                    self._kept_routes(b, by_z)
                for z, rows in by_z.items():
                    if z == src_code or not len(rows):
                        continue  # never back to the sender
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
        if self.transitional:
            for b in blocks:  # blocks nothing in the table matched
                if not any(b is x for x in matched):
                    by_z = {}
                    self._kept_routes(b, by_z)
                    for z, rows in by_z.items():
                        if z != src_code and len(rows):
                            self.host.send(links[z], Message(MsgType.NOTIFY, {
                                "blocks": [encode_block(b.take(rows))]}))
                            res.events_out += len(rows)
        res.events_out += self.forward(src, kind, blocks)
        for c, items in to_clients.items():
            self.host.deliver(links[c], items)
        return res

    def forward(self, src: str, kind: MsgType, blocks: Sequence[Block]) -> int:
        """Protocol-specific forwarding of the events themselves; returns events sent."""
        return 0

    def _kept_routes(self, b: Block, by_z: dict[int, np.ndarray]) -> None:
        """Add the rows of ``b`` that routes kept by :meth:`keep_route` send on."""
        code = self.batch_match.code
        for (_, link), profiles in self.transitional.items():
            if link not in self.host.neighbours_up():
                continue
            mask = np.zeros(len(b), bool)
            for p in profiles:
                if p.etype.name == b.etype.name:
                    mask |= profile_rows(p, b)
            if mask.any():
                z = code(link)
                rows = np.flatnonzero(mask)
                by_z[z] = np.union1d(by_z[z], rows) if z in by_z else rows


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


def profile_rows(p: Profile, b: Block) -> np.ndarray:
    """Which rows of a block ``p`` matches (vectorised on ordered attributes)."""
    if p.extended:  # checks, absent values, arrays: the reference semantics, row by row
        return np.fromiter((p.matches(e) for e in b.events()), bool, len(b))
    mask = np.ones(len(b), bool)
    for c in p.conditions:
        col = b.keys[:, c.position]
        cons = c.constraint
        if isinstance(cons, IntervalSet):
            col = col.astype(np.int64) if col.dtype == object else col
            hit = np.zeros(len(b), bool)
            for lo, hi in cons.intervals:
                hit |= (col >= lo) & (col <= hi)
            mask &= hit
        else:
            mask &= np.fromiter((k in cons for k in col.tolist()), bool, len(b))
    return mask


def gid_session(gid: str) -> str | None:
    """The session whose profile ``gid`` is (``~id/tag/pid``), else ``None``."""
    if not gid.startswith(SESSION_GID):
        return None
    return gid[1:].split("/", 1)[0]


def _no_epoch(sid: str) -> int | None:
    return None


def net_updates(steps: Sequence[dict[str, Update]]) -> dict[str, Update]:
    """The net effect of consecutive updates per neighbour: a profile unsubscribed and
    subscribed again (or the reverse) within them is left out."""
    out: dict[str, Update] = {}
    for z in dict.fromkeys(z for st in steps for z in st):  # first-seen order
        net: dict[str, tuple[bool, Profile]] = {}
        adv: list[Profile] = []
        unadv: list[Profile] = []
        for st in steps:
            u = st.get(z)
            if u is None:
                continue
            adv += u.advertise
            unadv += u.unadvertise
            for p in u.subscribe:
                prev = net.get(p.id)
                if prev is not None and not prev[0] and prev[1] == p:
                    del net[p.id]  # it held p before and holds it after
                else:
                    net[p.id] = (True, p)
            for p in u.unsubscribe:
                prev = net.get(p.id)
                if prev is not None and prev[0]:
                    del net[p.id]  # it did not hold p before and does not after
                else:
                    net[p.id] = (False, p)
        u = Update(tuple(p for added, p in net.values() if added),
                   tuple(p for added, p in net.values() if not added),
                   tuple(adv), tuple(unadv))
        if u:
            out[z] = u
    return out


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
    "gid_session",
    "make_routing",
    "net_updates",
    "rendezvous_directions",
]
