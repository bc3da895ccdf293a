"""Building the arrays of the PrimAS interval index of one event type (Bittner 2003, §4.1).

:func:`build` turns columnar profiles (:class:`~siftbus.match.columns.ProfileColumns`,
sorted by id) into the arrays that :mod:`siftbus.match.kernel` documents and
:class:`siftbus.match.index.CompiledType` holds. Every step is a whole-array operation;
the only loop over profiles is inside the ``fill_lead`` kernel.

Selectivity decides three things per profile: its *lead* attribute (the most selective
condition, whose per-cell sets hold the profile), its two *pre-checks* (the hulls of the
next most selective conditions, stored beside every lead-set entry), and whether those
pre-checks are *exact* (at most two further conditions, each a single run of cells):
then a candidate that passes them is a match without reading its runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.errors import DomainError
from siftbus.match import hugepages, kernel, wide
from siftbus.match.cells import AttributeCells, Pieces, layout
from siftbus.match.columns import ProfileColumns

PRECHECKS = 2
"""How many further conditions each lead-set entry carries (as cell hulls)."""

NARROW_RUNS = 2 ** 15
"""A level's records (``rec``) are int16 when every cell number fits and every profile has
fewer runs than this (the run count is one element of its record), else int32."""

_NO_PIECES = Pieces(*(np.zeros(0, np.int32),) * 3)


@dataclass(frozen=True, slots=True)
class EventModel:
    """Observed event keys of one type, used to estimate how selective conditions are."""

    samples: tuple[tuple[Any, ...], ...]
    """Key tuples of sample events, in schema order."""

    def cell_weights(self, ac: AttributeCells) -> np.ndarray:
        """Probability of each cell: 90% the sample frequency, 10% uniform (no zeros)."""
        uniform = uniform_weights(ac)
        if not self.samples:
            return uniform
        col = [s[ac.position] for s in self.samples]
        cells = ac.cells_of(np.array(col, dtype=np.int64) if ac.ordered else
                            np.array(col, dtype=object))
        freq = np.bincount(cells, minlength=ac.n_cells).astype(np.float64) / len(col)
        return 0.9 * freq + 0.1 * uniform


def uniform_weights(ac: AttributeCells) -> np.ndarray:
    """Probability of each cell for events uniform over the domain."""
    if ac.ordered:
        widths = np.diff(np.append(ac.bounds, ac.max_key + 1)).astype(np.float64)
        return widths / (ac.max_key - ac.min_key + 1)
    return np.full(ac.n_cells, 1.0 / max(1, ac.n_cells))


@dataclass(frozen=True, slots=True)
class _Hulls:
    """Per attribute, one entry per constrained profile: its rank, the first and last cell
    of its runs there, and how many runs it has (pieces come sorted by rank)."""

    ranks: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    runs: np.ndarray
    starts: np.ndarray
    """Index of each profile's first piece."""

    @classmethod
    def of(cls, pc: Pieces) -> _Hulls:
        k = len(pc.slots)
        if k == 0:
            z = np.zeros(0, np.int32)
            return cls(z, z, z, z, z)
        new = np.empty(k, bool)
        new[0] = True
        np.not_equal(pc.slots[1:], pc.slots[:-1], out=new[1:])
        if new.all():  # one run per profile (the common case): the pieces are the hulls
            return cls(pc.slots.astype(np.int32, copy=False),
                       pc.first.astype(np.int32, copy=False),
                       pc.last.astype(np.int32, copy=False),
                       np.broadcast_to(np.int32(1), (k,)), np.arange(k, dtype=np.int32))
        starts = np.flatnonzero(new).astype(np.int32)  # int32: a million profiles' hulls
        ends = np.append(starts[1:], np.int32(k))      # are a few of these arrays
        return cls(pc.slots[starts].astype(np.int32), pc.first[starts].astype(np.int32),
                   pc.last[ends - 1].astype(np.int32), (ends - starts).astype(np.int32), starts)


