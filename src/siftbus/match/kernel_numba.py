"""The kernel interface compiled with numba (``cache=True``: compiled once per machine,
then loaded from ``__pycache__``).

Every function here has a twin of the same name and contract in
:mod:`siftbus.match.kernel_python`; :mod:`siftbus.match.kernel` documents the array
layout and picks the implementation. Everything works on plain integer arrays, so one
kernel serves the per-event path (a batch of one), the batch path and the Spark stage:

* an event is a row of *cell* numbers, one per attribute: the elementary interval (or
  string class) its value falls in;
* a *lead set* is either a slice of the entry array ``ent`` (``set_kind < 0``) or one
  row of a ``uint64`` bitmap matrix (``set_kind`` = the row), chosen by fill ratio;
* the index numbers profiles by *slot* (clustered by lead attribute and cell, so that
  the candidates of one cell sit side by side in memory) and outputs their *rank*
  (position in plain string order of the ids), so sorting output sorts ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# the per-event kernels (and the event step of index_match), prefetching, in their own
# module; re-exported here as part of the interface
from siftbus.match.kernel_event_numba import CHUNK as CHUNK
from siftbus.match.kernel_event_numba import SCRATCH, index_event
from siftbus.match.kernel_event_numba import index_match_keys as index_match_keys
from siftbus.match.kernel_event_numba import index_match_one as index_match_one
from siftbus.match.kernel_event_numba import index_match_packed as index_match_packed

# the inline building blocks, in their own module (they are shared, not kernels)
from siftbus.match.kernel_primitives import (
    _ONE,
    _accepts,
    _append,
    _full,
    _outside,
    _pop_lowest,
    _put,
    _rec_at,
    _rec_rank,
    sort_run,
)
from siftbus.match.numba_load import njit, typeof


@njit(cache=True)
def index_match(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                always: np.ndarray,
                alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.index_match`."""
    n_events = cells.shape[0]
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(max(64, n_events * 8), np.int32)
    scratch = np.empty(SCRATCH, np.int64)
    no_ids = np.zeros(0, np.int64)
    k = 0
    for e in range(n_events):
        end = index_event(e, cells, cell_base, set_kind, set_off, ent, slot_pre,
                          bitmaps, rec_off, rec, always, alive, out, k, scratch,
                          no_ids, 0)
        if end > out.shape[0]:
            grown = np.empty(max(2 * out.shape[0], end + 64), np.int32)
            grown[:k] = out[:k]
            out = grown
            end = index_event(e, cells, cell_base, set_kind, set_off, ent, slot_pre,
                              bitmaps, rec_off, rec, always, alive, out, k, scratch,
                              no_ids, 0)
        sort_run(out, k, end)
        k = end
        offsets[e + 1] = k
    return offsets, out[:k].copy()


