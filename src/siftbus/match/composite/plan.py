"""A composite profile compiled into the tables its automaton runs on.

Every ``or`` is multiplied out into *branches* (the pattern's alternatives). Within a
branch the pattern becomes constraints over its components (numbered in written order,
sets of them as bit masks):

* ``precede[x]``: the components that must all be bound before ``x`` (from ``->``);
* ``groups``: (members, window) for the line and every ``( ... within D )``;
* ``negs``: per negated step, the components of the step before (``before``) and after
  (``after``, 0 for a trailing negation, whose window is the group ``group``).

Two branches never have the same components (each label occurs once in a pattern and
every operand of ``or`` has a component), so a complete binding belongs to one branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from siftbus.lang.composite import (
    Component,
    CompositeProfile,
    Conjunction,
    Disjunction,
    FollowedBy,
    Negation,
    Node,
    Windowed,
    iter_components,
)


@dataclass(frozen=True, slots=True)
class Group:
    """Components whose events lie within ``window`` microseconds of each other."""

    members: int
    window: int


@dataclass(frozen=True, slots=True)
class NegStep:
    """A negated step: no event of component ``label`` between ``before`` and ``after``."""

    label: int
    before: int
    after: int
    group: int
    """For a trailing negation (``after == 0``): the index of its window's group."""


@dataclass(frozen=True, slots=True)
class Branch:
    """One alternative of the pattern, as constraints over its components."""

    atoms: int
    precede: tuple[int, ...]
    groups: tuple[Group, ...]
    groups_of: tuple[tuple[int, ...], ...]
    """Per component: indices of the groups it belongs to."""
    negs: tuple[NegStep, ...]
    negs_of: tuple[tuple[NegStep, ...], ...]
    """Per component: the negated steps of that component."""
    trailing: tuple[NegStep, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """The compiled tables of one composite profile."""

    profile: CompositeProfile
    components: tuple[Component, ...]
    negated: int
    """Mask of the negated components."""
    branches: tuple[Branch, ...]
    same: dict[str, tuple[int, ...]] = field(hash=False)
    """Per event type of a component: positions of the ``same`` attributes."""

    @property
    def positive(self) -> int:
        return ((1 << len(self.components)) - 1) & ~self.negated


@dataclass(slots=True)
class _Alt:
    atoms: int = 0
    prec: list[tuple[int, int]] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    negs: list[tuple[int, int, int, int | None]] = field(default_factory=list)


def _join(a: _Alt, b: _Alt) -> _Alt:
    """Both alternatives at once (group references of ``b`` shifted past ``a``'s)."""
    shift = len(a.groups)
    negs = a.negs + [(n, lo, hi, None if g is None else g + shift) for n, lo, hi, g in b.negs]
    return _Alt(a.atoms | b.atoms, a.prec + b.prec, a.groups + b.groups, negs)


def _alts(node: Node, index: dict[str, int]) -> list[_Alt]:
    if isinstance(node, Component):
        return [_Alt(1 << index[node.label])]
    if isinstance(node, Negation):  # pragma: no cover - handled by the sequence
        raise AssertionError("a negation is a step of a sequence")
    if isinstance(node, Disjunction):
        return [a for o in node.operands for a in _alts(o, index)]
    if isinstance(node, Windowed):
        out = []
        for a in _alts(node.pattern, index):
            g = len(a.groups)
            negs: list[tuple[int, int, int, int | None]] = [
                (n, lo, hi, g if grp is None else grp) for n, lo, hi, grp in a.negs]
            out.append(_Alt(a.atoms, a.prec, [*a.groups, Group(a.atoms, node.window)], negs))
        return out
    if isinstance(node, Conjunction):
        acc = [_Alt()]
        for o in node.operands:
            acc = [_join(x, y) for x in acc for y in _alts(o, index)]
        return acc
    assert isinstance(node, FollowedBy)
    # Multiply out the positive steps; each combination fixes every step's components.
    combos: list[tuple[_Alt, list[int]]] = [(_Alt(), [])]
    for step in node.steps:
        if isinstance(step, Negation):
            combos = [(a, [*masks, -1]) for a, masks in combos]
            continue
        combos = [(_join(a, b), [*masks, b.atoms]) for a, masks in combos
                  for b in _alts(step, index)]
    out = []
    for alt, masks in combos:
        positive = [(i, m) for i, m in enumerate(masks) if m >= 0]
        for x, (_, mi) in enumerate(positive):
            for _, mj in positive[x + 1:]:
                alt.prec.append((mi, mj))
        for k, step in enumerate(node.steps):
            if isinstance(step, Negation):
                before = [m for i, m in positive if i < k][-1]
                after = next((m for i, m in positive if i > k), 0)
                alt.negs.append((index[step.component.label], before, after, None))
        out.append(alt)
    return out


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def compile_plan(profile: CompositeProfile) -> Plan:
    """The automaton's tables for ``profile``."""
    comps = tuple(c for c, _ in iter_components(profile.pattern))
    negated = 0
    for i, (_, neg) in enumerate(iter_components(profile.pattern)):
        if neg:
            negated |= 1 << i
    index = {c.label: i for i, c in enumerate(comps)}
    n = len(comps)
    branches = []
    for a in _alts(Windowed(profile.pattern, profile.window), index):
        precede = [0] * n
        for lo, hi in a.prec:
            for y in _bits(hi):
                precede[y] |= lo
        groups_of = tuple(tuple(g for g, grp in enumerate(a.groups) if grp.members >> x & 1)
                          for x in range(n))
        negs = []
        for label, lo, hi, grp in a.negs:
            assert grp is not None  # the line's group closes every trailing negation
            negs.append(NegStep(label, lo, hi, grp))
        negs_of = tuple(tuple(s for s in negs if s.label == x) for x in range(n))
        branches.append(Branch(a.atoms, tuple(precede), tuple(a.groups), groups_of,
                               tuple(negs), negs_of, tuple(s for s in negs if not s.after)))
    same: dict[str, tuple[int, ...]] = {}
    for c in comps:
        etype = c.profile.etype
        same[etype.name] = tuple(etype.attribute(a).position for a in profile.same)
    return Plan(profile, comps, negated, tuple(branches), same)


__all__ = ["Branch", "Group", "NegStep", "Plan", "compile_plan"]
