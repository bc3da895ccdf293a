"""The kernel interface in numpy and plain Python: same arguments, same results as
:mod:`siftbus.match.kernel_numba`, no compilation (see :mod:`siftbus.match.kernel`).

Each event is matched with array operations over its candidate lists: the pre-checks of
every entry of a lead set at once, then the runs of the survivors at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_NONE = np.zeros(0, np.int64)

REC_HEAD = 3
"""Elements of a record's head in ``rec``: rank (low, high 16 bits), number of runs
(re-exported by :mod:`siftbus.match.kernel`, which documents the layout)."""


def _bitmap_members(bitmaps: np.ndarray, row: int, n: int) -> np.ndarray:
    bits = np.unpackbits(bitmaps[row].view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:n]).astype(np.int64)


def _inside(cells: np.ndarray, attr: np.ndarray, first: np.ndarray,
            width: np.ndarray) -> np.ndarray:
    d = cells[attr.astype(np.int64)].astype(np.int64) - first.astype(np.int64)
    return (d >= 0) & (d <= width.astype(np.int64))


def record_ranks(rec: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The ranks (int64) of the records at offsets ``at`` (two 16-bit halves each)."""
    lo = rec[at].astype(np.int64) & 0xFFFF
    return lo | ((rec[at + 1].astype(np.int64) & 0xFFFF) << 16)


