"""The profiles added one at a time since the last compile, as flat rows (no index).

A compiled level costs about 1.3 ms to build whatever its size, so compiling every few
adds made a live index add a few thousand profiles per second. :class:`Delta` holds the
latest adds of a type whose attributes are all ordered as rows ``(attribute, lo, hi)``
per profile in growing arrays: an add appends its rows (no compile), a remove clears a
byte, and an event is matched against every row by one kernel call
(``Kernels.delta_match``: a profile matches when each of its attributes has a row
holding the event's key). That is linear in the rows, so a delta is compiled into a
level once it holds ``delta_limit`` profiles (:mod:`siftbus.match.leveled`).

Profiles with string conditions or extended features are not held here (their checks
need the profile): the leveled matcher matches those one by one, as few as
``pending_limit``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from siftbus.match import kernel
from siftbus.match.columns import ProfileColumns, str_array
from siftbus.model import EventType, IntervalSet, Profile

_INITIAL = 64


def takes_type(etype: EventType) -> bool:
    """Whether a delta can hold profiles of ``etype``: every attribute ordered and classic
    (events' keys are then all integers)."""
    return not etype.extended and all(a.domain.ordered for a in etype.attributes)


def rows_of(profile: Profile) -> list[int] | None:
    """``attribute, lo, hi`` of every interval of ``profile``'s conditions, flat,
    attributes in the profile's order; ``None`` when it has a condition a delta cannot
    hold."""
    if profile.extra is not None:
        return None
    rows: list[int] = []
    for c in profile.conditions:
        con = c.constraint
        if type(con) is not IntervalSet:
            return None
        pos = c.position
        for lo, hi in con.intervals:
            rows += (pos, lo, hi)
    return rows


class Delta:
    """Flat rows of the latest profiles of one event type (see the module docstring)."""

    __slots__ = ("_ends", "_impl", "_keys", "_keys_view", "_put", "_rows", "_synced",
                 "alive", "attr", "etype", "hi", "ids", "lo", "n", "off", "out", "slot",
                 "subs")

    def __init__(self, etype: EventType) -> None:
        m = len(etype.attributes)
        self.etype = etype
        self.ids: list[str] = []
        """Profile id by slot (removed ones included)."""
        self.subs: list[str] = []
        """Subscriber by slot (``""``: none)."""
        self.slot: dict[str, int] = {}
        """Slot of every live profile."""
        self.n = 0
        self._rows: list[int] = []  # attribute, lo, hi of every row, flat
        self._ends: list[int] = []  # rows up to the end of each profile
        self._synced = 0  # profiles whose rows are in the arrays below
        self.off = np.zeros(_INITIAL + 1, np.int64)
        self.attr = np.zeros(2 * _INITIAL, np.int64)
        self.lo = np.zeros(2 * _INITIAL, np.int64)
        self.hi = np.zeros(2 * _INITIAL, np.int64)
        self.alive = np.zeros(_INITIAL, np.uint8)
        self.out = np.zeros(_INITIAL, np.int32)
        self._keys = np.zeros(max(m, 1), np.int64)
        self._keys_view = self._keys.data
        self._put = struct.Struct(f"={m}q").pack_into
        self._impl: list[Any] = [object(), None]  # kernels specialised for, entry point

    def __len__(self) -> int:
        return len(self.slot)

    def add(self, pid: str, subscriber: str, rows: list[int]) -> None:
        """Append a profile's rows (:func:`rows_of`; they reach the arrays at the next
        match, in one conversion for all adds since)."""
        n = self.n
        if n >= len(self.alive):
            self.alive = _grown(self.alive, 2 * n)
            self.out = np.zeros(2 * n, np.int32)
        self.alive[n] = 1
        self._rows += rows
        self._ends.append(len(self._rows) // 3)
        self.ids.append(pid)
        self.subs.append(subscriber)
        self.slot[pid] = n
        self.n = n + 1

    def remove(self, pid: str) -> None:
        self.alive[self.slot.pop(pid)] = 0

    def clear(self) -> None:
        self.ids.clear()
        self.subs.clear()
        self.slot.clear()
        self._rows.clear()
        self._ends.clear()
        self.n = self._synced = 0
        self.alive[:] = 0

    def _sync(self) -> None:
        """Bring the rows of the adds since the last call into the arrays."""
        n0, n = self._synced, self.n
        if n0 == n:
            return
        if n + 1 > len(self.off):
            self.off = _grown(self.off, 2 * n + 1)
        self.off[n0 + 1:n + 1] = self._ends[n0:n]
        r0, r = int(self.off[n0]), int(self.off[n])
        if r > len(self.attr):
            size = max(2 * len(self.attr), r)
            self.attr, self.lo, self.hi = (_grown(a, size) for a in (self.attr, self.lo,
                                                                     self.hi))
        tail = np.array(self._rows[3 * r0:3 * r], np.int64).reshape(-1, 3)
        self.attr[r0:r] = tail[:, 0]
        self.lo[r0:r] = tail[:, 1]
        self.hi[r0:r] = tail[:, 2]
        self._synced = n

    def columns(self) -> ProfileColumns:
        """The live profiles as columns, sorted by id (no ``Profile`` object read)."""
        self._sync()
        n = self.n
        live = np.flatnonzero(self.alive[:n])
        every = len(live) == n
        ids = str_array(self.ids if every else [self.ids[i] for i in live.tolist()])
        by_id = np.argsort(ids, kind="stable")
        live, ids = live[by_id], ids[by_id]
        names: dict[str, int] = {"": 0}
        subs = self.subs
        codes = np.array([names.setdefault(subs[i], len(names)) for i in live.tolist()],
                         np.int32)
        count = np.diff(self.off[:n + 1])[live]
        first = self.off[:n][live]
        slot = np.repeat(np.arange(len(live), dtype=np.int32), count)
        rows = np.repeat(first - np.cumsum(count) + count, count) + np.arange(len(slot))
        attr, lo, hi = self.attr[rows], self.lo[rows], self.hi[rows]
        by = np.lexsort((lo, attr, slot))
        none = np.zeros(0, np.int32)
        return ProfileColumns(self.etype, ids, codes, tuple(names), slot[by],
                              attr[by].astype(np.int16), lo[by], hi[by], none,
                              np.zeros(0, np.int16), np.zeros(0, object))

    def match_keys(self, keys: tuple[Any, ...]) -> list[str]:
        """Ids of the live profiles an event of these keys satisfies, sorted."""
        if self._synced != self.n:
            self._sync()
        self._put(self._keys_view, 0, *keys)
        args = (self._keys, self.n, self.off, self.attr, self.lo, self.hi, self.alive,
                self.out)
        impl = self._impl
        if kernel.STATE.impl is not impl[0]:
            kern = kernel.active()
            impl[1] = kern.specialise("delta_match", args)
            impl[0] = kern
        k = int(impl[1](*args))
        if not k:
            return []
        ids = self.ids
        return sorted([ids[s] for s in self.out[:k].tolist()])


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    b = np.zeros(size, a.dtype)
    b[:len(a)] = a
    return b

