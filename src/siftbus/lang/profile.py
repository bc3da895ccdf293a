"""Parser and printer for profile lines.

Two surface forms, the same conditions::

    heater-1@heaters: OutdoorTemp(value > 20)
    heater-1: PROFILE(PRI(value>20,TYPE=OutdoorTemp))

``ID`` (and the optional ``@SUBSCRIBER``) precede a colon; bare words in value position
are enum labels or ``MIN``/``MAX`` (the least and greatest value of the domain; a label
the schema declares wins: on ``enum[LOW,HIGH,MAX]`` the word ``MAX`` is that label);
strings are double-quoted. In Bittner's form ``MIN``/``MAX`` after ``>``/``<`` are his
*virtual* elements just outside the domain, so ``a > MIN`` and ``a < MAX`` accept every
value.

Hostile lines cost bounded time and memory: :class:`ProfileLimits` caps the length of a
line, of a string and of a number, and the number of conditions, each refused with a
:class:`~siftbus.errors.ProfileSyntaxError` at its column before the work it would cause.
"""

from __future__ import annotations

import builtins
import difflib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from decimal import Decimal
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from siftbus.errors import InputError, ProfileError, ProfileSyntaxError, SiftbusError

# printing lives in lang/printing.py; its names stay importable from here
from siftbus.lang.printing import STROPS as STROPS
from siftbus.lang.printing import format_condition as format_condition
from siftbus.lang.printing import format_profile as format_profile

# the line's data before the schema, shared with the scanner; importable from here
from siftbus.lang.profile_scan import ScannedProfile, scan_profile
from siftbus.lang.profile_text import MAX_GROUP_DEPTH as MAX_GROUP_DEPTH
from siftbus.lang.profile_text import PROFILE_LIMITS as PROFILE_LIMITS
from siftbus.lang.profile_text import Bare as Bare
from siftbus.lang.profile_text import ProfileLimits as ProfileLimits
from siftbus.lang.profile_text import ProfileText as ProfileText
from siftbus.lang.profile_text import WrittenCondition as WrittenCondition
from siftbus.lang.profile_text import split_id as split_id
from siftbus.model import (
    EventType,
    Extreme,
    Op,
    Predicate,
    Profile,
    Schema,
    StringDomain,
)
from siftbus.model.checks import MAX_DISJUNCTS
from siftbus.model.domain import AnyDomain, EnumDomain
from siftbus.model.kinds import BoolDomain
from siftbus.model.predicate import Operand
from siftbus.model.profile import Part, condition_part, predicate_check
from siftbus.model.textio import TEXT_LIMITS, parse_json_line, read_lines, split_lines

# lark is imported when a line is parsed: the compiled scanners read most files without it
if TYPE_CHECKING:
    from lark import Lark, Token, Tree
    from lark.exceptions import UnexpectedInput

@cache
def _parser() -> Lark:
    from lark import Lark

    grammar = files("siftbus.lang").joinpath("profile.lark").read_text(encoding="utf-8")
    # Tokens carry their columns; tree positions (propagate_positions) would double the
    # parse time and are not used.
    return Lark(grammar, parser="lalr", maybe_placeholders=False)


