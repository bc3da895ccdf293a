"""The documented limits of the XML filter, and the excerpt every error shows of bad input.

Hostile input is normal input: every size the XML layer accepts is bounded, each bound is
configurable, and exceeding one gives one clear error. ``docs/xmlfilter.md`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: characters of offending input an error message quotes at most
EXCERPT = 80


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``text`` as an error message quotes it: whole when short, else its start and its
    length (an error line never repeats a whole bad input)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def quoted(text: str, limit: int = EXCERPT) -> str:
    """``repr`` of the excerpt."""
    return repr(excerpt(text, limit))


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """Bounds on what one subscription document, message or HTTP request may cost."""

    max_expression: int = 4096
    """Characters in one target or attribute path."""
    max_value: int = 65_536
    """Characters in one condition operand."""
    max_values: int = 10_000
    """Operands of one condition (``string-in-set``)."""
    max_conditions: int = 1000
    """Conditions (nested filters included) of one content filter."""
    max_filters: int = 1000
    """Content filters of one subscription."""
    max_nesting: int = 8
    """Levels of nested content filters (profile 2) below a top-level filter."""
    max_body: int = 64 * 1024 * 1024
    """Bytes of one HTTP request body; refused with 413 as soon as it is passed."""
    max_request_seconds: float = 60.0
    """Seconds one HTTP request may compute (matching, registering) before it is stopped
    with 503; a server shutting down stops requests at once."""


DEFAULT_LIMITS = XmlLimits()
