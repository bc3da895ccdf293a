"""Reading one JSON event line in the open index's kernel (:mod:`siftbus.match.open_numba`).

:func:`_scan` locates the top-level fields of a line: keys, string values, arrays of
strings; it skips every other value (numbers, literals, nested arrays and objects) with
the reader's syntax checks, and returns -1 for anything the specification's reader might
read otherwise (escapes, non-ASCII bytes, a repeated key at any depth, bad syntax, limits),
so that line takes the slow path. The kernel compiles these in; numba's on-disk cache is
keyed on each module's own file, so after editing this one clear the ``__pycache__`` of
:mod:`siftbus.match.open_numba` too.
"""

from __future__ import annotations

import numpy as np

from siftbus.match.lex_numba import _skip_ws, _string_end
from siftbus.match.numba_load import njit

MAX_KEYS = 64
"""Most top-level fields of an event line the kernel reads (more: the Python path)."""
MAX_ELEMENTS = 1024
"""Most array elements of one event line the kernel reads."""
MAX_NUMBER = 400
"""Longest number the kernel skips in an undeclared field."""
MAX_STRING = 1 << 16
MAX_DEPTH = 60
MAX_NESTED_KEYS = 256
"""Most keys of open objects the kernel keeps while it skips a nested value (to refuse a
repeated key, as the reader does)."""
"""Deepest nesting the kernel skips in an undeclared field (the reader's limit is 64)."""


@njit(cache=True)
def _number_end(b: np.ndarray, i: int, e: int) -> int:
    """End of a JSON number at ``b[i]``, or -1."""
    j = i
    if j < e and b[j] == 45:
        j += 1
    s = j
    while j < e and 48 <= b[j] <= 57:
        j += 1
    if j == s or (j - s > 1 and b[s] == 48):
        return -1
    if j < e and b[j] == 46:
        j += 1
        f = j
        while j < e and 48 <= b[j] <= 57:
            j += 1
        if j == f:
            return -1
    if j < e and (b[j] == 101 or b[j] == 69):
        j += 1
        if j < e and (b[j] == 43 or b[j] == 45):
            j += 1
        f = j
        while j < e and 48 <= b[j] <= 57:
            j += 1
        if j == f:
            return -1
    return j if j - i <= MAX_NUMBER else -1


@njit(cache=True)
def _literal(b: np.ndarray, i: int, e: int, c0: int, c1: int, c2: int, c3: int,
             c4: int) -> int:
    n = 4 if c4 == 0 else 5
    if i + n > e or b[i] != c0 or b[i + 1] != c1 or b[i + 2] != c2 or b[i + 3] != c3:
        return -1
    if n == 5 and b[i + 4] != c4:
        return -1
    return i + n


@njit(cache=True)
def _key_seen(b: np.ndarray, s: int, n: int, ks: np.ndarray, lo: int, hi: int) -> bool:
    """Whether the key ``b[s:s+n]`` is among the keys ``ks[lo:hi]`` (offset, length)."""
    for q in range(lo, hi):
        if ks[2 * q + 1] == n:
            same = True
            for k in range(n):
                if b[ks[2 * q] + k] != b[s + k]:
                    same = False
                    break
            if same:
                return True
    return False


@njit(cache=True)
def _key(b: np.ndarray, i: int, e: int, ks: np.ndarray, lo: int, nks: int) -> int:
    """Read an object's key at ``b[i]`` (after any whitespace) and the colon after it,
    recorded as ``ks[nks]``; the index after the colon, or -1 (bad syntax, too many keys,
    a key among ``ks[lo:nks]``, its object's keys so far)."""
    i = _skip_ws(b, i, e)
    j = _string_end(b, i, e, MAX_STRING)
    if j < 0 or nks >= MAX_NESTED_KEYS:
        return -1
    if _key_seen(b, i + 1, j - i - 2, ks, lo, nks):
        return -1
    ks[2 * nks] = i + 1
    ks[2 * nks + 1] = j - i - 2
    i = _skip_ws(b, j, e)
    if i >= e or b[i] != 58:
        return -1
    return i + 1


@njit(cache=True)
def _skip(b: np.ndarray, i: int, e: int) -> int:
    """End of any JSON value at ``b[i]`` (nested arrays and objects included, at most
    :data:`MAX_DEPTH` deep, no key repeated in an object), or -1 (escapes, bad syntax,
    repeated keys: the slow path decides)."""
    stack = np.empty(MAX_DEPTH, np.uint8)  # 0 in an array, 1 in an object
    first = np.empty(MAX_DEPTH, np.int64)  # per open object: its first key in ks
    ks = np.empty(2 * MAX_NESTED_KEYS, np.int64)
    nks = 0
    depth = 0
    while True:
        i = _skip_ws(b, i, e)
        if i >= e:
            return -1
        c = b[i]
        if c == 91 or c == 123:
            if depth >= MAX_DEPTH:
                return -1
            stack[depth] = 0 if c == 91 else 1
            first[depth] = nks
            depth += 1
            i = _skip_ws(b, i + 1, e)
            if i < e and b[i] == (93 if c == 91 else 125):
                i += 1
                depth -= 1
            elif c == 123:
                i = _key(b, i, e, ks, first[depth - 1], nks)
                if i < 0:
                    return -1
                nks += 1
                continue
            else:
                continue
        else:
            if c == 34:
                i = _string_end(b, i, e, MAX_STRING)
            elif c == 110:
                i = _literal(b, i, e, 110, 117, 108, 108, 0)
            elif c == 116:
                i = _literal(b, i, e, 116, 114, 117, 101, 0)
            elif c == 102:
                i = _literal(b, i, e, 102, 97, 108, 115, 101)
            else:
                i = _number_end(b, i, e)
            if i < 0:
                return -1
        while True:  # after a value: a separator, or the end of its container
            if depth == 0:
                return i
            i = _skip_ws(b, i, e)
            if i >= e:
                return -1
            close = 93 if stack[depth - 1] == 0 else 125
            if b[i] == close:
                i += 1
                depth -= 1
                nks = first[depth]  # the closed object's keys are done with
                continue
            if b[i] != 44:
                return -1
            i += 1
            if stack[depth - 1] == 1:
                i = _key(b, i, e, ks, first[depth - 1], nks)
                if i < 0:
                    return -1
                nks += 1
            break


