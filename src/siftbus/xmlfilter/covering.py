"""Covering and overlap of XML subscriptions, for routing them across brokers.

``covers(a, b)``: every event that matches ``b`` matches ``a`` (so a broker that has
already forwarded ``a`` to a neighbour need not forward ``b``). ``overlaps(ad, s)``: some
event might match both an advertisement and a subscription (so the subscription must go
towards the advertiser). Both are *sound* approximations on the filters' structure:
``covers`` answers True only when it can prove the implication (a False costs a message,
never a delivery), and ``overlaps`` answers False only when it can prove the filters
disjoint (a True costs a message, never a delivery).

Filter ``fa`` covers filter ``fb`` when their targets locate the same events (the same
canonical target, or ``fa`` is ``//N`` without predicates and ``fb``'s event root is named
``N``), every condition of ``fa`` is implied by a condition of ``fb`` on the same path, and
every nested filter of ``fa`` is one of ``fb``'s. A subscription covers another when
every filter of the other is covered by one of its filters.
"""

from __future__ import annotations

from siftbus.xmlfilter.operators import EpcPattern, reference_test
from siftbus.xmlfilter.subscription import Condition, ContentFilter, Subscription
from siftbus.xmlfilter.xpath import Target

_NUM_OPS = {"lt", "le", "gt", "ge", "eq"}


def covers(a: Subscription, b: Subscription) -> bool:
    """Does every event matching ``b`` match ``a``?"""
    return all(any(filter_covers(fa, fb) for fa in a.filters) for fb in b.filters)


def filter_covers(fa: ContentFilter, fb: ContentFilter) -> bool:
    if not _target_covers(fa.target, fb.target):
        return False
    if not {n.key for n in fa.nested} <= {n.key for n in fb.nested}:
        return False
    return all(any(implies(cb, ca) for cb in fb.conditions) for ca in fa.conditions)


def _target_covers(ta: Target, tb: Target) -> bool:
    if ta.key == tb.key:
        return True
    if ta.type_name is not None or tb.type_name is not None or ta.predicates:
        return False
    if ta.anchored or len(ta.steps) != 1:
        return False
    a, b = ta.steps[0], tb.steps[-1]
    # '//N' locates every element named N; fb's events all have such a root
    return a.local == b.local and (a.uri is None or a.uri == b.uri)


def implies(cb: Condition, ca: Condition) -> bool:
    """Does ``cb`` (of the covered filter) imply ``ca`` on every event?"""
    if cb.path.key != ca.path.key:
        return False
    if cb.key == ca.key:
        return True
    kind_a = ca.operator.kind
    if kind_a == "exists":
        return True  # every condition needs the path present
    # per occurrence: under cb 'all' every occurrence, under 'any' one, satisfies cb's test
    if ca.quantifier == "all" and cb.quantifier == "any":
        return False
    return _value_implies(cb, ca)


def _accepted(c: Condition) -> frozenset[str] | None:
    """The finite set of values the condition accepts, if it is one."""
    kind = c.operator.kind
    if kind in ("equals", "in-set"):
        return frozenset(c.values)
    if kind == "match" and "*" not in c.values[0] and "?" not in c.values[0]:
        return frozenset(c.values)
    return None


def _value_implies(cb: Condition, ca: Condition) -> bool:
    kind_a, kind_b = ca.operator.kind, cb.operator.kind
    values = _accepted(cb)
    if values is not None:  # cb accepts finitely many values: test each against ca
        test = reference_test(ca.operator, ca.values)
        return all(test(v) for v in values)
    if kind_a == "match" and kind_b == "match":
        pa, pb = ca.values[0], cb.values[0]
        # 'p*' covers 'q*' when q starts with p (both prefixes)
        qa, qb = _prefix(pa), _prefix(pb)
        return qa is not None and qb is not None and qb.startswith(qa)
    if kind_a == "numeric" and kind_b == "numeric":
        return _numeric_implies(cb.operator.cmp, float(cb.values[0]),
                                ca.operator.cmp, float(ca.values[0]))
    if kind_a == "epc" and kind_b == "epc":
        return _epc_covers(EpcPattern.parse(ca.values[0]), EpcPattern.parse(cb.values[0]))
    return False


