"""The inline building blocks of the compiled kernels (:mod:`siftbus.match.kernel_numba`).

Bit scanning (:func:`_pop_lowest`), one-comparison range tests (:func:`_outside`),
reading a profile's record (:func:`_rec_at`, :func:`_rec_rank`, :func:`_full`,
:func:`_accepts`; the layout is in :mod:`siftbus.match.kernel`) and growing output
buffers (:func:`_put`, :func:`_append`). All are ``inline="always"``: numba copies them
into every kernel that calls them, so keeping them here costs the kernels nothing. They
are separate from the kernels because they are not part of the
:class:`siftbus.match.kernel.Kernels` interface, only shared by its compiled kernels.

Like every ``cache=True`` function, a kernel's on-disk cache is keyed on its own
module's file: after editing this one, clear ``__pycache__`` of the kernels that inline it.
"""

from __future__ import annotations

import numpy as np

from siftbus.match.numba_load import njit

_ONE = np.uint64(1)

_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_TABLE = np.array([
    0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43,
    22, 45, 39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44,
    32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6], dtype=np.int64)


@njit(cache=True, inline="always")
def _pop_lowest(w: np.uint64) -> tuple[int, np.uint64]:
    """The position of the lowest set bit of ``w`` (de Bruijn), and ``w`` without it."""
    low = w & (~w + _ONE)
    return _DEBRUIJN_TABLE[(low * _DEBRUIJN) >> np.uint64(58)], w ^ low


@njit(cache=True, inline="always")
def _outside(c: int, first: int, width: int) -> bool:
    """``not first <= c <= first + width`` in one unsigned comparison."""
    return bool(np.uint32(c - first) > np.uint32(width))


@njit(cache=True, inline="always")
def _rec_at(ent: np.ndarray, t: int) -> int:
    """The offset of entry ``t``'s record in ``rec`` (two 16-bit halves in columns 6
    and 7)."""
    return np.int64(ent[t, 6] & 0xFFFF) | (np.int64(ent[t, 7] & 0x7FFF) << 16)  # type: ignore[return-value]


@njit(cache=True, inline="always")
def _rec_rank(rec: np.ndarray, r: int) -> int:
    """The rank of the record at ``r`` (two 16-bit halves)."""
    return np.int64(rec[r] & 0xFFFF) | (np.int64(rec[r + 1] & 0xFFFF) << 16)  # type: ignore[return-value]


@njit(cache=True, inline="always")
def _full(ent: np.ndarray, t: int) -> bool:
    """Whether entry ``t`` needs its profile's runs checked after the pre-checks pass."""
    return (np.int64(ent[t, 7]) & 0x8000) != 0


@njit(cache=True, inline="always")
def _accepts(r: int, e: int, cells: np.ndarray, rec: np.ndarray) -> bool:
    """Whether the profile of the record at ``r`` is in (satisfied-here ∪ unconstrained)
    of every non-lead attribute, testing attributes in evaluation order and stopping at
    the first miss.

    The profile's runs ``(attribute, first cell, last cell)`` are stored profile-major
    (the transpose of the per-cell sets): it is in the set of cell ``c`` of attribute
    ``b`` iff one of its runs on ``b`` contains ``c``; an attribute without runs is
    unconstrained.
    """
    t = r + 3  # kernel.REC_HEAD
    end = t + 3 * np.int64(rec[r + 2])
    while t < end:
        b = rec[t]
        c = cells[e, b]
        ok = False
        while t < end and rec[t] == b:
            if rec[t + 1] <= c and c <= rec[t + 2]:
                ok = True
            t += 3
        if not ok:
            return False
    return True


@njit(cache=True, inline="always")
def _put(rk: int, check_alive: bool, alive: np.ndarray, out: np.ndarray, k: int) -> int:
    """``out[k] = rk`` unless rank ``rk`` is removed; returns the new end. Writes nothing
    past ``len(out)`` but still counts, so a caller can grow ``out`` and redo. (Not used
    by the list scan: in its loop it measured 12% slower per event.)"""
    if check_alive and alive[rk] == 0:
        return k
    if k < out.shape[0]:
        out[k] = rk
    return k + 1


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


@njit(cache=True, inline="always")
def sort_run(out: np.ndarray, lo: int, hi: int) -> None:
    """Sort ``out[lo:hi]`` in place: by insertion when short (an event's few matches, a
    set's few values: numba's sort of a slice costs more than the sorting; 100,000 mixed
    events matched in 0.09 CPU-s instead of 0.11, ~0.25 µs saved for 6 per-event ranks)."""
    if hi - lo > 32:
        out[lo:hi].sort()
        return
    for x in range(lo + 1, hi):
        v = out[x]
        y = x - 1
        while y >= lo and out[y] > v:
            out[y + 1] = out[y]
            y -= 1
        out[y + 1] = v
