"""One event against the PrimAS index, compiled with numba: the per-event kernels
(``index_match_one``, ``index_match_keys``, ``index_match_packed``) and the event step of
the small-batch kernel (:func:`siftbus.match.kernel_numba.index_match`).

:mod:`siftbus.match.kernel` documents the arrays; :mod:`siftbus.match.kernel_python` has
the twins. An event reads one lead set per attribute, then the records of the few
members that pass the pre-checks. Over real events (not one repeated) nearly all of
that time was waiting for memory: each lead set starts at a random place, and each
record read is a miss of its own. So the kernel asks for the lines before it needs
them (``llvm.prefetch``, :mod:`siftbus.match.prefetch_numba`; a prefetch never faults
and changes nothing):

* before the scan, the first :data:`AHEAD` entries of every lead set of the event, so
  that the sets load side by side instead of one after another; while a set is
  scanned, the next :data:`CHUNK` entries ahead;
* a member that passes the pre-checks is not checked at once: its record is
  prefetched and the member kept (:data:`CAND` at most, then they are checked), so
  the record misses overlap each other and the rest of the scan.

Measured at 100,000 standard profiles, the kernel alone in a numba loop over 20,000
real events: 5.5 µs per event without the prefetches, 2.7 µs with them (1.5 µs
without the scan's wait, when one event is repeated).
"""

from __future__ import annotations

import numpy as np

from siftbus.match.kernel_primitives import (
    _accepts,
    _full,
    _outside,
    _pop_lowest,
    _rec_at,
    _rec_rank,
    sort_run,
)
from siftbus.match.numba_load import njit
from siftbus.match.prefetch_numba import _prefetch_read, _prefetch_write

CHUNK = 256
"""Entries of a list lead set whose first pre-check runs in one branch-free pass."""

AHEAD = 128
"""Entries of every lead set of an event prefetched before its scan starts."""

CAND = 2 * CHUNK
"""Members past the pre-checks kept (their records prefetched) before they are checked:
room for one chunk's whole output when at most ``CAND - CHUNK`` are kept."""

SCRATCH = CHUNK + CAND
"""int64 elements of the scratch array the event step takes (positions of one chunk,
then the kept members)."""


@njit(cache=True, inline="always")
def _prefetch_span(base: int, lo: int, hi: int, size: int) -> None:
    """Prefetch the lines of elements ``lo..hi`` of ``size`` bytes each from ``base``."""
    p = (base + lo * size) & ~63
    end = base + hi * size
    while p < end:
        _prefetch_read(p)
        p += 64


@njit(cache=True)
def _check(e: int, cells: np.ndarray, rec: np.ndarray, alive: np.ndarray, out: np.ndarray,
           k: int, scratch: np.ndarray, nc: int, addrs: np.ndarray, items: int) -> int:
    """Check the ``nc`` kept members in order (a record offset, or its complement when
    the pre-checks were exact): the runs of the others, then whether they are alive;
    append the ranks of the matches to ``out`` (counting past its end without writing,
    like :func:`~siftbus.match.kernel_primitives._put`). With ``addrs`` (not empty), the
    lines of a match's id are asked for at once (see :func:`index_match_packed`)."""
    cap = out.shape[0]
    check_alive = alive.shape[0] > 0
    ids = addrs.shape[0] > 0
    at = addrs.ctypes.data
    for i in range(CHUNK, CHUNK + nc):
        r = scratch[i]
        if r < 0:
            r = ~r
        elif not _accepts(r, e, cells, rec):
            continue
        rk = _rec_rank(rec, r)
        if check_alive and alive[rk] == 0:
            continue
        if k < cap:
            out[k] = rk
        if ids:
            _prefetch_read(at + 8 * rk)
            _prefetch_read(items + 8 * rk)
        k += 1
    return k


