"""The Extended Trader Constraint Language (ETCL): parser, evaluator and profile compiler.

ETCL is the default filter constraint language of the OMG Notification Service (1.1,
§2.4), the Trading Service's TCL extended with component paths into the event::

    $domain_name == 'Telecom' and $.filterable_data(severity) >= 3
    exist $Priority and $Priority > 2          -- run-time variable, see below
    'alarm' ~ $event_name                      -- substring: left inside right
    5 in $.filterable_data(codes)              -- membership in a sequence

Values ("any") are plain Python values: ``None``, ``bool``, ``int``, ``float``, ``str``,
``list``/``tuple`` (sequences), ``dict`` (anonymous structs, members in insertion
order), :class:`Struct` (a named struct, with ``_type_id``/``_repos_id``) and
:class:`Union` (discriminated union). A *structured event* is any object with the
attribute ``__etcl_structured__ = True`` and the fields ``domain_name``, ``type_name``,
``event_name``, ``variable_header``, ``filterable_data`` (tuples of ``(name, value)``)
and ``remainder_of_body`` (``siftbus.channel.StructuredEvent`` is one); ``$`` then is
the IDL ``StructuredEvent`` struct. Any other value is an "any" event and ``$`` is it.

Semantics (the TCL/ETCL rules, decisions documented in docs/channels.md):

* Numbers (int, float) compare and compute with each other; strings only with strings
  (code-point order); booleans only with booleans (FALSE < TRUE). Anything else, a
  missing component, division by zero or a non-boolean where a boolean is needed is an
  *evaluation error*, and **a constraint that errors on an event does not match it**.
* ``and``/``or`` evaluate left to right and stop early (``TRUE or <error>`` is TRUE).
* Integer ``/`` integer truncates toward zero (CORBA ``long`` arithmetic, as JacORB and
  TAO do); any float operand gives a float.
* ``exist C`` is TRUE iff the component resolves (it never errors); ``default C`` is TRUE
  iff the union ``C`` holds its default member.
* ``$domain_name``, ``$type_name``, ``$event_name`` are the fixed header fields;
  ``$curtime`` is the current time as a ``TimeBase::UtcT`` struct (``.time`` in 100 ns
  units since 1582-10-15); any other ``$name`` is looked up in the variable header, then
  in the filterable data (first property of that name wins). A bare identifier ``name``
  is the filterable-data property of that name (TCL's "property").
* The empty constraint is TRUE.

:class:`ConstraintIndex` compiles conjunctive constraints over header and filterable
fields into siftbus :class:`~siftbus.model.Profile`s and matches them through a
:class:`~siftbus.match.Matcher`; it answers exactly what the evaluator answers.
"""

from __future__ import annotations

import math
import re
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from siftbus.errors import ConstraintError, SiftbusError
from siftbus.model import Event, EventType, IntervalSet, Profile, StringConstraint
from siftbus.model.domain import IntDomain, StringDomain
from siftbus.model.schema import Attribute

# ---------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class Struct:
    """A named IDL struct: members in order, with its type and repository ids."""

    type_id: str
    repos_id: str
    names: tuple[str, ...]
    values: tuple[Any, ...]

    def member(self, name: str) -> Any:
        try:
            return self.values[self.names.index(name)]
        except ValueError:
            raise EvalError(f"struct {self.type_id} has no member {name!r}") from None


@dataclass(frozen=True, slots=True)
class Union:
    """A discriminated union value: ``_d`` is ``discriminator``; ``member`` names the
    active branch; ``is_default`` says the active branch is the ``default`` label."""

    discriminator: Any
    value: Any
    member: str | None = None
    is_default: bool = False
    type_id: str | None = None
    repos_id: str | None = None


_SCALARS = frozenset({int, float, str, bool, type(None), bytes})


def from_json_value(value: Any) -> Any:
    """Decode an "any" from its JSON/msgpack form (``{"@union": {...}}`` and
    ``{"@struct": {...}}`` are the tagged forms; everything else is itself)."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is list and all(type(v) in _SCALARS for v in value):
        return value  # the common payload: a flat array, shared rather than copied
    if isinstance(value, dict):
        if len(value) == 1 and "@union" in value and isinstance(value["@union"], dict):
            u = value["@union"]
            return Union(from_json_value(u.get("d")), from_json_value(u.get("value")),
                         u.get("member"), bool(u.get("default", False)), u.get("type_id"),
                         u.get("repos_id"))
        if len(value) == 1 and "@struct" in value and isinstance(value["@struct"], dict):
            s = value["@struct"]
            members = s.get("members") or {}
            if not isinstance(members, dict):
                raise ConstraintError("@struct members must be an object")
            return Struct(str(s.get("type_id", "")), str(s.get("repos_id", "")),
                          tuple(members), tuple(from_json_value(v) for v in members.values()))
        return {k: from_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [from_json_value(v) for v in value]
    return value


def to_json_value(value: Any) -> Any:
    """The JSON/msgpack form of an "any" (inverse of :func:`from_json_value`)."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is list and all(type(v) in _SCALARS for v in value):
        return value
    if isinstance(value, Union):
        u: dict[str, Any] = {"d": to_json_value(value.discriminator),
                             "value": to_json_value(value.value)}
        if value.member is not None:
            u["member"] = value.member
        if value.is_default:
            u["default"] = True
        if value.type_id is not None:
            u["type_id"] = value.type_id
        if value.repos_id is not None:
            u["repos_id"] = value.repos_id
        return {"@union": u}
    if isinstance(value, Struct):
        return {"@struct": {"type_id": value.type_id, "repos_id": value.repos_id,
                            "members": {n: to_json_value(v)
                                        for n, v in zip(value.names, value.values,
                                                        strict=True)}}}
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    return value


