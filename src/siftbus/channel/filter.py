"""Filter objects (CosNotifyFilter): constraint sets in ETCL, and mapping filters.

A :class:`Filter` holds constraints, each an ETCL expression with an event-type list;
it matches an event iff some constraint whose event types cover the event's type
evaluates TRUE (an empty expression is TRUE, an empty type list covers every type).
A :class:`MappingFilter` associates a value with each constraint: ``match`` returns the
value of the first matching constraint (in constraint-id order), else the default value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from siftbus.channel.event import StructuredEvent
from siftbus.channel.state import ConstraintState, FilterState
from siftbus.errors import (
    CallbackNotFound,
    ConstraintNotFound,
    FilterNotFound,
    InvalidConstraint,
    InvalidGrammar,
    ObjectNotExist,
    SiftbusError,
    excerpt,
)
from siftbus.lang.etcl import (
    DEFAULT_LIMITS,
    Constraint,
    ConstraintLimits,
    event_type_of,
    parse_constraint,
    types_match,
)

GRAMMAR = "EXTENDED_TCL"

EventTypes = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ConstraintExp:
    """An ETCL expression and the event types it applies to."""

    event_types: EventTypes = ()
    constraint_expr: str = ""

    @classmethod
    def coerce(cls, value: Any) -> ConstraintExp:
        """From a ConstraintExp, a ``(types, expr)`` pair, a dict or a bare string."""
        if isinstance(value, ConstraintExp):
            return value
        if isinstance(value, str):
            return cls((), value)
        if isinstance(value, Mapping):
            types, expr = value.get("event_types", ()), value.get("constraint_expr", "")
        elif isinstance(value, Sequence) and len(value) == 2:
            types, expr = value
        else:
            raise InvalidConstraint(f"not a constraint expression: {_excerpt(value)}",
                                    constraint=value)
        if not isinstance(expr, str):
            raise InvalidConstraint(f"a constraint expression must be a string, not "
                                    f"{_excerpt(expr)}", constraint=value)
        return cls(_types(types), expr)

    def to_dict(self) -> dict[str, Any]:
        return {"event_types": [list(t) for t in self.event_types],
                "constraint_expr": self.constraint_expr}


def _excerpt(value: Any) -> str:
    """A value quoted in an error: its repr, cut to a readable excerpt."""
    return excerpt(repr(value))


def _types(value: Any) -> EventTypes:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable | None):
        raise InvalidConstraint(f"event types must be a list, not {_excerpt(value)}",
                                constraint=value)
    out = []
    for item in value or ():
        if isinstance(item, Mapping):
            d, t = item.get("domain_name", ""), item.get("type_name", "")
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            d, t = item
        else:
            raise InvalidConstraint(f"not an event type: {_excerpt(item)}", constraint=value)
        if not isinstance(d, str) or not isinstance(t, str):
            raise InvalidConstraint(f"event type names must be strings: {_excerpt(item)}",
                                    constraint=value)
        out.append((d, t))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ConstraintInfo:
    """A constraint as stored: its expression and its id (and, in mapping filters, its
    value)."""

    constraint_expression: ConstraintExp
    constraint_id: int
    value: Any = None


class NotifySubscribe(Protocol):
    """What a filter callback implements."""

    def subscription_change(self, added: Sequence[tuple[str, str]],
                            removed: Sequence[tuple[str, str]]) -> None: ...


ChangeListener = Callable[["Filter", list[tuple[int, Constraint, EventTypes]], list[int]], None]


class Filter:
    """A CosNotifyFilter::Filter for the EXTENDED_TCL grammar."""

    _mapping = False

    def __init__(self, factory: FilterFactory, filter_id: int, grammar: str = GRAMMAR) -> None:
        self.factory = factory
        self.id = filter_id
        self._grammar = grammar
        self._lock = threading.RLock()
        self._constraints: dict[int, tuple[ConstraintInfo, Constraint]] = {}
        self._next_id = 1
        self._callbacks: dict[int, NotifySubscribe] = {}
        self._next_cb = 1
        self._listeners: list[ChangeListener] = []
        self._destroyed = False

    # -- attributes ----------------------------------------------------------------------

    @property
    def constraint_grammar(self) -> str:
        return self._grammar

    @property
    def destroyed(self) -> bool:
        return self._destroyed

    def _alive(self) -> None:
        if self._destroyed:
            raise ObjectNotExist(f"filter {self.id} was destroyed")

    # -- constraints ---------------------------------------------------------------------

    def _parse(self, exp: ConstraintExp) -> Constraint:
        text = exp.constraint_expr
        try:
            return parse_constraint(text, limits=self.factory.limits)
        except SiftbusError as exc:
            raise InvalidConstraint(f"invalid constraint {_excerpt(text)}: {exc.message}",
                                    constraint=exp, line=exc.line, column=exc.column) from None

    def add_constraints(self, exps: Iterable[Any]) -> list[ConstraintInfo]:
        """Add constraints (all or none); returns them with their new ids."""
        self._alive()
        items = [(ConstraintExp.coerce(e), None) for e in exps]
        return self._add(items)

    def _add(self, items: list[tuple[ConstraintExp, Any]]) -> list[ConstraintInfo]:
        parsed = [(exp, value, self._parse(exp)) for exp, value in items]
        with self._lock:
            infos = []
            for exp, value, c in parsed:
                info = ConstraintInfo(exp, self._next_id, value)
                self._next_id += 1
                self._constraints[info.constraint_id] = (info, c)
                infos.append(info)
            self._changed([(i.constraint_id, self._constraints[i.constraint_id][1],
                            i.constraint_expression.event_types) for i in infos], [],
                          [t for i in infos for t in i.constraint_expression.event_types], [])
            return infos

    def modify_constraints(self, delete_ids: Iterable[int], modify: Iterable[Any]) -> None:
        """Delete and replace constraints by id, all or nothing."""
        self._alive()
        dels = list(delete_ids)
        mods = [m if isinstance(m, ConstraintInfo) else ConstraintInfo(
            ConstraintExp.coerce(m["constraint_expression"]), int(m["constraint_id"]),
            m.get("value")) for m in modify]
        with self._lock:
            for cid in [*dels, *(m.constraint_id for m in mods)]:
                if cid not in self._constraints:
                    raise ConstraintNotFound(f"filter {self.id} has no constraint {cid}",
                                             field=str(cid))
            parsed = [(m, self._parse(m.constraint_expression)) for m in mods]
            removed_types: list[tuple[str, str]] = []
            for cid in dels:
                info, _ = self._constraints.pop(cid)
                removed_types.extend(info.constraint_expression.event_types)
            added = []
            for m, c in parsed:
                old, _ = self._constraints[m.constraint_id]
                removed_types.extend(old.constraint_expression.event_types)
                value = m.value if self._mapping else None
                self._constraints[m.constraint_id] = (
                    ConstraintInfo(m.constraint_expression, m.constraint_id, value), c)
                added.append((m.constraint_id, c, m.constraint_expression.event_types))
            self._changed(added, dels + [m.constraint_id for m, _ in parsed],
                          [t for m, _ in parsed for t in m.constraint_expression.event_types],
                          removed_types)

    def get_constraints(self, ids: Iterable[int]) -> list[ConstraintInfo]:
        self._alive()
        out = []
        with self._lock:
            for cid in ids:
                if cid not in self._constraints:
                    raise ConstraintNotFound(f"filter {self.id} has no constraint {cid}",
                                             field=str(cid))
                out.append(self._constraints[cid][0])
        return out

    def get_all_constraints(self) -> list[ConstraintInfo]:
        self._alive()
        with self._lock:
            return [info for info, _ in self._constraints.values()]

    def remove_all_constraints(self) -> None:
        self._alive()
        with self._lock:
            ids = list(self._constraints)
            types = [t for info, _ in self._constraints.values()
                     for t in info.constraint_expression.event_types]
            self._constraints.clear()
            self._changed([], ids, [], types)

    def destroy(self) -> None:
        """Destroy the filter; it is removed from every object it was attached to."""
        if self._destroyed:
            return
        with self._lock:
            ids = list(self._constraints)
            self._constraints.clear()
            self._changed([], ids, [], [])
            self._destroyed = True
            self._listeners.clear()
        self.factory.filter_destroyed(self)

    def constraints(self) -> list[tuple[int, Constraint, EventTypes]]:
        """(id, parsed constraint, event types) of every constraint."""
        with self._lock:
            return [(cid, c, info.constraint_expression.event_types)
                    for cid, (info, c) in self._constraints.items()]

    # -- matching ------------------------------------------------------------------------

    def first_match(self, event: Any) -> ConstraintInfo | None:
        """The first constraint (by id) whose event types cover ``event`` and which it
        satisfies, or None."""
        domain, tname = event_type_of(event)
        with self._lock:
            items = list(self._constraints.values())
        for info, c in items:
            if types_match(info.constraint_expression.event_types, domain, tname) \
                    and c.evaluate(event):
                return info
        return None

    def match(self, event: Any) -> bool:
        """Whether an "any" event (or a structured one) satisfies some constraint."""
        self._alive()
        return self.first_match(event) is not None

    def match_structured(self, event: Any) -> bool:
        """Whether a structured event satisfies some constraint."""
        self._alive()
        return self.first_match(event) is not None

    def match_typed(self, props: Sequence[tuple[str, Any]]) -> bool:
        """Typed events: the properties act as filterable data of a ``%TYPED`` event."""
        return self.match_structured(StructuredEvent("", "%TYPED", "", (), tuple(props)))

    # -- callbacks and listeners ---------------------------------------------------------

    def attach_callback(self, callback: NotifySubscribe) -> int:
        self._alive()
        cid = self._next_cb
        self._next_cb += 1
        self._callbacks[cid] = callback
        return cid

    def detach_callback(self, callback_id: int) -> None:
        if self._callbacks.pop(callback_id, None) is None:
            raise CallbackNotFound(f"filter {self.id} has no callback {callback_id}")

    def get_callbacks(self) -> list[int]:
        return list(self._callbacks)

    def add_listener(self, fn: ChangeListener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: ChangeListener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _changed(self, added: list[tuple[int, Constraint, EventTypes]], removed: list[int],
                 added_types: list[tuple[str, str]],
                 removed_types: list[tuple[str, str]]) -> None:
        for fn in list(self._listeners):
            fn(self, added, removed)
        if added_types or removed_types:
            for cb in list(self._callbacks.values()):
                try:
                    cb.subscription_change(added_types, removed_types)
                except Exception:  # a failing callback must not break the filter
                    continue
        self.factory.filter_changed(self)

    # -- state ---------------------------------------------------------------------------

    def snapshot(self) -> FilterState:
        """The filter's state record (what the durable store keeps)."""
        with self._lock:
            return FilterState(self.id, self._grammar, tuple(
                ConstraintState(cid, info.constraint_expression.event_types,
                                info.constraint_expression.constraint_expr, info.value)
                for cid, (info, _) in self._constraints.items()))

    def _restore_constraints(self, state: FilterState) -> None:
        for c in state.constraints:
            exp = ConstraintExp(c.event_types, c.expression)
            self._constraints[c.id] = (ConstraintInfo(exp, c.id, c.value), self._parse(exp))
            self._next_id = max(self._next_id, c.id + 1)

    @classmethod
    def restore(cls, factory: FilterFactory, state: FilterState) -> Filter:
        """Rebuild a filter (or mapping filter) from its record, under its id."""
        f: Filter = (MappingFilter(factory, state.id, state.grammar, state.default_value)
                     if state.mapping else Filter(factory, state.id, state.grammar))
        f._restore_constraints(state)
        return f


