"""The per-event path of a compiled PrimAS level (:class:`siftbus.match.index.CompiledType`):
the functions a :class:`~siftbus.match.level.Level` calls for one event at a time.

:func:`id_matcher` is the whole path from an event to its ids in one call, for types whose
attributes are all ordered and that hold no wide profiles (the common case);
:func:`event_runner` gives the ranks of any type; :func:`add_wide` adds the wide
profiles' matches (:mod:`siftbus.match.wide`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from siftbus.match import kernel
from siftbus.match.cells import AttributeCells, event_cells
from siftbus.match.wide import WideIndex
from siftbus.model import Event

_NO_ADDRS = np.zeros(0, np.int64)
_TUPLE_ITEMS = tuple.__basicsize__  # where a tuple's item pointers start (CPython)
_UNCHOSEN = object()


class PerEventIndex(Protocol):
    """What the per-event path reads of a compiled level (``CompiledType``)."""

    @property
    def cells(self) -> tuple[AttributeCells, ...]: ...

    @property
    def n(self) -> int: ...

    @property
    def wide(self) -> WideIndex: ...

    @property
    def rec(self) -> np.ndarray: ...

    @property
    def bounds(self) -> np.ndarray: ...

    @property
    def ordered_only(self) -> bool: ...

    def kernel_args(self) -> kernel.IndexArrays: ...

    def key_tables(self) -> tuple[np.ndarray, np.ndarray]: ...


def event_runner(ct: PerEventIndex) -> Callable[[Event, np.ndarray, np.ndarray], int]:
    """``run(event, alive, out) -> count``: one event's sorted ranks into ``out``.

    For a type whose attributes are all ordered the kernel finds the cells from the
    keys itself (``index_match_packed``: at the first event the small arrays are
    copied into two, :func:`~siftbus.match.kernel.pack_keys_arrays`, made only by
    levels that match single events: 8 bytes per profile with bitmap lead sets or
    conditionless profiles, else nothing per profile). The function keeps
    scratch arrays (the keys, a cell row), so it belongs to one user, and calls the
    kernel specialised for its argument types
    (:meth:`~siftbus.match.kernel.Kernels.specialise`), so ``alive`` must be a 1-d
    uint8 array and ``out`` a 1-d int32 array, always.
    """
    cb, sk, so, ent, sp, bm, co, rec, always = ct.kernel_args()
    row = np.zeros((1, len(ct.cells)), np.int32)
    if ct.wide.n == ct.n:  # no lead sets: the wide kernel alone
        cells_of_event = ct.cells

        def run_wide(event: Event, alive: np.ndarray, out: np.ndarray) -> int:
            row[0, :] = event_cells(cells_of_event, event)
            return add_wide(ct, row, alive, out, 0)

        return run_wide
    # the kernels this was specialised for (none yet: a sentinel), the function
    impl: list[Any] = [object(), None]
    if ct.ordered_only:
        m = len(ct.cells)
        packed: list[np.ndarray] = []  # i64, i32 (made at the first event)
        put_keys = struct.Struct(f"={m}q").pack_into  # 2x np's keys[:] =
        key_buf: list[memoryview] = []
        state = kernel.STATE

        def run_keys(event: Event, alive: np.ndarray, out: np.ndarray) -> int:
            if state.impl is not impl[0]:
                kern = kernel.active()
                if not packed:
                    i64, i32 = kernel.pack_keys_arrays(
                        ct.bounds, *ct.key_tables(), cb, sk, so, co, len(bm) > 0, always)
                    packed.extend((i64, i32))
                    key_buf.append(i64.data)
                impl[1] = kern.specialise("index_match_packed", (
                    packed[0], packed[1], ent, sp, bm, rec, alive, out, _NO_ADDRS))
                impl[0] = kern
            put_keys(key_buf[0], 8 * kernel.KEYS_AT, *event.keys)
            return impl[1](packed[0], packed[1], ent, sp, bm, rec, alive, out, _NO_ADDRS)

        if not ct.wide.n:
            return run_keys

        def run_keys_wide(event: Event, alive: np.ndarray, out: np.ndarray) -> int:
            k = run_keys(event, alive, out)  # leaves the event's cells in packed[1][:m]
            return add_wide(ct, packed[1][:m].reshape(1, m), alive, out, k)

        return run_keys_wide
    cells = ct.cells

    def run_cells(event: Event, alive: np.ndarray, out: np.ndarray) -> int:
        kern = kernel.active()
        if kern is not impl[0]:
            impl[1] = kern.specialise("index_match_one", (
                row, cb, sk, so, ent, sp, bm, co, rec, always, alive, out))
            impl[0] = kern
        row[0, :] = event_cells(cells, event)
        k = impl[1](row, cb, sk, so, ent, sp, bm, co, rec, always, alive, out)
        return add_wide(ct, row, alive, out, k) if ct.wide.n else k

    return run_cells

def id_matcher(ct: PerEventIndex, ids: tuple[str, ...], addrs: np.ndarray
               ) -> Callable[[Event, np.ndarray], list[str]] | None:
    """The whole per-event path as one function, for a type whose attributes are all
    ordered and that has no wide profiles (else ``None``: :func:`event_runner`
    serves): ``match(event, alive)``, the ids (``ids[rank]``, ``ids`` in rank order)
    of the profiles the event matches, sorted; ``alive`` as in :func:`event_runner`.

    One Python call and one kernel call per event: the keys go straight into the
    packed arrays of ``index_match_packed`` (made now, see :func:`event_runner`),
    the kernel writes the ranks, the list is made from them. With ``addrs`` (int64,
    ``id()`` of each of ``ids``; empty: none), the compiled kernel asks for the
    lines of each match's id string and tuple slot as it finds it, so that making
    the list waits for none of them (:meth:`~siftbus.match.kernel.Kernels.index_match_packed`).
    The function keeps scratch arrays, so it belongs to one user, and re-specialises
    when the process changes kernels.
    """
    if not ct.ordered_only or ct.wide.n or not ct.n:
        return None
    cb, sk, so, ent, sp, bm, co, rec, always = ct.kernel_args()
    i64, i32 = kernel.pack_keys_arrays(ct.bounds, *ct.key_tables(), cb, sk, so, co,
                                       len(bm) > 0, always)
    i64[kernel.IDS_AT] = id(ids) + _TUPLE_ITEMS if len(addrs) else 0
    put_keys = struct.Struct(f"={len(ct.cells)}q").pack_into
    keys_at = 8 * kernel.KEYS_AT
    key_buf = i64.data
    state = kernel.STATE
    chosen: object = _UNCHOSEN  # the kernels ``fn`` was specialised for
    fn: Any = None
    out = np.empty(256, np.int32)
    view = out.data

    def match(event: Event, alive: np.ndarray) -> list[str]:
        nonlocal chosen, fn, out, view
        if state.impl is not chosen:
            chosen = kernel.active()
            fn = chosen.specialise("index_match_packed",
                                   (i64, i32, ent, sp, bm, rec, alive, out, addrs))
        put_keys(key_buf, keys_at, *event.keys)
        k = fn(i64, i32, ent, sp, bm, rec, alive, out, addrs)
        if not k:
            return []
        if k > len(out):
            out = np.empty(2 * k, np.int32)
            view = out.data
            k = fn(i64, i32, ent, sp, bm, rec, alive, out, addrs)
        return [ids[r] for r in view[:k]]

    return match


def add_wide(ct: PerEventIndex, cells: np.ndarray, alive: np.ndarray, out: np.ndarray,
              k: int) -> int:
    """Put the wide matches of one cell row after the ``k`` lead-set matches in ``out``
    and sort them together; returns the count (above ``len(out)``: too small)."""
    if not ct.wide.n or k > len(out):
        return k
    got = int(kernel.active().wide_match_one(cells, *ct.wide.args(), ct.rec, alive,
                                             out[k:]))
    if k and got and k + got <= len(out):
        out[:k + got].sort()
    return k + got
