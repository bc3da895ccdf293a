"""The counting matcher: target index, attribute-path index, constraint index, access table.

Steps per located element (thesis §5.5.7, with §4.7's bugs fixed):

1. *Targets*: candidate targets by the element's name, then the ancestor path, then the
   predicates (evaluated on the complete subtree, so a discriminator below the root works).
2. *Pre-check* (optional, ``precheck=True``): for the ``precheck_rounds`` paths required by
   most filters of the target, every filter requiring a path missing from the event is dead.
   Exclusion is per *filter*, so a receiver is only dropped when all its filters are dead
   (the thesis excluded receivers, losing matches of receivers with several filters). When
   every filter of the target is dead the event is dropped before any value is compared.
3. *Attribute paths*: one walk over the event subtree guided by a trie of the registered
   paths collects each path's values (all occurrences), :mod:`~siftbus.xmlfilter.paths`.
4. *Values*: per (target, path) a :class:`~siftbus.xmlfilter.slots.SlotIndex` lists the
   satisfied constraints (integer ids) per value; the quantifier is applied over all
   occurrences, so each constraint is satisfied (and counted) at most once per event.
5. *Counting*: a filter matches when all of its distinct constraints are satisfied.
   ``strategy="access"`` (the default) looks up only the filters whose *access
   constraint* (the rarest of theirs) holds, in the compiled
   :class:`~siftbus.xmlfilter.table.AccessTable` (numba, integer arrays), and checks their
   other constraints against the event's satisfied set. ``strategy="counting"`` is Siena's
   algorithm literally (every satisfied constraint increments the counter of each of its
   filters; a filter matches when its counter reaches its size), with numpy.
6. *Receivers*: disjunction over filters; the receivers of matched filters, as a set.

Identical constraints (same target, path, operator, values, quantifier) are shared between
filters. Subscribe and unsubscribe take the same lock as matching one element, so an element
is matched against one consistent set of subscriptions.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Literal, NamedTuple

import numpy as np
from pyroaring import BitMap

from siftbus.errors import DuplicateSubscriptionError, UnknownSubscriptionError
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.paths import Trie, Values, values_list, walk
from siftbus.xmlfilter.slots import SlotIndex, pack, slot_satisfied
from siftbus.xmlfilter.subscription import Condition, Receiver, Subscription
from siftbus.xmlfilter.table import AccessTable, choose_access
from siftbus.xmlfilter.xpath import RelPath, Target

Strategy = Literal["access", "counting"]


@dataclass(frozen=True, slots=True)
class MatcherStats:
    """Counters since the matcher was created (or :meth:`XmlMatcher.reset_stats`)."""

    elements: int
    """Elements offered by the splitter (candidate event roots)."""
    events: int
    """Elements located as events by at least one target (ancestors and predicates hold)."""
    matched_events: int
    """Events with at least one receiver."""
    precheck_dropped: int
    """(event, target) evaluations skipped because the pre-check found every filter dead."""
    constraints_satisfied: int
    """Satisfied constraints summed over events (step 4 output)."""
    counters: int
    """Filters that matched through the counting step (step 5 output; for the literal
    counting strategy: every filter counter touched)."""


@dataclass(slots=True)
class _TargetEntry:
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
    receivers: Counter[Receiver] = field(default_factory=Counter)


class ElementMatch(NamedTuple):
    """The outcome for one element located as an event by at least one target.

    A named tuple, not a frozen dataclass: one is made per event, and a tuple is built in
    C (a frozen dataclass sets each field through ``object.__setattr__``, about a
    microsecond per record).
    """

    targets: tuple[str, ...]
    """Texts of the targets that located the element."""
    subscriptions: tuple[str, ...]
    """Ids of matched subscriptions, sorted."""
    receivers: tuple[Receiver, ...]
    """Distinct receivers of the matched subscriptions, sorted."""
    filters: tuple[int, ...] = ()
    """The matcher's ids of the matched content filters (for views of the event)."""


def _local(tag: str) -> str:
    return tag[tag.index("}") + 1 :] if tag[:1] == "{" else tag


def _pick(items: list[Any], ranks: list[int]) -> tuple[Any, ...]:
    """``tuple(items[r] for r in ranks)``, made in C."""
    if len(ranks) == 1:
        return (items[ranks[0]],)
    return itemgetter(*ranks)(items)


