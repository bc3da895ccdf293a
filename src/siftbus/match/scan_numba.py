"""Hand-written scanners for profile and event files, compiled with numba (this module:
the contract and the profile scanner; :mod:`siftbus.match.events_numba`: events;
:mod:`siftbus.match.lex_numba`: the byte-level lexing both use).

They read a whole file's bytes in one call and do for the common, well-formed line what
the specification's path does one line at a time (the lark grammar and
``Profile.build`` for profiles, ``parse_json_line`` and ``event_from_dict`` for
events), writing columns: interval rows per profile, keys per event. A line they are not
sure about (any byte outside printable ASCII, a profile's strings with escapes, an
event's escapes of NUL or beyond ASCII, Bittner's form, repeated attributes, an error of
any kind, a limit) is marked *slow* and left to the
specification's path, which gives its value or its exact error: so the scanners need to
be right only on the lines they accept, and the tests check exactly that
(:mod:`siftbus.match.ingest`, ``tests/match/test_ingest.py``).

Schema tables (built by :class:`siftbus.match.ingest.SchemaTables`):

``names``/``name_off``        every identifier as bytes (types, then attributes, then
                              enum labels), one slice each
``type_attr``                 int64[T + 1]: attributes of type ``t`` are the names
                              ``type_attr[t]..type_attr[t+1]`` (global attribute ids)
``kind``                      int8 per attribute: 0 int, 1 decimal, 2 enum, 3 string
``lo``/``hi``/``places``      int64 per attribute: smallest and largest key, decimals
``label_off``                 int64[A + 1]: labels of attribute ``a`` are the names
                              ``label_off[a]..label_off[a+1]`` (key = position)
"""

from __future__ import annotations

import numpy as np

from siftbus.match.kernel_primitives import sort_run

# the byte-level lexing shared with the event scanner, in its own module
from siftbus.match.lex_numba import (
    _exact,
    _is_id,
    _is_start,
    _is_word,
    _lower_is,
    _same,
    _skip_ws,
    _string_end,
    count_lines,
    line_end,
)
from siftbus.match.numba_load import njit

OK, SKIP, SLOW = 0, 1, 2
"""Line status: matched by the scanner, blank or comment, left to the slow path."""

KIND_INT, KIND_DECIMAL, KIND_ENUM, KIND_STRING = 0, 1, 2, 3
MAX_DIGITS = 18
"""Longer numbers go to the slow path (they would not fit an int64 key anyway)."""

_EQ, _NE, _LT, _LE, _GT, _GE, _RANGE, _IN, _EXISTS, _PREFIX = range(10)
STR_IN, STR_NE, STR_PREFIX = 0, 1, 2
"""Operator of a string row of :func:`scan_profiles`: a value of the allowed set (``=`` and
``in {...}``), the excluded value (``!=``), the prefix (``prefix``)."""


_W_IN = np.frombuffer(b"in", np.uint8)
_W_EXISTS = np.frombuffer(b"exists", np.uint8)
_W_PREFIX = np.frombuffer(b"prefix", np.uint8)
_W_MIN = np.frombuffer(b"MIN", np.uint8)
_W_MAX = np.frombuffer(b"MAX", np.uint8)
_W_PROFILE = np.frombuffer(b"PROFILE", np.uint8)


@njit(cache=True, inline="always")
def _scaled(v: int, frac: int, nf: int, p: int) -> int:
    """The decimal ``v.frac`` (``nf`` fraction digits) as a key of ``p`` places: times
    ``10**p``, rounded half away from zero (ROUND_HALF_UP) where it has more places."""
    key = v
    for _ in range(p):
        key *= 10
    f = frac
    if nf <= p:
        for _ in range(p - nf):
            f *= 10
        return key + f
    for _ in range(nf - p - 1):
        f //= 10
    return key + f // 10 + (1 if f % 10 >= 5 else 0)


