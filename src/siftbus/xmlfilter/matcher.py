"""The counting matcher: target index, attribute-path index, constraint index, counters.

Steps per located element (thesis §5.5.7, with §4.7's bugs fixed):

1. *Targets*: candidate targets by the element's name, then the ancestor path, then the
   predicates (evaluated on the complete subtree, so a discriminator below the root works).
2. *Pre-check* (optional, ``precheck=True``): for the ``precheck_rounds`` paths required by
   most filters of the target, every filter requiring a path missing from the event is dead.
   Exclusion is per *filter*, so a receiver is only dropped when all its filters are dead
   (the thesis excluded receivers, losing matches of receivers with several filters). When
   every filter of the target is dead the event is dropped before any value is compared.
3. *Attribute paths*: one walk over the event subtree guided by a trie of the registered
   paths collects each path's values (all occurrences).
4. *Values*: per (target, path) a :class:`~siftbus.xmlfilter.operators.SlotIndex` lists the
   satisfied constraints per value; the quantifier is applied over all occurrences, so each
   constraint is satisfied (and counted) at most once per event.
5. *Counting*: a filter matches when the number of its distinct satisfied constraints equals
   its size. ``strategy="counting"`` is Siena's algorithm literally (every satisfied
   constraint increments the counter of each of its filters). ``strategy="access"`` (the
   default) keeps a counter only for filters whose *access constraint* (the rarest of its
   constraints, chosen at subscribe time) is satisfied and counts their other constraints
   against the satisfied set: same result, far fewer counters.
6. *Receivers*: disjunction over filters; the receivers of matched filters, as a set.

Identical constraints (same target, path, operator, values, quantifier) are shared between
filters. Subscribe and unsubscribe take the same lock as matching one element, so an element
is matched against one consistent set of subscriptions.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
from pyroaring import BitMap

from siftbus.errors import DuplicateSubscriptionError, UnknownSubscriptionError
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.operators import SlotIndex, fast_test
from siftbus.xmlfilter.subscription import Condition, Receiver, Subscription
from siftbus.xmlfilter.xpath import RelPath, Step, Target

Strategy = Literal["access", "counting"]
_T = TypeVar("_T")



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
    """Filter counters touched (step 5 work; for the access strategy: candidate filters
    fetched, those with two or more constraints only when their rarest other constraint
    holds)."""


@dataclass(slots=True)
class _TargetEntry:
    tid: int
    target: Target
    filters: set[int] = field(default_factory=set)
    unconditional: dict[int, _FilterRec] = field(default_factory=dict)
    paths: Counter[int] = field(default_factory=Counter)  # pid -> number of constraints
    pred_pids: list[tuple[int, str | None]] = field(default_factory=list)
    selectivity: dict[int, BitMap] = field(default_factory=dict)  # pid -> filters needing it
    top: list[int] | None = None  # the pre-check's pids (most required first), cached
    texts: tuple[str, ...] = ()  # (target.text,), for ElementMatch
    #: pid -> index of the constraints that are some filter's access constraint
    access_slots: dict[int, SlotIndex[_Constraint]] = field(default_factory=dict)
    receivers: Counter[Receiver] = field(default_factory=Counter)


@dataclass(slots=True, eq=False)  # identity: constraints key the per-event memo
class _Constraint:
    cid: int
    key: tuple[Any, ...]
    tid: int
    pid: int
    condition: Condition
    filters: set[int] = field(default_factory=set)
    access: set[int] = field(default_factory=set)
    # The three candidate tables below are None while empty: a hit then costs no fetch of
    # an empty dict (at 100,000 subscriptions matching is bound by cache misses).
    #: fid -> filter, for the filters whose access constraint this is and that have no
    #: other constraint: they match as soon as this holds
    access_single: dict[int, _FilterRec] | None = None
    #: other constraint -> filters (an ordered set), for the filters whose access constraint
    #: this is and that have exactly two constraints. Grouped by the other constraint, which
    #: is evaluated once per group: the filters of a group that fails are never fetched
    #: (at 100,000 subscriptions matching is bound by cache misses, and other constraints
    #: are few and shared, so they stay in the CPU cache)
    access_pair: dict[_Constraint, dict[_FilterRec, None]] | None = None
    #: filter -> its other constraints, rarest first, for the filters whose access
    #: constraint this is and that have three or more constraints
    access_multi: dict[_FilterRec, tuple[_Constraint, ...]] | None = None
    _filters_arr: np.ndarray | None = None
    #: the three candidate tables above flattened into tuples, (single, pair, multi), for
    #: matching: a tuple is one object where a dict is two (the dict and its key table),
    #: and matching is bound by cache misses. Built on first use, dropped by ``changed``
    plan: _Plan | None = None

    #: the operator on one value (truth value only); None when any value satisfies it
    test: Callable[[str], object] | None = None
    any_quantifier: bool = False

    def __post_init__(self) -> None:
        c = self.condition
        self.test = fast_test(c.operator, c.values)
        self.any_quantifier = c.quantifier == "any"

    def holds(self, values: dict[int, list[str]]) -> bool:
        """Does the event (its path values) satisfy this constraint? (the quantifier over
        every occurrence; a missing path never does)."""
        vs = values.get(self.pid)
        if not vs:
            return False
        test = self.test
        if test is None:
            return True
        if len(vs) == 1:
            return bool(test(vs[0]))
        if self.any_quantifier:
            return any(map(test, vs))
        return all(map(test, vs))

    def filters_array(self) -> np.ndarray:
        arr = self._filters_arr
        if arr is None:
            arr = self._filters_arr = np.fromiter(self.filters, np.int32, len(self.filters))
        return arr

    def changed(self) -> None:
        self._filters_arr = None
        self.plan = None

    def make_plan(self) -> _Plan:
        """The candidate tables as tuples, in the tables' order (see ``plan``)."""
        single = tuple(self.access_single.values()) if self.access_single else ()
        pair = (tuple([(k, tuple(g)) for k, g in self.access_pair.items()])
                if self.access_pair else ())
        multi: list[tuple[_Constraint, list[tuple[tuple[_Constraint, ...], _FilterRec]]]] = []
        if self.access_multi:
            # grouped by the rarest other constraint: when it fails (the common case) the
            # group's filters are not fetched at all
            by_first: dict[_Constraint, list[tuple[tuple[_Constraint, ...], _FilterRec]]] = {}
            for rec, others in self.access_multi.items():
                group = by_first.get(others[0])
                if group is None:
                    group = by_first[others[0]] = []
                    multi.append((others[0], group))
                group.append((others[1:], rec))
        plan = self.plan = (single, pair, tuple([(k, tuple(g)) for k, g in multi]))
        return plan