def parse_profile_text(text: str, *, source: str | None = None, line: int = 1,
                       limits: ProfileLimits = PROFILE_LIMITS, scanner: bool = True
                       ) -> ProfileText:
    """Parse the syntax of one profile line (no schema needed).

    The scanner (:mod:`siftbus.lang.profile_scan`) reads the common lines, the grammar
    the others and every error; ``scanner=False`` asks the grammar alone (the
    specification: both give the same value)."""
    if scanner:
        scanned = scan_profile(text, line=line, limits=limits)
        if scanned is not None:
            return scanned.text
    from lark import Token, Tree, UnexpectedInput

    if len(text) > limits.max_line:
        raise ProfileSyntaxError(f"profile line longer than {limits.max_line} characters "
                                 "(ProfileLimits.max_line)", source=source, line=line,
                                 column=limits.max_line + 1)
    pid, subscriber, offset = split_id(text)
    body = text[offset:]
    try:
        tree = _parser().parse(body)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, body, source, line, offset) from None
    except RecursionError:  # the grammar does not nest; only a nearly full stack gets here
        raise ProfileSyntaxError("profile too complex for the interpreter's stack",
                                 source=source, line=line, column=offset + 1) from None
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
    written = 0

    def condition(item: Tree) -> WrittenCondition:
        nonlocal written
        written += 1
        if written > limits.max_conditions:
            first = item.children[0]
            assert isinstance(first, Token)
            raise ProfileSyntaxError(
                f"more than {limits.max_conditions} conditions "
                "(ProfileLimits.max_conditions)", source=source, line=line,
                column=offset + (first.column or 1))
        wc = _condition(item, bittner, offset, line, source, limits)
        conds.append(wc)
        return wc

    dnf: tuple[tuple[WrittenCondition, ...], ...] | None = None
    for item in items:
        assert isinstance(item, Tree)
        if item.data == "all":
            dnf = _dnf(item, condition, 0, offset, line, source)
            continue
        if item.data == "btype":
            tok = item.children[0]
            assert isinstance(tok, Token)
            if type_name is not None:
                raise ProfileSyntaxError("TYPE is given twice", source=source, line=line,
                                         column=offset + (tok.column or 1))
            type_name, type_col = str(tok), offset + (tok.column or 1)
            continue
        condition(item)
    if dnf is not None and len(dnf) == 1:
        dnf = None  # no "or": the plain conjunction of ``conditions``
    if type_name is None:
        raise ProfileSyntaxError("PROFILE(PRI(...)) needs TYPE=<event type>", source=source,
                                 line=line, column=offset + len(body) - len(body.lstrip()) + 1)
    return ProfileText(pid, subscriber, type_name, type_col, tuple(conds),
                       "bittner" if bittner else "native", line, dnf)


def _dnf(tree: Tree, condition: Callable[[Tree], WrittenCondition], depth: int, offset: int,
         line: int, source: str | None) -> tuple[tuple[WrittenCondition, ...], ...]:
    """The alternatives (disjunctive normal form) of an ``all``/``any`` tree, refused with
    the position of the ``or`` that passes :data:`MAX_DISJUNCTS` or the group depth."""
    from lark import Token, Tree

    def where(t: Tree) -> int:
        tok = next(t.scan_values(lambda v: isinstance(v, Token)), None)
        return offset + (tok.column or 1) if isinstance(tok, Token) else offset + 1

    if depth > MAX_GROUP_DEPTH:
        raise ProfileSyntaxError(f"groups nested deeper than {MAX_GROUP_DEPTH}",
                                 source=source, line=line, column=where(tree))
    if tree.data == "all":
        out: list[tuple[WrittenCondition, ...]] = [()]
        for child in tree.children:
            assert isinstance(child, Tree)
            alts = _dnf(child, condition, depth, offset, line, source)
            if len(out) * len(alts) > MAX_DISJUNCTS:
                raise ProfileSyntaxError(
                    f"the 'or's expand to more than {MAX_DISJUNCTS} alternatives "
                    "(checks.MAX_DISJUNCTS)", source=source, line=line, column=where(child))
            out = [a + b for a in out for b in alts]
        return tuple(out)
    if tree.data == "any":
        found: list[tuple[WrittenCondition, ...]] = []
        for child in tree.children:
            if isinstance(child, Token):
                continue
            found.extend(_dnf(child, condition, depth + 1, offset, line, source))
            if len(found) > MAX_DISJUNCTS:
                raise ProfileSyntaxError(
                    f"the 'or's expand to more than {MAX_DISJUNCTS} alternatives "
                    "(checks.MAX_DISJUNCTS)", source=source, line=line, column=where(child))
        return tuple(found)
    return ((condition(tree),),)


