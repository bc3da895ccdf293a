"""The shape of an :class:`~siftbus.match.index.IndexMatcher`: :class:`IndexStats`.

Read off the matcher's levels for dashboards and the benchmark; separate from the index
because it only reports on it and takes no part in building or matching.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from siftbus.match.leveled import TypeState


@dataclass(frozen=True, slots=True)
class IndexStats:
    """Shape of an :class:`~siftbus.match.index.IndexMatcher` (for dashboards and the
    benchmark)."""

    profiles: int
    """Registered profiles."""
    pending: int
    """Profiles added since the last compile (matched one by one)."""
    levels: int
    """Compiled levels over all types."""
    tombstones: int
    """Removed profiles still occupying a slot."""
    cells: int
    """Elementary cells over all attributes and levels."""
    list_sets: int
    """Profile sets stored as sorted slot arrays."""
    bitmap_sets: int
    """Profile sets stored as bitmaps."""
    index_bytes: int
    """Bytes held by the compiled arrays."""
    order: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Evaluation order per event type (of its largest level)."""


def index_stats(types: Mapping[str, TypeState], profiles: int) -> IndexStats:
    """The :class:`IndexStats` of an index with these per-type states and ``profiles``
    registered profiles."""
    levels = [lv for ts in types.values() for lv in ts.levels]
    order: dict[str, tuple[str, ...]] = {}
    for name, ts in types.items():
        if ts.levels:
            ct = ts.levels[0].compiled
            order[name] = tuple(ct.cells[i].name for i in ct.order.tolist())
    return IndexStats(
        profiles=profiles,
        pending=sum(len(ts.pending) for ts in types.values()),
        levels=len(levels),
        tombstones=sum(lv.size - lv.live for lv in levels),
        cells=sum(int(lv.compiled.cell_base[-1]) for lv in levels),
        list_sets=sum(int((lv.compiled.set_kind < 0).sum()) for lv in levels),
        bitmap_sets=sum(int((lv.compiled.set_kind >= 0).sum()) for lv in levels),
        index_bytes=sum(lv.compiled.nbytes() for lv in levels),
        order=order,
    )