#: (filters matching on the access constraint alone, (other constraint, filters) groups,
#: (first other constraint, ((the rest of the other constraints, filter), ...)) groups for
#: filters of three or more constraints)
_Plan = tuple[tuple["_FilterRec", ...],
              tuple[tuple["_Constraint", tuple["_FilterRec", ...]], ...],
              tuple[tuple["_Constraint",
                          tuple[tuple[tuple["_Constraint", ...], "_FilterRec"], ...]], ...]]


@dataclass(slots=True, eq=False)
class _FilterRec:
    fid: int
    sub_id: str
    receiver: Receiver
    tid: int
    cids: frozenset[int]
    #: the receiver as one string that sorts like (method, address) and is equal only for
    #: equal receivers (see _receiver_key): it hashes in C, unlike the dataclass, and is one
    #: object to fetch, unlike a tuple
    rkey: str
    access: int = -1  # the access constraint's cid; -1 for a filter without conditions


class _Trie:
    """Registered relative paths as a trie; ``walk`` collects their values from a subtree."""

    __slots__ = ("attrs", "desc", "exact", "kids", "leaf", "local", "text")

    #: at most this many distinct child tags are remembered per node (documents may use
    #: any number of names; beyond this, children are looked up without the cache)
    KIDS_CACHE = 256

    def __init__(self) -> None:
        self.exact: dict[str, _Trie] = {}
        self.local: dict[str, _Trie] = {}
        self.desc: list[tuple[Step, _Trie]] = []
        self.text: list[int] = []
        self.attrs: list[tuple[str, int]] = []
        #: the path id when this node is a plain leaf: one text path, nothing else
        self.leaf: int | None = None
        #: Clark tag of a child -> the nodes it leads to (exact name first, then local name)
        self.kids: dict[str, tuple[_Trie, ...]] = {}

    def children_for(self, tag: str) -> tuple[_Trie, ...]:
        """The nodes a child element with this Clark tag leads to, remembered per tag."""
        found = []
        n = self.exact.get(tag)
        if n is not None:
            found.append(n)
        n = self.local.get(tag[tag.index("}") + 1 :] if tag[0] == "{" else tag)
        if n is not None:
            found.append(n)
        out = tuple(found)
        if len(self.kids) < self.KIDS_CACHE:
            self.kids[tag] = out
        return out

    def finish(self) -> None:
        """Compute ``leaf`` flags once all paths are inserted."""
        plain = not (self.attrs or self.desc or self.exact or self.local)
        self.leaf = self.text[0] if plain and len(self.text) == 1 else None
        for n in (*self.exact.values(), *self.local.values(), *(n for _, n in self.desc)):
            n.finish()

    def insert(self, path: RelPath, pid: int) -> None:
        node = self
        for s in path.steps:
            if s.axis == "descendant":
                nxt = next((n for st, n in node.desc if st.uri == s.uri and st.local == s.local),
                           None)
                if nxt is None:
                    nxt = _Trie()
                    node.desc.append((s, nxt))
            else:
                table = node.local if s.uri is None else node.exact
                key = s.local if s.uri is None else (f"{{{s.uri}}}{s.local}" if s.uri else s.local)
                nxt = table.get(key)
                if nxt is None:
                    nxt = table[key] = _Trie()
            node = nxt
        if path.attribute is None:
            node.text.append(pid)
        else:
            node.attrs.append((path.attribute.key, pid))


