"""Siena's counting matcher (Carzaniga; Tarkoma 2006 §4.5), behind the Matcher protocol.

Profiles are decomposed into *attribute filters*: the distinct per-attribute
constraints, each shared by every profile that contains it. For an event, every
attribute looks up the attribute filters its value satisfies (through the same
elementary cells as the PrimAS index) and bumps a counter for each profile containing
them; a profile matches when its counter reaches its number of conditions.

A filter is not listed in every cell it covers (a wide interval on a large domain would
be listed in millions: memory grew with profiles x cells). Each of its runs of cells is
cut into the aligned power-of-two blocks of a segment tree, at most two per level, and
listed in those: an event's cell lies in exactly one block per level, so it visits one
list per level and meets each satisfied filter exactly once, as before, while a run of
``w`` cells costs at most ``2 log2 w`` entries instead of ``w``.

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
    node_base: np.ndarray
    """int64[attributes, levels] first global block of each attribute's level (-1: the
    attribute has no such level). Block ``i`` of level ``L`` covers cells
    ``[i << L, (i + 1) << L)``."""
    af_off: np.ndarray
    """int32 (int64 past 2**31 entries) CSR offsets over global blocks into ``af_mem``."""
    af_mem: np.ndarray
    """int32 attribute filters satisfied in every cell of each block."""
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
            cells, self.node_base, self.af_off, self.af_mem, self.pr_off, self.pr_mem,
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
    n_cells = [ac.n_cells for ac in cells]
    depth = [max(1, nc - 1).bit_length() + 1 for nc in n_cells]  # levels per attribute
    node_base = np.full((max(m, 1), max(depth, default=1)), -1, np.int64)
    total = 0
    for a, nc in enumerate(n_cells):
        for lv in range(depth[a]):
            node_base[a, lv] = total
            total += ((nc - 1) >> lv) + 1
    nodes, owners = [], []
    for a, pc in enumerate(pieces):
        af = af_of[a][pc.slots]
        keep = rep_arr[af] == pc.slots if len(af) else np.zeros(0, bool)
        level, idx, which = _blocks(pc.first[keep].astype(np.int64),
                                    pc.last[keep].astype(np.int64))
        nodes.append(node_base[a, level] + idx)
        owners.append(af[keep][which])
    g = np.concatenate(nodes) if nodes else np.zeros(0, np.int64)
    order = np.argsort(g, kind="stable")
    af_off = np.concatenate([[0], np.cumsum(np.bincount(g, minlength=total))])
    # int32 offsets while they fit: a third of the index's bytes on wide workloads
    af_off = af_off.astype(np.int32 if len(g) < 2**31 else np.int64)
    af_mem = (np.concatenate(owners)[order] if owners else np.zeros(0)).astype(np.int32)
    sizes = np.array([len(x) for x in members], np.int64)
    pr_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pr_mem = (np.concatenate([np.array(x, np.int32) for x in members]) if members
              else np.zeros(0, np.int32))
    return CountingType(cols, tuple(cells), node_base, af_off, af_mem, pr_off, pr_mem,
                        ncond, np.flatnonzero(ncond == 0).astype(np.int32))


def _blocks(first: np.ndarray, last: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The segment-tree blocks of the runs ``[first, last]``: ``(level, index, run)`` per
    block; a run of ``w`` cells is cut into at most two blocks per level, ``2 log2 w``."""
    lo, hi = first, last + 1  # half-open (each step makes new arrays)
    run = np.arange(len(first), dtype=np.int64)
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    lv = 0
    while len(run):
        left = (lo & 1) == 1
        out.append((np.full(int(left.sum()), lv), lo[left], run[left]))
        lo = lo + left
        right = ((hi & 1) == 1) & (lo < hi)
        hi = hi - right
        out.append((np.full(int(right.sum()), lv), hi[right], run[right]))
        lo, hi, lv = lo >> 1, hi >> 1, lv + 1
        go = lo < hi
        lo, hi, run = lo[go], hi[go], run[go]
    if not out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return tuple(np.concatenate(x).astype(np.int64) for x in zip(*out, strict=True))  # type: ignore[return-value]


class CountingMatcher(LeveledMatcher):
    """The counting algorithm as a dynamic :class:`~siftbus.match.Matcher`."""

    def _compile(self, cols: ProfileColumns) -> CountingType:
        return compile_counting(cols.etype, cols)