@njit(cache=True)
def _csr_by_event(keys: np.ndarray, k: int, n_events: int, n: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """CSR of hits ``keys[:k]`` (``event * n + rank``, in any order): a counting sort by
    event, then each event's few ranks sorted in place."""
    offsets = np.zeros(n_events + 1, np.int64)
    for i in range(k):
        offsets[keys[i] // n + 1] += 1
    for e in range(n_events):
        offsets[e + 1] += offsets[e]
    fill = offsets[:-1].copy()
    out = np.empty(k, np.int32)
    for i in range(k):
        e = keys[i] // n
        out[fill[e]] = keys[i] - e * n
        fill[e] += 1
    for e in range(n_events):
        sort_run(out, offsets[e], offsets[e + 1])
    return offsets, out


@njit(cache=True)
def index_match_grouped(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                        set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                        bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                        always: np.ndarray,
                        alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.index_match_grouped`.

    The events of a group are copied column by column (``block[attribute, member]``), so
    the first pre-check of an entry runs over one contiguous column without a branch,
    writing the passing members to ``sel`` (stream compaction); only those go on.
    """
    n_events = cells.shape[0]
    m = cells.shape[1]
    n = rec_off.shape[0] - 1
    check_alive = alive.shape[0] > 0
    keys = np.empty(max(64, n_events * 8), np.int64)
    k = 0
    for e in range(n_events):
        for p in always:
            rk = _rec_rank(rec, rec_off[p])
            if check_alive and alive[rk] == 0:
                continue
            keys = _append(keys, k, np.int64(e) * n + rk)
            k += 1
    block = np.empty((max(m, 1), n_events), np.int32)
    members = np.empty(n_events, np.int64)
    sel = np.empty(n_events, np.int64)
    for a in range(m):
        by_cell = np.argsort(cells[:, a], kind="mergesort")
        i = 0
        while i < n_events:
            c = cells[by_cell[i], a]
            j = i
            while j < n_events and cells[by_cell[j], a] == c:
                j += 1
            size = j - i
            for q in range(size):
                ev = by_cell[i + q]
                members[q] = ev
                for b in range(m):
                    block[b, q] = cells[ev, b]
            i = j
            g = cell_base[a] + c
            row = set_kind[g]
            if row < 0:
                for t in range(set_off[g], set_off[g + 1]):
                    col = block[ent[t, 0]]
                    f1 = ent[t, 1]
                    w1 = np.uint32(ent[t, 2])
                    ns = 0
                    for q in range(size):
                        sel[ns] = q
                        ns += int(np.uint32(col[q] - f1) <= w1)
                    if ns == 0:
                        continue
                    r = _rec_at(ent, t)
                    rk = _rec_rank(rec, r)
                    if check_alive and alive[rk] == 0:
                        continue
                    b2 = ent[t, 3]
                    f2 = ent[t, 4]
                    w2 = ent[t, 5]
                    full = _full(ent, t)
                    for s_ in range(ns):
                        q = sel[s_]
                        if _outside(block[b2, q], f2, w2):
                            continue
                        e = members[q]
                        if not full or _accepts(r, e, cells, rec):
                            keys = _append(keys, k, e * n + rk)
                            k += 1
            else:
                for wi in range(bitmaps.shape[1]):
                    w = bitmaps[row, wi]
                    while w != 0:
                        bit, w = _pop_lowest(w)
                        p = wi * 64 + bit
                        r = rec_off[p]
                        rk = _rec_rank(rec, r)
                        if check_alive and alive[rk] == 0:
                            continue
                        for q in range(size):
                            if _outside(block[slot_pre[p, 0], q], slot_pre[p, 1],
                                        slot_pre[p, 2]):
                                continue
                            if _outside(block[slot_pre[p, 3], q], slot_pre[p, 4],
                                        slot_pre[p, 5]):
                                continue
                            e = members[q]
                            if _accepts(r, e, cells, rec):
                                keys = _append(keys, k, e * n + rk)
                                k += 1
    return _csr_by_event(keys, k, n_events, n)


@njit(cache=True)
def fill_lead(first: np.ndarray, last: np.ndarray, slots: np.ndarray, entry: np.ndarray,
              row_of_cell: np.ndarray, list_off: np.ndarray, ent: np.ndarray,
              bitmaps: np.ndarray) -> None:
    """See :func:`siftbus.match.kernel.Kernels.fill_lead`."""
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
                ent[j, :] = entry[i, :]
                pos[c] = j + 1


@njit(cache=True)
def counting_match(cells: np.ndarray, node_base: np.ndarray, af_off: np.ndarray,
                   af_mem: np.ndarray, pr_off: np.ndarray, pr_mem: np.ndarray,
                   ncond: np.ndarray, always: np.ndarray,
                   alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.counting_match`."""
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
            c = cells[e, a]
            for lv in range(node_base.shape[1]):
                if node_base[a, lv] < 0:
                    break
                g = node_base[a, lv] + (c >> lv)
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
def _wide_event(e: int, cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray,
                ncell: np.ndarray, rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray,
                hi_off: np.ndarray, hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray,
                rec: np.ndarray, alive: np.ndarray, acc: np.ndarray, out: np.ndarray,
                k: int) -> int:
    """Event ``e``'s wide matches (ascending ranks) from ``out[k]`` on; returns the new
    end (counting past ``len(out)`` without writing, like :func:`_put`)."""
    words = acc.shape[0]
    acc[:] = 0
    for a in range(nb.shape[0]):
        b = nb[a]
        if b == 0:
            continue
        c = cells[e, a]
        r = wrow[a] + (np.int64(c) * b) // ncell[a]
        for w in range(words):
            acc[w] |= rej[r, w]
        j = lo_off[r + 1] - 1
        start = lo_off[r]
        while j >= start and lo[j, 0] > c:  # hulls starting after the cell
            i = np.int64(lo[j, 1])
            acc[i >> 6] |= _ONE << np.uint64(i & 63)
            j -= 1
        j = hi_off[r]
        end = hi_off[r + 1]
        while j < end and hi[j, 0] < c:  # hulls ending before it
            i = np.int64(hi[j, 1])
            acc[i >> 6] |= _ONE << np.uint64(i & 63)
            j += 1
    n = wrank.shape[0]
    check_alive = alive.shape[0] > 0
    for w in range(words):
        word = ~acc[w]
        if w == words - 1 and n & 63:
            word &= (_ONE << np.uint64(n & 63)) - _ONE
        while word:
            low, word = _pop_lowest(word)
            p = w * 64 + low
            code = wrec[p]
            if code & 1 and not _accepts(code >> 1, e, cells, rec):
                continue
            k = _put(wrank[p], check_alive, alive, out, k)
    return k


@njit(cache=True)
def wide_match(cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray, ncell: np.ndarray,
               rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray, hi_off: np.ndarray,
               hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
               alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.wide_match`."""
    n_events = cells.shape[0]
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(max(64, n_events * 8), np.int32)
    acc = np.empty(rej.shape[1], np.uint64)
    k = 0
    for e in range(n_events):
        end = _wide_event(e, cells, nb, wrow, ncell, rej, lo_off, lo, hi_off, hi, wrank,
                          wrec, rec, alive, acc, out, k)
        if end > out.shape[0]:
            # room for the other events at this one's count too (wide matches come by
            # thousands, and each growth redoes the event), at most 8x what is filled
            need = min(end + (n_events - e - 1) * (end - k), 8 * end)
            grown = np.empty(max(2 * out.shape[0], need + 64), np.int32)
            grown[:k] = out[:k]
            out = grown
            end = _wide_event(e, cells, nb, wrow, ncell, rej, lo_off, lo, hi_off, hi,
                              wrank, wrec, rec, alive, acc, out, k)
        k = end
        offsets[e + 1] = k
    return offsets, out[:k].copy()


@njit(cache=True)
def wide_match_one(cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray, ncell: np.ndarray,
                   rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray, hi_off: np.ndarray,
                   hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
                   alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.wide_match_one`."""
    acc = np.empty(rej.shape[1], np.uint64)
    return _wide_event(0, cells, nb, wrow, ncell, rej, lo_off, lo, hi_off, hi, wrank, wrec,
                       rec, alive, acc, out, 0)


@njit(cache=True)
def merge_rows(off1: np.ndarray, r1: np.ndarray, off2: np.ndarray,
               r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """See :func:`siftbus.match.kernel.Kernels.merge_rows`."""
    n_events = off1.shape[0] - 1
    offsets = np.zeros(n_events + 1, np.int64)
    out = np.empty(r1.shape[0] + r2.shape[0], np.int32)
    k = 0
    for e in range(n_events):
        i, i_end = off1[e], off1[e + 1]
        j, j_end = off2[e], off2[e + 1]
        while i < i_end and j < j_end:
            if r1[i] <= r2[j]:
                out[k] = r1[i]
                i += 1
            else:
                out[k] = r2[j]
                j += 1
            k += 1
        while i < i_end:
            out[k] = r1[i]
            i += 1
            k += 1
        while j < j_end:
            out[k] = r2[j]
            j += 1
            k += 1
        offsets[e + 1] = k
    return offsets, out


@njit(cache=True)
def delta_match(keys: np.ndarray, n: int, off: np.ndarray, attr: np.ndarray,
                lo: np.ndarray, hi: np.ndarray, alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.delta_match`."""
    k = 0
    for j in range(n):
        if not alive[j]:
            continue
        r = off[j]
        end = off[j + 1]
        ok = True
        while r < end:
            a = attr[r]
            v = keys[a]
            hit = False
            while r < end and attr[r] == a:
                if lo[r] <= v <= hi[r]:
                    hit = True
                r += 1
            if not hit:
                ok = False
                break
        if ok:
            if k < out.shape[0]:
                out[k] = j
            k += 1
    return k


def specialise(name: str, args: tuple[Any, ...]) -> Callable[..., Any]:
    """See :func:`siftbus.match.kernel.Kernels.specialise`.

    The dispatcher resolves the types of every argument on every call (a no-op kernel
    of 15 arrays: 1.5 µs through the dispatcher, 0.9 µs through the entry point); the
    entry point of the overload for these types skips that, for callers whose argument
    types never change (the per-event runners)."""
    entry: Callable[..., Any] = globals()[name].compile(tuple(typeof(a) for a in args))
    return entry