def record_runs(rec: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(count, idx)`` for the records at offsets ``at``: each one's number of runs,
    and where every run starts in ``rec`` (its attribute; first cell at ``idx + 1``,
    last at ``idx + 2``), record by record."""
    count = rec[at + 2].astype(np.int64)
    within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return count, np.repeat(at + REC_HEAD, count) + 3 * within


def _accepted(at: np.ndarray, row: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """Mask over record offsets ``at``: every constrained non-lead attribute has a run
    containing the event's cell."""
    if not len(at):
        return np.zeros(0, bool)
    count, idx = record_runs(rec, at)
    if not len(idx):
        return np.ones(len(at), bool)
    owner = np.repeat(np.arange(len(at)), count)
    attr = rec[idx].astype(np.int64)
    c = row[attr]
    inside = (rec[idx + 1] <= c) & (c <= rec[idx + 2])
    m = len(row)
    key = owner * m + attr
    constrained = np.zeros(len(at) * m, bool)
    constrained[key] = True
    hit = np.zeros(len(at) * m, bool)
    hit[key[inside]] = True
    bad = np.asarray((constrained & ~hit).reshape(len(at), m).any(axis=1))
    return ~bad


def _event(row: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
           set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
           bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
           always: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Sorted ranks matched by one row of cells."""
    check_alive = len(alive) > 0
    n = len(rec_off) - 1
    parts = [record_ranks(rec, rec_off[always.astype(np.int64)])]
    for a in range(len(row)):
        g = int(cell_base[a] + row[a])
        kind = int(set_kind[g])
        if kind < 0:
            lo, hi = int(set_off[g]), int(set_off[g + 1])
            if lo == hi:
                continue
            e = ent[lo:hi].astype(np.int64)
            ok = _inside(row, e[:, 0], e[:, 1], e[:, 2]) & _inside(row, e[:, 3], e[:, 4],
                                                                      e[:, 5])
            e = e[ok]
            at = (e[:, 6] & 0xFFFF) | ((e[:, 7] & 0x7FFF) << 16)
            full = (e[:, 7] & 0x8000) != 0
        else:
            slots = _bitmap_members(bitmaps, kind, n)
            pre = slot_pre[slots]
            ok = _inside(row, pre[:, 0], pre[:, 1], pre[:, 2]) & _inside(row, pre[:, 3],
                                                                           pre[:, 4],
                                                                           pre[:, 5])
            at = rec_off[slots[ok]]
            full = np.ones(len(at), bool)
        keep = np.ones(len(at), bool)
        keep[full] = _accepted(at[full], row, rec)
        parts.append(record_ranks(rec, at[keep]))
    got = np.concatenate(parts)
    if check_alive:
        got = got[alive[got] != 0]
    return np.sort(got).astype(np.int32)


def index_match(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                always: np.ndarray,
                alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.index_match`."""
    rows = [_event(cells[e], cell_base, set_kind, set_off, ent, slot_pre, bitmaps,
                   rec_off, rec, always, alive) for e in range(cells.shape[0])]
    return _csr(rows)


index_match_grouped = index_match


def index_match_one(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                    set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                    bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                    always: np.ndarray, alive: np.ndarray,
                    out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_one`."""
    got = _event(cells[0], cell_base, set_kind, set_off, ent, slot_pre, bitmaps, rec_off,
                 rec, always, alive)
    if len(got) <= len(out):
        out[:len(got)] = got
    return len(got)


def index_match_keys(keys: np.ndarray, bounds: np.ndarray, lut: np.ndarray,
                     lut_off: np.ndarray, row: np.ndarray, cell_base: np.ndarray,
                     set_kind: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
                     slot_pre: np.ndarray, bitmaps: np.ndarray, rec_off: np.ndarray,
                     rec: np.ndarray, always: np.ndarray,
                     alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_keys`."""
    for a in range(len(keys)):
        lo, hi = int(cell_base[a]), int(cell_base[a + 1])
        i = int(keys[a]) - int(bounds[lo])
        if 0 <= i < int(lut_off[a + 1] - lut_off[a]):
            row[0, a] = lut[int(lut_off[a]) + i]
        else:
            row[0, a] = int(np.searchsorted(bounds[lo:hi], keys[a], side="right")) - 1
    return index_match_one(row, cell_base, set_kind, set_off, ent, slot_pre, bitmaps,
                           rec_off, rec, always, alive, out)


def index_match_packed(i64: np.ndarray, i32: np.ndarray, ent: np.ndarray,
                       slot_pre: np.ndarray, bitmaps: np.ndarray, rec: np.ndarray,
                       alive: np.ndarray, out: np.ndarray, addrs: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_packed` (``addrs``, for the
    compiled kernel's prefetch only, is not used here)."""
    m, g, _, n_always, n_lut, n_off = (int(x) for x in i64[:6])
    cut64 = np.cumsum([8, m, m + 1, m + 1, g, g + 1, n_off])
    keys, lut_off, cell_base, bounds, set_off, rec_off = np.split(i64, cut64)[1:7]
    cut32 = np.cumsum([m, n_lut, g, n_always])
    row, lut, set_kind, always = np.split(i32, cut32)[:4]
    return index_match_keys(keys, bounds, lut, lut_off, row.reshape(1, m), cell_base,
                            set_kind, set_off, ent, slot_pre, bitmaps, rec_off, rec,
                            always, alive, out)


def _expand(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(run index, cell) of every cell each run covers, runs in order."""
    count = (last.astype(np.int64) - first.astype(np.int64) + 1).clip(0)
    run = np.repeat(np.arange(len(first)), count)
    cell = (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
            + np.repeat(first.astype(np.int64), count))
    return run, cell


def _fill(first: np.ndarray, last: np.ndarray, slots: np.ndarray, row_of_cell: np.ndarray,
          list_off: np.ndarray, bitmaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Set the bitmap bits; returns (run index, list position) of the list members."""
    run, cell = _expand(first, last)
    rows = row_of_cell[cell]
    dense = rows >= 0
    if dense.any():
        p = slots[run[dense]].astype(np.int64)
        np.bitwise_or.at(bitmaps, (rows[dense].astype(np.int64), p >> 6),
                         np.left_shift(np.uint64(1), (p & 63).astype(np.uint64)))
    run, cell = run[~dense], cell[~dense]
    by_cell = np.argsort(cell, kind="stable")  # keeps run (slot) order inside a cell
    run, cell = run[by_cell], cell[by_cell]
    start = np.searchsorted(cell, cell, side="left")
    pos = list_off[cell] + (np.arange(len(cell)) - start)
    return run, pos


def fill_lead(first: np.ndarray, last: np.ndarray, slots: np.ndarray, entry: np.ndarray,
              row_of_cell: np.ndarray, list_off: np.ndarray, ent: np.ndarray,
              bitmaps: np.ndarray) -> None:
    """See :func:`siftbus.match.kernel.Kernels.fill_lead`."""
    run, pos = _fill(first, last, slots, row_of_cell, list_off, bitmaps)
    ent[pos] = entry[run]


def counting_match(cells: np.ndarray, node_base: np.ndarray, af_off: np.ndarray,
                   af_mem: np.ndarray, pr_off: np.ndarray, pr_mem: np.ndarray,
                   ncond: np.ndarray, always: np.ndarray,
                   alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.counting_match`."""
    n = len(ncond)
    rows = []
    for e in range(cells.shape[0]):
        row = cells[e].astype(np.int64)
        g = [int(node_base[a, lv]) + (int(row[a]) >> lv) for a in range(cells.shape[1])
             for lv in range(node_base.shape[1]) if node_base[a, lv] >= 0]
        filters = np.concatenate([af_mem[af_off[x]:af_off[x + 1]] for x in g]
                                 or [_NONE]).astype(np.int64)
        profs = np.concatenate([pr_mem[pr_off[f]:pr_off[f + 1]] for f in filters.tolist()]
                               or [_NONE]).astype(np.int64)
        count = np.bincount(profs, minlength=n)
        hit = np.flatnonzero((count == ncond) & (ncond > 0))
        hit = np.concatenate([hit, always.astype(np.int64)])
        if len(alive):
            hit = hit[alive[hit] != 0]
        rows.append(np.sort(hit).astype(np.int32))
    return _csr(rows)


def _wide_event(row: np.ndarray, nb: np.ndarray, wrow: np.ndarray, ncell: np.ndarray,
                rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray, hi_off: np.ndarray,
                hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
                alive: np.ndarray) -> np.ndarray:
    """Ascending ranks of the wide profiles one row of cells matches."""
    n = len(wrank)
    acc = np.zeros(rej.shape[1], np.uint64)
    out = np.zeros(n, bool)
    for a in np.flatnonzero(nb).tolist():
        c = int(row[a])
        r = int(wrow[a]) + c * int(nb[a]) // int(ncell[a])
        acc |= rej[r]
        seg = lo[lo_off[r]:lo_off[r + 1]]
        out[seg[seg[:, 0] > c, 1]] = True
        seg = hi[hi_off[r]:hi_off[r + 1]]
        out[seg[seg[:, 0] < c, 1]] = True
    out |= np.unpackbits(acc.view(np.uint8), bitorder="little")[:n].astype(bool)
    idx = np.flatnonzero(~out)
    full = (wrec[idx] & 1) != 0
    keep = np.ones(len(idx), bool)
    keep[full] = _accepted(wrec[idx[full]] >> 1, row, rec)
    got = wrank[idx[keep]].astype(np.int64)
    if len(alive):
        got = got[alive[got] != 0]
    return got.astype(np.int32)


def wide_match(cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray, ncell: np.ndarray,
               rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray, hi_off: np.ndarray,
               hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
               alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.wide_match`."""
    return _csr([_wide_event(cells[e], nb, wrow, ncell, rej, lo_off, lo, hi_off, hi, wrank,
                             wrec, rec, alive) for e in range(cells.shape[0])])


def wide_match_one(cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray, ncell: np.ndarray,
                   rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray, hi_off: np.ndarray,
                   hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
                   alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.wide_match_one`."""
    got = _wide_event(cells[0], nb, wrow, ncell, rej, lo_off, lo, hi_off, hi, wrank, wrec,
                      rec, alive)
    if len(got) <= len(out):
        out[:len(got)] = got
    return len(got)


def merge_rows(off1: np.ndarray, r1: np.ndarray, off2: np.ndarray,
               r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.merge_rows`."""
    ev = np.concatenate([np.repeat(np.arange(len(off1) - 1), np.diff(off1)),
                         np.repeat(np.arange(len(off2) - 1), np.diff(off2))])
    ranks = np.concatenate([r1, r2]).astype(np.int32)
    by = np.lexsort((ranks, ev))
    return off1 + off2, ranks[by]


def _csr(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, np.int64)
    if rows:
        np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    return offsets, flat


def delta_match(keys: np.ndarray, n: int, off: np.ndarray, attr: np.ndarray,
                lo: np.ndarray, hi: np.ndarray, alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.delta_match`."""
    rows = int(off[n])
    slot = np.repeat(np.arange(n), np.diff(off[:n + 1]))
    a = attr[:rows]
    v = keys[a]
    ok = (lo[:rows] <= v) & (v <= hi[:rows])
    start = np.ones(rows, bool)  # where a (profile, attribute) group of rows starts
    start[1:] = (slot[1:] != slot[:-1]) | (a[1:] != a[:-1])
    group = np.cumsum(start) - 1
    held = np.zeros(int(start.sum()), bool)
    held[group[ok]] = True
    unmet = np.bincount(slot[start][~held], minlength=n)
    hits = np.flatnonzero((unmet == 0) & (alive[:n] != 0)).astype(np.int32)
    k = len(hits)
    out[:min(k, len(out))] = hits[:len(out)]
    return k


def specialise(name: str, args: tuple[Any, ...]) -> Callable[..., Any]:
    """See :func:`siftbus.match.kernel.Kernels.specialise` (here: the function itself)."""
    fn: Callable[..., Any] = globals()[name]
    return fn
