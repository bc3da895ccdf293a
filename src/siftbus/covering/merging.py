"""Merging what one neighbour holds from us (the ``merging`` strategy's export layer).

The forwarding table decides which profiles a neighbour must hold (its out(Y));
:class:`MergedExport` groups those profiles, per neighbour, into profiles that differ
in one ordered attribute only and sends each group as one merged profile. A perfect
merge is exact (:func:`~siftbus.covering.relations.merge` on the shared key: the
union of one attribute's intervals); with ``imperfect`` every profile of a type with
the same constrained attributes joins one group, merged into their per-attribute hull
(false positives are filtered by the receiver's exact table and never reach a client).

The layer is fed the changes of one atomic step in order (:meth:`add`, :meth:`remove`)
and :meth:`flush` turns them into what the neighbour must subscribe and unsubscribe:
the new merged profile of every group that changed, and the one it replaces.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass

from siftbus.covering.relations import merge
from siftbus.model import IntervalSet, Profile


@dataclass(slots=True)
class _Group:
    """Exported profiles sent as one merged profile."""

    key: Hashable | None
    """The key every member shares (``None`` while the group has one member)."""
    members: dict[str, Profile]
    exported: Profile | None = None
    """What the neighbour holds for the group now."""


class MergedExport:
    """Per-neighbour groups of exported profiles and the merged profile of each.

    Merged profiles get ids ``<name>/_m/<n>`` (``name``: the broker's), unique for the
    life of the object, and no subscriber.
    """

    def __init__(self, name: str, *, imperfect: bool = False) -> None:
        self.name = name
        self.imperfect = imperfect
        self._groups: dict[str, dict[int, _Group]] = defaultdict(dict)
        self._group_of: dict[str, dict[str, int]] = defaultdict(dict)
        self._group_keys: dict[str, dict[Hashable, int]] = defaultdict(dict)
        self._touched: dict[str, dict[int, Profile | None]] = defaultdict(dict)
        self._group_ids = itertools.count()
        self._merge_ids = itertools.count()

    def add(self, y: str, p: Profile) -> None:
        """``p`` joins what ``y`` holds: put it in a group that shares one of its keys."""
        keys = self._merge_keys(p)
        group_keys = self._group_keys[y]
        groups = self._groups[y]
        target = next((gi for k in keys if (gi := group_keys.get(k)) is not None), None)
        if target is None:
            target = next(self._group_ids)
            groups[target] = _Group(None, {})
            for k in keys:  # a singleton can pair along any of its keys
                group_keys.setdefault(k, target)
        g = groups[target]
        self._touch(y, target)
        if g.key is None and g.members:
            # second member: fix the group to the key both share, drop the other keys
            shared = next(k for k in keys if group_keys.get(k) == target)
            first = next(iter(g.members.values()))
            for k in self._merge_keys(first):
                if group_keys.get(k) == target and k != shared:
                    del group_keys[k]
            g.key = shared
        g.members[p.id] = p
        self._group_of[y][p.id] = target

    def remove(self, y: str, p: Profile) -> None:
        """``p`` leaves what ``y`` holds."""
        target = self._group_of[y].pop(p.id)
        g = self._groups[y][target]
        self._touch(y, target)
        del g.members[p.id]
        if not g.members:  # the group is gone: forget every key that leads to it
            group_keys = self._group_keys[y]
            for k in ([g.key] if g.key is not None else self._merge_keys(p)):
                if group_keys.get(k) == target:
                    del group_keys[k]

    def flush(self) -> dict[str, tuple[list[Profile], list[Profile]]]:
        """Per neighbour, the merged profiles to subscribe and those to unsubscribe
        after the changes since the last flush."""
        out: dict[str, tuple[list[Profile], list[Profile]]] = {}
        for y, touched in self._touched.items():
            groups = self._groups[y]
            subs: list[Profile] = []
            unsubs: list[Profile] = []
            for gi, old in touched.items():
                g = groups[gi]
                new: Profile | None = None
                if g.members:
                    same = old is not None and len(g.members) == 1 and old.id in g.members
                    new = old if same else self._merged(g)
                else:
                    del groups[gi]
                g.exported = new
                if new is not old:
                    if new is not None:
                        subs.append(new)
                    if old is not None:
                        unsubs.append(old)
            if subs or unsubs:
                out[y] = (subs, unsubs)
        self._touched.clear()
        return out

    def exported(self, y: str) -> list[Profile]:
        """What ``y`` holds from us now (as of the last flush)."""
        return [g.exported for g in self._groups.get(y, {}).values()
                if g.exported is not None]

    def count(self) -> int:
        """Merged profiles held by every neighbour together."""
        return sum(len(gs) for gs in self._groups.values())

    def drop(self, y: str) -> None:
        """Forget a neighbour (its link is gone)."""
        for table in (self._groups, self._group_of, self._group_keys, self._touched):
            table.pop(y, None)

    def _touch(self, y: str, gi: int) -> None:
        touched = self._touched[y]
        if gi not in touched:
            touched[gi] = self._groups[y][gi].exported

    def _merge_keys(self, p: Profile) -> list[Hashable]:
        """Profiles sharing a key differ only on that key's attribute (imperfect: any
        profile of the type with the same constrained attributes)."""
        if self.imperfect:
            return [(p.etype.name, tuple(c.position for c in p.conditions))]
        keys: list[Hashable] = []
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
        return acc.with_id(f"{self.name}/_m/{next(self._merge_ids)}", "")


__all__ = ["MergedExport"]
