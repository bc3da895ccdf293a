"""Prefetching the id strings a per-event match is about to return, compiled with numba.

After the kernel has found an event's ranks, building the list of ids touches two
cache lines per match at random places: the slot of the ids tuple and the string it
points to (whose reference count the list's ``INCREF`` writes). In the interpreter's
loop these misses come one after another; asking for every line at once, before the
loop, lets the memory system fetch them together (~1.3 µs of ~7 µs per event at
100,000 profiles was this loop, nearly all waiting).

Only *prefetch* instructions use the addresses (``llvm.prefetch``: x86 ``PREFETCHW``,
arm64 ``PRFM``). They never fault and never change memory, so nothing here reads a
Python object through its address: a wrong address could only cost time. The addresses
are those of objects the caller keeps alive (the tuple and its strings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, typeof, types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetcher(write: int) -> Any:
    """An intrinsic ``f(addr)``: ``llvm.prefetch(addr, write, high locality, data)``."""

    def prefetch(typingctx: Any, addr: Any) -> Any:
        sig = types.void(types.int64)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            byte_ptr = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            builder.call(fn, [builder.inttoptr(args[0], byte_ptr), ir.Constant(i32, write),
                              ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return sig, codegen

    return intrinsic(prefetch)


_prefetch_read = _prefetcher(0)
_prefetch_write = _prefetcher(1)  # a reference count is written next


@njit(cache=True, nogil=True)
def prefetch_ids(ranks: np.ndarray, k: int, addrs: np.ndarray, slots: int) -> int:
    """Prefetch, for the first ``k`` ``ranks``, the string at ``addrs[rank]`` and the
    tuple slot at ``slots + 8 * rank``; returns ``k``."""
    for i in range(k):
        r = ranks[i]
        _prefetch_read(slots + 8 * r)
        _prefetch_write(addrs[r])
    return k


def compiled_prefetch(ranks: np.ndarray, addrs: np.ndarray
                      ) -> Callable[[np.ndarray, int, np.ndarray, int], int] | None:
    """:func:`prefetch_ids`' compiled entry point for arrays like these (no type
    dispatch per call), or ``None`` when this numba cannot build it: the prefetch only
    saves time, so the caller then goes without."""
    try:
        entry: Callable[[np.ndarray, int, np.ndarray, int], int] = prefetch_ids.compile(
            (typeof(ranks), types.int64, typeof(addrs), types.int64))
    except Exception:  # any failure to build it only loses the prefetch
        return None
    return entry
