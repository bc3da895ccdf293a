"""Content-based access control: rights written as profiles, checked by covering.

A principal's right to subscribe is a set of profiles R. A subscription q is accepted
when R covers it exactly, N(q) ⊆ ∪ N(r) over r in R (every event q can select lies inside
the right), decided by subtracting the right's boxes from q's box on the schema's finite
domains (:func:`covered_by_union`). Where a difference is not expressible as a profile
(a string prefix inside another prefix) or the pieces would exceed
:data:`MAX_PIECES`, the answer is "not covered": the check may refuse a subscription the
right covers only in those corner cases, and never accepts one it does not cover.

Configured to narrow instead of refuse, a subscription is replaced by its intersection
with the right, written as pairwise disjoint profiles under the subscription's id
(:meth:`RightSet.narrow`): the subscriber receives exactly the events that match both,
each once.

On extended schemas (issue 31) the check stays on the safe side: a right or subscription
with checks (``or``, string tests, ``not exists``: ``Profile.extra``) takes part in the
union only through :func:`~siftbus.covering.relations.covers`, which compares checks for
equality; a subscription's checks only narrow it, so its box of conditions is a superset;
a right that requires an optional attribute the subscription leaves open cannot be
subtracted (the events where it is absent would escape), so it does not count; a
condition on an array attribute means "some element", for which the subtraction below
stays exact. Narrowing is refused (``None``) when a right or the subscription has checks.

A right to publish is a set of profiles the published event must match (the reference
semantics, on every shape of event); a right to advertise works as the subscribe right
does. Rights to call services are names
``service.method`` with ``*`` as a wildcard for a whole part (``channel.*``, ``*``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from siftbus.covering.relations import covers, full_constraint, overlaps
from siftbus.errors import AccessDenied, ConfigError, SiftbusError
from siftbus.lang.profile import parse_profile, parse_profile_text
from siftbus.model import (
    Constraint,
    Event,
    EventType,
    IntervalSet,
    Profile,
    Schema,
    StringConstraint,
)

MAX_PIECES = 4096
"""Bound on the boxes a union-covering check may hold at once (then: not covered)."""

Box = dict[int, Constraint]


def _difference(a: Constraint, b: Constraint, etype: EventType, pos: int
                ) -> Constraint | None:
    """Keys of ``a`` not in ``b`` as one constraint, or ``None`` when not expressible."""
    if isinstance(a, IntervalSet):
        assert isinstance(b, IntervalSet)
        full = full_constraint(etype, pos)
        assert isinstance(full, IntervalSet)
        return a.intersect(b.complement(full.lo, full.hi))
    assert isinstance(b, StringConstraint)
    if a.allowed is not None:
        return StringConstraint.make(frozenset(s for s in a.allowed if s not in b))
    if b.allowed is not None:
        return StringConstraint.make(None, a.prefix, a.excluded | b.allowed)
    if a.prefix.startswith(b.prefix):  # a's strings all carry b's prefix
        return StringConstraint.make(frozenset(s for s in b.excluded if s in a))
    if not b.prefix.startswith(a.prefix):  # disjoint prefixes
        return a
    return None  # "a's prefix but not b's longer prefix" is no StringConstraint


def _box(p: Profile) -> Box:
    box: Box = {i: full_constraint(p.etype, i) for i in range(len(p.etype.attributes))}
    for c in p.conditions:
        box[c.position] = c.constraint
    return box


def _open_optional(p: Profile) -> frozenset[int]:
    """Optional attributes ``p`` leaves open: its events may lack them."""
    held = {c.position for c in p.conditions}
    return frozenset(a.position for a in p.etype.attributes
                     if a.optional and a.position not in held)


def _subtract(box: Box, r: Profile, open_optional: frozenset[int] = frozenset()
              ) -> list[Box] | None:
    """``box`` minus ``r`` as disjoint boxes, or ``None`` when not expressible (also when
    ``r`` has checks, or requires an attribute of ``open_optional``, which the box's
    events may lack)."""
    if r.extra is not None or any(c.position in open_optional for c in r.conditions):
        return None
    for c in r.conditions:
        if box[c.position].intersect(c.constraint).empty:  # type: ignore[arg-type]
            return [box]  # disjoint: nothing to take away
    pieces: list[Box] = []
    cur = dict(box)
    for c in r.conditions:
        diff = _difference(cur[c.position], c.constraint, r.etype, c.position)
        if diff is None:
            return None
        if not diff.empty:
            pieces.append({**cur, c.position: diff})
        cur[c.position] = cur[c.position].intersect(c.constraint)  # type: ignore[arg-type]
    return pieces  # what is left of ``cur`` lies inside r


def covered_by_union(q: Profile, rights: Sequence[Profile]) -> bool:
    """Whether every event matching ``q`` matches some profile of ``rights``."""
    mine = [r for r in rights if r.etype == q.etype]
    if any(covers(r, q) for r in mine):
        return True
    residual: list[Box] = [_box(q)]
    absent = _open_optional(q)
    for r in mine:
        if not overlaps(r, q):
            continue
        nxt: list[Box] = []
        for b in residual:
            cut = _subtract(b, r, absent)
            if cut is None:
                return False
            nxt.extend(cut)
            if len(nxt) > MAX_PIECES:
                return False
        residual = nxt
        if not residual:
            return True
    return not residual


def intersection(p: Profile, q: Profile, *, id: str | None = None) -> Profile | None:
    """The profile matching exactly the events both match, or ``None`` if none do."""
    if p.etype != q.etype or not overlaps(p, q):
        return None
    cons: dict[str, Constraint] = {c.attr: c.constraint for c in q.conditions}
    for c in p.conditions:
        prev = cons.get(c.attr)
        cons[c.attr] = c.constraint if prev is None else c.constraint.intersect(prev)  # type: ignore[arg-type]
    return Profile.from_constraints(id or q.id, q.etype, cons, q.subscriber)


@dataclass(frozen=True, slots=True)
class RightSet:
    """What one kind of action (publish, subscribe, advertise) is allowed on."""

    profiles: tuple[Profile, ...] = ()
    everything: bool = False
    """The whole schema: no content restriction."""
    _by_type: dict[str, tuple[Profile, ...]] = field(default_factory=dict, compare=False,
                                                     repr=False)

    def __post_init__(self) -> None:
        groups: dict[str, list[Profile]] = {}
        for p in self.profiles:
            groups.setdefault(p.type_name, []).append(p)
        self._by_type.update({k: tuple(v) for k, v in groups.items()})

    @classmethod
    def parse(cls, items: Iterable[str], schema: Schema, *, what: str = "right"
              ) -> RightSet:
        """Rights from profile texts: ``"*"`` (everything), ``"Type"`` (every event of a
        type) or ``"Type(cond, ...)"`` (the events the profile matches)."""
        profiles: list[Profile] = []
        for i, raw in enumerate(items):
            if not isinstance(raw, str):
                raise ConfigError(f"{what} {i + 1} must be a string, got {raw!r}")
            text = raw.strip()
            if text == "*":
                return cls(everything=True)
            rid = f"{what}-{i + 1}"
            etype = schema.get(text)
            try:
                if etype is not None:
                    profiles.append(Profile.build(rid, etype, []))
                    continue
                has_id = parse_profile_text(text, source=what).id is not None
                profiles.append(parse_profile(text, schema, id=None if has_id else rid,
                                              source=what))
            except SiftbusError as exc:
                raise ConfigError(f"{what} {text!r}: {exc.message}") from None
        return cls(tuple(profiles))

    def of_type(self, type_name: str) -> tuple[Profile, ...]:
        return self._by_type.get(type_name, ())

    def covers(self, q: Profile) -> bool:
        """Whether the right allows every event ``q`` can select."""
        return self.everything or covered_by_union(q, self.of_type(q.type_name))

    def narrow(self, q: Profile) -> tuple[Profile, ...] | None:
        """``q`` cut down to the right: pairwise disjoint profiles, each keeping q's id and
        subscriber, that together match exactly the events matching both ``q`` and the
        right (so an event is notified once, never twice); ``()`` when they share no
        event, ``None`` when the cut is not expressible as profiles (a string prefix
        inside another) or would exceed :data:`MAX_PIECES`."""
        if self.everything or self.covers(q):
            return (q,)
        rights = self.of_type(q.type_name)
        if q.extra is not None or any(r.extra is not None for r in rights):
            return None  # an intersection with checks is no conjunction of constraints
        pieces = [x for r in rights if (x := intersection(r, q)) is not None]
        kept: list[Profile] = []
        for i, x in enumerate(pieces):  # drop pieces covered by another one
            if not any(covers(y, x) and (not covers(x, y) or j < i)
                       for j, y in enumerate(pieces) if j != i):
                kept.append(x)
        return _disjoint(kept, q)

    def admits(self, event: Event) -> bool:
        """Whether an event lies inside the right."""
        return self.everything or any(r.matches(event) for r in self.of_type(event.type_name))

    def admitted_rows(self, etype: EventType, keys: np.ndarray) -> np.ndarray | None:
        """Which rows of a key matrix (``[n, attributes]``, schema order, as an event
        block holds them) lie inside the right: a boolean array, or ``None`` when all do
        (the common case costs no array)."""
        if self.everything:
            return None
        rights = self.of_type(etype.name)
        if any(not r.conditions and r.extra is None for r in rights):
            return None  # a right on the whole type
        if etype.extended or any(r.extra is not None for r in rights):
            # absent values, arrays and checks: each row by the reference semantics
            inside = np.fromiter((any(r.matches(Event(etype, tuple(row))) for r in rights)
                                  for row in keys.tolist()), bool, len(keys))
            return None if inside.all() else inside
        inside = np.zeros(len(keys), bool)
        for r in rights:
            mask = np.ones(len(keys), bool)
            for c in r.conditions:
                col = keys[:, c.position]
                cons = c.constraint
                if isinstance(cons, IntervalSet):
                    col = col.astype(np.int64, copy=False)
                    hit = np.zeros(len(keys), bool)
                    for lo, hi in cons.intervals:
                        hit |= (col >= lo) & (col <= hi)
                else:
                    hit = np.fromiter((k in cons for k in col.tolist()), bool, len(col))
                mask &= hit
            inside |= mask
            if inside.all():
                return None
        return inside


def _disjoint(pieces: Sequence[Profile], q: Profile) -> tuple[Profile, ...] | None:
    """The events of ``pieces`` as disjoint profiles under q's id and subscriber: each
    piece minus the pieces before it."""
    out: list[Profile] = []
    total = 0
    for i, x in enumerate(pieces):
        boxes: list[Box] = [_box(x)]
        absent = _open_optional(x)
        for y in pieces[:i]:
            if not overlaps(x, y):
                continue
            nxt: list[Box] = []
            for b in boxes:
                cut = _subtract(b, y, absent)
                if cut is None:
                    return None
                nxt.extend(cut)
            boxes = nxt
            total += len(boxes)
            if total > MAX_PIECES:
                return None
        etype = q.etype
        for b in boxes:  # an optional attribute x leaves open stays open (absent allowed)
            out.append(Profile.from_constraints(
                q.id, etype, {etype.attributes[pos].name: c for pos, c in b.items()
                              if pos not in absent}, q.subscriber))
    return tuple(out)


NOTHING = RightSet()
EVERYTHING = RightSet(everything=True)


@dataclass(frozen=True, slots=True)
class Rights:
    """Everything one principal may do; checks raise :class:`AccessDenied`."""

    principal: str
    publish: RightSet = NOTHING
    subscribe: RightSet = NOTHING
    advertise: RightSet = NOTHING
    services: tuple[str, ...] = ()
    """``service.method`` patterns the principal may call (``*`` matches a part)."""
    narrow: bool = False
    """Subscriptions outside the right are narrowed to it instead of refused."""
    scoped_out: frozenset[str] = frozenset()
    """Actions the connection's token leaves out (its scopes), whatever the rights."""

    def scoped(self, scopes: frozenset[str]) -> Rights:
        """These rights limited to a token's scopes (``publish``, ``subscribe``,
        ``advertise``, ``call``); no scopes: unchanged."""
        if not scopes:
            return self
        out = frozenset({"publish", "subscribe", "advertise", "call"}) - scopes
        return Rights(self.principal,
                      NOTHING if "publish" in out else self.publish,
                      NOTHING if "subscribe" in out else self.subscribe,
                      NOTHING if "advertise" in out else self.advertise,
                      () if "call" in out else self.services, self.narrow, out)

    def _deny(self, action: str, obj: str, why: str) -> AccessDenied:
        if action in self.scoped_out:
            why = f"the token's scopes do not include {action}"
        return AccessDenied(f"{self.principal} may not {action} {obj}: {why}",
                            principal=self.principal, action=action, object=obj)

    def check_subscribe(self, q: Profile) -> tuple[Profile, ...]:
        """The profiles to register for ``q``: ``(q,)`` when covered, the narrowed pieces
        when narrowing is on; :class:`AccessDenied` otherwise."""
        if self.subscribe.covers(q):
            return (q,)
        why = "the subscription reaches outside the subscribe right"
        if self.narrow:
            pieces = self.subscribe.narrow(q)
            if pieces:
                return pieces
            why = ("the subscription shares no event with the subscribe right" if
                   pieces is not None else "the subscription reaches outside the subscribe "
                   "right and its intersection with it is not expressible as profiles")
        raise self._deny("subscribe", f"{q.id} ({q.type_name})", why)

    def check_advertise(self, q: Profile) -> None:
        if not self.advertise.covers(q):
            raise self._deny("advertise", f"{q.id} ({q.type_name})",
                             "the advertisement reaches outside the advertise right")

    def check_publish(self, event: Event) -> None:
        if not self.publish.admits(event):
            raise self._deny("publish", f"a {event.type_name} event",
                             "the event lies outside the publish right")

    def check_publish_rows(self, etype: EventType, keys: np.ndarray) -> None:
        """:meth:`check_publish` for a whole event block (its key matrix): every row
        must lie inside the right, else the whole publication is refused."""
        inside = self.publish.admitted_rows(etype, keys)
        if inside is not None:
            bad = int(len(inside) - np.count_nonzero(inside))
            raise self._deny("publish", f"{bad} of {len(inside)} {etype.name} events",
                             "they lie outside the publish right (nothing was published)")

    def may_call(self, service: str, method: str) -> bool:
        name = f"{service}.{method}"
        return any(fnmatch.fnmatchcase(name, pat) for pat in self.services)

    def check_call(self, service: str, method: str) -> None:
        if not self.may_call(service, method):
            raise self._deny("call", f"{service}.{method}", "no right to this service")


def unrestricted(principal: str) -> Rights:
    """Rights of every principal where no security is configured."""
    return Rights(principal, EVERYTHING, EVERYTHING, EVERYTHING, ("*",))
