"""The compiled open index: JSON event lines read and matched in one numba kernel.

:func:`match_lines` takes the bytes of JSON-lines events and the arrays of an
:class:`~siftbus.match.open_program.OpenProgram`, and for each line either matches it
(status ``MATCHED``, its profiles appended to the output, sorted by dense index) or leaves
it to the Python path (``SLOW``): the specification's parser and the open index decide
every line the kernel is not sure to read exactly as they would. It reads a line itself
only when it is one JSON object of ASCII text without escapes, with no repeated key at any
depth, its ``"type"`` a compiled type, every declared attribute a string, an array of
strings or (optional ones) ``null``/absent; undeclared fields may hold anything, skipped
with the reader's checks (:mod:`siftbus.match.open_json_numba`). That covers events as web
services send them; anything else is exact on the slow path. Not for concurrent calls
from several threads: a :class:`~siftbus.match.open_batch.JsonEventMatcher` keeps one
scratch array.

Per event: the satisfied conditions are marked with the event's generation number (no
clearing between events), alternatives are reached through their access conditions, and
lazy wildcards run on the candidates' fields only, once per event.
"""

from __future__ import annotations

import numpy as np

from siftbus.match.kernel_primitives import sort_run
from siftbus.match.lex_numba import _skip_ws, count_lines, line_end
from siftbus.match.numba_load import njit
from siftbus.match.open_json_numba import MAX_ELEMENTS, MAX_KEYS, _scan

BLANK, MATCHED, SLOW = 0, 1, 2
# scratch layout: [gen, mgen] then the stamp arrays (sizes from the program)
_GEN, _MGEN, _HEAD = 0, 1, 2


def scratch_for(n_cids: int, n_profiles: int, n_fields: int) -> np.ndarray:
    """The per-matcher scratch the kernel keeps its stamps in (reused across calls)."""
    return np.zeros(_HEAD + 5 * n_cids + n_profiles + 4 * (MAX_KEYS + 1) + 2 * MAX_ELEMENTS
                    + 2 * n_fields + 8, np.int64)


@njit(cache=True, inline="always")
def _sec(prog: np.ndarray, k: int) -> np.ndarray:
    return prog[prog[k]:prog[k + 1]]


@njit(cache=True, inline="always")
def _eq_bytes(b: np.ndarray, s: int, pb: np.ndarray, o: int, n: int, fold: bool) -> bool:
    for k in range(n):
        c = b[s + k]
        if fold and 65 <= c <= 90:
            c += 32
        if c != pb[o + k]:
            return False
    return True


@njit(cache=True, inline="always")
def _lookup(b: np.ndarray, s: int, n: int, tid: int, fold: bool, slots: np.ndarray,
            mask: np.uint64, pb: np.ndarray) -> tuple[int, int]:
    """The pool range of the conditions filed under ``b[s:s+n]`` in table ``tid``: the
    slot's line holds the table, the length and the first 16 bytes of its key."""
    h = np.uint64(14695981039346656037) ^ np.uint64(tid)
    w = np.uint64(0)
    w0 = np.uint64(0)
    w1 = np.uint64(0)
    for k in range(n):  # :func:`siftbus.match.open_program.key_hash`
        c = b[s + k]
        if fold and 65 <= c <= 90:
            c += 32
        w |= np.uint64(c) << np.uint64(8 * (k & 7))
        if k & 7 == 7:
            h = (h ^ w) * np.uint64(1099511628211)
            if k == 7:
                w0 = w
            elif k == 15:
                w1 = w
            w = np.uint64(0)
    if n & 7:
        h = (h ^ w) * np.uint64(1099511628211)
        if n < 8:
            w0 = w
        elif n < 16:
            w1 = w
    h ^= np.uint64(n)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    at = np.int64(h & mask)
    while True:
        o = 8 * at
        t = slots[o]
        if t < 0:
            return 0, 0
        if t == tid and slots[o + 1] == n and slots[o + 5] == np.int64(w0) \
                and slots[o + 6] == np.int64(w1) \
                and (n <= 16 or _eq_bytes(b, s + 16, pb, slots[o + 4] + 16, n - 16, fold)):
            return slots[o + 2], slots[o + 3]
        at = (at + 1) & np.int64(mask)


