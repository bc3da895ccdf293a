"""The routing of retained state between brokers (temporal subspace matching).


Clients publish *persistent notifications* (subspaces valid for a period; see
:mod:`siftbus.temporal`) and subscribe *temporal filters* (a profile and a semantics).
A subscriber receives, on subscribing, every still-valid notification its filter selects
-- like MQTT's retained messages, but selected by content and many per type -- and then
every later publication, update, withdrawal, activation and expiry that concerns it, as
changes of its collection.

Each broker keeps one :class:`~siftbus.temporal.double.DoubleForest`: the notifications
it holds and the filters it holds (its clients' with their semantics, its neighbours'
as overlap boxes), and one :class:`~siftbus.covering.forwarding.ForwardingTable` that
forwards the filters through the tree *by covering*, as the event protocols do (the
protocol's ``toward``: nowhere for flooding, everywhere for forwarding, toward the
type's rendezvous node for rendezvous). A notification is stored at its publisher's
access broker (its *home*); it travels toward every neighbour that holds an entry
overlapping it, and is kept by every broker it reaches (a cache, which answers late
subscribers whose filters are covered by one already forwarded). With flooding every
broker stores every notification; with rendezvous nodes every notification travels to
its type's rendezvous node and is stored there and on the way.

Per neighbour ``Y`` a broker keeps its *view*: the notifications it has sent ``Y``, so
every message is a difference: ``put`` (new or changed), ``drop`` (withdrawn, updated out
of ``Y``'s interest, ``Y``'s interest gone, unreachable), and ``sync`` (the answer to a
``TSUB`` is complete). Expiry needs no message: every broker expires what it holds by its
own clock. A drop for ``Y``'s lost interest that crosses a new subscription from ``Y``
leaves the notification at ``Y`` as an *orphan* until the sync of that subscription,
which either brings it again or proves it gone -- so a subscriber never sees a spurious
removal. The protocol is described and proven in ``docs/temporal.md``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import Protocol

from siftbus.covering.forwarding import ForwardingTable, Update
from siftbus.errors import DuplicateProfileError, UnknownProfileError, WireError
from siftbus.model import Profile, Schema
from siftbus.temporal.double import DoubleForest
from siftbus.temporal.notification import (
    Change,
    ChangeKind,
    PersistentNotification,
    Reason,
    Semantics,
    TemporalFilter,
)
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.limits import Limits
from siftbus.wire.profiles import decode_profile, encode_profile
from siftbus.wire.retained import decode_note, encode_change, encode_note

from .access import ClientAccess

log = logging.getLogger("siftbus.broker")

_DROP_REASONS = {"withdrawn": Reason.WITHDRAWN, "updated": Reason.UPDATED,
                 "interest": Reason.WITHDRAWN, "unreachable": Reason.UNREACHABLE}


class RetainedHost(Protocol):
    """What the retained state needs from its broker node."""

    name: str
    schema: Schema
    clients: set[str]
    limits: Limits
    clock: Callable[[], float]
    transport_send: Callable[[str, Message], None]
    access: ClientAccess

    def neighbours_up(self) -> frozenset[str]: ...

    def is_broker(self, link: str) -> bool: ...

    def send(self, link: str, msg: Message) -> None: ...


class _Waiter:
    """A request whose answer is complete once every TSUB it caused is synced."""

    __slots__ = ("done", "pending")

    def __init__(self, done: Callable[[], None]) -> None:
        self.pending: set[tuple[str, int]] = set()
        self.done = done


class RetainedRouting:
    """One broker's persistent notifications and temporal filters, and their routing
    between brokers by covering (the client requests are :class:`RetainedState`'s)."""

    def __init__(self, host: RetainedHost, *, protocol: str,
                 toward: Callable[[Profile], Collection[str] | None],
                 direction: Callable[[str], str | None] | None = None) -> None:
        self.host = host
        self.protocol = protocol
        self._direction = direction
        self.df = DoubleForest(now=host.clock())
        self.table = ForwardingTable(strategy="covering", toward=toward, name=host.name)
        self.src: dict[str, str] = {}
        """Filter id -> the link it came from (a client ``@name`` or a neighbour)."""
        self.local: dict[str, str] = {}
        """A client filter's id -> the id its client knows."""
        self.origin: dict[str, str] = {}
        """Notification id -> the neighbour it came from (``""``: published here)."""
        self.views: dict[str, dict[str, PersistentNotification]] = {}
        self.seq: dict[str, int] = defaultdict(int)
        """Per neighbour, the number of the last TSUB sent to it."""
        self.unsynced: dict[str, set[int]] = defaultdict(set)
        """Per neighbour, the TSUBs it has not answered completely yet."""
        self.orphans: dict[str, tuple[str, int]] = {}
        """Notifications a neighbour dropped while a subscription of ours that wants them
        was on its way: -> (neighbour, the last TSUB sent before)."""
        self._waiting: dict[tuple[str, int], list[_Waiter]] = {}
        self._collect: list[tuple[str, int]] | None = None
        self._pseudo: dict[str, list[str]] = {}
        self._published: dict[str, set[str]] = defaultdict(set)
        self._filters_of: dict[str, int] = defaultdict(int)
        self._held: set[str] = set()
        """Client filters whose initial answer waits for the network (their changes are
        not sent; the answer is the collection once the wait is over)."""
        self._timer: asyncio.TimerHandle | None = None
        self._due: float | None = None
        self.counters: dict[str, int] = defaultdict(int)

    # ---- entry points ------------------------------------------------------------------


    def tick(self) -> None:
        """Activate and expire by the broker's clock."""
        expired: list[str] = []
        changes = self.df.advance(self.host.clock(), expired)
        for nid, chs in _by_note(changes).items():
            if chs[0].reason is Reason.EXPIRED:
                self._dispatch(nid, chs, None, silent=True)
            else:
                self._dispatch(nid, chs, None)
        for nid in expired:
            self._forget(nid)

    def neighbour_up(self, y: str) -> None:
        self.views[y] = {}
        self._send_updates({y: self.table.add_neighbour(y)})
        ids = []
        for etype in self.host.schema:
            if self._always(y, etype.name):
                fid = f"~{y}/{etype.name}"
                self._add_entry(TemporalFilter(Profile(fid, etype, ())), y, pseudo=True)
                ids.append(fid)
        self._pseudo[y] = ids
        self._arm()

    def neighbour_down(self, y: str) -> None:
        for key in [k for k in self._waiting if k[0] == y]:
            self._synced_key(key)
        self.unsynced.pop(y, None)
        self.views.pop(y, None)
        self.table.remove_neighbour(y)
        for fid in self._pseudo.pop(y, []):
            self.df.unsubscribe(fid)
            del self.src[fid]
        for fid in [f for f, s in self.src.items() if s == y]:
            self._remove_entry(fid)
        for nid in [n for n, o in self.origin.items() if o == y]:
            self._evict(nid, Reason.UNREACHABLE, "unreachable")
        self._arm()

    def client_down(self, link: str) -> None:
        """A client left: its filters go; what it published stays until it expires or
        is withdrawn (retained)."""
        for fid in [f for f, s in self.src.items() if s == link]:
            self._remove_entry(fid)
        self._arm()

    def _always(self, y: str, tname: str) -> bool:
        """Whether every notification of the type goes to ``y`` (flooding; the way to
        the rendezvous node)."""
        if self.protocol == "flooding":
            return True
        return self._direction is not None and self._direction(tname) == y



    def _from_broker(self, z: str, msg: Message) -> None:
        body, schema = msg.body, self.host.schema
        if msg.type is MsgType.TSUB:
            seq = get(body, "seq", int, where="TSUB")
            self._collect = []
            try:
                for item in get(body, "profiles", list):
                    p = decode_profile(item, schema, None)
                    if p.id in self.src:
                        raise DuplicateProfileError(f"filter {p.id!r} arrived twice")
                    self._add_entry(TemporalFilter(p), z)
                flush = body.get("flush")
                if flush is not None:
                    if not isinstance(flush, list) or not all(isinstance(i, str)
                                                              for i in flush):
                        raise WireError("TSUB flush must be a list of notification ids",
                                        field="flush")
                    self._flush(flush, z)
            finally:
                collected, self._collect = self._collect, None
            self._wait(collected, lambda: self._send_broker(
                z, Message(MsgType.TPUB, {"op": "sync", "seq": seq})))
        elif msg.type is MsgType.TUNSUB:
            for gid in get(body, "ids", list):
                if self.src.get(str(gid)) == z:
                    self._remove_entry(str(gid))
        elif msg.type is MsgType.TPUB:
            op = get(body, "op", str, where="TPUB")
            if op == "put":
                try:
                    why = Reason(body.get("reason", "published"))
                except ValueError:
                    raise WireError("unknown put reason", field="reason") from None
                for item in get(body, "notes", list):
                    self._received(z, decode_note(item, schema, None), why)
            elif op == "drop":
                reason = get(body, "reason", str, where="TPUB")
                for nid in get(body, "ids", list):
                    self._dropped(z, str(nid), reason)
            elif op == "sync":
                self._synced(z, get(body, "seq", int, where="TPUB"))
            else:
                raise WireError(f"TPUB op {op[:50]!r} is not expected from a broker")
        else:
            raise WireError(f"{msg.type.name} is not expected from a broker")

    def _received(self, z: str, n: PersistentNotification, why: Reason) -> None:
        self.orphans.pop(n.id, None)
        if n.validity.expired(self.df.now):
            return  # already over here (clocks differ); it leaves z's view by itself
        if self.origin.get(n.id, z) != z:
            raise WireError(f"notification {n.id!r} arrived from {z}, but it came from "
                            f"{self.origin[n.id] or 'a client here'}")
        try:
            old = self.df.notification(n.id)
        except UnknownProfileError:
            self.origin[n.id] = z
            # new here: for our filters it is what it was where it came from (published,
            # activated, updated into a filter, or part of a subscription's answer)
            self._dispatch(n.id, [replace(ch, reason=why) for ch in self.df.publish(n)], None)
            return
        if old.version == n.version and old.same_content(n):
            return  # a re-put of what we hold (after an orphaned drop)
        self._dispatch(n.id, self.df.update(n), "updated")

    def _dropped(self, z: str, nid: str, reason: str) -> None:
        if self.origin.get(nid) != z:
            return  # not held (expired here first, or never wanted)
        if reason == "interest" and self._wanted(nid, z):
            # z forgot our interest while a newer subscription of ours is on its way:
            # keep it until z has answered everything we sent it so far.
            self.orphans[nid] = (z, self.seq[z])
            self.counters["orphans"] += 1
            return
        self._evict(nid, _DROP_REASONS.get(reason, Reason.WITHDRAWN),
                    "updated" if reason == "updated" else
                    "unreachable" if reason == "unreachable" else "withdrawn")

    def _synced(self, z: str, seq: int) -> None:
        self.unsynced[z].discard(seq)
        first = min(self.unsynced[z], default=math.inf)
        for nid, (y, upto) in list(self.orphans.items()):
            if y == z and upto < first:
                # z has answered everything we sent it up to the orphan's drop, and did
                # not bring it again: it is gone
                del self.orphans[nid]
                self.counters["orphans_gone"] += 1
                self._evict(nid, Reason.WITHDRAWN, "withdrawn")
        self._synced_key((z, seq))

    def _synced_key(self, key: tuple[str, int]) -> None:
        for w in self._waiting.pop(key, ()):
            w.pending.discard(key)
            if not w.pending:
                w.done()

    def _wait(self, keys: list[tuple[str, int]], done: Callable[[], None]) -> None:
        if not keys:
            done()
            return
        w = _Waiter(done)
        w.pending.update(keys)
        for k in keys:
            self._waiting.setdefault(k, []).append(w)

    def _flush(self, nids: Iterable[str], exclude: str | None = None) -> None:
        """Ask the neighbours these notifications came from to answer once every change
        they sent before is here: a numbered ``TSUB`` without profiles naming the ids,
        which each passes on toward where it got them, answering by ``sync`` when all
        have. A withdrawal at the home broker before the question is then here before
        the answer (links keep their order), so an answer taken from this broker's cache
        never holds what was withdrawn before a subscription was made."""
        by_origin: dict[str, list[str]] = defaultdict(list)
        for nid in nids:
            y = self.origin.get(nid)
            if y and y != exclude and y in self.views:
                by_origin[y].append(nid)
        for y, ids in by_origin.items():
            self.seq[y] += 1
            self.unsynced[y].add(self.seq[y])
            self.host.send(y, Message(MsgType.TSUB, {"profiles": [], "seq": self.seq[y],
                                                     "flush": ids}))
            if self._collect is not None:
                self._collect.append((y, self.seq[y]))

    def hold(self, fid: str) -> None:
        """Send nothing of client filter ``fid``'s changes until :meth:`answer`."""
        self._held.add(fid)

    def answer(self, fid: str) -> None:
        """The initial answer of a held client filter: its collection now (nothing for a
        filter not held: gone meanwhile, or answered)."""
        if fid not in self._held:
            return
        self._held.discard(fid)
        link = self.src.get(fid)
        if link is not None:
            self._notify(link, [Change(ChangeKind.ADD, fid, n, Reason.SUBSCRIBED)
                                for n in self.df.collection(fid)])

    def _wanted(self, nid: str, z: str) -> bool:
        """Whether a filter held here (from elsewhere than ``z``) selects ``nid``."""
        n = self.df.notification(nid)
        return any(self.src[f] != z for f in self.df.filters_for(n.subspace))

    def _send_broker(self, y: str, msg: Message) -> None:
        if y in self.views:
            self.host.send(y, msg)

    def _send_updates(self, updates: dict[str, Update]) -> None:
        """The table's updates as TSUB (numbered, answered by a sync) then TUNSUB."""
        for y, u in updates.items():
            if u.subscribe and y in self.views:
                self.seq[y] += 1
                self.unsynced[y].add(self.seq[y])
                self.host.send(y, Message(MsgType.TSUB, {
                    "profiles": [encode_profile(p) for p in u.subscribe], "seq": self.seq[y]}))
                if self._collect is not None:
                    self._collect.append((y, self.seq[y]))
        for y, u in updates.items():
            if u.unsubscribe and y in self.views:
                self.host.send(y, Message(MsgType.TUNSUB, {
                    "ids": [p.id for p in u.unsubscribe]}))

    # ---- entries -------------------------------------------------------------------------

    def _add_entry(self, f: TemporalFilter, link: str, *, pseudo: bool = False) -> None:
        changes = self.df.subscribe(f)
        self.src[f.id] = link
        self._filters_of[link] += 1
        if self.host.is_broker(link):
            view = self.views.get(link)
            puts = []
            for ch in changes:
                n = ch.notification
                if view is not None and self.origin.get(n.id) != link \
                        and view.get(n.id) is not n:
                    view[n.id] = n
                    puts.append(n)
            self._put(link, puts, Reason.SUBSCRIBED)
        else:
            self._notify(link, changes)
        if not pseudo:
            self._send_updates(self.table.subscribe(f.profile, link, self.local.get(f.id)))

    def _remove_entry(self, fid: str) -> None:
        self._held.discard(fid)
        link = self.src.pop(fid)
        self._filters_of[link] -= 1
        if not self._filters_of[link]:
            del self._filters_of[link]
        f = self.df.unsubscribe(fid)
        self.local.pop(fid, None)
        view = self.views.get(link)
        if view:
            gone = []
            for nid in self.df.notifications_for(f.profile, Semantics.OVERLAPS).ids():
                if nid in view and not any(self.src[g] == link for g in
                                           self.df.filters_for(view[nid].subspace)):
                    del view[nid]
                    gone.append(nid)
            self._drop(link, gone, "interest")
        self._send_updates(self.table.unsubscribe(fid, link))

    # ---- notifications -------------------------------------------------------------------

    def _dispatch(self, nid: str, changes: list[Change], drop_reason: str | None, *,
                  silent: bool = False) -> None:
        """Send what one notification's changes mean: collection changes to clients,
        puts and drops to neighbours (``silent``: expiry, which each broker sees)."""
        by_client: dict[str, list[Change]] = defaultdict(list)
        wanted: set[str] = set()
        for ch in changes:
            link = self.src[ch.filter]
            if self.host.is_broker(link):
                if ch.kind is not ChangeKind.REMOVE:
                    wanted.add(link)
            else:
                by_client[link].append(ch)
        for link, chs in by_client.items():
            self._notify(link, chs)
        cur = self.df.get(nid) if self.df.is_active(nid) else None
        why = next((ch.reason for ch in changes if ch.kind is not ChangeKind.REMOVE),
                   Reason.PUBLISHED)
        for y, view in self.views.items():
            if y == self.origin.get(nid):
                continue
            if cur is not None and y in wanted:
                if view.get(nid) is not cur:
                    view[nid] = cur
                    self._put(y, [cur], why)
            elif nid in view:
                del view[nid]
                if not silent:
                    self._drop(y, [nid], drop_reason or "withdrawn")

    def _evict(self, nid: str, reason: Reason, drop_reason: str) -> None:
        if self.df.get(nid) is not None:
            self._dispatch(nid, self.df.withdraw(nid, reason), drop_reason)
        self._forget(nid)

    def _forget(self, nid: str) -> None:
        origin = self.origin.pop(nid, None)
        self.orphans.pop(nid, None)
        if origin == "":
            client = nid.split("/")[1]
            self._published[client].discard(nid)
            if not self._published[client]:
                del self._published[client]

    def _put(self, y: str, notes: list[PersistentNotification], why: Reason) -> None:
        if notes:
            self.counters["puts"] += len(notes)
            self._send_broker(y, Message(MsgType.TPUB, {
                "op": "put", "notes": [encode_note(n) for n in notes], "reason": why.value}))

    def _drop(self, y: str, ids: list[str], reason: str) -> None:
        if ids:
            self.counters["drops"] += len(ids)
            self._send_broker(y, Message(MsgType.TPUB, {"op": "drop", "ids": ids,
                                                        "reason": reason}))

    def _notify(self, link: str, changes: Iterable[Change]) -> None:
        held = self._held
        out = [encode_change(ch, self.local[ch.filter]) for ch in changes
               if ch.filter not in held]
        if out and link in self.host.clients:
            self.counters["changes"] += len(out)
            self.host.transport_send(link, Message(MsgType.TNOTIFY, {"changes": out}))

    # ---- time ----------------------------------------------------------------------------

    def _arm(self) -> None:
        """Wake up at the next activation or expiry (on an asyncio server; the simulator
        calls :meth:`tick` itself)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        due = self.df.next_deadline()
        if self._timer is not None and due == self._due:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due = due
        if due is not None:
            self._timer = loop.call_later(max(0.0, due - self.host.clock()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._due = None
        try:
            self.tick()
        except Exception:  # a bug must not stop the timer (nor the broker)
            log.exception("%s: retained expiry failed", self.host.name)
        self._arm()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---- inspection ------------------------------------------------------------------------


def _by_note(changes: list[Change]) -> dict[str, list[Change]]:
    out: dict[str, list[Change]] = {}
    for ch in changes:
        out.setdefault(ch.notification.id, []).append(ch)
    return out


__all__ = ["RetainedHost", "RetainedRouting"]