def _condition(item: Tree, bittner: bool, offset: int, line: int, source: str | None,
               limits: ProfileLimits) -> WrittenCondition:
    from lark import Token, Tree

    name = item.children[0]
    assert isinstance(name, Token)

    def literal(tok: Token) -> object:
        return _literal(tok, offset, line, source, limits)

    values = [literal(v.children[0]) for v in item.children  # type: ignore[arg-type]
              if isinstance(v, Tree)]
    kind = item.data
    kinds = {t.type for t in item.children if isinstance(t, Token)}
    negated, nocase = "NOT" in kinds, "NOCASE" in kinds
    op: Op
    if kind == "strop":
        tok = next(t for t in item.children if isinstance(t, Token) and t.type == "STRING")
        values = [literal(tok)]
        op = Op(str(next(t for t in item.children
                         if isinstance(t, Token) and t.type == "STROP")))
    elif kind == "cmp":
        op = Op(str(item.children[1]))
        if bittner and len(values) == 1 and isinstance(values[0], Bare):
            # Bittner's virtual w_min / w_max lie just outside the domain (unless the
            # attribute declares such a label: resolve_predicate decides).
            word = values[0].word
            if (op is Op.GT and word == "MIN") or (op is Op.LT and word == "MAX"):
                values = [Bare(word, virtual=True)]
    elif kind == "range":
        op = Op.RANGE
    elif kind == "set":
        op = Op.IN
    elif kind == "prefix":
        op = Op.PREFIX
        tok = next(t for t in item.children if isinstance(t, Token) and t.type == "STRING")
        values = [literal(tok)]
    else:
        op = Op.EXISTS
    try:
        pred = Predicate(str(name), op, tuple(values), negated, nocase)  # type: ignore[arg-type]
    except ProfileError as exc:
        raise ProfileSyntaxError(exc.message, source=source, line=line,
                                 column=offset + (name.column or 1)) from None
    return WrittenCondition(pred, line, offset + (name.column or 1))


def _literal(tok: Token, offset: int, line: int, source: str | None,
             limits: ProfileLimits) -> object:
    """The value of a NUMBER, STRING or NAME token; over-long or bad literals are refused."""
    text = str(tok)
    column = offset + (tok.column or 1)
    if tok.type == "NUMBER":
        if len(text) > limits.max_number:
            raise ProfileSyntaxError(f"number longer than {limits.max_number} characters "
                                     "(ProfileLimits.max_number)", source=source, line=line,
                                     column=column)
        return Decimal(text) if "." in text else int(text)
    if tok.type == "STRING":
        if len(text) > limits.max_string:
            raise ProfileSyntaxError(f"string longer than {limits.max_string} characters "
                                     "(ProfileLimits.max_string)", source=source, line=line,
                                     column=column)
        try:  # the grammar's STRING is JSON's string syntax, checked here for escapes
            return parse_json_line(text, kind=ProfileSyntaxError, limits=TEXT_LIMITS)
        except InputError as exc:
            message = exc.message.removesuffix(" at").replace("invalid JSON: ", "invalid string: ")
            raise ProfileSyntaxError(message.replace("JSON ", ""), source=source, line=line,
                                     column=column + (exc.column or 1) - 1) from None
    return Bare(text)


def _syntax_error(exc: UnexpectedInput, body: str, source: str | None, line: int,
                  offset: int) -> ProfileSyntaxError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    col = offset + (exc.column if isinstance(exc.column, int) and exc.column > 0 else
                    len(body) + 1)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        msg = f"unexpected character {body[pos]!r}" + _hint(body[pos:pos + 2])
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
        pos = tok.start_pos if isinstance(tok.start_pos, int) else -1
        hint = _hint(str(tok), body[pos - 1:pos] if pos > 0 else "")
        expected = sorted(_pretty(t) for t in exc.expected)
        if hint:
            msg += hint
        elif expected:
            msg += f"; expected {', '.join(expected[:8])}"
    else:
        msg = "invalid profile"
    return ProfileSyntaxError(msg, source=source, line=line, column=col)