TIMET_UNIX_OFFSET = 122_192_928_000_000_000
"""100 ns intervals from the TimeBase epoch (1582-10-15) to the Unix epoch."""


def timet_now() -> int:
    """The current time as ``TimeBase::TimeT`` (100 ns units since 1582-10-15)."""
    return time.time_ns() // 100 + TIMET_UNIX_OFFSET


def utc_now() -> Struct:
    """``$curtime``: a ``TimeBase::UtcT`` struct."""
    return Struct("UtcT", "IDL:omg.org/TimeBase/UtcT:1.0", ("time", "inacclo", "inacchi", "tdf"),
                  (timet_now(), 0, 0, 0))


# ---------------------------------------------------------------------------------------
# Errors during evaluation (never escape: they make the constraint false)


class EvalError(Exception):
    """An ETCL evaluation error: the constraint does not match this event."""


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "num"
    if isinstance(v, str):
        return "str"
    return "other"


# ---------------------------------------------------------------------------------------
# Component paths


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


_STEP_RE = re.compile(
    r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|\.(?P<pos>\d+)"
    r"|\[[ \t]*(?P<index>\d+)[ \t]*\]"
    r"|\([ \t]*(?P<assoc>[A-Za-z_][A-Za-z0-9_]*)[ \t]*\)"
    r"|\.\([ \t]*(?P<union>[+-]?\d+|'(?:\\.|[^'\\])*'|[A-Za-z_][A-Za-z0-9_]*)?[ \t]*\)"
)
_SPECIAL = {"_length": "length", "_d": "d", "_type_id": "type_id", "_repos_id": "repos_id"}


def _parse_path(text: str) -> Path:
    m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?", text)
    assert m is not None
    var = m.group(1)
    steps: list[Step] = []
    pos = m.end()
    while pos < len(text):
        sm = _STEP_RE.match(text, pos)
        if sm is None:  # the token regex and this one agree; defensive
            raise ConstraintError(f"bad component {text!r}", column=pos + 1)
        pos = sm.end()
        if sm.group("name") is not None:
            name = sm.group("name")
            steps.append(Step(_SPECIAL[name]) if name in _SPECIAL else Step("name", name))
        elif sm.group("pos") is not None:
            steps.append(Step("pos", int(sm.group("pos"))))
        elif sm.group("index") is not None:
            steps.append(Step("index", int(sm.group("index"))))
        elif sm.group("assoc") is not None:
            steps.append(Step("assoc", sm.group("assoc")))
        else:
            raw = sm.group("union")
            if raw is None:
                steps.append(Step("union", None))
            elif raw[0] == "'":
                steps.append(Step("union", ("str", _unquote(raw))))
            elif raw in ("TRUE", "FALSE"):
                steps.append(Step("union", ("bool", raw == "TRUE")))
            elif raw[0].isdigit() or raw[0] in "+-":
                steps.append(Step("union", ("num", int(raw))))
            else:  # an enum label: compared with string discriminators
                steps.append(Step("union", ("str", raw)))
    for i, s in enumerate(steps):
        if s.kind in ("length", "d", "type_id", "repos_id") and i != len(steps) - 1:
            raise ConstraintError(f"{text}: ._{s.kind} must end the component")
    return Path(text, var, tuple(steps))


