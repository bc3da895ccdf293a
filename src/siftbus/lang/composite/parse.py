"""Parser for composite profile lines (grammar: ``composite.lark``).

::

    alarm@security: glass=GlassBreak(level > 5) -> Motion(present = 1) within 60 s same room

The line's ``ID[@SUBSCRIBER]:`` is split off first, as for primitive profiles; the rest
is parsed by the lark grammar, and each component's text is handed to the primitive
profile parser (:func:`siftbus.lang.profile.parse_profile`), so components mean exactly
what the same text means as a profile line. Errors carry line and column of the whole
line; :class:`CompositeLimits` bounds what one line may cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache, lru_cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.load_grammar import FromPackageLoader

from siftbus.errors import ProfileError, ProfileSyntaxError, SiftbusError
from siftbus.lang.composite.printer import format_composite
from siftbus.lang.composite.syntax import (
    UNITS,
    Component,
    CompositeProfile,
    Conjunction,
    Consumption,
    Disjunction,
    FollowedBy,
    Negation,
    Node,
    Pattern,
    Select,
    Windowed,
    component_id,
    format_duration,
    iter_components,
)
from siftbus.lang.profile import iter_unique_lines, parse_profile, split_id
from siftbus.model import Profile, Schema
from siftbus.model.textio import read_text

KEYWORDS = frozenset({"not", "and", "or", "within", "same", "select", "first", "each",
                      "reuse", "consume"})
"""The language's keywords (case-insensitive); none may be written as a label."""

MAX_WINDOW = 2**62
"""Longest window in microseconds (about 146,000 years): times stay int64."""


@dataclass(frozen=True, slots=True)
class CompositeLimits:
    """Limits on one composite line (docs/composite.md, "Limits")."""

    max_line: int = 16384
    """Longest line, in characters."""
    max_components: int = 16
    """Most components (negated ones included)."""
    max_alternatives: int = 64
    """Most alternatives once every ``or`` is multiplied out (the automaton's branches)."""
    max_depth: int = 8
    """Deepest nesting of groups and operators."""


LIMITS = CompositeLimits()


@cache
def _parser() -> Lark:
    loader = FromPackageLoader("siftbus.lang", ("", "composite"))
    return Lark.open_from_package("siftbus.lang", "composite/composite.lark", ("",),
                                  parser="lalr", propagate_positions=True,
                                  maybe_placeholders=False, import_paths=[loader])


@lru_cache(maxsize=8192)
def _component_profile(text: str, schema: Schema) -> Profile:
    """A component's profile (id ``_``): rule sets repeat their components (the same
    condition for many rooms or subscribers), so each distinct text is parsed once."""
    return parse_profile(text, schema, id="_")


def _valid_id(text: str) -> bool:
    return bool(text) and all(c.isalnum() or c in "_-./" for c in text)


def parse_composite(text: str, schema: Schema, *, id: str | None = None,
                    source: str | None = None, line: int = 1,
                    limits: CompositeLimits = LIMITS) -> CompositeProfile:
    """Parse one composite profile line into a :class:`CompositeProfile`.

    ``id`` overrides (or supplies) the line's id. Raises :class:`ProfileError`
    (:class:`ProfileSyntaxError` for the grammar) with line and column.
    """
    if len(text) > limits.max_line:
        raise ProfileSyntaxError(f"composite profile line is longer than {limits.max_line} "
                                 "characters", source=source, line=line,
                                 column=limits.max_line + 1)
    pid, subscriber, offset = split_id(text)
    if id is not None:
        pid = id
    if pid is None:
        raise ProfileError("composite profile has no id (write 'ID: pattern within ...')",
                           source=source, line=line, column=1)
    if not _valid_id(pid) or (subscriber and not _valid_id(subscriber)):
        raise ProfileError(f"id {pid!r} and subscriber must be letters, digits, "
                           "'_', '-', '.', '/'", source=source, line=line, column=1)
    body = text[offset:]
    try:
        tree = _parser().parse(body)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, body, source, line, offset) from None
    builder = _Builder(schema, pid, subscriber, body, offset, source, line, limits)
    parsed = builder.line(tree)
    # What is accepted must be accepted again as it prints (``composite list``, a
    # resubscription after a reconnect): the printed form spells out the policies and
    # spaces every operator, so a short line may print longer than the limit.
    printed = len(format_composite(parsed))
    if printed > limits.max_line:
        raise ProfileSyntaxError(f"composite profile prints as {printed} characters "
                                 f"(policies and spaces written out), longer than "
                                 f"{limits.max_line}", source=source, line=line,
                                 column=min(len(text), limits.max_line) + 1)
    return parsed