class MappingFilter(Filter):
    """A CosNotifyFilter::MappingFilter: constraints with values (priority or lifetime)."""

    _mapping = True

    def __init__(self, factory: FilterFactory, filter_id: int, grammar: str,
                 default_value: Any) -> None:
        super().__init__(factory, filter_id, grammar)
        self.default_value = default_value

    @property
    def value_type(self) -> str:
        return type(self.default_value).__name__

    def add_mapping_constraints(self, pairs: Iterable[Any]) -> list[ConstraintInfo]:
        """Add ``(ConstraintExp, value)`` pairs (all or none)."""
        self._alive()
        items = []
        for p in pairs:
            if isinstance(p, ConstraintInfo):
                items.append((p.constraint_expression, p.value))
            elif isinstance(p, Mapping):
                items.append((ConstraintExp.coerce(p.get("constraint_expression", p)),
                              p.get("value")))
            else:
                exp, value = p
                items.append((ConstraintExp.coerce(exp), value))
        return self._add(items)

    def add_constraints(self, exps: Iterable[Any]) -> list[ConstraintInfo]:
        return self.add_mapping_constraints((e, self.default_value) for e in exps)

    def match(self, event: Any) -> tuple[bool, Any]:  # type: ignore[override]
        """The spec's ``match(any, out result_to_set)``: ``(matched, value)``."""
        return self.map(event)

    def match_structured(self, event: Any) -> tuple[bool, Any]:  # type: ignore[override]
        return self.map(event)

    def map(self, event: Any) -> tuple[bool, Any]:
        """``(True, value of the first matching constraint)`` or ``(False, default)``."""
        self._alive()
        info = self.first_match(event)
        if info is None:
            return False, self.default_value
        return True, info.value

    def snapshot(self) -> FilterState:
        s = super().snapshot()
        return FilterState(s.id, s.grammar, s.constraints, True, self.default_value)


