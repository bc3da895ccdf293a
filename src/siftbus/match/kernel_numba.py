"""Compiled hot loops of the index and counting matchers (numba, cached on disk).

Everything here works on plain arrays of integers so that one kernel serves the
per-event path (a batch of one), the batch path and the Spark stage. The layout is
described in :mod:`siftbus.match.index`:

* an event is a row of *cell* numbers, one per attribute: the elementary interval (or
  string class) its value falls in;
* a *profile set* is either a slice of a sorted ``int32`` member array (``kind < 0``) or
  one row of a ``uint64`` bitmap matrix (``kind`` = the row), chosen by fill ratio;
* the index numbers profiles by *slot* (clustered by lead attribute and cell, so that
  the candidates of one cell sit side by side in memory) and outputs their *rank*
  (position in plain string order of the ids), so sorting output sorts ids.

``cache=True`` keeps the compiled code in ``__pycache__`` so start-up stays short after
the first run.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_ONE = np.uint64(1)


_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_TABLE = np.array([
    0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43,
    22, 45, 39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44,
    32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6], dtype=np.int64)


@njit(cache=True, inline="always")
def _outside(c: int, first: int, width: int) -> bool:
    """``not first <= c <= first + width`` in one unsigned comparison."""
    return bool(np.uint32(c - first) > np.uint32(width))


@njit(cache=True, inline="always")
def _accepts(p: int, e: int, cells: np.ndarray, cond_off: np.ndarray,
             runs: np.ndarray) -> bool:
    """Whether profile ``p`` is in (satisfied-here ∪ unconstrained) of every non-lead
    attribute, testing attributes in evaluation order and stopping at the first miss.

    The profile's runs ``(attribute, first cell, last cell)`` are stored profile-major
    (the transpose of the per-cell sets): ``p`` is in the set of cell ``c`` of attribute
    ``b`` iff one of its runs on ``b`` contains ``c``; an attribute without runs is
    unconstrained.
    """
    t = cond_off[p]
    end = cond_off[p + 1]
    while t < end:
        b = runs[t, 0]
        c = cells[e, b]
        ok = False
        while t < end and runs[t, 0] == b:
            if runs[t, 1] <= c and c <= runs[t, 2]:
                ok = True
            t += 1
        if not ok:
            return False
    return True


@njit(cache=True, inline="always")
def _append(buf: np.ndarray, k: int, value: int) -> np.ndarray:
    """``buf[k] = value``, first doubling ``buf`` when it is full; returns the buffer (the
    caller keeps the returned one: it is new after a growth)."""
    if k >= buf.shape[0]:
        grown = np.empty(2 * buf.shape[0], buf.dtype)
        grown[:k] = buf[:k]
        buf = grown
    buf[k] = value
    return buf


@njit(cache=True)
def _index_event(e: int, cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                 set_off: np.ndarray, set_mem: np.ndarray, set_pre: np.ndarray,
                 slot_pre: np.ndarray,
                 bitmaps: np.ndarray, cond_off: np.ndarray, runs: np.ndarray,
                 rank: np.ndarray, always: np.ndarray, alive: np.ndarray, out: np.ndarray,
                 k: int) -> int:
    """Append the ranks event ``e`` matches to ``out[k:]`` (unsorted); returns the new
    end. Writes nothing past ``len(out)`` but still counts, so a caller can grow ``out``
    and redo the event."""
    cap = out.shape[0]
    m = cells.shape[1]
    check_alive = alive.shape[0] > 0
    for p in always:
        if check_alive and alive[p] == 0:
            continue
        if k < cap:
            out[k] = rank[p]
        k += 1
    for a in range(m):
        g = cell_base[a] + cells[e, a]
        row = set_kind[g]
        if row < 0:
            for t in range(set_off[g], set_off[g + 1]):
                if _outside(cells[e, set_pre[t, 0]], set_pre[t, 1], set_pre[t, 2]):
                    continue
                if _outside(cells[e, set_pre[t, 3]], set_pre[t, 4], set_pre[t, 5]):
                    continue
                p = set_mem[t]
                if check_alive and alive[p] == 0:
                    continue
                if _accepts(p, e, cells, cond_off, runs):
                    if k < cap:
                        out[k] = rank[p]
                    k += 1
        else:
            for wi in range(bitmaps.shape[1]):
                w = bitmaps[row, wi]
                while w != 0:
                    low = w & (~w + _ONE)
                    p = wi * 64 + _DEBRUIJN_TABLE[(low * _DEBRUIJN) >> np.uint64(58)]
                    w ^= low
                    if _outside(cells[e, slot_pre[p, 0]], slot_pre[p, 1], slot_pre[p, 2]):
                        continue
                    if _outside(cells[e, slot_pre[p, 3]], slot_pre[p, 4], slot_pre[p, 5]):
                        continue
                    if check_alive and alive[p] == 0:
                        continue
                    if _accepts(p, e, cells, cond_off, runs):
                        if k < cap:
                            out[k] = rank[p]
                        k += 1
    return k


@njit(cache=True)
def index_match(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                set_off: np.ndarray, set_mem: np.ndarray, set_pre: np.ndarray,
                 slot_pre: np.ndarray,
                bitmaps: np.ndarray, cond_off: np.ndarray, runs: np.ndarray,
                rank: np.ndarray, always: np.ndarray,
                alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PrimAS matching of a batch of events; returns CSR ``(offsets, ranks)``.

    cells     int32[E, m]  cell of each event's value, per attribute position
    cell_base int64[m]     first global cell number of each attribute
    set_kind, set_off, set_mem, bitmaps
                           lead sets: global cell -> profiles whose *lead* attribute this
                           is and whose condition the cell satisfies; a bitmap row
                           (``set_kind >= 0``) or a slice of ``set_mem`` (int32 slots)
    set_pre   int16|int32[N, 6]
                           aligned with ``set_mem``: two pre-checks (attribute, first
                           cell, width): the hulls of the member's next two most
                           selective conditions, tested before touching its own data
                           (int16 when every cell number fits: half the memory traffic)
    slot_pre  [n, 6]       the same pre-checks by slot, for members of bitmap lead sets
    cond_off, runs         per profile (CSR by slot), its non-lead conditions as runs
                           int32[R, 3] (attribute, first cell, last cell), attributes
                           in evaluation order
    rank      int32[n]     output index (plain string order of ids) of each slot
    always    int32[]      slots of profiles with no condition
    alive     uint8[n]     tombstones by slot (0 = removed); empty array = all alive

    The candidates of lead attribute ``a`` are its lead set in the event's cell; each is
    kept if it lies in (satisfied-here ∪ unconstrained) of every other attribute.
    Every profile has exactly one lead attribute, so the per-lead results are disjoint.
    Output ranks of one event are sorted.
    """
    n_events = cells.shape[0]
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(max(64, n_events * 8), np.int32)
    k = 0
    for e in range(n_events):
        end = _index_event(e, cells, cell_base, set_kind, set_off, set_mem, set_pre, slot_pre,
                           bitmaps, cond_off, runs, rank, always, alive, out, k)
        if end > out.shape[0]:
            grown = np.empty(max(2 * out.shape[0], end + 64), np.int32)
            grown[:k] = out[:k]
            out = grown
            end = _index_event(e, cells, cell_base, set_kind, set_off, set_mem, set_pre, slot_pre,
                               bitmaps, cond_off, runs, rank, always, alive, out, k)
        if end - k > 1:
            out[k:end].sort()
        k = end
        offsets[e + 1] = k
    return offsets, out[:k].copy()


