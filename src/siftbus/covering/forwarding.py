"""THE forwarding algorithm: what each neighbour must hold from us, and what to send it.

A broker holds profiles from its local clients and from neighbour brokers (a profile a
neighbour forwarded is stored as that neighbour's own: Bittner's *transparent*
subscription). :class:`ForwardingTable` keeps them in a covering structure and, for
every neighbour ``Y``, the profiles ``Y`` holds from us. One rule decides them
(Tarkoma §3.3.2; the "cleaner PW rule" of Bittner's report §2.5.2)::

    a filter is forwarded to Y  iff  Y may receive it (protocol, advertisements),
                                     some interface other than Y holds it, and
                                     no filter covering it is held by an interface
                                     other than Y

and of the profiles sharing the filter, ``Y`` holds the oldest one not from ``Y``. So
a filter is never sent back where it came from, nor when a sent one covers it; what ``Y``
holds is out(Y) of :mod:`~siftbus.covering.table`, restricted by the protocol. The
restriction is upward closed (a coverer has the filter's type, and overlaps whatever the
filter overlaps), which is why the covering half of the rule can ignore it.

Every change returns, per neighbour whose view changed, one :class:`Update`. An
unsubscription that removes a covering filter *uncovers* the filters below it: the
update then subscribes those (Tarkoma's piggy-backed subscriptions; Bittner Fig. 5.2).
The receiver applies an update atomically, **subscriptions first** (with FIFO links the
broker sends them first), so no event is lost between the two halves, and each table
mirrors exactly what its neighbours export to it: once every client profile is gone,
every table is empty.

The strategy chooses the structure (``simple``: a node per profile, ``identity``: a node
per filter, ``covering``: the filters poset) and ``merging`` adds
:class:`~siftbus.covering.merging.MergedExport` on top of ``covering``. Advertisements
flood to every neighbour; with ``advertisements=True`` a filter is forwarded only
toward neighbours that advertised an overlapping one.

The broker (:mod:`siftbus.broker.protocols`) turns updates into SUB, UNSUB, ADV and UNADV
messages; the CLI (``siftbus covering forward``) prints them; the tests check them
against out(Y) computed by brute force.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from siftbus.covering.flat import FlatTable
from siftbus.covering.merging import MergedExport
from siftbus.covering.poset import FilterPoset
from siftbus.covering.relations import overlaps
from siftbus.covering.table import CoveringTable, Entry, FilterNode
from siftbus.errors import ConfigError, DuplicateProfileError, UnknownProfileError
from siftbus.model import Profile

STRATEGIES = ("simple", "identity", "covering", "merging")
"""Forwarding strategies: forward every profile, one of equal filters, only what no
forwarded filter covers, and that merged per neighbour."""


@dataclass(frozen=True, slots=True)
class Update:
    """What one neighbour must be told after one change, in this order: advertisements,
    withdrawn advertisements, subscriptions, then unsubscriptions."""

    subscribe: tuple[Profile, ...] = ()
    """Profiles the neighbour must now hold from us."""
    unsubscribe: tuple[Profile, ...] = ()
    """Profiles (as sent earlier) the neighbour must drop."""
    advertise: tuple[Profile, ...] = ()
    """Advertisements (flooded) the neighbour must now hold."""
    unadvertise: tuple[Profile, ...] = ()
    """Advertisements (as sent earlier) the neighbour must drop."""

    def __bool__(self) -> bool:
        return bool(self.subscribe or self.unsubscribe or self.advertise
                    or self.unadvertise)


class _Pending:
    """One neighbour's changes of the current step, in the order they happened."""

    __slots__ = ("adverts", "changes", "unadverts")

    def __init__(self) -> None:
        self.changes: list[tuple[bool, Profile]] = []  # (added, profile)
        self.adverts: list[Profile] = []
        self.unadverts: list[Profile] = []


