"""Event types announced by clients: what consumers subscribe to and suppliers offer
(``subscription_change``/``offer_change``), kept as counted sets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

EventType = tuple[str, str]
"""(domain_name, type_name)."""


def type_list(items: Iterable[Any]) -> list[EventType]:
    """Event types given as ``(domain, type)`` pairs or ``{"domain_name", "type_name"}``
    maps, as pairs of strings."""
    out = []
    for it in items:
        if isinstance(it, Mapping):
            out.append((str(it.get("domain_name", "")), str(it.get("type_name", ""))))
        else:
            d, t = it
            out.append((str(d), str(t)))
    return out


class TypeCounts:
    """A counted set of event types: a type is in the set while some announcement that
    added it has not been withdrawn."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Iterable[tuple[str, str, int]] = ()) -> None:
        self._counts: dict[EventType, int] = {(d, t): int(n) for d, t, n in counts}

    def change(self, added: Iterable[EventType], removed: Iterable[EventType]
               ) -> tuple[list[EventType], list[EventType]]:
        """Count ``added`` up and ``removed`` down; returns the types that entered and
        those that left the set."""
        counts = self._counts
        new, gone = [], []
        for t in added:
            counts[t] = counts.get(t, 0) + 1
            if counts[t] == 1:
                new.append(t)
        for t in removed:
            n = counts.get(t, 0) - 1
            if n <= 0:
                if t in counts:
                    gone.append(t)
                counts.pop(t, None)
            else:
                counts[t] = n
        return new, gone

    def types(self) -> list[EventType]:
        """The types in the set, sorted."""
        return sorted(self._counts)

    def counted(self) -> tuple[tuple[str, str, int], ...]:
        """``(domain, type, count)`` triples (what a snapshot keeps)."""
        return tuple((d, t, n) for (d, t), n in self._counts.items())


__all__ = ["EventType", "TypeCounts", "type_list"]
