"""Retained content-based state in the broker network (temporal subspace matching).

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
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from siftbus.covering.forwarding import ForwardingTable, Update
from siftbus.errors import ConfigError, DuplicateProfileError, UnknownProfileError, WireError
from siftbus.lang.profile import format_profile
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
from siftbus.temporal.text import notification_to_json
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.limits import Limits
from siftbus.wire.profiles import check_count, decode_profile, encode_profile
from siftbus.wire.retained import (
    check_id,
    decode_filter,
    decode_note,
    decode_publication,
    encode_change,
    encode_note,
)

from .access import ClientAccess

log = logging.getLogger("siftbus.broker")

TYPES = (MsgType.TSUB, MsgType.TUNSUB, MsgType.TPUB, MsgType.TNOTIFY)
"""The message types this module handles."""

_DROP_REASONS = {"withdrawn": Reason.WITHDRAWN, "updated": Reason.UPDATED,
                 "interest": Reason.WITHDRAWN, "unreachable": Reason.UNREACHABLE}


@dataclass(frozen=True, slots=True)
class RetainedLimits:
    """What one broker holds of retained state (each exceeded with one ERROR)."""

    max_per_client: int = 10_000
    """Notifications one client name may have published at this broker at once."""
    max_total: int = 1_000_000
    """Notifications a broker accepts from its clients while it holds this many."""
    max_filters_per_client: int = 10_000
    """Temporal filters one client may hold at once."""

    def __post_init__(self) -> None:
        for name in ("max_per_client", "max_total", "max_filters_per_client"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive whole number, got {v!r}",
                                  field=name)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any]) -> RetainedLimits:
        """Limits from a config table (``[network.retained]``); unknown keys are errors."""
        known = ("max_per_client", "max_total", "max_filters_per_client")
        for key in table:
            if key not in known:
                raise ConfigError(f"unknown retained limit {key!r} (limits: "
                                  f"{', '.join(known)})", field=key)
        return cls(**dict(table))


DEFAULT_RETAINED_LIMITS = RetainedLimits()


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


class RetainedState:
    """One broker's persistent notifications, temporal filters and their routing."""

    def __init__(self, host: RetainedHost, *, protocol: str,
                 toward: Callable[[Profile], Collection[str] | None],
                 direction: Callable[[str], str | None] | None = None,
                 limits: RetainedLimits | None = None) -> None:
        self.host = host
        self.protocol = protocol
        self.limits = limits or RetainedLimits()
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
        self._timer: asyncio.TimerHandle | None = None
        self._due: float | None = None
        self.counters: dict[str, int] = defaultdict(int)

    # ---- entry points ------------------------------------------------------------------

    def handle(self, link: str, msg: Message, corr: int | None) -> None:
        """One TSUB, TUNSUB or TPUB from a client or a neighbour (one atomic step)."""
        self.tick()
        try:
            if self.host.is_broker(link):
                self._from_broker(link, msg)
            else:
                self._from_client(link, msg, corr)
        finally:
            self._arm()

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

    # ---- clients ---------------------------------------------------------------------

    def _from_client(self, link: str, msg: Message, corr: int | None) -> None:
        body, client = msg.body, link[1:]
        if msg.type is MsgType.TPUB:
            ids = self._client_publish(client, body)
            self._ack(link, corr, ids=ids)
        elif msg.type is MsgType.TSUB:
            items = check_count(get(body, "filters", list), "filters", self.host.limits)
            fs = [decode_filter(it, self.host.schema, self.host.limits) for it in items]
            self._check_rights(link, "subscribe", [f.profile for f in fs])
            gids = [f"{self.host.name}/{client}/{f.id}" for f in fs]
            mine = self._filters_of[link]
            if mine + len(fs) > self.limits.max_filters_per_client:
                raise WireError(f"{client} would hold {mine + len(fs)} temporal filters, "
                                f"over the limit of {self.limits.max_filters_per_client}",
                                field="max_filters_per_client")
            if len(set(gids)) != len(gids):
                raise DuplicateProfileError("a filter id repeats in one request")
            for f, gid in zip(fs, gids, strict=True):
                if gid in self.src:
                    raise DuplicateProfileError(f"filter id {f.id!r} is already subscribed",
                                                field=f.id)
            self._collect = []
            try:
                for f, gid in zip(fs, gids, strict=True):
                    self.local[gid] = f.id
                    self._add_entry(TemporalFilter(f.profile.with_id(gid, client),
                                                   f.semantics), link)
            finally:
                collected, self._collect = self._collect, None
            self._wait(collected, lambda: self._ack(link, corr, ids=[f.id for f in fs]))
        elif msg.type is MsgType.TUNSUB:
            ids = [str(i) for i in check_count(get(body, "ids", list), "ids",
                                               self.host.limits)]
            gids = [f"{self.host.name}/{client}/{i}" for i in ids]
            for i, gid in zip(ids, gids, strict=True):
                if self.src.get(gid) != link:
                    raise UnknownProfileError(f"{client} has no temporal filter {i!r}",
                                              field=i)
            for gid in gids:
                self._remove_entry(gid)
            self._ack(link, corr, ids=ids)
        else:
            raise WireError(f"{msg.type.name} is not a client request")

    def _client_publish(self, client: str, body: dict[str, Any]) -> list[str]:
        op = get(body, "op", str, where="TPUB")
        home = f"{self.host.name}/{client}"
        if op == "withdraw":
            ids = [check_id(i, "notification") for i in
                   check_count(get(body, "ids", list), "ids", self.host.limits)]
            gids = [f"{home}/{i}" for i in ids]
            for i, gid in zip(ids, gids, strict=True):
                if gid not in self._published[client]:
                    raise UnknownProfileError(f"{client} has no notification {i!r}", field=i)
            for gid in gids:
                self._dispatch(gid, self.df.withdraw(gid), "withdrawn")
                self._forget(gid)
            return ids
        if op not in ("publish", "update"):
            raise WireError(f"TPUB op must be publish, update or withdraw, not {op[:50]!r}",
                            field="op")
        now = self.df.now
        items = check_count(get(body, "notes", list), "notes", self.host.limits)
        notes = []
        for it in items:
            lid, box, validity = decode_publication(it, self.host.schema, self.host.limits, now)
            gid = f"{home}/{lid}"
            if validity.expired(now):
                raise WireError(f"notification {lid!r} has already expired", field="end")
            notes.append(PersistentNotification(gid, box, home, validity))
        gids = [n.id for n in notes]
        if len(set(gids)) != len(gids):
            raise DuplicateProfileError("a notification id repeats in one request")
        self._check_rights(f"@{client}", "publish", [n.subspace for n in notes])
        held = self._published[client]
        for n in notes:
            lid = n.id[len(home) + 1:]
            if op == "publish" and self.df.get(n.id) is not None:
                raise DuplicateProfileError(f"notification {lid!r} is already published "
                                            "(update or withdraw it)", field=lid)
            if op == "update" and n.id not in held:
                raise UnknownProfileError(f"{client} has no notification {lid!r}", field=lid)
        if op == "publish":
            if len(held) + len(notes) > self.limits.max_per_client:
                raise WireError(f"{client} would hold {len(held) + len(notes)} retained "
                                f"notifications, over the limit of "
                                f"{self.limits.max_per_client}", field="max_per_client")
            if self.df.notification_count + len(notes) > self.limits.max_total:
                raise WireError(f"broker {self.host.name} holds "
                                f"{self.df.notification_count} retained notifications, "
                                f"the most it takes is {self.limits.max_total}",
                                field="max_total")
        for n in notes:
            if op == "publish":
                self.origin[n.id] = ""
                held.add(n.id)
                self._dispatch(n.id, self.df.publish(n), None)
            else:
                self._dispatch(n.id, self.df.update(n), "updated")
        return [n.id[len(home) + 1:] for n in notes]

    def _check_rights(self, link: str, action: str, boxes: list[Profile]) -> None:
        """With a ``[security]`` policy: a persistent notification must lie inside its
        publisher's publish right, a temporal filter inside its subscriber's subscribe
        right (whole: its semantics are defined on the filter, so it is not narrowed)."""
        access = self.host.access
        if access.open:
            return
        rights = access.rights(link)
        allowed = rights.publish if action == "publish" else rights.subscribe
        what = "notification" if action == "publish" else "temporal filter"
        for p in boxes:
            if not allowed.covers(p):
                raise access.guard.deny(access.principal(link), f"retain ({action})",
                                        f"{p.id} ({p.type_name})", f"the {what} reaches "
                                        f"outside the {action} right")

    def _ack(self, link: str, corr: int | None, **fields: Any) -> None:
        if corr is not None and link in self.host.clients:
            self.host.transport_send(link, Message(MsgType.ACK, {"corr": corr, **fields}))

    # ---- neighbours --------------------------------------------------------------------

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
        out = [encode_change(ch, self.local[ch.filter]) for ch in changes]
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

    def service(self, method: str, args: dict[str, Any], caller: str) -> Any:
        """The ``retained`` service: ``stats``, ``notifications``, ``filters``."""
        self.tick()
        if method == "stats":
            return {"notifications": self.df.notification_count,
                    "published_here": sum(len(s) for s in self._published.values()),
                    "filters": self.df.filter_count, "orphans": len(self.orphans),
                    **self.counters}
        if method == "notifications":
            return [{**notification_to_json(n), "origin": self.origin.get(n.id, "")}
                    for n in self.df.notifications()]
        if method == "filters":
            return [{"id": f.id, "source": self.src[f.id], "semantics": f.semantics.value,
                     "text": format_profile(f.profile)} for f in self.df.filter_list()]
        raise WireError(f"the retained service has no method {method!r} "
                        "(stats, notifications, filters)", field="method")


def _by_note(changes: list[Change]) -> dict[str, list[Change]]:
    out: dict[str, list[Change]] = {}
    for ch in changes:
        out.setdefault(ch.notification.id, []).append(ch)
    return out


__all__ = ["TYPES", "RetainedHost", "RetainedLimits", "RetainedState"]