def _unquote(raw: str) -> str:
    body = raw[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


_EV_REPO = "IDL:omg.org/CosNotification/"


def _props_struct(props: Sequence[tuple[str, Any]]) -> list[Struct]:
    return [Struct("Property", _EV_REPO + "Property:1.0", ("name", "value"), (n, v))
            for n, v in props]


def structured_view(ev: Any) -> Struct:
    """The IDL ``StructuredEvent`` struct of a structured event (what ``$`` denotes)."""
    etype = Struct("EventType", _EV_REPO + "EventType:1.0", ("domain_name", "type_name"),
                   (ev.domain_name, ev.type_name))
    fixed = Struct("FixedEventHeader", _EV_REPO + "FixedEventHeader:1.0",
                   ("event_type", "event_name"), (etype, ev.event_name))
    header = Struct("EventHeader", _EV_REPO + "EventHeader:1.0",
                    ("fixed_header", "variable_header"),
                    (fixed, _props_struct(ev.variable_header)))
    return Struct("StructuredEvent", _EV_REPO + "StructuredEvent:1.0",
                  ("header", "filterable_data", "remainder_of_body"),
                  (header, _props_struct(ev.filterable_data), ev.remainder_of_body))


def is_structured(ev: Any) -> bool:
    return getattr(ev, "__etcl_structured__", False) is True


_MISSING = object()


def _prop(props: Sequence[tuple[str, Any]], name: str) -> Any:
    for n, v in props:
        if n == name:
            return v
    return _MISSING


def runtime_variable(ev: Any, name: str) -> Any:
    """``$name`` on an event; raises :class:`EvalError` if it does not resolve."""
    if name == "curtime":
        return utc_now()
    if not is_structured(ev):
        raise EvalError(f"${name}: run-time variables need a structured event")
    if name == "domain_name":
        return ev.domain_name
    if name == "type_name":
        return ev.type_name
    if name == "event_name":
        return ev.event_name
    v = _prop(ev.variable_header, name)
    if v is _MISSING:
        v = _prop(ev.filterable_data, name)
        if v is _MISSING:
            raise EvalError(f"${name} is in neither the variable header nor the filterable data")
    return v


def _step(value: Any, step: Step) -> Any:
    k = step.kind
    if k == "name":
        if isinstance(value, Struct):
            return value.member(step.arg)
        if isinstance(value, dict):
            if step.arg in value:
                return value[step.arg]
            raise EvalError(f"no member {step.arg!r}")
        if isinstance(value, Union):
            if value.member == step.arg:
                return value.value
            raise EvalError(f"union member {step.arg!r} is not active")
        raise EvalError(f".{step.arg} on a non-struct")
    if k == "pos":
        if isinstance(value, Struct):
            vals: Sequence[Any] = value.values
        elif isinstance(value, dict):
            vals = list(value.values())
        else:
            raise EvalError(f".{step.arg} on a non-struct")
        if step.arg < len(vals):
            return vals[step.arg]
        raise EvalError(f"struct has no member at position {step.arg}")
    if k == "index":
        if isinstance(value, list | tuple) and step.arg < len(value):
            return value[step.arg]
        raise EvalError(f"[{step.arg}] out of range or not a sequence")
    if k == "assoc":
        if isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Struct) and item.names == ("name", "value"):
                    if item.values[0] == step.arg:
                        return item.values[1]
                elif isinstance(item, dict) and item.get("name") == step.arg and "value" in item:
                    return item["value"]
        raise EvalError(f"({step.arg}) not found")
    if k == "union":
        if not isinstance(value, Union):
            raise EvalError("union access on a non-union")
        if step.arg is None:
            if value.is_default:
                return value.value
            raise EvalError("union is not on its default member")
        want_kind, want = step.arg
        if _kind(value.discriminator) == want_kind and value.discriminator == want:
            return value.value
        raise EvalError("union discriminator does not select this member")
    if k == "length":
        if isinstance(value, list | tuple):
            return len(value)
        raise EvalError("._length on a non-sequence")
    if k == "d":
        if isinstance(value, Union):
            return value.discriminator
        raise EvalError("._d on a non-union")
    if k in ("type_id", "repos_id"):
        tid = getattr(value, k, None)
        if isinstance(tid, str):
            return tid
        raise EvalError(f"._{k} unknown for this value")
    raise AssertionError(k)


def resolve(path: Path, ev: Any) -> Any:
    """The value a component path denotes in ``ev``; raises :class:`EvalError`."""
    steps = path.steps
    if path.var is not None:
        value = runtime_variable(ev, path.var)
    elif is_structured(ev):
        # Fast paths for the common structured-event fields, without building the view.
        if len(steps) == 2 and steps[0] == _FD and steps[1].kind == "assoc":
            v = _prop(ev.filterable_data, steps[1].arg)
            if v is _MISSING:
                raise EvalError(f"filterable_data({steps[1].arg}) not found")
            return v
        value = structured_view(ev)
    else:
        value = ev
    for s in steps:
        value = _step(value, s)
    return value


_FD = Step("name", "filterable_data")


# ---------------------------------------------------------------------------------------
# AST


@dataclass(frozen=True, slots=True)
class Lit:
    value: Any


@dataclass(frozen=True, slots=True)
class Comp:
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
    op: str  # "and" | "or"
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Arith:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Twiddle:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    left: Node
    right: Comp | Ident


@dataclass(frozen=True, slots=True)
class Exist:
    operand: Comp | Ident


@dataclass(frozen=True, slots=True)
class Default:
    operand: Comp


Node = Lit | Comp | Ident | Not | BoolOp | Compare | Arith | Twiddle | In | Exist | Default


# ---------------------------------------------------------------------------------------
# Parsing


