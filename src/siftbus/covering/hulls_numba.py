"""The covering query's hull filter, compiled with numba: the bulk paths (a broker's
restart fills its table with every stored profile at once) ask "which stored hulls
contain this one" per profile over ~1,000 candidates, where a chain of numpy
operations costs more in calls than in work."""

from __future__ import annotations

import numpy as np

from siftbus.match.numba_load import njit


@njit(cache=True, nogil=True)
def hulls_containing(idx: np.ndarray, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray,
                     clo: np.ndarray, chi: np.ndarray) -> np.ndarray:
    """The slots of ``idx`` whose hull ``[lo[r, s], hi[r, s]]`` contains
    ``[clo[j], chi[j]]`` for every row ``r = rows[j]``, in ``idx``'s order."""
    out = np.empty(len(idx), np.int64)
    k = 0
    for s in idx:
        inside = True
        for j in range(len(rows)):
            r = rows[j]
            if lo[r, s] > clo[j] or hi[r, s] < chi[j]:
                inside = False
                break
        if inside:
            out[k] = s
            k += 1
    return out[:k]