@njit(cache=True, inline="always")
def _scan_list(g: int, e: int, cells: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
               rec: np.ndarray, alive: np.ndarray, out: np.ndarray, k: int,
               scratch: np.ndarray, nc: int, addrs: np.ndarray,
               items: int) -> tuple[int, int]:
    """Keep the members of list lead set ``g`` that pass event ``e``'s pre-checks (after
    the ``nc`` kept so far, checking those first when a chunk might not fit); returns
    ``(k, nc)``.

    The first pre-check runs over :data:`CHUNK` entries at a time without a branch,
    writing the positions that pass to ``scratch`` (stream compaction); about one entry
    in twelve passes it, and a branch per entry was mispredicted often (4.0 -> 3.2 µs
    per event at 100,000 profiles). Entries up to :data:`AHEAD` past the chunk are
    prefetched first (the event step prefetched the first ones)."""
    start = set_off[g]
    end = set_off[g + 1]
    base_ent = ent.ctypes.data
    size = ent.strides[0]
    base_rec = rec.ctypes.data
    rsize = rec.itemsize
    fetched = min(start + AHEAD, end)
    for base in range(start, end, CHUNK):
        top = min(base + CHUNK, end)
        want = min(top + AHEAD, end)
        if want > fetched:
            _prefetch_span(base_ent, fetched, want, size)
            fetched = want
        if nc > CAND - CHUNK:
            k = _check(e, cells, rec, alive, out, k, scratch, nc, addrs, items)
            nc = 0
        ns = 0
        for t in range(base, top):
            scratch[ns] = t
            ns += int(np.uint32(cells[e, ent[t, 0]] - ent[t, 1]) <= np.uint32(ent[t, 2]))
        for i in range(ns):
            t = scratch[i]
            if _outside(cells[e, ent[t, 3]], ent[t, 4], ent[t, 5]):
                continue
            r = _rec_at(ent, t)
            _prefetch_read(base_rec + r * rsize)
            scratch[CHUNK + nc] = r if _full(ent, t) else ~r
            nc += 1
    return k, nc


@njit(cache=True)
def _scan_bitmap(row: int, e: int, cells: np.ndarray, slot_pre: np.ndarray,
                 bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                 alive: np.ndarray, out: np.ndarray, k: int, scratch: np.ndarray,
                 nc: int, addrs: np.ndarray, items: int) -> tuple[int, int]:
    """Keep the members of bitmap lead set ``row`` that pass event ``e``'s pre-checks;
    returns ``(k, nc)`` like :func:`_scan_list`.

    A function of its own, not inlined: with the bitmap loop inlined beside the list
    loop, numba's code for the list loop was slower (per-event kernel at 100,000
    profiles, one event repeated: 3.4 µs before, 2.2 µs after)."""
    base_rec = rec.ctypes.data
    rsize = rec.itemsize
    for wi in range(bitmaps.shape[1]):
        w = bitmaps[row, wi]
        if nc > CAND - 64:
            k = _check(e, cells, rec, alive, out, k, scratch, nc, addrs, items)
            nc = 0
        while w != 0:
            bit, w = _pop_lowest(w)
            p = wi * 64 + bit
            if _outside(cells[e, slot_pre[p, 0]], slot_pre[p, 1], slot_pre[p, 2]):
                continue
            if _outside(cells[e, slot_pre[p, 3]], slot_pre[p, 4], slot_pre[p, 5]):
                continue
            r = np.int64(rec_off[p])
            _prefetch_read(base_rec + r * rsize)
            scratch[CHUNK + nc] = r
            nc += 1
    return k, nc


@njit(cache=True)
def index_event(e: int, cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                always: np.ndarray, alive: np.ndarray, out: np.ndarray,
                k: int, scratch: np.ndarray, addrs: np.ndarray, items: int) -> int:
    """Append the ranks event ``e`` matches to ``out[k:]`` (unsorted); returns the new
    end. Writes nothing past ``len(out)`` but still counts, so a caller can grow ``out``
    and redo the event. ``scratch``: int64[:data:`SCRATCH`], any content; ``addrs`` and
    ``items``: see :func:`index_match_packed` (an empty ``addrs``: no id prefetch)."""
    m = cells.shape[1]
    base_ent = ent.ctypes.data
    size = ent.strides[0]
    for a in range(m):  # every list lead set's first lines at once
        g = cell_base[a] + cells[e, a]
        if set_kind[g] < 0:
            _prefetch_span(base_ent, set_off[g], min(set_off[g] + AHEAD, set_off[g + 1]),
                           size)
    nc = 0
    for p in always:
        if nc == CAND:
            k = _check(e, cells, rec, alive, out, k, scratch, nc, addrs, items)
            nc = 0
        scratch[CHUNK + nc] = ~np.int64(rec_off[p])
        nc += 1
    for a in range(m):
        g = cell_base[a] + cells[e, a]
        row = set_kind[g]
        if row < 0:
            k, nc = _scan_list(g, e, cells, set_off, ent, rec, alive, out, k, scratch, nc,
                               addrs, items)
        else:
            k, nc = _scan_bitmap(row, e, cells, slot_pre, bitmaps, rec_off, rec, alive, out,
                                 k, scratch, nc, addrs, items)
    return _check(e, cells, rec, alive, out, k, scratch, nc, addrs, items)


