"""The access table: candidate filters by their access constraint, on integer arrays.

Each filter with conditions has one *access constraint*, the rarest of its constraints by
the slots' estimates; the others are checked only for filters whose access constraint an
event satisfies. The table is compiled into CSR arrays (constraint -> candidate entries,
entry -> filter and its other constraints, rarest first) and matched by a numba kernel:
the event's satisfied constraints are stamped into an array with the event's number, then
every candidate of a satisfied access constraint is accepted when all its other
constraints carry that stamp. No Python object is touched per candidate.

Subscriptions change while events are matched, so the compiled arrays are a snapshot
plus a *delta*: a filter added since the snapshot waits in a small Python table (matched
by the same rule against the same stamps), a removed one is switched off in the
snapshot's ``alive`` array. When the delta or the removed part passes a quarter of the
snapshot (at least ``compile_min``), the next match compiles a new snapshot, so the cost of
compiling is amortised O(1) per change and bulk loading compiles once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter

import numpy as np

from siftbus.match.numba_load import njit

_EMPTY = np.zeros(0, np.int32)


# The snapshot is one int32 array (a numba call costs per argument, and a candidate costs
# per cache line it touches): a header, the entries of each access constraint (CSR), each
# entry one row of _ROW ints (filter, its subscription's and receiver's ranks, its first
# _INLINE other constraints, padded with -1, and the span of the rest), and the rest.
_NCID, _ACC, _ENT, _OTH, _NENT, _NSUB = range(6)
_HEADER = 6
_FID, _SUB, _REC, _OBEG, _OEND, _IN0 = range(6)
_INLINE = 3
_ROW = _IN0 + _INLINE


@njit(cache=True)
def _match(sat: np.ndarray, stamp: np.ndarray, epoch: int, snap: np.ndarray,
           out: np.ndarray, counts: np.ndarray, marks: np.ndarray) -> None:
    """Stamp the event's satisfied constraints (a repeated one once), then accept every
    candidate of a satisfied access constraint whose other constraints are all stamped.

    ``out`` gets the accepted filters in ``out[0]``, and their subscriptions' and
    receivers' ranks (the places of their ids in sorted order), sorted and distinct, in
    ``out[1]`` and ``out[2]``; then the receivers' ranks plus ``snap[_NSUB]`` also after
    the subscriptions' in ``out[1]`` (one list of places in the subscriptions followed by
    the receivers). ``counts`` gets the three lengths (``-1`` when ``out`` is too small:
    it holds twice as many columns as filters) and the number of candidates examined.
    """
    nstamp = stamp.shape[0]
    for i in range(sat.shape[0]):
        c = sat[i]
        if c >= nstamp or (stamp[c] & 0x7F) == epoch:
            sat[i] = -1
        else:
            stamp[c] = (stamp[c] & 0x80) | epoch
    acc, ent, oth = snap[_ACC], snap[_ENT], snap[_OTH]
    cap = out.shape[1] // 2
    k = 0
    examined = 0
    for i in range(sat.shape[0]):
        c = sat[i]
        if c < 0 or stamp[c] < 0x80:  # not an access constraint of the snapshot
            continue
        examined += snap[acc + c + 1] - snap[acc + c]
        for j in range(snap[acc + c], snap[acc + c + 1]):
            row = ent + j * _ROW
            f = snap[row + _FID]
            if f < 0:  # removed since the snapshot
                continue
            ok = True
            for q in range(row + _IN0, row + _ROW):
                o = snap[q]
                if o < 0:
                    break
                if (stamp[o] & 0x7F) != epoch:
                    ok = False
                    break
            if ok:
                for q in range(snap[row + _OBEG], snap[row + _OEND]):
                    if (stamp[snap[oth + q]] & 0x7F) != epoch:
                        ok = False
                        break
            if ok:
                if k == cap:
                    counts[0] = -1
                    return
                out[0, k] = f
                out[1, k] = snap[row + _SUB]
                out[2, k] = snap[row + _REC]
                k += 1
    counts[0] = k
    counts[3] = examined
    for r in range(1, 3):
        counts[r] = _sorted_distinct(out[r], k, marks)
    nsub = counts[1]
    shift = snap[_NSUB]
    for i in range(counts[2]):
        out[1, nsub + i] = out[2, i] + shift


@njit(cache=True)
def _sorted_distinct(vals: np.ndarray, k: int, marks: np.ndarray) -> int:
    """Sort ``vals[:k]`` in place and drop repeats; returns how many are left.

    A few by insertion; many (dense workloads match thousands of filters per event) by
    marking them in ``marks`` (zeros, as long as the largest value) and reading the marks
    back over their span, when that span is short next to a comparison sort.
    """
    if k <= 32:
        for i in range(1, k):
            v = vals[i]
            j = i - 1
            while j >= 0 and vals[j] > v:
                vals[j + 1] = vals[j]
                j -= 1
            vals[j + 1] = v
        n = 0
        for i in range(k):
            if n == 0 or vals[i] != vals[n - 1]:
                vals[n] = vals[i]
                n += 1
        return n
    lo = vals[0]
    hi = vals[0]
    for i in range(k):
        lo = min(lo, vals[i])
        hi = max(hi, vals[i])
    if hi - lo > 16 * k:
        ranks = np.sort(vals[:k])
        n = 0
        for i in range(k):
            if n == 0 or ranks[i] != vals[n - 1]:
                vals[n] = ranks[i]
                n += 1
        return n
    for i in range(k):
        marks[vals[i]] = 1
    n = 0
    for v in range(lo, hi + 1):
        if marks[v]:
            marks[v] = 0
            vals[n] = v
            n += 1
    return n


class AccessTable:
    """Filters by access constraint: a compiled snapshot and a delta (module docstring)."""

    def __init__(self, compile_min: int = 256) -> None:
        self.compile_min = compile_min
        # the snapshot
        self._snap = np.array([0, _HEADER, _HEADER + 1, _HEADER + 1, 0, 0, 0], np.int32)
        self._entry_of = np.zeros(0, np.int64)
        self._in_snapshot = 0
        self._dead = 0
        #: has the delta or the removed part passed the threshold (compile before matching)
        self.stale = False
        # the delta: access constraint -> [(filter, other constraints)]
        self._delta: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        self._delta_of: dict[int, int] = {}  # filter -> its access constraint
        #: per constraint: the number of the last event that satisfied it (1 to 127, the
        #: low bits) and whether it is an access constraint of the snapshot (0x80). One
        #: byte each, so that the array stays in the CPU cache
        self._stamp = np.zeros(64, np.uint8)
        self._epoch = 0
        self._out = np.zeros((3, 512), np.int32)
        self._counts = np.zeros(4, np.int64)
        self._marks = np.zeros(1, np.uint8)  # for sorting many ranks, as long as the ranks
        #: candidates examined by the kernel since the table was made
        self.examined = 0
        self.compiles = 0

    # -- changes ------------------------------------------------------------------------
    def add(self, fid: int, access: int, others: tuple[int, ...]) -> None:
        """A new filter (it waits in the delta until the next compile)."""
        self._delta.setdefault(access, []).append((fid, others))
        self._delta_of[fid] = access
        top = max(access, *others) if others else access
        if top >= len(self._stamp):
            self._grow_stamp(top)
        self._update()

    def remove(self, fid: int) -> None:
        access = self._delta_of.pop(fid, None)
        if access is not None:
            kept = [e for e in self._delta[access] if e[0] != fid]
            if kept:
                self._delta[access] = kept
            else:
                del self._delta[access]
            self._update()
            return
        if fid < len(self._entry_of) and self._entry_of[fid] >= 0:
            snap = self._snap
            snap[snap[_ENT] + self._entry_of[fid] * _ROW + _FID] = -1
            self._entry_of[fid] = -1
            self._dead += 1
            self._update()

    def _update(self) -> None:
        limit = max(self.compile_min, self._in_snapshot // 4)
        self.stale = len(self._delta_of) > limit or self._dead > limit

    def compile(self, entries: Iterable[tuple[int, int, tuple[int, ...]]], ncid: int,
                nfid: int, rank: np.ndarray, nsub: int = 0) -> None:
        """A new snapshot of every live filter, ``(fid, access, others)``; the delta and
        the removed filters are folded in. ``rank[0, fid]`` and ``rank[1, fid]`` are the
        places of the filter's subscription id and receiver among the live ones, sorted
        (so that sorting matched ranks sorts the ids); ``nsub``, the number of
        subscription ids, is added to receivers' ranks in :meth:`match`'s list of both."""
        # built column by column from Python lists, in bulk (one numpy call per column,
        # not one per filter)
        rows = sorted(entries, key=itemgetter(1))
        n = len(rows)
        fids = np.array([r[0] for r in rows], np.int64).reshape(n)
        counts = np.zeros(ncid + 1, np.int64)
        counts[1:] = np.bincount(np.array([r[1] for r in rows], np.int64).reshape(n),
                                 minlength=ncid)[:ncid]
        pad = (-1,) * _INLINE
        table = np.full((n, _ROW), -1, np.int64)
        table[:, _FID] = fids
        table[:, _IN0 : _IN0 + _INLINE] = np.array(
            [(r[2] + pad)[:_INLINE] for r in rows], np.int64).reshape(n, _INLINE)
        rest = [max(0, len(r[2]) - _INLINE) for r in rows]
        ends = np.cumsum(np.array(rest, np.int64).reshape(n))
        table[:, _OEND] = ends
        table[:, _OBEG] = ends - np.array(rest, np.int64).reshape(n)
        flat = [o for r in rows if len(r[2]) > _INLINE for o in r[2][_INLINE:]]
        table[:, _SUB] = rank[0, fids]
        table[:, _REC] = rank[1, fids]
        self._marks = np.zeros(int(rank.max(initial=0)) + 1, np.uint8)
        acc = np.cumsum(counts)
        size = _HEADER + len(acc) + table.size + len(flat)
        if size >= 2**31:
            raise OverflowError("the access table passed 2**31 entries")
        head = [ncid, _HEADER, _HEADER + len(acc), _HEADER + len(acc) + table.size, n, nsub]
        self._snap = np.concatenate([np.array(head), acc, table.ravel(),
                                     np.array(flat, np.int64)]).astype(np.int32)
        self._entry_of = np.full(nfid, -1, np.int64)  # filter -> its row
        self._entry_of[fids] = np.arange(n)
        self._in_snapshot = n
        self._dead = 0
        self._delta.clear()
        self._delta_of.clear()
        self._grow_stamp(ncid)
        self._stamp[:] = 0
        self._stamp[np.flatnonzero(counts[1:])] = 0x80
        self._epoch = 0
        self.stale = False
        self.compiles += 1

    def _grow_stamp(self, cid: int) -> None:
        if cid >= len(self._stamp):
            new = np.zeros(max(2 * len(self._stamp), cid + 1), np.uint8)
            new[: len(self._stamp)] = self._stamp
            self._stamp = new

    # -- matching -----------------------------------------------------------------------
    def match(self, sat: np.ndarray) -> tuple[list[int], np.ndarray | None, int]:
        """The filters whose constraints are all in ``sat`` (an int32 array of satisfied
        constraint ids, which is consumed), through their access constraint; with the
        sorted distinct ranks of their subscriptions, followed by their receivers' plus
        ``nsub`` (see :meth:`compile`), as one int32 array valid until the next match (a
        view of the kernel's output: the caller turns it into objects at once), or None
        when a filter of the delta matched (it has no rank yet); and how many of those
        ranks are subscriptions'."""
        epoch = self._epoch + 1
        if epoch == 0x80:
            epoch = self._next_epoch()
        else:
            self._epoch = epoch
        stamp = self._stamp
        counts = self._counts
        while True:
            _match(sat, stamp, epoch, self._snap, self._out, counts, self._marks)
            k, nsub, nrec, examined = counts.tolist()
            if k >= 0:
                break
            self._out = np.zeros((3, 2 * self._out.shape[1]), np.int32)
            epoch = self._next_epoch()  # stamp again under a fresh number
        out = self._out
        self.examined += examined
        if k == 0:
            found: list[int] = []
            if not self._delta:
                return found, _EMPTY, 0
        else:
            found = out[0, :k].tolist()
        if self._delta:
            n = len(found)
            self._match_delta(sat, stamp, epoch, found)
            if len(found) > n:
                return found, None, 0
            if not n:
                return found, _EMPTY, 0
        return found, out[1, : nsub + nrec], nsub

    def _next_epoch(self) -> int:
        self._epoch += 1
        if self._epoch == 0x80:  # the event numbers start again
            self._stamp &= 0x80
            self._epoch = 1
        return self._epoch

    def _match_delta(self, sat: np.ndarray, stamp: np.ndarray, epoch: int,
                     found: list[int]) -> None:
        delta = self._delta
        if len(delta) < len(sat):
            hits: Iterable[int] = [c for c in delta if (stamp[c] & 0x7F) == epoch]
        else:
            hits = [c for c in sat.tolist() if c in delta]
        for c in hits:
            for fid, others in delta[c]:
                for o in others:
                    if (stamp[o] & 0x7F) != epoch:
                        break
                else:
                    found.append(fid)

    def is_empty(self) -> bool:
        return not self._delta and not (self._entry_of >= 0).any()

    def snapshot_entries(self) -> list[tuple[int, int, tuple[int, ...]]]:
        """The live filters as ``(fid, access, others)``: the snapshot's and the delta's
        (for tests, which compare them with the matcher's registry)."""
        snap = self._snap
        acc, ent, oth = (int(snap[i]) for i in (_ACC, _ENT, _OTH))
        out = []
        for c in range(int(snap[_NCID])):
            for j in range(snap[acc + c], snap[acc + c + 1]):
                row = snap[ent + j * _ROW : ent + (j + 1) * _ROW]
                if row[_FID] >= 0:
                    inline = [o for o in row[_IN0:].tolist() if o >= 0]
                    rest = snap[oth + row[_OBEG] : oth + row[_OEND]].tolist()
                    out.append((int(row[_FID]), c, tuple(inline + rest)))
        for c, lst in self._delta.items():
            out.extend((f, c, o) for f, o in lst)
        return sorted(out)


def choose_access(cids: Iterable[int], cost: Callable[[int], tuple[float, int]]
                  ) -> tuple[int, tuple[int, ...]]:
    """(access constraint, the others rarest first) of a filter's constraints."""
    ranked = sorted(cids, key=cost)
    return ranked[0], tuple(ranked[1:])
