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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from siftbus.match import kernel
from siftbus.match.cells import AttributeCells, event_cells, layout
from siftbus.match.columns import ProfileColumns
from siftbus.match.leveled import LeveledMatcher
from siftbus.model import Event, EventType, Profile

__all__ = ["CountingMatcher", "CountingType", "compile_counting"]


@dataclass(frozen=True, slots=True)
class CountingType:
    """Compiled counting index of one event type (slots in plain string order of ids)."""

    cols: ProfileColumns
    """The profiles, sorted by id (slot = rank = position)."""
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

    @property
    def type_name(self) -> str:
        return self.cols.etype.name

    @property
    def ids(self) -> np.ndarray:
        """Profile ids by slot."""
        return self.cols.ids

    @property
    def n(self) -> int:
        return len(self.cols)

    @property
    def n_filters(self) -> int:
        return len(self.pr_off) - 1

    def slot(self, rank: int) -> int:
        return rank

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        return np.flatnonzero(alive)

    def columns(self) -> ProfileColumns:
        return self.cols

    def profile(self, rank: int) -> Profile:
        return self.cols.profile(rank)

    def event_runner(self) -> Callable[[Event, np.ndarray, np.ndarray], int]:
        def run(event: Event, alive: np.ndarray, out: np.ndarray) -> int:
            _, slots = self.run(np.array([event_cells(self.cells, event)], np.int32), alive)
            if len(slots) <= len(out):
                out[:len(slots)] = slots
            return len(slots)

        return run

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        return kernel.active().counting_match(
            cells, self.cell_base, self.af_off, self.af_mem, self.pr_off, self.pr_mem,
            self.ncond, self.always, np.zeros(0, np.uint8) if alive is None else alive)


def compile_counting(etype: EventType, profiles: Sequence[Profile] | ProfileColumns
                     ) -> CountingType:
    """Build the counting index of ``profiles`` (all of type ``etype``, sorted by id)."""
    cols = profiles if isinstance(profiles, ProfileColumns) else \
        ProfileColumns.from_profiles(etype, profiles)
    n = len(cols)
    m = len(etype.attributes)
    # An attribute filter is one (attribute, constraint) pair: the rows of one profile on
    # one attribute. Number the distinct ones; their pieces come from one holder each.
    keys: dict[tuple[int, object], int] = {}
    af_of = np.full((max(m, 1), n), -1, np.int32)
    rep: list[int] = []  # a profile holding each filter: its pieces are the filter's
    members: list[list[int]] = []
    ncond = np.zeros(n, np.int32)
    per_slot: dict[tuple[int, int], list[object]] = {}
    for slot, a, lo, hi in zip(cols.iv_slot.tolist(), cols.iv_attr.tolist(),
                               cols.iv_lo.tolist(), cols.iv_hi.tolist(), strict=True):
        per_slot.setdefault((slot, a), []).append((lo, hi))
    for slot, a, con in zip(cols.st_slot.tolist(), cols.st_attr.tolist(), cols.st_con,
                            strict=True):
        per_slot.setdefault((slot, a), []).append(con)
    for (slot, a), parts in sorted(per_slot.items()):
        key = (a, tuple(parts))
        f = keys.get(key)
        if f is None:
            f = keys[key] = len(rep)
            rep.append(slot)
            members.append([])
        members[f].append(slot)
        af_of[a, slot] = f
        ncond[slot] += 1
    cells, pieces = layout(cols)
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
        f32 = np.ascontiguousarray(f, dtype=np.int32)
        kernel.active().fill_lead(first, last, f32, f32[:, None], np.full(nc, -1, np.int32),
                                  af_off[base:base + nc + 1], af_mem[:, None], no_bitmaps)
    sizes = np.array([len(x) for x in members], np.int64)
    pr_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pr_mem = (np.concatenate([np.array(x, np.int32) for x in members]) if members
              else np.zeros(0, np.int32))
    return CountingType(cols, tuple(cells), cell_base, af_off, af_mem, pr_off, pr_mem,
                        ncond, np.flatnonzero(ncond == 0).astype(np.int32))


class CountingMatcher(LeveledMatcher):
    """The counting algorithm as a dynamic :class:`~siftbus.match.Matcher`."""

    def _compile(self, cols: ProfileColumns) -> CountingType:
        return compile_counting(cols.etype, cols)
