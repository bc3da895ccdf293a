"""One compiled index over a fixed set of profiles, with its tombstones and its
per-event path: a level of :class:`~siftbus.match.leveled.LeveledMatcher`.

A level matches single events through the compiled index's own function when it has one
(``id_matcher``: from the event's keys to its ids in one call, the id prefetch inside
the kernel), else through its runner (``event_runner``) and the id prefetch of
:mod:`siftbus.match.prefetch_numba`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from siftbus.match import kernel
from siftbus.match.columns import ProfileColumns
from siftbus.model import Event

NO_TOMBSTONES = np.zeros(0, np.uint8)
"""``alive`` of a level where nothing is removed (the kernels then check nothing)."""
_NO_ADDRS = np.zeros(0, np.int64)
_UNCHOSEN = object()
_TUPLE_ITEMS = tuple.__basicsize__  # where a tuple's item pointers start (CPython)

PREFETCH_FROM = 1 << 15
"""Levels of fewer profiles match without prefetching their ids (they stay in cache)."""

MEMBERS_MAX = 1 << 16
"""Levels compiled from adds of at most this many profiles keep a dict of their ids
(``Level.members``); larger ones are searched."""


@dataclass(slots=True)
class Level:
    """One compiled index over a fixed set of profiles, with its tombstones."""

    compiled: Any
    alive: np.ndarray
    live: int
    runner: Callable[[Event, np.ndarray, np.ndarray], int]
    n: int
    """Profiles compiled here (``compiled.n``, kept as a plain attribute for the per-event
    path)."""
    buf: np.ndarray = field(default_factory=lambda: np.empty(256, np.int32))
    view: memoryview = field(init=False)
    """``memoryview(buf)``."""
    id_list: tuple[str, ...] | None = None
    """The ids as Python strings, made on the first per-event match (indexing a tuple is
    twice as fast as converting from the numpy array; bulk paths never need it)."""
    id_addrs: np.ndarray = field(default_factory=lambda: _NO_ADDRS)
    """Where each of ``id_list``'s strings is (``id``), for the prefetch."""
    prefetch: Callable[[np.ndarray, int, np.ndarray, int], int] | None = None
    """:func:`~siftbus.match.prefetch_numba.prefetch_ids` when the process runs numba
    kernels and the level is large enough for its ids to miss the cache (for levels
    matched through their runner, :meth:`_run_one`)."""
    prefetch_for: object = _UNCHOSEN
    """The kernels ``prefetch`` was chosen under (chosen again when they change)."""
    fast: Callable[[Event, np.ndarray], list[str]] | None = None
    """``match(event, alive) -> ids``, made at the first per-event match
    (:meth:`_per_event`)."""
    own_prefetch: bool = False
    """Whether ``fast`` is the compiled index's own function, which prefetches the ids
    itself (with ``id_addrs``)."""
    members: dict[str, int] | None = None
    """Rank of each id, in levels of at most :data:`MEMBERS_MAX` profiles compiled
    from adds: finding an id there is one dict lookup, not a ~1 us binary search."""
    cols: ProfileColumns | None = None
    """The columns the level was compiled from, kept by the same levels: a merge takes
    them as they are instead of reading the profiles back from the index arrays."""

    def __post_init__(self) -> None:
        self.view = self.buf.data

    @classmethod
    def of(cls, compiled: Any, cols: ProfileColumns | None = None) -> Level:
        """A level of ``compiled``; with ``cols`` (what it was compiled from) and at most
        :data:`MEMBERS_MAX` profiles, it keeps ``members`` and ``cols``."""
        n = int(compiled.n)
        level = cls(compiled, np.ones(n, np.uint8), n, compiled.event_runner(), n)
        if cols is not None and n <= MEMBERS_MAX:
            level.members = dict(zip(compiled.ids.tolist(), range(n), strict=True))
            level.cols = cols
        return level

    @property
    def size(self) -> int:
        return self.n

    def tombstones(self) -> np.ndarray:
        """``alive`` when some profile is removed, else an empty array (no checks)."""
        return self.alive if self.live < self.compiled.n else NO_TOMBSTONES

    def match_one(self, event: Event) -> list[str]:
        """Ids matched by one event, sorted (the per-event path)."""
        fast = self.fast
        if fast is None:
            fast = self.fast = self._per_event()
        return fast(event, self.alive if self.live < self.n else NO_TOMBSTONES)

    def _per_event(self) -> Callable[[Event, np.ndarray], list[str]]:
        """The function of :meth:`match_one`, made at its first call: the compiled
        index's own (``id_matcher``: one call from the event to its ids, the id prefetch
        in the kernel, for levels of at least :data:`PREFETCH_FROM` profiles), else
        :meth:`_run_one` (the runner, then the ids)."""
        ids = self.id_list
        if ids is None:
            ids = self.id_list = tuple(self.compiled.ids.tolist())
        made = getattr(self.compiled, "id_matcher", None)
        if made is not None:
            if len(ids) >= PREFETCH_FROM and len(self.id_addrs) != len(ids):
                self.id_addrs = np.fromiter(map(id, ids), np.int64, len(ids))
            made = made(ids, self.id_addrs)
        self.own_prefetch = made is not None
        return made if made is not None else self._run_one

    def _run_one(self, event: Event, alive: np.ndarray) -> list[str]:
        """:meth:`match_one` through the runner (ranks are read through a memoryview of
        the buffer, cheaper than slicing the numpy array)."""
        k = self.runner(event, alive, self.buf)
        if not k:
            return []
        if k > len(self.buf):
            self.buf = np.empty(2 * k, np.int32)
            self.view = self.buf.data
            k = self.runner(event, alive, self.buf)
        ids = self.id_list
        assert ids is not None
        if self.prefetch_for is not kernel.STATE.impl:
            self._choose_prefetch()
        if self.prefetch is not None:
            self.prefetch(self.buf, k, self.id_addrs, id(ids) + _TUPLE_ITEMS)
        return [ids[r] for r in self.view[:k]]

    def prefetching(self) -> bool:
        """Whether this level's per-event matches prefetch their ids now (only numba
        kernels do, and only in levels of at least :data:`PREFETCH_FROM` profiles)."""
        if self.own_prefetch:
            return len(self.id_addrs) > 0 and kernel.name() == "numba"
        return self.prefetch is not None

    def _choose_prefetch(self) -> None:
        self.prefetch_for = kernel.STATE.impl
        self.prefetch = None
        ids = self.id_list
        if ids is None or len(ids) < PREFETCH_FROM or kernel.name() != "numba":
            return
        if len(self.id_addrs) != len(ids):
            self.id_addrs = np.fromiter(map(id, ids), np.int64, len(ids))
        from siftbus.match.prefetch_numba import compiled_prefetch

        self.prefetch = compiled_prefetch(self.buf, self.id_addrs)

    def rank_of(self, pid: str) -> int:
        """The rank of ``pid`` when it is here and alive, else -1."""
        if self.members is not None:
            i = self.members.get(pid, -1)
            return i if i >= 0 and self.alive[self.compiled.slot(i)] else -1
        ids = self.compiled.ids
        if len(pid) > ids.itemsize >> 2:
            # longer than every id here; searching would first copy ``ids`` to the wider
            # dtype (1.3 ms at 100,000 ids, against 1 us)
            return -1
        i = int(ids.searchsorted(pid))
        if i >= len(ids) or (self.id_list[i] if self.id_list is not None else ids[i]) != pid:
            return -1
        return i if self.alive[self.compiled.slot(i)] else -1

    def live_ranks(self) -> np.ndarray:
        if self.live == self.compiled.n:
            return np.arange(self.compiled.n)
        return self.compiled.ranks_alive(self.alive)

    def live_columns(self) -> ProfileColumns:
        """Live profiles as columns, sorted by id."""
        cols: ProfileColumns = self.cols if self.cols is not None else \
            self.compiled.columns()
        if self.live == self.compiled.n:
            return cols
        return cols.take(self.compiled.ranks_alive(self.alive))
