"""Routing protocols: event flooding (EW), profile forwarding (PW), rendezvous nodes (RK).

All three share one profile table per broker (:class:`RoutingTable`): entries
``(gid, profile, source)`` where the source is a local client or the neighbour broker that
forwarded the profile as its own (a *transparent* subscription, as in Bittner's DAS). The
protocols differ in where a profile is forwarded and how an event travels:

* EW never forwards profiles; every event is flooded over the tree and filtered for
  local clients at every broker.
* PW forwards profiles through the tree, pruned by the strategy (``simple``,
  ``identity``, ``covering``, ``merging``); events travel only toward brokers with
  matching interest, once per link, never back to their sender.
* RK forwards profiles only toward the rendezvous node of their type; events travel to
  it and are filtered on the way.

Forwarding follows one invariant, evaluated per entry (Bittner's proposal in
``bittner-report.md`` §2.5.2, which closes the gaps of the thesis's |N| = 1 rule)::

    p is forwarded to neighbour z  iff  z is a candidate for p (protocol) and no other
    entry q with source(q) != z dominates p

where *q dominates p* means q covers p and, when they are equivalent, q was stored
first. Every change re-evaluates exactly the entries whose dominators changed; the
resulting SUBs on a link are always sent before its UNSUBs, so with FIFO links a
re-exposed (previously covered) profile is installed before its coverer leaves and
nothing is lost. A broker's table therefore mirrors exactly what its neighbours export
to it, which is why the table is empty once every client profile is gone.
"""

from __future__ import annotations

import abc
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import covers, merge, overlaps
from siftbus.errors import ConfigError, DuplicateProfileError, UnknownProfileError
from siftbus.match.base import Matcher
from siftbus.model import IntervalSet, Profile
from siftbus.wire.events import Block, encode_block
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.profiles import encode_profile

PROTOCOLS = ("flooding", "forwarding", "rendezvous")
"""Protocol names accepted in the network config."""

STRATEGIES = ("simple", "identity", "covering", "merging")
"""Profile-forwarding strategies (PW and, for the path to the RN, RK)."""


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


@dataclass(slots=True)
class Entry:
    """One row of a broker's profile table."""

    profile: Profile
    src: str
    """The link it came from: a neighbour broker or a local client."""
    seq: int
    """Insertion order; among equivalent profiles the earliest one dominates."""
    local_id: str
    """The id the client knows (for client entries), else the gid."""
    from_broker: bool
    """Whether ``src`` is a neighbour broker (else a local client)."""
    fwd: set[str] = field(default_factory=set)
    """Neighbours the entry is currently exported to."""

    @property
    def gid(self) -> str:
        return self.profile.id


@dataclass(slots=True)
class _Group:
    """Exported profiles merged into one (merging strategy), per neighbour."""

    key: tuple[Any, ...] | None
    members: dict[str, Profile]
    exported: Profile | None = None