def build(cols: ProfileColumns, threshold: float, model: EventModel | None,
          order: Sequence[str] | None) -> dict[str, Any]:
    """The fields of a :class:`~siftbus.match.index.CompiledType` for ``cols`` (sorted by
    id: a profile's rank is its position in ``cols``)."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"bitmap_threshold must be in [0, 1], got {threshold}")
    etype = cols.etype
    n = len(cols)
    cells, pieces = layout(cols)  # piece slots are ranks here
    m = len(cells)
    hulls = [_Hulls.of(pc) for pc in pieces]
    cov = _coverage(cells, pieces, hulls, n, model)
    if m and n:
        lead = np.argmin(cov, axis=0).astype(np.int16)
        lead[cov.min(axis=0) > 1.5] = -1
    else:
        lead = np.full(n, -1, np.int16)
    n_cells = np.array([ac.n_cells for ac in cells], np.int64)
    cell_base = np.concatenate([[0], np.cumsum(n_cells)]).astype(np.int64)
    total_cells = int(cell_base[-1])
    small = total_cells < 32767 and m < 32767
    # Wide profiles (wide.choose_wide): their lead sets would cost more than their
    # conditions are worth; they go to the bucketed structure of match/wide.py instead.
    n_cond = np.zeros(n, np.int64)
    lead_cells = np.zeros(n, np.int64)
    multi_any = np.zeros(n, bool)
    for a, (pc, h) in enumerate(zip(pieces, hulls, strict=True)):
        n_cond[h.ranks] += 1
        multi_any[h.ranks[h.runs > 1]] = True
        sel = lead[pc.slots] == a
        lead_cells += np.bincount(pc.slots[sel], weights=(pc.last[sel].astype(np.int64)
                                  - pc.first[sel] + 1), minlength=n).astype(np.int64)
    is_wide = wide.choose_wide(np.where(lead >= 0, lead_cells, 0), n_cond,
                               16 if small else 32, total_cells) & (lead >= 0)
    del lead_cells, n_cond
    eval_order = _evaluation_order(cells, cov, order, etype.name, n)
    pre = _prechecks(cov, lead, hulls, n, m)  # consumes cov
    del cov
    attr_rank = np.empty(max(m, 1), np.int64)
    attr_rank[eval_order] = np.arange(m)

    # Exact pre-checks: at most PRECHECKS non-lead conditions, each one run of cells.
    # Slots: cluster profiles by lead attribute and first lead cell, so that one cell's
    # candidates are neighbours in memory (their runs are read one after another).
    nonlead = np.zeros(n, np.int64)
    multi = np.zeros(n, bool)
    lead_first = np.zeros(n, np.int64)
    for a, h in enumerate(hulls):
        is_lead = lead[h.ranks] == a
        nonlead[h.ranks[~is_lead]] += 1
        multi[h.ranks[~is_lead & (h.runs > 1)]] = True
        lead_first[h.ranks[is_lead]] = h.lo[is_lead]
    full = (nonlead > PRECHECKS) | multi
    lead_key = np.where(lead < 0, m, np.where(is_wide, m + 1, lead)).astype(np.int64) \
        * (total_cells + 1) + lead_first
    rank = np.argsort(lead_key, kind="stable").astype(np.int32)  # slot -> rank
    slot_of_rank = np.empty(n, np.int32)
    slot_of_rank[rank] = np.arange(n, dtype=np.int32)
    del lead_key, lead_first, nonlead, multi

    dtype = np.int16 if small else np.int32
    bounds = np.concatenate([ac.bounds if ac.ordered else np.zeros(ac.n_cells, np.int64)
                             for ac in cells]).astype(np.int64) if m else np.zeros(0, np.int64)

    # Records, one per slot in slot order: the rank (16-bit halves), the number of runs,
    # then the runs (attribute, first cell, last cell), attributes in evaluation order,
    # placed by counting (no sort). Every run, the lead's included, since they are the
    # stored form of the conditions (CompiledType.columns); the kernel's run check passes
    # the lead anyway. A candidate's rank and runs share its record, so checking it
    # touches one cache line, not three (run offset, runs, rank).
    per_slot = np.zeros(n, np.int64)
    for h in hulls:  # a profile appears once per attribute: no repeated index
        per_slot[slot_of_rank[h.ranks]] += h.runs
    rec_off = np.zeros(n + 1, np.int64)
    np.cumsum(kernel.REC_HEAD + 3 * per_slot, out=rec_off[1:])
    if rec_off[-1] >= 2 ** 31:
        raise ValueError(f"{etype.name}: a compiled level holds at most 2**31 record "
                         f"elements ({int(rec_off[-1])} needed); add profiles in parts")
    narrow = per_slot.max(initial=0) < NARROW_RUNS
    rec = hugepages.empty(int(rec_off[-1]), dtype if narrow else np.int32)
    head = rec_off[:-1]
    r = rank.astype(np.int64)
    rec[head] = (r & 0xFFFF).astype(np.uint16).view(np.int16)
    rec[head + 1] = r >> 16
    rec[head + 2] = per_slot
    del r
    fill = head + kernel.REC_HEAD
    for a in eval_order.tolist():
        pc, h = pieces[a], hulls[a]
        if not len(h.ranks):
            continue
        slots = slot_of_rank[h.ranks].astype(np.int64)
        within = 3 * (np.arange(len(pc.slots)) - np.repeat(h.starts, h.runs))
        dest = np.repeat(fill[slots], h.runs) + within
        rec[dest] = a
        rec[dest + 1] = pc.first
        rec[dest + 2] = pc.last
        fill[slots] += 3 * h.runs
    w_rank = np.flatnonzero(is_wide).astype(np.int32)
    all_wide = len(w_rank) == n
    local = (np.cumsum(is_wide) - 1).astype(np.int32)
    w_hulls = []
    for h in hulls:
        if all_wide:  # wide index = rank: the hulls as they are, no copies
            w_hulls.append((h.ranks, h.lo, h.hi))
            continue
        sel = is_wide[h.ranks]
        w_hulls.append((local[h.ranks[sel]], h.lo[sel], h.hi[sel]))
    w_rec = (rec_off[slot_of_rank[w_rank]] << 1) | multi_any[w_rank]
    # what is built from here on is kept; the hulls and the per-profile counts are not
    # (at 1,000,000 profiles the load peaked at 607 MB RSS with them, 587 without)
    del fill, head, hulls, per_slot, local, multi_any

    lead_pieces: list[Pieces] = []
    # a level of wide profiles only has no lead sets: no per-cell arrays either
    counts = np.zeros(0 if all_wide else total_cells, np.int64)
    for a, pc in enumerate([] if all_wide else pieces):
        is_lead = (lead[pc.slots] == a) & ~is_wide[pc.slots]
        slots = slot_of_rank[pc.slots[is_lead]]
        by_slot = np.argsort(slots, kind="stable")
        lp = Pieces(slots[by_slot], pc.first[is_lead][by_slot], pc.last[is_lead][by_slot])
        lead_pieces.append(lp)
        base = int(cell_base[a])
        counts[base:base + cells[a].n_cells] = _run_counts(lp, cells[a].n_cells)
    del pieces
    wide_index = wide.build(n_cells.tolist(), w_hulls, w_rank, w_rec)
    del w_hulls, w_rec
    limit = threshold * n
    dense = (counts > 0) & (counts > limit) if threshold < 1 else np.zeros(len(counts), bool)
    set_kind = np.full(len(counts), -1, np.int32)
    set_kind[dense] = np.arange(int(dense.sum()), dtype=np.int32)
    set_off = np.concatenate([[0], np.cumsum(np.where(dense, 0, counts))]).astype(np.int64)
    del counts

    # Lead-set entries by slot: pre-checks, then the offset of the slot's record in two
    # 16-bit halves, bit 15 of the upper half set when the pre-checks are not exact.
    top = np.iinfo(dtype).max
    entry = np.empty((0 if all_wide else n, 8), np.uint16 if small else np.int32)
    if all_wide:
        pre, rank = pre[:0], rank[:0]
    np.minimum(pre, top, out=pre)
    entry[:, :6] = pre[rank]
    del pre
    at = rec_off[:-1]
    entry[:, 6] = at[:len(entry)] & 0xFFFF
    entry[:, 7] = ((at[:len(entry)] >> 16) & 0x7FFF) | (full[rank].astype(np.int64) << 15)
    del at, full, rank
    entry = entry.view(np.int16) if small else entry
    n_dense = int(dense.sum())
    set_ent = hugepages.empty((int(set_off[-1]), 8), dtype)
    bitmaps = hugepages.zeros((n_dense, max(1, (n + 63) // 64)), np.uint64)
    kern = kernel.active()
    for a in range(len(lead_pieces)):
        lp = lead_pieces[a]
        lead_pieces[a] = _NO_PIECES  # each attribute's lead runs go once they are filled in
        base = int(cell_base[a])
        nc = cells[a].n_cells
        kern.fill_lead(lp.first, lp.last, lp.slots, np.ascontiguousarray(entry[lp.slots]),
                       set_kind[base:base + nc], set_off[base:base + nc + 1], set_ent,
                       bitmaps)
        del lp
    slot_pre = (np.ascontiguousarray(entry[:, :6]) if n_dense
                else np.zeros((0, 3 * PRECHECKS), dtype))
    return {
        "cells": tuple(cells), "order": eval_order, "cell_base": cell_base,
        "bounds": bounds, "set_kind": set_kind, "set_off": set_off, "set_ent": set_ent,
        "slot_pre": slot_pre, "bitmaps": bitmaps, "rec_off": rec_off.astype(np.int32),
        "rec": rec,
        "slot_of_rank": slot_of_rank,
        "always": np.sort(slot_of_rank[lead < 0]).astype(np.int32), "lead": lead,
        "wide": wide_index,
    }


def _coverage(cells: Sequence[AttributeCells], pieces: Sequence[Pieces],
              hulls: Sequence[_Hulls], n: int, model: EventModel | None) -> np.ndarray:
    """float32 ``[m, n]``: the probability that an event satisfies each (attribute,
    profile) condition; 2.0 marks "unconstrained" (never a lead, passes always)."""
    m = len(cells)
    cov = np.full((max(m, 1), n), 2.0, np.float32)
    for a, (pc, h) in enumerate(zip(pieces, hulls, strict=True)):
        if len(pc.slots):
            w = model.cell_weights(cells[a]) if model is not None else uniform_weights(cells[a])
            cum = np.concatenate([[0.0], np.cumsum(w)])
            contrib = cum[pc.last.astype(np.int64) + 1] - cum[pc.first]
            cov[a, h.ranks] = np.add.reduceat(contrib, h.starts)
    return cov


def _evaluation_order(cells: Sequence[AttributeCells], cov: np.ndarray,
                      order: Sequence[str] | None, type_name: str, n: int) -> np.ndarray:
    """Attribute positions, most selective first (or the forced ``order`` first)."""
    m = len(cells)
    if order is not None:
        names = [ac.name for ac in cells]
        unknown = [a for a in order if a not in names]
        if unknown:
            raise DomainError(f"{type_name} has no attribute(s) {', '.join(unknown)}",
                              field=unknown[0])
        ordered = [names.index(a) for a in order]
        ordered += [i for i in range(m) if i not in ordered]
        return np.array(ordered, np.int32)
    pass_rate = np.where(cov[:m] > 1.5, 1.0, cov[:m]).mean(axis=1) if n else np.ones(m)
    return np.argsort(pass_rate, kind="stable").astype(np.int32)


def _prechecks(cov: np.ndarray, lead: np.ndarray, hulls: Sequence[_Hulls], n: int,
               m: int) -> np.ndarray:
    """int32 ``[n, 3 * PRECHECKS]`` by rank: per pre-check the attribute, the first cell
    of the hull of the profile's runs there and the hull's width (last - first).

    The pre-checks are the profile's next most selective conditions after its lead; a
    profile with fewer conditions repeats its lead attribute with an all-accepting hull.
    Overwrites ``cov``.
    """
    out = np.zeros((n, 3 * PRECHECKS), np.int32)
    big = np.iinfo(np.int32).max
    rest = cov
    cols = np.arange(n)
    if m and n:
        rest[lead.clip(0), cols] = 2.0
    for j in range(PRECHECKS):
        col = 3 * j
        if m and n:
            attr = np.argmin(rest, axis=0).astype(np.int32)
            none = rest[attr, cols] > 1.5
            rest[attr, cols] = 2.0
        else:
            attr = np.zeros(n, np.int32)
            none = np.ones(n, bool)
        out[:, col] = np.where(none, lead.clip(0), attr)
        out[:, col + 2] = big
        for a, h in enumerate(hulls):
            sel = (attr[h.ranks] == a) & ~none[h.ranks]
            r = h.ranks[sel]
            out[r, col + 1] = h.lo[sel]
            out[r, col + 2] = h.hi[sel] - h.lo[sel]
    return out


def _run_counts(pc: Pieces, n_cells: int) -> np.ndarray:
    """How many runs cover each cell (a difference array, no per-cell loop)."""
    if not len(pc.slots):
        return np.zeros(n_cells, np.int64)
    diff = np.bincount(pc.first, minlength=n_cells + 1)
    diff -= np.bincount(pc.last.astype(np.int64) + 1, minlength=n_cells + 1)
    return np.cumsum(diff)[:n_cells].astype(np.int64)
