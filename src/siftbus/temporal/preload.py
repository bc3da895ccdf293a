"""Preloading: result sets precomputed per cell of a small attribute space, O(1) lookup.

Tarkoma (2006, ch. 7) matches in constant time by *preloading*: where the space a query
can name is small and discrete (rooms, floors, kinds, time slots), the answer for each
point of it is computed when subspaces are stored, so a query is one lookup; inserts pay.

A :class:`PreloadTable` covers one attribute set ``S`` of one event type whose key space
(the product of the domain sizes) has at most :attr:`PreloadPolicy.max_cells` cells. For
every cell ``c`` it keeps three sets of stored slots (pyroaring bitmaps):

* ``contains[c]``: subspaces whose constraints on ``S`` include ``c``;
* ``free[c]``: those among them that constrain no attribute outside ``S``;
* ``exact[c]``: subspaces whose constraints on ``S`` are exactly ``c``.

A query that pins every attribute of ``S`` to one key and leaves the others free is then
answered by one lookup, for each relation: the stored subspaces overlapping it are
``contains[c]``, those covering it ``free[c]``, those inside it ``exact[c]``. A query
that pins ``S`` and constrains more gets those sets as candidates for the exact test.

Which tables exist (:class:`PreloadPolicy`) is chosen by domain size: by default one
table for every ordered attribute whose domain has at most ``max_cells`` keys (1,024),
plus any attribute sets named per type. A subspace costs one bitmap insertion per cell
of ``S`` it spans (a subspace free on ``S`` spans all cells), which bounds an insertion
by ``max_cells`` per table.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyroaring import BitMap

from siftbus.errors import ConfigError
from siftbus.model import EventType, IntervalSet, Profile
from siftbus.model.domain import StringDomain

from .hulls import COVER, OVERLAP, WITHIN

MAX_CELLS = 1024
"""Default bound on the cells of a preloaded attribute set."""

HARD_MAX_CELLS = 65_536
"""No table may have more cells than this, whatever the policy says (an insertion costs
up to one bitmap operation per cell)."""


@dataclass(frozen=True, slots=True)
class PreloadPolicy:
    """Which attribute sets get preload tables.

    ``auto``: one table per ordered attribute whose domain has at most ``max_cells``
    keys. ``sets``: per event type name, further attribute sets (each a sequence of
    attribute names; their domains' product must stay within ``max_cells``).
    """

    auto: bool = True
    max_cells: int = MAX_CELLS
    sets: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1 <= self.max_cells <= HARD_MAX_CELLS:
            raise ConfigError(f"max_cells must be 1..{HARD_MAX_CELLS}, got {self.max_cells}",
                              field="max_cells")

    def tables_for(self, etype: EventType) -> list[PreloadTable]:
        """The tables of ``etype`` under this policy."""
        chosen: dict[tuple[int, ...], None] = {}
        if self.auto:
            for a in etype.attributes:
                if not isinstance(a.domain, StringDomain) and a.domain.size <= self.max_cells:
                    chosen[(a.position,)] = None
        for names in self.sets.get(etype.name, ()):
            positions = []
            for name in names:
                if name not in etype:
                    raise ConfigError(f"preload: {etype.name} has no attribute {name!r}",
                                      field=name)
                a = etype.attribute(name)
                if isinstance(a.domain, StringDomain):
                    raise ConfigError(f"preload: {etype.name}.{name} is a string; only "
                                      "ordered attributes can be preloaded", field=name)
                positions.append(a.position)
            key = tuple(sorted(set(positions)))
            cells = math.prod(_size(etype, p) for p in key)
            if not key or cells > self.max_cells:
                raise ConfigError(f"preload: {etype.name}({', '.join(names)}) has {cells} "
                                  f"cells, over max_cells {self.max_cells}", field="preload")
            chosen[key] = None
        return [PreloadTable(etype, key) for key in chosen]


NO_PRELOAD = PreloadPolicy(auto=False)
"""No tables: every query walks the forest."""


def _size(etype: EventType, position: int) -> int:
    d = etype.attributes[position].domain
    assert not isinstance(d, StringDomain)
    return d.size


class PreloadTable:
    """Result sets per cell of attribute set ``positions`` of ``etype``."""

    __slots__ = ("contains", "etype", "exact", "free", "los", "positions", "sizes",
                 "strides")

    def __init__(self, etype: EventType, positions: tuple[int, ...]) -> None:
        self.etype = etype
        self.positions = positions
        self.los: list[int] = []
        self.sizes: list[int] = []
        for p in positions:
            d = etype.attributes[p].domain
            assert not isinstance(d, StringDomain)
            self.los.append(d.min_key)
            self.sizes.append(d.size)
        self.strides = [math.prod(self.sizes[i + 1:]) for i in range(len(positions))]
        self.contains: dict[int, BitMap] = {}
        self.free: dict[int, BitMap] = {}
        self.exact: dict[int, BitMap] = {}

    @property
    def cells(self) -> int:
        return math.prod(self.sizes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.etype.attributes[p].name for p in self.positions)

    def _keys(self, box: Profile) -> list[Iterable[int]]:
        """Per attribute of the table, the key offsets ``box`` accepts."""
        out: list[Iterable[int]] = []
        for p, lo, size in zip(self.positions, self.los, self.sizes, strict=True):
            c = box.constraint(self.etype.attributes[p].name)
            if c is None:
                out.append(range(size))
            else:
                assert isinstance(c, IntervalSet)
                out.append([k for a, b in c.intervals for k in range(a - lo, b - lo + 1)])
        return out

    def _spanned(self, box: Profile) -> Iterable[int]:
        keys = self._keys(box)
        if len(keys) == 1:  # the common (automatic) table: a cell is the key offset
            return keys[0]
        strides = self.strides
        return (sum(k * s for k, s in zip(combo, strides, strict=True))
                for combo in itertools.product(*keys))

    def _outside_free(self, box: Profile) -> bool:
        return all(c.position in self.positions for c in box.conditions)

    def _exact_cell(self, box: Profile) -> int | None:
        """The one cell ``box`` pins on the table's attributes, or ``None``."""
        cell = 0
        for p, lo, stride in zip(self.positions, self.los, self.strides, strict=True):
            c = box.constraint(self.etype.attributes[p].name)
            if not isinstance(c, IntervalSet) or len(c.intervals) != 1 or c.lo != c.hi:
                return None
            cell += (c.lo - lo) * stride
        return cell

    def add(self, slot: int, box: Profile) -> None:
        free = self._outside_free(box)
        for table in (self.contains, self.free) if free else (self.contains,):
            get = table.get
            for cell in self._spanned(box):
                bm = get(cell)
                if bm is None:
                    bm = table[cell] = BitMap()
                bm.add(slot)
        cell1 = self._exact_cell(box)
        if cell1 is not None:
            _put(self.exact, cell1, slot)

    def remove(self, slot: int, box: Profile) -> None:
        free = self._outside_free(box)
        for cell in self._spanned(box):
            _drop(self.contains, cell, slot)
            if free:
                _drop(self.free, cell, slot)
        cell1 = self._exact_cell(box)
        if cell1 is not None:
            _drop(self.exact, cell1, slot)

    def pins(self, q: Profile) -> bool:
        """Whether ``q`` pins every attribute of the table to one key."""
        return self._exact_cell(q) is not None

    def lookup(self, q: Profile, rel: int) -> tuple[BitMap, bool] | None:
        """Stored slots for relation ``rel`` (stored subspace to ``q``) and whether the
        set is the exact answer (else: candidates for the exact test); ``None`` when
        ``q`` does not pin the table's attributes."""
        cell = self._exact_cell(q)
        if cell is None:
            return None
        exact = self._outside_free(q)
        if rel == OVERLAP:
            found = self.contains.get(cell)
        elif rel == COVER:
            found = (self.free if exact else self.contains).get(cell)
        else:
            assert rel == WITHIN
            found = self.exact.get(cell)
        return (found if found is not None else _EMPTY), exact


_EMPTY = BitMap()


def _put(table: dict[int, BitMap], cell: int, slot: int) -> None:
    bm = table.get(cell)
    if bm is None:
        bm = table[cell] = BitMap()
    bm.add(slot)


def _drop(table: dict[int, BitMap], cell: int, slot: int) -> None:
    bm = table[cell]
    bm.discard(slot)
    if not bm:
        del table[cell]


__all__ = ["HARD_MAX_CELLS", "MAX_CELLS", "NO_PRELOAD", "PreloadPolicy", "PreloadTable"]