class FilterFactory:
    """Creates filters (``EXTENDED_TCL`` only) and keeps them by id; a constraint beyond
    ``limits`` (length, nesting) is refused with InvalidConstraint."""

    def __init__(self, *, limits: ConstraintLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._filters: dict[int, Filter] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.on_change: Callable[[Filter], None] | None = None
        """Called after a filter was created or its constraints changed."""
        self.on_destroy: Callable[[Filter], None] | None = None
        """Called after a filter was destroyed."""

    def _new_id(self) -> int:
        fid = self._next
        self._next += 1
        return fid

    def create_filter(self, grammar: str = GRAMMAR) -> Filter:
        _check_grammar(grammar)
        with self._lock:
            f = Filter(self, self._new_id(), grammar)
            self._filters[f.id] = f
        self.filter_changed(f)
        return f

    def create_mapping_filter(self, grammar: str = GRAMMAR,
                              default_value: Any = None) -> MappingFilter:
        _check_grammar(grammar)
        with self._lock:
            f = MappingFilter(self, self._new_id(), grammar, default_value)
            self._filters[f.id] = f
        self.filter_changed(f)
        return f

    def get_filter(self, filter_id: int) -> Filter:
        try:
            return self._filters[filter_id]
        except KeyError:
            raise FilterNotFound(f"no filter {filter_id}") from None

    def find_filter(self, filter_id: int | None) -> Filter | None:
        """The filter with this id, or None (also for None)."""
        return None if filter_id is None else self._filters.get(filter_id)

    def filters(self) -> list[Filter]:
        return list(self._filters.values())

    def filter_changed(self, f: Filter) -> None:
        """A filter of this factory was created or changed (its own report)."""
        if self.on_change is not None:
            self.on_change(f)

    def filter_destroyed(self, f: Filter) -> None:
        """A filter of this factory was destroyed (its own report)."""
        with self._lock:
            self._filters.pop(f.id, None)
        if self.on_destroy is not None:
            self.on_destroy(f)

    def restore(self, state: FilterState) -> Filter:
        """Re-create a stored filter under its id (used when a durable store is opened)."""
        f = Filter.restore(self, state)
        with self._lock:
            self._filters[f.id] = f
            self._next = max(self._next, f.id + 1)
        return f


def _check_grammar(grammar: str) -> None:
    if grammar != GRAMMAR:
        raise InvalidGrammar(f"unsupported constraint grammar {grammar!r} (only {GRAMMAR})",
                             field="grammar")


__all__ = [
    "GRAMMAR",
    "ConstraintExp",
    "ConstraintInfo",
    "Filter",
    "FilterFactory",
    "MappingFilter",
    "NotifySubscribe",
]