def structure_for(strategy: str) -> CoveringTable:
    """The covering structure a strategy forwards from."""
    if strategy == "simple":
        return FlatTable(by="id")
    if strategy == "identity":
        return FlatTable(by="filter")
    if strategy in ("covering", "merging"):
        return FilterPoset()
    raise ConfigError(f"unknown strategy {strategy!r}; choose one of "
                      f"{', '.join(STRATEGIES)}", field="strategy")


class ForwardingTable:
    """The profiles a broker holds, and what each neighbour holds from it.

    ``neighbours``: the neighbours to forward to (add and remove them as their links come
    and go). ``strategy``: one of :data:`STRATEGIES`; ``structure`` overrides the
    covering structure of ``covering`` and ``merging`` (a
    :class:`~siftbus.covering.forest.PosetForest`, or a walking variant). ``imperfect``:
    merge into per-attribute hulls. ``toward(profile)``: the neighbours a profile may
    travel toward, ``None`` for every one (rendezvous routing: toward the type's
    rendezvous node). ``name`` prefixes the ids of merged profiles.

    Profiles are added and removed through the table, so that it sees every change;
    read the structure (``structure``), never change it.
    """

    def __init__(self, neighbours: Iterable[str] = (), *, strategy: str = "covering",
                 structure: CoveringTable | None = None, imperfect: bool = False,
                 advertisements: bool = False,
                 toward: Callable[[Profile], Collection[str] | None] | None = None,
                 name: str = "") -> None:
        if structure is None or strategy not in ("covering", "merging"):
            structure = structure_for(strategy)
        self.strategy = strategy
        self.structure: CoveringTable = structure
        self.advertisements = advertisements
        self._toward = toward
        self._merged = MergedExport(name, imperfect=imperfect) \
            if strategy == "merging" else None
        self._held: dict[str, dict[FilterNode, Profile]] = {}
        self._adverts: dict[str, tuple[Profile, str]] = {}
        self._advert_sent: dict[str, set[str]] = {}
        self._pending: dict[str, _Pending] = {}
        for y in neighbours:
            self.add_neighbour(y)

    # ---- queries -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.structure)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self.structure

    @property
    def entries(self) -> Mapping[str, Entry]:
        """Every profile held, by id, oldest first."""
        return self.structure.entries

    @property
    def neighbours(self) -> list[str]:
        return list(self._held)

    def entries_from(self, src: str) -> list[Entry]:
        """The entries ``src`` registered, oldest first."""
        return [e for e in self.structure.entries.values() if e.src == src]

    def adverts_from(self, src: str) -> list[str]:
        """The ids of the advertisements ``src`` made, oldest first."""
        return [aid for aid, (_, s) in self._adverts.items() if s == src]

    @property
    def advert_count(self) -> int:
        return len(self._adverts)

    def exported(self, neighbour: str) -> list[Profile]:
        """What ``neighbour`` holds from us now: one profile per filter of its out(Y),
        oldest filter first (merged profiles with ``merging``)."""
        if self._merged is not None:
            return self._merged.exported(neighbour)
        held = self._held[neighbour]
        return [held[n] for n in sorted(held, key=lambda n: n.seq)]

    def exported_count(self) -> int:
        """Profiles every neighbour together holds from us (after merging)."""
        if self._merged is not None:
            return self._merged.count()
        return sum(len(h) for h in self._held.values())

    @property
    def covering_tests(self) -> int:
        """Covering tests the structure has run (after the index's hull pruning)."""
        return self.structure.comparisons

    # ---- neighbours --------------------------------------------------------------------

    def add_neighbour(self, neighbour: str) -> Update:
        """Start forwarding to a neighbour; returns what it must be sent first: every
        advertisement not from it, and every profile it must hold."""
        if neighbour in self._held:
            return Update()
        self._held[neighbour] = {}
        for aid, (advert, src) in self._adverts.items():
            if src != neighbour:
                self._advert_sent[aid].add(neighbour)
                self._step(neighbour).adverts.append(advert)
        self._resync(neighbour)
        return self._flush().get(neighbour, Update())

    def remove_neighbour(self, neighbour: str) -> None:
        """Forget a neighbour and what it holds from us (the profiles and advertisements
        it sent stay until removed: :meth:`entries_from`, :meth:`adverts_from`)."""
        self._held.pop(neighbour, None)
        self._pending.pop(neighbour, None)
        for sent in self._advert_sent.values():
            sent.discard(neighbour)
        if self._merged is not None:
            self._merged.drop(neighbour)

    # ---- profiles ------------------------------------------------------------------------

    def subscribe(self, profile: Profile, src: str | None = None,
                  local_id: str | None = None) -> dict[str, Update]:
        """Add ``profile`` for ``src`` (default: its owner) and return, per neighbour
        whose view changes, what to send. ``local_id``: the id its subscriber knows."""
        if profile.id in self.structure:
            raise DuplicateProfileError(f"profile {profile.id!r} is already subscribed",
                                        field=profile.id)
        node = self.structure.add(profile, src, local_id)
        # Only neighbours for which the filter is new in scope can see a change.
        fresh = [y for y in self._held
                 if node.in_scope(y) and not node.in_scope(y, without=profile.id)
                 and self._may(node, y)]
        if fresh:
            coverers = self.structure.coverers(node)  # asked once, for all neighbours
            fresh = [y for y in fresh if not any(n.in_scope(y) for n in coverers)]
        if fresh:
            below = self.structure.topmost_below_each(node, fresh)
            for y in fresh:
                held = self._held[y]
                held[node] = rep = node.rep_for(y)
                self._change(y, True, rep)
                for c in below[y]:  # what the new filter covers leaves y
                    old = held.pop(c, None)
                    if old is not None:
                        self._change(y, False, old)
        return self._flush()

    def subscribe_many(self, items: Sequence[tuple[Profile, str | None, str | None]]
                       ) -> list[dict[str, Update]]:
        """:meth:`subscribe` for each ``(profile, src, local_id)``, in order, or none of
        them (a duplicate id raises first); returns each one's updates. With no
        neighbour to tell yet, a poset takes them in one step
        (:meth:`FilterPoset.add_many`): the same table, found with fewer queries."""
        if not self._held and isinstance(self.structure, FilterPoset):
            # add_many refuses a duplicate id (held or repeated) before it changes
            # anything: the one check of this path
            self.structure.add_many(items)
            return [{} for _ in items]
        seen: set[str] = set()
        for profile, _, _ in items:
            if profile.id in self.structure or profile.id in seen:
                raise DuplicateProfileError(f"profile {profile.id!r} is already subscribed",
                                            field=profile.id)
            seen.add(profile.id)
        return [self.subscribe(p, src, local_id) for p, src, local_id in items]

    def unsubscribe(self, profile_id: str, src: str | None = None) -> dict[str, Update]:
        """Remove a profile (registered by ``src``, when given) and return, per
        neighbour whose view changes, what to send: the unsubscription and the filters
        it leaves uncovered."""
        entry = self.structure.entries.get(profile_id)
        if entry is None or (src is not None and entry.src != src):
            where = "" if src is None else f" from {src}"
            raise UnknownProfileError(f"no profile {profile_id!r}{where}", field=profile_id)
        node = self.structure.node_of(profile_id)
        # Collect before the structure changes: the nodes that may surface.
        uncover = self.structure.topmost_below_each(
            node, [y for y, held in self._held.items()
                   if node in held and not node.in_scope(y, without=profile_id)])
        self.structure.remove(profile_id)
        coverers: dict[FilterNode, list[FilterNode]] = {}  # per uncovered candidate
        for y, held in self._held.items():
            sent = held.get(node)
            if sent is None:
                continue
            if y in uncover:
                del held[node]
                self._change(y, False, sent)
                for c in uncover[y]:
                    if c in held or not self._may(c, y):
                        continue
                    if c not in coverers:
                        coverers[c] = self.structure.coverers(c)
                    if not any(n.in_scope(y) for n in coverers[c]):
                        held[c] = rep = c.rep_for(y)
                        self._change(y, True, rep)
            elif sent.id == profile_id:
                # The filter stays, but the profile that stood for it is gone.
                self._change(y, False, sent)
                held[node] = rep = node.rep_for(y)
                self._change(y, True, rep)
        return self._flush()

    # ---- advertisements --------------------------------------------------------------------

    def advertise(self, advert: Profile, src: str) -> dict[str, Update]:
        """Store an advertisement from ``src`` and flood it to every other neighbour;
        profiles may now be forwarded toward ``src``."""
        if advert.id in self._adverts:
            raise DuplicateProfileError(f"advertisement {advert.id!r} exists",
                                        field=advert.id)
        self._adverts[advert.id] = (advert, src)
        sent = self._advert_sent[advert.id] = set()
        for y in self._held:
            if y != src:
                sent.add(y)
                self._step(y).adverts.append(advert)
        if self.advertisements and src in self._held:
            self._resync(src)
        return self._flush()

    def unadvertise(self, advert_id: str, src: str) -> dict[str, Update]:
        """Withdraw an advertisement ``src`` made, wherever it was flooded, and the
        profiles forwarded toward ``src`` only because of it."""
        item = self._adverts.get(advert_id)
        if item is None or item[1] != src:
            raise UnknownProfileError(f"no advertisement {advert_id!r} from {src}",
                                      field=advert_id)
        del self._adverts[advert_id]
        for y in sorted(self._advert_sent.pop(advert_id)):
            self._step(y).unadverts.append(item[0])
        if self.advertisements and src in self._held:
            self._resync(src)
        return self._flush()

    # ---- the rule ----------------------------------------------------------------------------

    def _may(self, node: FilterNode, y: str) -> bool:
        """Whether ``y`` may receive the node's filter at all (protocol, advertisements);
        upward closed: true for a filter, true for every filter covering it."""
        f = node.filter
        if self._toward is not None:
            allowed = self._toward(f)
            if allowed is not None and y not in allowed:
                return False
        if not self.advertisements:
            return True
        return any(src == y and overlaps(a, f) for a, src in self._adverts.values())

    def _resync(self, y: str) -> None:
        """Make what ``y`` holds the rule's answer again, from scratch (a new neighbour,
        or one whose advertisements changed)."""
        held = self._held[y]
        want = {n: None for n in self.structure.forward_nodes(y) if self._may(n, y)}
        for n in [n for n in held if n not in want]:
            self._change(y, False, held.pop(n))
        for n in want:
            if n not in held:
                held[n] = rep = n.rep_for(y)
                self._change(y, True, rep)

    # ---- output of one step --------------------------------------------------------------

    def _step(self, y: str) -> _Pending:
        p = self._pending.get(y)
        if p is None:
            p = self._pending[y] = _Pending()
        return p

    def _change(self, y: str, added: bool, profile: Profile) -> None:
        self._step(y).changes.append((added, profile))

    def _flush(self) -> dict[str, Update]:
        pending, self._pending = self._pending, {}
        merged: dict[str, tuple[list[Profile], list[Profile]]] = {}
        if self._merged is not None:
            m = self._merged
            for y, p in pending.items():
                for added, profile in p.changes:
                    (m.add if added else m.remove)(y, profile)
            merged = m.flush()
        out: dict[str, Update] = {}
        for y, p in pending.items():
            if self._merged is not None:
                subs, unsubs = merged.get(y, ((), ()))
            else:
                subs = [q for added, q in p.changes if added]
                unsubs = [q for added, q in p.changes if not added]
            u = Update(tuple(subs), tuple(unsubs), tuple(p.adverts), tuple(p.unadverts))
            if u:
                out[y] = u
        return out


__all__ = ["STRATEGIES", "ForwardingTable", "Update", "structure_for"]