class _Builder:
    """Turns the parse tree into values, checking what the grammar cannot."""

    def __init__(self, schema: Schema, pid: str, subscriber: str, body: str, offset: int,
                 source: str | None, line: int, limits: CompositeLimits) -> None:
        self.schema = schema
        self.pid = pid
        self.subscriber = subscriber
        self.body = body
        self.offset = offset
        self.source = source
        self.lineno = line
        self.limits = limits
        self.labels: dict[str, int] = {}

    def error(self, message: str, meta_or_tok: object, syntax: bool = False) -> ProfileError:
        column = self.column(meta_or_tok)
        cls = ProfileSyntaxError if syntax else ProfileError
        return cls(message, source=self.source, line=self.lineno, column=column)

    def column(self, meta_or_tok: object) -> int:
        pos = getattr(meta_or_tok, "start_pos", None)
        if pos is None:
            pos = getattr(getattr(meta_or_tok, "meta", None), "start_pos", 0) or 0
        return self.offset + int(pos) + 1

    def line(self, tree: Tree) -> CompositeProfile:
        children = list(tree.children)
        pattern_tree = children[0]
        window = self.duration(children[1])
        same: tuple[str, ...] = ()
        select = Select.FIRST
        consumption = Consumption.REUSE
        for child in children[2:]:
            assert isinstance(child, Tree)
            if child.data == "same":
                same = self.same(child)
            elif child.data == "select":
                select = Select(str(child.children[0]).lower())
            else:
                consumption = Consumption(str(child.children[0]).lower())
        pattern = self.pattern(pattern_tree, 1, window)
        comps = list(iter_components(pattern))
        n_alt = alternatives(pattern)
        if n_alt > self.limits.max_alternatives:
            raise self.error(f"the pattern has {n_alt} alternatives once every 'or' is "
                             f"multiplied out; at most {self.limits.max_alternatives}",
                             pattern_tree)
        self.check_same(same, [c for c, _ in comps], children)
        return CompositeProfile(self.pid, pattern, window, same, select, consumption,
                                self.subscriber)

    def pattern(self, tree: Tree | Token, depth: int, enclosing: int) -> Pattern:
        if depth > self.limits.max_depth:
            raise self.error(f"the pattern nests deeper than {self.limits.max_depth} levels",
                             tree)
        assert isinstance(tree, Tree)
        kind = tree.data
        if kind == "component":
            return self.component(tree)
        if kind == "group":
            if len(tree.children) == 1:
                return self.pattern(tree.children[0], depth + 1, enclosing)
            window = self.duration(tree.children[1])
            if window > enclosing:
                raise self.error(f"the window {format_duration(window)} is longer than the "
                                 f"{format_duration(enclosing)} around it",
                                 tree.children[1])
            return Windowed(self.pattern(tree.children[0], depth + 1, window), window)
        if kind == "followed_by":
            steps: list[Pattern | Negation] = []
            for i, child in enumerate(tree.children):
                assert isinstance(child, Tree)
                if child.data == "negation":
                    assert i > 0  # the grammar puts a negation only after a step
                    comp = self.component(child.children[0])
                    steps.append(Negation(comp))
                else:
                    steps.append(self.pattern(child, depth + 1, enclosing))
            return FollowedBy(tuple(steps))
        operands = tuple(self.pattern(c, depth + 1, enclosing) for c in tree.children)
        if kind == "conjunction":
            return Conjunction(operands)
        assert kind == "disjunction", kind
        return Disjunction(operands)

    def component(self, tree: Tree | Token) -> Component:
        assert isinstance(tree, Tree)
        children = tree.children
        native = children[-1]
        assert isinstance(native, Tree)
        type_tok = native.children[0]
        assert isinstance(type_tok, Token)
        if len(children) == 2:
            tok = children[0]
            assert isinstance(tok, Token)
            label = str(tok)
            where: object = tok
            if label.lower() in KEYWORDS:
                raise self.error(f"{label!r} is a keyword and cannot be a label (name the "
                                 f"component otherwise: a={type_tok}(...))", where, syntax=True)
        else:
            label = str(type_tok)
            where = type_tok
        if len(self.labels) >= self.limits.max_components:
            raise self.error(f"a composite profile has at most {self.limits.max_components} "
                             "components", where)
        if label in self.labels:
            raise self.error(f"label {label!r} is used twice (name the components: "
                             f"a={type_tok}(...) -> b={type_tok}(...))", where)
        self.labels[label] = self.column(where)
        start = native.meta.start_pos
        end = native.meta.end_pos
        text = self.body[start:end]
        try:
            profile = _component_profile(text, self.schema)
        except SiftbusError as exc:
            exc.column = self.offset + start + (exc.column or 1)
            exc.line, exc.source = self.lineno, self.source
            raise
        return Component(label, profile.with_id(component_id(self.pid, label),
                                                self.subscriber))

    def duration(self, tree: Tree | Token) -> int:
        assert isinstance(tree, Tree)
        num, unit = tree.children
        assert isinstance(num, Token) and isinstance(unit, Token)
        if len(num) > 24:
            raise self.error(f"the window {str(num)[:12]}... has more than 24 digits", num)
        value = Decimal(str(num))
        if value < 0:
            raise self.error(f"a window cannot be negative: {num} {unit}", num)
        us = value * UNITS[str(unit).lower()]
        if us != us.to_integral_value():
            raise self.error(f"{num} {unit} is not a whole number of microseconds", num)
        if us > MAX_WINDOW:
            raise self.error(f"{num} {unit} is longer than the longest window", num)
        return int(us)

    def same(self, tree: Tree) -> tuple[str, ...]:
        names: list[str] = []
        for tok in tree.children:
            assert isinstance(tok, Token)
            if str(tok) in names:
                raise self.error(f"'same {tok}' is given twice", tok)
            names.append(str(tok))
        return tuple(names)

    def check_same(self, same: tuple[str, ...], comps: list[Component],
                   children: list[Tree | Token]) -> None:
        if not same:
            return
        tree = next(c for c in children if isinstance(c, Tree) and c.data == "same")
        for i, name in enumerate(same):
            tok = tree.children[i]
            spec: str | None = None
            first = ""
            for c in comps:
                etype = c.profile.etype
                if name not in etype:
                    raise self.error(f"same {name}: component {c.label!r} ({etype.name}) has "
                                     f"no attribute {name!r}", tok)
                attr = etype.attribute(name)
                if attr.optional or attr.array:  # equal "absent" or which element: undefined
                    raise self.error(f"same {name}: {c.label!r} ({etype.name}) has it "
                                     f"{'optional' if attr.optional else 'as an array'}; "
                                     "same takes attributes every event holds exactly once",
                                     tok)
                s = attr.domain.spec
                if spec is None:
                    spec, first = s, c.label
                elif s != spec:
                    raise self.error(f"same {name}: {first!r} has {spec} but {c.label!r} has "
                                     f"{s}; the domains must be the same", tok)