@cache
def _parser() -> Lark:
    grammar = files("siftbus.lang").joinpath("etcl.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


KEYWORDS = frozenset({"and", "or", "not", "in", "exist", "default", "TRUE", "FALSE"})


def _number(tok: str, negative: bool) -> int | float:
    v: int | float = float(tok) if any(c in tok for c in ".eE") else int(tok)
    if isinstance(v, float) and not math.isfinite(v):
        raise ConstraintError(f"number {tok} is out of range")
    return -v if negative else v


def _build(t: Tree | Token) -> Node:
    if isinstance(t, Token):  # pragma: no cover - every token sits under a rule
        raise ConstraintError(f"unexpected {t!r}")
    d = t.data
    ch = t.children
    if d == "or_" or d == "and_":
        return BoolOp("or" if d == "or_" else "and", _build(ch[0]), _build(ch[2]))
    if d == "compare":
        return Compare(str(ch[1]), _build(ch[0]), _build(ch[2]))
    if d == "in_":
        ref = _build(ch[2])
        assert isinstance(ref, Comp | Ident)
        return In(_build(ch[0]), ref)
    if d == "twiddle":
        return Twiddle(_build(ch[0]), _build(ch[2]))
    if d == "arith":
        return Arith(str(ch[1]), _build(ch[0]), _build(ch[2]))
    if d == "not_":
        return Not(_build(ch[1]))
    if d == "paren":
        return _build(ch[1])
    if d == "exist":
        ref = _build(ch[1])
        assert isinstance(ref, Comp | Ident)
        return Exist(ref)
    if d == "default":
        return Default(Comp(_parse_path(str(ch[1]))))
    if d == "number":
        if len(ch) == 2:
            return Lit(_number(str(ch[1]), str(ch[0]) == "-"))
        return Lit(_number(str(ch[0]), False))
    if d == "string":
        return Lit(_unquote(str(ch[0])))
    if d == "true":
        return Lit(True)
    if d == "false":
        return Lit(False)
    if d == "operand_ref":
        tok = ch[0]
        assert isinstance(tok, Token)
        if tok.type == "COMPONENT":
            return Comp(_parse_path(str(tok)))
        if str(tok) in KEYWORDS:
            raise ConstraintError(f"unexpected keyword {str(tok)!r} in ETCL constraint",
                                  line=tok.line, column=tok.column)
        return Ident(str(tok))
    raise AssertionError(d)


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
        """``"true"``, ``"false"`` or ``"error: why"`` (what ``evaluate`` decided)."""
        if self.root is None:
            return "true"
        try:
            v = self._fn(event, {})
        except EvalError as exc:
            return f"error: {exc}"
        except (RecursionError, OverflowError, MemoryError, ValueError, TypeError) as exc:
            return f"error: {exc}"
        if isinstance(v, bool):
            return "true" if v else "false"
        return f"error: the constraint yields {type(v).__name__}, not a boolean"


def parse_constraint(text: str, *, source: str | None = None) -> Constraint:
    """Parse ETCL text; raises :class:`ConstraintError` with line/column on bad input."""
    if not isinstance(text, str):
        raise ConstraintError("an ETCL constraint must be a string", source=source)
    if source is None:
        return _parse_cached(text)
    return _parse(text, source)


@lru_cache(maxsize=16384)
def _parse_cached(text: str) -> Constraint:
    # Constraints are immutable values: equal texts (many consumers, restarts) share one.
    return _parse(text, None)


def _parse(text: str, source: str | None) -> Constraint:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise ConstraintError(_syntax_message(exc, text), source=source, line=exc.line,
                              column=exc.column) from None
    except SiftbusError as exc:
        raise exc.located(source=source) from None
    try:
        root = _build(tree.children[0]) if tree.children else None
    except ConstraintError as exc:
        raise exc.located(source=source, line=1) from None
    fn = _compile_node(root) if root is not None else _const_true
    return Constraint(text, root, fn)


def _const_true(ev: Any, cache: dict[str, Any]) -> Any:
    return True


def _syntax_message(exc: UnexpectedInput, text: str) -> str:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        return f"unexpected character {text[pos:pos + 1]!r} in ETCL constraint"
    if isinstance(exc, UnexpectedEOF):
        return "ETCL constraint ends too early"
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            return "ETCL constraint ends too early"
        return f"unexpected {exc.token.value!r} in ETCL constraint"
    return "invalid ETCL constraint"  # pragma: no cover


# ---------------------------------------------------------------------------------------
# Evaluation: each node becomes a closure (ev, cache) -> value, raising EvalError.

Fn = Callable[[Any, dict[str, Any]], Any]


def _compile_ref(node: Comp | Ident) -> Fn:
    if isinstance(node, Ident):
        name = node.name

        def ident(ev: Any, cache: dict[str, Any]) -> Any:
            if not is_structured(ev):
                raise EvalError(f"{name}: identifiers need a structured event")
            v = _prop(ev.filterable_data, name)
            if v is _MISSING:
                raise EvalError(f"no filterable property {name!r}")
            return v

        return ident
    path = node.path
    key = path.text
    if path.var is not None and not path.steps and path.var != "curtime":
        var = path.var

        def var_fn(ev: Any, cache: dict[str, Any]) -> Any:
            return runtime_variable(ev, var)

        return var_fn

    def comp(ev: Any, cache: dict[str, Any]) -> Any:
        # One extraction per path text per evaluation (the JacORB EvaluationContext).
        hit = cache.get(key, _MISSING)
        if hit is _MISSING:
            try:
                hit = resolve(path, ev)
            except EvalError as exc:
                hit = exc
            cache[key] = hit
        if isinstance(hit, EvalError):
            raise hit
        return hit

    return comp


def _need_bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise EvalError(f"{type(v).__name__} where a boolean is needed")
    return v


def _compare(op: str, a: Any, b: Any) -> bool:
    ka, kb = _kind(a), _kind(b)
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


def _arith(op: str, a: Any, b: Any) -> Any:
    if _kind(a) != "num" or _kind(b) != "num":
        raise EvalError(f"arithmetic on {type(a).__name__} and {type(b).__name__}")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise EvalError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _compile_node(node: Node) -> Fn:
    if isinstance(node, Lit):
        value = node.value
        return lambda ev, cache: value
    if isinstance(node, Comp | Ident):
        return _compile_ref(node)
    if isinstance(node, Not):
        f = _compile_node(node.operand)
        return lambda ev, cache: not _need_bool(f(ev, cache))
    if isinstance(node, BoolOp):
        lf, rf = _compile_node(node.left), _compile_node(node.right)
        if node.op == "and":
            return lambda ev, cache: _need_bool(lf(ev, cache)) and _need_bool(rf(ev, cache))
        return lambda ev, cache: _need_bool(lf(ev, cache)) or _need_bool(rf(ev, cache))
    if isinstance(node, Compare):
        lf, rf = _compile_node(node.left), _compile_node(node.right)
        op = node.op
        return lambda ev, cache: _compare(op, lf(ev, cache), rf(ev, cache))
    if isinstance(node, Arith):
        lf, rf = _compile_node(node.left), _compile_node(node.right)
        aop = node.op
        return lambda ev, cache: _arith(aop, lf(ev, cache), rf(ev, cache))
    if isinstance(node, Twiddle):
        lf, rf = _compile_node(node.left), _compile_node(node.right)

        def twiddle(ev: Any, cache: dict[str, Any]) -> bool:
            a, b = lf(ev, cache), rf(ev, cache)
            if not isinstance(a, str) or not isinstance(b, str):
                raise EvalError("~ needs two strings")
            return a in b

        return twiddle
    if isinstance(node, In):
        lf, rf = _compile_node(node.left), _compile_ref(node.right)

        def in_(ev: Any, cache: dict[str, Any]) -> bool:
            a, seq = lf(ev, cache), rf(ev, cache)
            if not isinstance(seq, list | tuple):
                raise EvalError("in needs a sequence on its right")
            ka = _kind(a)
            if ka == "other":
                raise EvalError(f"in: {type(a).__name__} is not a simple value")
            for item in seq:
                if _kind(item) != ka:
                    raise EvalError("in: the sequence holds values of another type")
            return any(a == item for item in seq)

        return in_
    if isinstance(node, Exist):
        rf = _compile_ref(node.operand)

        def exist(ev: Any, cache: dict[str, Any]) -> bool:
            try:
                rf(ev, cache)
            except EvalError:
                return False
            return True

        return exist
    assert isinstance(node, Default)
    rf = _compile_ref(node.operand)

    def default(ev: Any, cache: dict[str, Any]) -> bool:
        v = rf(ev, cache)
        if not isinstance(v, Union):
            raise EvalError("default needs a union")
        return v.is_default

    return default


# ---------------------------------------------------------------------------------------
# Event types (the constraint's EventTypeSeq) with '*' wildcards


WILDCARDS = frozenset({"", "*", "%ALL"})


@cache
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")), re.DOTALL)


def name_matches(pattern: str, name: str) -> bool:
    """A domain or type name pattern: ``*`` stands for any run of characters (only ``*``
    is special); ``""``, ``"*"`` and ``"%ALL"`` match every name."""
    if pattern in WILDCARDS:
        return True
    if "*" not in pattern:
        return pattern == name
    return _glob(pattern).fullmatch(name) is not None


def types_match(event_types: Sequence[tuple[str, str]], domain: str, type_name: str) -> bool:
    """Whether an event of (domain, type) is covered by an EventTypeSeq; empty covers all."""
    if not event_types:
        return True
    return any(name_matches(d, domain) and name_matches(t, type_name) for d, t in event_types)


def event_type_of(ev: Any) -> tuple[str, str]:
    """(domain_name, type_name); an "any" event is ``("", "%ANY")`` (spec translation)."""
    if is_structured(ev):
        return ev.domain_name, ev.type_name
    return "", "%ANY"


# ---------------------------------------------------------------------------------------
# Compilation of conjunctive constraints to profiles


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A filterable field: ``fixed`` (domain_name, type_name, event_name), ``var``
    (``$name``: variable header then filterable data), ``fd`` (``$.filterable_data(n)``
    or a bare identifier) or ``vh`` (``$.header.variable_header(n)``)."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Atom:
    """One compiled conjunct: ``field op value``; op is a comparison, ``exist``,
    ``absent`` (``not exist``) or ``true`` (a bare boolean component)."""

    field: FieldRef
    op: str
    value: Any = None


_FIXED_PATHS = {
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_type"),
     Step("name", "domain_name")): "domain_name",
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_type"),
     Step("name", "type_name")): "type_name",
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_name")):
        "event_name",
}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_EXACT_INT = 2**53


