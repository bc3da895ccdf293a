"""Printing: a syntax tree as ETCL text, and any value as a short readable excerpt.

``parse(format_node(n)) == n`` for every tree the parser builds (parentheses only where
precedence needs them; tested with hypothesis). :func:`show` is for messages: it never
prints more than a few dozen characters of a value, however large the value is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

from siftbus.lang.etcl.anys import Struct, Union
from siftbus.lang.etcl.syntax import (
    AND,
    IN,
    NOT,
    OR,
    PRODUCT,
    SUM,
    TWIDDLE,
    Arith,
    BoolOp,
    Comp,
    Compare,
    Default,
    Exist,
    Ident,
    Lit,
    Node,
    Not,
    Twiddle,
    level,
)
from siftbus.lang.etcl.syntax import In as InNode


def quote(s: str) -> str:
    """An ETCL string literal (``'`` and ``\\`` escaped with a backslash)."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def format_literal(value: Any) -> str:
    """A literal as ETCL text."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form; literals are always finite
    return str(value)


def format_node(node: Node) -> str:
    """The ETCL text of a syntax tree."""
    if isinstance(node, Lit):
        return format_literal(node.value)
    if isinstance(node, Comp):
        return node.path.text
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Exist):
        return "exist " + format_node(node.operand)
    if isinstance(node, Default):
        return "default " + node.operand.path.text
    if isinstance(node, Not):
        return "not " + _sub(node.operand, NOT + 1)
    if isinstance(node, BoolOp):
        # an operand of the same level came from parentheses: keep them
        lv = OR if node.op == "or" else AND
        return f" {node.op} ".join(_sub(o, lv + 1) for o in node.operands)
    if isinstance(node, Arith):
        lv = SUM if node.ops[0] in ("+", "-") else PRODUCT
        parts = [_sub(node.operands[0], lv + 1)]
        for op, operand in zip(node.ops, node.operands[1:], strict=True):
            parts.append(f"{op} {_sub(operand, lv + 1)}")
        return " ".join(parts)
    if isinstance(node, Compare):
        return f"{_sub(node.left, IN)} {node.op} {_sub(node.right, IN)}"
    if isinstance(node, InNode):
        return f"{_sub(node.left, TWIDDLE)} in {format_node(node.right)}"
    assert isinstance(node, Twiddle)
    return f"{_sub(node.left, SUM)} ~ {_sub(node.right, SUM)}"


def _sub(node: Node, min_level: int) -> str:
    """A sub-expression that must bind at least as tightly as ``min_level``."""
    text = format_node(node)
    return f"({text})" if level(node) < min_level else text


def excerpt(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with ``...`` when cut)."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def show(value: Any, limit: int = 60) -> str:
    """A value for a message: ETCL literal syntax where there is one, cut to ``limit``."""
    return excerpt(_show(value, limit, 0), limit)


def _show(v: Any, limit: int, depth: int) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        if v.bit_length() > 200:  # str() of a huge int costs time and says little
            return f"an integer of {v.bit_length()} bits"
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) or math.isnan(v) else ("-inf" if v < 0 else "inf")
    if isinstance(v, str):
        return quote(v[:limit])
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    if depth >= 2:  # a value nested in a value: its outline is enough
        return "[...]" if isinstance(v, list | tuple) else "{...}"
    if isinstance(v, Union):
        member = f" {v.member}" if v.member else ""
        return (f"union(_d={_show(v.discriminator, limit, depth + 1)}{member}: "
                f"{_show(v.value, limit, depth + 1)})")
    if isinstance(v, Struct):
        pairs: Iterable[tuple[Any, Any]] = zip(v.names, v.values, strict=True)
        size, opening = len(v.names), f"{v.type_id or 'struct'}{{"
    elif isinstance(v, dict):
        pairs, size, opening = v.items(), len(v), "{"
    elif isinstance(v, list | tuple):
        items = ", ".join(_show(x, limit, depth + 1) for x in itertools.islice(v, 6))
        return "[" + items + (", ...]" if len(v) > 6 else "]")
    else:
        return f"<{type(v).__name__}>"
    items = ", ".join(f"{k}: {_show(x, limit, depth + 1)}"
                      for k, x in itertools.islice(pairs, 4))
    return opening + items + (", ...}" if size > 4 else "}")


__all__ = ["excerpt", "format_literal", "format_node", "quote", "show"]