def _hint(at: str, before: str = "") -> str:
    """What a newcomer (or an ETCL/SQL writer) probably meant at an unexpected token."""
    word = at.strip().lower()
    if at.startswith("=") and (before == "=" or at == "=="):
        return "; write '=' for equality (one '=', not '==')"
    if word == "and" or at.startswith("&"):
        return "; separate conditions with ',' (a profile's conditions all hold)"
    if at.startswith("|"):
        return "; write 'or' between alternatives"
    if at.startswith("!") and not at.startswith("!="):
        return "; write '!=' for inequality"
    return ""


_TOKEN_NAMES = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "NAME": "a name", "NUMBER": "a number",
    "STRING": "a string", "CMP": "an operator", "IN": "'in'", "PREFIX": "'prefix'",
    "EXISTS": "'exists'", "COLON": "':'", "PATH": "an attribute",
    "STROP": "'suffix', 'contains', 'like', 'matches', 'cidr'", "NOT": "'not'", "OR": "'or'",
    "NOCASE": "'ignorecase'",
}


def _pretty(token_name: str) -> str:
    return _TOKEN_NAMES.get(token_name, token_name.strip("_").lower())


def resolve(parsed: ProfileText, schema: Schema | EventType, *, id: str | None = None,
            source: str | None = None) -> Profile:
    """Check a parsed line against the schema and normalise it into a :class:`Profile`."""
    pid = id if id is not None else parsed.id
    if pid is None:
        raise ProfileError("profile has no id (write 'ID: Type(...)')", source=source,
                           line=parsed.line, column=1)
    line = parsed.line
    etype = _lookup_type(parsed, schema, source, line)
    preds: dict[int, Predicate] = {}
    for wc in parsed.conditions:
        try:
            pred = resolve_predicate(wc.predicate, etype)
            if pred.attr not in etype:
                raise ProfileError(f"{etype.name} has no attribute {pred.attr!r}"
                                   f"{did_you_mean(pred.attr, etype.names)} "
                                   f"(it has {', '.join(etype.names)})")
            predicate_check(pred, etype.attribute(pred.attr))
        except SiftbusError as exc:
            raise exc.located(source=source, line=wc.line, column=wc.column) from None
        preds[id_of(wc)] = pred
    try:
        if parsed.alternatives is None:
            return Profile.build(pid, etype, list(preds.values()), parsed.subscriber)
        return Profile.build_any(pid, etype, [[preds[id_of(wc)] for wc in alt]
                                              for alt in parsed.alternatives],
                                 parsed.subscriber)
    except SiftbusError as exc:
        where = [wc for wc in parsed.conditions if wc.predicate.attr == exc.field]
        wc0 = where[-1] if where else None
        raise exc.located(source=source, line=wc0.line if wc0 else line,
                          column=wc0.column if wc0 else 1) from None


def id_of(wc: WrittenCondition) -> int:
    """Written conditions are told apart by identity (two may read the same)."""
    return id(wc)


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
    raise ProfileError(f"unknown event type {parsed.type_name!r}"
                       f"{did_you_mean(parsed.type_name, known)} (known: {', '.join(known)})",
                       source=source, line=line, column=parsed.type_column)


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """``"; did you mean 'room'?"`` for a close name (case ignored), else ``""``."""
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def finer_than_grid(parsed: ProfileText, etype: EventType) -> list[tuple[WrittenCondition, str]]:
    """The written conditions whose decimal constants have more places than their
    attribute's domain (``value < 16.123`` on ``decimal[-40,60,1]``), each with what it
    is read as (``value < 16.1``): profiles round such constants half away from zero, as
    events are rounded; ``siftbus check`` and ``explain`` warn about them."""
    out = []
    for wc in parsed.conditions:
        pred = wc.predicate
        if pred.attr not in etype:
            continue
        domain = etype.attribute(pred.attr).domain
        places = getattr(domain, "places", None)
        if places is None:
            continue
        finer = [v for v in pred.operands if isinstance(v, Decimal)
                 and isinstance(v.as_tuple().exponent, int)
                 and int(v.as_tuple().exponent) < -places]
        if finer:
            out.append((wc, format_condition(resolve_predicate(pred, etype), domain)))
    return out


