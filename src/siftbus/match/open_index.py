"""The open index: profiles of any shape matched through their distinct conditions.

Profiles beyond the compiled engines (``Profile.extended``: open kinds, optional, nested
and array attributes, string tests, ``not``, ``or``) used to be checked one by one per
event. Here, as in event-ruler, quamina and hypermatch, a profile is cut into the
*alternatives* of its disjunctive normal form, each a conjunction of conditions; every
distinct condition is numbered once per event type and filed in its attribute's
:class:`~siftbus.match.open_fields.FieldTable`. Matching one event is then:

1. per attribute that some condition names, the table lookups of its value: the set of
   satisfied conditions (work proportional to the distinct conditions hit, not to the
   profiles that share them);
2. each alternative is reached through one *access* condition, the most selective of its
   own (by kind, then by how many alternatives use it): only alternatives whose access
   condition holds are candidates;
3. a candidate matches when its other conditions are in the satisfied set (one subset
   test) and its *lazy* conditions (``contains``, ``like``, ``matches``) hold, evaluated
   once per event and condition, for candidates only.

So 100,000 rules of the form ``env = "prod", number = "4711", ...`` cost one hash lookup
per attribute and a subset test for the ten rules that share the number. The choice rule
of the access condition and its limits are in docs/matching.md ("The open index").
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from siftbus.match.open_fields import LAZY, FieldTable, Placement, place
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Event, Profile
from siftbus.model.checks import Check, constraint_check
from siftbus.model.domain import StringDomain
from siftbus.model.profile import Condition
from siftbus.model.schema import EventType

REBALANCE_AT = 64
"""An access list this long is looked at again when it doubles: alternatives filed there
before a more selective condition of theirs was known move to it."""


@dataclass(slots=True)
class Alternative:
    """One conjunction of a profile, as condition numbers."""

    profile: str
    need: tuple[int, ...]
    """Every condition answered by the field tables (the access one included): a tuple,
    not a set (a set of six takes 700 bytes), tested by ``sat.issuperset(need)``."""
    lazy: tuple[int, ...]
    """Conditions evaluated only for candidates (``contains``, ``like``, ``matches``)."""
    access: int = -1
    number: int = -1
    """Its key in its access group (numbered per event type)."""


@dataclass(slots=True)
class _Condition:
    check: Check
    where: Placement
    key: Hashable
    uses: int = 0


class TypeIndex:
    """The open index of one event type."""

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}
        self.conds: dict[int, _Condition] = {}
        self.fields: dict[int, FieldTable] = {}
        self.access: dict[int, dict[int, Alternative]] = {}
        self.lazy_access: dict[int, dict[int, Alternative]] = {}
        self.always: dict[int, Alternative] = {}
        self._next = 0
        self._next_alt = 0
        self._fields_tuple: tuple[tuple[int, FieldTable], ...] | None = None
        self._grown: dict[int, int] = {}
        self.n_alts = 0

    def _cid(self, item: Check | Condition, bounds: list[tuple[int, int]]) -> int:
        key = _key(item)
        cid = self.ids.get(key)
        if cid is None:
            check = item if isinstance(item, Check) else constraint_check(
                item.attr, item.position, item.constraint)
            cid = self.ids[key] = self._next
            self._next += 1
            where = place(check, *bounds[check.position])
            self.conds[cid] = _Condition(check, where, key)
            if where.kind != LAZY:
                ft = self.fields.get(check.position)
                if ft is None:
                    ft = self.fields[check.position] = FieldTable(check.position)
                    self._fields_tuple = None
                ft.insert(cid, check, where)
        self.conds[cid].uses += 1
        return cid

    def _release(self, cid: int) -> None:
        c = self.conds[cid]
        c.uses -= 1
        if c.uses:
            return
        del self.conds[cid]
        del self.ids[c.key]
        if c.where.kind == LAZY:
            return
        ft = self.fields[c.check.position]
        ft.delete(cid, c.where)
        if not len(ft):
            del self.fields[c.check.position]
            self._fields_tuple = None

    def _rank(self, cid: int) -> tuple[int, int]:
        c = self.conds[cid]
        return (c.where.kind, c.uses)

    def add(self, profile: str, items: Sequence[Check | Condition],
            bounds: list[tuple[int, int]]) -> Alternative:
        conds = self.conds
        ids = self.ids
        eager: list[int] = []
        lazy: list[int] = []
        for item in items:
            # the common case inline: a condition some profile already uses
            cid = (ids.get((item.position, item.constraint), -1)
                   if type(item) is Condition else -1)
            if cid >= 0:
                c = conds[cid]
                c.uses += 1
            else:
                cid = self._cid(item, bounds)
                c = conds[cid]
            if cid in eager or cid in lazy:  # written twice: one use
                c.uses -= 1
            elif c.where.kind == LAZY:
                lazy.append(cid)
            else:
                eager.append(cid)
        alt_id = self._next_alt
        self._next_alt += 1
        alt = Alternative(profile, tuple(eager), tuple(lazy), -1, alt_id)
        self._file(alt_id, alt)
        self.n_alts += 1
        return alt

    def _file(self, alt_id: int, alt: Alternative) -> None:
        if alt.need:
            alt.access = min(alt.need, key=self._rank)
            group = self.access.setdefault(alt.access, {})
            group[alt_id] = alt
            n = len(group)
            if n >= REBALANCE_AT and n >= 2 * self._grown.get(alt.access, 0):
                self._grown[alt.access] = n
                self._rebalance(alt.access)
        elif alt.lazy:
            alt.access = alt.lazy[0]
            self.lazy_access.setdefault(alt.access, {})[alt_id] = alt
        else:
            self.always[alt_id] = alt

    def _rebalance(self, cid: int) -> None:
        group = self.access[cid]
        for alt_id, alt in list(group.items()):
            best = min(alt.need, key=self._rank)
            if best != cid and self._rank(best) < self._rank(cid):
                del group[alt_id]
                alt.access = best
                self.access.setdefault(best, {})[alt_id] = alt

    def remove(self, alt: Alternative) -> None:
        alt_id = alt.number
        self.n_alts -= 1
        if alt.need:
            group = self.access[alt.access]
        elif alt.lazy:
            group = self.lazy_access[alt.access]
        else:
            group = self.always
        del group[alt_id]
        if not group and group is not self.always:
            (self.access if alt.need else self.lazy_access).pop(alt.access)
            self._grown.pop(alt.access, None)
        for cid in alt.need:
            self._release(cid)
        for cid in alt.lazy:
            self._release(cid)

    def match(self, keys: tuple[Any, ...]) -> set[str]:
        fields = self._fields_tuple
        if fields is None:
            fields = self._fields_tuple = tuple(sorted(self.fields.items()))
        sat: set[int] = set()
        for pos, ft in fields:
            ft.collect(keys[pos], sat)
        found: set[str] = set()
        access = self.access
        memo: dict[int, bool] = {}
        for cid in sat:
            group = access.get(cid)
            if group is None:
                continue
            for alt in group.values():
                if alt.profile in found or not sat.issuperset(alt.need):
                    continue
                if not alt.lazy or self._lazy_hold(alt.lazy, keys, memo):
                    found.add(alt.profile)
        for cid, group in self.lazy_access.items():
            if self._lazy_hold((cid,), keys, memo):
                for alt in group.values():
                    if alt.profile not in found and self._lazy_hold(alt.lazy, keys, memo):
                        found.add(alt.profile)
        for alt in self.always.values():
            found.add(alt.profile)
        return found

    def _lazy_hold(self, lazy: tuple[int, ...], keys: tuple[Any, ...],
                   memo: dict[int, bool]) -> bool:
        for cid in lazy:
            got = memo.get(cid)
            if got is None:
                check = self.conds[cid].check
                got = memo[cid] = check.holds(keys[check.position])
            if not got:
                return False
        return True


def alternatives(profile: Profile) -> list[tuple[Check | Condition, ...]]:
    """The conjunctions of a profile (its disjunctive normal form): its conditions and
    one conjunction of its checks each."""
    base: tuple[Check | Condition, ...] = profile.conditions
    if profile.extra is None:
        return [base]
    return [base + conj for conj in profile.extra]


def _key(item: Check | Condition) -> Hashable:
    """What numbers a condition: a constraint by attribute and constraint however it was
    written (a profile's condition, or a check inside ``or`` or on an array), the other
    checks by themselves."""
    if isinstance(item, Condition):
        return (item.position, item.constraint)
    if item.op == "in" and not item.negated:
        return (item.position, item.operand)
    return item


_BOUNDS: dict[int, tuple[EventType, list[tuple[int, int]]]] = {}


def _bounds(etype: EventType) -> list[tuple[int, int]]:
    """The key range of each attribute (strings: unused), kept per event type."""
    got = _BOUNDS.get(id(etype))
    if got is None or got[0] is not etype:
        if len(_BOUNDS) > 4096:
            _BOUNDS.clear()
        out = [(0, 0) if isinstance(a.domain, StringDomain)
               else (a.domain.min_key, a.domain.max_key) for a in etype.attributes]
        got = _BOUNDS[id(etype)] = (etype, out)
    return got[1]


class OpenIndexMatcher(ReferenceMatcher):
    """A matcher of any profile through the open index (see the module text); its
    snapshots are the reference's (the columnar path is the compiled engines')."""

    def __init__(self) -> None:
        super().__init__()
        self._types: dict[str, TypeIndex] = {}
        # a profile's one alternative as itself, not in a list: an add leaves one object
        # for the cyclic collector to track (100,000 adds then start no full collection)
        self._alts: dict[str, Alternative | tuple[Alternative, ...]] = {}
        self._etypes: dict[str, EventType] = {}

    def etype_of(self, name: str) -> EventType | None:
        """The event type of the profiles of type ``name`` held here."""
        return self._etypes.get(name)

    def add(self, profile: Profile) -> None:
        super().add(profile)
        t = self._types.get(profile.type_name)
        if t is None:
            t = self._types[profile.type_name] = TypeIndex()
            self._etypes[profile.type_name] = profile.etype
        bounds = _bounds(profile.etype)
        if profile.extra is None or len(profile.extra) == 1:
            self._alts[profile.id] = t.add(profile.id, alternatives(profile)[0], bounds)
        else:
            self._alts[profile.id] = tuple(t.add(profile.id, checks, bounds)
                                           for checks in alternatives(profile))

    def remove(self, profile_id: str) -> Profile:
        profile = super().remove(profile_id)
        t = self._types[profile.type_name]
        filed = self._alts.pop(profile_id)
        for alt in filed if isinstance(filed, tuple) else (filed,):
            t.remove(alt)
        if not t.n_alts:
            del self._types[profile.type_name]
            del self._etypes[profile.type_name]
        return profile

    def match(self, event: Event) -> list[str]:
        t = self._types.get(event.etype.name)
        if t is None:
            return []
        found = t.match(event.keys)
        return sorted(found) if len(found) > 1 else list(found)

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        match = self.match
        return [match(e) for e in events]
