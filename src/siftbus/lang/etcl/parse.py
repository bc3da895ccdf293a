"""Parsing: ETCL text to a syntax tree, within documented limits.

The lark grammar (``grammar.lark``, LALR) is the specification of the syntax. Hostile
text is normal input, so parsing is bounded:

* a constraint longer than :attr:`ConstraintLimits.max_length` characters is refused
  before it is lexed (memory then stays a small multiple of the limit);
* parentheses, ``not`` and operators nest at most :attr:`ConstraintLimits.max_depth`
  levels (a chain of one operator, ``a and b and c ...``, is one level however long);
  every walk over the tree (evaluation, printing, compilation) therefore recurses at most
  that deep;
* the lexer's string pattern keeps no state per character (see the grammar).

Every refusal is a :class:`~siftbus.errors.ConstraintError` with line and column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from siftbus.errors import ConstraintError
from siftbus.lang.etcl.printer import excerpt
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
    Path,
    Step,
    Twiddle,
)


@dataclass(frozen=True, slots=True)
class ConstraintLimits:
    """What one ETCL constraint may cost; exceeding a limit is a ConstraintError."""

    max_length: int = 32_768
    """Characters in the constraint text."""
    max_depth: int = 100
    """Nesting of parentheses, ``not`` and operators (a chain of one operator counts once)."""


DEFAULT_LIMITS = ConstraintLimits()

KEYWORDS = frozenset({"and", "or", "not", "in", "exist", "default", "TRUE", "FALSE"})


@cache
def _parser() -> Lark:
    grammar = files("siftbus.lang.etcl").joinpath("grammar.lark").read_text(encoding="utf-8")
    # The basic lexer: keywords outrank identifiers wherever they stand, so "and TRUE"
    # is refused at "and" (column 1), not later at "TRUE".
    # No propagate_positions: it doubles the time and memory of a parse, and a position
    # is needed only for an error (then :func:`_position` finds it).
    return Lark(grammar, parser="lalr", lexer="basic", maybe_placeholders=False)


def parse(text: str, *, source: str | None = None,
          limits: ConstraintLimits = DEFAULT_LIMITS) -> Node | None:
    """The syntax tree of ETCL text (``None`` for the empty constraint, which is TRUE);
    raises :class:`ConstraintError` with line and column on bad or oversized input."""
    if not isinstance(text, str):
        raise ConstraintError("an ETCL constraint must be a string", source=source)
    if len(text) > limits.max_length:
        line = text.count("\n", 0, limits.max_length) + 1
        column = limits.max_length - text.rfind("\n", 0, limits.max_length)
        raise ConstraintError(f"ETCL constraint of {len(text):,} characters is longer than "
                              f"the limit of {limits.max_length:,}", source=source, line=line,
                              column=column)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise ConstraintError(_syntax_message(exc, text), source=source, line=exc.line,
                              column=exc.column) from None
    if not tree.children:
        return None
    try:
        return _Builder(limits.max_depth).build(tree.children[0], 0)
    except ConstraintError as exc:
        raise exc.located(source=source) from None


def _syntax_message(exc: UnexpectedInput, text: str) -> str:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        char = text[pos:pos + 1]
        hint = " (ETCL strings are in single quotes: 'text')" if char == '"' else ""
        return f"unexpected character {char!r} in ETCL constraint{hint}"
    if isinstance(exc, UnexpectedEOF):
        return "ETCL constraint ends too early"
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            return "ETCL constraint ends too early"
        value = str(exc.token.value)
        what = "keyword " if value in KEYWORDS else ""
        return f"unexpected {what}{excerpt(value, 40)!r} in ETCL constraint"
    return "invalid ETCL constraint"  # pragma: no cover - lark raises only the above


_LEAVES = frozenset({"number", "string", "true", "false", "operand_ref", "exist", "default"})
_SUM_OPS = frozenset({"+", "-"})


class _Builder:
    """Lark tree -> syntax tree. Chains are followed in a loop; recursion happens only
    where the nesting level grows, and stops at the depth limit."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth

    def build(self, t: Tree | Token, depth: int) -> Node:
        if isinstance(t, Token):  # pragma: no cover - every token sits under a rule
            raise ConstraintError(f"unexpected {excerpt(str(t), 40)!r}", line=t.line,
                                  column=t.column)
        d = t.data
        ch = t.children
        if d in _LEAVES:
            return _leaf(t)
        if depth >= self.max_depth:
            line, column = _position(t)
            raise ConstraintError(f"ETCL constraint nests deeper than {self.max_depth} levels "
                                  "(parentheses, not and operators)", line=line, column=column)
        inner = depth + 1
        if d in ("or_", "and_"):
            operands, _ = _chain(t, lambda x: x.data == d)
            return BoolOp("or" if d == "or_" else "and",
                          tuple(self.build(o, inner) for o in operands))
        if d == "arith":
            is_sum = str(ch[1]) in _SUM_OPS
            operands, ops = _chain(t, lambda x: x.data == "arith"
                                   and (str(x.children[1]) in _SUM_OPS) == is_sum)
            return Arith(tuple(ops), tuple(self.build(o, inner) for o in operands))
        if d == "compare":
            return Compare(str(ch[1]), self.build(ch[0], inner), self.build(ch[2], inner))
        if d == "in_":
            ref = _leaf(_tree(ch[2]))
            assert isinstance(ref, Comp | Ident)
            return In(self.build(ch[0], inner), ref)
        if d == "twiddle":
            return Twiddle(self.build(ch[0], inner), self.build(ch[2], inner))
        if d == "not_":
            return Not(self.build(ch[1], inner))
        if d == "paren":
            return self.build(ch[1], inner)
        raise AssertionError(d)  # pragma: no cover - the grammar has no other rule


