"""Per-neighbour forwarding on top of a covering table: what to send after each change.

A broker holds profiles from its local clients and from neighbour brokers. Neighbour
``Y`` must hold out(Y), the minimal cover of the filters held by some interface other
than ``Y`` (never echo a filter back where it came from; never send a filter a sent one
already covers). :class:`Forwarder` remembers what each neighbour was sent and, on every
subscribe/unsubscribe, returns the difference as one :class:`Update` per neighbour.

An unsubscription that removes a covering filter *uncovers* the filters below it: the
update then subscribes those (Tarkoma's piggy-backed subscriptions; Bittner Fig. 5.2).
The receiver applies an update atomically, **subscriptions first**, so no event is lost
between the two halves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from siftbus.covering.table import CoveringTable, FilterNode, in_scope
from siftbus.model import Profile


@dataclass(frozen=True, slots=True)
class Update:
    """What one neighbour must be told after one change; apply subscriptions first."""

    subscribe: tuple[Profile, ...] = ()
    """Profiles the neighbour must now hold from us."""
    unsubscribe: tuple[Profile, ...] = ()
    """Profiles (as sent earlier) the neighbour must drop."""

    def __bool__(self) -> bool:
        return bool(self.subscribe or self.unsubscribe)


class _Pending:
    __slots__ = ("subs", "unsubs")

    def __init__(self) -> None:
        self.subs: list[Profile] = []
        self.unsubs: list[Profile] = []


class Forwarder:
    """Tracks what each neighbour holds from us and computes the updates to send.

    ``table`` is a :class:`~siftbus.covering.poset.FilterPoset` or
    :class:`~siftbus.covering.forest.PosetForest`; profiles must be added and removed
    through the forwarder so that it sees every change. For hierarchical routing use one
    neighbour, the parent broker.
    """

    def __init__(self, table: CoveringTable, neighbours: Iterable[str] = ()) -> None:
        self.table = table
        self._exported: dict[str, dict[FilterNode, Profile]] = {}
        for y in neighbours:
            self.add_neighbour(y)

    @property
    def neighbours(self) -> list[str]:
        return list(self._exported)

    def exported(self, neighbour: str) -> list[Profile]:
        """What ``neighbour`` holds from us now, one profile per filter, oldest first."""
        held = self._exported[neighbour]
        return [held[n] for n in sorted(held, key=lambda n: n.seq)]

    def add_neighbour(self, neighbour: str) -> Update:
        """Start forwarding to a new neighbour; returns what it must be sent first."""
        if neighbour in self._exported:
            return Update()
        nodes = self.table.forward_nodes(neighbour)
        self._exported[neighbour] = {n: n.rep_for(neighbour) for n in nodes}
        return Update(tuple(self._exported[neighbour].values()))

    def remove_neighbour(self, neighbour: str) -> None:
        """Forget a neighbour (its own profiles stay in the table until removed)."""
        self._exported.pop(neighbour, None)

    def subscribe(self, profile: Profile, iface: str | None = None) -> dict[str, Update]:
        """Add ``profile`` for ``iface`` (default: its owner) and return, per neighbour
        whose view changes, what to send."""
        node = self.table.add(profile, iface)
        holder = self.table.iface_of(profile.id)
        before = dict(node.ifaces)
        if before[holder] == 1:
            del before[holder]
        else:
            before[holder] -= 1
        out: dict[str, Update] = {}
        fresh = [y for y in self._exported if not in_scope(before, y) and node.in_scope(y)]
        if not fresh:
            return out  # already forwarded or covered as before, or for no neighbour
        coverers = self.table.coverers(node)  # asked once, for all neighbours
        fresh = [y for y in fresh if not any(n.in_scope(y) for n in coverers)]
        below = self.table.topmost_below_each(node, fresh) if fresh else {}
        for y in fresh:
            held = self._exported[y]
            pend = _Pending()
            rep = node.rep_for(y)
            held[node] = rep
            pend.subs.append(rep)
            for c in below[y]:
                old = held.pop(c, None)
                if old is not None:
                    pend.unsubs.append(old)
            out[y] = Update(tuple(pend.subs), tuple(pend.unsubs))
        return out

    def unsubscribe(self, profile_id: str) -> dict[str, Update]:
        """Remove a profile and return, per neighbour whose view changes, what to send:
        the unsubscription and the filters it leaves uncovered."""
        node = self.table.node_of(profile_id)
        holder = self.table.iface_of(profile_id)
        after = dict(node.ifaces)
        if after[holder] == 1:
            del after[holder]
        else:
            after[holder] -= 1
        # Collect before the structure changes: the nodes that may surface.
        uncover = self.table.topmost_below_each(
            node, [y for y, held in self._exported.items()
                   if node in held and not in_scope(after, y)])
        profile = self.table.remove(profile_id)
        coverers: dict[FilterNode, list[FilterNode]] = {}  # per uncovered candidate
        out: dict[str, Update] = {}
        for y, held in self._exported.items():
            sent = held.get(node)
            if sent is None:
                continue
            pend = _Pending()
            if y in uncover:
                del held[node]
                pend.unsubs.append(sent)
                seen: set[FilterNode] = set()
                for c in uncover[y]:
                    if c in seen or c in held:
                        continue
                    seen.add(c)
                    if c not in coverers:
                        coverers[c] = self.table.coverers(c)
                    if not any(n.in_scope(y) for n in coverers[c]):
                        rep = c.rep_for(y)
                        held[c] = rep
                        pend.subs.append(rep)
            elif sent.id == profile.id:
                # The filter stays, but the profile that stood for it is gone.
                rep = node.rep_for(y)
                held[node] = rep
                pend.subs.append(rep)
                pend.unsubs.append(sent)
            else:
                continue
            out[y] = Update(tuple(pend.subs), tuple(pend.unsubs))
        return out


__all__ = ["Forwarder", "Update"]