@njit(cache=True)
def _find(b: np.ndarray, lo: int, hi: int, pb: np.ndarray, o: int, n: int) -> int:
    last = hi - n
    k = lo
    while k <= last:
        ok = True
        for q in range(n):
            if b[k + q] != pb[o + q]:
                ok = False
                break
        if ok:
            return k
        k += 1
    return -1


@njit(cache=True)
def _wildcard(b: np.ndarray, s: int, n: int, parts: np.ndarray, p0: int, p1: int,
              pb: np.ndarray) -> bool:
    """:func:`siftbus.model.checks.wildcard_match` on bytes (pieces ``p0..p1``)."""
    fo, fn = parts[2 * p0], parts[2 * p0 + 1]
    if p1 - p0 == 1:
        return n == fn and _eq_bytes(b, s, pb, fo, fn, False)
    lo_, ln = parts[2 * (p1 - 1)], parts[2 * (p1 - 1) + 1]
    if n < fn + ln or not _eq_bytes(b, s, pb, fo, fn, False):
        return False
    if not _eq_bytes(b, s + n - ln, pb, lo_, ln, False):
        return False
    pos = s + fn
    end = s + n - ln
    for p in range(p0 + 1, p1 - 1):
        at = _find(b, pos, end, pb, parts[2 * p], parts[2 * p + 1])
        if at < 0:
            return False
        pos = at + parts[2 * p + 1]
    return True


@njit(cache=True)
def _lazy(x: int, gen: int, fel: np.ndarray, els: np.ndarray, b: np.ndarray,
          prog: np.ndarray, pb: np.ndarray, st: np.ndarray, lz_stamp: int, lz_val: int) -> bool:
    """Whether lazy condition ``x`` holds (once per event: memo in the scratch)."""
    if st[lz_stamp + x] == gen:
        return st[lz_val + x] == 1
    lazys = _sec(prog, 8)
    parts = _sec(prog, 9)
    f, neg, p0, p1 = lazys[4 * x], lazys[4 * x + 1], lazys[4 * x + 2], lazys[4 * x + 3]
    got = False
    for j in range(fel[2 * f], fel[2 * f + 1]):
        if _wildcard(b, els[2 * j], els[2 * j + 1], parts, p0, p1, pb) != (neg == 1):
            got = True
            break
    st[lz_stamp + x] = gen
    st[lz_val + x] = 1 if got else 0
    return got