def alternatives(node: Node) -> int:
    """How many alternatives (branches) ``node`` has once every ``or`` is multiplied out."""
    if isinstance(node, Component | Negation):
        return 1
    if isinstance(node, Windowed):
        return alternatives(node.pattern)
    if isinstance(node, Disjunction):
        return sum(alternatives(o) for o in node.operands)
    parts = node.steps if isinstance(node, FollowedBy) else node.operands
    out = 1
    for p in parts:
        out *= alternatives(p)
    return out


_TOKEN_NAMES = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "EQUAL": "'='", "NAME": "a name",
    "NUMBER": "a number", "UNIT": "a unit (ms, s, min, h, d)", "_ARROW": "'->'",
    "_NOT": "'not'", "_AND": "'and'", "_OR": "'or'", "_WITHIN": "'within'",
    "_SAME": "'same'", "_SELECT": "'select'", "FIRST": "'first'", "EACH": "'each'",
    "REUSE": "'reuse'", "CONSUME": "'consume'",
}


def _pretty(name: str) -> str:
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    if "profile__" in name.lower():
        return "a condition"
    return name.strip("_").lower()


def _syntax_error(exc: UnexpectedInput, body: str, source: str | None, line: int,
                  offset: int) -> ProfileSyntaxError:
    col = offset + (exc.column if isinstance(exc.column, int) and exc.column > 0
                    else len(body) + 1)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        msg = f"unexpected character {body[pos]!r}"
    elif isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken)
                                            and exc.token.type == "$END"):
        msg = "unexpected end of composite profile"
        col = offset + len(body.rstrip()) + 1
        if isinstance(exc, UnexpectedToken) and "_WITHIN" in exc.expected:
            msg += " (a composite profile needs 'within <duration>')"
    elif isinstance(exc, UnexpectedToken):
        tok = exc.token
        msg = f"unexpected {str(tok)[:40]!r}"
        history = getattr(exc, "token_history", None) or []
        before = history[-1] if history else None
        if tok.type == "_NOT" or (before is not None and str(before).lower() == "not"):
            msg = ("'not' may only be a step of '->' after another step (a -> not b), "
                   "never first, nor inside 'and' or 'or'")
            if before is not None and str(before).lower() == "not":
                col = offset + (before.column or 1)
            return ProfileSyntaxError(msg, source=source, line=line, column=col)
        expected = sorted({_pretty(t) for t in exc.expected})
        if expected:
            msg += f"; expected {', '.join(expected[:8])}"
    else:
        msg = "invalid composite profile"
    return ProfileSyntaxError(msg, source=source, line=line, column=col)


