"""Covering, overlap and merging of two profiles.

Profiles are conjunctions of one normalised constraint per attribute (see
:mod:`siftbus.model.constraint`), over finite ordered domains or strings. That makes every
relation here *exact* set arithmetic on the events a profile matches, written N(p):

* ``covers(p, q)``: N(p) ⊇ N(q) — every attribute p constrains is constrained by q to a
  subset (an attribute q leaves free is the whole domain, which p's non-full constraint
  cannot contain);
* ``overlaps(p, q)``: N(p) ∩ N(q) ≠ ∅ — attributes are independent, so every attribute's
  intersection must be non-empty;
* ``merge(p, q)``: a profile m with N(m) = N(p) ∪ N(q) (perfect) exists iff one covers the
  other, or they agree on every attribute but one and that attribute's union is
  expressible (always on ordered domains; on strings, see :func:`string_union`). The union
  of two boxes that differ in two or more dimensions is no box. With ``imperfect=True``
  the per-attribute union (the smallest box containing both) is returned instead: a
  superset, never missing an event.

Profiles are satisfiable by construction (:meth:`Profile.build` refuses empty ones), which
these tests rely on.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from siftbus.model import Constraint, EventType, IntervalSet, Profile, StringConstraint
from siftbus.model.domain import StringDomain


class Relation(enum.Enum):
    """How two profiles' event sets relate; the most specific one that holds."""

    EQUIVALENT = "equivalent"
    COVERS = "covers"
    COVERED_BY = "covered-by"
    OVERLAPS = "overlaps"
    DISJOINT = "disjoint"


def same_type(p: Profile, q: Profile) -> bool:
    """Whether the two profiles filter the same event type (name and attributes)."""
    return p.etype is q.etype or p.etype == q.etype


def full_constraint(etype: EventType, position: int) -> Constraint:
    """The constraint accepting every value of the attribute at ``position``."""
    domain = etype.attributes[position].domain
    if isinstance(domain, StringDomain):
        return StringConstraint()
    return IntervalSet.range(domain.min_key, domain.max_key)


def constraint_superset(a: Constraint, b: Constraint) -> bool:
    """Whether constraint ``a`` accepts every key ``b`` accepts (same attribute)."""
    if isinstance(a, IntervalSet):
        assert isinstance(b, IntervalSet)
        ai, bi = a.intervals, b.intervals
        if len(ai) == 1 and len(bi) == 1:  # the common case, without allocating
            return ai[0][0] <= bi[0][0] and bi[0][1] <= ai[0][1]
        if not bi:
            return True
        if not ai or bi[0][0] < ai[0][0] or bi[-1][1] > ai[-1][1]:
            return False
        return a.issuperset(b)
    assert isinstance(b, StringConstraint)
    return a.issuperset(b)


def constraint_disjoint(a: Constraint, b: Constraint) -> bool:
    """Whether no key is accepted by both constraints (same attribute)."""
    if isinstance(a, IntervalSet):
        assert isinstance(b, IntervalSet)
        ai, bi = a.intervals, b.intervals
        if not ai or not bi or ai[-1][1] < bi[0][0] or bi[-1][1] < ai[0][0]:
            return True
        if len(ai) == 1 and len(bi) == 1:
            return False
        return a.isdisjoint(b)
    assert isinstance(b, StringConstraint)
    return a.isdisjoint(b)


def constraint_equal(a: Constraint, b: Constraint) -> bool:
    """Whether the constraints accept the same keys."""
    if a == b:
        return True
    return constraint_superset(a, b) and constraint_superset(b, a)


def covers(p: Profile, q: Profile) -> bool:
    """Whether every event matching ``q`` also matches ``p`` (p ⊒ q). Reflexive."""
    if p is q:
        return True
    if not same_type(p, q):
        return False
    if p.extra is not None and p.extra != q.extra:
        return False  # conservative: p's checks are compared only for equality
    qc = q.conditions
    j = 0
    nq = len(qc)
    for c in p.conditions:
        pos = c.position
        while j < nq and qc[j].position < pos:
            j += 1
        if j == nq or qc[j].position != pos:
            # q leaves the attribute free: only a full constraint would contain it, and
            # normalised profiles drop full constraints; check anyway for hand-made ones.
            if (p.etype.attributes[pos].optional
                    or not constraint_superset(c.constraint, full_constraint(p.etype, pos))):
                return False  # q accepts an absent value there, p does not
            continue
        if not constraint_superset(c.constraint, qc[j].constraint):
            return False
    return True


