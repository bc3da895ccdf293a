"""FilterPoset.add_many against adding one profile at a time: same nodes (in the same
order), entries, links, roots and forwarded sets, before and after later changes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.covering.poset import FilterPoset
from siftbus.errors import DuplicateProfileError

from .test_tables import IFACES, NEIGHBOURS, check_structure
from .workload import random_profile


def _view(poset: FilterPoset) -> object:
    """Everything a user of the poset sees, with nodes named by their profile ids."""
    def name(n: object) -> tuple[str, ...]:
        return tuple(n.entries)  # type: ignore[attr-defined]

    nodes = poset.nodes()
    return {
        "nodes": [(name(n), n.keys, [(e.id, e.src, e.local_id) for e in n.entries.values()])
                  for n in nodes],
        "order": [name(n) for n in nodes],
        "edges": sorted((name(u), name(v)) for u, v in poset.edges()),
        "roots": [name(n) for n in poset.root_nodes()],
        "entries": [(pid, e.src, e.local_id) for pid, e in poset.entries.items()],
        "forwards": {y: [p.id for p in poset.forwards(y)] for y in [None, *NEIGHBOURS]},
        "preds": {name(n): sorted(name(p) for p in n.preds) for n in nodes},
    }


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 80), held=st.integers(0, 30),
       indexed=st.booleans())
def test_add_many_equals_one_at_a_time(seed: int, n: int, held: int, indexed: bool) -> None:
    rng = random.Random(seed)
    items = [(random_profile(rng, f"p{i}"), rng.choice(IFACES),
              f"l{i}" if rng.random() < 0.3 else None) for i in range(n + held)]
    one, bulk = FilterPoset(indexed=indexed), FilterPoset(indexed=indexed)
    for poset in (one, bulk):  # some profiles held before the batch
        for p, iface, lid in items[:held]:
            poset.add(p, iface, lid)
    for p, iface, lid in items[held:]:
        one.add(p, iface, lid)
    nodes = bulk.add_many(items[held:])
    assert [tuple(x.entries) for x in nodes] == [
        tuple(one.node_of(p.id).entries) for p, _, _ in items[held:]]
    assert _view(bulk) == _view(one)
    live = {p.id: (p, iface) for p, iface, _ in items}
    check_structure([bulk], [], live)
    # Both stay the same structure through later removals and additions.
    for i, (p, iface, _) in enumerate(rng.sample(items, len(items) // 2)):
        for poset in (one, bulk):
            poset.remove(p.id)
        del live[p.id]
        if i % 3 == 0:
            q = random_profile(rng, f"r{i}")
            one.add(q, iface)
            bulk.add_many([(q, iface, None)])
            live[q.id] = (q, iface)
        assert _view(bulk) == _view(one)
    check_structure([bulk], [], live)


def test_add_many_refuses_duplicates_before_changing_anything() -> None:
    rng = random.Random(7)
    ps = [random_profile(rng, f"p{i}") for i in range(5)]
    poset = FilterPoset()
    poset.add(ps[0], "I1")
    before = len(poset), poset.node_count
    with pytest.raises(DuplicateProfileError):
        poset.add_many([(ps[1], "I1", None), (ps[0], "I2", None)])
    with pytest.raises(DuplicateProfileError):
        poset.add_many([(ps[2], "I1", None), (ps[2], "I2", None)])
    assert (len(poset), poset.node_count) == before and ps[1].id not in poset


@pytest.mark.parametrize("indexed", [True, False])
def test_equal_size_estimates_of_strings_still_find_what_a_filter_covers(
        indexed: bool) -> None:
    """``s prefix "a"`` strictly covers ``s prefix "a" and s != "ab"``, yet both have the
    same size estimate: placed narrower first (item order), the wider one must still find
    it below."""
    from siftbus.model import Op, Predicate, Profile

    from .workload import T

    narrow = Profile.build("n", T, [Predicate("s", Op.PREFIX, ("a",)),
                                    Predicate("s", Op.NE, ("ab",))])
    wide = Profile.build("w", T, [Predicate("s", Op.PREFIX, ("a",))])
    one, bulk = FilterPoset(indexed=indexed), FilterPoset(indexed=indexed)
    for p in (narrow, wide):
        one.add(p, "I1")
    bulk.add_many([(narrow, "I1", None), (wide, "I1", None)])
    assert _view(bulk) == _view(one)
    assert [q.id for q in bulk.immediate_predecessors("n")] == ["w"]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 60), neighbours_first=st.booleans(),
       strategy=st.sampled_from(["covering", "merging", "identity"]))
def test_forwarding_subscribe_many_sends_what_one_at_a_time_sends(
        seed: int, n: int, neighbours_first: bool, strategy: str) -> None:
    """A whole SUB frame through ``ForwardingTable.subscribe_many`` (in one poset step
    when no neighbour is there yet) against one ``subscribe`` per profile: the same
    updates, and the same first update for a neighbour that comes up afterwards."""
    from siftbus.covering.forwarding import ForwardingTable

    rng = random.Random(seed)
    items = [(random_profile(rng, f"p{i}"), rng.choice(["local", "I1"]), None)
             for i in range(n)]
    one, bulk = ForwardingTable(strategy=strategy), ForwardingTable(strategy=strategy)
    if neighbours_first:
        for t in (one, bulk):
            t.add_neighbour("I1")
    want = [one.subscribe(p, src, lid) for p, src, lid in items]
    assert bulk.subscribe_many(items) == want
    assert bulk.add_neighbour("I2") == one.add_neighbour("I2")
    assert bulk.add_neighbour("I1") == one.add_neighbour("I1")
    with pytest.raises(DuplicateProfileError):
        bulk.subscribe_many([items[0]])


@pytest.mark.parametrize("neighbour", [False, True])
def test_forwarding_subscribe_many_refuses_duplicates_with_one_check(
        neighbour: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A duplicate id in a frame (held already, or twice in the frame) raises naming it
    and changes nothing, in one poset step (no neighbour yet) and one profile at a time;
    the poset step checks the ids once (``add_many``'s check), not a second time."""
    from siftbus.covering.forwarding import ForwardingTable

    rng = random.Random(11)
    ps = [random_profile(rng, f"p{i}") for i in range(4)]
    table = ForwardingTable()
    if neighbour:
        table.add_neighbour("I1")
    table.subscribe(ps[0], "local")
    before = dict(table.entries)
    for frame in ([(ps[1], "local", None), (ps[0], "I1", None)],
                  [(ps[2], "local", None), (ps[2], "I1", None)]):
        with pytest.raises(DuplicateProfileError) as err:
            table.subscribe_many(frame)
        assert err.value.field == frame[1][0].id
        assert dict(table.entries) == before
    lookups: list[object] = []
    real = FilterPoset.__contains__
    monkeypatch.setattr(FilterPoset, "__contains__",
                        lambda self, pid: lookups.append(pid) or real(self, pid))
    table.subscribe_many([(ps[1], "local", None), (ps[2], "I1", None)])
    assert set(table.entries) == {p.id for p in ps[:3]}
    assert bool(lookups) == neighbour  # one at a time: the table checks, then each add
