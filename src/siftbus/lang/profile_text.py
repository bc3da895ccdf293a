"""What a profile line says before the schema is consulted: its id, type and written
conditions (:class:`ProfileText`), and the limits on a line (:class:`ProfileLimits`).

Shared by the two readers of the profile language, which agree on every line: the lark
grammar (:mod:`siftbus.lang.profile`, the specification) and the scanner
(:mod:`siftbus.lang.profile_scan`, which reads the common lines without it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from siftbus.model import Predicate

MAX_GROUP_DEPTH = 16
"""Deepest nesting of parenthesized groups in a profile."""

# possessive (++): no backtracking over a long id that is not followed by a colon
_ID_PREFIX = re.compile(r"\s*+([\w.\-/]++)(?:@([\w.\-/]++))?\s*+:(?!=)")


def split_id(text: str) -> tuple[str | None, str, int]:
    """The ``ID[@SUBSCRIBER]:`` prefix of a profile line (primitive or composite): the id
    (``None`` without one), the subscriber (``""`` without one) and where the body starts."""
    m = _ID_PREFIX.match(text)
    return (m[1], m[2] or "", m.end()) if m else (None, "", 0)


@dataclass(frozen=True, slots=True)
class ProfileLimits:
    """Limits on one profile line (``docs/profile-language.md``, section "Limits").

    The parser's memory and time grow with the tokens of a line (a few hundred bytes and
    microseconds per token), so the line length bounds both; the other limits refuse what
    no real profile needs. Pass ``limits=`` to the parse and load functions to change them.
    """

    max_line: int = 65536
    """Longest profile line, in characters."""
    max_string: int = 16384
    """Longest string literal, in characters as written (quotes and escapes included)."""
    max_number: int = 1000
    """Longest number literal, in characters."""
    max_conditions: int = 256
    """Most conditions written in one profile."""

    def __post_init__(self) -> None:
        for name in ("max_line", "max_string", "max_number", "max_conditions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ProfileLimits.{name} must be a positive integer, "
                                 f"got {value!r}")


PROFILE_LIMITS = ProfileLimits()
"""The default limits."""


@dataclass(frozen=True, slots=True)
class Bare:
    """An unquoted word in value position (enum label, MIN or MAX).

    ``virtual`` marks Bittner's ``> MIN`` and ``< MAX``: unless the attribute declares a
    label of that name, they mean "every value".
    """

    word: str
    virtual: bool = False


@dataclass(frozen=True, slots=True)
class WrittenCondition:
    """A condition as written, with where it starts (line and column from 1)."""

    predicate: Predicate
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ProfileText:
    """A parsed but not yet schema-checked profile line."""

    id: str | None
    subscriber: str
    type_name: str
    type_column: int
    conditions: tuple[WrittenCondition, ...]
    form: str  # "native" or "bittner"
    line: int = 1  # the line of the profile (from 1), for errors found later
    alternatives: tuple[tuple[WrittenCondition, ...], ...] | None = None
    """With ``or``: the conditions of each alternative (disjunctive normal form)."""