def resolve_predicate(pred: Predicate, etype: EventType) -> Predicate:
    """Turn bare words (enum labels, MIN, MAX) of a written condition into operands.

    A label the attribute's enum declares wins over the bound of the same name:
    on ``enum[LOW,HIGH,MAX]``, ``level = MAX`` is the label ``MAX`` (the greatest label
    here too) and ``level < MAX`` in Bittner's form means "below the label".
    """
    if pred.attr not in etype:
        return pred
    domain = etype.attribute(pred.attr).domain
    op = pred.op
    out: list[Operand] = []
    for v in pred.operands:
        if not isinstance(v, Bare):
            out.append(v)
            continue
        operand = _bare(v.word, domain, pred.attr)
        if v.virtual and isinstance(operand, Extreme):
            op = Op.GE if op is Op.GT else Op.LE  # w_min < every value < w_max
        out.append(operand)
    return replace(pred, op=op, operands=tuple(out))


def _bare(word: str, domain: AnyDomain, attr: str) -> Operand:
    if isinstance(domain, EnumDomain) and word in domain.labels:
        return word
    if isinstance(domain, BoolDomain) and word in ("true", "false"):
        return word == "true"
    if word in ("MIN", "MAX"):
        if isinstance(domain, StringDomain):
            raise ProfileError(f"{attr}: {word} needs an ordered attribute")
        return Extreme(word)
    if isinstance(domain, StringDomain):
        raise ProfileError(f"{attr}: string values must be quoted: \"{word}\"")
    return word


def parse_profile(text: str, schema: Schema | EventType, *, id: str | None = None,
                  source: str | None = None, line: int = 1,
                  limits: ProfileLimits = PROFILE_LIMITS, scanner: bool = True) -> Profile:
    """Parse one profile line (either form) into a normalised :class:`Profile`.

    ``id`` overrides (or supplies) the line's id. Errors carry ``line`` and ``column``.
    ``scanner=False`` reads the line with the grammar alone and builds the profile from
    its conditions (the specification; the value is the same).
    """
    scanned = scan_profile(text, line=line, limits=limits) if scanner else None
    if scanned is None:
        parsed = parse_profile_text(text, source=source, line=line, limits=limits,
                                    scanner=False)
        return resolve(parsed, schema, id=id, source=source)
    fast = _from_parts(scanned, schema, id)
    return fast if fast is not None else resolve(scanned.text, schema, id=id, source=source)


_PARTS_KEPT = 1 << 16
_parts: dict[int, tuple[EventType, dict[str, Part]]] = {}
"""id(event type) -> (the type, condition text -> its part of a profile of the type)."""


def _from_parts(scanned: ScannedProfile, schema: Schema | EventType, id: str | None
                ) -> Profile | None:
    """What :func:`resolve` gives a scanned line without ``or``, each condition checked
    against the type once per text (``env = "prod"`` in 100,000 rules); ``None`` where
    :func:`resolve` must say more (``or``, an error)."""
    parsed = scanned.text
    pid = id if id is not None else parsed.id
    if pid is None or parsed.alternatives is not None:
        return None
    etype = schema if isinstance(schema, EventType) else schema.get(parsed.type_name)
    if etype is None or etype.name != parsed.type_name:
        return None
    kept = _parts.get(builtins.id(etype))
    if kept is None or kept[0] is not etype:
        if len(_parts) >= 64:
            _parts.clear()
        kept = _parts[builtins.id(etype)] = (etype, {})
    known = kept[1]
    parts = []
    try:
        for wc, key in zip(parsed.conditions, scanned.keys, strict=True):
            part = known.get(key)
            if part is None:
                pred = resolve_predicate(wc.predicate, etype)
                if pred.attr in etype:  # else resolve says so, with a suggestion
                    predicate_check(pred, etype.attribute(pred.attr))
                part = condition_part(pred, etype)
                if len(known) >= _PARTS_KEPT:
                    known.clear()
                known[key] = part
            parts.append(part)
        return Profile.from_parts(pid, etype, parts, parsed.subscriber)
    except SiftbusError:
        return None