def iter_composite_lines(text: str, schema: Schema, *, source: str | None = None,
                         limits: CompositeLimits = LIMITS
                         ) -> Iterator[CompositeProfile | SiftbusError]:
    """Every composite profile of a file, or the error of each bad line (blank lines and
    ``#`` comments skipped; duplicate ids are errors)."""
    return iter_unique_lines(
        text, lambda raw, n: parse_composite(raw, schema, source=source, line=n, limits=limits),
        what="composite profile", source=source)


def parse_composites(text: str, schema: Schema, *, source: str | None = None,
                     limits: CompositeLimits = LIMITS) -> list[CompositeProfile]:
    """Parse a whole file of composite profiles; the first bad line raises."""
    out = []
    for item in iter_composite_lines(text, schema, source=source, limits=limits):
        if isinstance(item, SiftbusError):
            raise item
        out.append(item)
    return out


def load_composites(path: str | Path, schema: Schema, *,
                    limits: CompositeLimits = LIMITS) -> list[CompositeProfile]:
    """Read and parse a file of composite profiles (strict UTF-8, bounded size)."""
    text = read_text(path, source=str(path), kind=ProfileError)
    return parse_composites(text, schema, source=str(path), limits=limits)


__all__ = [
    "KEYWORDS",
    "LIMITS",
    "CompositeLimits",
    "alternatives",
    "iter_composite_lines",
    "load_composites",
    "parse_composite",
    "parse_composites",
]
