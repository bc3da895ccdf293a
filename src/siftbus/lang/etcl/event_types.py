"""Event types: which (domain, type) pairs a constraint's EventTypeSeq covers.

A pattern's only special character is ``*`` (any run of characters, anywhere); ``""``,
``"*"`` and ``"%ALL"`` match every name; an empty EventTypeSeq covers every type. Patterns
are matched in linear time without regular expressions: the pieces between stars are
found left to right (the leftmost match of each piece is always the right choice), so a
pattern like ``*a*a*a*a*b`` costs no backtracking whatever the name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from siftbus.lang.etcl.paths import is_structured

WILDCARDS = frozenset({"", "*", "%ALL"})


def name_matches(pattern: str, name: str) -> bool:
    """Whether a domain or type name matches a pattern (``*`` stands for any run)."""
    if pattern in WILDCARDS:
        return True
    if "*" not in pattern:
        return pattern == name
    pieces = pattern.split("*")
    first, last = pieces[0], pieces[-1]
    if len(first) + len(last) > len(name) or not name.startswith(first) \
            or not name.endswith(last):
        return False
    pos, end = len(first), len(name) - len(last)
    for piece in pieces[1:-1]:
        if piece:
            found = name.find(piece, pos, end)
            if found < 0:
                return False
            pos = found + len(piece)
    return True


def types_match(event_types: Sequence[tuple[str, str]], domain: str, type_name: str) -> bool:
    """Whether an event of (domain, type) is covered by an EventTypeSeq; empty covers all."""
    if not event_types:
        return True
    return any(name_matches(d, domain) and name_matches(t, type_name) for d, t in event_types)


def event_type_of(ev: Any) -> tuple[str, str]:
    """(domain_name, type_name); an "any" event is ``("", "%ANY")`` (spec translation)."""
    if is_structured(ev):
        return ev.domain_name, ev.type_name
    return "", "%ANY"


__all__ = ["WILDCARDS", "event_type_of", "name_matches", "types_match"]
