"""Siena's counting matcher (Carzaniga; Tarkoma 2006 §4.5), behind the Matcher protocol.

Profiles are decomposed into *attribute filters*: the distinct per-attribute
constraints, each shared by every profile that contains it. For an event, every
attribute looks up the attribute filters its value satisfies (through the same
elementary cells as the PrimAS index) and bumps a counter for each profile containing
them; a profile matches when its counter reaches its number of conditions.

Compared with the PrimAS index it needs no lead attribute and no per-cell profile sets,
only per-cell *filter* lists, so identical conditions are stored once; but every
satisfied condition costs work, also for profiles that end up not matching. The
benchmark shows where each wins. Adding and removing works as for the index (levels,
tombstones; :mod:`siftbus.match.leveled`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from siftbus.match import kernel
from siftbus.match.cells import AttributeCells, layout
from siftbus.match.leveled import LeveledMatcher
from siftbus.model import Constraint, EventType, Profile

__all__ = ["CountingMatcher", "CountingType", "compile_counting"]


@dataclass(frozen=True, slots=True)
class CountingType:
    """Compiled counting index of one event type (slots in plain string order of ids)."""

    type_name: str
    """Event type."""
    cells: tuple[AttributeCells, ...]
    """Cells of every attribute, in schema order."""
    cell_base: np.ndarray
    """int64 first global cell of each attribute."""
    af_off: np.ndarray
    """int64 CSR offsets over global cells into ``af_mem``."""
    af_mem: np.ndarray
    """int32 attribute filters satisfied in each cell."""
    pr_off: np.ndarray
    """int64 CSR offsets over attribute filters into ``pr_mem``."""
    pr_mem: np.ndarray
    """int32 profiles containing each attribute filter."""
    ncond: np.ndarray
    """int32 number of conditions of each profile."""
    always: np.ndarray
    """int32 profiles without any condition."""
    ids: np.ndarray
    """Profile ids by slot."""

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_filters(self) -> int:
        return len(self.pr_off) - 1

    def slot(self, rank: int) -> int:
        return rank

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        return np.flatnonzero(alive)

    def run_one(self, cells: np.ndarray, alive: np.ndarray | None, out: np.ndarray) -> int:
        _, slots = self.run(cells, alive)
        if len(slots) <= len(out):
            out[:len(slots)] = slots
        return len(slots)

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        return kernel.counting_match(cells, self.cell_base, self.af_off, self.af_mem,
                                     self.pr_off, self.pr_mem, self.ncond, self.always,
                                     np.zeros(0, np.uint8) if alive is None else alive)


def compile_counting(etype: EventType, profiles: Sequence[Profile]) -> CountingType:
    """Build the counting index of ``profiles`` (all of type ``etype``, sorted by id)."""
    n = len(profiles)
    m = len(etype.attributes)
    filter_id: dict[tuple[int, Constraint], int] = {}
    af_of = np.full((max(m, 1), n), -1, np.int32)
    rep: list[int] = []  # a profile holding each filter: its pieces are the filter's
    members: list[list[int]] = []
    ncond = np.zeros(n, np.int32)
    for slot, p in enumerate(profiles):
        ncond[slot] = len(p.conditions)
        for c in p.conditions:
            key = (c.position, c.constraint)
            f = filter_id.get(key)
            if f is None:
                f = filter_id[key] = len(rep)
                rep.append(slot)
                members.append([])
            members[f].append(slot)
            af_of[c.position, slot] = f
    cells, pieces = layout(etype, profiles)
    rep_arr = np.array(rep, np.int32)
    n_cells = np.array([ac.n_cells for ac in cells], np.int64)
    cell_base = (np.concatenate([[0], np.cumsum(n_cells)[:-1]]).astype(np.int64) if m
                 else np.zeros(0, np.int64))
    total = int(n_cells.sum())
    runs = []
    counts = np.zeros(total, np.int64)
    for a, pc in enumerate(pieces):
        af = af_of[a][pc.slots]
        keep = rep_arr[af] == pc.slots if len(af) else np.zeros(0, bool)
        f, first, last = af[keep], pc.first[keep], pc.last[keep]
        runs.append((f, first, last))
        if len(f):
            nc = cells[a].n_cells
            diff = np.bincount(first, minlength=nc + 1)
            diff -= np.bincount(last.astype(np.int64) + 1, minlength=nc + 1)
            base = int(cell_base[a])
            counts[base:base + nc] = np.cumsum(diff)[:nc]
    af_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    af_mem = np.empty(int(af_off[-1]), np.int32)
    no_bitmaps = np.zeros((0, 1), np.uint64)
    for a, (f, first, last) in enumerate(runs):
        base = int(cell_base[a])
        nc = cells[a].n_cells
        kernel.fill_sets(first, last, f, np.full(nc, -1, np.int32),
                         af_off[base:base + nc + 1], af_mem, no_bitmaps)
    sizes = np.array([len(x) for x in members], np.int64)
    pr_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pr_mem = (np.concatenate([np.array(x, np.int32) for x in members]) if members
              else np.zeros(0, np.int32))
    ids = np.array([p.id for p in profiles], dtype=str) if n else np.zeros(0, "U1")
    return CountingType(etype.name, tuple(cells), cell_base, af_off, af_mem, pr_off, pr_mem,
                        ncond, np.flatnonzero(ncond == 0).astype(np.int32), ids)


class CountingMatcher(LeveledMatcher):
    """The counting algorithm as a dynamic :class:`~siftbus.match.Matcher`."""

    def _compile(self, etype: EventType, profiles: Sequence[Profile]) -> CountingType:
        return compile_counting(etype, profiles)