@njit(cache=True)
def _value(b: np.ndarray, i: int, e: int, attr: int, names: np.ndarray,
           name_off: np.ndarray, kind: np.ndarray, lo: np.ndarray, hi: np.ndarray,
           places: np.ndarray, label_off: np.ndarray, w_min: np.ndarray,
           w_max: np.ndarray, max_string: int, max_number: int) -> tuple[int, int]:
    """Read one value at ``b[i]`` for ordered attribute ``attr``: ``(key, end)``;
    ``end < 0`` when the slow path must decide (a syntax or domain error, a limit)."""
    k = kind[attr]
    c = b[i] if i < e else 0
    if c == 43 or c == 45 or (48 <= c <= 57):  # NUMBER: [+-]?\d+(\.\d+)?
        neg = c == 45
        j = i + 1 if (c == 43 or c == 45) else i
        start = j
        v = 0
        while j < e and 48 <= b[j] <= 57:
            v = v * 10 + (b[j] - 48)
            j += 1
        if j == start or j - start > MAX_DIGITS:
            return 0, -1
        frac = 0
        nf = 0
        if j < e and b[j] == 46:
            j += 1
            fs = j
            while j < e and 48 <= b[j] <= 57:
                frac = frac * 10 + (b[j] - 48)
                j += 1
            nf = j - fs
            if nf == 0 or nf > MAX_DIGITS:
                return 0, -1
        if j - i > max_number:
            return 0, -1
        if j < e and (_is_id(b[j])):  # "5x", "5.5.5": the grammar refuses these
            return 0, -1
        p = places[attr] if k == KIND_DECIMAL else 0
        while nf > p and frac % 10 == 0:  # trailing zeros: 5.0 is 5, 2.50 is 2.5
            frac //= 10
            nf -= 1
        if k == KIND_INT:
            if nf:
                return 0, -1
            key = -v if neg else v
        elif k == KIND_DECIMAL:
            if (j - start) + p > MAX_DIGITS:
                return 0, -1
            scaled = _scaled(v, frac, nf, p)
            key = -scaled if neg else scaled
        else:
            return 0, -1
        if key < lo[attr] or key > hi[attr]:
            return 0, -1
        return key, j
    if c == 34:  # STRING: on an enum, a quoted label is that label (never MIN or MAX)
        j = _string_end(b, i, e, max_string)
        if j < 0 or k != KIND_ENUM:
            return 0, -1
        for t in range(label_off[attr], label_off[attr + 1]):
            if _same(b, i + 1, j - i - 2, names, name_off, t):
                return t - label_off[attr], j
        return 0, -1
    if _is_start(c):  # NAME: an enum label, MIN or MAX
        j = i + 1
        while j < e and _is_word(b[j]):
            j += 1
        n = j - i
        if k == KIND_STRING:
            return 0, -1
        if k == KIND_ENUM:
            for t in range(label_off[attr], label_off[attr + 1]):
                if _same(b, i, n, names, name_off, t):
                    return t - label_off[attr], j
        if _exact(b, i, n, w_min):
            return lo[attr], j
        if _exact(b, i, n, w_max):
            return hi[attr], j
        return 0, -1
    return 0, -1


@njit(cache=True)
def _find_attr(b: np.ndarray, s: int, n: int, t: int, names: np.ndarray,
               name_off: np.ndarray, type_attr: np.ndarray, n_types: int) -> int:
    for a in range(type_attr[t], type_attr[t + 1]):
        if _same(b, s, n, names, name_off, n_types + a):
            return a
    return -1


