"""The DoubleForest: persistent notifications and filters, matched in both directions.

Tarkoma's DoubleForest (2006, ch. 6) keeps both sides of temporal subspace matching in
covering-ordered forests: the long-lived filters, and the stored notification subspaces.
Each side is a :class:`~siftbus.temporal.store.SubspaceStore` (a forest plus preload
tables); filters are kept per :class:`~siftbus.temporal.notification.Semantics`, so a
notification is matched against each filter set with that set's relation:

=============  =================================  ==================================
semantics      notifications for a filter ``f``    filters for a notification ``n``
=============  =================================  ==================================
overlaps       stored ``n`` overlapping ``f``      stored ``f`` overlapping ``n``
covered-by     stored ``n`` inside ``f``           stored ``f`` covering ``n``
covers         stored ``n`` covering ``f``         stored ``f`` inside ``n``
=============  =================================  ==================================

Operations return :class:`~siftbus.temporal.notification.Change` lists, what each
filter's collection must do: a new filter gets every active notification it selects
(the *late subscriber*); a publication, an update, a withdrawal, an activation or an
expiry reaches exactly the filters that select the notification before or after it.

Time is explicit: :meth:`DoubleForest.advance` moves the clock forward and activates
and expires notifications in time order; every other operation happens at
:attr:`DoubleForest.now`. A notification whose validity has not started is stored but
matches nothing until it does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator

from siftbus.errors import DuplicateProfileError, InputError, UnknownProfileError
from siftbus.model import Profile

from .hulls import COVER, OVERLAP, WITHIN
from .notification import (
    Change,
    ChangeKind,
    PersistentNotification,
    Reason,
    Semantics,
    TemporalFilter,
)
from .preload import PreloadPolicy
from .store import Selection, SubspaceStore

NOTES_REL = {Semantics.OVERLAPS: OVERLAP, Semantics.COVERED_BY: WITHIN,
             Semantics.COVERS: COVER}
"""Per semantics, how a stored notification must relate to the filter."""

FILTERS_REL = {Semantics.OVERLAPS: OVERLAP, Semantics.COVERED_BY: COVER,
               Semantics.COVERS: WITHIN}
"""Per semantics, how a stored filter must relate to the notification."""


class DoubleForest:
    """Persistent subspace notifications and temporal filters, matched both ways."""

    def __init__(self, *, now: float = 0.0, preload: PreloadPolicy | None = None) -> None:
        policy = preload if preload is not None else PreloadPolicy()
        self.policy = policy
        self.notes = SubspaceStore(policy)
        """The active notifications' subspaces."""
        self.filters = {s: SubspaceStore(policy) for s in Semantics}
        """The filters' profiles, one store per semantics."""
        self._notes: dict[str, PersistentNotification] = {}
        self._filters: dict[str, TemporalFilter] = {}
        # (time, order, token, id, is_end): activations and expiries; an entry is stale
        # once its notification was updated or withdrawn (its token changed).
        self._timeline: list[tuple[float, int, int, str, bool]] = []
        self._token: dict[str, int] = {}
        self._order = itertools.count()
        self.now = now

    # ---- state -------------------------------------------------------------------------

    def notification(self, id: str) -> PersistentNotification:
        """A stored notification (active or not yet valid)."""
        try:
            return self._notes[id]
        except KeyError:
            raise UnknownProfileError(f"no notification {id!r}", field=id) from None

    def filter(self, id: str) -> TemporalFilter:
        try:
            return self._filters[id]
        except KeyError:
            raise UnknownProfileError(f"no filter {id!r}", field=id) from None

    def get(self, id: str) -> PersistentNotification | None:
        """The stored notification with this id (active or not yet valid), or ``None``."""
        return self._notes.get(id)

    def is_active(self, id: str) -> bool:
        return id in self.notes

    def notifications(self) -> Iterator[PersistentNotification]:
        """Every stored notification (active or not yet valid)."""
        return iter(list(self._notes.values()))

    def filter_list(self) -> list[TemporalFilter]:
        return list(self._filters.values())

    @property
    def notification_count(self) -> int:
        return len(self._notes)

    @property
    def filter_count(self) -> int:
        return len(self._filters)

    def next_deadline(self) -> float | None:
        """When the next activation or expiry is due (possibly a stale one), or ``None``."""
        return self._timeline[0][0] if self._timeline else None

    # ---- queries -----------------------------------------------------------------------

    def notifications_for(self, profile: Profile, semantics: Semantics = Semantics.OVERLAPS,
                          *, preload: bool = True) -> Selection:
        """The active notifications a filter ``profile`` with ``semantics`` selects."""
        return self.notes.query(profile, NOTES_REL[semantics], preload=preload)

    def filters_for(self, subspace: Profile, *, preload: bool = True) -> list[str]:
        """The ids of the filters that select a notification with ``subspace``, each by
        its own semantics; sorted."""
        out: list[str] = []
        for s, store in self.filters.items():
            if len(store):
                out.extend(store.query(subspace, FILTERS_REL[s], preload=preload))
        out.sort()
        return out

    def collection(self, filter_id: str) -> list[PersistentNotification]:
        """The notifications filter ``filter_id`` selects now, sorted by id."""
        f = self.filter(filter_id)
        return [self._notes[i] for i in self.notifications_for(f.profile, f.semantics).ids()]

    def load(self, notifications: Iterable[PersistentNotification] = (),
             filters: Iterable[TemporalFilter] = ()) -> None:
        """Store many notifications and filters at once, computing no changes (a state
        being restored, or a benchmark filling the structure): afterwards the state is
        what publishing and subscribing them would have made it. Expired notifications
        are skipped."""
        for f in filters:
            if f.id in self._filters:
                raise DuplicateProfileError(f"filter id {f.id!r} is already subscribed",
                                            field=f.id)
            self.filters[f.semantics].add(f.id, f.profile)
            self._filters[f.id] = f
        for n in notifications:
            if n.id in self._notes:
                raise DuplicateProfileError(f"notification id {n.id!r} is already "
                                            "published", field=n.id)
            if n.validity.expired(self.now):
                continue
            self._store(n)
            if n.active(self.now):
                self.notes.add(n.id, n.subspace)

    # ---- filters -----------------------------------------------------------------------

    def subscribe(self, f: TemporalFilter) -> list[Change]:
        """Store a filter; its changes add every active notification it selects."""
        if f.id in self._filters:
            raise DuplicateProfileError(f"filter id {f.id!r} is already subscribed",
                                        field=f.id)
        self.filters[f.semantics].add(f.id, f.profile)
        self._filters[f.id] = f
        found = self.notifications_for(f.profile, f.semantics).ids()
        return [Change(ChangeKind.ADD, f.id, self._notes[i], Reason.SUBSCRIBED)
                for i in found]

    def unsubscribe(self, filter_id: str) -> TemporalFilter:
        """Forget a filter (its subscriber drops its collection)."""
        f = self.filter(filter_id)
        self.filters[f.semantics].remove(filter_id)
        del self._filters[filter_id]
        return f

    # ---- notifications -----------------------------------------------------------------

    def publish(self, n: PersistentNotification) -> list[Change]:
        """Store a new notification; while it is active it reaches the filters selecting
        it (now, or when its validity starts)."""
        if n.id in self._notes:
            raise DuplicateProfileError(f"notification id {n.id!r} is already published",
                                        field=n.id)
        if n.validity.expired(self.now):
            raise InputError(f"notification {n.id!r} expired at {n.validity.end}, before "
                             f"now ({self.now})", field="end")
        self._store(n)
        if n.active(self.now):
            return self._activate(n, Reason.PUBLISHED)
        return []

    def update(self, n: PersistentNotification) -> list[Change]:
        """Replace the stored notification with ``n``'s id; the version goes up by one
        (or to ``n.version`` if that is higher). Filters that selected the old version
        or select the new one get an update, a removal or an addition."""
        old = self.notification(n.id)
        if n.validity.expired(self.now):
            raise InputError(f"notification {n.id!r} would have expired at "
                             f"{n.validity.end}, before now ({self.now})", field="end")
        new = n if n.version > old.version else n.replace(version=old.version + 1)
        before: list[str] = []
        if n.id in self.notes:
            before = self.filters_for(old.subspace)
            self.notes.remove(n.id)
        self._store(new)
        after: list[str] = []
        if new.active(self.now):
            self.notes.add(new.id, new.subspace)
            after = self.filters_for(new.subspace)
        was, now = set(before), set(after)
        out: list[Change] = []
        for fid in sorted(was | now):
            if fid in was and fid in now:
                out.append(Change(ChangeKind.UPDATE, fid, new, Reason.UPDATED))
            elif fid in now:
                out.append(Change(ChangeKind.ADD, fid, new, Reason.UPDATED))
            else:
                out.append(Change(ChangeKind.REMOVE, fid, old, Reason.UPDATED))
        return out

    def withdraw(self, id: str, reason: Reason = Reason.WITHDRAWN) -> list[Change]:
        """Remove a notification; the filters holding it lose it."""
        n = self.notification(id)
        out = self._deactivate(n, reason) if id in self.notes else []
        del self._notes[id]
        del self._token[id]
        return out

    def advance(self, t: float, expired: list[str] | None = None) -> list[Change]:
        """Move the clock to ``t`` (never back), activating and expiring notifications in
        time order; returns their changes. The ids of the notifications that expired
        (whether a filter held them or not) are appended to ``expired``."""
        out: list[Change] = []
        line = self._timeline
        while line and line[0][0] <= t:
            when, _, token, nid, is_end = heapq.heappop(line)
            if self._token.get(nid) != token:
                continue  # updated or withdrawn since
            self.now = max(self.now, when)
            n = self._notes[nid]
            if is_end:
                out.extend(self.withdraw(nid, Reason.EXPIRED))
                if expired is not None:
                    expired.append(nid)
            elif nid not in self.notes and n.active(when):
                out.extend(self._activate(n, Reason.ACTIVATED))
        self.now = max(self.now, t)
        if len(line) > 64 and len(line) > 2 * len(self._notes):
            self._compact()
        return out

    # ---- internals ---------------------------------------------------------------------

    def _store(self, n: PersistentNotification) -> None:
        self._notes[n.id] = n
        token = next(self._order)
        self._token[n.id] = token
        v = n.validity
        if v.pending(self.now):
            heapq.heappush(self._timeline, (v.start, next(self._order), token, n.id, False))
        if v.end != float("inf"):
            heapq.heappush(self._timeline, (v.end, next(self._order), token, n.id, True))

    def _compact(self) -> None:
        """Drop stale timeline entries (updated or withdrawn notifications)."""
        self._timeline = [e for e in self._timeline if self._token.get(e[3]) == e[2]]
        heapq.heapify(self._timeline)

    def _activate(self, n: PersistentNotification, reason: Reason) -> list[Change]:
        self.notes.add(n.id, n.subspace)
        return [Change(ChangeKind.ADD, fid, n, reason) for fid in self.filters_for(n.subspace)]

    def _deactivate(self, n: PersistentNotification, reason: Reason) -> list[Change]:
        out = [Change(ChangeKind.REMOVE, fid, n, reason) for fid in self.filters_for(n.subspace)]
        self.notes.remove(n.id)
        return out


__all__ = ["FILTERS_REL", "NOTES_REL", "DoubleForest"]