def _field_of(node: Node) -> FieldRef | None:
    if isinstance(node, Ident):
        return FieldRef("fd", node.name)
    if not isinstance(node, Comp):
        return None
    p = node.path
    if p.var is not None:
        if p.steps or p.var == "curtime":
            return None
        if p.var in ("domain_name", "type_name", "event_name"):
            return FieldRef("fixed", p.var)
        return FieldRef("var", p.var)
    if p.steps in _FIXED_PATHS:
        return FieldRef("fixed", _FIXED_PATHS[p.steps])
    if len(p.steps) == 2 and p.steps[0] == _FD and p.steps[1].kind == "assoc":
        return FieldRef("fd", p.steps[1].arg)
    if (len(p.steps) == 3 and p.steps[0] == Step("name", "header")
            and p.steps[1] == Step("name", "variable_header") and p.steps[2].kind == "assoc"):
        return FieldRef("vh", p.steps[2].arg)
    return None


def _literal_ok(v: Any) -> bool:
    if isinstance(v, bool | str):
        return True
    if isinstance(v, int):
        return -_EXACT_INT <= v <= _EXACT_INT
    return isinstance(v, float) and math.isfinite(v)


def _atom(node: Node, negated: bool = False) -> Atom | None:
    if isinstance(node, Not):
        return None if negated else _atom(node.operand, True)
    if isinstance(node, Exist):
        f = _field_of(node.operand)
        if f is None:
            return None
        return Atom(f, "absent" if negated else "exist")
    if isinstance(node, Compare):
        op = node.op
        f, lit = _field_of(node.left), node.right
        if f is None:
            f, lit, op = _field_of(node.right), node.left, _FLIP[op]
        if f is None or not isinstance(lit, Lit) or not _literal_ok(lit.value):
            return None
        if isinstance(lit.value, str) and op not in ("==", "!="):
            return None  # string order is not in the index (string domains are unordered)
        if negated:
            op = _NEGATE[op]
        return Atom(f, op, lit.value)
    if not negated:
        f = _field_of(node)
        if f is not None:
            return Atom(f, "true")
    return None


