"""The event-file scanner and the JSON-lines formatter of ``siftbus match``, compiled
with numba (see :mod:`siftbus.match.scan_numba` for the contract the scanners keep: a line
they are not sure about is left to the specification's path)."""

from __future__ import annotations

import numpy as np

from siftbus.match.lex_numba import _same, _skip_ws, count_lines, line_end
from siftbus.match.numba_load import njit
from siftbus.match.scan_numba import (
    KIND_ENUM,
    KIND_INT,
    KIND_STRING,
    MAX_DIGITS,
    OK,
    SKIP,
    SLOW,
    _find_attr,
    _scaled,
)


@njit(cache=True)
def _json_number(b: np.ndarray, i: int, e: int) -> tuple[int, int, int, int, bool]:
    """A JSON number without exponent at ``b[i]``: ``(integer part, fraction digits as an
    int, number of fraction digits, end, negative)``; ``end < 0`` for anything else
    (exponents, leading zeros, too many digits: the slow path decides)."""
    neg = False
    j = i
    if j < e and b[j] == 45:
        neg = True
        j += 1
    s = j
    v = 0
    while j < e and 48 <= b[j] <= 57:
        v = v * 10 + (b[j] - 48)
        j += 1
    nd = j - s
    if nd == 0 or nd > MAX_DIGITS or (nd > 1 and b[s] == 48):
        return 0, 0, 0, -1, neg
    frac = 0
    nf = 0
    if j < e and b[j] == 46:
        j += 1
        fs = j
        while j < e and 48 <= b[j] <= 57:
            if j - fs < MAX_DIGITS:
                frac = frac * 10 + (b[j] - 48)
            j += 1
        nf = j - fs
        if nf == 0 or nf > MAX_DIGITS:
            return 0, 0, 0, -1, neg
    if j < e and (b[j] == 101 or b[j] == 69 or b[j] == 46 or 48 <= b[j] <= 57):
        return 0, 0, 0, -1, neg
    return v, frac, nf, j, neg


@njit(cache=True, inline="always")
def _hex(c: int) -> int:
    """The value of a hex digit, or -1."""
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


@njit(cache=True)
def _json_string(b: np.ndarray, text: np.ndarray, i: int, e: int) -> tuple[int, int]:
    """A JSON string at ``b[i]``: ``(end after the closing quote, end of its value)``; the
    value is ``text[i + 1:value end]``, its escapes decoded in place (``text`` is a copy
    of ``b``; a decoded value is never longer than its source). ``(-1, -1)`` for anything
    the slow path decides: a bad escape, control characters, non-ASCII text, and escapes
    of NUL or beyond ASCII (``\\u0000``, ``\\u00e9``, surrogates)."""
    if i >= e or b[i] != 34:
        return -1, -1
    j = i + 1
    w = j  # where the next value byte goes
    while j < e:
        c = b[j]
        if c == 34:
            return j + 1, w
        if c < 32 or c >= 127:  # control and non-ASCII: slow path
            return -1, -1
        if c == 92:  # a backslash: an escape
            if j + 1 >= e:
                return -1, -1
            c = b[j + 1]
            j += 2
            if c == 117:  # \u and four hex digits
                if j + 4 > e:
                    return -1, -1
                cp = 0
                for k in range(4):
                    h = _hex(b[j + k])
                    if h < 0:
                        return -1, -1
                    cp = cp * 16 + h
                if cp == 0 or cp >= 128:
                    return -1, -1
                c = cp
                j += 4
            elif c == 110:  # n
                c = 10
            elif c == 116:  # t
                c = 9
            elif c == 114:  # r
                c = 13
            elif c == 98:  # b
                c = 8
            elif c == 102:  # f
                c = 12
            elif c != 34 and c != 92 and c != 47:  # a quote, a backslash, a slash
                return -1, -1
            text[w] = c
            w += 1
            continue
        if w != j:
            text[w] = c
        w += 1
        j += 1
    return -1, -1


