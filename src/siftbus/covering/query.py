"""Covering queries on a large, changing profile set.

For a profile ``p`` the :class:`CoveringIndex` answers which stored profiles cover ``p``,
which ``p`` covers, which ``p`` covers *directly* (nothing stored lies strictly between)
and which are equivalent to it. A linear scan costs one covering test per stored profile;
here each event type keeps column arrays (numpy) of every profile's per-attribute key
hull ``[lo, hi]`` and a constrained/free flag, so one vectorised pass keeps only the
profiles whose hulls can contain (or lie inside) ``p``'s, and the exact test runs on those
few. Necessary conditions used:

* q ⊒ p  ⇒  q constrains no attribute p leaves free, and hull(q.a) ⊇ hull(p.a);
* p ⊒ q  ⇒  hull(q.a) ⊆ hull(p.a) for every attribute p constrains.

Open kinds have keys wider than int64 (``timestamp`` nanoseconds over years 1-9999, ``ip``
as 128 bits) and ``int`` spans all of int64, so a hull column holds each key through a
monotone map into int64 (:class:`_Squash`: the identity when the domain fits, otherwise
the offset from the domain's least key shifted right). The conditions above use ``<=``
only, which a monotone map preserves, so the filter keeps every true candidate and the
exact test decides; spans are computed on Python integers, never in int64.

Equivalence is a hash lookup: normalised profiles with equal filters have equal keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator

import numpy as np

from siftbus.covering.keymap import KeySquash as _Squash
from siftbus.covering.relations import covers, equivalent
from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.match import kernel
from siftbus.model import EventType, IntervalSet, Profile, StringConstraint
from siftbus.model.domain import StringDomain

_COMPILED_FROM = 64  # candidates from which the compiled filter pays off (when loaded)
_WORD = 63  # attributes whose constrained/free flags share one int64 signature


class _SlotSet:
    """The slots of one signature group as a growable int64 array: adding and removing
    a slot cost O(1) (removal moves the last slot into the gap), and queries read the
    array as it is, instead of rebuilding it after every change."""

    __slots__ = ("arr", "n", "pos")

    def __init__(self) -> None:
        self.arr = np.empty(8, dtype=np.int64)
        self.n = 0
        self.pos: dict[int, int] = {}  # slot -> its index in arr

    def __len__(self) -> int:
        return self.n

    def add(self, slot: int) -> None:
        if self.n == len(self.arr):
            self.arr = np.concatenate((self.arr, np.empty(self.n, dtype=np.int64)))
        self.arr[self.n] = slot
        self.pos[slot] = self.n
        self.n += 1

    def remove(self, slot: int) -> None:
        i = self.pos.pop(slot)
        self.n -= 1
        if i != self.n:
            moved = int(self.arr[self.n])
            self.arr[i] = moved
            self.pos[moved] = i

    def view(self) -> np.ndarray:
        """The slots, in no particular order (a view: read it, never change it)."""
        return self.arr[:self.n]


class _TypeStore:
    """Column arrays for the profiles of one event type; slots are reused after removal.

    Per slot: the key hull ``[lo, hi]`` of every ordered attribute (the whole domain when
    free), and which attributes are constrained — as bits of one int64 ``sig`` for the
    first 63 attributes (one vector operation tests "constrains every attribute p
    constrains") and as a bool row per further attribute; and the slots grouped by their
    exact set of constrained attributes, for "constrains only attributes p constrains".
    """

    def __init__(self, etype: EventType) -> None:
        self.etype = etype
        self.ordered = [a.position for a in etype.attributes
                        if not isinstance(a.domain, StringDomain)]
        self.row = {pos: i for i, pos in enumerate(self.ordered)}
        bounds = [(a.domain.min_key, a.domain.max_key) for a in etype.attributes
                  if not isinstance(a.domain, StringDomain)]
        self.bounds = bounds  # Python integers: spans beyond int64 stay exact
        self.squash = [_Squash(lo, hi) for lo, hi in bounds]
        self.dom_lo = np.array([f(b[0]) for f, b in zip(self.squash, bounds, strict=True)],
                               dtype=np.int64)
        self.dom_hi = np.array([f(b[1]) for f, b in zip(self.squash, bounds, strict=True)],
                               dtype=np.int64)
        cap = 64
        self.lo = np.zeros((len(self.ordered), cap), dtype=np.int64)
        self.hi = np.zeros((len(self.ordered), cap), dtype=np.int64)
        self.sig = np.zeros(cap, dtype=np.int64)
        self.cons_high = np.zeros((max(0, len(etype.attributes) - _WORD), cap), dtype=bool)
        self.alive = np.zeros(cap, dtype=bool)
        self.profiles: list[Profile | None] = [None] * cap
        self.keys: list[Hashable] = [None] * cap  # what names each slot's profile
        self.free: list[int] = list(range(cap - 1, -1, -1))
        self.top = 0  # slots at and above are unused: queries look at [:top] only
        # Live slots by their full signature (every attribute, any count): a profile
        # covering p constrains a subset of p's attributes, so only those groups count.
        self.groups: dict[int, _SlotSet] = {}
        self.slot_sig: dict[int, int] = {}

    def _grow(self) -> None:
        old = self.alive.shape[0]
        cap = old * 2

        def widen(a: np.ndarray) -> np.ndarray:
            out = np.zeros((*a.shape[:-1], cap), dtype=a.dtype)
            out[..., :old] = a
            return out

        self.lo, self.hi, self.sig = widen(self.lo), widen(self.hi), widen(self.sig)
        self.cons_high, self.alive = widen(self.cons_high), widen(self.alive)
        self.profiles.extend([None] * old)
        self.keys.extend([None] * old)
        self.free.extend(range(cap - 1, old - 1, -1))

    @staticmethod
    def signature(p: Profile) -> int:
        sig = 0
        for c in p.conditions:
            if c.position < _WORD:
                sig |= 1 << c.position
        return sig

    def add(self, p: Profile, key: Hashable) -> int:
        if not self.free:
            self._grow()
        slot = self.free.pop()
        self.top = max(self.top, slot + 1)
        self.lo[:, slot] = self.dom_lo
        self.hi[:, slot] = self.dom_hi
        self.sig[slot] = self.signature(p)
        if len(self.cons_high):
            self.cons_high[:, slot] = False
        for c in p.conditions:
            if c.position >= _WORD:
                self.cons_high[c.position - _WORD, slot] = True
            if isinstance(c.constraint, IntervalSet):
                r = self.row[c.position]
                self.lo[r, slot] = self.squash[r](c.constraint.lo)
                self.hi[r, slot] = self.squash[r](c.constraint.hi)
        self.alive[slot] = True
        self.profiles[slot] = p
        self.keys[slot] = key
        full = self.full_signature(p)
        group = self.groups.get(full)
        if group is None:
            group = self.groups[full] = _SlotSet()
        group.add(slot)
        self.slot_sig[slot] = full
        return slot

    def remove(self, slot: int) -> None:
        self.alive[slot] = False
        self.profiles[slot] = None
        self.keys[slot] = None
        self.free.append(slot)
        full = self.slot_sig.pop(slot)
        group = self.groups[full]
        group.remove(slot)
        if not group:
            del self.groups[full]

    @staticmethod
    def full_signature(p: Profile) -> int:
        sig = 0
        for c in p.conditions:
            sig |= 1 << c.position
        return sig

    def _subset_slots(self, psig: int) -> np.ndarray:
        """Slots of the groups whose signature is a subset of ``psig``: enumerate the
        subsets when there are fewer of them than groups, else test every group."""
        if (1 << psig.bit_count()) <= len(self.groups):
            sigs = []
            sub = psig
            while True:
                if sub in self.groups:
                    sigs.append(sub)
                if sub == 0:
                    break
                sub = (sub - 1) & psig
        else:
            sigs = [sig for sig in self.groups if not sig & ~psig]
        arrays = [self.groups[sig].view() for sig in sigs]
        if not arrays:
            return np.empty(0, dtype=np.int64)
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    def candidates_covering(self, p: Profile) -> np.ndarray:
        # q may constrain only attributes p constrains (a non-full constraint cannot
        # contain the whole domain p leaves open): only those signature groups count,
        # and the interval tests run on their members alone.
        idx = self._subset_slots(self.full_signature(p))
        if len(idx) > _COMPILED_FROM and kernel.name() == "numba":
            from siftbus.covering.hulls_numba import hulls_containing

            rows = [(self.row[c.position], c.constraint) for c in p.conditions
                    if isinstance(c.constraint, IntervalSet)]
            return hulls_containing(
                idx, self.lo, self.hi, np.array([r for r, _ in rows], np.int64),
                np.array([self.squash[r](ic.lo) for r, ic in rows], np.int64),
                np.array([self.squash[r](ic.hi) for r, ic in rows], np.int64))
        for c in p.conditions:
            if not len(idx):
                break
            if isinstance(c.constraint, IntervalSet):
                r = self.row[c.position]
                f = self.squash[r]
                keep = (self.lo[r, idx] <= f(c.constraint.lo)) & (self.hi[r, idx]
                                                                  >= f(c.constraint.hi))
                idx = idx[keep]
        return idx

    def candidates_covered(self, p: Profile) -> np.ndarray:
        top = self.top
        want = self.signature(p)
        ordered = [c for c in p.conditions if isinstance(c.constraint, IntervalSet)]
        if ordered:
            # Start from the narrowest condition relative to its domain: fewest survivors.
            def share(c: object) -> float:
                assert isinstance(c, type(ordered[0]))
                r = self.row[c.position]
                assert isinstance(c.constraint, IntervalSet)
                span = self.bounds[r][1] - self.bounds[r][0] + 1
                return (c.constraint.hi - c.constraint.lo + 1) / span

            first = min(ordered, key=share)
            assert isinstance(first.constraint, IntervalSet)
            r = self.row[first.position]
            f = self.squash[r]
            mask = self.lo[r, :top] >= f(first.constraint.lo)
            mask &= self.hi[r, :top] <= f(first.constraint.hi)
            mask &= self.alive[:top]
            idx = np.flatnonzero(mask)
            rest = [c for c in ordered if c is not first]
        else:
            idx = np.flatnonzero(self.alive[:top])
            rest = []
        # q must constrain every attribute p constrains.
        idx = idx[(self.sig[idx] & np.int64(want)) == want]
        for c in p.conditions:
            if c.position >= _WORD:
                idx = idx[self.cons_high[c.position - _WORD, idx]]
        for c in rest:
            if not len(idx):
                break
            assert isinstance(c.constraint, IntervalSet)
            r = self.row[c.position]
            f = self.squash[r]
            keep = (self.lo[r, idx] >= f(c.constraint.lo)) & (self.hi[r, idx]
                                                              <= f(c.constraint.hi))
            idx = idx[keep]
        return idx


def _breadth(p: Profile) -> float:
    """A size measure that never decreases from a profile to one covering it (log of the
    number of events, strings counted by how open they are)."""
    total = 0.0
    for a in p.etype.attributes:
        c = p.constraint(a.name)
        if isinstance(a.domain, StringDomain):
            if c is None:
                total += 100.0
            else:
                assert isinstance(c, StringConstraint)
                total += (math.log(len(c.allowed)) if c.allowed is not None
                          else 60.0 - len(c.prefix))
        else:
            assert c is None or isinstance(c, IntervalSet)
            size = a.domain.size if c is None else c.size
            total += math.log(size)
    return total


class CoveringIndex:
    """A profile set answering covering queries; profiles may be added and removed.

    A profile is named by its id, or by the ``key`` it was added with (a structure
    indexing its own nodes: :meth:`covering_keys` and :meth:`covered_keys` then answer
    those keys, with no copy of the profile under a made-up id).
    """

    def __init__(self, profiles: Iterable[Profile] = ()) -> None:
        # By type name, then by the type itself: two schemas may use one name for
        # different types (and hashing a whole EventType per query would cost more).
        self._stores: dict[str, list[_TypeStore]] = {}
        self._slots: dict[Hashable, tuple[_TypeStore, int]] = {}
        self._by_key: dict[object, dict[Hashable, Profile]] = {}
        self.exact_tests = 0
        """Exact covering tests run on candidates (the rest were pruned by hulls)."""
        for p in profiles:
            self.add(p)

    def add(self, profile: Profile, key: Hashable = None) -> None:
        """Add ``profile`` under ``key`` (default: its id)."""
        k = profile.id if key is None else key
        if k in self._slots:
            raise DuplicateProfileError(f"profile id {k!r} is already registered",
                                        field=str(k))
        store = self._store_for(profile)
        if store is None:
            store = _TypeStore(profile.etype)
            self._stores.setdefault(profile.type_name, []).append(store)
        self._slots[k] = (store, store.add(profile, k))
        self._by_key.setdefault(profile.filter_key, {})[k] = profile

    def remove(self, profile_id: Hashable) -> Profile:
        """Remove the profile added under this id (or key)."""
        try:
            store, slot = self._slots.pop(profile_id)
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=str(profile_id)) from None
        p = store.profiles[slot]
        assert p is not None
        store.remove(slot)
        same = self._by_key[p.filter_key]
        del same[profile_id]
        if not same:
            del self._by_key[p.filter_key]
        return p

    def get(self, profile_id: Hashable) -> Profile:
        try:
            store, slot = self._slots[profile_id]
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=str(profile_id)) from None
        p = store.profiles[slot]
        assert p is not None
        return p

    def profiles(self) -> Iterator[Profile]:
        return iter([self.get(pid) for pid in self._slots])

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._slots

    # --- queries ------------------------------------------------------------------

    def _store_for(self, p: Profile) -> _TypeStore | None:
        for store in self._stores.get(p.etype.name, ()):
            if store.etype is p.etype or store.etype == p.etype:
                return store
        return None

    def _pick(self, store: _TypeStore, slots: np.ndarray, test: Callable[[Profile], bool],
              p: Profile, strict: bool) -> list[Profile]:
        out = []
        for s in slots.tolist():
            q = store.profiles[s]
            assert q is not None
            if q.id == p.id:
                continue
            self.exact_tests += 1
            if test(q) and not (strict and equivalent(p, q)):
                out.append(q)
        out.sort(key=lambda q: q.id)
        return out

    def covering(self, p: Profile, *, strict: bool = False) -> list[Profile]:
        """Stored profiles (other than ``p`` itself) covering ``p``, sorted by id; with
        ``strict``, not the equivalent ones."""
        store = self._store_for(p)
        if store is None:
            return []
        return self._pick(store, store.candidates_covering(p), lambda q: covers(q, p), p,
                          strict)

    def covered(self, p: Profile, *, strict: bool = False) -> list[Profile]:
        """Stored profiles (other than ``p`` itself) that ``p`` covers, sorted by id."""
        store = self._store_for(p)
        if store is None:
            return []
        return self._pick(store, store.candidates_covered(p), lambda q: covers(p, q), p,
                          strict)

    def is_covered(self, p: Profile, *, strict: bool = False) -> bool:
        """Whether some other stored profile covers ``p``."""
        store = self._store_for(p)
        if store is None:
            return False
        for s in store.candidates_covering(p).tolist():
            q = store.profiles[s]
            assert q is not None
            if q.id != p.id and covers(q, p) and not (strict and equivalent(p, q)):
                return True
        return False

    def equivalent(self, p: Profile) -> list[Profile]:
        """Stored profiles (other than ``p``) matching exactly the events ``p`` matches."""
        same = self._by_key.get(p.filter_key, {})
        return sorted((q for q in same.values() if q.id != p.id and q.etype == p.etype),
                      key=lambda q: q.id)

    def covering_keys(self, p: Profile, *, exclude: Hashable = None) -> list[Hashable]:
        """The keys of every stored profile covering ``p`` (equivalent ones included),
        but ``exclude``; in no particular order."""
        store = self._store_for(p)
        if store is None:
            return []
        return self._keys(store, store.candidates_covering(p), lambda q: covers(q, p),
                          exclude)

    def covered_keys(self, p: Profile, *, exclude: Hashable = None) -> list[Hashable]:
        """The keys of every stored profile ``p`` covers (equivalent ones included), but
        ``exclude``; in no particular order."""
        store = self._store_for(p)
        if store is None:
            return []
        return self._keys(store, store.candidates_covered(p), lambda q: covers(p, q),
                          exclude)

    def _keys(self, store: _TypeStore, slots: np.ndarray, test: Callable[[Profile], bool],
              exclude: Hashable) -> list[Hashable]:
        out = []
        profiles, keys = store.profiles, store.keys
        for s in slots.tolist():
            k = keys[s]
            if k is exclude or k == exclude:
                continue
            q = profiles[s]
            assert q is not None
            self.exact_tests += 1
            if test(q):
                out.append(k)
        return out

    def directly_covered(self, p: Profile) -> list[Profile]:
        """Profiles ``p`` strictly covers with no stored profile strictly in between
        (the immediate successors of ``p`` were it in a filters poset), sorted by id."""
        below = self.covered(p, strict=True)
        return _maximal(below)

    def directly_covering(self, p: Profile) -> list[Profile]:
        """Profiles strictly covering ``p`` with none strictly in between."""
        above = self.covering(p, strict=True)
        # Minimal elements: reverse the order (narrowest first) and the relation.
        return _maximal(above, reverse=True)


def _maximal(items: list[Profile], *, reverse: bool = False) -> list[Profile]:
    """The elements no other element strictly covers (``reverse``: strictly covered by).

    Processing widest first, a covered element usually meets its coverer before it; a
    final pass settles ties in the size measure, so the result is exact either way.
    """
    def above(a: Profile, b: Profile) -> bool:  # a strictly beyond b in the wanted order
        return (covers(a, b) if not reverse else covers(b, a)) and not equivalent(a, b)

    ordered = sorted(items, key=_breadth, reverse=not reverse)
    keep: list[Profile] = []
    for q in ordered:
        if not any(above(m, q) for m in keep):
            keep.append(q)
    # Equivalent profiles never exclude each other, so all of a maximal filter's stay.
    final = [q for q in keep if not any(m is not q and above(m, q) for m in keep)]
    return sorted(final, key=lambda q: q.id)


__all__ = ["CoveringIndex"]