@njit(cache=True)
def _event(b: np.ndarray, s: int, e: int, prog: np.ndarray, pb: np.ndarray,
           st: np.ndarray, out: np.ndarray, n_out: int) -> int:
    """Match one line; returns the new output length, ``-1`` for the slow path, ``-2``
    when ``out`` is too short."""
    meta = _sec(prog, 11)
    n_cids, n_prof = meta[0], meta[1]
    sat_s = _HEAD
    miss_s = sat_s + n_cids
    lz_stamp = miss_s + n_cids
    lz_val = lz_stamp + n_cids
    satl = lz_val + n_cids
    seen = satl + n_cids
    kb = seen + n_prof
    keys = st[kb:kb + 4 * (MAX_KEYS + 1)]
    els = st[kb + 4 * (MAX_KEYS + 1):kb + 4 * (MAX_KEYS + 1) + 2 * MAX_ELEMENTS]
    nk = _scan(b, s, e, keys, els)
    if nk < 0:
        return -1
    types = _sec(prog, 0)
    fields = _sec(prog, 1)
    pool = _sec(prog, 10)
    ti = -1
    for k in range(nk):
        if keys[4 * k + 1] == 4 and b[keys[4 * k]] == 116 and b[keys[4 * k] + 1] == 121 \
                and b[keys[4 * k] + 2] == 112 and b[keys[4 * k] + 3] == 101:
            if keys[4 * k + 2] != 1:
                return -1
            vs, vn = els[2 * keys[4 * k + 3]], els[2 * keys[4 * k + 3] + 1]
            for t in range(len(types) // 8):
                if types[8 * t + 1] == vn and _eq_bytes(b, vs, pb, types[8 * t], vn, False):
                    ti = t
                    break
            break
    if ti < 0:
        return -1
    f_lo, f_hi = types[8 * ti + 2], types[8 * ti + 3]
    nf = f_hi - f_lo
    fb = kb + 4 * (MAX_KEYS + 1) + 2 * MAX_ELEMENTS
    fel = st[fb:fb + 2 * nf]  # per field: its element range in els (lo == hi: absent)
    for f in range(nf):
        fr = 11 * (f_lo + f)
        ko, kn, flags = fields[fr], fields[fr + 1], fields[fr + 2]
        found = -1
        for k in range(nk):
            if keys[4 * k + 1] == kn and _eq_bytes(b, keys[4 * k], pb, ko, kn, False):
                found = k
                break
        lo = hi = 0
        if found >= 0:
            kind = keys[4 * found + 2]
            lo, hi = keys[4 * found + 3], keys[4 * found + 7]
            if kind >= 4 or (kind == 2 and (flags & 2) == 0):
                return -1
        if lo == hi and (flags & 1) == 0:
            return -1
        fel[2 * f] = lo
        fel[2 * f + 1] = hi
    gen = st[_GEN] + 1
    st[_GEN] = gen
    nsat = 0
    lens_off = _sec(prog, 2)
    lens = _sec(prog, 3)
    slots = _sec(prog, 4)
    hmask = np.uint64(meta[2])
    for f in range(nf):
        fr = 11 * (f_lo + f)
        lo, hi = fel[2 * f], fel[2 * f + 1]
        if lo == hi:
            a0, a1 = fields[fr + 7], fields[fr + 8]
        else:
            a0, a1 = fields[fr + 5], fields[fr + 6]
        for q in range(a0, a1):
            c = pool[q]
            if st[sat_s + c] != gen:
                st[sat_s + c] = gen
                st[satl + nsat] = c
                nsat += 1
        if lo == hi:
            continue
        fid, mask = fields[fr + 9], fields[fr + 10]
        n0, n1 = fields[fr + 3], fields[fr + 4]
        if mask == 0 and n0 == n1:
            continue
        for j in range(lo, hi):
            es, en = els[2 * j], els[2 * j + 1]
            mg = st[_MGEN] + 1
            st[_MGEN] = mg
            for tab in range(6):
                if (mask >> (2 * tab)) & 3 == 0:
                    continue
                tid = fid * 6 + tab
                fold = tab == 1 or tab == 3 or tab == 5
                n_len = 1 if tab < 2 else lens_off[tid + 1] - lens_off[tid]
                for ln_i in range(n_len):
                    if tab < 2:
                        ps, pn = es, en
                    else:
                        pn = lens[lens_off[tid] + ln_i]
                        if pn > en:
                            break
                        ps = es if tab < 4 else es + en - pn
                    for side in range(2):
                        if (mask >> (2 * tab + side)) & 1 == 0:
                            continue
                        r0, r1 = _lookup(b, ps, pn, 2 * tid + side, fold, slots, hmask,
                                         pb)
                        for q in range(r0, r1):
                            c = pool[q]
                            if side == 1:
                                st[miss_s + c] = mg
                            elif st[sat_s + c] != gen:
                                st[sat_s + c] = gen
                                st[satl + nsat] = c
                                nsat += 1
            for q in range(n0, n1):
                c = pool[q]
                if st[miss_s + c] != mg and st[sat_s + c] != gen:
                    st[sat_s + c] = gen
                    st[satl + nsat] = c
                    nsat += 1
    acc = _sec(prog, 6)
    alts = _sec(prog, 7)
    start = n_out
    for i in range(nsat):  # the groups of alternatives each satisfied condition reaches
        c = st[satl + i]
        q, q1 = acc[2 * c], acc[2 * c + 1]
        while q < q1:
            nn, nl, npf, multi = pool[q], pool[q + 1], pool[q + 2], pool[q + 3]
            q += 4
            ok = True
            for r in range(q, q + nn):
                if st[sat_s + pool[r]] != gen:
                    ok = False
                    break
            q += nn
            if ok:
                for r in range(q, q + nl):
                    if not _lazy(pool[r], gen, fel, els, b, prog, pb, st, lz_stamp, lz_val):
                        ok = False
                        break
            q += nl
            if ok:
                if n_out + npf > len(out):
                    return -2
                if multi:
                    for r in range(q, q + npf):
                        p = pool[r]
                        if st[seen + p] != gen:
                            st[seen + p] = gen
                            out[n_out] = p
                            n_out += 1
                else:  # each of these profiles is reached by this one alternative
                    for r in range(q, q + npf):
                        out[n_out] = pool[r]
                        n_out += 1
            q += npf
    la0, la1 = types[8 * ti + 4], types[8 * ti + 5]
    for q in range(la0, la1, 3):
        if not _lazy(pool[q], gen, fel, els, b, prog, pb, st, lz_stamp, lz_val):
            continue
        for r in range(pool[q + 1], pool[q + 2]):
            a = pool[r]
            p = alts[5 * a]
            if st[seen + p] == gen:
                continue
            ok = True
            for w in range(alts[5 * a + 3], alts[5 * a + 4]):
                if not _lazy(pool[w], gen, fel, els, b, prog, pb, st, lz_stamp, lz_val):
                    ok = False
                    break
            if ok:
                if n_out >= len(out):
                    return -2
                st[seen + p] = gen
                out[n_out] = p
                n_out += 1
    for q in range(types[8 * ti + 6], types[8 * ti + 7]):
        p = alts[5 * pool[q]]
        if st[seen + p] != gen:
            if n_out >= len(out):
                return -2
            st[seen + p] = gen
            out[n_out] = p
            n_out += 1
    sort_run(out, start, n_out)
    return n_out


@njit(cache=True)
def match_lines(b: np.ndarray, starts: np.ndarray, ends: np.ndarray, prog: np.ndarray,
                pb: np.ndarray, st: np.ndarray, status: np.ndarray, offsets: np.ndarray,
                out: np.ndarray) -> int:
    """Match lines ``b[starts[i]:ends[i]]``: ``status[i]`` (BLANK, MATCHED, SLOW) and the
    CSR ``offsets``/``out`` of the matched ones (a slow line's row is empty here). Returns
    the number of lines done (fewer than given when ``out`` filled up)."""
    n_out = 0
    offsets[0] = 0
    for i in range(len(starts)):
        s, e = starts[i], ends[i]
        if _skip_ws(b, s, e) == e:
            status[i] = BLANK
            offsets[i + 1] = n_out
            continue
        got = _event(b, s, e, prog, pb, st, out, n_out)
        if got == -2:
            return i
        if got < 0:
            status[i] = SLOW
        else:
            status[i] = MATCHED
            n_out = got
        offsets[i + 1] = n_out
    return len(starts)


@njit(cache=True)
def match_one(b: np.ndarray, prog: np.ndarray, pb: np.ndarray, st: np.ndarray,
              out: np.ndarray) -> int:
    """One line: the number of profiles written to ``out``, ``-1`` for the slow path,
    ``-2`` when ``out`` is too short."""
    return _event(b, 0, len(b), prog, pb, st, out, 0)


@njit(cache=True)
def line_bounds(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every line of ``b`` (the one rule: \\n, \\r\\n or a lone \\r)."""
    n = count_lines(b)
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    s = 0
    for i in range(n):
        e, nxt = line_end(b, s)
        starts[i] = s
        ends[i] = e
        s = nxt
    return starts, ends
