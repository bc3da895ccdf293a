"""One side of the DoubleForest: subspaces under string ids, forest and preload tables.

A :class:`SubspaceStore` gives every stored subspace a dense integer *slot*, keeps it in
a :class:`~siftbus.temporal.forest.SubspaceForest` and in the preload tables its type's
:class:`~siftbus.temporal.preload.PreloadPolicy` chooses, and answers a query with a
:class:`Selection`: from a preload table when the query pins a table's attributes (one
lookup, exact when it constrains nothing else), else by walking the forest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from pyroaring import BitMap

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.model import EventType, Profile

from .forest import Relations, SubspaceForest
from .hulls import COVER, OVERLAP, WITHIN
from .preload import PreloadPolicy, PreloadTable

MAX_CANDIDATES = 512
"""A query that pins preloaded attributes but constrains others tests the table's
candidates one by one when there are at most this many (intersected over the tables it
pins); with more, the forest walks (it tests only where its bounds leave a doubt)."""


class Selection:
    """The stored subspaces a query selected: a set of slots and the ids they name.

    A preloaded answer is the table's own bitmap, handed over without a copy (that is
    what makes the lookup O(1)): read it before the store changes again, or keep
    :meth:`ids`. Iterating yields ids; ``len`` is O(1).
    """

    __slots__ = ("_ids", "preloaded", "slots")

    def __init__(self, slots: BitMap | Sequence[int], ids: Sequence[str | None],
                 preloaded: bool) -> None:
        self.slots = slots
        self._ids = ids
        self.preloaded = preloaded
        """Whether the answer came from a preload table."""

    def __len__(self) -> int:
        return len(self.slots)

    def __iter__(self) -> Iterator[str]:
        ids = self._ids
        for s in self.slots:
            i = ids[s]
            assert i is not None
            yield i

    def ids(self) -> list[str]:
        """The selected ids, sorted (a copy)."""
        return sorted(self)


class SubspaceStore:
    """Subspaces under string ids, queried for overlap, covering and being covered."""

    def __init__(self, policy: PreloadPolicy | None = None) -> None:
        self.policy = policy or PreloadPolicy()
        self.forest = SubspaceForest()
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._boxes: list[Profile | None] = []
        self._free: list[int] = []
        self._tables: dict[str, list[tuple[EventType, list[PreloadTable]]]] = {}
        self.preloaded_queries = 0
        """Queries answered from a preload table (exactly, or as candidates)."""

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, id: object) -> bool:
        return id in self._slot

    def ids(self) -> list[str]:
        return list(self._slot)

    def get(self, id: str) -> Profile:
        box = self._boxes[self._slot_of(id)]
        assert box is not None
        return box

    def _slot_of(self, id: str) -> int:
        try:
            return self._slot[id]
        except KeyError:
            raise UnknownProfileError(f"no subspace with id {id!r}", field=id) from None

    def tables(self, etype: EventType, create: bool = False) -> list[PreloadTable]:
        """The preload tables of ``etype`` (made on first use when ``create``)."""
        for t, tables in self._tables.get(etype.name, ()):
            if t is etype or t == etype:
                return tables
        if not create:
            return []
        tables = self.policy.tables_for(etype)
        self._tables.setdefault(etype.name, []).append((etype, tables))
        return tables

    def add(self, id: str, box: Profile) -> None:
        if id in self._slot:
            raise DuplicateProfileError(f"id {id!r} is already stored", field=id)
        tables = self.tables(box.etype, create=True)
        if self._free:
            slot = self._free.pop()
            self._ids[slot] = id
            self._boxes[slot] = box
        else:
            slot = len(self._ids)
            self._ids.append(id)
            self._boxes.append(box)
        self.forest.add(slot, box)
        for t in tables:
            t.add(slot, box)
        self._slot[id] = slot

    def remove(self, id: str) -> Profile:
        slot = self._slot_of(id)
        box = self.forest.remove(slot)
        for t in self.tables(box.etype):
            t.remove(slot, box)
        del self._slot[id]
        self._ids[slot] = None
        self._boxes[slot] = None
        self._free.append(slot)
        return box

    # ---- queries -----------------------------------------------------------------------

    def query(self, q: Profile, rel: int, *, preload: bool = True) -> Selection:
        """Stored subspaces standing in relation ``rel`` (``OVERLAP``, ``COVER``: the
        stored one covers ``q``, ``WITHIN``: ``q`` covers it) to ``q``. With ``preload``
        off, the forest answers even where a table could."""
        if preload:
            found = self._preloaded(q, rel)
            if found is not None:
                return found
        if rel == OVERLAP:
            slots = self.forest.overlapping(q)
        elif rel == COVER:
            slots = self.forest.containing(q)
        else:
            slots = self.forest.within(q)
        return Selection(slots, self._ids, False)

    def _preloaded(self, q: Profile, rel: int) -> Selection | None:
        """The answer from the preload tables: one table's set when it is exact, else the
        intersection of every pinned table's candidates, tested one by one when there
        are at most :data:`MAX_CANDIDATES` (else ``None``: the forest walks)."""
        sets: list[BitMap] = []
        for t in self.tables(q.etype):
            found = t.lookup(q, rel)
            if found is None:
                continue
            if found[1]:
                self.preloaded_queries += 1
                return Selection(found[0], self._ids, True)
            sets.append(found[0])
        if not sets:
            return None
        sets.sort(key=len)
        cands = sets[0]
        for other in sets[1:]:
            if len(cands) <= MAX_CANDIDATES:
                break
            cands = cands & other
        if len(cands) > MAX_CANDIDATES:
            return None
        self.preloaded_queries += 1
        test = _relation(rel, q)
        boxes = self._boxes
        return Selection([s for s in cands if test(boxes[s])], self._ids, True)  # type: ignore[arg-type]


def _relation(rel: int, q: Profile) -> Callable[[Profile], bool]:
    t = Relations(q)
    if rel == OVERLAP:
        return t.overlaps
    if rel == COVER:
        return t.around
    assert rel == WITHIN
    return t.inside


__all__ = ["Selection", "SubspaceStore"]
