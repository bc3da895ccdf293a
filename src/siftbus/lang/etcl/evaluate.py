"""Evaluation: the ETCL operators, and a syntax tree compiled to one closure.

Each node becomes a closure ``(event, cache) -> value`` that raises
:class:`~siftbus.lang.etcl.anys.EvalError` on an evaluation error; ``cache`` holds the
values of the component paths extracted during one evaluation (each path text is
resolved once, the JacORB EvaluationContext). Closures nest as deep as the tree, which
the parser bounds (:class:`~siftbus.lang.etcl.parse.ConstraintLimits`); chains of one
operator are one closure looping over its operands.

The operator functions (:func:`compare`, :func:`arith`, :func:`twiddle`,
:func:`member_of`, :func:`need_bool`) are the semantics, shared with the explainer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from siftbus.lang.etcl.anys import EvalError, Union, kind
from siftbus.lang.etcl.paths import MISSING, is_structured, prop, resolve, runtime_variable
from siftbus.lang.etcl.syntax import (
    Arith,
    BoolOp,
    Comp,
    Compare,
    Exist,
    Ident,
    In,
    Lit,
    Node,
    Not,
    Twiddle,
)

Fn = Callable[[Any, dict[str, Any]], Any]

INT_LIMIT = 2**1024
"""Integer arithmetic is exact below this magnitude (the range of a double); a result
beyond it is an overflow, an evaluation error. It bounds the cost of a long product."""


def need_bool(v: Any) -> bool:
    """``v`` if it is a boolean; an evaluation error otherwise."""
    if not isinstance(v, bool):
        raise EvalError(f"{type(v).__name__} where a boolean is needed")
    return v


def compare(op: str, a: Any, b: Any) -> bool:
    """``a op b``: numbers with numbers, strings with strings, booleans with booleans."""
    ka, kb = kind(a), kind(b)
    if ka != kb or ka == "other":
        raise EvalError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def arith(op: str, a: Any, b: Any) -> Any:
    """``a op b`` on numbers; integer ``/`` truncates toward zero (CORBA long)."""
    if kind(a) != "num" or kind(b) != "num":
        raise EvalError(f"arithmetic on {type(a).__name__} and {type(b).__name__}")
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif b == 0:
        raise EvalError("division by zero")
    elif isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    else:
        return a / b
    if isinstance(r, int) and not -INT_LIMIT < r < INT_LIMIT:
        raise EvalError("integer overflow")
    return r


def twiddle(a: Any, b: Any) -> bool:
    """``a ~ b``: the string ``a`` occurs in the string ``b``."""
    if not isinstance(a, str) or not isinstance(b, str):
        raise EvalError("~ needs two strings")
    return a in b


def member_of(a: Any, seq: Any) -> bool:
    """``a in seq``: ``seq`` is a sequence of values of ``a``'s type."""
    if not isinstance(seq, list | tuple):
        raise EvalError("in needs a sequence on its right")
    ka = kind(a)
    if ka == "other":
        raise EvalError(f"in: {type(a).__name__} is not a simple value")
    for item in seq:
        if kind(item) != ka:
            raise EvalError("in: the sequence holds values of another type")
    return any(a == item for item in seq)


def is_default(v: Any) -> bool:
    """``default C``: the union ``v`` holds its default member."""
    if not isinstance(v, Union):
        raise EvalError("default needs a union")
    return v.is_default


def ident_value(ev: Any, name: str) -> Any:
    """A bare identifier: the filterable-data property ``name``."""
    if not is_structured(ev):
        raise EvalError(f"{name}: identifiers need a structured event")
    v = prop(ev.filterable_data, name)
    if v is MISSING:
        raise EvalError(f"no filterable property {name!r}")
    return v


def compile_ref(node: Comp | Ident) -> Fn:
    """A component or identifier as a closure."""
    if isinstance(node, Ident):
        name = node.name
        return lambda ev, cache: ident_value(ev, name)
    path = node.path
    key = path.text
    if path.var is not None and not path.steps and path.var != "curtime":
        var = path.var
        return lambda ev, cache: runtime_variable(ev, var)

    def comp(ev: Any, cache: dict[str, Any]) -> Any:
        hit = cache.get(key, MISSING)
        if hit is MISSING:
            try:
                hit = resolve(path, ev)
            except EvalError as exc:
                hit = exc
            cache[key] = hit
        if isinstance(hit, EvalError):
            raise hit
        return hit

    return comp


def compile_node(node: Node) -> Fn:
    """A syntax tree as one closure ``(event, cache) -> value``."""
    if isinstance(node, Lit):
        value = node.value
        return lambda ev, cache: value
    if isinstance(node, Comp | Ident):
        return compile_ref(node)
    if isinstance(node, Not):
        f = compile_node(node.operand)
        return lambda ev, cache: not need_bool(f(ev, cache))
    if isinstance(node, BoolOp):
        return _bool_op(node.op, [compile_node(o) for o in node.operands])
    if isinstance(node, Compare):
        lf, rf = compile_node(node.left), compile_node(node.right)
        op = node.op
        return lambda ev, cache: compare(op, lf(ev, cache), rf(ev, cache))
    if isinstance(node, Arith):
        return _arith_chain(node.ops, [compile_node(o) for o in node.operands])
    if isinstance(node, Twiddle):
        lf, rf = compile_node(node.left), compile_node(node.right)
        return lambda ev, cache: twiddle(lf(ev, cache), rf(ev, cache))
    if isinstance(node, In):
        lf, rf = compile_node(node.left), compile_ref(node.right)
        return lambda ev, cache: member_of(lf(ev, cache), rf(ev, cache))
    if isinstance(node, Exist):
        rf = compile_ref(node.operand)

        def exist(ev: Any, cache: dict[str, Any]) -> bool:
            try:
                rf(ev, cache)
            except EvalError:
                return False
            return True

        return exist
    rf = compile_ref(node.operand)
    return lambda ev, cache: is_default(rf(ev, cache))


def _bool_op(op: str, fns: Sequence[Fn]) -> Fn:
    # left to right, stopping early: TRUE or <error> is TRUE, <error> or TRUE an error
    if len(fns) == 2:
        a, b = fns
        if op == "and":
            return lambda ev, cache: need_bool(a(ev, cache)) and need_bool(b(ev, cache))
        return lambda ev, cache: need_bool(a(ev, cache)) or need_bool(b(ev, cache))
    stop = op == "or"  # the value that ends the chain

    def chain(ev: Any, cache: dict[str, Any]) -> bool:
        for f in fns:
            if need_bool(f(ev, cache)) is stop:
                return stop
        return not stop

    return chain


def _arith_chain(ops: Sequence[str], fns: Sequence[Fn]) -> Fn:
    if len(ops) == 1:
        op, (a, b) = ops[0], fns
        return lambda ev, cache: arith(op, a(ev, cache), b(ev, cache))
    first, rest = fns[0], list(zip(ops, fns[1:], strict=True))

    def chain(ev: Any, cache: dict[str, Any]) -> Any:
        acc = first(ev, cache)
        for op, f in rest:
            acc = arith(op, acc, f(ev, cache))
        return acc

    return chain


__all__ = ["INT_LIMIT", "Fn", "arith", "compare", "compile_node", "compile_ref", "ident_value",
           "is_default", "member_of", "need_bool", "twiddle"]
