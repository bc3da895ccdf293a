"""The per-(target, path) value index: which constraints does one event value satisfy?

Siena's multi-operator index, one per (target, attribute path): string equality and set
membership by one hash lookup, prefix globs by one lookup per distinct prefix length, EPC
patterns by their literal prefix and, for serial (or any) ranges, an interval tree, and
numeric comparisons by a binary search in sorted thresholds, whose satisfied constraints
are a slice of a sorted ``int32`` array (no Python object per satisfied constraint).
Constraints are integer ids. The frequent results (equality, set membership, prefix globs,
``attribute-exists``) are stored packed, as the bytes of ``int32`` arrays, and a value's
satisfied constraints are gathered into one ``bytearray`` that the matcher hands to its
kernel without converting a Python object per constraint.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from siftbus.xmlfilter.operators import EpcPattern, Glob, OperatorSpec, epc_split, parse_number


@dataclass(slots=True)
class _Sorted:
    """Thresholds in ascending order with their constraints (parallel lists), and the
    constraints as an ``int32`` array built on first use after a change."""

    keys: list[float] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    _arr: np.ndarray | None = None

    def add(self, k: float, cid: int) -> None:
        i = bisect.bisect_right(self.keys, k)
        self.keys.insert(i, k)
        self.ids.insert(i, cid)
        self._arr = None

    def remove(self, k: float, cid: int) -> None:
        i = bisect.bisect_left(self.keys, k)
        while self.ids[i] != cid:
            i += 1
        del self.keys[i]
        del self.ids[i]
        self._arr = None

    @property
    def arr(self) -> np.ndarray:
        a = self._arr
        if a is None:
            a = self._arr = np.array(self.ids, np.int32)
        return a


class IntervalIndex:
    """Items on closed integer intervals; :meth:`stab` lists the items whose interval
    contains a point, in O(log n + hits).

    A centred interval tree, built on the first query after a change (changes are rare
    next to queries; a bucket that changes between every two queries is rebuilt each time,
    O(n log n)).
    """

    __slots__ = ("_items", "_tree")

    def __init__(self) -> None:
        self._items: list[tuple[int, int, Any]] = []
        self._tree: Any = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, lo: int, hi: int, item: Any) -> None:
        self._items.append((lo, hi, item))
        self._tree = None

    def remove(self, item: Any) -> None:
        self._items = [e for e in self._items if e[2] != item]
        self._tree = None

    def stab(self, x: int) -> Iterator[Any]:
        node = self._tree
        if node is None:
            node = self._tree = _build(self._items)
        while node is not None:
            center, by_lo, by_hi, left, right = node
            if x < center:
                for lo, item in by_lo:
                    if lo > x:
                        break
                    yield item
                node = left
            elif x > center:
                for hi, item in by_hi:
                    if hi < x:
                        break
                    yield item
                node = right
            else:
                for _, item in by_lo:
                    yield item
                return


def _build(items: list[tuple[int, int, Any]]) -> Any:
    """(center, [(lo, item)] ascending, [(hi, item)] descending, left, right) or None."""
    if not items:
        return None
    ends = sorted([e[0] for e in items] + [e[1] for e in items])
    center = ends[len(ends) // 2]
    left = [e for e in items if e[1] < center]
    right = [e for e in items if e[0] > center]
    mid = [e for e in items if e[0] <= center <= e[1]]
    by_lo = sorted([(e[0], e[2]) for e in mid], key=lambda p: p[0])
    by_hi = sorted([(e[1], e[2]) for e in mid], key=lambda p: -p[0])
    return (center, by_lo, by_hi, _build(left), _build(right))


class _EpcBucket:
    """The patterns of one literal prefix: those with nothing but ``*`` after it (they
    match at once, packed), those whose next field is a range (by that range), those with
    a literal field after a wildcard (by that field's position and text: a wildcard
    company prefix, ``urn:epc:idpat:sgtin:*.012345.*``), and the rest, verified one by
    one."""

    __slots__ = ("by_field", "n", "others", "ranges", "wild")

    def __init__(self) -> None:
        self.wild = b""
        self.others: list[tuple[EpcPattern, int]] = []
        self.ranges = IntervalIndex()
        self.by_field: dict[int, dict[str, list[tuple[EpcPattern, int]]]] = {}
        self.n = 0


def _later_literal(pat: EpcPattern, k: int) -> int | None:
    """The position of the first literal field after position ``k`` (a wildcard), or
    None."""
    for j in range(k + 1, len(pat.fields)):
        if isinstance(pat.fields[j], str):
            return j
    return None


def pack(cids: Iterable[int]) -> bytes:
    """Constraint ids as the bytes of an ``int32`` array."""
    return array("i", cids).tobytes()


def unpack(data: bytes | bytearray) -> list[int]:
    out = array("i")
    out.frombytes(data)
    return out.tolist()


#: an EPC URN's text before its last ':' -> its scheme, or None when it is no EPC header
_EPC_HEADS: dict[str, str | None] = {}


def epc_parts(v: str) -> tuple[str, str] | None:
    """(scheme, fields text) of an EPC URN: :func:`epc_split` without splitting, the
    meaning of the header (``urn:epc:id:sgtin``, a handful per deployment) remembered."""
    t = v.strip()
    i = t.rfind(":")
    if i < 0:
        return None
    head = t[:i]
    scheme = _EPC_HEADS.get(head, "")
    if scheme == "":
        scheme = _epc_scheme(head)
    if scheme is None or i == len(t) - 1:
        return None
    return scheme, t[i + 1 :]


def _epc_scheme(head: str) -> str | None:
    """The scheme of an EPC header (the text before the last ':'), remembered."""
    # the header decides everything but the last part, which must not be empty
    split = epc_split(head + ":x")
    scheme = None if split is None else split[0]
    if len(_EPC_HEADS) >= 1024:  # documents may carry any number of headers
        _EPC_HEADS.clear()
    _EPC_HEADS[head] = scheme
    return scheme


def _add_to(d: dict[str, bytes], key: str, cid: int) -> None:
    d[key] = d.get(key, b"") + pack((cid,))


def _remove_from(d: dict[str, bytes], key: str, cid: int) -> None:
    kept = unpack(d[key])
    kept.remove(cid)
    if kept:
        d[key] = pack(kept)
    else:
        del d[key]


#: distinct numeric values whose results a slot remembers
NUMERIC_CACHE = 4096


class SlotIndex:
    """All constraints on one (target, attribute path), by operator.

    :meth:`collect` appends every constraint a value satisfies, each exactly once, as
    ``int32`` bytes to a ``bytearray`` (packed sets, slices of sorted arrays), or as ids to
    a list (the rarer kinds).
    """

    __slots__ = ("_epc", "_globs", "_n_epc", "_n_prefix", "_num", "_num_cache", "_num_eq",
                 "_prefix", "counted", "eq", "exists", "n", "only_eq")

    def __init__(self) -> None:
        self.exists = b""
        self.eq: dict[str, bytes] = {}
        self._prefix: dict[int, dict[str, bytes]] = {}
        self._globs: list[tuple[Glob, int]] = []
        # (scheme, fields, literal prefix length) -> literal prefix (joined by '.') -> bucket
        self._epc: dict[tuple[str, int, int], dict[str, _EpcBucket]] = {}
        self._num: dict[str, _Sorted] = {}  # lt, le, gt, ge, ne
        self._num_eq: dict[float, list[int]] = {}
        #: value text -> its satisfied numeric constraints (packed); values repeat (a
        #: temperature, a quantity), and a parse and bisects cost more than a lookup
        self._num_cache: dict[str, bytes] = {}
        self.n = 0
        self._n_prefix = 0  # distinct (length, prefix) keys of prefix globs
        self._n_epc = 0  # distinct EPC literal prefixes
        #: nothing but equality and set membership: the matcher inlines the lookup
        self.only_eq = True
        #: constraints whose quantifier is ``all`` and whose operator tests the value (the
        #: owner keeps them: the index does not know quantifiers); only these are counted
        #: over several occurrences of the path
        self.counted: set[int] = set()

    def __len__(self) -> int:
        return self.n

    def add(self, spec: OperatorSpec, values: tuple[str, ...], cid: int) -> None:
        self._apply(spec, values, cid, True)

    def remove(self, spec: OperatorSpec, values: tuple[str, ...], cid: int) -> None:
        self._apply(spec, values, cid, False)

    def _apply(self, spec: OperatorSpec, values: tuple[str, ...], cid: int, add: bool) -> None:
        kind = spec.kind
        if kind == "exists":
            kept = unpack(self.exists)
            if add:
                kept.append(cid)
            else:
                kept.remove(cid)
            self.exists = pack(kept)
        elif kind in ("equals", "in-set"):
            for v in values:
                (_add_to if add else _remove_from)(self.eq, v, cid)
        elif kind == "match":
            self._apply_glob(values[0], cid, add)
        elif kind == "epc":
            self._apply_epc(EpcPattern.parse(values[0]), cid, add)
        else:
            self._apply_numeric(spec.cmp, float(values[0]), cid, add)
        self.n += 1 if add else -1
        self._num_cache.clear()
        self.only_eq = not (self.exists or self._prefix or self._globs or self._epc
                            or self._num or self._num_eq)

    def _apply_glob(self, pat: str, cid: int, add: bool) -> None:
        body = pat[:-1]
        if "*" not in pat and "?" not in pat:
            (_add_to if add else _remove_from)(self.eq, pat, cid)
        elif pat.endswith("*") and "*" not in body and "?" not in body:
            d = self._prefix.setdefault(len(body), {})
            had = body in d
            (_add_to if add else _remove_from)(d, body, cid)
            self._n_prefix += (body in d) - had
            if not d:
                del self._prefix[len(body)]
        elif add:
            self._globs.append((Glob(pat), cid))
        else:
            self._globs = [g for g in self._globs if g[1] != cid]

    def _apply_epc(self, pat: EpcPattern, cid: int, add: bool) -> None:
        k = pat.literal_prefix()
        key = (pat.scheme, len(pat.fields), k)
        # the literal fields joined as written: fields hold no '.', so the text is as
        # distinctive as the tuple, and a value's prefix is found by slicing its text
        prefix = ".".join(str(f) for f in pat.fields[:k])
        buckets = self._epc.setdefault(key, {})
        bucket = buckets.get(prefix)
        if bucket is None:
            bucket = buckets[prefix] = _EpcBucket()
            self._n_epc += 1
        nxt = pat.fields[k] if k < len(pat.fields) else None
        wild = all(f is None for f in pat.fields[k:])
        j = None if wild or isinstance(nxt, tuple) else _later_literal(pat, k)
        if add:
            if wild:
                bucket.wild += pack((cid,))
            elif isinstance(nxt, tuple):
                bucket.ranges.add(nxt[0], nxt[1], (pat, cid))
            elif j is not None:
                field = pat.fields[j]
                assert isinstance(field, str)
                bucket.by_field.setdefault(j, {}).setdefault(field, []).append((pat, cid))
            else:
                bucket.others.append((pat, cid))
            bucket.n += 1
            return
        if wild:
            kept = unpack(bucket.wild)
            kept.remove(cid)
            bucket.wild = pack(kept)
        elif isinstance(nxt, tuple):
            bucket.ranges.remove((pat, cid))
        elif j is not None:
            field = pat.fields[j]
            assert isinstance(field, str)
            at = bucket.by_field[j]
            left = [e for e in at[field] if e[1] != cid]
            if left:
                at[field] = left
            else:
                del at[field]
                if not at:
                    del bucket.by_field[j]
        else:
            bucket.others = [e for e in bucket.others if e[1] != cid]
        bucket.n -= 1
        if not bucket.n:
            del buckets[prefix]
            self._n_epc -= 1
            if not buckets:
                del self._epc[key]

    def _apply_numeric(self, cmp: str, c: float, cid: int, add: bool) -> None:
        if cmp == "eq":
            lst = self._num_eq.setdefault(c, [])
            if add:
                lst.append(cid)
            else:
                lst.remove(cid)
                if not lst:
                    del self._num_eq[c]
            return
        s = self._num.setdefault(cmp, _Sorted())
        if add:
            s.add(c, cid)
        else:
            s.remove(c, cid)
            if not s.ids:
                del self._num[cmp]

    def selectivity(self, spec: OperatorSpec, values: tuple[str, ...]) -> float:
        """A rough probability that an event value satisfies the constraint.

        Values are untyped, so the only evidence is the subscriptions themselves: the more
        distinct operands the slot's equality (or prefix, EPC) index holds, the rarer one
        of them is assumed to be. Only the order matters (choosing access constraints).
        """
        kind = spec.kind
        if kind in ("equals", "in-set") or (kind == "match" and "*" not in values[0]
                                             and "?" not in values[0]):
            return min(1.0, len(values) / max(1, len(self.eq)))
        if kind == "match":
            body = values[0][:-1]
            if values[0].endswith("*") and "*" not in body and "?" not in body:
                return 1.0 / max(1, self._n_prefix)
            return 0.5
        if kind == "epc":
            return 1.0 / max(1, self._n_epc)
        if kind == "numeric":
            if spec.cmp == "eq":
                return 1.0 / max(1, len(self._num_eq))
            return 1.0 if spec.cmp == "ne" else 0.5
        return 1.0

    def satisfied(self, v: str) -> list[int]:
        """Constraints the value satisfies (each once), as one list."""
        buf = bytearray()
        ints: list[int] = []
        self.collect(v, buf, ints)
        return unpack(buf) + ints

    def collect(self, v: str, buf: bytearray, ints: list[int]) -> None:
        """Append the constraints the value satisfies (each once): packed ids to ``buf``,
        single ids to ``ints``."""
        if self.exists:
            buf += self.exists
        hit = self.eq.get(v)
        if hit:
            buf += hit
        if self._prefix:
            for n, d in self._prefix.items():
                if len(v) >= n:
                    hit = d.get(v[:n])
                    if hit:
                        buf += hit
        if self._globs:
            for g, cid in self._globs:
                if g.match(v):
                    ints.append(cid)
        if self._epc:
            self._collect_epc(v, buf, ints)
        if self._num or self._num_eq:
            self._collect_numeric(v, buf, ints)

    def _collect_epc(self, v: str, buf: bytearray, ints: list[int]) -> None:
        # epc_parts inlined, without slicing off the fields' text: values are mostly
        # distinct (one serial each), so each slice is a new string to hash
        t = v.strip()
        i = t.rfind(":")
        if i < 0:
            return
        scheme = _EPC_HEADS.get(t[:i], "")
        if scheme == "":
            scheme = _epc_scheme(t[:i])
        if scheme is None or i == len(t) - 1:
            return
        n = t.count(".", i) + 1
        got: list[str] | None = None
        for (sch, nf, k), buckets in self._epc.items():
            if sch != scheme or nf != n:
                continue
            if k == 0:
                key = ""
            elif k == n - 1:  # the common key: every field but the last (the serial)
                key = t[i + 1 : t.rfind(".")]
            elif k == n:
                key = t[i + 1 :]
            else:
                if got is None:
                    got = t[i + 1 :].split(".")
                key = ".".join(got[:k])
            bucket = buckets.get(key)
            if bucket is None:
                continue
            if bucket.wild:
                buf += bucket.wild
            if bucket.others or bucket.by_field or len(bucket.ranges):
                if got is None:
                    got = t[i + 1 :].split(".")
                for pat, cid in bucket.others:
                    if pat.matches_fields(got):
                        ints.append(cid)
                for j, by_text in bucket.by_field.items():
                    cands = by_text.get(got[j])
                    if cands:
                        for pat, cid in cands:
                            if pat.matches_fields(got):
                                ints.append(cid)
                if len(bucket.ranges):
                    x = EpcPattern.field_number(got[k])
                    if x is not None:
                        for pat, cid in bucket.ranges.stab(x):
                            if pat.matches_fields(got):  # the fields after the range
                                ints.append(cid)

    def _collect_numeric(self, v: str, buf: bytearray, ints: list[int]) -> None:
        hit = self._num_cache.get(v)
        if hit is None:
            found = bytearray()
            self._numeric(v, found)
            if len(self._num_cache) >= NUMERIC_CACHE:
                self._num_cache.clear()
            hit = self._num_cache[v] = bytes(found)
        buf += hit

    def _numeric(self, v: str, buf: bytearray) -> None:
        x = parse_number(v)
        if x is None:
            return
        same = self._num_eq.get(x)
        if same:
            buf += pack(same)
        for cmp, s in self._num.items():
            keys, arr = s.keys, s.arr
            if cmp == "lt":  # x < c: the thresholds above x
                buf += arr[bisect.bisect_right(keys, x) :].data
            elif cmp == "le":
                buf += arr[bisect.bisect_left(keys, x) :].data
            elif cmp == "gt":
                buf += arr[: bisect.bisect_left(keys, x)].data
            elif cmp == "ge":
                buf += arr[: bisect.bisect_right(keys, x)].data
            else:  # ne: every threshold but those equal to x
                buf += arr[: bisect.bisect_left(keys, x)].data
                buf += arr[bisect.bisect_right(keys, x) :].data


def slot_satisfied(slot: SlotIndex, vs: list[str], buf: bytearray, ints: list[int]) -> None:
    """Append the constraints of one slot that the occurrences ``vs`` of its path satisfy:
    under ``all`` (``slot.counted``) every occurrence must satisfy a constraint, under
    ``any`` one must. A constraint listed twice is counted once by the matcher, so the
    occurrences' satisfied sets are united, and only the counted constraints that some
    occurrence satisfies are looked at one by one (mostly none: a few ``all`` conditions
    on a path that most subscriptions test under ``any``)."""
    counted = slot.counted
    if len(vs) == 1 or not counted:
        for v in vs:
            slot.collect(v, buf, ints)
        return
    mine = bytearray()
    extra: list[int] = []
    for v in vs:
        slot.collect(v, mine, extra)
    ids = unpack(mine)
    if counted.isdisjoint(ids) and counted.isdisjoint(extra):
        buf += mine
        ints.extend(extra)
        return
    ids += extra
    counts: dict[int, int] = {}
    get = counts.get
    for c in ids:
        if c in counted:
            counts[c] = get(c, 0) + 1  # each occurrence lists a constraint once
        else:
            ints.append(c)
    k = len(vs)
    ints.extend([c for c, n in counts.items() if n == k])