def _walk(el: Any, node: _Trie, out: dict[int, list[str]],
          seen: dict[tuple[int, int], Any] | None) -> None:
    # ``seen`` (only for paths with '//', which can reach a node twice) maps (path, id(el))
    # to the element itself: keeping the proxy alive keeps its id from being reused
    if node.text:
        text = el.text if len(el) == 0 else "".join(el.itertext())
        if text is None:
            text = ""
        for pid in node.text:
            if seen is not None:
                key = (pid, id(el))
                if key in seen:
                    continue
                seen[key] = el
            lst = out.get(pid)
            if lst is None:
                out[pid] = [text]
            else:
                lst.append(text)
    if node.attrs:
        for key_, pid in node.attrs:
            v = el.get(key_)
            if v is not None:
                if seen is not None:
                    key = (pid, id(el))
                    if key in seen:
                        continue
                    seen[key] = el
                lst = out.get(pid)
                if lst is None:
                    out[pid] = [v]
                else:
                    lst.append(v)
    if node.exact or node.local:
        kids = node.kids
        for ch in el.iterchildren("*"):
            tag = ch.tag
            nodes = kids.get(tag)
            if nodes is None:
                nodes = node.children_for(tag)
            for n in nodes:
                leaf = n.leaf
                if leaf is not None and seen is None:
                    # the common case, inlined: a leaf whose text is one path's value
                    text = ch.text if len(ch) == 0 else "".join(ch.itertext())
                    lst = out.get(leaf)
                    if lst is None:
                        out[leaf] = [text or ""]
                    else:
                        lst.append(text or "")
                else:
                    _walk(ch, n, out, seen)
    for step, n in node.desc:
        for d in el.iterdescendants("*"):
            if step.matches(d.tag):
                _walk(d, n, out, seen)


