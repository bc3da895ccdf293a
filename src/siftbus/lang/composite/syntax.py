"""The composite profile as a value: components, operators, windows and policies.

A :class:`CompositeProfile` is what one line of the composite language means (see
docs/composite.md). Its pattern is a tree of :class:`Component` (a primitive profile under
a label), :class:`FollowedBy` (``->``, a sequence; its steps may be :class:`Negation`),
:class:`Conjunction` (``and``), :class:`Disjunction` (``or``) and :class:`Windowed`
(a parenthesised group with ``within``). Times are whole microseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from siftbus.model import Profile


class Select(StrEnum):
    """Which matches of one starting event are emitted."""

    FIRST = "first"
    """The first to complete, per starting event (Esper's ``every a -> b``)."""
    EACH = "each"
    """Every combination."""


class Consumption(StrEnum):
    """Whether an event may serve several emitted matches of one profile."""

    REUSE = "reuse"
    CONSUME = "consume"


@dataclass(frozen=True, slots=True)
class Component:
    """One primitive profile of the pattern, under its label.

    The profile's id is ``<composite id>/<label>`` and its subscriber the composite's, so
    the component can sit in a primitive matcher or routing table next to other profiles.
    """

    label: str
    profile: Profile


@dataclass(frozen=True, slots=True)
class Negation:
    """``not C``: a step of a sequence where no event matching ``component`` may occur."""

    component: Component


@dataclass(frozen=True, slots=True)
class FollowedBy:
    """``S1 -> S2 -> ...``: each positive step's events after those of the step before."""

    steps: tuple[Pattern | Negation, ...]


@dataclass(frozen=True, slots=True)
class Conjunction:
    """``P and Q and ...``: every operand, in any order."""

    operands: tuple[Pattern, ...]


@dataclass(frozen=True, slots=True)
class Disjunction:
    """``P or Q or ...``: exactly one operand."""

    operands: tuple[Pattern, ...]


@dataclass(frozen=True, slots=True)
class Windowed:
    """``( P within D )``: P's events lie within ``window`` microseconds of each other."""

    pattern: Pattern
    window: int


Pattern = Component | FollowedBy | Conjunction | Disjunction | Windowed
Node = Pattern | Negation


@dataclass(frozen=True, slots=True)
class CompositeProfile:
    """A composite subscription: a pattern of primitive profiles in time.

    ``window`` (microseconds) bounds the whole pattern; ``same`` names attributes every
    component's event must agree on; ``select`` and ``consumption`` are the policies.
    """

    id: str
    pattern: Pattern
    window: int
    same: tuple[str, ...] = ()
    select: Select = Select.FIRST
    consumption: Consumption = Consumption.REUSE
    subscriber: str = ""

    @property
    def owner(self) -> str:
        """The subscriber, or the profile id when none was given."""
        return self.subscriber or self.id

    def components(self) -> list[Component]:
        """Every component (negated ones too), in the order they are written."""
        return [c for c, _ in iter_components(self.pattern)]

    def positive(self) -> list[Component]:
        """The components that events are assigned to (not negated), in written order."""
        return [c for c, negated in iter_components(self.pattern) if not negated]

    def negated(self) -> list[Component]:
        """The negated components, in written order."""
        return [c for c, negated in iter_components(self.pattern) if negated]

    def with_id(self, id: str, subscriber: str | None = None) -> CompositeProfile:
        """The same profile under another id (and subscriber); components follow."""
        sub = self.subscriber if subscriber is None else subscriber
        return dataclasses.replace(self, id=id, subscriber=sub,
                                   pattern=_renamed(self.pattern, id, sub))

    def component(self, label: str) -> Component:
        """The component with this label; ``KeyError`` if there is none."""
        for c in self.components():
            if c.label == label:
                return c
        raise KeyError(label)


def _renamed(node: Pattern, id: str, subscriber: str) -> Pattern:
    def step(n: Pattern | Negation) -> Pattern | Negation:
        if isinstance(n, Negation):
            return Negation(_renamed(n.component, id, subscriber))  # type: ignore[arg-type]
        return _renamed(n, id, subscriber)

    if isinstance(node, Component):
        return Component(node.label, node.profile.with_id(component_id(id, node.label),
                                                          subscriber))
    if isinstance(node, FollowedBy):
        return FollowedBy(tuple(step(s) for s in node.steps))
    if isinstance(node, Conjunction):
        return Conjunction(tuple(_renamed(o, id, subscriber) for o in node.operands))
    if isinstance(node, Disjunction):
        return Disjunction(tuple(_renamed(o, id, subscriber) for o in node.operands))
    return Windowed(_renamed(node.pattern, id, subscriber), node.window)


def iter_components(node: Node) -> Iterator[tuple[Component, bool]]:
    """``(component, negated)`` for every component under ``node``, in written order."""
    if isinstance(node, Component):
        yield node, False
    elif isinstance(node, Negation):
        yield node.component, True
    elif isinstance(node, FollowedBy):
        for step in node.steps:
            yield from iter_components(step)
    elif isinstance(node, Conjunction | Disjunction):
        for op in node.operands:
            yield from iter_components(op)
    else:
        yield from iter_components(node.pattern)


def labels_of(node: Node) -> frozenset[str]:
    """Labels of the positive components under ``node``."""
    return frozenset(c.label for c, negated in iter_components(node) if not negated)


UNITS: dict[str, int] = {"ms": 1_000, "s": 1_000_000, "min": 60_000_000,
                         "h": 3_600_000_000, "d": 86_400_000_000}
"""Microseconds per duration unit of the language."""


def format_duration(us: int) -> str:
    """A window in the largest unit that writes it exactly (``90 s``, ``10 min``)."""
    for unit in ("d", "h", "min", "s", "ms"):
        if us % UNITS[unit] == 0 and (us or unit == "s"):
            return f"{us // UNITS[unit]} {unit}"
    return f"{format(Decimal(us).scaleb(-6).normalize(), 'f')} s"


def component_id(composite_id: str, label: str) -> str:
    """The id a component's primitive profile carries."""
    return f"{composite_id}/{label}"


__all__ = [
    "Component",
    "CompositeProfile",
    "Conjunction",
    "Consumption",
    "Disjunction",
    "FollowedBy",
    "Negation",
    "Node",
    "Pattern",
    "Select",
    "UNITS",
    "Windowed",
    "component_id",
    "format_duration",
    "iter_components",
    "labels_of",
]