def conjuncts(constraint: Constraint) -> tuple[Atom, ...] | None:
    """The atoms of a conjunctive constraint over filterable fields, or ``None`` when the
    constraint is not of that form (it then runs through the evaluator)."""
    if constraint.root is None:
        return ()
    out: list[Atom] = []
    stack = [constraint.root]
    while stack:
        node = stack.pop()
        if isinstance(node, BoolOp) and node.op == "and":
            stack.append(node.right)
            stack.append(node.left)
            continue
        a = _atom(node)
        if a is None:
            return None
        out.append(a)
    return tuple(out)


# Numbers become order-preserving integer keys: the IEEE-754 double bits, sign-folded so
# that key order is number order (-0.0 and 0.0 share key 0). Ints up to 2**53 and every
# finite float map exactly; anything else (NaN, huge ints) takes the evaluator path.
_MASK = (1 << 63) - 1
NUM_MAX = 0x7FF0000000000000  # key of +inf
NUM_MIN = -NUM_MAX
NUM_ABSENT = NUM_MIN - 1  # "not a number here" (missing, or another kind)
_KIND = {"absent": 0, "num": 1, "str": 2, "bool": 3, "other": 4}


def num_key(v: float) -> int:
    """The order-preserving integer key of a non-NaN double."""
    b = struct.unpack("<q", struct.pack("<d", v))[0]
    return b if b >= 0 else -(b & _MASK)


class _Unrepresentable(Exception):
    pass


_UNREPRESENTABLE: Any = object()  # a number with no exact key (NaN, a huge int)


def _kinds_of(v: Any) -> tuple[int, Any, str, int]:
    """(kind, number key, string key, bool key) of a field value; the number key is
    ``_UNREPRESENTABLE`` for NaN and ints beyond 2**53."""
    if v is _MISSING:
        return 0, NUM_ABSENT, "", 0
    if isinstance(v, bool):
        return 3, NUM_ABSENT, "", 2 if v else 1
    if isinstance(v, int):
        if -_EXACT_INT <= v <= _EXACT_INT:
            return 1, num_key(float(v)), "", 0
        return 1, _UNREPRESENTABLE, "", 0
    if isinstance(v, float):
        if math.isnan(v):
            return 1, _UNREPRESENTABLE, "", 0
        return 1, num_key(v), "", 0
    if isinstance(v, str):
        return 2, NUM_ABSENT, "=" + v, 0
    return 4, NUM_ABSENT, "", 0


def _field_value(ev: Any, f: FieldRef) -> Any:
    if f.kind == "var":
        v = _prop(ev.variable_header, f.name)
        return _prop(ev.filterable_data, f.name) if v is _MISSING else v
    if f.kind == "fd":
        return _prop(ev.filterable_data, f.name)
    if f.kind == "vh":
        return _prop(ev.variable_header, f.name)
    return getattr(ev, f.name)


def _num_interval(op: str, k: int) -> IntervalSet:
    if op == "==":
        return IntervalSet.range(k, k)
    if op == "!=":
        return IntervalSet.of([(NUM_MIN, k - 1), (k + 1, NUM_MAX)])
    if op == "<":
        return IntervalSet.range(NUM_MIN, k - 1)
    if op == "<=":
        return IntervalSet.range(NUM_MIN, k)
    if op == ">":
        return IntervalSet.range(k + 1, NUM_MAX)
    return IntervalSet.range(k, NUM_MAX)


_FIXED_ATTRS = ("domain_name", "type_name", "event_name")
_ASPECT_DOMAINS: dict[str, IntDomain | StringDomain] = {
    "k": IntDomain(0, 4), "n": IntDomain(NUM_ABSENT, NUM_MAX),
    "s": StringDomain(), "b": IntDomain(0, 2)}


