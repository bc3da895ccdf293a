"""The event-type hierarchy (thesis §5.2.4): abstract targets ``#Type``.

A subscription may name an event type instead of a place in the document:
``target="#ObjectEvent"``, or ``target="//#EPCISEvent"`` for a base type. The hierarchy maps
each type name to entries, each either a restricted-XPath target (``//ObjectEvent``) or
another type (``#ObjectEvent``, a subtype); ``#T`` locates every event that one of T's
targets, or (recursively) one of its subtypes' targets, locates. ``#T`` and ``//#T`` mean
the same (the thesis writes the second for base types).

Types are defined at run time, before or after the subscriptions that use them; a
subscription whose type is not (yet) defined is accepted and matches nothing until it is.
A definition that would make a type its own subtype is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from siftbus.errors import SubscriptionError
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.xpath import TYPE_NAME, Target, compile_target

#: entries of one type at most
MAX_ENTRIES = 1000


@dataclass(frozen=True, slots=True)
class TypeEntry:
    """One type's definition: its own targets and its direct subtypes."""

    name: str
    targets: tuple[Target, ...]
    subtypes: tuple[str, ...]

    def texts(self) -> list[str]:
        return [t.text for t in self.targets] + ["#" + n for n in self.subtypes]


class TypeHierarchy:
    """Type name -> targets and subtypes; :meth:`resolve` gives the concrete targets."""

    def __init__(self) -> None:
        self._types: dict[str, TypeEntry] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __len__(self) -> int:
        return len(self._types)

    def entries(self) -> list[TypeEntry]:
        return [self._types[n] for n in sorted(self._types)]

    def define(self, name: str, entries: Iterable[str],
               namespaces: Mapping[str, str] | None = None) -> TypeEntry:
        """Define (or redefine) a type; entries are targets or ``#Subtype`` names.

        Raises :class:`~siftbus.errors.SubscriptionError` for a bad name, a bad target,
        or a cycle (a type that would be its own subtype).
        """
        if not TYPE_NAME.match(name):
            raise SubscriptionError(f"not an event type name: {quoted(name)}", field="type")
        targets: list[Target] = []
        subtypes: list[str] = []
        items = list(entries)
        if len(items) > MAX_ENTRIES:
            raise SubscriptionError(f"type {quoted(name)} has more than {MAX_ENTRIES} entries",
                                    field="type")
        for text in items:
            t = compile_target(text, namespaces)
            if t.type_name is not None:
                if t.type_name not in subtypes:
                    subtypes.append(t.type_name)
            elif t not in targets:
                targets.append(t)
        entry = TypeEntry(name, tuple(targets), tuple(subtypes))
        old = self._types.get(name)
        self._types[name] = entry
        if self._reaches(name, name, set(), first=True):
            if old is None:
                del self._types[name]
            else:
                self._types[name] = old
            raise SubscriptionError(f"type {quoted(name)} would be its own subtype",
                                    field="type")
        return entry

    def undefine(self, name: str) -> None:
        """Forget a type (subscriptions using it then match nothing through it)."""
        if self._types.pop(name, None) is None:
            raise SubscriptionError(f"no event type {quoted(name)}", field="type")

    def _reaches(self, start: str, goal: str, seen: set[str], *, first: bool = False) -> bool:
        if not first and start == goal:
            return True
        if start in seen:
            return False
        seen.add(start)
        entry = self._types.get(start)
        return entry is not None and any(self._reaches(s, goal, seen) for s in entry.subtypes)

    def resolve(self, name: str) -> tuple[Target, ...]:
        """Every concrete target of the type and of its subtypes, in definition order
        (none while the type is not defined)."""
        out: dict[str, Target] = {}
        stack = [name]
        seen: set[str] = set()
        while stack:
            n = stack.pop(0)
            if n in seen:
                continue
            seen.add(n)
            entry = self._types.get(n)
            if entry is None:
                continue
            for t in entry.targets:
                out.setdefault(t.key, t)
            stack.extend(entry.subtypes)
        return tuple(out.values())

    def using(self, names: Iterable[str]) -> set[str]:
        """The types whose resolution depends on any of ``names`` (those included)."""
        changed = set(names)
        out = set(changed)
        for n in self._types:
            if any(self._reaches_any(n, changed)):
                out.add(n)
        return out

    def _reaches_any(self, start: str, goals: set[str]) -> Iterable[bool]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            n = stack.pop()
            if n in goals:
                yield True
                return
            if n in seen:
                continue
            seen.add(n)
            entry = self._types.get(n)
            if entry is not None:
                stack.extend(entry.subtypes)
        yield False
