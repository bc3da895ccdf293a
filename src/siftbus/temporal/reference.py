"""The reference for temporal subspace matching: every filter against every notification.

:class:`ReferenceTemporal` has the operations of
:class:`~siftbus.temporal.double.DoubleForest` and computes each answer literally from
the definitions: a notification is active at ``t`` when its validity contains ``t``; a
filter's collection is every active notification its semantics select; a change is the
difference of the collections before and after an operation. Activations and expiries
inside one :meth:`~ReferenceTemporal.advance` are replayed at each boundary time in
order. It is the oracle of the tests and the linear scan of the benchmark; it is
written for clarity, not speed.
"""

from __future__ import annotations

from siftbus.errors import DuplicateProfileError, InputError, UnknownProfileError
from siftbus.model import Profile

from .notification import (
    Change,
    ChangeKind,
    PersistentNotification,
    Reason,
    Semantics,
    TemporalFilter,
)


class ReferenceTemporal:
    """Persistent notifications and filters in two dictionaries, matched by brute force."""

    def __init__(self, *, now: float = 0.0) -> None:
        self.notes: dict[str, PersistentNotification] = {}
        self.filters: dict[str, TemporalFilter] = {}
        self.now = now

    def active(self) -> list[PersistentNotification]:
        return [n for n in self.notes.values() if n.active(self.now)]

    def notifications_for(self, profile: Profile,
                          semantics: Semantics = Semantics.OVERLAPS) -> list[str]:
        return sorted(n.id for n in self.active() if semantics.selects(profile, n.subspace))

    def filters_for(self, subspace: Profile) -> list[str]:
        return sorted(f.id for f in self.filters.values()
                      if f.semantics.selects(f.profile, subspace))

    def collections(self) -> dict[str, dict[str, PersistentNotification]]:
        """Every filter's collection now: filter id -> notification id -> notification."""
        act = self.active()
        return {f.id: {n.id: n for n in act if f.selects(n)} for f in self.filters.values()}

    def _diff(self, before: dict[str, dict[str, PersistentNotification]],
              reason_add: Reason, reason_remove: Reason) -> list[Change]:
        after = self.collections()
        out: list[Change] = []
        for fid in sorted(after.keys() & before.keys()):
            b, a = before[fid], after[fid]
            for nid in sorted(a.keys() | b.keys()):
                if nid in a and nid not in b:
                    out.append(Change(ChangeKind.ADD, fid, a[nid], reason_add))
                elif nid in b and nid not in a:
                    out.append(Change(ChangeKind.REMOVE, fid, b[nid], reason_remove))
                elif a[nid] is not b[nid]:
                    out.append(Change(ChangeKind.UPDATE, fid, a[nid], Reason.UPDATED))
        return out

    def subscribe(self, f: TemporalFilter) -> list[Change]:
        if f.id in self.filters:
            raise DuplicateProfileError(f"filter id {f.id!r} is already subscribed",
                                        field=f.id)
        self.filters[f.id] = f
        return [Change(ChangeKind.ADD, f.id, self.notes[i], Reason.SUBSCRIBED)
                for i in self.notifications_for(f.profile, f.semantics)]

    def unsubscribe(self, filter_id: str) -> TemporalFilter:
        if filter_id not in self.filters:
            raise UnknownProfileError(f"no filter {filter_id!r}", field=filter_id)
        return self.filters.pop(filter_id)

    def publish(self, n: PersistentNotification) -> list[Change]:
        if n.id in self.notes:
            raise DuplicateProfileError(f"notification id {n.id!r} is already published",
                                        field=n.id)
        if n.validity.expired(self.now):
            raise InputError(f"notification {n.id!r} already expired", field="end")
        before = self.collections()
        self.notes[n.id] = n
        return self._diff(before, Reason.PUBLISHED, Reason.PUBLISHED)

    def update(self, n: PersistentNotification) -> list[Change]:
        if n.id not in self.notes:
            raise UnknownProfileError(f"no notification {n.id!r}", field=n.id)
        if n.validity.expired(self.now):
            raise InputError(f"notification {n.id!r} would have expired", field="end")
        old = self.notes[n.id]
        before = self.collections()
        self.notes[n.id] = n if n.version > old.version else n.replace(version=old.version + 1)
        return self._diff(before, Reason.UPDATED, Reason.UPDATED)

    def withdraw(self, id: str) -> list[Change]:
        if id not in self.notes:
            raise UnknownProfileError(f"no notification {id!r}", field=id)
        before = self.collections()
        del self.notes[id]
        return self._diff(before, Reason.WITHDRAWN, Reason.WITHDRAWN)

    def advance(self, t: float) -> list[Change]:
        out: list[Change] = []
        if t <= self.now:
            return out
        bounds = sorted({b for n in self.notes.values()
                         for b in (n.validity.start, n.validity.end) if self.now < b <= t})
        for b in [*bounds, t]:
            before = self.collections()
            self.now = b
            out.extend(self._diff(before, Reason.ACTIVATED, Reason.EXPIRED))
            for nid in [n.id for n in self.notes.values() if n.validity.expired(b)]:
                del self.notes[nid]
        return out


__all__ = ["ReferenceTemporal"]
