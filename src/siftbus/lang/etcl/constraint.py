"""A parsed ETCL constraint: its text, its syntax tree, and its compiled evaluator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from siftbus.lang.etcl.anys import EvalError
from siftbus.lang.etcl.evaluate import compile_node
from siftbus.lang.etcl.explain import explain
from siftbus.lang.etcl.parse import DEFAULT_LIMITS, ConstraintLimits, parse
from siftbus.lang.etcl.syntax import Node

_CACHED_LENGTH = 4096
"""Constraints up to this length are cached (bounding the cache to a few tens of MB)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """A parsed ETCL constraint; :meth:`evaluate` tells whether an event satisfies it."""

    text: str
    root: Node | None  # None: the empty constraint (TRUE)
    _fn: Callable[[Any, dict[str, Any]], Any] = field(repr=False, compare=False, hash=False)

    def evaluate(self, event: Any) -> bool:
        """TRUE iff the constraint evaluates to TRUE; any evaluation error means FALSE."""
        if self.root is None:
            return True
        try:
            return self._fn(event, {}) is True
        except EvalError:
            return False
        except (RecursionError, OverflowError, MemoryError, ValueError, TypeError):
            return False

    def explain(self, event: Any) -> str:
        """``"true"``, ``"false: why"`` (the comparison that decided, with the values it
        saw) or ``"error: why"``; the first word is what :meth:`evaluate` decided (an error
        does not match). One line, cut to a readable length."""
        return explain(self.root, event)


def _const_true(ev: Any, cache: dict[str, Any]) -> Any:
    return True


def parse_constraint(text: str, *, source: str | None = None,
                     limits: ConstraintLimits = DEFAULT_LIMITS) -> Constraint:
    """Parse ETCL text; raises :class:`~siftbus.errors.ConstraintError` with line and
    column on bad input or input beyond ``limits`` (length, nesting depth)."""
    if source is None and limits is DEFAULT_LIMITS and isinstance(text, str) \
            and len(text) <= _CACHED_LENGTH:
        return _parse_cached(text)
    return _parse(text, source, limits)


@lru_cache(maxsize=16384)
def _parse_cached(text: str) -> Constraint:
    # Constraints are immutable values: equal texts (many consumers, restarts) share one.
    return _parse(text, None, DEFAULT_LIMITS)


def _parse(text: str, source: str | None, limits: ConstraintLimits) -> Constraint:
    root = parse(text, source=source, limits=limits)
    return Constraint(text, root, compile_node(root) if root is not None else _const_true)


__all__ = ["Constraint", "parse_constraint"]