def _local(tag: str) -> str:
    return tag[tag.index("}") + 1 :] if tag[:1] == "{" else tag


def _receiver_key(r: Receiver) -> str:
    """(method, address) as one string, injective and order-preserving: NUL in the method
    is escaped as NUL SOH and the method ends with NUL NUL, which sorts below anything."""
    return r.method.replace("\x00", "\x00\x01") + "\x00\x00" + r.address


def _any_quantifier(con: _Constraint) -> bool:
    return con.any_quantifier


def _slot_satisfied(slot: SlotIndex[_T], vs: list[str], sat: list[_T],
                    is_any: Callable[[_T], bool]) -> None:
    """Append the constraints of one slot that the occurrences ``vs`` of its path satisfy:
    under ``all`` every occurrence must satisfy a constraint, under ``any`` one must."""
    if len(vs) == 1:
        slot.collect(vs[0], sat)
        return
    counts: dict[_T, int] = {}
    get = counts.get
    for v in vs:
        for c in slot.satisfied(v):
            counts[c] = get(c, 0) + 1
    k = len(vs)
    for c, n in counts.items():
        if n == k or is_any(c):
            sat.append(c)


@dataclass(frozen=True, slots=True)
class ElementMatch:
    """The outcome for one element located as an event by at least one target."""

    targets: tuple[str, ...]
    """Texts of the targets that located the element."""
    subscriptions: tuple[str, ...]
    """Ids of matched subscriptions, sorted."""
    receivers: tuple[Receiver, ...]
    """Distinct receivers of the matched subscriptions, sorted."""


