"""Wide conditions: sorted endpoints and rejection bitsets, linear in the conditions.

A PrimAS lead set holds a profile in every cell its lead condition covers, so a profile
whose most selective condition still spans many cells (REIN's benchmark: intervals of
half the domain, a million distinct bounds) costs an entry per covered cell. Such
profiles are kept here instead (:func:`choose_wide` decides, from the profile set's
statistics), in a structure of the REIN/HEM family whose size is linear in the
conditions:

* per attribute, its cells cut into ``nb`` buckets of about equal numbers of cells;
* per bucket, a *rejection bitset* over the wide profiles: the bit of every profile whose
  condition on the attribute has no cell in the bucket (hull ends before the bucket
  starts or starts after it ends);
* per bucket, the conditions whose hull *starts* in it, sorted by first cell, and those
  whose hull *ends* in it, sorted by last cell.

An event falls into one cell, hence one bucket, per attribute: the bitsets of its
buckets are OR-ed, then the event's own buckets' endpoint lists mark exactly the
conditions that start after or end before its cell. Every wide profile left unmarked
satisfies the hulls of all its conditions: it is a match, or (``full``: a condition of
several runs, such as ``!=``, a set, a string class) a candidate checked against its
record. Output is in rank order, since the wide profiles are numbered by rank.

Bucket counts are chosen per attribute from its number of wide conditions ``c`` and
wide profiles ``n``: ``nb = c * REJECT_BYTES / (8 * words)`` (``words = ceil(n / 64)``),
at least 1 and at most the attribute's cells and :data:`MAX_BUCKETS`, so the bitsets
cost about :data:`REJECT_BYTES` per condition and an event's own buckets hold about
``n / 256`` endpoints each: the OR of the bitsets and the exact marking cost about the
same per event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

REJECT_BYTES = 32
"""Bytes of rejection bitsets allowed per wide condition (sets the bucket counts)."""

MAX_BUCKETS = 4096
"""At most this many buckets per attribute."""

LEAD_BYTES = 48
"""Lead-set entries may take this many bytes per condition of a level (an entry is 16
bytes, 32 when cell numbers need int32); beyond, the profiles with the longest lead runs
are kept wide (:func:`choose_wide`)."""

CELL_BYTES = 12
"""What a cell costs in the lead sets' per-cell arrays (``set_kind``, ``set_off``)."""

WIDE_BYTES = 40
"""What a condition costs in the wide structure (bitsets, endpoints, per-profile words)."""

MIXED_LEAD_BYTES = 16
"""Once some profiles of a level are wide, the lead sets of the others may take only this
many bytes per condition of the level."""


WideArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                   np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(nb, row, ncell, rej, lo_off, lo, hi_off, hi, rank, rec)``: what the ``wide_*``
kernels take after the cells."""


@dataclass(frozen=True, slots=True)
class WideIndex:
    """The wide profiles of one compiled level (see the module text). Empty: ``rank`` is
    empty and no attribute has buckets."""

    nb: np.ndarray
    """int64[m] buckets of each attribute (0: no wide condition on it)."""
    row: np.ndarray
    """int64[m + 1] first bucket row of each attribute."""
    ncell: np.ndarray
    """int64[m] cells of each attribute (bucket of cell ``c``: ``c * nb // ncell``)."""
    rej: np.ndarray
    """uint64[rows, words] rejection bitset of each bucket row."""
    lo_off: np.ndarray
    """int64[rows + 1] CSR over bucket rows into ``lo``."""
    lo: np.ndarray
    """int32[L, 2] (first cell, wide index) of the hulls starting in each bucket, sorted."""
    hi_off: np.ndarray
    """int64[rows + 1] CSR over bucket rows into ``hi``."""
    hi: np.ndarray
    """int32[L, 2] (last cell, wide index) of the hulls ending in each bucket, sorted."""
    rank: np.ndarray
    """int32 rank of each wide profile (ascending)."""
    rec: np.ndarray
    """int64 record offset of each wide profile times two, plus one when its runs must
    be checked (a condition of several runs)."""

    @property
    def n(self) -> int:
        return len(self.rank)

    def args(self) -> WideArrays:
        """The arrays in the order the ``wide_*`` kernels take them."""
        return (self.nb, self.row, self.ncell, self.rej, self.lo_off, self.lo, self.hi_off,
                self.hi, self.rank, self.rec)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.args())


def empty(m: int) -> WideIndex:
    """No wide profiles (over ``m`` attributes)."""
    z64 = np.zeros(m, np.int64)
    one = np.zeros(1, np.int64)
    pair = np.zeros((0, 2), np.int32)
    return WideIndex(z64, np.zeros(m + 1, np.int64), z64, np.zeros((0, 1), np.uint64), one,
                     pair, one, pair, np.zeros(0, np.int32), np.zeros(0, np.int64))


