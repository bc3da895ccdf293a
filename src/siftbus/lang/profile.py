"""Parser and printer for profile lines.

Two surface forms, the same conditions::

    heater-1@heaters: OutdoorTemp(value > 20)
    heater-1: PROFILE(PRI(value>20,TYPE=OutdoorTemp))

``ID`` (and the optional ``@SUBSCRIBER``) precede a colon; bare words in value position
are enum labels or ``MIN``/``MAX`` (the least and greatest value of the domain); strings
are double-quoted. In Bittner's form ``MIN``/``MAX`` after ``>``/``<`` are his *virtual*
elements just outside the domain, so ``a > MIN`` and ``a < MAX`` accept every value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib.resources import files
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from siftbus.errors import ProfileError, ProfileSyntaxError, SiftbusError
from siftbus.model import (
    EventType,
    Extreme,
    Op,
    Predicate,
    Profile,
    Schema,
    StringDomain,
)
from siftbus.model.domain import AnyDomain
from siftbus.model.predicate import Operand

_ID_PREFIX = re.compile(r"\s*([\w.\-/]+)(?:@([\w.\-/]+))?\s*:(?!=)")


@cache
def _parser() -> Lark:
    grammar = files("siftbus.lang").joinpath("profile.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


@dataclass(frozen=True, slots=True)
class Bare:
    """An unquoted word in value position (enum label, MIN or MAX)."""

    word: str


@dataclass(frozen=True, slots=True)
class WrittenCondition:
    """A condition as written, with where it starts (line and column from 1)."""

    predicate: Predicate
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ProfileText:
    """A parsed but not yet schema-checked profile line."""

    id: str | None
    subscriber: str
    type_name: str
    type_column: int
    conditions: tuple[WrittenCondition, ...]
    form: str  # "native" or "bittner"


def parse_profile_text(text: str, *, source: str | None = None, line: int = 1) -> ProfileText:
    """Parse the syntax of one profile line (no schema needed)."""
    pid: str | None = None
    subscriber = ""
    offset = 0
    m = _ID_PREFIX.match(text)
    if m:
        pid, subscriber, offset = m[1], m[2] or "", m.end()
    body = text[offset:]
    try:
        tree = _parser().parse(body)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, body, source, line, offset) from None
    form = tree.children[0]
    assert isinstance(form, Tree)
    conds: list[WrittenCondition] = []
    type_name: str | None = None
    type_col = offset + 1
    bittner = form.data == "bittner"
    items = form.children if bittner else form.children[1:]
    if not bittner:
        tok = form.children[0]
        assert isinstance(tok, Token)
        type_name, type_col = str(tok), offset + (tok.column or 1)
    for item in items:
        assert isinstance(item, Tree)
        if item.data == "btype":
            tok = item.children[0]
            assert isinstance(tok, Token)
            if type_name is not None:
                raise ProfileSyntaxError("TYPE is given twice", source=source, line=line,
                                         column=offset + (tok.column or 1))
            type_name, type_col = str(tok), offset + (tok.column or 1)
            continue
        conds.append(_condition(item, bittner, offset, line))
    if type_name is None:
        raise ProfileSyntaxError("PROFILE(PRI(...)) needs TYPE=<event type>", source=source,
                                 line=line, column=offset + len(body) - len(body.lstrip()) + 1)
    return ProfileText(pid, subscriber, type_name, type_col, tuple(conds),
                       "bittner" if bittner else "native")


def _condition(item: Tree, bittner: bool, offset: int, line: int) -> WrittenCondition:
    name = item.children[0]
    assert isinstance(name, Token)
    values = [_value(v) for v in item.children if isinstance(v, Tree)]
    kind = item.data
    op: Op
    if kind == "cmp":
        op = Op(str(item.children[1]))
        if bittner and len(values) == 1 and isinstance(values[0], Bare):
            # Bittner's virtual w_min / w_max lie just outside the domain.
            word = values[0].word
            if op is Op.GT and word == "MIN":
                op = Op.GE
            elif op is Op.LT and word == "MAX":
                op = Op.LE
    elif kind == "range":
        op = Op.RANGE
    elif kind == "set":
        op = Op.IN
    elif kind == "prefix":
        op = Op.PREFIX
        tok = item.children[2]
        values = [json.loads(str(tok))]
    else:
        op = Op.EXISTS
    return WrittenCondition(Predicate(str(name), op, tuple(values)),  # type: ignore[arg-type]
                            line, offset + (name.column or 1))


def _value(tree: Tree) -> object:
    tok = tree.children[0]
    assert isinstance(tok, Token)
    text = str(tok)
    if tok.type == "NUMBER":
        return Decimal(text) if "." in text else int(text)
    if tok.type == "STRING":
        return json.loads(text)
    return Bare(text)


def _syntax_error(exc: UnexpectedInput, body: str, source: str | None, line: int,
                  offset: int) -> ProfileSyntaxError:
    col = offset + (exc.column if isinstance(exc.column, int) and exc.column > 0 else
                    len(body) + 1)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        msg = f"unexpected character {body[pos]!r}"
    elif isinstance(exc, UnexpectedEOF):
        msg = "unexpected end of profile"
        col = offset + len(body.rstrip()) + 1
    elif isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            msg = "unexpected end of profile"
            col = offset + len(body.rstrip()) + 1
        else:
            msg = f"unexpected {str(tok)!r}"
        expected = sorted(_pretty(t) for t in exc.expected)
        if expected:
            msg += f"; expected {', '.join(expected[:8])}"
    else:
        msg = "invalid profile"
    return ProfileSyntaxError(msg, source=source, line=line, column=col)


_TOKEN_NAMES = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "NAME": "a name", "NUMBER": "a number",
    "STRING": "a string", "CMP": "an operator", "IN": "'in'", "PREFIX": "'prefix'",
    "EXISTS": "'exists'", "COLON": "':'",
}


def _pretty(token_name: str) -> str:
    return _TOKEN_NAMES.get(token_name, token_name.strip("_").lower())


def resolve(parsed: ProfileText, schema: Schema | EventType, *, id: str | None = None,
            source: str | None = None) -> Profile:
    """Check a parsed line against the schema and normalise it into a :class:`Profile`."""
    pid = id if id is not None else parsed.id
    if pid is None:
        raise ProfileError("profile has no id (write 'ID: Type(...)')", source=source,
                           line=parsed.conditions[0].line if parsed.conditions else None,
                           column=1)
    line = parsed.conditions[0].line if parsed.conditions else None
    etype = _lookup_type(parsed, schema, source, line)
    preds = []
    for wc in parsed.conditions:
        try:
            pred = resolve_predicate(wc.predicate, etype)
            if pred.attr not in etype:
                raise ProfileError(f"{etype.name} has no attribute {pred.attr!r} "
                                   f"(it has {', '.join(etype.names)})")
            pred.constraint(etype.attribute(pred.attr).domain)
        except SiftbusError as exc:
            raise exc.located(source=source, line=wc.line, column=wc.column) from None
        preds.append(pred)
    try:
        return Profile.build(pid, etype, preds, parsed.subscriber)
    except SiftbusError as exc:
        where = [wc for wc in parsed.conditions if wc.predicate.attr == exc.field]
        wc0 = where[-1] if where else None
        raise exc.located(source=source, line=wc0.line if wc0 else line,
                          column=wc0.column if wc0 else 1) from None


def _lookup_type(parsed: ProfileText, schema: Schema | EventType, source: str | None,
                 line: int | None) -> EventType:
    if isinstance(schema, EventType):
        if schema.name == parsed.type_name:
            return schema
        known = [schema.name]
    else:
        found = schema.get(parsed.type_name)
        if found is not None:
            return found
        known = list(schema.names)
    raise ProfileError(f"unknown event type {parsed.type_name!r} (known: {', '.join(known)})",
                       source=source, line=line, column=parsed.type_column)


def resolve_predicate(pred: Predicate, etype: EventType) -> Predicate:
    """Turn bare words (enum labels, MIN, MAX) of a written condition into operands."""
    if pred.attr not in etype:
        return pred
    domain = etype.attribute(pred.attr).domain
    out: list[Operand] = []
    for v in pred.operands:
        if isinstance(v, Bare):
            out.append(_bare(v.word, domain, pred.attr))
        else:
            out.append(v)
    return Predicate(pred.attr, pred.op, tuple(out))


def _bare(word: str, domain: AnyDomain, attr: str) -> Operand:
    if word in ("MIN", "MAX"):
        if isinstance(domain, StringDomain):
            raise ProfileError(f"{attr}: {word} needs an ordered attribute")
        return Extreme(word)
    if isinstance(domain, StringDomain):
        raise ProfileError(f"{attr}: string values must be quoted: \"{word}\"")
    return word


def parse_profile(text: str, schema: Schema | EventType, *, id: str | None = None,
                  source: str | None = None, line: int = 1) -> Profile:
    """Parse one profile line (either form) into a normalised :class:`Profile`.

    ``id`` overrides (or supplies) the line's id. Errors carry ``line`` and ``column``.
    """
    return resolve(parse_profile_text(text, source=source, line=line), schema, id=id,
                   source=source)


def iter_profile_lines(text: str, schema: Schema, *, source: str | None = None
                       ) -> Iterator[Profile | SiftbusError]:
    """Every profile of a profile file, or the error of each bad line (blank lines and
    ``#`` comments skipped; duplicate ids are errors)."""
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            p = parse_profile(raw, schema, source=source, line=n)
        except SiftbusError as exc:
            yield exc
            continue
        if p.id in seen:
            yield ProfileError(f"profile id {p.id!r} is already used on line {seen[p.id]}",
                               source=source, line=n, column=1)
            continue
        seen[p.id] = n
        yield p


def parse_profiles(text: str, schema: Schema, *, source: str | None = None) -> list[Profile]:
    """Parse a whole profile file; the first bad line raises."""
    out = []
    for item in iter_profile_lines(text, schema, source=source):
        if isinstance(item, SiftbusError):
            raise item
        out.append(item)
    return out


def load_profiles(path: str | Path, schema: Schema) -> list[Profile]:
    """Read and parse a profile file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read profiles: {exc.strerror}", source=str(p)) from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"profile file is not UTF-8: {exc.reason}", source=str(p)) from None
    return parse_profiles(text, schema, source=str(p))


def format_condition(pred: Predicate, domain: AnyDomain, *, compact: bool = False) -> str:
    """One condition in the profile language."""
    def lit(v: Operand) -> str:
        if isinstance(v, Extreme):
            return v.value
        return domain.literal(domain.key(v))

    sep = ", " if not compact else ","
    op = pred.op
    if op is Op.EXISTS:
        return f"{pred.attr} exists"
    if op is Op.PREFIX:
        return f"{pred.attr} prefix {json.dumps(pred.operands[0], ensure_ascii=False)}"
    if op is Op.RANGE:
        return f"{pred.attr} in [{lit(pred.operands[0])}{sep}{lit(pred.operands[1])}]"
    if op is Op.IN:
        return f"{pred.attr} in {{{sep.join(lit(v) for v in pred.operands)}}}"
    if compact:
        return f"{pred.attr}{op.value}{lit(pred.operands[0])}"
    return f"{pred.attr} {op.value} {lit(pred.operands[0])}"


def format_profile(profile: Profile, *, form: str = "native", with_id: bool = True) -> str:
    """Print a profile so that :func:`parse_profile` reads back an equal profile."""
    etype = profile.etype
    preds = profile.predicates()
    head = ""
    if with_id:
        head = profile.id
        if profile.subscriber:
            head += f"@{profile.subscriber}"
        head += ": "
    if form == "bittner":
        items = [format_condition(p, etype.attribute(p.attr).domain, compact=True)
                 for p in preds]
        items.append(f"TYPE={etype.name}")
        return f"{head}PROFILE(PRI({','.join(items)}))"
    if form != "native":
        raise ValueError(f"unknown profile form {form!r}: use 'native' or 'bittner'")
    body = ", ".join(format_condition(p, etype.attribute(p.attr).domain) for p in preds)
    return f"{head}{etype.name}({body})"
