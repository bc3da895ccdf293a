"""Compiled hot loops of the index and counting matchers (numba, cached on disk).

Everything here works on plain arrays of integers so that one kernel serves the
per-event path (a batch of one), the batch path and the Spark stage. The layout is
described in :mod:`siftbus.match.index`:

* an event is a row of *cell* numbers, one per attribute: the elementary interval (or
  string class) its value falls in;
* a *profile set* is either a slice of a sorted ``int32`` member array (``kind < 0``) or
  one row of a ``uint64`` bitmap matrix (``kind`` = the row), chosen by fill ratio;
* slot numbers are dense profile indices, assigned in plain string order of the ids, so
  sorting slots sorts ids.

``cache=True`` keeps the compiled code in ``__pycache__`` so start-up stays short after
the first run.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_ONE = np.uint64(1)


@njit(cache=True, inline="always")
def _in_bitmap(bitmaps: np.ndarray, row: int, p: int) -> bool:
    word = bitmaps[row, p >> 6]
    return (word >> np.uint64(p & 63)) & _ONE == _ONE


@njit(cache=True)
def _filter(buf: np.ndarray, count: int, w: int, s: int, set_kind: np.ndarray,
            set_off: np.ndarray, set_mem: np.ndarray, bitmaps: np.ndarray) -> int:
    """Keep the candidates of ``buf[:count]`` that are in set ``w`` or set ``s``.

    ``buf`` is sorted, so list membership is a forward binary search (galloping-free but
    monotone: each search starts where the previous one ended). Returns the new count.
    """
    wk = set_kind[w]
    sk = set_kind[s]
    wpos = set_off[w]
    wend = set_off[w + 1]
    spos = set_off[s]
    send = set_off[s + 1]
    kept = 0
    for i in range(count):
        p = buf[i]
        hit = False
        if wk >= 0:
            hit = _in_bitmap(bitmaps, wk, p)
        elif wpos < wend:
            lo = wpos
            hi = wend
            while lo < hi:
                mid = (lo + hi) >> 1
                if set_mem[mid] < p:
                    lo = mid + 1
                else:
                    hi = mid
            wpos = lo
            hit = lo < wend and set_mem[lo] == p
        if not hit:
            if sk >= 0:
                hit = _in_bitmap(bitmaps, sk, p)
            elif spos < send:
                lo = spos
                hi = send
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if set_mem[mid] < p:
                        lo = mid + 1
                    else:
                        hi = mid
                spos = lo
                hit = lo < send and set_mem[lo] == p
        if hit:
            buf[kept] = p
            kept += 1
    return kept


@njit(cache=True)
def index_match(cells: np.ndarray, order: np.ndarray, cell_base: np.ndarray,
                lead_off: np.ndarray, lead_mem: np.ndarray, set_kind: np.ndarray,
                set_off: np.ndarray, set_mem: np.ndarray, bitmaps: np.ndarray,
                always: np.ndarray, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PrimAS matching of a batch of events; returns CSR ``(offsets, slots)``.

    cells     int32[E, m]  cell of each event's value, per attribute position
    order     int32[m]     evaluation order (attribute positions, most selective first)
    cell_base int64[m]     first global cell number of each attribute
    lead_off, lead_mem     CSR over global cells: profiles whose *lead* attribute this is
                           and which the cell satisfies
    set_kind, set_off, set_mem, bitmaps
                           profile sets: global cell g -> the non-lead profiles satisfied
                           there; set ``n_cells + a`` -> profiles leaving ``a`` free
    always    int32[]      profiles with no condition (match every event of the type)
    alive     uint8[n]     tombstones (0 = removed); empty array = all alive

    For each attribute ``a`` the candidates are its lead set in the event's cell; they
    are intersected with (satisfied-here ∪ unconstrained) of every other attribute in
    evaluation order, stopping as soon as the candidate set is empty. Every profile has
    exactly one lead attribute, so the per-lead results are disjoint.
    """
    n_events = cells.shape[0]
    m = cells.shape[1]
    n_cells = lead_off.shape[0] - 1
    check_alive = alive.shape[0] > 0
    offsets = np.zeros(n_events + 1, np.int64)
    cap = max(64, n_events * 4)
    out = np.empty(cap, np.int32)
    k = 0
    buf = np.empty(256, np.int32)
    for e in range(n_events):
        start = k
        groups = 0
        for p in always:
            if check_alive and alive[p] == 0:
                continue
            if k >= cap:
                cap *= 2
                grown = np.empty(cap, np.int32)
                grown[:k] = out[:k]
                out = grown
            out[k] = p
            k += 1
        if k > start:
            groups = 1
        for a in range(m):
            g = cell_base[a] + cells[e, a]
            lo = lead_off[g]
            hi = lead_off[g + 1]
            if hi == lo:
                continue
            if buf.shape[0] < hi - lo:
                buf = np.empty(2 * (hi - lo), np.int32)
            c = 0
            for t in range(lo, hi):
                p = lead_mem[t]
                if check_alive and alive[p] == 0:
                    continue
                buf[c] = p
                c += 1
            for j in range(m):
                if c == 0:
                    break
                b = order[j]
                if b == a:
                    continue
                c = _filter(buf, c, n_cells + b, cell_base[b] + cells[e, b], set_kind,
                            set_off, set_mem, bitmaps)
            if c == 0:
                continue
            if k + c > cap:
                while k + c > cap:
                    cap *= 2
                grown = np.empty(cap, np.int32)
                grown[:k] = out[:k]
                out = grown
            out[k:k + c] = buf[:c]
            k += c
            groups += 1
        if groups > 1:
            out[start:k] = np.sort(out[start:k])
        offsets[e + 1] = k
    return offsets, out[:k].copy()


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
    cap = max(64, n_events * 4)
    out = np.empty(cap, np.int32)
    k = 0
    for e in range(n_events):
        start = k
        nt = 0
        for p in always:
            if check_alive and alive[p] == 0:
                continue
            if k >= cap:
                cap *= 2
                grown = np.empty(cap, np.int32)
                grown[:k] = out[:k]
                out = grown
            out[k] = p
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
                        if k >= cap:
                            cap *= 2
                            grown = np.empty(cap, np.int32)
                            grown[:k] = out[:k]
                            out = grown
                        out[k] = p
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