def equivalent(p: Profile, q: Profile) -> bool:
    """Whether both profiles match exactly the same events."""
    if p.filter_key == q.filter_key and same_type(p, q):
        return True
    return covers(p, q) and covers(q, p)


def overlaps(p: Profile, q: Profile) -> bool:
    """Whether some event matches both profiles."""
    if not same_type(p, q):
        return False
    qc = {c.position: c.constraint for c in q.conditions}
    for c in p.conditions:
        other = qc.get(c.position)
        if other is not None and constraint_disjoint(c.constraint, other):
            return False
    return True


def relation(p: Profile, q: Profile) -> Relation:
    """The most specific relation between ``p`` and ``q``."""
    pq = covers(p, q)
    qp = covers(q, p)
    if pq and qp:
        return Relation.EQUIVALENT
    if pq:
        return Relation.COVERS
    if qp:
        return Relation.COVERED_BY
    return Relation.OVERLAPS if overlaps(p, q) else Relation.DISJOINT


# --- merging -------------------------------------------------------------------------


def _common_prefix(words: Iterable[str]) -> str:
    prefix: str | None = None
    for w in words:
        if prefix is None:
            prefix = w
            continue
        n = 0
        while n < len(prefix) and n < len(w) and prefix[n] == w[n]:
            n += 1
        prefix = prefix[:n]
    return prefix or ""


def string_union(a: StringConstraint, b: StringConstraint) -> StringConstraint | None:
    """The exact union of two string constraints, or ``None`` when no single
    string constraint (a finite set, or a prefix minus finitely many strings) is it.

    Two finite sets always unite; a prefix set absorbs finite sets inside its prefix and
    prefix sets whose prefix extends its own; two prefix sets with unrelated prefixes
    (or a finite set reaching outside the prefix) have no exact union.
    """
    if a.allowed is not None and b.allowed is not None:
        return StringConstraint.make(a.allowed | b.allowed)
    if a.allowed is not None:
        a, b = b, a
    # Now ``a`` is a prefix set.
    if b.allowed is not None:
        if not all(s.startswith(a.prefix) for s in b.allowed):
            return None
        return StringConstraint.make(None, a.prefix, a.excluded - b.allowed)
    if b.prefix.startswith(a.prefix):
        wide, narrow = a, b
    elif a.prefix.startswith(b.prefix):
        wide, narrow = b, a
    else:
        return None
    return StringConstraint.make(None, wide.prefix,
                                 frozenset(s for s in wide.excluded if s not in narrow))


def string_hull(a: StringConstraint, b: StringConstraint) -> StringConstraint:
    """The exact union when there is one, else the smallest prefix set (longest common
    prefix, minus what both exclude) containing both: a superset, never less."""
    exact = string_union(a, b)
    if exact is not None:
        return exact
    words: list[str] = []
    for c in (a, b):
        if c.allowed is not None:
            words.extend(c.allowed)
        else:
            words.append(c.prefix)
    prefix = _common_prefix(words)
    excluded = frozenset(s for s in a.excluded | b.excluded
                         if s.startswith(prefix) and s not in a and s not in b)
    return StringConstraint.make(None, prefix, excluded)


def constraint_union(a: Constraint, b: Constraint) -> Constraint | None:
    """The exact union of two constraints on one attribute, or ``None`` if inexpressible."""
    if isinstance(a, IntervalSet):
        assert isinstance(b, IntervalSet)
        return a.union(b)
    assert isinstance(b, StringConstraint)
    return string_union(a, b)


def constraint_hull(a: Constraint, b: Constraint, *, compact: bool = False) -> Constraint:
    """A constraint containing both: their union, or (``compact``, ordered domains) the
    single interval from the lowest to the highest key; strings use :func:`string_hull`."""
    if isinstance(a, IntervalSet):
        assert isinstance(b, IntervalSet)
        if compact:
            return IntervalSet.range(min(a.lo, b.lo), max(a.hi, b.hi))
        return a.union(b)
    assert isinstance(b, StringConstraint)
    return string_hull(a, b)


def _constraints(p: Profile) -> dict[int, Constraint]:
    return {c.position: c.constraint for c in p.conditions}