class RoutingTable:
    """The profile table of one broker with its forwarding state (shared by protocols)."""

    def __init__(self, host: RoutingHost, matcher: Matcher, strategy: str,
                 candidates: Callable[[Entry], set[str]], *, imperfect: bool = False,
                 advertisements: bool = False) -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {strategy!r}; choose one of "
                              f"{', '.join(STRATEGIES)}", field="strategy")
        self.host = host
        self.matcher = matcher
        self.strategy = strategy
        self.imperfect = imperfect
        self.advertisements = advertisements
        self._candidates = candidates
        self.entries: dict[str, Entry] = {}
        self._seq = itertools.count()
        self._by_key: dict[tuple[Any, ...], set[str]] = defaultdict(set)
        #: covering queries (hull pruning, then exact tests) for the covering strategies
        self.covering_index = CoveringIndex()
        self._adverts: dict[str, tuple[Profile, str]] = {}
        self._adv_fwd: dict[str, set[str]] = {}
        # pending output of the current atomic step, per neighbour
        self._subs: dict[str, list[Profile]] = defaultdict(list)
        self._unsubs: dict[str, list[str]] = defaultdict(list)
        # merging state per neighbour
        self._groups: dict[str, dict[int, _Group]] = defaultdict(dict)
        self._group_of: dict[str, dict[str, int]] = defaultdict(dict)
        self._group_keys: dict[str, dict[tuple[Any, ...], int]] = defaultdict(dict)
        self._touched: dict[str, dict[int, Profile | None]] = defaultdict(dict)
        self._group_ids = itertools.count()
        self._merge_ids = itertools.count()

    # ---- queries -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.entries)

    def _ahead(self, q: Entry, p: Entry) -> bool:
        """Given q covers p: q dominates p unless they are equivalent and p came first."""
        return q.seq < p.seq or not covers(p.profile, q.profile)

    def dominators(self, e: Entry) -> list[Entry]:
        """Entries that make forwarding ``e`` unnecessary, per the strategy."""
        if self.strategy == "simple":
            return []
        if self.strategy == "identity":
            return [q for gid in self._by_key.get(e.profile.filter_key, ())
                    if (q := self.entries[gid]).seq < e.seq]
        out = []
        for qp in self.covering_index.covering(e.profile):
            q = self.entries[qp.id]
            if self._ahead(q, e):
                out.append(q)
        return out

    def dominated(self, e: Entry) -> list[Entry]:
        """Entries that ``e`` dominates (whose forwarding may depend on ``e``)."""
        if self.strategy == "simple":
            return []
        if self.strategy == "identity":
            return [q for gid in self._by_key.get(e.profile.filter_key, ())
                    if (q := self.entries[gid]).seq > e.seq]
        out = []
        for qp in self.covering_index.covered(e.profile):
            q = self.entries[qp.id]
            if self._ahead(e, q):
                out.append(q)
        return out

    def allowed(self, z: str, p: Profile) -> bool:
        """Advertisement mode: only toward neighbours that advertised overlapping events."""
        if not self.advertisements:
            return True
        return any(src == z and overlaps(a, p) for a, src in self._adverts.values())

    def targets(self, e: Entry) -> set[str]:
        """The neighbours ``e`` must be forwarded to (the invariant in the module doc)."""
        cand = {z for z in self._candidates(e) if self.allowed(z, e.profile)}
        if not cand:
            return cand
        dom = self.dominators(e)
        if not dom:
            return cand
        srcs = {q.src for q in dom}
        return cand & srcs if len(srcs) == 1 else set()

    # ---- index maintenance -------------------------------------------------------------

    def _index(self, e: Entry) -> None:
        p = e.profile
        self.entries[e.gid] = e
        self.matcher.add(p)
        self._by_key[p.filter_key].add(e.gid)
        if self.strategy in ("covering", "merging"):
            self.covering_index.add(p)

    def _unindex(self, e: Entry) -> None:
        p = e.profile
        del self.entries[e.gid]
        self.matcher.remove(e.gid)
        keyset = self._by_key[p.filter_key]
        keyset.discard(e.gid)
        if not keyset:
            del self._by_key[p.filter_key]
        if self.strategy in ("covering", "merging"):
            self.covering_index.remove(e.gid)

    # ---- table operations (one atomic step each) ------------------------------------------

    def add(self, src: str, profile: Profile, local_id: str | None = None) -> Entry:
        """Store ``profile`` (its id is the network-wide gid) from ``src`` and forward."""
        if profile.id in self.entries:
            raise DuplicateProfileError(f"profile {profile.id!r} is already subscribed",
                                        field=profile.id)
        e = Entry(profile, src, next(self._seq), local_id or profile.id,
                  self.host.is_broker(src))
        self._index(e)
        self._reconcile(e)
        for q in self.dominated(e):
            self._reconcile(q)
        self.flush()
        return e

    def remove(self, src: str, gid: str) -> Entry:
        """Remove the entry ``gid`` that ``src`` stored; re-expose what it covered."""
        e = self.entries.get(gid)
        if e is None or e.src != src:
            raise UnknownProfileError(f"no profile {gid!r} from {src}", field=gid)
        affected = self.dominated(e)
        self._unindex(e)
        for z in sorted(e.fwd):
            self._export_remove(z, e)
        e.fwd.clear()
        for q in affected:
            self._reconcile(q)
        self.flush()
        return e

    def remove_source(self, src: str) -> list[Entry]:
        """Remove every entry from ``src`` (a client that left, a neighbour that failed)."""
        gone = [e for e in self.entries.values() if e.src == src]
        for e in gone:
            self.remove(src, e.gid)
        return gone

    def neighbour_up(self, z: str) -> None:
        """Export to a neighbour that just connected whatever it needs."""
        for gid in list(self._adverts):
            self._advert_targets(gid)
        for e in list(self.entries.values()):
            self._reconcile(e)
        self.flush()

    def neighbour_down(self, z: str) -> None:
        """Forget what ``z`` exported to us and what we exported to it."""
        for gid, (_, src) in list(self._adverts.items()):
            if src == z:
                self.unadvertise(z, gid)
        self.remove_source(z)
        for e in self.entries.values():
            e.fwd.discard(z)
        for s in self._adv_fwd.values():
            s.discard(z)
        self._groups.pop(z, None)
        self._group_of.pop(z, None)
        self._group_keys.pop(z, None)
        self._subs.pop(z, None)
        self._unsubs.pop(z, None)
        self._touched.pop(z, None)
        self.flush()

    def _reconcile(self, e: Entry) -> None:
        want = self.targets(e)
        for z in sorted(want - e.fwd):
            self._export_add(z, e)
        for z in sorted(e.fwd - want):
            self._export_remove(z, e)
        e.fwd = want

    # ---- advertisements ----------------------------------------------------------------------

    def advertise(self, src: str, advert: Profile) -> None:
        """Store an advertisement and flood it; subscriptions may now flow toward ``src``."""
        if advert.id in self._adverts:
            raise DuplicateProfileError(f"advertisement {advert.id!r} exists", field=advert.id)
        self._adverts[advert.id] = (advert, src)
        self._adv_fwd[advert.id] = set()
        self._advert_targets(advert.id)
        if self.host.is_broker(src):
            for e in list(self.entries.values()):
                if e.src != src and overlaps(advert, e.profile):
                    self._reconcile(e)
        self.flush()

    def unadvertise(self, src: str, gid: str) -> None:
        item = self._adverts.get(gid)
        if item is None or item[1] != src:
            raise UnknownProfileError(f"no advertisement {gid!r} from {src}", field=gid)
        advert = item[0]
        del self._adverts[gid]
        for z in sorted(self._adv_fwd.pop(gid)):
            self.host.send(z, Message(MsgType.UNADV, {"ids": [gid]}))
        if self.host.is_broker(src):
            for e in list(self.entries.values()):
                if src in e.fwd and overlaps(advert, e.profile):
                    self._reconcile(e)
        self.flush()

    def _advert_targets(self, gid: str) -> None:
        advert, src = self._adverts[gid]
        sent = self._adv_fwd[gid]
        for z in sorted(self.host.neighbours_up() - {src} - sent):
            self.host.send(z, Message(MsgType.ADV, {"adverts": [encode_profile(advert)]}))
            sent.add(z)

    @property
    def advert_count(self) -> int:
        return len(self._adverts)

    # ---- export layer (plain or merging) ----------------------------------------------------

    def _export_add(self, z: str, e: Entry) -> None:
        if self.strategy != "merging":
            self._subs[z].append(e.profile)
            return
        gid_of = self._group_of[z]
        groups = self._groups[z]
        keys = self._merge_keys(e.profile)
        target: int | None = None
        for k in keys:
            gi = self._group_keys[z].get(k)
            if gi is not None:
                target = gi
                break
        if target is None:
            target = next(self._group_ids)
            groups[target] = _Group(None, {})
            for k in keys:  # a singleton can pair along any of its keys
                self._group_keys[z].setdefault(k, target)
        g = groups[target]
        self._touch(z, target)
        if g.key is None and g.members:
            # second member: fix the group to the key both share, drop the other keys
            shared = next(k for k in keys if self._group_keys[z].get(k) == target)
            first = next(iter(g.members.values()))
            for k in self._merge_keys(first):
                if self._group_keys[z].get(k) == target and k != shared:
                    del self._group_keys[z][k]
            g.key = shared
        g.members[e.gid] = e.profile
        gid_of[e.gid] = target

    def _export_remove(self, z: str, e: Entry) -> None:
        if self.strategy != "merging":
            self._unsubs[z].append(e.gid)
            return
        target = self._group_of[z].pop(e.gid)
        g = self._groups[z][target]
        self._touch(z, target)
        del g.members[e.gid]
        if not g.members:  # the group is gone: forget every key that leads to it
            gk = self._group_keys[z]
            for k in ([g.key] if g.key is not None else self._merge_keys(e.profile)):
                if gk.get(k) == target:
                    del gk[k]

    def _touch(self, z: str, gi: int) -> None:
        touched = self._touched[z]
        if gi not in touched:
            touched[gi] = self._groups[z][gi].exported

    def _merge_keys(self, p: Profile) -> list[tuple[Any, ...]]:
        """Profiles sharing a key differ only on that key's attribute (imperfect: any
        profile of the type with the same constrained attributes)."""
        if self.imperfect:
            return [(p.etype.name, tuple(c.position for c in p.conditions))]
        keys: list[tuple[Any, ...]] = []
        for i, c in enumerate(p.conditions):
            if isinstance(c.constraint, IntervalSet):  # unions of intervals are exact
                rest = p.conditions[:i] + p.conditions[i + 1:]
                keys.append((p.etype.name, c.position, rest))
        return keys or [(p.etype.name, "solo", p.id)]

    def _merged(self, g: _Group) -> Profile:
        members = list(g.members.values())
        if len(members) == 1:
            return members[0]
        acc = members[0]
        for q in members[1:]:
            m = merge(acc, q, imperfect=True, id="m", subscriber="")  # exact on shared keys
            assert m is not None  # same type: the imperfect merge always exists
            acc = m
        return acc.with_id(f"{self.host.name}/_m/{next(self._merge_ids)}", "")

    def flush(self) -> None:
        """Send the pending SUBs (first) and UNSUBs of this atomic step, per neighbour."""
        if self.strategy == "merging":
            for z, touched in self._touched.items():
                groups = self._groups[z]
                for gi, old in touched.items():
                    g = groups[gi]
                    new: Profile | None = None
                    if g.members:
                        same = (old is not None and len(g.members) == 1
                                and old.id in g.members)
                        new = old if same else self._merged(g)
                    else:
                        del groups[gi]
                    g.exported = new
                    if new is not old:
                        if new is not None:
                            self._subs[z].append(new)
                        if old is not None:
                            self._unsubs[z].append(old.id)
            self._touched.clear()
        for z, profiles in self._subs.items():
            if profiles:
                self.host.send(z, Message(MsgType.SUB, {
                    "profiles": [encode_profile(p) for p in profiles]}))
        for z, ids in self._unsubs.items():
            if ids:
                self.host.send(z, Message(MsgType.UNSUB, {"ids": ids}))
        self._subs.clear()
        self._unsubs.clear()

    @property
    def covering_tests(self) -> int:
        """Exact covering tests made while forwarding (after hull pruning)."""
        return self.covering_index.exact_tests

    def exported_count(self) -> int:
        """Profiles this broker currently holds at its neighbours (after merging)."""
        if self.strategy == "merging":
            return sum(len(gs) for gs in self._groups.values())
        return sum(len(e.fwd) for e in self.entries.values())


