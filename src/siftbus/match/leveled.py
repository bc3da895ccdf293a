"""Dynamic matchers over immutable compiled indexes: levels, tombstones, a delta of adds.

A compiled index (PrimAS or counting) is built in one vectorised pass and never changes,
so readers (the batch kernel, a Spark broadcast) never see a half-applied update. The
dynamic :class:`LeveledMatcher` keeps per event type:

* ``pending``: profiles added one at a time since the last compile: up to
  ``delta_limit`` as flat rows matched by one kernel call (:mod:`siftbus.match.delta`),
  of which at most ``pending_limit`` that the delta cannot hold (string conditions,
  extended profiles), matched one by one;
* ``levels``: compiled indexes over disjoint profile subsets, largest first. Pending
  profiles (or a whole batch given to :meth:`LeveledMatcher.add_columns`) become a new
  level; :data:`FANOUT` levels of one size class are merged into one (tiered), so each
  profile is recompiled about ``log(n, FANOUT)`` times in total and a match visits at
  most ``FANOUT - 1`` levels per class;
* tombstones: ``remove`` clears one byte of the level's ``alive`` array; a level that is
  more dead than alive is recompiled from its live profiles.

Compiled levels keep no :class:`~siftbus.model.Profile` objects: the index arrays are
the stored form of the profiles, and ``get``, ``remove`` and ``profiles`` make them anew
(:meth:`Compiled.profile`). No update ever rebuilds the whole index; the cost of an add
is amortised over the levels (the DAS "Leerfelder"/"Änderung" tuning becomes
``delta_limit`` and the fan-out).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.match.base import positions_by_type
from siftbus.match.cells import AttributeCells, column_cells, events_to_columns
from siftbus.match.columns import ProfileColumns
from siftbus.match.delta import Delta, rows_of, takes_type
from siftbus.match.level import NO_TOMBSTONES, Level
from siftbus.model import Event, EventType, Profile

#: keep every OBSERVE_STRIDE-th matched event as a sample for ``optimize()``
OBSERVE_STRIDE = 8
OBSERVE_KEEP = 4096

DELTA_LIMIT = 2048
"""Profiles a type's :class:`~siftbus.match.delta.Delta` holds before they are compiled
into a level (when ``pending_limit`` is not 0)."""

FANOUT = 4
"""Levels of one size class merged at once (see :meth:`LeveledMatcher._merge_levels`):
each profile is recompiled about ``log(n / DELTA_LIMIT, FANOUT)`` times, and a type has
at most ``FANOUT - 1`` levels per class."""

TRIM_AFTER = 100_000
"""A bulk load of at least this many profiles hands the heap it freed back to the OS."""


def release_free_memory() -> None:
    """Return freed heap memory to the operating system (glibc's ``malloc_trim``).

    Compiling a large level allocates several times the memory it keeps; glibc keeps the
    freed part in the process, so a million profiles would hold twice the RSS they need.
    Elsewhere (other C libraries) this does nothing.
    """
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None


class Compiled(Protocol):
    """What a compiled per-type index offers to :class:`LeveledMatcher`."""

    @property
    def cells(self) -> tuple[AttributeCells, ...]: ...

    @property
    def n(self) -> int: ...

    @property
    def ids(self) -> np.ndarray:
        """Profile ids by rank (plain string order)."""

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(offsets, ranks)`` of the profiles each cell row matches."""

    def event_runner(self) -> Callable[[Event, np.ndarray, np.ndarray], int]:
        """A function ``run(event, alive, out) -> count`` writing one event's sorted ranks
        to ``out`` (a count above ``len(out)``: call again with a larger ``out``)."""

    def slot(self, rank: int) -> int:
        """The slot (index into ``alive``) of the profile of this rank."""

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        """Sorted ranks of the slots that are alive."""

    def columns(self) -> ProfileColumns:
        """Every profile, in rank order."""

    def profile(self, rank: int) -> Profile:
        """The profile of this rank, made anew."""


@dataclass(slots=True)
class TypeState:
    """Per event type: pending profiles, compiled levels and observed event samples."""

    etype: EventType
    pending: dict[str, Profile] = field(default_factory=dict)
    """Every profile added since the last compile."""
    slow: dict[str, Profile] = field(default_factory=dict)
    """The pending profiles ``delta`` does not hold, matched one by one."""
    delta: Delta | None = None
    """The rows of the other pending profiles (``None``: the type has attributes a
    delta cannot take, :func:`~siftbus.match.delta.takes_type`)."""
    levels: list[Level] = field(default_factory=list)
    observed: deque[tuple[Any, ...]] = field(default_factory=lambda: deque(maxlen=OBSERVE_KEEP))
    seen: int = 0
    dirty: bool = False


class LeveledMatcher:
    """Base of the dynamic matchers; subclasses provide :meth:`_compile`."""

    def __init__(self, *, pending_limit: int = 16, delta_limit: int | None = None) -> None:
        if pending_limit < 0:
            raise ValueError("pending_limit must be >= 0")
        if delta_limit is not None and delta_limit < 0:
            raise ValueError("delta_limit must be >= 0")
        self._pending_limit = pending_limit
        self._delta_limit = max(pending_limit, (DELTA_LIMIT if pending_limit else 0)
                                if delta_limit is None else delta_limit)
        self._types: dict[str, TypeState] = {}
        self._version = 0
        self._count = 0

    # -- subclass hook -------------------------------------------------------------

    def _compile(self, cols: ProfileColumns) -> Any:
        """A compiled index over ``cols`` (sorted by id)."""
        raise TypeError(f"{type(self).__name__} does not define _compile")

    # -- Matcher protocol ----------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped on every change of the profile set or of the evaluation order."""
        return self._version

    def __len__(self) -> int:
        return self._count

    def __contains__(self, profile_id: object) -> bool:
        return isinstance(profile_id, str) and self._find(profile_id) is not None

    def get(self, profile_id: str) -> Profile:
        found = self._find(profile_id)
        if found is None:
            raise _unknown(profile_id)
        ts, level, rank = found
        if level is None:
            return ts.pending[profile_id]
        return level.compiled.profile(rank)

    def profiles(self) -> Iterator[Profile]:
        """Every registered profile (made anew from the levels; a snapshot of the set
        when the iteration starts)."""
        frozen = [(list(ts.pending.values()),
                   [(lv.compiled, lv.alive.copy()) for lv in ts.levels])
                  for ts in self._types.values()]
        for pending, levels in frozen:
            yield from pending
            for compiled, alive in levels:
                for r in compiled.ranks_alive(alive).tolist():
                    yield compiled.profile(r)

    def add(self, profile: Profile) -> None:
        ts = self._state(profile.etype)
        self._insert(profile, ts, rows_of(profile) if ts.delta is not None else None)

    def _insert(self, profile: Profile, ts: TypeState, rows: list[int] | None) -> None:
        """:meth:`add` with the profile's delta rows (:func:`~siftbus.match.delta.rows_of`;
        ``None``: matched one by one) and type state found."""
        pid = profile.id
        if self._registered(pid):
            raise _duplicate(pid)
        ts.pending[pid] = profile
        delta = ts.delta
        if delta is None or rows is None:
            ts.slow[pid] = profile
        else:
            delta.add(pid, profile.subscriber, rows)
        ts.dirty = True
        self._version += 1
        self._count += 1

    def add_columns(self, cols: ProfileColumns, *, unregistered: bool = False) -> None:
        """Add every profile of ``cols`` at once (one compile, no per-profile objects).

        Raises :class:`DuplicateProfileError` (and adds nothing) when an id repeats in
        ``cols`` or is already registered. ``unregistered``: the caller knows no id of
        ``cols`` is registered, so they are not looked up in the levels (one binary
        search of every id in every level: 0.03 CPU-s for 10 types of 10,000).
        """
        if not len(cols):
            return
        cols = cols.sorted_by_id()
        ids = cols.ids
        dup = np.flatnonzero(ids[1:] == ids[:-1])
        if len(dup):
            pid = str(ids[dup[0]])
            raise DuplicateProfileError(f"profile id {pid!r} is given twice", field=pid)
        for ts in () if unregistered else self._types.values():
            for pid in ts.pending:
                i = int(np.searchsorted(ids, pid))
                if i < len(ids) and ids[i] == pid:
                    raise _duplicate(pid)
            for level in ts.levels:
                have = level.compiled.ids
                pos = np.minimum(np.searchsorted(have, ids), max(len(have) - 1, 0))
                hit = np.flatnonzero(have[pos] == ids) if len(have) else pos[:0]
                for i in hit.tolist():
                    if level.alive[level.compiled.slot(int(pos[i]))]:
                        raise _duplicate(str(ids[i]))
        ts = self._state(cols.etype)
        n = len(cols)
        ts.levels.append(Level.of(self._compile(cols)))
        del cols
        self._merge_levels(ts)
        self._version += 1
        self._count += n
        if n >= TRIM_AFTER:
            release_free_memory()

    def remove(self, profile_id: str) -> Profile:
        found = self._find(profile_id)
        if found is None:
            raise _unknown(profile_id)
        ts, level, rank = found
        self._version += 1
        self._count -= 1
        ts.dirty = True
        if level is None:
            if ts.slow.pop(profile_id, None) is None and ts.delta is not None:
                ts.delta.remove(profile_id)
            return ts.pending.pop(profile_id)
        profile: Profile = level.compiled.profile(rank)
        level.alive[level.compiled.slot(rank)] = 0
        level.live -= 1
        return profile

    def match(self, event: Event) -> list[str]:
        ts = self._types.get(event.etype.name)
        if ts is None:
            return []
        ts.seen += 1
        if ts.seen % OBSERVE_STRIDE == 1:
            ts.observed.append(event.keys)
        if ts.dirty:
            self._settle(ts)
        levels = ts.levels
        if len(levels) == 1 and not ts.pending:
            lv = levels[0]  # Level.match_one, written out: the per-event path
            fast = lv.fast
            if fast is not None:
                return fast(event, lv.alive if lv.live < lv.n else NO_TOMBSTONES)
            return lv.match_one(event)
        parts: list[list[str]] = []
        for level in levels:
            hits = level.match_one(event)
            if hits:
                parts.append(hits)
        if ts.pending:
            parts.extend(p for p in _pending_hits(ts, event) if p)
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
            per_level: list[list[list[str]]] = []
            columns = events_to_columns(ts.etype, group) if ts.levels else {}
            for level in ts.levels:
                cells = column_cells(level.compiled.cells, columns, len(group))
                offsets, ranks = level.compiled.run(cells, level.tombstones())
                per_level.append(split_rows(level.compiled.ids, offsets, ranks))
            if ts.pending:
                per_level.append([_merge([p for p in _pending_hits(ts, e) if p])
                                  for e in group])
            if len(per_level) == 1:
                for i, row in zip(idx, per_level[0], strict=True):
                    out[i] = row
            else:
                for j, i in enumerate(idx):
                    out[i] = _merge([rows[j] for rows in per_level if rows[j]])
        return out

    # -- maintenance ---------------------------------------------------------------

    def _state(self, etype: EventType) -> TypeState:
        ts = self._types.get(etype.name)
        if ts is None:
            ts = self._types[etype.name] = TypeState(
                etype, delta=Delta(etype) if takes_type(etype) else None)
        return ts

    def _find(self, pid: str) -> tuple[TypeState, Level | None, int] | None:
        for ts in self._types.values():
            if pid in ts.pending:
                return ts, None, -1
            for level in ts.levels:
                members = level.members
                if members is not None and pid not in members:
                    continue
                r = level.rank_of(pid)
                if r >= 0:
                    return ts, level, r
        return None

    def _registered(self, pid: str) -> bool:
        """``_find(pid) is not None``, for the duplicate check of every add: a level with
        ``members`` is searched only when it holds the id."""
        for ts in self._types.values():
            if pid in ts.pending:
                return True
            for level in ts.levels:
                members = level.members
                if (members is None or pid in members) and level.rank_of(pid) >= 0:
                    return True
        return False

    def _new_level(self, cols: ProfileColumns) -> Level:
        cols = cols.sorted_by_id()
        return Level.of(self._compile(cols), cols)

    def _settle(self, ts: TypeState) -> None:
        """Compile pending profiles, drop or shrink mostly-dead levels, merge levels."""
        ts.dirty = False
        fresh: list[ProfileColumns] = []
        if len(ts.slow) > self._pending_limit or len(ts.pending) > self._delta_limit:
            fresh.append(_pending_columns(ts))
            _clear_pending(ts)
        dying = [lv for lv in ts.levels if lv.live * 2 < lv.size]
        if dying:
            ts.levels = [lv for lv in ts.levels if lv.live * 2 >= lv.size]
            fresh.extend(lv.live_columns() for lv in dying if lv.live)
        if fresh or dying:
            self._merge_levels(ts, fresh)

    def _merge_levels(self, ts: TypeState, fresh: Sequence[ProfileColumns] = ()) -> None:
        """Merge every :data:`FANOUT` levels of one size class (``live`` profiles in
        ``[FANOUT**c, FANOUT**(c + 1))``) into one level of a larger class; ``fresh``
        profile sets join as levels of their size. Only what remains is compiled: a set
        that a merge takes at once (a delta joining three of its class) is not compiled
        first."""
        parts: list[Level | ProfileColumns] = [lv for lv in ts.levels if lv.live]
        parts.extend(c for c in fresh if len(c))
        while True:
            by_class: dict[int, list[Level | ProfileColumns]] = {}
            for x in parts:
                by_class.setdefault(size_class(_live(x)), []).append(x)
            full = [group for group in by_class.values() if len(group) >= FANOUT]
            if not full:
                break
            group = min(full, key=lambda g: _live(g[0]))
            parts = [x for x in parts if all(x is not g for g in group)]
            parts.append(ProfileColumns.concat(
                [x.live_columns() if isinstance(x, Level) else x for x in group]))
        ts.levels = sorted((x if isinstance(x, Level) else self._new_level(x) for x in parts),
                           key=lambda lv: -lv.live)

    def _recompile_all(self) -> None:
        """One fresh level per type holding every profile (used by ``optimize``)."""
        for ts in self._types.values():
            cols = self._type_columns(ts)
            _clear_pending(ts)
            ts.levels = [self._new_level(cols)] if cols is not None else []
        self._version += 1

    def _type_columns(self, ts: TypeState) -> ProfileColumns | None:
        """Every live profile of a type as columns, sorted by id (``None``: none)."""
        parts = [lv.live_columns() for lv in ts.levels if lv.live]
        if ts.pending:
            parts.append(_pending_columns(ts))
        if not parts:
            return None
        return ProfileColumns.concat(parts).sorted_by_id()


def split_rows(ids: np.ndarray, offsets: np.ndarray, ranks: np.ndarray) -> list[list[str]]:
    """CSR rows of ranks as lists of ids (one bulk conversion, then slices)."""
    flat = ids[ranks].tolist()
    off = offsets.tolist()
    return [flat[off[j]:off[j + 1]] for j in range(len(off) - 1)]


def _live(part: Level | ProfileColumns) -> int:
    return part.live if isinstance(part, Level) else len(part)


def size_class(live: int) -> int:
    """The class of a level of ``live`` profiles: ``floor(log(live, FANOUT))``."""
    c = 0
    while live >= FANOUT:
        live //= FANOUT
        c += 1
    return c


def _pending_hits(ts: TypeState, event: Event) -> tuple[list[str], list[str]]:
    """The pending profiles ``event`` satisfies: the delta's and the others', each
    sorted."""
    fast = ts.delta.match_keys(event.keys) if ts.delta is not None and ts.delta.n else []
    slow = sorted(pid for pid, p in ts.slow.items() if p.matches(event)) if ts.slow else []
    return fast, slow


def _pending_columns(ts: TypeState) -> ProfileColumns:
    """The pending profiles as columns: the delta's read from its rows."""
    if ts.delta is None:
        return ProfileColumns.from_profiles(ts.etype, list(ts.pending.values()))
    if not ts.slow:
        return ts.delta.columns()
    return ProfileColumns.concat([ts.delta.columns(), ProfileColumns.from_profiles(
        ts.etype, list(ts.slow.values()))]).sorted_by_id()


def _clear_pending(ts: TypeState) -> None:
    ts.pending.clear()
    ts.slow.clear()
    if ts.delta is not None:
        ts.delta.clear()


def _merge(parts: list[list[str]]) -> list[str]:
    if not parts:
        return []
    if len(parts) == 1:
        return parts[0]
    return list(heapq.merge(*parts))


def _unknown(pid: str) -> UnknownProfileError:
    return UnknownProfileError(f"no profile with id {pid!r}", field=pid)


def _duplicate(pid: str) -> DuplicateProfileError:
    return DuplicateProfileError(f"profile id {pid!r} is already registered", field=pid)
