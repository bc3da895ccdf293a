"""Dynamic matchers over immutable compiled indexes: levels, tombstones, a small pending set.

A compiled index (PrimAS or counting) is built in one vectorised pass and never changes,
so readers (the batch kernel, a Spark broadcast) never see a half-applied update. The
dynamic :class:`LeveledMatcher` keeps per event type:

* ``pending``: profiles added since the last compile, matched one by one while they are
  few (at most ``pending_limit``);
* ``levels``: compiled indexes over disjoint profile subsets, largest first. Pending
  profiles become a new level; a level at least half the size of its elder neighbour is
  merged into it (a binary-counter schedule), so each profile is recompiled
  O(log n) times in total and a match visits O(log n) levels;
* tombstones: ``remove`` clears one byte of the level's ``alive`` array; a level that is
  more dead than alive is recompiled from its live profiles.

No update ever rebuilds the whole index; the cost of an add is amortised over the
levels (the DAS "Leerfelder"/"Änderung" tuning becomes ``pending_limit`` and the merge
ratio).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from siftbus.match.base import ProfileRegistry, positions_by_type
from siftbus.match.cells import AttributeCells, column_cells, event_cells, events_to_columns
from siftbus.model import Event, EventType, Profile

_ID = attrgetter("id")

#: keep every OBSERVE_STRIDE-th matched event as a sample for ``optimize()``
OBSERVE_STRIDE = 8
OBSERVE_KEEP = 4096


class Compiled(Protocol):
    """What a compiled per-type index offers to :class:`LeveledMatcher`."""

    @property
    def cells(self) -> tuple[AttributeCells, ...]: ...

    @property
    def n(self) -> int: ...

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(offsets, ranks)`` of the profiles each cell row matches."""

    def slot(self, rank: int) -> int:
        """The slot (index into ``alive``) of the profile of this rank."""

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        """Sorted ranks of the slots that are alive."""