def _atom_constraints(a: Atom, put: Callable[[tuple[Any, str], Any], None]) -> None:
    """One atom as a constraint on one abstract attribute: ("fixed", name) or
    (field, aspect) with aspect k (kind), n (number key), s (string key), b (boolean)."""
    f = a.field
    if f.kind == "fixed":
        if a.op == "exist":
            put(("fixed", f.name), StringConstraint())
        elif a.op == "==" and isinstance(a.value, str):
            put(("fixed", f.name), StringConstraint.make(frozenset({a.value})))
        elif a.op == "!=" and isinstance(a.value, str):
            put(("fixed", f.name), StringConstraint.make(None, "", frozenset({a.value})))
        else:
            # absent / wrong kind / bare string as a boolean: the evaluator never says
            # TRUE (headers are always strings).
            put(("fixed", f.name), StringConstraint(frozenset()))
        return
    if a.op == "exist":
        put((f, "k"), IntervalSet.range(1, 4))
    elif a.op == "absent":
        put((f, "k"), IntervalSet.range(0, 0))
    elif a.op == "true":
        put((f, "b"), IntervalSet.range(2, 2))
    elif isinstance(a.value, bool):
        k = 2 if a.value else 1
        put((f, "b"), _num_interval(a.op, k).intersect(IntervalSet.range(1, 2)))
    elif isinstance(a.value, str):
        if a.op == "==":
            put((f, "s"), StringConstraint.make(frozenset({"=" + a.value})))
        elif a.op == "!=":
            put((f, "s"), StringConstraint.make(None, "=", frozenset({"=" + a.value})))
        else:  # _atom never yields string ordering
            raise AssertionError(a)
    else:
        put((f, "n"), _num_interval(a.op, num_key(float(a.value))))


def _name_constraint(pattern: str) -> StringConstraint | None:
    """An event-type pattern as a string constraint; ``None`` if it needs a glob."""
    if pattern in WILDCARDS:
        return StringConstraint()
    if "*" not in pattern:
        return StringConstraint.make(frozenset({pattern}))
    if pattern.endswith("*") and "*" not in pattern[:-1]:
        return StringConstraint.make(None, pattern[:-1])
    return None


MIN_INDEXED = 8
"""Below this many compiled constraints the evaluator is cheaper than the index."""


