"""Printer for composite profiles: :func:`parse_composite` reads the output back equal.

Parentheses are written where precedence needs them and where the pattern nests an
operator in itself (``(a -> b) -> c`` stays a sequence of two steps); labels are written
where they differ from the type name; both policies are always written.
"""

from __future__ import annotations

from siftbus.lang.composite.syntax import (
    Component,
    CompositeProfile,
    Conjunction,
    Disjunction,
    FollowedBy,
    Negation,
    Node,
    Windowed,
    format_duration,
)
from siftbus.lang.profile import format_profile

# Binding strength: a child needs parentheses when its level is not below its parent's.
_LEVEL = {Component: 1, Windowed: 1, Conjunction: 3, Disjunction: 4, FollowedBy: 5}


def format_component(c: Component) -> str:
    """``label=Type(...)``, or ``Type(...)`` when the label is the type name."""
    text = format_profile(c.profile, with_id=False)
    return text if c.label == c.profile.etype.name else f"{c.label}={text}"


def format_pattern(node: Node, parent: int = 6) -> str:
    """A pattern in the composite language (``parent``: the level of the operator around
    it; 6 is the line itself)."""
    if isinstance(node, Negation):
        return f"not {format_component(node.component)}"
    if isinstance(node, Component):
        return format_component(node)
    if isinstance(node, Windowed):
        return f"({format_pattern(node.pattern)} within {format_duration(node.window)})"
    level = _LEVEL[type(node)]
    if isinstance(node, FollowedBy):
        text = " -> ".join(format_pattern(s, level) for s in node.steps)
    else:
        word = " and " if isinstance(node, Conjunction) else " or "
        text = word.join(format_pattern(o, level) for o in node.operands)
    return f"({text})" if level >= parent else text


def format_composite(c: CompositeProfile, *, with_id: bool = True) -> str:
    """One line of the composite language for ``c``."""
    head = ""
    if with_id:
        head = c.id + (f"@{c.subscriber}" if c.subscriber else "") + ": "
    parts = [format_pattern(c.pattern), f"within {format_duration(c.window)}"]
    if c.same:
        parts.append("same " + ", ".join(c.same))
    parts.append(f"select {c.select.value}")
    parts.append(c.consumption.value)
    return head + " ".join(parts)


__all__ = ["format_component", "format_composite", "format_pattern"]