@njit(cache=True)
def scan_profiles(b: np.ndarray, names: np.ndarray, name_off: np.ndarray,
                  type_attr: np.ndarray, kind: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  places: np.ndarray, label_off: np.ndarray, n_types: int,
                  max_line: int, max_conditions: int, max_string: int, max_number: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                             np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, int]:
    """Scan every line of a profile file (``b``: its bytes, BOM removed).

    Returns per line ``(status, start, end, id_end, sub_start, sub_end, ptype)`` (the id
    is ``start..id_end`` after leading blanks: ``start`` is moved to it for OK lines;
    ``sub_start < 0``: no subscriber), then the interval rows as one int64 ``[R, 4]``
    array ``(line, attribute position in its type, lo, hi)`` sorted by line, attribute
    and ``lo``, and ``R``; then the string rows as one int64 ``[S, 5]`` array ``(line,
    attribute position, operator, start, end)`` (``STR_IN``, ``STR_NE``, ``STR_PREFIX``;
    the value is ``b[start:end]``, without quotes: one row per value of a set) in line
    order, and ``S``. ``prefix ""`` and ``exists`` accept every string: no row.
    """
    n_lines = count_lines(b)
    status = np.full(n_lines, SLOW, np.int8)
    start = np.zeros(n_lines, np.int64)
    end = np.zeros(n_lines, np.int64)
    id_end = np.zeros(n_lines, np.int64)
    sub_s = np.full(n_lines, -1, np.int64)
    sub_e = np.full(n_lines, -1, np.int64)
    ptype = np.full(n_lines, -1, np.int32)
    cap = 1024
    rows = np.empty((cap, 4), np.int64)
    r = 0
    # scratch for one line's conditions: (attribute, lo, hi) intervals; every interval
    # and every set value takes at least one byte of the line
    s_attr = np.empty(max_line + 16, np.int64)
    s_lo = np.empty(max_line + 16, np.int64)
    s_hi = np.empty(max_line + 16, np.int64)
    vals = np.empty(max_line + 16, np.int64)
    # one line's string values: (attribute, operator, start, end)
    t_attr = np.empty(max_line + 16, np.int64)
    t_op = np.empty(max_line + 16, np.int64)
    t_s = np.empty(max_line + 16, np.int64)
    t_e = np.empty(max_line + 16, np.int64)
    scap = 1024
    srows = np.empty((scap, 5), np.int64)
    sr = 0
    seen = np.zeros(kind.shape[0], np.int64)  # line number + 1 that mentioned an attribute
    w_min = _W_MIN
    w_max = _W_MAX
    pos = 0
    for ln in range(n_lines):
        s = pos
        e, pos = line_end(b, s)
        start[ln] = s
        end[ln] = e
        if e - s > max_line:
            continue
        bad = False
        for k in range(s, e):
            c = b[k]
            if c >= 127 or (c < 32 and c != 9):
                bad = True
                break
        if bad:
            continue
        i = _skip_ws(b, s, e)
        if i == e or b[i] == 35:  # blank or comment (after blanks)
            status[ln] = SKIP
            continue
        # ID[@SUBSCRIBER]:
        j = i
        while j < e and _is_id(b[j]):
            j += 1
        if j == i:
            continue
        ie = j
        if j < e and b[j] == 64:  # @
            k = j + 1
            while k < e and _is_id(b[k]):
                k += 1
            if k == j + 1:
                continue
            sub_s[ln] = j + 1
            sub_e[ln] = k
            j = k
        j = _skip_ws(b, j, e)
        if j >= e or b[j] != 58 or (j + 1 < e and b[j + 1] == 61):  # ':' not ':='
            continue
        j = _skip_ws(b, j + 1, e)
        # Type(
        if j >= e or not _is_start(b[j]):
            continue
        ts = j
        while j < e and _is_word(b[j]):
            j += 1
        if _exact(b, ts, j - ts, _W_PROFILE):
            continue
        t = -1
        for tt in range(n_types):
            if _same(b, ts, j - ts, names, name_off, tt):
                t = tt
                break
        if t < 0:
            continue
        j = _skip_ws(b, j, e)
        if j >= e or b[j] != 40:  # (
            continue
        j = _skip_ws(b, j + 1, e)
        nc = 0  # intervals in scratch
        ns = 0  # string values in scratch
        conds = 0
        ok = True
        if j < e and b[j] == 41:  # )
            j += 1
        else:
            while True:
                conds += 1
                if conds > max_conditions:
                    ok = False
                    break
                # attribute NAME
                if j >= e or not _is_start(b[j]):
                    ok = False
                    break
                an = j
                while j < e and _is_word(b[j]):
                    j += 1
                a = _find_attr(b, an, j - an, t, names, name_off, type_attr, n_types)
                if a < 0 or seen[a] == ln + 1:
                    ok = False  # unknown, or a second condition on it: the slow path
                    break
                seen[a] = ln + 1
                j = _skip_ws(b, j, e)
                if j >= e:
                    ok = False
                    break
                c = b[j]
                op = -1
                if c == 33 and j + 1 < e and b[j + 1] == 61:
                    op = _NE
                    j += 2
                elif c == 60 or c == 62:  # < <= > >=
                    eq = j + 1 < e and b[j + 1] == 61
                    op = (_LE if eq else _LT) if c == 60 else (_GE if eq else _GT)
                    j += 2 if eq else 1
                elif c == 61:
                    op = _EQ
                    j += 1
                elif _is_start(c):
                    w = j
                    while j < e and _is_word(b[j]):
                        j += 1
                    if _lower_is(b, w, j - w, _W_IN):
                        j = _skip_ws(b, j, e)
                        if j < e and b[j] == 91:
                            op = _RANGE
                        elif j < e and b[j] == 123:
                            op = _IN
                        j += 1
                    elif _lower_is(b, w, j - w, _W_EXISTS):
                        op = _EXISTS
                    elif _lower_is(b, w, j - w, _W_PREFIX):
                        op = _PREFIX
                if op < 0:
                    ok = False
                    break
                amin = lo[a]
                amax = hi[a]
                if op == _EXISTS:
                    pass  # accepts every value: no rows (strings too)
                elif kind[a] == KIND_STRING:
                    if _LT <= op <= _RANGE:  # <, <=, >, >=, in [...] on a string: an error
                        ok = False
                        break
                    first = ns
                    ve = -1
                    while True:
                        j = _skip_ws(b, j, e)
                        ve = _string_end(b, j, e, max_string)
                        if ve < 0:
                            break
                        t_attr[ns] = a
                        t_op[ns] = STR_NE if op == _NE else (
                            STR_PREFIX if op == _PREFIX else STR_IN)
                        t_s[ns] = j + 1
                        t_e[ns] = ve - 1
                        ns += 1
                        j = _skip_ws(b, ve, e)
                        if op != _IN:
                            break
                        if j < e and b[j] == 44:
                            j += 1
                            continue
                        if j < e and b[j] == 125:  # }
                            j += 1
                        else:
                            ve = -1
                        break
                    if ve < 0:
                        ok = False
                        break
                    if op == _PREFIX and t_s[first] == t_e[first]:
                        ns = first  # prefix "": every string
                elif op == _PREFIX:
                    ok = False  # prefix on an ordered attribute: an error
                    break
                elif op == _RANGE:
                    j = _skip_ws(b, j, e)
                    v1, j = _value(b, j, e, a, names, name_off, kind, lo, hi, places,
                                   label_off, w_min, w_max, max_string, max_number)
                    if j < 0:
                        ok = False
                        break
                    j = _skip_ws(b, j, e)
                    if j >= e or b[j] != 44:
                        ok = False
                        break
                    j = _skip_ws(b, j + 1, e)
                    v2, j = _value(b, j, e, a, names, name_off, kind, lo, hi, places,
                                   label_off, w_min, w_max, max_string, max_number)
                    if j < 0:
                        ok = False
                        break
                    j = _skip_ws(b, j, e)
                    if j >= e or b[j] != 93 or v1 > v2:  # ] and lower <= upper
                        ok = False
                        break
                    j += 1
                    if not (v1 == amin and v2 == amax):
                        s_attr[nc] = a
                        s_lo[nc] = v1
                        s_hi[nc] = v2
                        nc += 1
                elif op == _IN:
                    nv = 0
                    while True:
                        j = _skip_ws(b, j, e)
                        v, j = _value(b, j, e, a, names, name_off, kind, lo, hi, places,
                                      label_off, w_min, w_max, max_string, max_number)
                        if j < 0:
                            j = -1
                            break
                        vals[nv] = v
                        nv += 1
                        j = _skip_ws(b, j, e)
                        if j < e and b[j] == 44:
                            j += 1
                            continue
                        if j < e and b[j] == 125:  # }
                            j += 1
                            break
                        j = -1
                        break
                    if j < 0:
                        ok = False
                        break
                    sort_run(vals, 0, nv)
                    first = nc
                    for q in range(nv):
                        v = vals[q]
                        if nc > first and v <= s_hi[nc - 1] + 1:
                            if v > s_hi[nc - 1]:
                                s_hi[nc - 1] = v
                        else:
                            s_attr[nc] = a
                            s_lo[nc] = v
                            s_hi[nc] = v
                            nc += 1
                    if nc == first + 1 and s_lo[first] == amin and s_hi[first] == amax:
                        nc = first  # the whole domain: no condition
                else:
                    j = _skip_ws(b, j, e)
                    v, j = _value(b, j, e, a, names, name_off, kind, lo, hi, places,
                                  label_off, w_min, w_max, max_string, max_number)
                    if j < 0:
                        ok = False
                        break
                    ilo = amin
                    ihi = amax
                    if op == _EQ:
                        ilo = v
                        ihi = v
                    elif op == _LT:
                        ihi = v - 1
                    elif op == _LE:
                        ihi = v
                    elif op == _GT:
                        ilo = v + 1
                    elif op == _GE:
                        ilo = v
                    if op == _NE:
                        if v == amin and v == amax:
                            ok = False  # excludes every value: an error
                            break
                        if v > amin:
                            s_attr[nc] = a
                            s_lo[nc] = amin
                            s_hi[nc] = v - 1
                            nc += 1
                        if v < amax:
                            s_attr[nc] = a
                            s_lo[nc] = v + 1
                            s_hi[nc] = amax
                            nc += 1
                    else:
                        if ilo > ihi:
                            ok = False  # unsatisfiable: the slow path says so
                            break
                        if not (ilo == amin and ihi == amax):
                            s_attr[nc] = a
                            s_lo[nc] = ilo
                            s_hi[nc] = ihi
                            nc += 1
                j = _skip_ws(b, j, e)
                if j < e and b[j] == 44:  # ,
                    j = _skip_ws(b, j + 1, e)
                    continue
                if j < e and b[j] == 41:  # )
                    j += 1
                    break
                ok = False
                break
        if not ok:
            continue
        j = _skip_ws(b, j, e)
        if j != e:
            continue
        # Accepted: rows sorted by attribute then lo (insertion sort: few per line).
        for x in range(1, nc):
            ka, kl, kh = s_attr[x], s_lo[x], s_hi[x]
            y = x - 1
            while y >= 0 and (s_attr[y] > ka or (s_attr[y] == ka and s_lo[y] > kl)):
                s_attr[y + 1], s_lo[y + 1], s_hi[y + 1] = s_attr[y], s_lo[y], s_hi[y]
                y -= 1
            s_attr[y + 1], s_lo[y + 1], s_hi[y + 1] = ka, kl, kh
        if r + nc > cap:
            while r + nc > cap:
                cap *= 2
            grown = np.empty((cap, 4), np.int64)
            grown[:r] = rows[:r]
            rows = grown
        base = type_attr[t]
        for x in range(nc):
            rows[r, 0] = ln
            rows[r, 1] = s_attr[x] - base
            rows[r, 2] = s_lo[x]
            rows[r, 3] = s_hi[x]
            r += 1
        if sr + ns > scap:
            while sr + ns > scap:
                scap *= 2
            sgrown = np.empty((scap, 5), np.int64)
            sgrown[:sr] = srows[:sr]
            srows = sgrown
        for x in range(ns):
            srows[sr, 0] = ln
            srows[sr, 1] = t_attr[x] - base
            srows[sr, 2] = t_op[x]
            srows[sr, 3] = t_s[x]
            srows[sr, 4] = t_e[x]
            sr += 1
        status[ln] = OK
        start[ln] = i
        id_end[ln] = ie
        ptype[ln] = t
    return status, start, end, id_end, sub_s, sub_e, ptype, rows, r, srows, sr