@dataclass(slots=True)
class Level:
    """One compiled index over a fixed list of profiles (ranks = positions in ``ids``)."""

    compiled: Any
    profiles: list[Profile]
    ids: list[str]
    alive: np.ndarray
    live: int
    buf: np.ndarray = field(default_factory=lambda: np.empty(256, np.int32))
    bounds: list[tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        cells = self.compiled.cells
        if all(ac.ordered for ac in cells):
            self.bounds = [ac.bounds_seq for ac in cells]

    def match_one(self, event: Event) -> list[str]:
        """Ids matched by one event, sorted (the per-event fast path)."""
        keys = event.keys
        if self.bounds is not None:
            row = [bisect_right(b, k) - 1 for b, k in zip(self.bounds, keys, strict=True)]
        else:
            row = event_cells(self.compiled.cells, event)
        cells = np.array([row], dtype=np.int32)
        alive = self.alive if self.live < len(self.profiles) else None
        k = self.compiled.run_one(cells, alive, self.buf)
        if k > len(self.buf):
            self.buf = np.empty(2 * k, np.int32)
            k = self.compiled.run_one(cells, alive, self.buf)
        ids = self.ids
        return [ids[r] for r in self.buf[:k].tolist()]

    def slot_of(self, pid: str) -> int:
        """The live slot of ``pid`` in ``alive``, or -1."""
        i = bisect_left(self.ids, pid)
        if i < len(self.ids) and self.ids[i] == pid:
            slot = self.compiled.slot(i)
            if self.alive[slot]:
                return int(slot)
        return -1

    def live_profiles(self) -> list[Profile]:
        """Live profiles, sorted by id."""
        if self.live == len(self.profiles):
            return self.profiles
        ranks = self.compiled.ranks_alive(self.alive)
        return [self.profiles[r] for r in ranks.tolist()]


@dataclass(slots=True)
class TypeState:
    """Per event type: pending profiles, compiled levels and observed event samples."""

    etype: EventType
    pending: dict[str, Profile] = field(default_factory=dict)
    levels: list[Level] = field(default_factory=list)
    observed: deque[tuple[Any, ...]] = field(default_factory=lambda: deque(maxlen=OBSERVE_KEEP))
    seen: int = 0
    dirty: bool = False


class LeveledMatcher(ProfileRegistry):
    """Base of the dynamic matchers; subclasses provide :meth:`_compile`."""

    def __init__(self, *, pending_limit: int = 16) -> None:
        if pending_limit < 0:
            raise ValueError("pending_limit must be >= 0")
        super().__init__()
        self._pending_limit = pending_limit
        self._types: dict[str, TypeState] = {}
        self._version = 0

    # -- subclass hook -------------------------------------------------------------

    def _compile(self, etype: EventType, profiles: Sequence[Profile]) -> Any:
        """A compiled index over ``profiles`` (sorted by id)."""
        raise TypeError(f"{type(self).__name__} does not define _compile")

    # -- Matcher protocol ----------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped on every change of the profile set or of the evaluation order."""
        return self._version

    def add(self, profile: Profile) -> None:
        self._register(profile)
        ts = self._types.get(profile.type_name)
        if ts is None:
            ts = self._types[profile.type_name] = TypeState(profile.etype)
        ts.pending[profile.id] = profile
        ts.dirty = True
        self._version += 1

    def remove(self, profile_id: str) -> Profile:
        profile = self._unregister(profile_id)
        self._version += 1
        ts = self._types[profile.type_name]
        ts.dirty = True
        if ts.pending.pop(profile_id, None) is not None:
            return profile
        for level in ts.levels:
            slot = level.slot_of(profile_id)
            if slot >= 0:
                level.alive[slot] = 0
                level.live -= 1
                return profile
        raise AssertionError(f"profile {profile_id!r} is registered but in no level")

    def match(self, event: Event) -> list[str]:
        ts = self._types.get(event.type_name)
        if ts is None:
            return []
        ts.seen += 1
        if ts.seen % OBSERVE_STRIDE == 1:
            ts.observed.append(event.keys)
        if ts.dirty:
            self._settle(ts)
        if not ts.pending and len(ts.levels) == 1:
            return ts.levels[0].match_one(event)
        parts: list[list[str]] = []
        for level in ts.levels:
            hits = level.match_one(event)
            if hits:
                parts.append(hits)
        if ts.pending:
            parts.append(sorted(pid for pid, p in ts.pending.items() if p.matches(event)))
        return _merge(parts)

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in events]
        for tname, idx in positions_by_type(events).items():
            ts = self._types.get(tname)
            if ts is None:
                continue
            group = [events[i] for i in idx]
            for e in group[::OBSERVE_STRIDE]:
                ts.observed.append(e.keys)
            if ts.dirty:
                self._settle(ts)
            per_event: list[list[list[str]]] = [[] for _ in group]
            columns = events_to_columns(ts.etype, group) if ts.levels else {}
            for level in ts.levels:
                cells = column_cells(level.compiled.cells, columns, len(group))
                alive = level.alive if level.live < len(level.profiles) else None
                offsets, slots = level.compiled.run(cells, alive)
                ids = level.ids
                off = offsets.tolist()
                sl = slots.tolist()
                for j in range(len(group)):
                    if off[j + 1] > off[j]:
                        per_event[j].append([ids[s] for s in sl[off[j]:off[j + 1]]])
            if ts.pending:
                pend = list(ts.pending.items())
                for j, e in enumerate(group):
                    hits = sorted(pid for pid, p in pend if p.matches(e))
                    if hits:
                        per_event[j].append(hits)
            for j, i in enumerate(idx):
                out[i] = _merge(per_event[j])
        return out

    # -- maintenance ---------------------------------------------------------------

    def _new_level(self, etype: EventType, profiles: list[Profile]) -> Level:
        profiles = sorted(profiles, key=_ID)
        compiled = self._compile(etype, profiles)
        return Level(compiled, profiles, list(map(_ID, profiles)),
                     np.ones(len(profiles), np.uint8), len(profiles))

    def _settle(self, ts: TypeState) -> None:
        """Compile pending profiles, drop or shrink mostly-dead levels, merge levels."""
        ts.dirty = False
        changed = False
        if len(ts.pending) > self._pending_limit:
            ts.levels.append(self._new_level(ts.etype, list(ts.pending.values())))
            ts.pending.clear()
            changed = True
        for i, level in enumerate(ts.levels):
            if level.live * 2 < len(level.profiles):
                ts.levels[i] = self._new_level(ts.etype, level.live_profiles())
                changed = True
        if not changed:
            return
        levels = sorted((lv for lv in ts.levels if lv.live), key=lambda lv: -lv.live)
        while len(levels) >= 2 and levels[-1].live * 2 >= levels[-2].live:
            young = levels.pop()
            old = levels.pop()
            merged = self._new_level(ts.etype, old.live_profiles() + young.live_profiles())
            levels.append(merged)
            levels.sort(key=lambda lv: -lv.live)
        ts.levels = levels

    def _recompile_all(self) -> None:
        """One fresh level per type holding every profile (used by ``optimize``)."""
        for ts in self._types.values():
            profiles = [p for lv in ts.levels for p in lv.live_profiles()]
            profiles.extend(ts.pending.values())
            ts.pending.clear()
            ts.levels = [self._new_level(ts.etype, profiles)] if profiles else []
        self._version += 1

    def _type_profiles(self, ts: TypeState) -> list[Profile]:
        """Every live profile of a type, sorted by id."""
        if not ts.pending and len(ts.levels) == 1 and ts.levels[0].live == len(
                ts.levels[0].profiles):
            return ts.levels[0].profiles
        out = [p for lv in ts.levels for p in lv.live_profiles()]
        out.extend(ts.pending.values())
        out.sort(key=_ID)
        return out


def _merge(parts: list[list[str]]) -> list[str]:
    if not parts:
        return []
    if len(parts) == 1:
        return parts[0]
    return list(heapq.merge(*parts))