@njit(cache=True)
def _scan(b: np.ndarray, s: int, e: int, keys: np.ndarray, els: np.ndarray) -> int:
    """Top-level fields of the object ``b[s:e]``: per field ``keys[4k:4k+4]`` = key
    offset, key length, value kind (1 string, 2 array of strings, 3 null, 4 other scalar,
    5 other array or object, skipped),
    first element; ``els[2j:2j+2]`` = element offset and length (a string's own span is
    element ``keys[4k+3]``; an array's run to the next field's first). Returns the number
    of fields, ``-1`` when the line is not for the kernel."""
    high = 0
    for k in range(s, e):  # no early exit: the loop is vectorised
        high |= b[k]
    if high >= 128:
        return -1
    i = _skip_ws(b, s, e)
    if i >= e or b[i] != 123:
        return -1
    i = _skip_ws(b, i + 1, e)
    nk = 0
    ne = 0
    if i < e and b[i] == 125:
        i += 1
    else:
        while True:
            if nk >= MAX_KEYS:
                return -1
            j = _string_end(b, i, e, MAX_STRING)
            if j < 0:
                return -1
            keys[4 * nk] = i + 1
            keys[4 * nk + 1] = j - i - 2
            keys[4 * nk + 3] = ne
            i = _skip_ws(b, j, e)
            if i >= e or b[i] != 58:
                return -1
            i = _skip_ws(b, i + 1, e)
            if i >= e:
                return -1
            c = b[i]
            if c == 34:
                j = _string_end(b, i, e, MAX_STRING)
                if j < 0 or ne >= MAX_ELEMENTS:
                    return -1
                els[2 * ne] = i + 1
                els[2 * ne + 1] = j - i - 2
                ne += 1
                keys[4 * nk + 2] = 1
                i = j
            elif c == 91:
                keys[4 * nk + 2] = 2
                at, first_el = i, ne
                i = _skip_ws(b, i + 1, e)
                if i < e and b[i] == 93:
                    i += 1
                else:
                    while True:
                        j = _string_end(b, i, e, MAX_STRING)
                        if j < 0 or ne >= MAX_ELEMENTS:  # not strings only: skipped whole
                            ne = first_el
                            keys[4 * nk + 2] = 5
                            i = _skip(b, at, e)
                            break
                        els[2 * ne] = i + 1
                        els[2 * ne + 1] = j - i - 2
                        ne += 1
                        # comma or close inlined on purpose (see below)
                        i = _skip_ws(b, j, e)
                        if i < e and b[i] == 44:
                            i = _skip_ws(b, i + 1, e)
                            continue
                        if i < e and b[i] == 93:
                            i += 1
                            break
                        return -1
            elif c == 123:
                keys[4 * nk + 2] = 5
                i = _skip(b, i, e)
            elif c == 110:
                i = _literal(b, i, e, 110, 117, 108, 108, 0)
                keys[4 * nk + 2] = 3
            elif c == 116:
                i = _literal(b, i, e, 116, 114, 117, 101, 0)
                keys[4 * nk + 2] = 4
            elif c == 102:
                i = _literal(b, i, e, 102, 97, 108, 115, 101)
                keys[4 * nk + 2] = 4
            else:
                i = _number_end(b, i, e)
                keys[4 * nk + 2] = 4
            if i < 0:
                return -1
            nk += 1
            # comma or close inlined on purpose: a shared (pos, more) helper cost _scan 35%
            i = _skip_ws(b, i, e)
            if i < e and b[i] == 44:
                i = _skip_ws(b, i + 1, e)
                continue
            if i < e and b[i] == 125:
                i += 1
                break
            return -1
    if _skip_ws(b, i, e) != e:
        return -1
    keys[4 * nk + 3] = ne
    for x in range(nk):  # a repeated key is the specification's error
        for y in range(x):
            if keys[4 * x + 1] == keys[4 * y + 1]:
                same = True
                for k in range(keys[4 * x + 1]):
                    if b[keys[4 * x] + k] != b[keys[4 * y] + k]:
                        same = False
                        break
                if same:
                    return -1
    return nk
