"""The correctness oracle: every profile against every event, literally.

It is deliberately naive: no index, no caching, no shortcut. Every faster structure in
siftbus is tested against it, its snapshots included (:class:`ReferenceSnapshot` rebuilds
each columnar event and asks every profile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from siftbus.match.base import MatchCSR, ProfileRegistry
from siftbus.model import Event, Profile, StringDomain

if TYPE_CHECKING:
    import numpy as np


class ReferenceMatcher(ProfileRegistry):
    """Brute-force matcher: ``Profile.matches`` for each registered profile."""

    def __init__(self) -> None:
        super().__init__()
        self._version = 0
        self._snapshot: ReferenceSnapshot | None = None

    @property
    def version(self) -> int:
        """Bumped on every add and remove."""
        return self._version

    def add(self, profile: Profile) -> None:
        self._register(profile)
        self._version += 1

    def remove(self, profile_id: str) -> Profile:
        profile = self._unregister(profile_id)
        self._version += 1
        return profile

    def match(self, event: Event) -> list[str]:
        return sorted(pid for pid, p in self._profiles.items() if p.matches(event))

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        return [self.match(e) for e in events]

    def snapshot(self) -> ReferenceSnapshot:
        """The profiles at the current version, as an immutable :class:`ReferenceSnapshot`."""
        snap = self._snapshot
        if snap is None or snap.version != self._version:
            snap = self._snapshot = ReferenceSnapshot.of(self._version,
                                                         list(self._profiles.values()))
        return snap


@dataclass(frozen=True, slots=True)
class ReferenceSnapshot:
    """The oracle's :class:`~siftbus.match.base.Snapshot`: profiles type by type, each
    type sorted by id; columnar events are rebuilt as :class:`Event` objects one by one."""

    version: int
    """The matcher version this snapshot was taken at."""
    profiles: tuple[Profile, ...]
    """Profiles by dense index."""
    type_offset: Mapping[str, tuple[int, int]]
    """Dense index range of each event type."""

    @classmethod
    def of(cls, version: int, profiles: Sequence[Profile]) -> ReferenceSnapshot:
        by_type: dict[str, list[Profile]] = {}
        for p in profiles:
            by_type.setdefault(p.type_name, []).append(p)
        ordered: list[Profile] = []
        offsets: dict[str, tuple[int, int]] = {}
        for name, group in by_type.items():
            offsets[name] = (len(ordered), len(ordered) + len(group))
            ordered.extend(sorted(group, key=lambda p: p.id))
        return cls(version, tuple(ordered), offsets)

    @property
    def profile_ids(self) -> np.ndarray:
        from siftbus.match.columns import str_array

        return str_array([p.id for p in self.profiles])

    @property
    def owners(self) -> np.ndarray:
        from siftbus.match.columns import str_array

        return str_array([p.owner for p in self.profiles])

    def __len__(self) -> int:
        return len(self.profiles)

    def match_columns(self, type_name: str, columns: Any) -> MatchCSR:
        import numpy as np

        from siftbus.match.cells import as_columns, n_rows, ordered_keys, string_keys

        n = n_rows(columns)
        lo, hi = self.type_offset.get(type_name, (0, 0))
        if lo == hi:
            return MatchCSR(np.zeros(n + 1, np.int64), np.zeros(0, np.int32))
        etype = self.profiles[lo].etype
        cols = as_columns(columns, etype.names)
        keyed: list[list[Any]] = []
        for a in etype.attributes:
            d = a.domain
            if isinstance(d, StringDomain):
                keyed.append(string_keys(a.name, cols[a.name]).tolist())
            else:
                keyed.append(ordered_keys(a.name, cols[a.name], d.min_key,
                                          d.max_key).tolist())
        mine = list(enumerate(self.profiles[lo:hi], start=lo))
        offsets = [0]
        hits: list[int] = []
        for keys in zip(*keyed, strict=True) if keyed else [() for _ in range(n)]:
            ev = Event(etype, tuple(keys))
            hits.extend(i for i, p in mine if p.matches(ev))
            offsets.append(len(hits))
        return MatchCSR(np.array(offsets, np.int64), np.array(hits, np.int32))