@njit(cache=True, inline="always")
def _match_one(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
               set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
               bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
               always: np.ndarray, alive: np.ndarray, out: np.ndarray, addrs: np.ndarray,
               items: int, scratch: np.ndarray) -> int:
    """:func:`index_match_one` with the id prefetch of :func:`index_match_packed`, and the
    scratch array of :func:`index_event` given. Inlined, and nothing in it reassigned:
    each call between compiled functions, or an array variable that may be replaced,
    costs reference counting on every array (one call layer and such a variable cost
    0.3 µs per event at 100,000 profiles, a third of the kernel's own work)."""
    k = index_event(0, cells, cell_base, set_kind, set_off, ent, slot_pre, bitmaps,
                    rec_off, rec, always, alive, out, 0, scratch, addrs, items)
    if k > out.shape[0]:
        return k
    sort_run(out, 0, k)
    if addrs.shape[0]:  # the strings: their addresses were asked for as they were found
        for i in range(k):
            _prefetch_write(addrs[out[i]])
    return k


@njit(cache=True)
def index_match_one(cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                    set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                    bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                    always: np.ndarray, alive: np.ndarray,
                    out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_one`."""
    return _match_one(cells, cell_base, set_kind, set_off, ent, slot_pre, bitmaps, rec_off,
                      rec, always, alive, out, np.zeros(0, np.int64), 0,
                      np.empty(SCRATCH, np.int64))


@njit(cache=True, inline="always")
def _cells_of_keys(keys: np.ndarray, bounds: np.ndarray, lut: np.ndarray,
                   lut_off: np.ndarray, row: np.ndarray, cell_base: np.ndarray) -> None:
    """The event's cells (``row[0]``) from its keys: see
    :func:`siftbus.match.kernel.Kernels.index_match_keys`."""
    for a in range(keys.shape[0]):
        lo = cell_base[a]
        hi = cell_base[a + 1]
        key = keys[a]
        i = key - bounds[lo]  # bounds[lo]: the domain's smallest key
        if 0 <= i < lut_off[a + 1] - lut_off[a]:
            row[0, a] = lut[lut_off[a] + i]
            continue
        while lo < hi:  # the last bound <= key
            mid = (lo + hi) >> 1
            if bounds[mid] <= key:
                lo = mid + 1
            else:
                hi = mid
        row[0, a] = lo - 1 - cell_base[a]


@njit(cache=True)
def index_match_keys(keys: np.ndarray, bounds: np.ndarray, lut: np.ndarray,
                     lut_off: np.ndarray, row: np.ndarray, cell_base: np.ndarray,
                     set_kind: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
                     slot_pre: np.ndarray, bitmaps: np.ndarray, rec_off: np.ndarray,
                     rec: np.ndarray, always: np.ndarray,
                     alive: np.ndarray, out: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_keys`."""
    _cells_of_keys(keys, bounds, lut, lut_off, row, cell_base)
    return _match_one(row, cell_base, set_kind, set_off, ent, slot_pre, bitmaps, rec_off,
                      rec, always, alive, out, np.zeros(0, np.int64), 0,
                      np.empty(SCRATCH, np.int64))


@njit(cache=True)
def index_match_packed(i64: np.ndarray, i32: np.ndarray, ent: np.ndarray,
                       slot_pre: np.ndarray, bitmaps: np.ndarray, rec: np.ndarray,
                       alive: np.ndarray, out: np.ndarray, addrs: np.ndarray) -> int:
    """See :func:`siftbus.match.kernel.Kernels.index_match_packed` (the layout is
    :func:`siftbus.match.kernel.pack_keys_arrays`'s).

    With ``addrs`` not empty, the lines a caller will touch to turn the matched ranks into
    id strings are asked for as each match is found: ``addrs[rank]`` (the ``id()`` of the
    rank's string, whose reference count the caller's list writes) and the slot of the
    ids tuple at ``i64[6] + 8 * rank``. Only prefetch instructions use these addresses
    (see :mod:`siftbus.match.prefetch_numba`)."""
    m = i64[0]
    g = i64[1]
    a = 8
    keys = i64[a:a + m]
    a += m
    lut_off = i64[a:a + m + 1]
    a += m + 1
    cell_base = i64[a:a + m + 1]
    a += m + 1
    bounds = i64[a:a + g]
    a += g
    set_off = i64[a:a + g + 1]
    a += g + 1
    rec_off = i64[a:a + i64[5]]
    b = m
    lut = i32[b:b + i64[4]]
    b += i64[4]
    set_kind = i32[b:b + g]
    b += g
    always = i32[b:b + i64[3]]
    row = i32[:m].reshape((1, m))
    _cells_of_keys(keys, bounds, lut, lut_off, row, cell_base)
    return _match_one(row, cell_base, set_kind, set_off, ent, slot_pre, bitmaps, rec_off,
                      rec, always, alive, out, addrs, i64[6], i64[i64.shape[0] - SCRATCH:])
