"""The filter index: which of many ETCL constraints an event satisfies, through a matcher.

Conjunctive constraints over header and filterable fields whose event-type patterns are
exact, ``*`` or ``prefix*`` compile to siftbus profiles over a derived event type
(:mod:`siftbus.lang.etcl.profiles`) and go through a :class:`~siftbus.match.Matcher`; the
rest are evaluated one by one. The index answers exactly what
``types_match(...) and constraint.evaluate(ev)`` answers for each constraint (proven
differentially in tests/lang/test_etcl_index.py). A channel keeps its consumer-side filters in
one index, so an event costs the matcher plus the filters it satisfies.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from siftbus.lang.etcl import (
    Constraint,
    DerivedType,
    compile_constraint,
    event_type_of,
    is_structured,
    types_match,
)
from siftbus.lang.etcl.profiles import Variant
from siftbus.match import Matcher
from siftbus.match.engines import DEFAULT_ENGINE, Engine, engine

MIN_INDEXED = 8
"""Below this many compiled constraints the evaluator is cheaper than the index."""

EventTypes = tuple[tuple[str, str], ...]


def _engine_of(name: str | None) -> Engine:
    return engine(name or DEFAULT_ENGINE)


class ConstraintIndex:
    """A set of keyed (constraint, event types) that answers which ones an event
    satisfies, exactly as ``types_match(...) and constraint.evaluate(ev)`` would.

    The derived event type grows when a new field appears; the matcher is then rebuilt
    lazily, at the next match. ``engine`` names an engine of the registry
    (:mod:`siftbus.match.engines`; default: the registry's default), looked up here, so an
    unknown name fails when the index is made (``ValueError`` naming the choices), not at
    its first match.
    """

    def __init__(self, engine: str | None = None, *, compile: bool = True,
                 min_indexed: int = MIN_INDEXED) -> None:
        self._engine: Engine = _engine_of(engine)
        self._compile = compile
        self._min_indexed = min_indexed
        self._all: dict[str, tuple[Constraint, EventTypes]] = {}
        self._compiled: dict[str, tuple[Variant, ...]] = {}
        self._fallback: dict[str, tuple[Constraint, EventTypes]] = {}
        self._derived = DerivedType()
        self._matcher: Matcher | None = None
        self._profile_owner: dict[str, str] = {}
        self._dirty = True

    # -- bookkeeping ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: object) -> bool:
        return key in self._all

    @property
    def engine(self) -> str:
        """The name of the matcher engine behind the index."""
        return self._engine.name

    @property
    def compiled_count(self) -> int:
        """How many constraints go through the matcher."""
        return len(self._compiled)

    @property
    def fallback_count(self) -> int:
        """How many constraints the evaluator checks one by one."""
        return len(self._fallback)

    def add(self, key: str, constraint: Constraint,
            event_types: Iterable[tuple[str, str]] = ()) -> bool:
        """Register a constraint under ``key``; returns whether it was compiled."""
        if key in self._all:
            raise ValueError(f"constraint key {key!r} is already registered")
        types = tuple((str(d), str(t)) for d, t in event_types)
        self._all[key] = (constraint, types)
        variants = compile_constraint(constraint, types) if self._compile else None
        if variants is None:
            self._fallback[key] = (constraint, types)
            return False
        self._compiled[key] = variants
        if self._derived.register(variants):
            self._dirty = True  # every profile is over the old type: rebuild at next match
        elif not self._dirty:
            self._add_profiles(key)
        return True

    def remove(self, key: str) -> None:
        """Unregister; raises ``KeyError`` if absent."""
        del self._all[key]
        if self._fallback.pop(key, None) is not None:
            return
        self._compiled.pop(key)
        if not self._dirty:
            assert self._matcher is not None
            for pid in [p for p, owner in self._profile_owner.items() if owner == key]:
                self._matcher.remove(pid)
                del self._profile_owner[pid]

    def _add_profiles(self, key: str) -> None:
        assert self._matcher is not None
        for p in self._derived.profiles(key, self._compiled[key]):
            self._matcher.add(p)
            self._profile_owner[p.id] = key

    def _rebuild(self) -> Matcher:
        self._matcher = self._engine.make()
        self._profile_owner = {}
        for key in self._compiled:
            self._add_profiles(key)
        self._dirty = False
        return self._matcher

    # -- matching ------------------------------------------------------------------------

    def derived_event(self, ev: Any) -> Any:
        """The event over the derived type, or ``None`` when a number it needs has no
        exact key (NaN, an int beyond 2**53): such events are evaluated, not indexed."""
        return self._derived.event(ev)

    def match(self, ev: Any) -> set[str]:
        """Keys of the constraints ``ev`` satisfies."""
        out: set[str] = set()
        if self._compiled:
            few = len(self._compiled) < self._min_indexed
            derived = self._derived.event(ev) if is_structured(ev) and not few else None
            if derived is None:
                domain, tname = event_type_of(ev)
                for key in self._compiled:
                    c, types = self._all[key]
                    if types_match(types, domain, tname) and c.evaluate(ev):
                        out.add(key)
            else:
                matcher = self._rebuild() if self._dirty or self._matcher is None \
                    else self._matcher
                owner = self._profile_owner
                for pid in matcher.match(derived):
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


__all__ = ["DEFAULT_ENGINE", "MIN_INDEXED", "ConstraintIndex"]
