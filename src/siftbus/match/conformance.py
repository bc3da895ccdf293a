"""``check_matcher``: the conformance suite every :class:`~siftbus.match.Matcher` passes.

It drives a matcher and the reference oracle with the same seeded random workload
(random schemas with 1 to 10 attributes of every domain kind, every operator,
interleaved add/remove/match) and raises ``AssertionError`` at the first difference,
naming the seed so that a failure replays. It needs no test framework, so any layer
(broker, channel, Spark) can run it against its own matcher::

    from siftbus.match.conformance import check_matcher
    check_matcher(lambda: MyMatcher(), seed=1)
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable
from decimal import Decimal

from siftbus.errors import DuplicateProfileError, UnknownProfileError, UnsatisfiableProfileError
from siftbus.match.base import BulkLoading, Matcher, Snapshotting
from siftbus.match.cells import events_to_columns
from siftbus.match.columns import ProfileColumns
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import (
    AnyDomain,
    DecimalDomain,
    EnumDomain,
    Event,
    EventType,
    IntDomain,
    Op,
    Predicate,
    Profile,
    StringDomain,
)
from siftbus.model.schema import Attribute

STRINGS = ("", "a", "ab", "abc", "abd", "b", "ba", "north", "north-1", "south")
_ORDERED_OPS = (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.RANGE, Op.IN, Op.EXISTS)
_STRING_OPS = (Op.EQ, Op.NE, Op.IN, Op.PREFIX, Op.EXISTS)


def random_domain(rnd: random.Random) -> AnyDomain:
    """Small and large int domains, decimals, enums and strings."""
    kind = rnd.randrange(4)
    if kind == 0:
        lo = rnd.randint(-50, 50)
        return IntDomain(lo, lo + rnd.choice([0, 1, 3, 10, 50, 1000, 100_000]))
    if kind == 1:
        lo = rnd.randint(-40, 10)
        return DecimalDomain(Decimal(lo), Decimal(lo + rnd.randint(0, 60)), rnd.randint(0, 2))
    if kind == 2:
        return EnumDomain(tuple(f"L{i}" for i in range(rnd.randint(1, 5))))
    return StringDomain()


def random_type(rnd: random.Random, name: str = "T", max_attrs: int = 10) -> EventType:
    n = rnd.randint(1, max_attrs)
    return EventType(name, tuple(Attribute(f"a{i}", random_domain(rnd), i) for i in range(n)))


def _key(rnd: random.Random, d: AnyDomain, hot: list[int]) -> int:
    assert not isinstance(d, StringDomain)
    # Reuse a few keys often so that conditions share bounds and events hit them.
    if hot and rnd.random() < 0.6:
        return min(max(rnd.choice(hot), d.min_key), d.max_key)
    return rnd.choice([d.min_key, d.max_key, rnd.randint(d.min_key, d.max_key)])


def random_predicate(rnd: random.Random, attr: Attribute, hot: list[int]) -> Predicate:
    d = attr.domain
    if isinstance(d, StringDomain):
        op = rnd.choice(_STRING_OPS)
        if op is Op.EXISTS:
            return Predicate(attr.name, op)
        if op is Op.IN:
            return Predicate(attr.name, op, tuple(rnd.sample(STRINGS, rnd.randint(1, 3))))
        return Predicate(attr.name, op, (rnd.choice(STRINGS),))
    op = rnd.choice(_ORDERED_OPS)
    if op is Op.EXISTS:
        return Predicate(attr.name, op)
    if op is Op.RANGE:
        a, b = sorted((_key(rnd, d, hot), _key(rnd, d, hot)))
        return Predicate(attr.name, op, (d.value(a), d.value(b)))
    if op is Op.IN:
        keys = [_key(rnd, d, hot) for _ in range(rnd.randint(1, 4))]
        return Predicate(attr.name, op, tuple(d.value(k) for k in keys))
    return Predicate(attr.name, op, (d.value(_key(rnd, d, hot)),))


def random_profile(rnd: random.Random, etype: EventType, pid: str,
                   hot: dict[str, list[int]]) -> Profile | None:
    """A random profile with 0 to 4 predicates, or ``None`` when it is unsatisfiable."""
    preds = [random_predicate(rnd, a, hot[a.name])
             for a in rnd.sample(etype.attributes, rnd.randint(0, min(4, len(etype))))]
    if preds and rnd.random() < 0.2:  # a second condition on one attribute
        preds.append(random_predicate(rnd, etype.attribute(preds[0].attr), hot[preds[0].attr]))
    try:
        return Profile.build(pid, etype, preds, subscriber=rnd.choice(["", "s1", "s2"]))
    except UnsatisfiableProfileError:
        return None


def random_event(rnd: random.Random, etype: EventType, hot: dict[str, list[int]]) -> Event:
    values: dict[str, object] = {}
    for a in etype.attributes:
        d = a.domain
        if isinstance(d, StringDomain):
            values[a.name] = rnd.choice((*STRINGS, "abcd", "zz", "north-2"))
        else:
            k = _key(rnd, d, hot[a.name])
            if rnd.random() < 0.3:
                k = min(max(k + rnd.choice([-1, 1]), d.min_key), d.max_key)
            values[a.name] = d.value(k)
    return Event.of(etype, values)


def _hot(rnd: random.Random, etype: EventType) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for a in etype.attributes:
        d = a.domain
        out[a.name] = [] if isinstance(d, StringDomain) else [
            rnd.randint(d.min_key, d.max_key) for _ in range(3)]
    return out


def _compare(m: Matcher, ref: ReferenceMatcher, evs: list[Event], where: str) -> None:
    assert len(m) == len(ref), f"{where}: len {len(m)} != {len(ref)}"
    for e in evs[: len(evs) // 2]:
        got, want = m.match(e), ref.match(e)
        assert got == want, f"{where}: match({e}) = {got}, expected {want}"
    got_b, want_b = m.match_batch(evs), ref.match_batch(evs)
    for e, g, w in zip(evs, got_b, want_b, strict=True):
        assert g == w, f"{where}: match_batch row {e} = {g}, expected {w}"
    if isinstance(m, Snapshotting):
        _compare_snapshot(m, ref, evs, where)


def _compare_snapshot(m: Snapshotting, ref: ReferenceMatcher, evs: list[Event],
                      where: str) -> None:
    """The snapshot of ``m``: cached per version, picklable, and its columnar matches
    (ids and owners) are the reference's."""
    snap = m.snapshot()
    assert snap.version == m.version, f"{where}: snapshot version {snap.version}"
    assert m.snapshot() is snap, f"{where}: a second snapshot at the same version"
    assert len(snap) == len(ref), f"{where}: snapshot holds {len(snap)} profiles"
    owner = {p.id: p.owner for p in ref.profiles()}
    for s in (snap, pickle.loads(pickle.dumps(snap))):
        ids, owners = s.profile_ids, s.owners
        for etype in {e.etype.name: e.etype for e in evs}.values():
            mine = [e for e in evs if e.etype.name == etype.name]
            csr = s.match_columns(etype.name, events_to_columns(etype, mine))
            got = csr.rows(ids)
            for e, g, w in zip(mine, got, ref.match_batch(mine), strict=True):
                assert g == w, f"{where}: snapshot row {e} = {g}, expected {w}"
            for i in csr.profiles.tolist():
                assert owners[i] == owner[ids[i]], f"{where}: owner of {ids[i]}"