def merge(p: Profile, q: Profile, *, imperfect: bool = False, compact: bool = False,
          id: str | None = None, subscriber: str | None = None) -> Profile | None:
    """Merge two profiles of one type into one whose events include both.

    Returns the perfect merge (N(m) = N(p) ∪ N(q)) when one exists. Otherwise returns
    ``None``, or with ``imperfect=True`` the per-attribute hull (the union per attribute,
    the smallest profile containing both), which matches a strict superset. With
    ``imperfect=True, compact=True`` every differing ordered attribute becomes one interval
    from its lowest to its highest key even where a perfect (holey) union exists: fewer
    intervals, more false positives (Tarkoma: [10,15] + [25,30] -> [10,30]).
    Profiles of different types never merge. The result has id ``id`` (default
    ``"<p.id>/<q.id>"``) and ``subscriber`` (default: the common subscriber, else none).
    """
    if not same_type(p, q):
        return None
    mid = id if id is not None else f"{p.id}/{q.id}"
    sub = subscriber if subscriber is not None else (
        p.subscriber if p.subscriber == q.subscriber else "")
    if covers(p, q):
        return p.with_id(mid, sub)
    if covers(q, p):
        return q.with_id(mid, sub)
    if (p.extended or q.extended) and not imperfect:
        return None  # checks and absent values: no exact union is computed (conservative)
    etype = p.etype
    pc, qc = _constraints(p), _constraints(q)
    differing = [pos for pos in sorted(pc.keys() | qc.keys())
                 if not constraint_equal(pc.get(pos) or full_constraint(etype, pos),
                                         qc.get(pos) or full_constraint(etype, pos))]
    merged: dict[str, Constraint] = {etype.attributes[pos].name: c for pos, c in pc.items()}
    if len(differing) == 1 and not (imperfect and compact):
        pos = differing[0]
        union = constraint_union(pc.get(pos) or full_constraint(etype, pos),
                                 qc.get(pos) or full_constraint(etype, pos))
        if union is not None:
            merged[etype.attributes[pos].name] = union
            return Profile.from_constraints(mid, etype, merged, sub)
    if not imperfect:
        return None
    for pos in differing:
        merged[etype.attributes[pos].name] = constraint_hull(
            pc.get(pos) or full_constraint(etype, pos),
            qc.get(pos) or full_constraint(etype, pos), compact=compact)
    return Profile.from_constraints(mid, etype, merged, sub)


def merge_set(profiles: Iterable[Profile], *, id_prefix: str = "merged-") -> list[Profile]:
    """A smaller set matching exactly the same events: covered profiles dropped, then
    perfect merges to a fixpoint (Tarkoma §8.5 root-set merging, perfect only).

    Two profiles left after covering merge perfectly only if they constrain the same
    attributes and differ on one, so each round buckets profiles by type and by their
    constraints on all attributes but one, and unites every bucket. Untouched profiles
    come back as they were; merged ones get ids ``id_prefix + n``.
    """
    current = _drop_covered(list(profiles))
    counter = 0
    changed = True
    while changed:
        changed = False
        attrs = sorted({c.position for p in current for c in p.conditions})
        for pos in attrs:
            buckets: dict[object, list[Profile]] = {}
            for p in current:
                key = (p.type_name, p.etype,
                       tuple((c.position, c.constraint) for c in p.conditions
                             if c.position != pos),
                       any(c.position == pos for c in p.conditions))
                buckets.setdefault(key, []).append(p)
            merged_any = False
            nxt: list[Profile] = []
            for group in buckets.values():
                while group:
                    acc = group.pop()
                    rest: list[Profile] = []
                    fused = False
                    for other in group:
                        m = merge(acc, other, id=f"{id_prefix}{counter}")
                        if m is None:
                            rest.append(other)
                        else:
                            acc, fused = m, True
                            counter += 1
                    group = rest
                    nxt.append(acc)
                    merged_any = merged_any or fused
            if merged_any:
                current = _drop_covered(nxt)
                changed = True
    return current


def _drop_covered(items: list[Profile]) -> list[Profile]:
    """Keep one profile per filter and drop every profile another one covers (pairwise:
    meant for root sets and per-neighbour sets, not whole tables)."""
    uniq: dict[object, Profile] = {}
    for p in items:
        uniq.setdefault((p.type_name, p.filter_key, p.etype), p)
    kept = list(uniq.values())
    return [p for p in kept if not any(q is not p and covers(q, p) for q in kept)]


def is_perfect_merge(m: Profile, p: Profile, q: Profile) -> bool:
    """Whether ``m`` matches exactly the events of ``p`` or ``q``: a perfect merge exists
    and ``m`` is equivalent to it."""
    exact = merge(p, q)
    return exact is not None and equivalent(m, exact)


__all__ = [
    "Relation",
    "constraint_disjoint",
    "constraint_equal",
    "constraint_hull",
    "constraint_superset",
    "constraint_union",
    "covers",
    "equivalent",
    "full_constraint",
    "is_perfect_merge",
    "merge",
    "merge_set",
    "overlaps",
    "relation",
    "same_type",
    "string_hull",
    "string_union",
]
