"""Filters poset and poset-derived forest: after random interleaved inserts and deletes the
structures are exactly what the covering relation says, and match like the reference."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.covering.flat import FlatTable
from siftbus.covering.forest import PosetForest
from siftbus.covering.forwarding import ForwardingTable, Update
from siftbus.covering.poset import FilterPoset
from siftbus.covering.relations import covers
from siftbus.covering.table import NO_LINKS, FilterNode, TableBase
from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Profile
from strategies import profiles

from .workload import EVENTS, SCHEMA, T, random_profile

IFACES = ["I1", "I2", "I3", "local"]
NEIGHBOURS = ["I1", "I2", "I3"]


def _key(n: FilterNode) -> object:
    return n.filter.filter_key


class Brute:
    """The covering relation on the distinct filters held, computed pairwise."""

    def __init__(self, live: dict[str, tuple[Profile, str]]) -> None:
        nodes: dict[object, tuple[Profile, set[str]]] = {}
        for p, iface in live.values():
            nodes.setdefault(p.filter_key, (p, set()))[1].add(iface)
        self.keys = list(nodes)
        self.filters = [nodes[k][0] for k in self.keys]
        self.ifaces = [nodes[k][1] for k in self.keys]
        n = len(self.keys)
        m = np.zeros((n, n), dtype=bool)
        for i, j in itertools.permutations(range(n), 2):
            m[i, j] = covers(self.filters[i], self.filters[j])
        self.strict = m  # distinct filters are never equivalent

    def hasse(self) -> set[tuple[object, object]]:
        m = self.strict
        between = (m.astype(np.int64) @ m.astype(np.int64)) > 0
        im = m & ~between
        return {(self.keys[i], self.keys[j]) for i, j in zip(*np.nonzero(im), strict=True)}

    def out(self, y: str | None) -> set[object]:
        """Minimal cover of the filters held by some interface other than ``y``."""
        scope = np.array([bool(ifs - {y}) for ifs in self.ifaces], dtype=bool)
        if not len(scope):
            return set()
        covered = (self.strict & scope[:, None]).any(axis=0)
        return {self.keys[i] for i in np.nonzero(scope & ~covered)[0]}


def check_structure(posets: list[FilterPoset], forests: list[PosetForest],
                    live: dict[str, tuple[Profile, str]]) -> Brute:
    brute = Brute(live)
    for table in (*posets, *forests):
        assert len(table) == len(live)
        assert {_key(n) for n in table.nodes()} == set(brute.keys)
        for n in table.nodes():
            assert {pid: e.src for pid, e in n.entries.items()} == {
                pid: i for pid, (p, i) in live.items() if p.filter_key == _key(n)}
    roots = brute.out(None)
    hasse = brute.hasse()
    for poset in posets:
        # Edges are exactly the immediate-cover relation; roots the minimal cover.
        assert {(_key(u), _key(v)) for u, v in poset.edges()} == hasse
        assert {_key(n) for n in poset.root_nodes()} == roots
    for forest in forests:
        # One parent that covers; roots pairwise incomparable and equal to the poset's.
        assert {_key(n) for n in forest.root_nodes()} == roots
        for u, v in forest.edges():
            assert covers(u.filter, v.filter) and v.parent is u
        seen = 0
        stack = forest.root_nodes()
        while stack:
            n = stack.pop()
            seen += 1
            stack.extend(n.children)
        assert seen == len(brute.keys)  # every node hangs under a root, once
    for y in [None, *NEIGHBOURS]:
        want = brute.out(y)
        for table in (*posets, *forests):
            got = table.forward_nodes(y)
            assert {_key(n) for n in got} == want
            if y is not None:
                assert all(table.iface_of(p.id) != y for p in table.forwards(y))
    return brute


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.integers(10, 70), st.floats(0.5, 0.8))
def test_random_insert_delete_keeps_both_structures_exact(
        seed: int, steps: int, p_add: float) -> None:
    rng = random.Random(seed)
    # The indexed structures and the literal walks (indexed=False) side by side.
    posets = [FilterPoset(), FilterPoset(indexed=False)]
    forests = [PosetForest(), PosetForest(indexed=False)]
    tables: list[TableBase] = [*posets, *forests]
    fwd = {"poset": ForwardingTable(NEIGHBOURS, structure=FilterPoset()),
           "forest": ForwardingTable(NEIGHBOURS, structure=PosetForest()),
           "poset-walk": ForwardingTable(NEIGHBOURS, structure=FilterPoset(indexed=False)),
           "forest-walk": ForwardingTable(NEIGHBOURS, structure=PosetForest(indexed=False))}
    # What each neighbour holds from us, built only from the updates we sent.
    remote: dict[str, dict[str, dict[str, Profile]]] = {
        name: {y: {} for y in NEIGHBOURS} for name in fwd}
    ref = ReferenceMatcher()
    live: dict[str, tuple[Profile, str]] = {}
    for step in range(steps):
        if rng.random() < p_add or not live:
            p = random_profile(rng, f"p{step}")
            iface = rng.choice(IFACES)
            live[p.id] = (p, iface)
            ref.add(p)
            for t in tables:
                t.add(p, iface)
            updates = {name: f.subscribe(p, iface) for name, f in fwd.items()}
        else:
            pid = rng.choice(sorted(live))
            del live[pid]
            ref.remove(pid)
            for t in tables:
                assert t.remove(pid).id == pid
            updates = {name: f.unsubscribe(pid) for name, f in fwd.items()}
        for name, per in updates.items():
            for y, upd in per.items():
                assert upd, "empty updates are not reported"
                held = remote[name][y]
                for s in upd.subscribe:
                    assert s.id not in held
                    held[s.id] = s
                for u in upd.unsubscribe:
                    assert held.pop(u.id) is u
        brute = check_structure(posets, forests, live)
        for name, f in fwd.items():
            for y in NEIGHBOURS:
                assert {p.filter_key for p in f.exported(y)} == brute.out(y)
                assert {p.id for p in f.exported(y)} == set(remote[name][y])
                assert all(live[p.id][1] != y for p in f.exported(y))
    brute = Brute(live)
    for f in fwd.values():
        late = f.add_neighbour("late")  # joins with everything it must hold
        assert {p.filter_key for p in late.subscribe} == brute.out("late")
        assert f.add_neighbour("late") == Update()
        f.remove_neighbour("late")
    for e in EVENTS[::7]:
        want = ref.match(e)
        assert all(t.match(e) == want for t in tables)
    for pid in rng.sample(sorted(live), len(live)):
        for t in tables:
            t.remove(pid)
    for table in tables:
        assert len(table) == 0 and not table.nodes() and not table.root_nodes()
        assert not table.edges()


@settings(max_examples=40, deadline=None)
@given(st.lists(profiles(T, "p", max_conditions=3), min_size=1, max_size=30))
def test_matching_through_either_structure_equals_reference(ps: list[Profile]) -> None:
    poset, forest, ref = FilterPoset(), PosetForest(), ReferenceMatcher()
    for i, p in enumerate(ps):
        q = p.with_id(f"p{i}")
        for m in (poset, forest):
            m.add(q)
        ref.add(q)
    for e in EVENTS:
        want = ref.match(e)
        assert poset.match(e) == want
        assert forest.match(e) == want


def _p(text: str) -> Profile:
    return parse_profile(text, SCHEMA)


@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("cls", [FilterPoset, PosetForest])
def test_tarkoma_forwarding_trace(cls: type[TableBase], indexed: bool) -> None:
    """Tarkoma Figs. 3.1-3.3: router S with neighbours I1, I2, I3."""
    fwd = ForwardingTable(["I1", "I2", "I3"], structure=cls(indexed=indexed))
    a = _p("a: T(a <= 4)")
    b = _p("b: T(b <= 2)")
    c = _p("c: T(a <= 3)")
    d = _p("d: T(b <= 1)")
    e = _p("e: T(a <= 2)")
    assert fwd.subscribe(a, "I1") == {"I2": Update((a,)), "I3": Update((a,))}
    assert fwd.subscribe(b, "I1") == {"I2": Update((b,)), "I3": Update((b,))}
    # c and d come from I2: covered for I3 by I1's filters, but I1 must get them.
    assert fwd.subscribe(c, "I2") == {"I1": Update((c,))}
    assert fwd.subscribe(d, "I2") == {"I1": Update((d,))}
    assert fwd.structure.forwards_of("c", ["I1", "I2", "I3"]) == {"I1"}
    # e is covered from both sides: sent nowhere.
    assert fwd.subscribe(e, "I3") == {}
    assert fwd.structure.forwards_of("e", ["I1", "I2", "I3"]) == frozenset()
    # Unsub(a) goes to I2 and I3; c is uncovered for I3, e for I2.
    assert fwd.unsubscribe("a") == {"I2": Update((e,), (a,)), "I3": Update((c,), (a,))}
    assert [p.id for p in fwd.exported("I1")] == ["c", "d"]
    assert [p.id for p in fwd.exported("I2")] == ["b", "e"]
    assert [p.id for p in fwd.exported("I3")] == ["b", "c"]


@pytest.mark.parametrize("cls", [FilterPoset, PosetForest])
def test_equal_filters_share_a_node_and_representatives_move(cls: type[TableBase]) -> None:
    fwd = ForwardingTable(["up"], structure=cls())
    p1 = _p("h1: T(a > 3)")
    p2 = _p("h2: T(a in {4, 5})")  # the same filter, written differently
    assert fwd.subscribe(p1, "r1") == {"up": Update((p1,))}
    assert fwd.subscribe(p2, "r2") == {}
    assert fwd.structure.node_of("h1") is fwd.structure.node_of("h2")
    assert fwd.structure.node_of("h1").subscribers == {"r1", "r2"}
    # Removing the profile that stood for the filter sends its twin instead.
    assert fwd.unsubscribe("h1") == {"up": Update((p2,), (p1,))}
    assert fwd.unsubscribe("h2") == {"up": Update((), (p2,))}
    assert fwd.exported("up") == []


@pytest.mark.parametrize("cls", [FilterPoset, PosetForest])
def test_errors_for_duplicate_and_unknown_ids(cls: type[TableBase]) -> None:
    t = cls()
    t.add(_p("x: T(a = 1)"))
    with pytest.raises(DuplicateProfileError):
        t.add(_p("x: T(a = 2)"))
    with pytest.raises(UnknownProfileError):
        t.remove("nope")
    with pytest.raises(UnknownProfileError):
        t.node_of("nope")


def test_forest_deletion_reinserts_subtree_and_poset_reconnects() -> None:
    rng = random.Random(7)
    chain = [_p(f"c{k}: T(a <= {k})") for k in range(6)]
    side = [_p(f"s{k}: T(a <= {k}, b = 0)") for k in range(6)]
    poset, forest = FilterPoset(), PosetForest()
    order = chain + side
    rng.shuffle(order)
    for p in order:
        poset.add(p)
        forest.add(p)
    assert [p.id for p in poset.roots()] == [p.id for p in forest.roots()] == ["c5"]
    poset.remove("c5")
    forest.remove("c5")
    # s5 (a <= 5, b = 0) was covered only by c5.
    assert {p.id for p in poset.roots()} == {p.id for p in forest.roots()} == {"c4", "s5"}
    assert [p.id for p in poset.immediate_successors("c4")] == ["c3", "s4"]
    assert [p.id for p in poset.immediate_predecessors("s3")] == ["c3", "s4"]
    parent = forest.parent_of("s0")
    assert parent is not None and covers(parent, forest.get("s0"))
    assert forest.depth() >= 5


def check_invariants(t: TableBase) -> None:
    """What every structure promises, checked pairwise on its nodes."""
    nodes = t.nodes()
    roots = set(t.root_nodes())
    assert sum(len(n.entries) for n in nodes) == len(t) == len(t.entries)
    for n in nodes:
        assert n.entries and all(t.node_of(pid) is n for pid in n.entries)
        assert all(t.entries[pid] is e for pid, e in n.entries.items())
        for y in [None, *IFACES]:
            assert n.in_scope(y) == any(e.src != y for e in n.entries.values())
    flat = isinstance(t, FlatTable)
    for a, b in itertools.permutations(nodes, 2):
        if not flat:
            assert not (covers(a.filter, b.filter) and covers(b.filter, a.filter)), \
                "equivalent filters share one node"
        if a in roots and b in roots and not flat:
            assert not covers(a.filter, b.filter), "roots are pairwise incomparable"
    for n in nodes:
        covered = any(m is not n and covers(m.filter, n.filter) for m in nodes)
        assert (n in roots) == (flat or not covered), "the roots are the maximal filters"
    for u, v in t.edges():
        assert covers(u.filter, v.filter) and not covers(v.filter, u.filter)
    if isinstance(t, FilterPoset):
        for n in nodes:
            assert all(n in p.succs for p in n.preds) and all(n in c.preds for c in n.succs)
        edges = set(t.edges())
        for (u, v), (v2, w) in itertools.product(edges, edges):
            assert v is not v2 or (u, w) not in edges, "only immediate covers are edges"
        for n in nodes:  # and every cover is a path: the descendants are what n covers
            below: set[FilterNode] = set()
            stack = list(n.succs)
            while stack:
                c = stack.pop()
                if c not in below:
                    below.add(c)
                    stack.extend(c.succs)
            assert below == {m for m in nodes if m is not n and covers(n.filter, m.filter)}
    if isinstance(t, PosetForest):
        for n in nodes:
            assert (n.parent is None) == (n in roots), "a parent covers its child"
            assert all(c.parent is n for c in n.children)
        seen: list[FilterNode] = []
        stack = list(roots)
        while stack:
            n = stack.pop()
            seen.append(n)
            stack.extend(n.children)
        assert sorted(seen, key=lambda n: n.seq) == nodes, "every node once under a root"
    if flat:
        assert not t.edges() and roots == set(nodes)


STRUCTURES: dict[str, Callable[[], TableBase]] = {
    "poset": FilterPoset, "forest": PosetForest,
    "poset-walk": partial(FilterPoset, indexed=False),
    "forest-walk": partial(PosetForest, indexed=False),
    "flat-id": partial(FlatTable, by="id"), "flat-filter": partial(FlatTable, by="filter"),
}


@pytest.mark.parametrize("name", list(STRUCTURES))
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(10, 70))
def test_invariants_hold_after_random_insert_delete_and_all_is_gone_at_the_end(
        name: str, seed: int, steps: int) -> None:
    """Parent covers child, roots pairwise incomparable and maximal, poset edges exactly
    the immediate covers, entries and interface counts consistent, after every insert
    and delete; after deleting everything nothing is left, not even in the indexes."""
    rng = random.Random(seed)
    t = STRUCTURES[name]()
    live: list[str] = []
    for i in range(steps):
        if live and rng.random() < 0.4:
            t.remove(live.pop(rng.randrange(len(live))))
        else:
            p = random_profile(rng, f"p{i}")
            if live and rng.random() < 0.3:  # an equal copy: joins a node (or not, flat)
                p = t.get(rng.choice(live)).with_id(f"p{i}")
            t.add(p, rng.choice(IFACES))
            live.append(p.id)
        check_invariants(t)
    for pid in rng.sample(live, len(live)):
        t.remove(pid)
        check_invariants(t)
    assert len(t) == 0 and not t.nodes() and not t.root_nodes() and not t.edges()
    assert not t.entries and not t._by_key and not t._roots
    assert not NO_LINKS, "the shared empty link set stays empty"
    assert t._index is None or len(t._index) == 0
