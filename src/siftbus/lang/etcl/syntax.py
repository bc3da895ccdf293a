"""The ETCL syntax tree: immutable nodes, component paths, operator precedence.

Chains of one operator level (``a and b and c``, ``1 + 2 - 3``, ``2 * 3 / 4``) are one
n-ary node, evaluated left to right: a constraint of many terms is a wide tree, not a deep
one, so nothing that walks it recurses once per term. Parentheses are not nodes; a chain
nested in a chain of the same level came from parentheses, and the printer puts them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a component path: ``kind`` is name, pos, index, assoc, union,
    length, d, type_id or repos_id."""

    kind: str
    arg: Any = None


@dataclass(frozen=True, slots=True)
class Path:
    """``$`` (``var`` None) or ``$var``, followed by steps; ``text`` is as written."""

    text: str
    var: str | None
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal: number, string or boolean."""

    value: Any


@dataclass(frozen=True, slots=True)
class Comp:
    """A component: ``$``, ``$name`` or either followed by path steps."""

    path: Path


@dataclass(frozen=True, slots=True)
class Ident:
    """A bare identifier: the filterable-data property of that name."""

    name: str


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``operands[0] op operands[1] op ...`` with op ``and`` or ``or`` (two or more)."""

    op: str
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Arith:
    """``operands[0] ops[0] operands[1] ops[1] ...``, left to right; the ops are all of
    one level (``+``/``-`` or ``*``/``/``) and ``len(operands) == len(ops) + 1``."""

    ops: tuple[str, ...]
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Twiddle:
    """``left ~ right``: the left string occurs in the right one."""

    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    """``left in right``: membership in a sequence."""

    left: Node
    right: Comp | Ident


@dataclass(frozen=True, slots=True)
class Exist:
    operand: Comp | Ident


@dataclass(frozen=True, slots=True)
class Default:
    operand: Comp


Node = Lit | Comp | Ident | Not | BoolOp | Compare | Arith | Twiddle | In | Exist | Default

# Precedence levels, loosest first (the grammar's order).
OR, AND, COMPARE, IN, TWIDDLE, SUM, PRODUCT, NOT, FACTOR = range(9)


def level(node: Node) -> int:
    """The precedence level of a node (``FACTOR`` for literals, components, ``exist``,
    ``default``)."""
    if isinstance(node, BoolOp):
        return OR if node.op == "or" else AND
    if isinstance(node, Compare):
        return COMPARE
    if isinstance(node, In):
        return IN
    if isinstance(node, Twiddle):
        return TWIDDLE
    if isinstance(node, Arith):
        return SUM if node.ops[0] in ("+", "-") else PRODUCT
    if isinstance(node, Not):
        return NOT
    return FACTOR


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of a node, left to right."""
    if isinstance(node, BoolOp | Arith):
        return node.operands
    if isinstance(node, Compare | Twiddle | In):
        return (node.left, node.right)
    if isinstance(node, Not | Exist | Default):
        return (node.operand,)
    return ()


__all__ = ["AND", "COMPARE", "FACTOR", "IN", "NOT", "OR", "PRODUCT", "SUM", "TWIDDLE", "Arith",
           "BoolOp", "Comp", "Compare", "Default", "Exist", "Ident", "In", "Lit", "Node", "Not",
           "Path", "Step", "Twiddle", "children", "level"]
