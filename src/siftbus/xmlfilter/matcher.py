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

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, NamedTuple

import numpy as np
from pyroaring import BitMap

from siftbus.match.gcpause import collector_paused
from siftbus.xmlfilter.paths import Trie, Values, values_list, walk
from siftbus.xmlfilter.registry import Registry, TargetEntry
from siftbus.xmlfilter.slots import pack, slot_satisfied
from siftbus.xmlfilter.subscription import Receiver
from siftbus.xmlfilter.table import choose_access
from siftbus.xmlfilter.views import nested_holds

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


#: above this many ranks, ids are taken from an object array by numpy (one call, no
#: Python int per rank); below, an ``itemgetter`` over the list costs less to set up
_TAKE_MIN = 48


def _pick(table: np.ndarray, ranks: np.ndarray) -> tuple[Any, ...]:
    """``tuple(table[r] for r in ranks)``, made in C (``table`` is an object array)."""
    return tuple(table.take(ranks).tolist())


def _objects(items: list[Any]) -> np.ndarray:
    """``items`` as a one-dimensional object array (whatever the items are)."""
    arr = np.empty(len(items), object)
    arr[:] = items
    return arr


def _fresh(s: str) -> str:
    """A new string object equal to ``s`` (``str(s)`` and slicing return ``s`` itself)."""
    return (s + " ")[:-1]


class XmlMatcher(Registry):
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
        super().__init__(compile_min)
        self.strategy: Strategy = strategy
        self.precheck = precheck
        self.precheck_rounds = precheck_rounds

    def stats(self) -> MatcherStats:
        return MatcherStats(*self._stats)

    def reset_stats(self) -> None:
        self._stats = [0, 0, 0, 0, 0, 0]

    def compile(self) -> None:
        """Compile the access table now (the first match after changes does otherwise)."""
        with self._lock:
            self._compile()

    def _compile(self) -> None:
        with collector_paused():
            self._compile_table()

    def _compile_table(self) -> None:
        """A new access table: every filter's access constraint chosen again with today's
        estimates (cached per constraint for this compile)."""
        costs: dict[int, tuple[float, int]] = {}

        def cost(cid: int) -> tuple[float, int]:
            k = costs.get(cid)
            if k is None:
                k = costs[cid] = self._access_cost(cid)
            return k

        cids = self._f_cids
        f_sub = self._f_sub
        live = [fid for fid, sid in enumerate(f_sub) if sid is not None]
        entries = [(fid, cids[fid][0], ()) if len(cids[fid]) == 1
                   else (fid, *choose_access(cids[fid], cost))
                   for fid in live if cids[fid]]
        # ranks: matched filters are turned into sorted ids by sorting integers. The ids
        # and receivers are copied, in rank order, into fresh objects: allocated one after
        # the other they sit together in memory, and a match touches each one it returns
        # (at 183,275 subscriptions, scattered ones cost a cache and TLB miss apiece)
        names = sorted(self._subs)
        sub_rank = {sid: i for i, sid in enumerate(names)}
        by_rank: list[str | Receiver] = [_fresh(sid) for sid in names]
        f_rec, f_rkey = self._f_rec, self._f_rkey
        recs = {f_rkey[f]: f_rec[f] for f in live}
        rkeys = sorted(recs)
        # then the receivers: the kernel hands over both as places in one list (one
        # conversion, one lookup). Methods are few: one string each, shared, so that
        # reading a receiver's method (a notification's writer does) finds it in cache
        methods: dict[str, str] = {}
        by_rank.extend([Receiver(methods.setdefault(r.method, r.method),  # type: ignore[union-attr]
                                 _fresh(r.address))  # type: ignore[union-attr]
                        for r in (recs[k] for k in rkeys)])
        self._by_rank = by_rank
        self._by_rank_table = _objects(by_rank)
        rec_rank = {k: i for i, k in enumerate(rkeys)}
        rank = np.zeros((2, max(1, len(f_sub))), np.int32)
        rank[0, live] = [sub_rank[f_sub[f]] for f in live]  # type: ignore[index]
        rank[1, live] = [rec_rank[f_rkey[f]] for f in live]
        self._table.compile(entries, len(self._con_key), len(f_sub), rank, len(names))

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

    def _chain(self, tags: list[str]) -> tuple[list[TargetEntry], Trie | None, bool]:
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
        located: list[TargetEntry] = []
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
            if e.nested:
                ints.extend([cid for cid, nf in e.nested.items() if nested_holds(el, nf)])
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
                    slot_satisfied(slot, vs, buf, ints)  # type: ignore[arg-type]
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
                found, ranks, nsub = table.match(sat)
                if found and not matched and ranks is not None:
                    # the common case: sorted by integer ranks in the kernel
                    st[2] += 1
                    st[5] += len(found)
                    if len(ranks) > _TAKE_MIN:  # many: each part taken apart, not copied
                        objs = self._by_rank_table
                        return ElementMatch(texts, _pick(objs, ranks[:nsub]),
                                            _pick(objs, ranks[nsub:]), tuple(found))
                    # a match has a subscription and a receiver: two ranks at least, a tuple
                    both = itemgetter(*ranks.tolist())(self._by_rank)
                    return ElementMatch(texts, both[:nsub], both[nsub:], tuple(found))
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

    def _precheck_paths(self, e: TargetEntry) -> frozenset[int]:
        """The ``precheck_rounds`` paths that most filters of the target require."""
        e.top = frozenset(sorted(e.selectivity, key=lambda p: -len(e.selectivity[p])
                                 )[: self.precheck_rounds])
        return e.top

    def _precheck_drops(self, e: TargetEntry, values: dict[int, Values]) -> bool:
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