def choose_wide(lead_cells: np.ndarray, n_cond: np.ndarray, entry_bytes: int, cells: int
                ) -> np.ndarray:
    """Mask over profiles: which to keep wide. None while the lead sets (one entry of
    ``entry_bytes`` per cell a profile's lead covers, ``lead_cells``) take at most
    :data:`LEAD_BYTES` per condition of the level (``n_cond`` per profile). Else the
    profiles with the most lead cells, most first, until the rest take at most
    :data:`MIXED_LEAD_BYTES` per condition; and all when the rest's entries and the
    per-cell arrays of lead sets (:data:`CELL_BYTES` for each of the level's ``cells``)
    would cost more than keeping the rest wide too (:data:`WIDE_BYTES` a condition)."""
    total = int(lead_cells.sum())
    conditions = int(n_cond.sum())
    out = np.zeros(len(lead_cells), bool)
    if total * entry_bytes <= LEAD_BYTES * conditions:
        return out
    allowed = MIXED_LEAD_BYTES * conditions // max(entry_bytes, 1)
    order = np.argsort(-lead_cells, kind="stable")
    left = total - np.cumsum(lead_cells[order])  # entries left after moving 0..k
    k = min(int(np.searchsorted(-left, -allowed)) + 1, len(left))
    out[order[:k]] = True
    rest = int(n_cond[order[k:]].sum())
    if int(left[k - 1]) * entry_bytes + CELL_BYTES * cells > WIDE_BYTES * rest:
        out[:] = True
    return out


def bucket_counts(conds: np.ndarray, ncell: np.ndarray, n_wide: int) -> np.ndarray:
    """int64 buckets per attribute for ``conds`` wide conditions on it."""
    words = max(1, (n_wide + 63) // 64)
    nb = (conds * REJECT_BYTES) // (8 * words)
    nb = np.clip(nb, 1, np.minimum(ncell, MAX_BUCKETS))
    return np.where(conds > 0, nb, 0).astype(np.int64)


def build(ncell: Sequence[int], hulls: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
          rank: np.ndarray, rec: np.ndarray) -> WideIndex:
    """The wide index of profiles ``rank`` (ascending) with record words ``rec``, given per
    attribute the hulls ``(wide index, first cell, last cell)`` of their conditions."""
    m = len(ncell)
    n = len(rank)
    if n == 0:
        return empty(m)
    cells = np.asarray(ncell, np.int64)
    nb = bucket_counts(np.array([len(h[0]) for h in hulls], np.int64), cells, n)
    row = np.zeros(m + 1, np.int64)
    np.cumsum(nb, out=row[1:])
    words = (n + 63) // 64
    rej = np.zeros((int(row[-1]), words), np.uint64)
    total = sum(len(h[0]) for h in hulls)
    lo = np.empty((total, 2), np.int32)
    hi = np.empty((total, 2), np.int32)
    at = 0
    lo_count = np.zeros(int(row[-1]), np.int64)
    hi_count = np.zeros(int(row[-1]), np.int64)
    for a, (idx, first, last) in enumerate(hulls):
        b = int(nb[a])
        if b == 0:
            continue
        bf = first.astype(np.int64) * b // cells[a]
        bl = last.astype(np.int64) * b // cells[a]
        starts = _bucket_bits(bf, idx, b, words)
        ends = _bucket_bits(bl, idx, b, words)
        r0 = int(row[a])
        # a hull that starts in a later bucket, or ends in an earlier one, rejects the
        # whole bucket: suffix ORs of the starts, prefix ORs of the ends, shifted by one
        if b > 1:
            later = np.bitwise_or.accumulate(starts[::-1], axis=0)[::-1]
            earlier = np.bitwise_or.accumulate(ends, axis=0)
            rej[r0:r0 + b - 1] = later[1:]
            rej[r0 + 1:r0 + b] |= earlier[:-1]
            del later, earlier
        del starts, ends
        k = len(idx)
        by = np.argsort(first, kind="stable")
        lo[at:at + k, 0] = first[by]
        lo[at:at + k, 1] = idx[by]
        lo_count[r0:r0 + b] = np.bincount(bf, minlength=b)
        by = np.argsort(last, kind="stable")
        hi[at:at + k, 0] = last[by]
        hi[at:at + k, 1] = idx[by]
        hi_count[r0:r0 + b] = np.bincount(bl, minlength=b)
        at += k
    lo_off = np.zeros(len(lo_count) + 1, np.int64)
    np.cumsum(lo_count, out=lo_off[1:])
    hi_off = np.zeros(len(hi_count) + 1, np.int64)
    np.cumsum(hi_count, out=hi_off[1:])
    return WideIndex(nb, row, cells, rej, lo_off, lo, hi_off, hi, rank.astype(np.int32),
                     rec.astype(np.int64))


def _bucket_bits(bucket: np.ndarray, idx: np.ndarray, nb: int, words: int) -> np.ndarray:
    """uint64[nb, words]: bit ``idx[i]`` set in row ``bucket[i]`` (``bitwise_or.at``:
    2-6x a sort of the keys and a reduce of each run, the form before)."""
    out = np.zeros(nb * words, np.uint64)
    key = bucket * words + (idx >> 6).astype(np.int64)
    np.bitwise_or.at(out, key, np.left_shift(np.uint64(1), (idx & 63).astype(np.uint64)))
    return out.reshape(nb, words)