def _prefix(glob: str) -> str | None:
    body = glob[:-1]
    return body if glob.endswith("*") and "*" not in body and "?" not in body else None


def _numeric_implies(op_b: str, b: float, op_a: str, a: float) -> bool:
    """Does ``x op_b b`` imply ``x op_a a`` for every number x?"""
    if op_b == "eq":
        return {"eq": b == a, "ne": b != a, "lt": b < a, "le": b <= a, "gt": b > a,
                "ge": b >= a}[op_a]
    if op_a == "ne":
        return (op_b in ("lt", "le") and (b < a or (op_b == "lt" and b == a))) or (
            op_b in ("gt", "ge") and (b > a or (op_b == "gt" and b == a)))
    if op_a in ("lt", "le") and op_b in ("lt", "le"):
        return b < a or (b == a and (op_a == "le" or op_b == "lt"))
    if op_a in ("gt", "ge") and op_b in ("gt", "ge"):
        return b > a or (b == a and (op_a == "ge" or op_b == "gt"))
    return False


def _epc_covers(pa: EpcPattern, pb: EpcPattern) -> bool:
    if pa.scheme != pb.scheme or len(pa.fields) != len(pb.fields):
        return False
    for fa, fb in zip(pa.fields, pb.fields, strict=True):
        if fa is None:
            continue
        if isinstance(fa, tuple):
            if isinstance(fb, tuple):
                if not (fa[0] <= fb[0] and fb[1] <= fa[1]):
                    return False
            elif fb is None:
                return False
            else:
                x = EpcPattern.field_number(fb)
                if x is None or not fa[0] <= x <= fa[1]:
                    return False
        elif fa != fb:
            return False
    return True


# -- overlap (advertisements) ---------------------------------------------------------------


def overlaps(ad: ContentFilter, sub: Subscription) -> bool:
    """Might an event described by the advertisement ``ad`` match the subscription?"""
    return any(filter_overlaps(ad, f) for f in sub.filters)


def filter_overlaps(fa: ContentFilter, fb: ContentFilter) -> bool:
    if not _targets_overlap(fa.target, fb.target):
        return False
    for ca in fa.conditions:
        for cb in fb.conditions:
            if ca.path.key == cb.path.key and _disjoint(ca, cb):
                return False
    return True


def _targets_overlap(ta: Target, tb: Target) -> bool:
    if ta.type_name is not None or tb.type_name is not None:
        return True  # a type may resolve to anything: cannot be ruled out
    a, b = ta.steps[-1], tb.steps[-1]
    if a.uri is not None and b.uri is not None and a.uri != b.uri:
        return False
    return a.local == b.local


def _disjoint(ca: Condition, cb: Condition) -> bool:
    """Can no single-valued path satisfy both? (Both are 'all' or single occurrences are
    assumed only when both conditions say 'all'; under 'any' different occurrences may
    satisfy each, so nothing is disjoint.)"""
    if ca.quantifier == "any" or cb.quantifier == "any":
        return False
    va, vb = _accepted(ca), _accepted(cb)
    if va is not None and vb is not None:
        return not (va & vb)
    for x, other in ((va, cb), (vb, ca)):
        if x is not None:
            test = reference_test(other.operator, other.values)
            return not any(test(v) for v in x)
    pa = _prefix(ca.values[0]) if ca.operator.kind == "match" else None
    pb = _prefix(cb.values[0]) if cb.operator.kind == "match" else None
    if pa is not None and pb is not None:
        return not (pa.startswith(pb) or pb.startswith(pa))
    if ca.operator.kind == "numeric" and cb.operator.kind == "numeric":
        return _numbers_disjoint(ca, cb)
    return False


def _numbers_disjoint(ca: Condition, cb: Condition) -> bool:
    lo, hi = -float("inf"), float("inf")
    lo_open = hi_open = False
    for c in (ca, cb):
        op, x = c.operator.cmp, float(c.values[0])
        if op not in _NUM_OPS:
            return False
        if op in ("gt", "ge", "eq") and (x > lo or (x == lo and op == "gt")):
            lo, lo_open = x, op == "gt"
        if op in ("lt", "le", "eq") and (x < hi or (x == hi and op == "lt")):
            hi, hi_open = x, op == "lt"
    return lo > hi or (lo == hi and (lo_open or hi_open))

