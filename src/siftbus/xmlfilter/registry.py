"""The registry of the XML matcher: subscriptions, targets, paths, constraints, filters.

Every subscription's filters are registered here, incrementally: a target once per
distinct target (event-root name index), a path once per distinct path, a constraint once
per distinct (target, path, operator, values, quantifier) in the
:class:`~siftbus.xmlfilter.slots.SlotIndex` of its (target, path), a nested filter once per
target as a constraint evaluated on the event element, and each filter as a row of the
:class:`~siftbus.xmlfilter.table.AccessTable`. A ``#Type`` filter is registered once per
target the event-type hierarchy gives today, and again when the hierarchy changes.
Unsubscribe removes exactly what only that subscription used: when nothing is left, every
structure is empty (``is_empty_index``). Matching is :class:`~siftbus.xmlfilter.matcher.XmlMatcher`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyroaring import BitMap

from siftbus.errors import DuplicateSubscriptionError, UnknownSubscriptionError
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.paths import Trie
from siftbus.xmlfilter.slots import SlotIndex
from siftbus.xmlfilter.subscription import (
    Condition,
    ContentFilter,
    NestedFilter,
    Receiver,
    Subscription,
)
from siftbus.xmlfilter.table import AccessTable
from siftbus.xmlfilter.types import TypeHierarchy
from siftbus.xmlfilter.views import View
from siftbus.xmlfilter.xpath import RelPath, Target


@dataclass(slots=True)
class TargetEntry:
    tid: int
    target: Target
    filters: set[int] = field(default_factory=set)
    unconditional: dict[int, None] = field(default_factory=dict)  # fids, ordered
    paths: Counter[int] = field(default_factory=Counter)  # pid -> number of constraints
    pred_pids: list[tuple[int, str | None]] = field(default_factory=list)
    selectivity: dict[int, BitMap] = field(default_factory=dict)  # pid -> filters needing it
    top: frozenset[int] | None = None  # the pre-check's pids (most required), cached
    texts: tuple[str, ...] = ()  # (target.text,), for ElementMatch
    slots: dict[int, SlotIndex] = field(default_factory=dict)  # pid -> its constraints
    #: constraint id -> nested filter, evaluated on the event element
    nested: dict[int, NestedFilter] = field(default_factory=dict)


def counts_all(c: Condition) -> bool:
    """Does the condition need every occurrence of its path to satisfy it?"""
    return c.quantifier == "all" and c.operator.kind != "exists"


def receiver_key(r: Receiver) -> str:
    """(method, address) as one string, injective and order-preserving: NUL in the method
    is escaped as NUL SOH and the method ends with NUL NUL, which sorts below anything."""
    return r.method.replace("\x00", "\x00\x01") + "\x00\x00" + r.address


class Registry:
    """The subscription index's bookkeeping (see module docstring); thread-safe: every
    change takes the lock that matching one element takes."""

    def __init__(self, compile_min: int = 256) -> None:
        self._lock = threading.Lock()
        self._subs: dict[str, Subscription] = {}
        self._sub_filters: dict[str, list[int]] = {}
        self._digests: dict[str, str] = {}
        self._targets: dict[str, TargetEntry] = {}
        self._tid_entry: dict[int, TargetEntry] = {}
        self._by_exact: dict[str, set[int]] = {}
        self._by_local: dict[str, set[int]] = {}
        self._paths: dict[str, int] = {}
        self._path_obj: dict[int, RelPath] = {}
        self._path_refs: Counter[int] = Counter()
        self._slots: dict[tuple[int, int], SlotIndex] = {}
        self._constraints: dict[tuple[Any, ...], int] = {}  # key -> cid
        # per constraint id (lists indexed by cid; None / empty when free)
        self._con_key: list[tuple[Any, ...] | None] = []
        self._con_cond: list[Condition | None] = []
        self._con_slot: list[tuple[int, int]] = []  # (tid, pid)
        self._con_filters: list[set[int]] = []
        self._con_arr: dict[int, np.ndarray] = {}  # cid -> its filters (counting strategy)
        self._free_cids: list[int] = []
        # per filter id
        self._f_sub: list[str | None] = []
        self._f_rec: list[Receiver | None] = []
        self._f_rkey: list[str] = []
        self._f_tid: list[int] = []
        self._f_cids: list[tuple[int, ...]] = []
        self._f_view: list[View | None] = []
        self._f_index: list[int] = []  # the filter's place in its subscription
        self._views = 0  # filters with a view
        self._free_fids: list[int] = []
        #: the event-type hierarchy, and type name -> subscriptions with a '#Type' target
        self.types = TypeHierarchy()
        self._sub_types: dict[str, set[str]] = {}
        self._nfilters = 0
        self._fsize = np.zeros(64, np.int32)  # filter sizes, for the counting strategy
        self._table = AccessTable(compile_min)
        #: subscription ids by rank, then receivers by rank (compile)
        self._by_rank: list[str | Receiver] = []
        self._by_rank_table = np.empty(0, object)  # and as an object array
        self._tries: dict[frozenset[int], tuple[Trie, bool]] = {}
        #: ancestors-or-self tags -> (located-by-path targets, their trie, has '//' paths)
        self._by_chain: dict[tuple[str, ...], tuple[list[TargetEntry], Trie | None, bool]]
        self._by_chain = {}
        self._next_tid = 0
        self._version = 0
        self._stats = [0, 0, 0, 0, 0, 0]

    # -- registry ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._subs)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._subs

    def get(self, sub_id: str) -> Subscription:
        try:
            return self._subs[sub_id]
        except KeyError:
            raise UnknownSubscriptionError(f"no subscription {quoted(sub_id)}") from None

    def subscriptions(self) -> Iterator[Subscription]:
        return iter(list(self._subs.values()))

    def filter_owner(self, fid: int) -> tuple[str, int]:
        """(subscription id, index of the content filter in it) of a matched filter id."""
        sid = self._f_sub[fid]
        assert sid is not None
        return sid, self._f_index[fid]

    def filter_view(self, fid: int) -> View | None:
        """What of the event the notification of a matched filter carries (None: all)."""
        return self._f_view[fid]

    @property
    def has_views(self) -> bool:
        """Does any registered filter carry less than the whole event?"""
        return self._views > 0

    @property
    def version(self) -> int:
        """Incremented by every subscribe and unsubscribe."""
        return self._version

    def root_tags(self) -> tuple[set[str], set[str]]:
        """(exact Clark tags, local names in any namespace) of every target's event root."""
        with self._lock:
            return set(self._by_exact), set(self._by_local)

    def is_empty_index(self) -> bool:
        """True when no internal structure is left (all subscriptions removed)."""
        return not (self._subs or self._targets or self._paths or self._slots
                    or self._constraints or self._nfilters or self._by_exact
                    or self._by_local or self._digests or self._fsize.any() or self._tries
                    or any(hit[0] for hit in self._by_chain.values())
                    or self._con_arr or any(self._con_filters)
                    or self._views or self._sub_types or any(f is not None for f in self._f_view)
                    or any(s is not None for s in self._f_sub) or not self._table.is_empty())

    # -- subscribe / unsubscribe ------------------------------------------------------
    def subscribe(self, sub: Subscription) -> str:
        """Register a subscription; returns its id.

        Raises :class:`~siftbus.errors.DuplicateSubscriptionError` for an exact duplicate
        (same digest) or an id already in use.
        """
        with self._lock:
            if sub.digest in self._digests:
                raise DuplicateSubscriptionError(
                    f"duplicate of subscription {quoted(self._digests[sub.digest])}",
                    field=sub.id)
            if sub.id in self._subs:
                raise DuplicateSubscriptionError(
                    f"subscription id {quoted(sub.id)} is already in use", field=sub.id)
            self._subs[sub.id] = sub
            self._digests[sub.digest] = sub.id
            self._register(sub)
            self._version += 1
            return sub.id

    def _register(self, sub: Subscription) -> None:
        """The subscription's filters into the index: one per filter, or for a ``#Type``
        target one per target the hierarchy gives the type today."""
        fids: list[int] = []
        for i, f in enumerate(sub.filters):
            name = f.target.type_name
            if name is None:
                fids.append(self._add_filter(sub, i, f, f.target))
                continue
            self._sub_types.setdefault(name, set()).add(sub.id)
            for t in self.types.resolve(name):
                fids.append(self._add_filter(sub, i, f, t))
        self._sub_filters[sub.id] = fids

    def _unregister(self, sub: Subscription) -> None:
        for fid in self._sub_filters.pop(sub.id):
            self._remove_filter(fid)
        for f in sub.filters:
            name = f.target.type_name
            if name is not None:
                users = self._sub_types.get(name)
                if users is not None:
                    users.discard(sub.id)
                    if not users:
                        del self._sub_types[name]

    # -- the event-type hierarchy -----------------------------------------------------
    def define_type(self, name: str, entries: Iterable[str],
                    namespaces: Mapping[str, str] | None = None) -> None:
        """Define (or redefine) an event type; subscriptions that use it, directly or
        through a base type, match by the new definition from the next event on."""
        with self._lock:
            self.types.define(name, entries, namespaces)
            self._retype(name)

    def undefine_type(self, name: str) -> None:
        """Forget an event type: subscriptions through it match nothing until it is
        defined again."""
        with self._lock:
            self._retype(name, undefine=True)

    def _retype(self, name: str, *, undefine: bool = False) -> None:
        affected = self.types.using({name})
        if undefine:
            self.types.undefine(name)
        sids = sorted({sid for t in affected for sid in self._sub_types.get(t, ())})
        for sid in sids:
            sub = self._subs[sid]
            self._unregister(sub)
            self._register(sub)
        if sids:
            self._version += 1

    def subscribe_all(self, subs: Iterable[Subscription]) -> list[str]:
        return [self.subscribe(s) for s in subs]

    def unsubscribe(self, sub_id: str) -> Subscription:
        """Remove a subscription and everything only it used; returns it."""
        with self._lock:
            sub = self._subs.pop(sub_id, None)
            if sub is None:
                raise UnknownSubscriptionError(f"no subscription {quoted(sub_id)}")
            del self._digests[sub.digest]
            self._unregister(sub)
            self._version += 1
            return sub

    def _alloc_fid(self) -> int:
        if self._free_fids:
            return self._free_fids.pop()
        fid = len(self._f_sub)
        self._f_sub.append(None)
        self._f_rec.append(None)
        self._f_rkey.append("")
        self._f_tid.append(-1)
        self._f_cids.append(())
        self._f_view.append(None)
        self._f_index.append(-1)
        if fid >= len(self._fsize):
            new = np.zeros(2 * len(self._fsize), np.int32)
            new[: len(self._fsize)] = self._fsize
            self._fsize = new
        return fid

    def _alloc_cid(self) -> int:
        if self._free_cids:
            return self._free_cids.pop()
        cid = len(self._con_key)
        self._con_key.append(None)
        self._con_cond.append(None)
        self._con_slot.append((-1, -1))
        self._con_filters.append(set())
        return cid

    def _intern_path(self, path: RelPath) -> int:
        key = path.canonical()
        pid = self._paths.get(key)
        if pid is None:
            pid = len(self._path_obj)
            while pid in self._path_obj:
                pid += 1
            self._paths[key] = pid
            self._path_obj[pid] = path
            self._invalidate()
        self._path_refs[pid] += 1
        return pid

    def _release_path(self, pid: int) -> None:
        self._path_refs[pid] -= 1
        if self._path_refs[pid] == 0:
            del self._path_refs[pid]
            del self._paths[self._path_obj.pop(pid).canonical()]
            self._invalidate()

    def _target(self, target: Target) -> TargetEntry:
        key = target.canonical()
        entry = self._targets.get(key)
        if entry is None:
            entry = TargetEntry(self._next_tid, target, texts=(target.text,))
            self._next_tid += 1
            self._targets[key] = entry
            self._tid_entry[entry.tid] = entry
            root = target.root
            if root.uri is None:
                self._by_local.setdefault(root.local, set()).add(entry.tid)
            else:
                self._by_exact.setdefault(root.clark, set()).add(entry.tid)
            for p in target.predicates:
                entry.pred_pids.append((self._intern_path(p.path), p.literal))
            self._invalidate()
        return entry

    def _drop_target(self, entry: TargetEntry) -> None:
        del self._targets[entry.target.canonical()]
        del self._tid_entry[entry.tid]
        root = entry.target.root
        table, key = ((self._by_local, root.local) if root.uri is None
                      else (self._by_exact, root.clark))
        table[key].discard(entry.tid)
        if not table[key]:
            del table[key]
        for pid, _ in entry.pred_pids:
            self._release_path(pid)
        self._invalidate()

    def _constraint(self, entry: TargetEntry, c: Condition) -> int:
        # most conditions repeat a constraint: look it up before taking a path reference
        pid = self._paths.get(c.path.canonical())
        if pid is not None:
            cid = self._constraints.get((entry.tid, pid, c.operator.name, c.values,
                                         c.quantifier))
            if cid is not None:
                return cid
        pid = self._intern_path(c.path)
        key = (entry.tid, pid, c.operator.name, c.values, c.quantifier)
        cid = self._alloc_cid()
        self._constraints[key] = cid
        self._con_key[cid] = key
        self._con_cond[cid] = c
        self._con_slot[cid] = (entry.tid, pid)
        slot = self._slots.get((entry.tid, pid))
        if slot is None:
            slot = self._slots[(entry.tid, pid)] = entry.slots[pid] = SlotIndex()
        slot.add(c.operator, c.values, cid)
        if counts_all(c):
            slot.counted.add(cid)
        entry.paths[pid] += 1
        if entry.paths[pid] == 1:
            self._invalidate()
        return cid

    def _add_filter(self, sub: Subscription, index: int, f: ContentFilter, target: Target
                    ) -> int:
        entry = self._target(target)
        fid = self._alloc_fid()
        cids: list[int] = []
        constraint = self._constraint
        for c in f.conditions:
            cid = constraint(entry, c)
            if cid not in cids:
                cids.append(cid)
        if f.nested:
            for nf in f.nested:
                cid = self._nested_constraint(entry, nf)
                if cid not in cids:
                    cids.append(cid)
            self._f_view[fid] = View.of(f)
            self._views += 1
        elif f.visible is not None:
            self._f_view[fid] = View.of(f)
            self._views += 1
        con_filters, con_arr = self._con_filters, self._con_arr
        for cid in cids:
            con_filters[cid].add(fid)
            if con_arr:
                con_arr.pop(cid, None)
        self._f_index[fid] = index
        self._f_sub[fid] = sub.id
        rec = sub.receiver
        self._f_rec[fid] = rec
        self._f_rkey[fid] = receiver_key(rec)
        self._f_tid[fid] = entry.tid
        self._f_cids[fid] = tuple(cids)
        n = len(cids)
        self._fsize[fid] = n
        self._nfilters += 1
        entry.filters.add(fid)
        # until the next compile chooses by the slots' estimates, the constraint with the
        # fewest filters is the access (any of its constraints is correct)
        if n == 1:
            self._table.add(fid, cids[0], ())
        elif n == 2:
            a, b = cids
            if len(con_filters[b]) < len(con_filters[a]):
                a, b = b, a
            self._table.add(fid, a, (b,))
        elif n:
            access = min(cids, key=lambda c: len(con_filters[c]))
            self._table.add(fid, access, tuple([c for c in cids if c != access]))
        else:
            entry.unconditional[fid] = None
        con_slot, selectivity = self._con_slot, entry.selectivity
        seen = -1
        for cid in cids:
            pid = con_slot[cid][1]
            if pid < 0 or pid == seen:  # a nested filter's constraint has no path
                continue
            seen = pid
            bm = selectivity.get(pid)
            if bm is None:
                bm = selectivity[pid] = BitMap()
            bm.add(fid)  # a second add of the same fid is a no-op
        entry.top = None
        return fid

    def _nested_constraint(self, entry: TargetEntry, nf: NestedFilter) -> int:
        """A nested filter as a constraint of its target: evaluated on the event element
        (no slot), shared by the filters that nest the same filter."""
        key = (entry.tid, -1, "nested", nf.key)
        cid = self._constraints.get(key)
        if cid is not None:
            return cid
        cid = self._alloc_cid()
        self._constraints[key] = cid
        self._con_key[cid] = key
        self._con_slot[cid] = (entry.tid, -1)
        entry.nested[cid] = nf
        self._invalidate()  # the chain cache remembers whether a target nests filters
        return cid

    def _access_cost(self, cid: int) -> tuple[float, int]:
        c = self._con_cond[cid]
        if c is None:  # a nested filter: evaluated on demand, never a good access
            return (2.0, len(self._con_filters[cid]))
        sel = self._slots[self._con_slot[cid]].selectivity(c.operator, c.values)
        return (sel, len(self._con_filters[cid]))

    def _remove_filter(self, fid: int) -> None:
        entry = self._tid_entry[self._f_tid[fid]]
        cids = self._f_cids[fid]
        self._table.remove(fid)
        self._f_sub[fid] = None
        self._f_rec[fid] = None
        self._f_rkey[fid] = ""
        self._f_tid[fid] = -1
        self._f_cids[fid] = ()
        if self._f_view[fid] is not None:
            self._views -= 1
        self._f_view[fid] = None
        self._f_index[fid] = -1
        self._fsize[fid] = 0
        self._nfilters -= 1
        self._free_fids.append(fid)
        entry.filters.discard(fid)
        entry.unconditional.pop(fid, None)
        for cid in cids:
            self._con_filters[cid].discard(fid)
            self._con_arr.pop(cid, None)
            pid = self._con_slot[cid][1]
            bm = entry.selectivity.get(pid)
            if bm is not None:
                bm.discard(fid)
                if not bm:
                    del entry.selectivity[pid]
            if not self._con_filters[cid]:
                self._drop_constraint(entry, cid)
        entry.top = None
        if not entry.filters:
            self._drop_target(entry)

    def _drop_constraint(self, entry: TargetEntry, cid: int) -> None:
        key = self._con_key[cid]
        cond = self._con_cond[cid]
        assert key is not None
        tid, pid = self._con_slot[cid]
        del self._constraints[key]
        self._con_key[cid] = None
        self._con_cond[cid] = None
        self._con_slot[cid] = (-1, -1)
        self._free_cids.append(cid)
        if cond is None:  # a nested filter
            del entry.nested[cid]
            self._invalidate()
            return
        slot = self._slots[(tid, pid)]
        slot.remove(cond.operator, cond.values, cid)
        slot.counted.discard(cid)
        if len(slot) == 0:
            del self._slots[(tid, pid)]
            del entry.slots[pid]
        entry.paths[pid] -= 1
        if entry.paths[pid] == 0:
            del entry.paths[pid]
            self._invalidate()
        self._release_path(pid)

    def _invalidate(self) -> None:
        """Targets or paths changed: drop the tries and the per-chain candidates."""
        self._tries.clear()
        self._by_chain.clear()