def iter_profile_lines(text: str | Iterable[tuple[int, str]], schema: Schema, *,
                       source: str | None = None, limits: ProfileLimits = PROFILE_LIMITS,
                       ) -> Iterator[Profile | SiftbusError]:
    """Every profile of a profile file, or the error of each bad line (blank lines and
    ``#`` comments skipped; duplicate ids are errors).

    ``text`` is the file's text (split by :func:`~siftbus.model.textio.split_lines`) or
    numbered lines from :func:`~siftbus.model.textio.read_lines`.
    """
    return iter_unique_lines(
        text, lambda raw, n: parse_profile(raw, schema, source=source, line=n, limits=limits),
        what="profile", source=source)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=_Identified)


def iter_unique_lines(text: str | Iterable[tuple[int, str]],
                      parse: Callable[[str, int], Item], *, what: str,
                      source: str | None = None) -> Iterator[Item | SiftbusError]:
    """``parse(line, number)`` for every line of a line file (the text, split by the one
    rule of :func:`~siftbus.model.textio.split_lines`, or numbered lines), skipping blank
    lines and ``#`` comments; a bad line yields its error, and an id already used on an
    earlier line is an error too."""
    seen: dict[str, int] = {}
    numbered = split_lines(text) if isinstance(text, str) else text
    for n, raw in numbered:
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            item = parse(raw, n)
        except SiftbusError as exc:
            yield exc
            continue
        if item.id in seen:
            yield ProfileError(f"{what} id {item.id!r} is already used on line "
                               f"{seen[item.id]}", source=source, line=n, column=1)
            continue
        seen[item.id] = n
        yield item


def parse_profiles(text: str | Iterable[tuple[int, str]], schema: Schema, *,
                   source: str | None = None, limits: ProfileLimits = PROFILE_LIMITS,
                   ) -> list[Profile]:
    """Parse a whole profile file; the first bad line raises."""
    out = []
    for item in iter_profile_lines(text, schema, source=source, limits=limits):
        if isinstance(item, SiftbusError):
            raise item
        out.append(item)
    return out


def read_profile_lines(path: str | Path, *, on_error: Callable[[InputError], object] | None
                       = None, limits: ProfileLimits = PROFILE_LIMITS,
                       ) -> Iterator[tuple[int, str]]:
    """The numbered lines of a profile file, read by the one rule for text files
    (:func:`~siftbus.model.textio.read_lines`); a line longer than
    ``limits.max_line`` characters can be no profile and is not read whole."""
    # 4 bytes per character at most: longer lines are refused by the reader, shorter ones
    # by parse_profile_text with the exact column.
    text_limits = replace(TEXT_LIMITS, max_line_bytes=4 * limits.max_line)
    return read_lines(path, kind=ProfileError, limits=text_limits, on_error=on_error,
                      limit_name=f"ProfileLimits.max_line is {limits.max_line} characters")


def load_profiles(path: str | Path, schema: Schema, *,
                  limits: ProfileLimits = PROFILE_LIMITS) -> list[Profile]:
    """Read and parse a profile file; the first bad line raises."""
    return parse_profiles(read_profile_lines(path, limits=limits), schema, source=str(path),
                          limits=limits)
