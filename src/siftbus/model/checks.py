"""Conditions the interval/string algebra cannot express, checked exactly on each event.

A :class:`Check` is one condition on one attribute: a constraint (for array attributes and
inside ``or``), ``not exists``, or a string test (``suffix``, ``contains``, ``like``
wildcards, ``matches`` regular expressions, the ignore-case forms), possibly negated
(anything-but). A profile keeps its checks as a disjunction of conjunctions
(:attr:`Profile.extra`); engines that cannot evaluate them in their index keep those
profiles aside and evaluate them by these semantics (``match.residual``).

Semantics, the same for every operator:

* an absent attribute satisfies no condition except ``not exists``;
* an array attribute satisfies a condition when any of its elements does (so
  ``tags not in {"a"}`` holds when some element is not ``"a"``, as in event-ruler);
* a negated test (``not prefix "x"``) holds on a present value that fails the test.

Every test runs in time linear in the value: wildcards by ordered substring search
(``*`` only, ``**`` refused), regular expressions by RE2 (no backtracking), compiled once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from siftbus.errors import ProfileError, excerpt
from siftbus.model.constraint import Constraint

MAX_PATTERN = 1000
"""Longest wildcard or regular expression, in characters."""
MAX_STARS = 16
"""Most ``*`` in one wildcard (event-ruler refuses consecutive stars; we bound the count)."""

STRING_TESTS = ("prefix", "suffix", "contains", "like", "matches", "prefixi", "suffixi", "eqi")
"""Test names over strings (``i``: ignoring case, by Unicode case folding)."""


def _fold(s: str) -> str:
    return s.casefold()


def wildcard_parts(pattern: str) -> tuple[str, ...]:
    """The literal pieces between the ``*`` of a wildcard (``\\*`` is a literal star,
    ``\\\\`` a backslash); refuses ``**``, more than :data:`MAX_STARS` stars and other
    escapes."""
    if len(pattern) > MAX_PATTERN:
        raise ProfileError(f"wildcard longer than {MAX_PATTERN} characters")
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt not in ("*", "\\"):
                raise ProfileError(f"wildcard {excerpt(repr(pattern))}: only \\* and \\\\ may "
                                   "be escaped")
            cur.append(nxt)
            i += 2
            continue
        if c == "*":
            if pattern[i + 1:i + 2] == "*":
                raise ProfileError(f"wildcard {excerpt(repr(pattern))}: consecutive '**' are "
                                   "refused (same as one '*')")
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    if len(parts) - 1 > MAX_STARS:
        raise ProfileError(f"wildcard {excerpt(repr(pattern))} has {len(parts) - 1} '*'; at "
                           f"most {MAX_STARS} (checks.MAX_STARS)")
    return tuple(parts)


def wildcard_match(parts: tuple[str, ...], s: str) -> bool:
    """Whether ``s`` matches the wildcard split into ``parts``: leftmost search of each
    middle piece is exact for ``*``-only patterns, and each search is linear."""
    if len(parts) == 1:
        return s == parts[0]
    first, *middle, last = parts
    if len(s) < len(first) + len(last) or not s.startswith(first) or not s.endswith(last):
        return False
    pos, end = len(first), len(s) - len(last)
    for piece in middle:
        i = s.find(piece, pos, end)
        if i < 0:
            return False
        pos = i + len(piece)
    return True


@lru_cache(maxsize=4096)
def compile_regex(pattern: str) -> Any:
    """An RE2 program for ``pattern`` (whole-value match); :class:`ProfileError` if RE2
    refuses it (backreferences, lookaround: anything a linear-time engine cannot run)."""
    import re2

    if len(pattern) > MAX_PATTERN:
        raise ProfileError(f"regular expression longer than {MAX_PATTERN} characters")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ProfileError(f"regular expression {excerpt(repr(pattern))} is outside the "
                           f"RE2 dialect: {detail}") from None


@dataclass(frozen=True, slots=True)
class Check:
    """One condition on one attribute, evaluated on the attribute's key as it comes."""

    attr: str
    position: int
    op: str
    """``"in"`` (``operand`` is a constraint), ``"absent"``, or one of :data:`STRING_TESTS`."""
    operand: Any = None
    negated: bool = False
    _program: Any = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if self.op == "like":
            object.__setattr__(self, "_program", wildcard_parts(str(self.operand)))
        elif self.op == "matches":
            object.__setattr__(self, "_program", compile_regex(str(self.operand)))
        elif self.op in ("prefixi", "suffixi", "eqi"):
            object.__setattr__(self, "_program", _fold(str(self.operand)))

    def holds(self, key: object) -> bool:
        """Whether an event's key (``None`` absent, a tuple for an array) satisfies it."""
        if self.op == "absent":
            return key is None or key == ()
        if key is None:
            return False
        if isinstance(key, tuple):
            return any(self._one(k) for k in key)
        return self._one(key)

    def _one(self, key: object) -> bool:
        return self._test(key) != self.negated

    def _test(self, key: object) -> bool:
        op = self.op
        if op == "in":
            return key in self.operand
        if not isinstance(key, str):
            return False
        if op == "prefix":
            return key.startswith(self.operand)
        if op == "suffix":
            return key.endswith(self.operand)
        if op == "contains":
            return self.operand in key
        if op == "like":
            return wildcard_match(self._program, key)
        if op == "matches":
            return self._program.fullmatch(key) is not None
        folded = _fold(key)
        if op == "eqi":
            return bool(folded == self._program)
        if op == "prefixi":
            return folded.startswith(self._program)
        assert op == "suffixi"
        return folded.endswith(self._program)


def constraint_check(attr: str, position: int, c: Constraint) -> Check:
    return Check(attr, position, "in", c)


Disjunction = tuple[tuple[Check, ...], ...]
"""Checks in disjunctive normal form: some conjunction must hold entirely."""

MAX_DISJUNCTS = 1024
"""Most conjunctions one profile normalises to (event-ruler's cap)."""
MAX_CHECK_COST = 16384
"""Most checks over all conjunctions of one profile (the work of one event, at worst):
a profile past it is refused, however few alternatives it has."""


def holds(conjunctions: Disjunction, keys: tuple[Any, ...]) -> bool:
    return any(all(c.holds(keys[c.position]) for c in conj) for conj in conjunctions)
