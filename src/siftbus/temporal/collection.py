"""A subscriber's collections, kept in step by changes (Tarkoma ch. 9).

A filter's *collection* is the set of active notifications it selects. A subscriber
holds one :class:`Collection` per filter and applies each
:class:`~siftbus.temporal.notification.Change` strictly: an addition of a notification
already held, or an update or removal of one not held, is an error -- so applying a
change stream proves it has no duplicates and no gaps, and the collection equals what
the stream's source holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from siftbus.errors import InputError

from .notification import Change, ChangeKind, PersistentNotification


class Collection:
    """The notifications of one filter: id -> notification."""

    __slots__ = ("filter", "items")

    def __init__(self, filter: str) -> None:
        self.filter = filter
        self.items: dict[str, PersistentNotification] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, id: object) -> bool:
        return id in self.items

    def __iter__(self) -> Iterator[PersistentNotification]:
        return iter(sorted(self.items.values(), key=lambda n: n.id))

    def ids(self) -> list[str]:
        return sorted(self.items)

    def apply(self, change: Change) -> None:
        """Apply one change; :class:`InputError` if it does not fit the collection."""
        n = change.notification
        held = n.id in self.items
        if change.kind is ChangeKind.ADD:
            if held:
                raise InputError(f"collection {self.filter!r}: {n.id!r} added twice "
                                 f"({change.reason})", field=n.id)
            self.items[n.id] = n
        elif change.kind is ChangeKind.UPDATE:
            if not held:
                raise InputError(f"collection {self.filter!r}: update of {n.id!r}, which "
                                 f"it does not hold", field=n.id)
            self.items[n.id] = n
        else:
            if not held:
                raise InputError(f"collection {self.filter!r}: removal of {n.id!r}, which "
                                 f"it does not hold ({change.reason})", field=n.id)
            del self.items[n.id]


class Collections:
    """Collections by filter id, kept in step by :meth:`apply`."""

    def __init__(self) -> None:
        self.by_filter: dict[str, Collection] = {}

    def open(self, filter: str) -> Collection:
        """An empty collection for a new filter (replacing any earlier one)."""
        c = self.by_filter[filter] = Collection(filter)
        return c

    def close(self, filter: str) -> None:
        self.by_filter.pop(filter, None)

    def apply(self, changes: Iterable[Change]) -> None:
        for ch in changes:
            c = self.by_filter.get(ch.filter)
            if c is None:
                raise InputError(f"change for unknown filter {ch.filter!r}", field=ch.filter)
            c.apply(ch)

    def snapshot(self) -> dict[str, dict[str, PersistentNotification]]:
        """filter id -> notification id -> notification (a copy)."""
        return {f: dict(c.items) for f, c in self.by_filter.items()}


__all__ = ["Collection", "Collections"]