def check_matcher(factory: Callable[[], Matcher], *, seed: int = 0, rounds: int = 4,
                  profiles: int = 60, events: int = 40) -> None:
    """Raise ``AssertionError`` unless matchers from ``factory`` behave like the reference.

    Each round builds a fresh matcher over two random event types and adds two thirds of
    ``profiles`` random profiles (in every other round in one ``add_columns`` call per
    type when the matcher is :class:`BulkLoading`); then it interleaves adding the rest,
    removing random live ones and matching; then removes half, re-adds some under the
    same ids, and finally removes everything and checks nothing is left behind. After
    each phase every event is matched per event and in a batch, and, when the matcher
    is :class:`Snapshotting`, through a (pickled) snapshot's columnar path.
    """
    for r in range(rounds):
        rnd = random.Random(seed * 1000 + r)
        where = f"check_matcher(seed={seed}) round {r}"
        m = factory()
        ref = ReferenceMatcher()
        assert isinstance(m, Matcher), f"{where}: not a Matcher"
        types = [random_type(rnd, "T"), random_type(rnd, "U", 3)]
        hot = {t.name: _hot(rnd, t) for t in types}
        evs = [random_event(rnd, t, hot[t.name]) for _ in range(events) for t in types]
        rnd.shuffle(evs)
        assert m.match(evs[0]) == [], f"{where}: empty matcher matched"
        pool: list[Profile] = []
        for i in range(profiles):
            t = types[0] if rnd.random() < 0.8 else types[1]
            p = random_profile(rnd, t, f"p{i:03d}" if i % 3 else f"q{i}", hot[t.name])
            if p is not None:
                pool.append(p)

        later = pool[len(pool) * 2 // 3:]
        pool = pool[:len(pool) * 2 // 3]
        v0 = m.version if isinstance(m, Snapshotting) else 0
        if (seed + r) % 2 and isinstance(m, BulkLoading):  # bulk loading every other time
            for t in types:
                mine = [p for p in pool if p.etype.name == t.name]
                m.add_columns(ProfileColumns.from_profiles(t, mine))
                if len(mine) > 1:
                    try:
                        m.add_columns(ProfileColumns.from_profiles(t, mine[-1:]))
                    except DuplicateProfileError:
                        pass
                    else:
                        raise AssertionError(f"{where}: add_columns accepted a taken id")
        else:
            for p in pool:
                m.add(p)
        for p in pool:
            ref.add(p)
        if pool and isinstance(m, Snapshotting):
            assert m.version != v0, f"{where}: adding did not change the version"
        _compare(m, ref, evs, f"{where} after adds")
        if pool:
            try:
                m.add(pool[0])
            except DuplicateProfileError:
                pass
            else:
                raise AssertionError(f"{where}: duplicate id accepted")
            assert m.get(pool[0].id) == pool[0], f"{where}: get returned another profile"
        try:
            m.remove("no-such-profile")
        except UnknownProfileError:
            pass
        else:
            raise AssertionError(f"{where}: removing an unknown id did not raise")
        # Churn: add the rest, interleaved with removals of random live ones and matches.
        live = list(pool)
        for p in later:
            m.add(p)
            ref.add(p)
            live.append(p)
            if rnd.random() < 0.3:
                gone = live.pop(rnd.randrange(len(live)))
                assert m.remove(gone.id) == gone, f"{where}: churn remove returned another"
                ref.remove(gone.id)
            if rnd.random() < 0.3:
                e = rnd.choice(evs)
                assert m.match(e) == ref.match(e), f"{where}: mid-churn match({e})"
        pool = live
        _compare(m, ref, evs, f"{where} after churn")
        # Remove half, match, re-add some under the same ids, match.
        victims = rnd.sample(pool, len(pool) // 2)
        for k, p in enumerate(victims):
            assert m.remove(p.id) == p, f"{where}: remove returned another profile"
            ref.remove(p.id)
            if k % 7 == 0:
                e = rnd.choice(evs)
                assert m.match(e) == ref.match(e), f"{where}: mid-removal match({e})"
        _compare(m, ref, evs, f"{where} after removals")
        for p in victims[: len(victims) // 2]:
            m.add(p)
            ref.add(p)
        _compare(m, ref, evs, f"{where} after re-adds")
        assert {p.id for p in m.profiles()} == {p.id for p in ref.profiles()}, \
            f"{where}: profiles() differs"
        for p in list(ref.profiles()):
            m.remove(p.id)
            assert p.id not in m, f"{where}: {p.id} still contained after remove"
        assert len(m) == 0, f"{where}: {len(m)} profiles left after removing all"
        for e in evs:
            assert m.match(e) == [], f"{where}: emptied matcher still matches {e}"
        assert m.match_batch(evs) == [[] for _ in evs], f"{where}: emptied batch matches"
