"""Byte-level lexing for the compiled scanners (:mod:`siftbus.match.scan_numba` for
profiles, :mod:`siftbus.match.events_numba` for events).

Line splitting (:func:`count_lines`, :func:`line_end`: the one rule for text files),
blanks, identifier characters, comparing bytes with names and words, and finding the end
of a plain string literal. Separate from the scanners because it knows nothing of
profiles or events, only bytes; both scanners compile it in (the small helpers are
``inline="always"``). A ``cache=True`` function's on-disk cache is keyed on its own
module's file: after editing this one, clear ``__pycache__`` of the scanners.
"""

from __future__ import annotations

import numpy as np

from siftbus.match.numba_load import njit


@njit(cache=True, inline="always")
def _is_word(c: int) -> bool:
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@njit(cache=True, inline="always")
def _is_start(c: int) -> bool:
    return (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@njit(cache=True, inline="always")
def _is_id(c: int) -> bool:
    return _is_word(c) or c == 46 or c == 45 or c == 47  # . - /


@njit(cache=True, inline="always")
def _skip_ws(b: np.ndarray, i: int, e: int) -> int:
    while i < e and (b[i] == 32 or b[i] == 9):
        i += 1
    return i


@njit(cache=True)
def count_lines(b: np.ndarray) -> int:
    """Lines of ``b``: they end at \\n, \\r\\n or a lone \\r (the one rule for text
    files); a last line without an end is a line."""
    size = b.shape[0]
    n = 0
    i = 0
    while i < size:
        c = b[i]
        if c == 10 or c == 13:
            n += 1
            if c == 13 and i + 1 < size and b[i + 1] == 10:
                i += 1
        i += 1
    if size and b[size - 1] != 10 and b[size - 1] != 13:
        n += 1
    return n


@njit(cache=True, inline="always")
def line_end(b: np.ndarray, s: int) -> tuple[int, int]:
    """``(end, next start)`` of the line starting at ``s``."""
    size = b.shape[0]
    e = s
    while e < size and b[e] != 10 and b[e] != 13:
        e += 1
    nxt = e + 1
    if e < size and b[e] == 13 and e + 1 < size and b[e + 1] == 10:
        nxt += 1
    return e, nxt


@njit(cache=True)
def _same(b: np.ndarray, s: int, n: int, names: np.ndarray, off: np.ndarray, j: int) -> bool:
    """Whether ``b[s:s+n]`` is name ``j``."""
    a = off[j]
    if off[j + 1] - a != n:
        return False
    for k in range(n):  # noqa: SIM110  (numba compiles loops, not generators)
        if b[s + k] != names[a + k]:
            return False
    return True


@njit(cache=True)
def _lower_is(b: np.ndarray, s: int, n: int, word: np.ndarray) -> bool:
    """Whether ``b[s:s+n]`` is ``word`` (lower case ASCII) in any letter case."""
    if n != word.shape[0]:
        return False
    for k in range(n):
        c = b[s + k]
        if 65 <= c <= 90:
            c += 32
        if c != word[k]:
            return False
    return True


@njit(cache=True)
def _exact(b: np.ndarray, s: int, n: int, word: np.ndarray) -> bool:
    if n != word.shape[0]:
        return False
    for k in range(n):  # noqa: SIM110  (numba compiles loops, not generators)
        if b[s + k] != word[k]:
            return False
    return True


@njit(cache=True)
def _string_end(b: np.ndarray, i: int, e: int, max_string: int) -> int:
    """End (after the closing quote) of a plain string literal at ``b[i]``, or -1: escapes
    and control characters (tab included: JSON's string syntax refuses it raw) are left
    to the slow path, and so is a literal longer than ``max_string`` characters."""
    if i >= e or b[i] != 34:
        return -1
    j = i + 1
    while j < e:
        c = b[j]
        if c == 34:
            return j + 1 if j + 1 - i <= max_string else -1
        if c == 92 or c < 32:
            return -1
        j += 1
    return -1