# ---------------------------------------------------------------------------------------------
# Event routing


@dataclass(slots=True)
class RouteResult:
    """Counts of one routing step (for instrumentation)."""

    filtered: int = 0
    matches: int = 0
    events_out: int = 0
    notifications: int = 0


class BatchMatch:
    """Matches whole event blocks against a routing table, without per-event objects.

    With the interval index it matches a block's columns on the matcher's immutable
    snapshot (one kernel call, a CSR result) and maps the snapshot's dense profile
    indices to links and client ids through arrays built once per snapshot. Compiling a
    snapshot costs about as much as matching thousands of events one level at a time, so
    after a table change the levelled ``match_batch`` serves until the events matched
    at the new version would have paid for a recompilation (a ski-rental rule: a table
    that changes constantly never pays for more than one compile per that many events).
    Other engines always take ``match_batch``. Both paths give the same matches.
    """

    def __init__(self, table: RoutingTable) -> None:
        self.table = table
        self.links: list[str] = []
        self.codes: dict[str, int] = {}
        self.is_broker = np.zeros(0, bool)
        self._snap: Any = None
        self._dense_link = np.zeros(0, np.int32)
        self._dense_lid = np.zeros(0, object)
        self._stale_version = -1
        self._stale_events = 0
        self.policy = "auto"
        """``auto`` (the rule above), ``snapshot`` or ``levels`` (always that path)."""

    def code(self, link: str) -> int:
        """A small integer for a link (stable for the broker's life)."""
        c = self.codes.get(link)
        if c is None:
            c = self.codes[link] = len(self.links)
            self.links.append(link)
            self.is_broker = np.append(self.is_broker, self.table.host.is_broker(link))
        return c

    def prepare(self) -> bool:
        """Compile the snapshot of the current table now (e.g. while idle, or before a
        measurement); ``False`` when the engine has none or the policy is ``levels``."""
        return self._snapshot(0, force=True) is not None

    def _snapshot(self, n_events: int, force: bool = False) -> Any:
        m = self.table.matcher
        snapshot = getattr(m, "snapshot", None)
        if snapshot is None or self.policy == "levels":
            return None
        version = m.version  # type: ignore[attr-defined]
        snap = self._snap
        if snap is not None and snap.version == version:
            return snap
        if version != self._stale_version:
            self._stale_version = version
            self._stale_events = 0
        if (self.policy == "auto" and not force
                and self._stale_events < max(256, len(self.table) // 2)):
            self._stale_events += n_events
            return None
        snap = snapshot()
        entries = self.table.entries
        code = self.code
        es = [entries[gid] for gid in snap.profile_ids.tolist()]
        self._dense_link = np.array([code(e.src) for e in es], np.int32)
        self._dense_lid = np.empty(len(es), object)
        self._dense_lid[:] = [e.local_id for e in es]
        self._snap = snap
        return snap

    def match(self, block: Block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR offsets over the block's rows, and per match its link code and the id
        its subscriber knows (in plain string order of the gids within a row)."""
        snap = self._snapshot(len(block))
        if snap is not None:
            csr = snap.match_columns(block.etype.name, block.columns())
            return csr.offsets, self._dense_link[csr.profiles], self._dense_lid[csr.profiles]
        entries = self.table.entries
        code = self.code
        results = self.table.matcher.match_batch(block.events())
        offsets = np.zeros(len(results) + 1, np.int64)
        np.cumsum([len(r) for r in results], out=offsets[1:])
        es = [entries[gid] for r in results for gid in r]
        lids = np.empty(len(es), object)
        lids[:] = [e.local_id for e in es]
        return offsets, np.array([code(e.src) for e in es], np.int32), lids


class Routing(abc.ABC):
    """Base of the three protocols: a table plus how events travel."""

    name = ""

    def __init__(self, host: RoutingHost, matcher: Matcher, strategy: str = "covering", *,
                 imperfect: bool = False, advertisements: bool = False,
                 rendezvous: dict[str, str | None] | None = None) -> None:
        self.host = host
        self.rendezvous = rendezvous or {}
        self.table = RoutingTable(host, matcher, strategy, self.candidates,
                                  imperfect=imperfect, advertisements=advertisements)
        self.batch_match = BatchMatch(self.table)

    @abc.abstractmethod
    def candidates(self, e: Entry) -> set[str]:
        """Neighbours a profile may be forwarded to (before covering)."""

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

    def candidates(self, e: Entry) -> set[str]:
        return set()

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

    def candidates(self, e: Entry) -> set[str]:
        return set(self.host.neighbours_up() - {e.src})


class RendezvousNodes(Routing):
    """RK: profiles travel toward their type's rendezvous node; events go there too."""

    name = "rendezvous"

    def candidates(self, e: Entry) -> set[str]:
        d = self.direction(e.profile.etype.name)
        if d is None or d == e.src or d not in self.host.neighbours_up():
            return set()
        return {d}

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
    "BatchMatch",
    "Entry",
    "EventFlooding",
    "ProfileForwarding",
    "RendezvousNodes",
    "RouteResult",
    "Routing",
    "RoutingHost",
    "RoutingTable",
    "make_routing",
    "rendezvous_directions",
]
