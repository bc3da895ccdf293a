"""Explaining: why a constraint is TRUE, FALSE or an error on one event.

The explainer walks the syntax tree with the evaluator's own operator functions (so it
decides exactly what :meth:`Constraint.evaluate` decides; tested differentially), keeps
the value of every node it evaluated, and names the comparison that decided, with the
values of the components it looked at::

    true
    false: $severity > 2 is FALSE ($severity is 1)
    false: $a == 1 is FALSE ($a is 2); 'x' ~ $s is FALSE ($s is 'abc')      (an or)
    error: $severity > 2: cannot compare str with int ($severity is 'high')

An explanation is one line of at most :data:`MAX_EXPLANATION` characters.
"""

from __future__ import annotations

from typing import Any

from siftbus.lang.etcl.anys import EvalError
from siftbus.lang.etcl.evaluate import (
    arith,
    compare,
    compile_ref,
    is_default,
    member_of,
    need_bool,
    twiddle,
)
from siftbus.lang.etcl.printer import excerpt, format_node, show
from siftbus.lang.etcl.syntax import (
    Arith,
    BoolOp,
    Comp,
    Compare,
    Default,
    Exist,
    Ident,
    In,
    Lit,
    Node,
    Not,
    Twiddle,
    children,
)

MAX_EXPLANATION = 400
"""Characters in one explanation (longer ones are cut)."""

_SHOWN_VALUES = 4  # component values named per explained node
_SHOWN_TERMS = 3  # FALSE operands of an `or` explained one by one


class _Failed(Exception):
    """An evaluation error, with the innermost operator node it happened in."""

    def __init__(self, node: Node, error: EvalError) -> None:
        super().__init__(str(error))
        self.node = node
        self.error = error


def explain(root: Node | None, event: Any) -> str:
    """``true``, ``false: why`` or ``error: why`` for ``event``."""
    if root is None:
        return "true"
    walk = _Walk(event)
    try:
        v = walk.value(root)
    except _Failed as f:
        return _cut(f"error: {_text(f.node)}: {f.error}{walk.values_in(f.node)}")
    except EvalError as exc:  # the whole constraint is one component
        return _cut(f"error: {_text(root)}: {exc}")
    except (RecursionError, OverflowError, MemoryError, ValueError, TypeError) as exc:
        return _cut(f"error: {exc}")
    if v is True:
        return "true"
    if v is False:
        return _cut("false: " + walk.why_false(root))
    return _cut(f"error: the constraint yields {type(v).__name__}, not a boolean")


def _cut(text: str) -> str:
    return excerpt(text, MAX_EXPLANATION)


def _text(node: Node) -> str:
    return excerpt(format_node(node), 80)


class _Walk:
    """One evaluation that remembers each node's value (by node identity)."""

    def __init__(self, event: Any) -> None:
        self.event = event
        self.cache: dict[str, Any] = {}
        self.seen: dict[int, Any] = {}

    def value(self, node: Node) -> Any:
        if isinstance(node, Lit):
            v = node.value
        elif isinstance(node, Comp | Ident):
            v = compile_ref(node)(self.event, self.cache)  # EvalError goes to the parent
        else:
            try:
                v = self._operator(node)
            except EvalError as exc:
                raise _Failed(node, exc) from None
        self.seen[id(node)] = v
        return v

    def _operator(self, node: Node) -> Any:
        if isinstance(node, Not):
            return not need_bool(self.value(node.operand))
        if isinstance(node, BoolOp):
            stop = node.op == "or"  # the value that ends the chain
            for o in node.operands:
                if need_bool(self.value(o)) is stop:
                    return stop
            return not stop
        if isinstance(node, Compare):
            return compare(node.op, self.value(node.left), self.value(node.right))
        if isinstance(node, Arith):
            acc = self.value(node.operands[0])
            for op, o in zip(node.ops, node.operands[1:], strict=True):
                acc = arith(op, acc, self.value(o))
            return acc
        if isinstance(node, Twiddle):
            return twiddle(self.value(node.left), self.value(node.right))
        if isinstance(node, In):
            return member_of(self.value(node.left), self.value(node.right))
        if isinstance(node, Exist):
            try:
                self.value(node.operand)
            except EvalError as exc:
                self.seen[id(node.operand)] = exc
                return False
            return True
        assert isinstance(node, Default)
        return is_default(self.value(node.operand))

    def why_false(self, node: Node) -> str:
        """Why ``node`` (evaluated to FALSE) is FALSE."""
        if isinstance(node, BoolOp):
            false = [o for o in node.operands if self.seen.get(id(o)) is False]
            if node.op == "and":  # the first FALSE operand decided
                return self.why_false(false[0])
            reasons = [self.why_false(o) for o in false[:_SHOWN_TERMS]]
            if len(false) > _SHOWN_TERMS:
                reasons.append(f"and {len(false) - _SHOWN_TERMS} more FALSE terms")
            return "; ".join(reasons)
        if isinstance(node, Not):
            values = "" if isinstance(node.operand, Comp | Ident) \
                else self.values_in(node.operand)
            return f"{_text(node)} is FALSE: {_text(node.operand)} is TRUE{values}"
        if isinstance(node, Exist):
            missing = self.seen.get(id(node.operand))
            return f"{_text(node)} is FALSE ({missing})"
        return f"{_text(node)} is FALSE{self.values_in(node)}"

    def values_in(self, node: Node) -> str:
        """`` (C is v, ...)``: the values of the components under ``node`` that were
        looked up, or ``""``."""
        shown: dict[str, str] = {}
        stack = [node]
        while stack and len(shown) < _SHOWN_VALUES:
            n = stack.pop()
            if isinstance(n, Comp | Ident):
                text = _text(n)
                v = self.seen.get(id(n), _NOT_SEEN)
                if text not in shown and v is not _NOT_SEEN and not isinstance(v, EvalError):
                    shown[text] = f"{text} is {show(v)}"
            else:
                stack.extend(reversed(children(n)))
        return f" ({', '.join(shown.values())})" if shown else ""


_NOT_SEEN: Any = object()


__all__ = ["MAX_EXPLANATION", "explain"]