@njit(cache=True)
def scan_events(b: np.ndarray, names: np.ndarray, name_off: np.ndarray,
                type_attr: np.ndarray, kind: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                places: np.ndarray, label_off: np.ndarray, n_types: int, max_attrs: int,
                max_line: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                           np.ndarray, np.ndarray, np.ndarray]:
    """Scan every line of an event file chunk (``b``: whole lines).

    Returns per line ``(status, start, end, etype, keys, str_start, str_end)`` and
    ``text``: ``keys`` is int64 ``[lines, max_attrs]`` by attribute position (ordered
    attributes), and for string attributes the value is ``text[str_start:str_end]``:
    ``text`` is ``b`` with the escapes of JSON strings decoded in place (names, labels
    and values are compared decoded, as ``json.loads`` gives them).
    """
    n_lines = count_lines(b)
    text = b.copy()
    status = np.full(n_lines, SLOW, np.int8)
    start = np.zeros(n_lines, np.int64)
    end = np.zeros(n_lines, np.int64)
    etype = np.full(n_lines, -1, np.int32)
    keys = np.zeros((n_lines, max_attrs), np.int64)
    str_s = np.zeros((n_lines, max_attrs), np.int64)
    str_e = np.zeros((n_lines, max_attrs), np.int64)
    # per line: key spans and value spans (kind: 0 number, 1 string)
    cap = max_line // 4 + 8
    k_s = np.empty(cap, np.int64)
    k_e = np.empty(cap, np.int64)
    v_s = np.empty(cap, np.int64)
    v_e = np.empty(cap, np.int64)
    v_k = np.empty(cap, np.int8)
    # a number value as the first pass read it (integer part, fraction, its digits, sign)
    n_v = np.empty(cap, np.int64)
    n_frac = np.empty(cap, np.int64)
    n_nf = np.empty(cap, np.int64)
    n_neg = np.empty(cap, np.bool_)
    got = np.zeros(max_attrs, np.int64)
    pos = 0
    for ln in range(n_lines):
        s = pos
        e, pos = line_end(b, s)
        start[ln] = s
        end[ln] = e
        if e - s > max_line:
            continue
        j = _skip_ws(b, s, e)
        if j == e:
            status[ln] = SKIP  # blank line: not an event
            continue
        # Bytes outside printable ASCII fail the grammar below (strings refuse them), so
        # such lines go to the slow path without a pass of their own.
        if b[j] != 123:  # {
            continue
        j = _skip_ws(b, j + 1, e)
        n = 0
        ok = True
        if j < e and b[j] == 125:
            j += 1
        else:
            while True:
                ke, kv = _json_string(b, text, j, e)
                if ke < 0 or n >= cap:
                    ok = False
                    break
                k_s[n] = j + 1
                k_e[n] = kv
                j = _skip_ws(b, ke, e)
                if j >= e or b[j] != 58:
                    ok = False
                    break
                j = _skip_ws(b, j + 1, e)
                if j < e and b[j] == 34:
                    ve, vv = _json_string(b, text, j, e)
                    if ve < 0:
                        ok = False
                        break
                    v_s[n] = j + 1
                    v_e[n] = vv
                    v_k[n] = 1
                    j = ve
                else:
                    nv, nfrac, nnf, ve, nneg = _json_number(b, j, e)
                    if ve < 0:
                        ok = False
                        break
                    v_s[n] = j
                    v_e[n] = ve
                    v_k[n] = 0
                    n_v[n] = nv
                    n_frac[n] = nfrac
                    n_nf[n] = nnf
                    n_neg[n] = nneg
                    j = ve
                n += 1
                # comma or close inlined on purpose (see open_json_numba._scan)
                j = _skip_ws(b, j, e)
                if j < e and b[j] == 44:
                    j = _skip_ws(b, j + 1, e)
                    continue
                if j < e and b[j] == 125:
                    j += 1
                    break
                ok = False
                break
        if not ok or _skip_ws(b, j, e) != e:
            continue
        # the type: exactly one "type" key with a string value naming a type
        t = -1
        n_type = 0
        for x in range(n):
            if k_e[x] - k_s[x] == 4 and text[k_s[x]] == 116 and text[k_s[x] + 1] == 121 \
                    and text[k_s[x] + 2] == 112 and text[k_s[x] + 3] == 101:
                n_type += 1
                if v_k[x] == 1 and t < 0:
                    for tt in range(n_types):
                        if _same(text, v_s[x], v_e[x] - v_s[x], names, name_off, tt):
                            t = tt
                            break
        if n_type != 1 or t < 0:
            continue
        base = type_attr[t]
        m = type_attr[t + 1] - base
        if n != m + 1 or m > max_attrs:
            continue  # missing or extra attributes: the slow path names them
        for q in range(m):
            got[q] = 0
        guess = 0  # keys usually come in schema order: try the next attribute first
        for x in range(n):
            kl = k_e[x] - k_s[x]
            if kl == 4 and text[k_s[x]] == 116 and text[k_s[x] + 1] == 121 \
                    and text[k_s[x] + 2] == 112 and text[k_s[x] + 3] == 101:
                continue
            if guess < m and _same(text, k_s[x], kl, names, name_off, n_types + base + guess):
                a = base + guess
            else:
                a = _find_attr(text, k_s[x], kl, t, names, name_off, type_attr, n_types)
            guess = a - base + 1
            if a < 0 or got[a - base]:
                ok = False
                break
            q = a - base
            got[q] = 1
            ka = kind[a]
            if ka == KIND_STRING:
                if v_k[x] != 1:
                    ok = False
                    break
                str_s[ln, q] = v_s[x]
                str_e[ln, q] = v_e[x]
                continue
            if ka == KIND_ENUM:
                if v_k[x] != 1:
                    ok = False
                    break
                found = -1
                for lb in range(label_off[a], label_off[a + 1]):
                    if _same(text, v_s[x], v_e[x] - v_s[x], names, name_off, lb):
                        found = lb - label_off[a]
                        break
                if found < 0:
                    ok = False
                    break
                keys[ln, q] = found
                continue
            if v_k[x] != 0:
                ok = False
                break
            v, frac, nf, neg = n_v[x], n_frac[x], n_nf[x], n_neg[x]
            if ka == KIND_INT:
                if frac != 0:  # 5.0 is the integer 5; 5.5 is an error
                    ok = False
                    break
                key = v
            else:
                p = places[a]
                nd = 0
                tv = v
                while tv > 0:
                    tv //= 10
                    nd += 1
                if nd + p > MAX_DIGITS:
                    ok = False
                    break
                key = _scaled(v, frac, nf, p)
            if neg:
                key = -key
            if key < lo[a] or key > hi[a]:
                ok = False
                break
            keys[ln, q] = key
        if not ok:
            continue
        status[ln] = OK
        etype[ln] = t
    return status, start, end, etype, keys, str_s, str_e, text


