"""Extended profiles beside a compiled engine: the reference semantics as a residual.

The compiled engines index conjunctions of interval and string-set constraints on
required, flat attributes of finite kinds. A profile that needs more (``Profile.extended``:
checks such as ``suffix`` or ``matches``, ``or``, ``not exists``; or a type with optional,
nested, array or open-kind attributes) is kept in a side list per engine, the open index
(:mod:`siftbus.match.open_index`: distinct conditions hashed per attribute, the reference
semantics exactly), matched after the engine's own step; events of extended types go to
the side list only. So every engine answers exactly what the reference answers for every
feature; :mod:`siftbus.match.open_batch` reads JSON events into its compiled kernel.

:class:`ResidualMixin` goes first in the bases of an engine class, so the engine keeps its
type (``isinstance(m, IndexMatcher)``) and every other method.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.errors import DuplicateProfileError
from siftbus.match.base import MatchCSR
from siftbus.match.columns import ProfileColumns, str_array
from siftbus.match.counting import CountingMatcher
from siftbus.match.index import IndexMatcher
from siftbus.match.open_index import OpenIndexMatcher
from siftbus.match.reference import ReferenceSnapshot
from siftbus.model import Event, Profile


class ResidualMixin:
    """Side list of extended profiles for a compiled engine (see the module text)."""

    _side: OpenIndexMatcher

    def _side_list(self) -> OpenIndexMatcher:
        side = self.__dict__.get("_side")
        if side is None:
            side = self.__dict__["_side"] = OpenIndexMatcher()
        return side

    def add(self, profile: Profile) -> None:
        if profile.extended:
            if super().__contains__(profile.id):  # type: ignore[misc]
                raise DuplicateProfileError(f"profile id {profile.id!r} is already registered",
                                            field=profile.id)
            self._side_list().add(profile)
            return
        if profile.id in self._side_list():
            raise DuplicateProfileError(f"profile id {profile.id!r} is already registered",
                                        field=profile.id)
        super().add(profile)  # type: ignore[misc]

    def add_columns(self, cols: ProfileColumns, *, unregistered: bool = False) -> None:
        side = self._side_list()
        if len(side) and not unregistered:
            taken = [str(i) for i in cols.ids if str(i) in side]
            if taken:
                raise DuplicateProfileError(f"profile id {taken[0]!r} is already registered",
                                            field=taken[0])
        super().add_columns(cols, unregistered=unregistered)  # type: ignore[misc]

    def remove(self, profile_id: str) -> Any:
        side = self._side_list()
        if profile_id in side:
            return side.remove(profile_id)
        return super().remove(profile_id)  # type: ignore[misc]

    def match(self, event: Event) -> list[str]:
        if event.etype.extended:
            return self._side_list().match(event)
        found = self._engine_match(event)  # a new list
        side = self.__dict__.get("_side")
        if side is None or not len(side):  # the per-event path: nothing more to do
            return found
        return sorted(set(found).union(side.match(event)))

    def _engine_match(self, event: Event) -> list[str]:
        """The engine's own ``match`` (replaced in each engine class by the function
        itself, found once: a zero-argument ``super()`` per event cost ~0.1 µs of the
        per-event path's ~6.7)."""
        return super().match(event)  # type: ignore[misc]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        engine_match = getattr(super(), "match", None)
        if engine_match is not None:
            cls._engine_match = engine_match  # type: ignore[method-assign]

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        side = self._side_list()
        plain = [e for e in events if not e.etype.extended]
        rows = iter(super().match_batch(plain) if plain else [])  # type: ignore[misc]
        out: list[list[str]] = []
        for e in events:
            if e.etype.extended:
                out.append(side.match(e))
            else:
                row = list(next(rows))
                out.append(sorted(set(row).union(side.match(e))) if len(side) else row)
        return out

    def get(self, profile_id: str) -> Profile:
        side = self._side_list()
        if profile_id in side:
            return side.get(profile_id)
        return super().get(profile_id)  # type: ignore[misc]

    def profiles(self) -> Iterator[Profile]:
        yield from super().profiles()  # type: ignore[misc]
        yield from self._side_list().profiles()

    def __len__(self) -> int:
        return super().__len__() + len(self._side_list())  # type: ignore[misc]

    def __contains__(self, profile_id: object) -> bool:
        return (super().__contains__(profile_id)  # type: ignore[misc]
                or profile_id in self._side_list())

    @property
    def version(self) -> int:
        return super().version + self._side_list().version  # type: ignore[misc]



class SnapshotResidualMixin(ResidualMixin):
    """:class:`ResidualMixin` for engines that take snapshots (their side list joins)."""

    def snapshot(self) -> Any:
        inner = super().snapshot()  # type: ignore[misc]
        side = self._side_list()
        if not len(side):
            return inner
        return ResidualSnapshot(inner, side.snapshot(), self.version)


@dataclass(frozen=True, slots=True)
class ResidualSnapshot:
    """An engine's snapshot plus its side list: dense indices of the side profiles follow
    the engine's; each row stays in id order (``MatchCSR``)."""

    inner: Any
    side: ReferenceSnapshot
    version: int

    @property
    def profile_ids(self) -> np.ndarray:
        return str_array([*map(str, self.inner.profile_ids), *(p.id for p in self.side.profiles)])

    @property
    def owners(self) -> np.ndarray:
        return str_array([*map(str, self.inner.owners), *(p.owner for p in self.side.profiles)])

    def __len__(self) -> int:
        return len(self.inner) + len(self.side)

    def match_columns(self, type_name: str, columns: Any) -> MatchCSR:
        a = self.inner.match_columns(type_name, columns)
        lo, hi = self.side.type_offset.get(type_name, (0, 0))
        if lo == hi:
            return a
        b = self.side.match_columns(type_name, columns)
        ids = self.profile_ids
        shift = len(self.inner)
        rows: list[list[int]] = []
        ao, ap, bo, bp = a.offsets.tolist(), a.profiles.tolist(), b.offsets.tolist(), \
            b.profiles.tolist()
        for i in range(len(ao) - 1):
            row = ap[ao[i]:ao[i + 1]] + [shift + j for j in bp[bo[i]:bo[i + 1]]]
            rows.append(sorted(row, key=lambda k: str(ids[k])))
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        flat = np.array([k for r in rows for k in r], np.int32)
        return MatchCSR(offsets, flat)


class ResidualIndexMatcher(SnapshotResidualMixin, IndexMatcher):
    """The PrimAS index with extended profiles in a side list."""


class ResidualCountingMatcher(ResidualMixin, CountingMatcher):
    """The counting matcher with extended profiles in a side list."""