def _counts_all(c: Condition) -> bool:
    """Does the condition need every occurrence of its path to satisfy it?"""
    return c.quantifier == "all" and c.operator.kind != "exists"


def _fresh(s: str) -> str:
    """A new string object equal to ``s`` (``str(s)`` and slicing return ``s`` itself)."""
    return (s + " ")[:-1]


def _receiver_key(r: Receiver) -> str:
    """(method, address) as one string, injective and order-preserving: NUL in the method
    is escaped as NUL SOH and the method ends with NUL NUL, which sorts below anything."""
    return r.method.replace("\x00", "\x00\x01") + "\x00\x00" + r.address


class XmlMatcher:
    """The dynamic subscription index and counting matcher (see module docstring).

    ``compile_min``: the access table compiles its delta of changed filters into new
    arrays when the delta passes a quarter of the table, and at least this many filters.
    """

    def __init__(
        self,
        *,
        strategy: Strategy = "access",
        precheck: bool = True,
        precheck_rounds: int = 4,
        compile_min: int = 256,
    ) -> None:
        if strategy not in ("access", "counting"):
            raise ValueError(f"unknown strategy {strategy!r}")
        self.strategy: Strategy = strategy
        self.precheck = precheck
        self.precheck_rounds = precheck_rounds
        self._lock = threading.Lock()
        self._subs: dict[str, Subscription] = {}
        self._sub_filters: dict[str, list[int]] = {}
        self._digests: dict[str, str] = {}
        self._targets: dict[str, _TargetEntry] = {}
        self._tid_entry: dict[int, _TargetEntry] = {}
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
        self._con_any: list[bool] = []
        self._con_arr: dict[int, np.ndarray] = {}  # cid -> its filters (counting strategy)
        self._free_cids: list[int] = []
        # per filter id
        self._f_sub: list[str | None] = []
        self._f_rec: list[Receiver | None] = []
        self._f_rkey: list[str] = []
        self._f_tid: list[int] = []
        self._f_cids: list[tuple[int, ...]] = []
        self._free_fids: list[int] = []
        self._nfilters = 0
        self._fsize = np.zeros(64, np.int32)  # filter sizes, for the counting strategy
        self._table = AccessTable(compile_min)
        self._sub_names: list[str] = []  # subscription ids and receivers by rank (compile)
        self._rec_objs: list[Receiver] = []
        self._tries: dict[frozenset[int], tuple[Trie, bool]] = {}
        #: ancestors-or-self tags -> (located-by-path targets, their trie, has '//' paths)
        self._by_chain: dict[tuple[str, ...], tuple[list[_TargetEntry], Trie | None, bool]]
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
        return sid, self._sub_filters[sid].index(fid)

    @property
    def version(self) -> int:
        """Incremented by every subscribe and unsubscribe."""
        return self._version

    def root_tags(self) -> tuple[set[str], set[str]]:
        """(exact Clark tags, local names in any namespace) of every target's event root."""
        with self._lock:
            return set(self._by_exact), set(self._by_local)

    def stats(self) -> MatcherStats:
        return MatcherStats(*self._stats)

    def reset_stats(self) -> None:
        self._stats = [0, 0, 0, 0, 0, 0]

    def is_empty_index(self) -> bool:
        """True when no internal structure is left (all subscriptions removed)."""
        return not (self._subs or self._targets or self._paths or self._slots
                    or self._constraints or self._nfilters or self._by_exact
                    or self._by_local or self._digests or self._fsize.any() or self._tries
                    or self._by_chain or self._con_arr or any(self._con_filters)
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
            self._sub_filters[sub.id] = [self._add_filter(sub, f.target, f.conditions)
                                         for f in sub.filters]
            self._version += 1
            return sub.id

    def subscribe_all(self, subs: Iterable[Subscription]) -> list[str]:
        return [self.subscribe(s) for s in subs]

    def unsubscribe(self, sub_id: str) -> Subscription:
        """Remove a subscription and everything only it used; returns it."""
        with self._lock:
            sub = self._subs.pop(sub_id, None)
            if sub is None:
                raise UnknownSubscriptionError(f"no subscription {quoted(sub_id)}")
            del self._digests[sub.digest]
            for fid in self._sub_filters.pop(sub_id):
                self._remove_filter(fid)
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
        self._con_any.append(False)
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

    def _target(self, target: Target) -> _TargetEntry:
        key = target.canonical()
        entry = self._targets.get(key)
        if entry is None:
            entry = _TargetEntry(self._next_tid, target, texts=(target.text,))
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

    def _drop_target(self, entry: _TargetEntry) -> None:
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

    def _constraint(self, entry: _TargetEntry, c: Condition) -> int:
        pid = self._intern_path(c.path)
        key = (entry.tid, pid, c.operator.name, c.values, c.quantifier)
        cid = self._constraints.get(key)
        if cid is not None:
            self._release_path(pid)  # the constraint holds its own reference
            return cid
        cid = self._alloc_cid()
        self._constraints[key] = cid
        self._con_key[cid] = key
        self._con_cond[cid] = c
        self._con_slot[cid] = (entry.tid, pid)
        self._con_any[cid] = c.quantifier == "any"
        slot = self._slots.get((entry.tid, pid))
        if slot is None:
            slot = self._slots[(entry.tid, pid)] = entry.slots[pid] = SlotIndex()
        slot.add(c.operator, c.values, cid)
        slot.n_all += _counts_all(c)
        entry.paths[pid] += 1
        if entry.paths[pid] == 1:
            self._invalidate()
        return cid

    def _add_filter(self, sub: Subscription, target: Target, conds: tuple[Condition, ...]
                    ) -> int:
        entry = self._target(target)
        fid = self._alloc_fid()
        cids: list[int] = []
        for c in conds:
            cid = self._constraint(entry, c)
            if cid not in cids:
                cids.append(cid)
                self._con_filters[cid].add(fid)
                self._con_arr.pop(cid, None)
        self._f_sub[fid] = sub.id
        self._f_rec[fid] = sub.receiver
        self._f_rkey[fid] = _receiver_key(sub.receiver)
        self._f_tid[fid] = entry.tid
        self._f_cids[fid] = tuple(cids)
        self._fsize[fid] = len(cids)
        self._nfilters += 1
        entry.filters.add(fid)
        entry.receivers[sub.receiver] += 1
        if cids:
            # until the next compile chooses by the slots' estimates, the constraint with
            # the fewest filters is the access (any of its constraints is correct)
            con_filters = self._con_filters
            access = min(cids, key=lambda c: len(con_filters[c]))
            self._table.add(fid, access, tuple([c for c in cids if c != access]))
        else:
            entry.unconditional[fid] = None
        for pid in {self._con_slot[c][1] for c in cids}:
            bm = entry.selectivity.get(pid)
            if bm is None:
                bm = entry.selectivity[pid] = BitMap()
            bm.add(fid)
        entry.top = None
        return fid

    def _access_cost(self, cid: int) -> tuple[float, int]:
        c = self._con_cond[cid]
        assert c is not None
        sel = self._slots[self._con_slot[cid]].selectivity(c.operator, c.values)
        return (sel, len(self._con_filters[cid]))

    def compile(self) -> None:
        """Compile the access table now (the first match after changes does otherwise)."""
        with self._lock:
            self._compile()

    def _compile(self) -> None:
        """A new access table: every filter's access constraint chosen again with today's
        estimates (cached per constraint for this compile)."""
        costs: dict[int, tuple[float, int]] = {}

        def cost(cid: int) -> tuple[float, int]:
            k = costs.get(cid)
            if k is None:
                k = costs[cid] = self._access_cost(cid)
            return k

        cids = self._f_cids
        entries = [(fid, *choose_access(cids[fid], cost)) for fid, sid in enumerate(self._f_sub)
                   if sid is not None and cids[fid]]
        # ranks: matched filters are turned into sorted ids by sorting integers. The ids
        # and receivers are copied, in rank order, into fresh objects: allocated one after
        # the other they sit together in memory, and a match touches each one it returns
        # (at 183,275 subscriptions, scattered ones cost a cache and TLB miss apiece)
        names = sorted(self._subs)
        sub_rank = {sid: i for i, sid in enumerate(names)}
        self._sub_names = [_fresh(sid) for sid in names]
        recs = {self._f_rkey[f]: r for f, r in enumerate(self._f_rec) if r is not None}
        rkeys = sorted(recs)
        self._rec_objs = [Receiver(_fresh(recs[k].method), _fresh(recs[k].address))
                          for k in rkeys]
        rec_rank = {k: i for i, k in enumerate(rkeys)}
        rank = np.zeros((2, max(1, len(self._f_sub))), np.int32)
        for f, sid in enumerate(self._f_sub):
            if sid is not None:
                rank[0, f] = sub_rank[sid]
                rank[1, f] = rec_rank[self._f_rkey[f]]
        self._table.compile(entries, len(self._con_key), len(self._f_sub), rank)

    def _remove_filter(self, fid: int) -> None:
        entry = self._tid_entry[self._f_tid[fid]]
        rec = self._f_rec[fid]
        assert rec is not None
        cids = self._f_cids[fid]
        self._table.remove(fid)
        self._f_sub[fid] = None
        self._f_rec[fid] = None
        self._f_rkey[fid] = ""
        self._f_tid[fid] = -1
        self._f_cids[fid] = ()
        self._fsize[fid] = 0
        self._nfilters -= 1
        self._free_fids.append(fid)
        entry.filters.discard(fid)
        entry.unconditional.pop(fid, None)
        entry.receivers[rec] -= 1
        if entry.receivers[rec] == 0:
            del entry.receivers[rec]
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

    def _drop_constraint(self, entry: _TargetEntry, cid: int) -> None:
        key = self._con_key[cid]
        cond = self._con_cond[cid]
        assert key is not None and cond is not None
        tid, pid = self._con_slot[cid]
        del self._constraints[key]
        self._con_key[cid] = None
        self._con_cond[cid] = None
        self._con_slot[cid] = (-1, -1)
        self._free_cids.append(cid)
        slot = self._slots[(tid, pid)]
        slot.remove(cond.operator, cond.values, cid)
        slot.n_all -= _counts_all(cond)
        if len(slot) == 0:
            del self._slots[(tid, pid)]
            del entry.slots[pid]
        entry.paths[pid] -= 1
        if entry.paths[pid] == 0:
            del entry.paths[pid]
            self._invalidate()
        self._release_path(pid)

    # -- matching -----------------------------------------------------------------------
    def candidate_targets(self, tag: str) -> list[int]:
        """Targets whose event-root name test accepts this tag."""
        out: list[int] = []
        hit = self._by_exact.get(tag)
        if hit:
            out.extend(hit)
        if self._by_local:
            hit = self._by_local.get(_local(tag))
            if hit:
                out.extend(hit)
        return out

    def _invalidate(self) -> None:
        """Targets or paths changed: drop the tries and the per-chain candidates."""
        self._tries.clear()
        self._by_chain.clear()

    def _chain(self, tags: list[str]) -> tuple[list[_TargetEntry], Trie | None, bool]:
        """The targets whose steps fit the ancestor chain, with their trie (cached)."""
        key = tuple(tags)
        hit = self._by_chain.get(key)
        if hit is None:
            entries = [self._tid_entry[t] for t in self.candidate_targets(tags[-1])]
            entries = [e for e in entries if e.target.matches_path(tags)]
            if entries:
                trie, desc = self._trie(frozenset(e.tid for e in entries))
                hit = (entries, trie, desc)
            else:
                hit = (entries, None, False)
            if len(self._by_chain) >= 4096:  # documents may have any number of shapes
                self._by_chain.clear()
            self._by_chain[key] = hit
        return hit

    def _trie(self, tids: frozenset[int]) -> tuple[Trie, bool]:
        cached = self._tries.get(tids)
        if cached is None:
            trie = Trie()
            pids: set[int] = set()
            for tid in tids:
                e = self._tid_entry[tid]
                pids.update(e.paths)
                pids.update(p for p, _ in e.pred_pids)
            desc = False
            for pid in sorted(pids):
                path = self._path_obj[pid]
                desc = desc or path.has_descendant
                trie.insert(path, pid)
            trie.finish()
            cached = self._tries[tids] = (trie, desc)
        return cached

    def match_element(self, el: Any, tags: list[str]) -> ElementMatch | None:
        """Match one candidate element; ``tags`` are its ancestors-or-self tags, root first.

        Returns None when no target locates the element.
        """
        with self._lock:
            return self._match(el, tags)

    def _match(self, el: Any, tags: list[str]) -> ElementMatch | None:
        st = self._stats
        st[0] += 1
        cands, trie, desc = self._chain(tags)
        if trie is None:
            return None
        values: dict[int, Values] = {}
        walk(el, trie, values, {} if desc else None)
        located: list[_TargetEntry] = []
        for e in cands:
            ok = True
            for pid, lit in e.pred_pids:
                vs = values.get(pid)
                if vs is None or (lit is not None and lit not in values_list(vs)):
                    ok = False
                    break
            if ok:
                located.append(e)
        if not located:
            return None
        st[1] += 1
        matched: list[int] = []
        buf = bytearray()  # the satisfied constraints, as int32 bytes
        ints: list[int] = []  # and the rarer ones one by one
        con_any = self._con_any
        for e in located:
            if self.precheck and not e.unconditional:
                top = e.top
                if top is None:
                    top = self._precheck_paths(e)
                if not values.keys() >= top and self._precheck_drops(e, values):
                    st[3] += 1
                    continue
            if e.unconditional:
                matched.extend(e.unconditional)
            for pid, slot in e.slots.items():
                vs = values.get(pid)
                if vs is None:
                    continue
                if vs.__class__ is str:  # one occurrence
                    if slot.only_eq:  # SlotIndex.collect's common case, inlined
                        hit = slot.eq.get(vs)
                        if hit:
                            buf += hit
                    else:
                        slot.collect(vs, buf, ints)
                else:
                    slot_satisfied(slot, vs, con_any, buf, ints)  # type: ignore[arg-type]
        texts = located[0].texts if len(located) == 1 else tuple(
            [e.target.text for e in located])
        if buf or ints:
            if ints:
                buf += pack(ints)
            sat = np.frombuffer(buf, np.int32)
            st[4] += len(sat)
            if self.strategy == "access":
                table = self._table
                if table.stale:
                    self._compile()
                found, sub_ranks, rec_ranks = table.match(sat)
                if found and not matched and sub_ranks is not None:
                    # the common case: sorted by integer ranks in the kernel
                    assert rec_ranks is not None
                    st[2] += 1
                    st[5] += len(found)
                    return ElementMatch(texts, _pick(self._sub_names, sub_ranks),
                                        _pick(self._rec_objs, rec_ranks), tuple(found))
            else:
                found = self._match_counting(sat)
            st[5] += len(found)
            matched.extend(found)
        if not matched:
            return ElementMatch(texts, (), ())
        st[2] += 1
        f_sub, f_rec = self._f_sub, self._f_rec
        if len(matched) == 1:
            f = matched[0]
            return ElementMatch(texts, (f_sub[f],), (f_rec[f],), (f,))  # type: ignore[arg-type]
        rkey = self._f_rkey
        subs = sorted({f_sub[f] for f in matched})  # type: ignore[type-var]
        recs = {rkey[f]: f_rec[f] for f in matched}
        return ElementMatch(texts, tuple(subs),  # type: ignore[arg-type]
                            tuple([recs[k] for k in sorted(recs)]),  # type: ignore[misc]
                            tuple(matched))

    def _precheck_paths(self, e: _TargetEntry) -> frozenset[int]:
        """The ``precheck_rounds`` paths that most filters of the target require."""
        e.top = frozenset(sorted(e.selectivity, key=lambda p: -len(e.selectivity[p])
                                 )[: self.precheck_rounds])
        return e.top

    def _precheck_drops(self, e: _TargetEntry, values: dict[int, Values]) -> bool:
        """Is every filter of the target dead because a path it requires is missing?"""
        top = e.top if e.top is not None else self._precheck_paths(e)
        missing = [e.selectivity[p] for p in top if p not in values]
        if not missing:
            return False
        dead = BitMap.union(*missing) if len(missing) > 1 else missing[0]
        return len(dead) == len(e.filters)

    def _match_counting(self, sat: np.ndarray) -> list[int]:
        """Siena's counting algorithm literally: every satisfied constraint increments the
        counter of each of its filters; a filter matches when its counter reaches its size."""
        arrs = []
        con_arr, con_filters = self._con_arr, self._con_filters
        for c in np.unique(sat).tolist():
            a = con_arr.get(c)
            if a is None:
                fs = con_filters[c]
                a = con_arr[c] = np.fromiter(fs, np.int32, len(fs))
            arrs.append(a)
        allf = arrs[0] if len(arrs) == 1 else np.concatenate(arrs)
        fids, counts = np.unique(allf, return_counts=True)
        self._stats[5] += len(fids) - int((counts == self._fsize[fids]).sum())
        return fids[counts == self._fsize[fids]].tolist()