@njit(cache=True)
def format_matches(first: int, offsets: np.ndarray, profiles: np.ndarray, qbytes: np.ndarray,
                   qoff: np.ndarray) -> np.ndarray:
    """The JSON lines ``{"event": N, "matches": [...]}`` of a CSR batch as ASCII bytes,
    exactly as ``json.dumps`` writes them; ``qbytes[qoff[p]:qoff[p+1]]`` is profile
    ``p``'s id already quoted (and escaped) as JSON."""
    head = np.frombuffer(b'{"event": ', np.uint8)
    mid = np.frombuffer(b', "matches": [', np.uint8)
    n = offsets.shape[0] - 1
    size = 0
    for i in range(n):
        size += 50
        for t in range(offsets[i], offsets[i + 1]):
            p = profiles[t]
            size += qoff[p + 1] - qoff[p] + 2
    out = np.empty(size, np.uint8)
    digits = np.empty(24, np.uint8)
    k = 0
    for i in range(n):
        for x in range(head.shape[0]):
            out[k] = head[x]
            k += 1
        v = first + i
        nd = 0
        while True:
            digits[nd] = 48 + v % 10
            v //= 10
            nd += 1
            if v == 0:
                break
        for x in range(nd - 1, -1, -1):
            out[k] = digits[x]
            k += 1
        for x in range(mid.shape[0]):
            out[k] = mid[x]
            k += 1
        for t in range(offsets[i], offsets[i + 1]):
            if t > offsets[i]:
                out[k] = 44
                out[k + 1] = 32
                k += 2
            p = profiles[t]
            for x in range(qoff[p], qoff[p + 1]):
                out[k] = qbytes[x]
                k += 1
        out[k] = 93
        out[k + 1] = 125
        out[k + 2] = 10
        k += 3
    return out[:k]