def _position(t: Tree | Token) -> tuple[int | None, int | None]:
    """Line and column of the first token of a subtree."""
    while isinstance(t, Tree):
        if not t.children:  # pragma: no cover - every rule has a token
            return None, None
        t = t.children[0]
    return t.line, t.column


def _tree(t: Tree | Token) -> Tree:
    assert isinstance(t, Tree)
    return t


def _chain(t: Tree, same: Callable[[Tree], bool]) -> tuple[list[Tree | Token], list[str]]:
    """The operands and operators of a left-recursive chain, left to right."""
    rights: list[Tree | Token] = []
    ops: list[str] = []
    node: Tree | Token = t
    while isinstance(node, Tree) and same(node):
        rights.append(node.children[2])
        ops.append(str(node.children[1]))
        node = node.children[0]
    rights.append(node)
    rights.reverse()
    ops.reverse()
    return rights, ops


def _leaf(t: Tree) -> Node:
    d = t.data
    ch = t.children
    if d == "number":
        if len(ch) == 2:
            return Lit(_number(_token(ch[1]), str(ch[0]) == "-"))
        return Lit(_number(_token(ch[0]), False))
    if d == "string":
        return Lit(unquote(str(ch[0])))
    if d == "true":
        return Lit(True)
    if d == "false":
        return Lit(False)
    if d == "exist":
        ref = _leaf(_tree(ch[1]))
        assert isinstance(ref, Comp | Ident)
        return Exist(ref)
    if d == "default":
        return Default(Comp(parse_path(_token(ch[1]))))
    assert d == "operand_ref"
    tok = _token(ch[0])
    if tok.type == "COMPONENT":
        return Comp(parse_path(tok))
    return Ident(str(tok))


def _token(t: Tree | Token) -> Token:
    assert isinstance(t, Token)
    return t


def _number(tok: Token, negative: bool) -> int | float:
    text = str(tok)
    try:
        v: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise ConstraintError(f"number {excerpt(text, 20)} has too many digits",
                              line=tok.line, column=tok.column) from None
    if isinstance(v, float) and not math.isfinite(v):
        raise ConstraintError(f"number {excerpt(text, 20)} is out of range", line=tok.line,
                              column=tok.column)
    return -v if negative else v


def unquote(raw: str) -> str:
    """The value of a quoted ETCL string: ``\\x`` stands for ``x``."""
    body = raw[1:-1]
    return re.sub(r"\\(.)", r"\1", body) if "\\" in body else body


_STEP_RE = re.compile(
    r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|\.(?P<pos>\d+)"
    r"|\[[ \t]*(?P<index>\d+)[ \t]*\]"
    r"|\([ \t]*(?P<assoc>[A-Za-z_][A-Za-z0-9_]*)[ \t]*\)"
    r"|\.\([ \t]*(?P<union>[+-]?\d+|'[^'\\]*+(?:\\.[^'\\]*+)*+'|[A-Za-z_][A-Za-z0-9_]*)?[ \t]*\)"
)
_VAR_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?")
_SPECIAL = {"_length": "length", "_d": "d", "_type_id": "type_id", "_repos_id": "repos_id"}


def parse_path(tok: Token | str) -> Path:
    """A component token (``$``, ``$name``, then steps) split into its steps."""
    text = str(tok)
    line = getattr(tok, "line", None)
    column = getattr(tok, "column", None)
    m = _VAR_RE.match(text)
    if m is None:
        raise ConstraintError(f"a component starts with $, not {excerpt(text, 20)!r}",
                              line=line, column=column)
    steps: list[Step] = []
    pos = m.end()
    while pos < len(text):
        sm = _STEP_RE.match(text, pos)
        if sm is None:  # the grammar's COMPONENT and this pattern agree; defensive
            raise ConstraintError(f"bad component {excerpt(text, 40)!r}", line=line,
                                  column=column)
        pos = sm.end()
        try:
            steps.append(_step(sm))
        except ValueError:  # a position or index of more digits than Python converts
            raise ConstraintError(f"number in component {excerpt(text, 40)!r} has too many "
                                  "digits", line=line, column=column) from None
    for i, s in enumerate(steps):
        if s.kind in ("length", "d", "type_id", "repos_id") and i != len(steps) - 1:
            raise ConstraintError(f"{excerpt(text, 40)}: ._{s.kind} must end the component",
                                  line=line, column=column)
    return Path(text, m.group(1), tuple(steps))


def _step(sm: re.Match[str]) -> Step:
    if sm.group("name") is not None:
        name = sm.group("name")
        return Step(_SPECIAL[name]) if name in _SPECIAL else Step("name", name)
    if sm.group("pos") is not None:
        return Step("pos", int(sm.group("pos")))
    if sm.group("index") is not None:
        return Step("index", int(sm.group("index")))
    if sm.group("assoc") is not None:
        return Step("assoc", sm.group("assoc"))
    raw = sm.group("union")
    if raw is None:
        return Step("union", None)
    if raw[0] == "'":
        return Step("union", ("str", unquote(raw)))
    if raw in ("TRUE", "FALSE"):
        return Step("union", ("bool", raw == "TRUE"))
    if raw[0].isdigit() or raw[0] in "+-":
        return Step("union", ("num", int(raw)))
    return Step("union", ("str", raw))  # an enum label: compared with string discriminators


__all__ = ["DEFAULT_LIMITS", "KEYWORDS", "ConstraintLimits", "parse", "parse_path", "unquote"]