@njit(cache=True)
def index_match_grouped(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                        set_off: np.ndarray, set_mem: np.ndarray, set_pre: np.ndarray,
                        slot_pre: np.ndarray, bitmaps: np.ndarray, cond_off: np.ndarray,
                        runs: np.ndarray, rank: np.ndarray, always: np.ndarray,
                        alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`index_match` for large batches, same arrays and result.

    Per attribute, the events are grouped by their cell, and each lead set is read once
    per group and tested against every event of the group (a blocked nested-loop join):
    a lead set is streamed from memory once per batch and cell instead of once per
    event. Hits are collected as (event, rank) keys and sorted at the end.
    """
    n_events = cells.shape[0]
    m = cells.shape[1]
    n = rank.shape[0]
    check_alive = alive.shape[0] > 0
    keys = np.empty(max(64, n_events * 8), np.int64)
    k = 0
    for e in range(n_events):
        for p in always:
            if check_alive and alive[p] == 0:
                continue
            keys = _append(keys, k, np.int64(e) * n + rank[p])
            k += 1
    block = np.empty((n_events, m), np.int32)
    members = np.empty(n_events, np.int64)
    for a in range(m):
        by_cell = np.argsort(cells[:, a], kind="mergesort")
        i = 0
        while i < n_events:
            c = cells[by_cell[i], a]
            j = i
            while j < n_events and cells[by_cell[j], a] == c:
                members[j - i] = by_cell[j]
                block[j - i, :] = cells[by_cell[j], :]
                j += 1
            size = j - i
            i = j
            g = cell_base[a] + c
            row = set_kind[g]
            if row < 0:
                for t in range(set_off[g], set_off[g + 1]):
                    b1 = set_pre[t, 0]
                    f1 = set_pre[t, 1]
                    w1 = set_pre[t, 2]
                    b2 = set_pre[t, 3]
                    f2 = set_pre[t, 4]
                    w2 = set_pre[t, 5]
                    p = set_mem[t]
                    for q in range(size):
                        if _outside(block[q, b1], f1, w1) or _outside(block[q, b2], f2, w2):
                            continue
                        if check_alive and alive[p] == 0:
                            continue
                        e = members[q]
                        if _accepts(p, e, cells, cond_off, runs):
                            keys = _append(keys, k, e * n + rank[p])
                            k += 1
            else:
                for wi in range(bitmaps.shape[1]):
                    w = bitmaps[row, wi]
                    while w != 0:
                        low = w & (~w + _ONE)
                        p = wi * 64 + _DEBRUIJN_TABLE[(low * _DEBRUIJN) >> np.uint64(58)]
                        w ^= low
                        if check_alive and alive[p] == 0:
                            continue
                        for q in range(size):
                            if _outside(block[q, slot_pre[p, 0]], slot_pre[p, 1],
                                        slot_pre[p, 2]):
                                continue
                            if _outside(block[q, slot_pre[p, 3]], slot_pre[p, 4],
                                        slot_pre[p, 5]):
                                continue
                            e = members[q]
                            if _accepts(p, e, cells, cond_off, runs):
                                keys = _append(keys, k, e * n + rank[p])
                                k += 1
    hits = np.sort(keys[:k])
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(k, np.int32)
    for i in range(k):
        e = hits[i] // n
        offsets[e + 1] += 1
        out[i] = hits[i] - e * n
    for e in range(n_events):
        offsets[e + 1] += offsets[e]
    return offsets, out


@njit(cache=True)
def index_match_one(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                    set_off: np.ndarray, set_mem: np.ndarray, set_pre: np.ndarray,
                 slot_pre: np.ndarray,
                    bitmaps: np.ndarray, cond_off: np.ndarray, runs: np.ndarray,
                    rank: np.ndarray, always: np.ndarray, alive: np.ndarray,
                    out: np.ndarray) -> int:
    """One event (``cells`` is int32[1, m]): its sorted ranks go to ``out[:count]``.

    Returns the count; a count above ``len(out)`` means ``out`` was too small (nothing
    usable was written; call again with a larger buffer). No allocation: this is the
    per-event path, where allocating and boxing result arrays would cost more than the
    matching itself.
    """
    k = _index_event(0, cells, cell_base, set_kind, set_off, set_mem, set_pre, slot_pre, bitmaps,
                     cond_off, runs, rank, always, alive, out, 0)
    if 1 < k <= out.shape[0]:
        out[:k].sort()
    return k


@njit(cache=True)
def fill_lead(first: np.ndarray, last: np.ndarray, slots: np.ndarray, pre: np.ndarray,
              row_of_cell: np.ndarray, list_off: np.ndarray, mem: np.ndarray,
              mem_pre: np.ndarray, bitmaps: np.ndarray) -> None:
    """:func:`fill_sets` for lead sets: run ``i`` puts ``slots[i]`` and its pre-checks
    ``pre[i]`` into the list of each cell it covers, or the slot's bit into the cell's
    bitmap row."""
    pos = list_off[:-1].copy()
    for i in range(first.shape[0]):
        p = slots[i]
        word = p >> 6
        bit = _ONE << np.uint64(p & 63)
        for c in range(first[i], last[i] + 1):
            r = row_of_cell[c]
            if r >= 0:
                bitmaps[r, word] |= bit
            else:
                j = pos[c]
                mem[j] = p
                mem_pre[j, :] = pre[i, :]
                pos[c] = j + 1


@njit(cache=True)
def counting_match(cells: np.ndarray, cell_base: np.ndarray, af_off: np.ndarray,
                   af_mem: np.ndarray, pr_off: np.ndarray, pr_mem: np.ndarray,
                   ncond: np.ndarray, always: np.ndarray,
                   alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Siena's counting algorithm over a batch; returns CSR ``(offsets, slots)``.

    af_off/af_mem  CSR over global cells: the attribute filters (distinct per-attribute
                   constraints) that the cell satisfies
    pr_off/pr_mem  CSR over attribute filters: the profiles containing each of them
    ncond          int32[n]: number of attribute filters of each profile

    Each satisfied attribute filter bumps the counter of every profile that contains it;
    a profile matches when its counter reaches its number of conditions.
    """
    n_events = cells.shape[0]
    m = cells.shape[1]
    n = ncond.shape[0]
    check_alive = alive.shape[0] > 0
    counter = np.zeros(n, np.int32)
    touched = np.empty(max(16, n), np.int32)
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(max(64, n_events * 4), np.int32)
    k = 0
    for e in range(n_events):
        start = k
        nt = 0
        for p in always:
            if check_alive and alive[p] == 0:
                continue
            out = _append(out, k, p)
            k += 1
        for a in range(m):
            g = cell_base[a] + cells[e, a]
            for t in range(af_off[g], af_off[g + 1]):
                f = af_mem[t]
                for u in range(pr_off[f], pr_off[f + 1]):
                    p = pr_mem[u]
                    if counter[p] == 0:
                        touched[nt] = p
                        nt += 1
                    counter[p] += 1
                    if counter[p] == ncond[p] and not (check_alive and alive[p] == 0):
                        out = _append(out, k, p)
                        k += 1
        for i in range(nt):
            counter[touched[i]] = 0
        if k - start > 1:
            out[start:k] = np.sort(out[start:k])
        offsets[e + 1] = k
    return offsets, out[:k].copy()


@njit(cache=True)
def fill_sets(first: np.ndarray, last: np.ndarray, slots: np.ndarray, row_of_cell: np.ndarray,
              list_off: np.ndarray, mem: np.ndarray, bitmaps: np.ndarray) -> None:
    """Write pieces (profile ``slots[i]`` satisfied on cells ``first[i]..last[i]``) into sets.

    Cells with ``row_of_cell[c] >= 0`` are bitmap rows; the others are list slices starting
    at ``list_off[c]``. Pieces come in slot order, so every list ends up sorted.
    """
    pos = list_off[:-1].copy()
    for i in range(first.shape[0]):
        p = slots[i]
        word = p >> 6
        bit = _ONE << np.uint64(p & 63)
        for c in range(first[i], last[i] + 1):
            r = row_of_cell[c]
            if r >= 0:
                bitmaps[r, word] |= bit
            else:
                mem[pos[c]] = p
                pos[c] += 1


@njit(cache=True)
def set_bits(bitmaps: np.ndarray, row: int, members: np.ndarray) -> None:
    """Mark ``members`` in one bitmap row."""
    for p in members:
        bitmaps[row, p >> 6] |= _ONE << np.uint64(p & 63)