class XmlMatcher:
    """The dynamic subscription index and counting matcher (see module docstring)."""

    def __init__(
        self,
        *,
        strategy: Strategy = "access",
        precheck: bool = True,
        precheck_rounds: int = 4,
        rebalance_min: int = 256,
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
        self._slots: dict[tuple[int, int], SlotIndex[int]] = {}
        self._constraints: dict[tuple[Any, ...], _Constraint] = {}
        self._cons: dict[int, _Constraint] = {}
        self._filters: dict[int, _FilterRec] = {}
        self._tries: dict[frozenset[int], tuple[_Trie, bool]] = {}
        #: ancestors-or-self tags -> (located-by-path targets, their trie, has '//' paths)
        self._by_chain: dict[tuple[str, ...], tuple[list[_TargetEntry], _Trie | None, bool]]
        self._by_chain = {}
        self._next_tid = 0
        self._next_cid = 1  # constraint 0 is "always satisfied", the matrix's padding
        self._free_cids: list[int] = []
        self._free_fids: list[int] = []
        self._next_fid = 0
        self._fsize = np.zeros(64, np.int32)  # filter sizes, for the counting strategy
        # per (target, path): only the constraints that are some filter's access constraint
        # the access slots hold the constraint objects themselves: no id lookup per hit
        self._access_slots: dict[tuple[int, int], SlotIndex[_Constraint]] = {}
        self._rebalance_at = rebalance_min
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
                    or self._constraints or self._filters or self._by_exact or self._by_local
                    or self._digests or self._fsize.any() or self._tries
                    or self._by_chain
                    or self._access_slots)

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
            if len(self._filters) >= self._rebalance_at:
                self._rebalance()
                self._rebalance_at = 2 * len(self._filters)
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
        fid = self._next_fid
        self._next_fid += 1
        if fid >= len(self._fsize):
            n = 2 * len(self._fsize)
            new = np.zeros(n, np.int32)
            new[: len(self._fsize)] = self._fsize
            self._fsize = new
        return fid

    def _alloc_cid(self) -> int:
        if self._free_cids:
            return self._free_cids.pop()
        cid = self._next_cid
        self._next_cid += 1
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

    def _add_filter(self, sub: Subscription, target: Target, conds: tuple[Condition, ...]
                    ) -> int:
        entry = self._target(target)
        fid = self._alloc_fid()
        cons: list[_Constraint] = []
        for c in conds:
            pid = self._intern_path(c.path)
            key = (entry.tid, pid, c.operator.name, c.values, c.quantifier)
            con = self._constraints.get(key)
            if con is None:
                con = _Constraint(self._alloc_cid(), key, entry.tid, pid, c)
                self._constraints[key] = con
                self._cons[con.cid] = con
                slot = self._slots.get((entry.tid, pid))
                if slot is None:
                    slot = self._slots[(entry.tid, pid)] = SlotIndex[int]()
                slot.add(c.operator, c.values, con.cid)
                entry.paths[pid] += 1
                if entry.paths[pid] == 1:
                    self._invalidate()
            else:
                self._release_path(pid)  # the constraint holds its own reference
            if fid not in con.filters:
                con.filters.add(fid)
                con.changed()
                cons.append(con)
        rec = _FilterRec(fid, sub.id, sub.receiver, entry.tid,
                         frozenset(k.cid for k in cons),
                         _receiver_key(sub.receiver))
        if cons:
            self._choose_access(cons, rec)
        self._filters[fid] = rec
        self._fsize[fid] = len(cons)
        entry.filters.add(fid)
        entry.receivers[sub.receiver] += 1
        if not cons:
            entry.unconditional[fid] = rec
        for pid in {k.pid for k in cons}:
            bm = entry.selectivity.get(pid)
            if bm is None:
                bm = entry.selectivity[pid] = BitMap()
            bm.add(fid)
        entry.top = None
        return fid

    def _access_cost(self, con: _Constraint) -> tuple[float, int]:
        c = con.condition
        sel = self._slots[(con.tid, con.pid)].selectivity(c.operator, c.values)
        return (sel, len(con.access))

    def _choose_access(self, cons: list[_Constraint], rec: _FilterRec) -> None:
        ranked = sorted(cons, key=self._access_cost)
        # the others are tried rarest first, so a failing filter is usually refuted by
        # its first evaluation
        self._set_access(ranked[0], rec, True, tuple(ranked[1:]))
        rec.access = ranked[0].cid

    def _set_access(self, con: _Constraint, rec: _FilterRec, add: bool,
                    others: tuple[_Constraint, ...] = ()) -> None:
        """Make ``con`` (not) the access constraint of filter ``rec``; a constraint is in
        its slot's access index exactly while it is some filter's access constraint."""
        was = bool(con.access)
        fid = rec.fid
        if add:
            con.access.add(fid)
            if len(others) == 1:
                if con.access_pair is None:
                    con.access_pair = {}
                group = con.access_pair.get(others[0])
                if group is None:
                    group = con.access_pair[others[0]] = {}
                group[rec] = None
            elif others:
                if con.access_multi is None:
                    con.access_multi = {}
                con.access_multi[rec] = others
            else:
                if con.access_single is None:
                    con.access_single = {}
                con.access_single[fid] = rec
        else:
            con.access.discard(fid)
            if con.access_multi is not None:
                con.access_multi.pop(rec, None)
                if not con.access_multi:
                    con.access_multi = None
            if con.access_pair is not None:
                for other, group in con.access_pair.items():
                    if rec in group:
                        del group[rec]
                        if not group:
                            del con.access_pair[other]
                        break
                if not con.access_pair:
                    con.access_pair = None
            if con.access_single is not None:
                con.access_single.pop(fid, None)
                if not con.access_single:
                    con.access_single = None
        con.changed()
        if was == bool(con.access):
            return
        key = (con.tid, con.pid)
        c = con.condition
        entry = self._tid_entry[con.tid]
        if not was:
            slot = self._access_slots.get(key)
            if slot is None:
                slot = SlotIndex[_Constraint]()
                self._access_slots[key] = entry.access_slots[con.pid] = slot
            slot.add(c.operator, c.values, con)
        else:
            slot = self._access_slots[key]
            slot.remove(c.operator, c.values, con)
            if len(slot) == 0:
                del self._access_slots[key]
                del entry.access_slots[con.pid]

    def _rebalance(self) -> None:
        """Re-choose every filter's access constraint with today's selectivity estimates.

        Run when the number of filters doubles, so the cost is amortised O(1) per filter.
        """
        filters = self._filters
        # drop every access assignment at once (the state _set_access(..., False) for each
        # filter would reach, without searching the candidate tables filter by filter)
        for con in self._cons.values():
            con.access.clear()
            con.access_single = con.access_pair = con.access_multi = None
            con.plan = None
        self._access_slots.clear()
        for entry in self._tid_entry.values():
            entry.access_slots.clear()
        for rec in filters.values():
            if rec.access >= 0:
                self._choose_access([self._cons[c] for c in sorted(rec.cids)], rec)

    def _remove_filter(self, fid: int) -> None:
        rec = self._filters.pop(fid)
        self._fsize[fid] = 0
        self._free_fids.append(fid)
        entry = self._tid_entry[rec.tid]
        entry.filters.discard(fid)
        entry.unconditional.pop(fid, None)
        entry.receivers[rec.receiver] -= 1
        if entry.receivers[rec.receiver] == 0:
            del entry.receivers[rec.receiver]
        for cid in rec.cids:
            con = self._cons[cid]
            con.filters.discard(fid)
            con.changed()
            if fid in con.access:
                self._set_access(con, rec, False)
            bm = entry.selectivity.get(con.pid)
            if bm is not None:
                bm.discard(fid)
                if not bm:
                    del entry.selectivity[con.pid]
            if not con.filters:
                del self._constraints[con.key]
                del self._cons[cid]
                self._free_cids.append(cid)
                slot = self._slots[(con.tid, con.pid)]
                slot.remove(con.condition.operator, con.condition.values, cid)
                if len(slot) == 0:
                    del self._slots[(con.tid, con.pid)]
                entry.paths[con.pid] -= 1
                if entry.paths[con.pid] == 0:
                    del entry.paths[con.pid]
                    self._invalidate()
                self._release_path(con.pid)
        entry.top = None
        if not entry.filters:
            self._drop_target(entry)

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

    def _chain(self, tags: list[str]) -> tuple[list[_TargetEntry], _Trie | None, bool]:
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

    def _trie(self, tids: frozenset[int]) -> tuple[_Trie, bool]:
        cached = self._tries.get(tids)
        if cached is None:
            trie = _Trie()
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
        values: dict[int, list[str]] = {}
        _walk(el, trie, values, {} if desc else None)
        located: list[_TargetEntry] = []
        for e in cands:
            ok = True
            for pid, lit in e.pred_pids:
                vs = values.get(pid)
                if not vs or (lit is not None and lit not in vs):
                    ok = False
                    break
            if ok:
                located.append(e)
        if not located:
            return None
        st[1] += 1
        matched: list[_FilterRec] = []
        for e in located:
            self._match_target(e, values, matched)
        texts = located[0].texts if len(located) == 1 else tuple(
            [e.target.text for e in located])
        if not matched:
            return ElementMatch(texts, (), ())
        st[2] += 1
        if len(matched) == 1:
            r = matched[0]
            return ElementMatch(texts, (r.sub_id,), (r.receiver,))
        subs = sorted({r.sub_id for r in matched})
        recs = {r.rkey: r.receiver for r in matched}
        return ElementMatch(texts, tuple(subs), tuple([recs[k] for k in sorted(recs)]))

    def _match_target(self, e: _TargetEntry, values: dict[int, list[str]],
                      matched: list[_FilterRec]) -> None:
        st = self._stats
        if self.precheck and not e.unconditional:
            top = e.top
            if top is None:
                top = e.top = sorted(e.selectivity, key=lambda p: -len(e.selectivity[p])
                                     )[: self.precheck_rounds]
            missing = [e.selectivity[p] for p in top if p not in values]
            if missing:
                dead = BitMap.union(*missing) if len(missing) > 1 else missing[0]
                if len(dead) == len(e.filters):
                    st[3] += 1
                    return
        if e.unconditional:
            matched.extend(e.unconditional.values())
        if self.strategy == "access":
            self._match_access(e, values, matched)
        else:
            self._match_counting(e, values, matched)

    def _satisfied(self, slots: dict[tuple[int, int], SlotIndex[int]], tid: int,
                   values: dict[int, list[str]]) -> list[int]:
        """Step 4: the constraints of ``slots`` the event satisfies, each at most once; the
        quantifier is applied over all occurrences of the path."""
        sat: list[int] = []
        cons = self._cons
        for pid, vs in values.items():
            slot = slots.get((tid, pid))
            if slot is not None:
                _slot_satisfied(slot, vs, sat, lambda cid: cons[cid].any_quantifier)
        return sat

    def _match_access(self, e: _TargetEntry, values: dict[int, list[str]],
                      matched: list[_FilterRec]) -> None:
        """Counters only for filters whose access constraint holds; their other constraints
        are evaluated on demand, once per event (memoised), and counted."""
        sat: list[_Constraint] = []
        for pid, slot in e.access_slots.items():
            vs = values.get(pid)
            if vs:
                if len(vs) == 1:
                    slot.collect(vs[0], sat)
                else:
                    _slot_satisfied(slot, vs, sat, _any_quantifier)
        if not sat:
            return
        st = self._stats
        st[4] += len(sat)
        truth: dict[_Constraint, bool] = dict.fromkeys(sat, True)
        touched = 0
        for con in sat:
            plan = con.plan
            if plan is None:
                plan = con.make_plan()
            single, pair, multi = plan
            if single:
                # filters of one constraint: it holds, so they match
                matched.extend(single)
                touched += len(single)
            for k, group in pair:
                t = truth.get(k)
                if t is None:
                    # _Constraint.holds, its common case (one occurrence) inlined
                    vs = values.get(k.pid)
                    test = k.test
                    if vs is not None and len(vs) == 1 and test is not None:
                        t = truth[k] = bool(test(vs[0]))
                    else:
                        t = truth[k] = k.holds(values)
                if t:
                    matched.extend(group)
                    touched += len(group)
            for k, mgroup in multi:
                t = truth.get(k)
                if t is None:
                    t = truth[k] = k.holds(values)
                if not t:
                    continue
                touched += len(mgroup)
                for item in mgroup:
                    for k in item[0]:
                        t = truth.get(k)
                        if t is None:
                            t = truth[k] = k.holds(values)
                        if not t:
                            break
                    else:  # the access constraint and all others hold: count == size
                        matched.append(item[1])
        st[5] += touched

    def _match_counting(self, e: _TargetEntry, values: dict[int, list[str]],
                        matched: list[_FilterRec]) -> None:
        """Siena's counting algorithm literally: every satisfied constraint increments the
        counter of each of its filters; a filter matches when its counter reaches its size."""
        st = self._stats
        sat = self._satisfied(self._slots, e.tid, values)
        if not sat:
            return
        st[4] += len(sat)
        cons = self._cons
        arrs = [cons[c].filters_array() for c in sat]
        allf = arrs[0] if len(arrs) == 1 else np.concatenate(arrs)
        fids, counts = np.unique(allf, return_counts=True)
        st[5] += len(fids)
        filters = self._filters
        matched.extend([filters[f] for f in fids[counts == self._fsize[fids]].tolist()])
