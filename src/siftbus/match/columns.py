"""Profiles of one event type as columns: the form the compiled matchers load and keep.

A million :class:`~siftbus.model.Profile` objects cost about a kilobyte each; the same
profiles as a few numpy arrays cost a few dozen bytes. :class:`ProfileColumns` is the
interchange format between whoever reads profiles (``Profile`` objects, a bulk parser)
and the compilers of :mod:`siftbus.match.index` and :mod:`siftbus.match.counting`;
``Profile`` objects are made again on demand (:meth:`ProfileColumns.profile`).

Ordered conditions are rows ``(slot, attribute, lo, hi)``: the inclusive key intervals of
the normalised :class:`~siftbus.model.IntervalSet`, several rows for a set with holes.
String conditions are rows ``(slot, attribute, constraint)``. Rows are sorted by slot,
then attribute, then ``lo``; a profile without rows accepts every event of its type.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from siftbus.match.gcpause import collector_paused
from siftbus.model import (
    Condition,
    EventType,
    IntervalSet,
    Profile,
    StringConstraint,
)

_EMPTY_I32 = np.zeros(0, np.int32)
_EMPTY_I64 = np.zeros(0, np.int64)


def str_array(values: Sequence[str]) -> np.ndarray:
    """A numpy unicode array (at least ``U1``, so that an empty array has a width)."""
    return np.array(values, dtype=str) if len(values) else np.zeros(0, "U1")


class ExtendedProfileError(ValueError):
    """An extended profile met a columnar path (callers fall back to profile objects)."""


@dataclass(frozen=True, slots=True)
class ProfileColumns:
    """Profiles of one event type, one array per field (see the module docstring)."""

    etype: EventType
    """The event type of every profile."""
    ids: np.ndarray
    """Profile ids (numpy unicode array), by slot."""
    sub_code: np.ndarray
    """int32 index into ``subscribers`` of each slot's subscriber (0: none)."""
    subscribers: tuple[str, ...]
    """Distinct subscribers; ``subscribers[0] == ""``."""
    iv_slot: np.ndarray
    """int32 slot of each interval row."""
    iv_attr: np.ndarray
    """int16 attribute position of each interval row."""
    iv_lo: np.ndarray
    """int64 first key of each interval row."""
    iv_hi: np.ndarray
    """int64 last key of each interval row (inclusive)."""
    st_slot: np.ndarray
    """int32 slot of each string condition."""
    st_attr: np.ndarray
    """int16 attribute position of each string condition."""
    st_con: np.ndarray
    """The :class:`StringConstraint` of each string condition (object array)."""

    def __len__(self) -> int:
        return len(self.ids)

    # -- building ------------------------------------------------------------------

    @classmethod
    def empty(cls, etype: EventType) -> ProfileColumns:
        return cls(etype, str_array([]), _EMPTY_I32, ("",), _EMPTY_I32,
                   np.zeros(0, np.int16), _EMPTY_I64, _EMPTY_I64, _EMPTY_I32,
                   np.zeros(0, np.int16), np.zeros(0, object))

    @classmethod
    def from_profiles(cls, etype: EventType, profiles: Sequence[Profile]) -> ProfileColumns:
        """Columns of ``profiles`` (all of type ``etype``) in the given order; refuses an
        extended profile (its checks would be lost: ``match.residual`` holds those)."""
        n = len(profiles)
        for p in profiles:
            if p.extended:
                raise ExtendedProfileError(f"profile {p.id} needs the reference semantics")
        # One flat comprehension and one fromiter: about 5x faster than appends.
        recs = [(slot, c.position, iv[0], iv[1])
                for slot, p in enumerate(profiles) for c in p.conditions
                if type(c.constraint) is IntervalSet for iv in c.constraint.intervals]
        flat = np.fromiter(chain.from_iterable(recs), dtype=np.int64,
                           count=4 * len(recs)).reshape(-1, 4)
        del recs
        strings = [(slot, c.position, c.constraint) for slot, p in enumerate(profiles)
                   for c in p.conditions if type(c.constraint) is StringConstraint]
        names: dict[str, int] = {"": 0}
        codes = np.fromiter((names.setdefault(p.subscriber, len(names)) for p in profiles),
                            dtype=np.int32, count=n)
        st_con = np.empty(len(strings), object)
        st_con[:] = [s[2] for s in strings]
        return cls(etype, str_array([p.id for p in profiles]), codes, tuple(names),
                   flat[:, 0].astype(np.int32), flat[:, 1].astype(np.int16),
                   flat[:, 2].copy(), flat[:, 3].copy(),
                   np.array([s[0] for s in strings], np.int32),
                   np.array([s[1] for s in strings], np.int16), st_con)

    @classmethod
    def concat(cls, parts: Iterable[ProfileColumns]) -> ProfileColumns:
        """The profiles of every part, in order (slots renumbered)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            raise ValueError("concat needs at least one non-empty part")
        if len(parts) == 1:
            return parts[0]
        etype = parts[0].etype
        base = np.cumsum([0] + [len(p) for p in parts[:-1]])
        names: dict[str, int] = {"": 0}
        codes = []
        for p in parts:
            remap = np.array([names.setdefault(s, len(names)) for s in p.subscribers],
                             np.int32)
            codes.append(remap[p.sub_code])
        return cls(
            etype,
            np.concatenate([p.ids for p in parts]),
            np.concatenate(codes),
            tuple(names),
            np.concatenate([p.iv_slot + np.int32(b) for p, b in zip(parts, base,
                                                                     strict=True)]),
            np.concatenate([p.iv_attr for p in parts]),
            np.concatenate([p.iv_lo for p in parts]),
            np.concatenate([p.iv_hi for p in parts]),
            np.concatenate([p.st_slot + np.int32(b) for p, b in zip(parts, base,
                                                                     strict=True)]),
            np.concatenate([p.st_attr for p in parts]),
            np.concatenate([p.st_con for p in parts]),
        )

    def take(self, slots: np.ndarray) -> ProfileColumns:
        """The profiles at ``slots`` (distinct), in that order.

        Rows are kept sorted by slot, so a profile's rows are one segment: they are
        gathered segment by segment (no sort).
        """
        slots = np.asarray(slots, np.int64)
        iv = _gather(self.iv_slot, len(self), slots)
        st = _gather(self.st_slot, len(self), slots)
        return ProfileColumns(
            self.etype, self.ids[slots], self.sub_code[slots], self.subscribers,
            iv[0], self.iv_attr[iv[1]], self.iv_lo[iv[1]], self.iv_hi[iv[1]],
            st[0], self.st_attr[st[1]], self.st_con[st[1]])

    def sorted_by_id(self) -> ProfileColumns:
        """The same profiles in plain string (code point) order of their ids."""
        order = np.argsort(self.ids, kind="stable")
        if len(order) and np.all(order[1:] > order[:-1]):
            return self
        return self.take(order)

    # -- reading back --------------------------------------------------------------

    @property
    def subscriber_array(self) -> np.ndarray:
        """The subscriber of each slot (``""`` for none), as a numpy unicode array."""
        return str_array(self.subscribers)[self.sub_code]

    def owners(self) -> np.ndarray:
        """The subscriber of each slot, or its id when it has none."""
        if len(self.subscribers) == 1:
            return self.ids
        subs = self.subscriber_array
        return np.where(self.sub_code == 0, self.ids, subs)

    def profile(self, slot: int) -> Profile:
        """The :class:`Profile` at ``slot``, made anew (equal to the one added)."""
        lo, hi = np.searchsorted(self.iv_slot, np.array([slot, slot + 1], self.iv_slot.dtype))
        slo, shi = np.searchsorted(self.st_slot, np.array([slot, slot + 1], self.st_slot.dtype))
        return make_profile(self.etype, str(self.ids[slot]),
                            self.subscribers[int(self.sub_code[slot])],
                            self.iv_attr[lo:hi].tolist(), self.iv_lo[lo:hi].tolist(),
                            self.iv_hi[lo:hi].tolist(), self.st_attr[slo:shi].tolist(),
                            list(self.st_con[slo:shi]))

    def profiles(self) -> list[Profile]:
        """Every profile, in slot order (each slot's rows found once for all, not by a
        search per profile; the garbage collector paused meanwhile:
        :mod:`~siftbus.match.gcpause`)."""
        n = len(self)
        slots = np.arange(n + 1, dtype=self.iv_slot.dtype)
        iv = np.searchsorted(self.iv_slot, slots).tolist()
        st = np.searchsorted(self.st_slot, slots.astype(self.st_slot.dtype)).tolist()
        ia, il, ih = self.iv_attr.tolist(), self.iv_lo.tolist(), self.iv_hi.tolist()
        sa, sc = self.st_attr.tolist(), list(self.st_con)
        subs = [self.subscribers[c] for c in self.sub_code.tolist()]
        with collector_paused():
            return [make_profile(self.etype, pid, subs[i], ia[iv[i]:iv[i + 1]],
                                 il[iv[i]:iv[i + 1]], ih[iv[i]:iv[i + 1]],
                                 sa[st[i]:st[i + 1]], sc[st[i]:st[i + 1]])
                    for i, pid in enumerate(self.ids.tolist())]

    def nbytes(self) -> int:
        """Bytes held by the arrays (string constraints counted as pointers)."""
        return sum(a.nbytes for a in (self.ids, self.sub_code, self.iv_slot, self.iv_attr,
                                      self.iv_lo, self.iv_hi, self.st_slot, self.st_attr,
                                      self.st_con))


def _gather(row_slot: np.ndarray, n: int, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by slot: the new slot of each gathered row and where it comes from,
    taking the rows of ``slots`` in that order."""
    off = np.searchsorted(row_slot, np.arange(n + 1))
    lengths = off[slots + 1] - off[slots]
    total = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    src = np.arange(total) - np.repeat(starts - off[slots], lengths)
    return np.repeat(np.arange(len(slots), dtype=np.int32), lengths), src


def make_profile(etype: EventType, pid: str, subscriber: str, iv_attr: list[int],
                 iv_lo: list[int], iv_hi: list[int], st_attr: list[int],
                 st_con: list[StringConstraint]) -> Profile:
    """A profile from its rows (sorted by attribute; intervals canonical)."""
    by_attr: dict[int, list[tuple[int, int]]] = {}
    for a, lo, hi in zip(iv_attr, iv_lo, iv_hi, strict=True):
        by_attr.setdefault(a, []).append((lo, hi))
    conds: list[tuple[int, Condition]] = []
    attrs = etype.attributes
    for a, ivs in by_attr.items():
        conds.append((a, Condition(attrs[a].name, a, IntervalSet(tuple(ivs)))))
    for a, con in zip(st_attr, st_con, strict=True):
        conds.append((a, Condition(attrs[a].name, a, con)))
    conds.sort(key=lambda x: x[0])
    return Profile(pid, etype, tuple(c for _, c in conds), subscriber)


__all__ = ["ProfileColumns", "make_profile", "str_array"]