class ConstraintIndex:
    """A set of keyed (constraint, event types) that answers which ones an event
    satisfies, exactly as ``types_match(...) and constraint.evaluate(ev)`` would.

    Conjunctive constraints over header/filterable fields whose type patterns are exact,
    ``*`` or ``prefix*`` compile to profiles over a derived :class:`EventType` (the three
    fixed header strings plus, per field, a kind, a number key, a string key and a
    boolean key) and go through a matcher; the rest are evaluated one by one. The
    derived type grows when a new field appears; the matcher is then rebuilt lazily.
    """

    def __init__(self, engine: str | None = None, *, compile: bool = True,
                 min_indexed: int = MIN_INDEXED) -> None:
        self._engine = engine
        self._compile = compile
        self._min_indexed = min_indexed
        self._all: dict[str, tuple[Constraint, tuple[tuple[str, str], ...]]] = {}
        self._compiled: dict[str, list[tuple[tuple[str, str], tuple[Atom, ...]]]] = {}
        self._fallback: dict[str, tuple[Constraint, tuple[tuple[str, str], ...]]] = {}
        self._fields: dict[FieldRef, int] = {}
        # the derived type holds only the attributes some compiled constraint uses:
        # abstract key ("fixed", name) or (field, aspect) -> attribute name
        self._attr_names: dict[tuple[Any, str], str] = {}
        self._layout: list[tuple[Any, str]] = []
        self._etype: EventType = self._make_etype()
        self._matcher: Any = None
        self._profile_owner: dict[str, str] = {}
        self._dirty = True
        self._never: set[str] = set()

    # -- bookkeeping ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: object) -> bool:
        return key in self._all

    @property
    def compiled_count(self) -> int:
        """How many constraints go through the matcher."""
        return len(self._compiled)

    @property
    def fallback_count(self) -> int:
        """How many constraints the evaluator checks one by one."""
        return len(self._fallback)

    def _make_etype(self) -> EventType:
        attrs: list[Attribute] = []
        layout: list[tuple[Any, str]] = []
        for name in _FIXED_ATTRS:
            if ("fixed", name) in self._attr_names:
                attrs.append(Attribute(name, StringDomain(), len(attrs)))
                layout.append(("fixed", name))
        for f, i in sorted(self._fields.items(), key=lambda kv: kv[1]):
            for aspect in "knsb":
                if (f, aspect) in self._attr_names:
                    attrs.append(Attribute(f"f{i}{aspect}", _ASPECT_DOMAINS[aspect], len(attrs)))
                    layout.append((f, aspect))
        self._layout = layout
        return EventType("ETCLEvent", tuple(attrs))

    def _new_matcher(self) -> Any:
        from siftbus.match.engines import ENGINES, make_matcher

        name = self._engine or ("index" if "index" in ENGINES else "reference")
        return make_matcher(name)

    def add(self, key: str, constraint: Constraint,
            event_types: Iterable[tuple[str, str]] = ()) -> bool:
        """Register a constraint under ``key``; returns whether it was compiled."""
        if key in self._all:
            raise ValueError(f"constraint key {key!r} is already registered")
        types = tuple((str(d), str(t)) for d, t in event_types)
        self._all[key] = (constraint, types)
        atoms = conjuncts(constraint) if self._compile else None
        variants: list[tuple[str, str]] = []
        if atoms is not None:
            pairs = types or (("*", "*"),)
            for d, t in pairs:
                if _name_constraint(d) is None or _name_constraint(t) is None:
                    atoms = None
                    break
                variants.append((d, t))
        if atoms is None:
            self._fallback[key] = (constraint, types)
            return False
        self._compiled[key] = [(v, atoms) for v in variants]
        new_attr = False
        for (d, t) in variants:
            for ak in self._constraints_of(d, t, atoms):
                if ak in self._attr_names:
                    continue
                f = ak[0]
                if f != "fixed" and f not in self._fields:
                    self._fields[f] = len(self._fields)
                self._attr_names[ak] = ak[1] if f == "fixed" else \
                    f"f{self._fields[f]}{ak[1]}"
                new_attr = True
        if new_attr:
            self._etype = self._make_etype()
            self._dirty = True
        elif not self._dirty:
            self._add_profiles(key)
        return True

    def remove(self, key: str) -> None:
        """Unregister; raises ``KeyError`` if absent."""
        del self._all[key]
        if self._fallback.pop(key, None) is not None:
            return
        self._compiled.pop(key)
        self._never.discard(key)
        if not self._dirty:
            for pid in [p for p, owner in self._profile_owner.items() if owner == key]:
                self._matcher.remove(pid)
                del self._profile_owner[pid]

    def _constraints_of(self, d: str, t: str, atoms: tuple[Atom, ...]
                        ) -> dict[tuple[Any, str], Any]:
        """The constraints of one event-type variant, by abstract attribute key
        (unconstrained string attributes left out)."""
        cons: dict[tuple[Any, str], Any] = {}

        def put(ak: tuple[Any, str], c: Any) -> None:
            prev = cons.get(ak)
            cons[ak] = c if prev is None else prev.intersect(c)

        dc, tc = _name_constraint(d), _name_constraint(t)
        assert dc is not None and tc is not None
        put(("fixed", "domain_name"), dc)
        put(("fixed", "type_name"), tc)
        for a in atoms:
            _atom_constraints(a, put)
        return {k: c for k, c in cons.items()
                if not (isinstance(c, StringConstraint) and c.unconstrained)}

    def _profiles_for(self, key: str) -> list[Profile]:
        out: list[Profile] = []
        for n, ((d, t), atoms) in enumerate(self._compiled[key]):
            cons = self._constraints_of(d, t, atoms)
            if any(c.empty for c in cons.values()):
                continue
            named = {self._attr_names[ak]: c for ak, c in cons.items()}
            out.append(Profile.from_constraints(f"{key}.{n}", self._etype, named))
        return out

    def _add_profiles(self, key: str) -> None:
        profiles = self._profiles_for(key)
        if not profiles:
            self._never.add(key)
        for p in profiles:
            self._matcher.add(p)
            self._profile_owner[p.id] = key

    def _rebuild(self) -> None:
        self._matcher = self._new_matcher()
        self._profile_owner = {}
        self._never = set()
        for key in self._compiled:
            self._add_profiles(key)
        self._dirty = False

    # -- matching ------------------------------------------------------------------------

    def derived_event(self, ev: Any) -> Event | None:
        """The event over the derived type, or ``None`` when a number it needs has no
        exact key (NaN, an int beyond 2**53): such events are evaluated, not indexed."""
        keys: list[Any] = []
        last: Any = None
        kinds: tuple[int, Any, str, int] = (0, 0, "", 0)
        try:
            for f, aspect in self._layout:
                if f == "fixed":
                    keys.append(getattr(ev, aspect))
                    continue
                if f is not last:
                    last = f
                    kinds = _kinds_of(_field_value(ev, f))
                if aspect == "k":
                    keys.append(kinds[0])
                elif aspect == "n":
                    if kinds[1] is _UNREPRESENTABLE:
                        raise _Unrepresentable
                    keys.append(kinds[1])
                elif aspect == "s":
                    keys.append(kinds[2])
                else:
                    keys.append(kinds[3])
        except _Unrepresentable:
            return None
        return Event(self._etype, tuple(keys))

    def match(self, ev: Any) -> set[str]:
        """Keys of the constraints ``ev`` satisfies."""
        out: set[str] = set()
        if self._compiled:
            few = len(self._compiled) < self._min_indexed
            derived = self.derived_event(ev) if is_structured(ev) and not few else None
            if derived is None:
                domain, tname = event_type_of(ev)
                for key in self._compiled:
                    c, types = self._all[key]
                    if types_match(types, domain, tname) and c.evaluate(ev):
                        out.add(key)
            else:
                if self._dirty:
                    self._rebuild()
                owner = self._profile_owner
                for pid in self._matcher.match(derived):
                    out.add(owner[pid])
        if self._fallback:
            domain, tname = event_type_of(ev)
            for key, (c, types) in self._fallback.items():
                if types_match(types, domain, tname) and c.evaluate(ev):
                    out.add(key)
        return out

    def match_slow(self, ev: Any) -> set[str]:
        """The same answer as :meth:`match`, by evaluating every constraint (the oracle)."""
        domain, tname = event_type_of(ev)
        return {k for k, (c, types) in self._all.items()
                if types_match(types, domain, tname) and c.evaluate(ev)}


__all__ = [
    "Atom",
    "Constraint",
    "ConstraintIndex",
    "EvalError",
    "FieldRef",
    "Path",
    "Step",
    "Struct",
    "Union",
    "conjuncts",
    "event_type_of",
    "from_json_value",
    "is_structured",
    "name_matches",
    "parse_constraint",
    "resolve",
    "structured_view",
    "timet_now",
    "to_json_value",
    "types_match",
]
