"""The key property of the broker network (issue 6, item 7), in the simulator.

Random trees of 1-9 brokers, random client placement, random interleaved SUB/UNSUB
sequences with many covering and equivalent profiles; then publishing. For every
protocol and strategy the multiset of (subscriber, profile, event) deliveries must equal
the reference matcher's prediction, and once every profile is removed every routing
table must be empty.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_strategies import SCHEMA, T, U, events, oracle, profiles
from siftbus.broker.simulator import Delivery, Simulator
from siftbus.model import Event, IntervalSet, Profile

CONFIGS = [
    dict(protocol="flooding"),
    dict(protocol="forwarding", strategy="simple"),
    dict(protocol="forwarding", strategy="identity"),
    dict(protocol="forwarding", strategy="covering"),
    dict(protocol="forwarding", strategy="merging"),
    dict(protocol="forwarding", strategy="merging", imperfect=True),
    dict(protocol="forwarding", strategy="covering", advertisements=True),
    dict(protocol="rendezvous", strategy="covering"),
    dict(protocol="rendezvous", strategy="identity"),
]


def run_scenario(data: st.DataObject, config: dict[str, Any], max_brokers: int = 9,
                 roundtrip: bool = False, policy: str = "auto",
                 leave: str = "unsubscribe") -> None:
    """``leave``: how clients end, ``unsubscribe`` (every profile and advertisement
    withdrawn one by one) or ``disconnect`` (one client goes half-way, all at the end;
    their brokers have no store, so nothing of theirs may stay anywhere)."""
    n = data.draw(st.integers(1, max_brokers), label="brokers")
    names = [f"B{i}" for i in range(n)]
    edges = [(names[data.draw(st.integers(0, i - 1))], names[i]) for i in range(1, n)]
    rendezvous = None
    if config["protocol"] == "rendezvous":
        rendezvous = {t: data.draw(st.sampled_from(names)) for t in SCHEMA.names}
    sim = Simulator(SCHEMA, names, edges, rendezvous=rendezvous, roundtrip=roundtrip,
                    seed=data.draw(st.integers(0, 2**16)), **config)
    for node in sim.nodes.values():
        node.routing.batch_match.policy = policy
    nclients = data.draw(st.integers(1, 5), label="clients")
    clients = [f"c{i}" for i in range(nclients)]
    for c in clients:
        sim.add_client(c, data.draw(st.sampled_from(names)))
    adverts: dict[str, Profile] = {}
    if config.get("advertisements"):
        for c in clients:
            if data.draw(st.booleans()):
                adverts[c] = data.draw(profiles("adv"))
                sim.advertise(c, [adverts[c]])
    active: dict[tuple[str, str], Profile] = {}
    counter = 0

    def churn(steps: int) -> None:
        nonlocal counter
        for _ in range(steps):
            c = data.draw(st.sampled_from(clients))
            mine = sorted(pid for (cl, pid) in active if cl == c)
            if mine and data.draw(st.integers(0, 2)) == 0:
                pid = data.draw(st.sampled_from(mine))
                sim.unsubscribe(c, pid)
                del active[(c, pid)]
            else:
                counter += 1
                pid = f"p{counter}"
                if active and data.draw(st.integers(0, 2)) == 0:
                    # an equivalent (identical) copy of an existing profile
                    p = data.draw(st.sampled_from(sorted(active.items())))[1].with_id(pid)
                else:
                    p = data.draw(profiles(pid))
                sim.subscribe(c, p)
                active[(c, pid)] = p
            for _ in range(data.draw(st.integers(0, 3))):  # interleave partial progress
                sim.step()

    def publish_and_check() -> None:
        sim.run()
        sim.clear_deliveries()
        published: list[tuple[tuple[str, int], Event]] = []
        for c in clients:
            evs = data.draw(st.lists(events(), max_size=6))
            if config.get("advertisements"):
                adv = adverts.get(c)
                evs = [e for e in evs if adv is not None and adv.matches(e)]
            if evs:
                published.extend(zip(sim.publish(c, evs), evs, strict=True))
        sim.run()
        got = Counter(sim.deliveries())
        assert got == oracle(active, published)
        assert not any(c.errors for c in sim.clients.values())

    churn(data.draw(st.integers(1, 14), label="ops"))
    publish_and_check()
    if leave == "disconnect" and len(clients) > 1:
        gone = data.draw(st.sampled_from(clients), label="leaves")
        sim.disconnect(gone)
        clients.remove(gone)
        adverts.pop(gone, None)
        for key in [k for k in active if k[0] == gone]:
            del active[key]
    churn(data.draw(st.integers(0, 8), label="more ops"))
    publish_and_check()
    # remove everything: every table must be empty
    if leave == "disconnect":
        for c in clients:
            sim.disconnect(c)
    else:
        for (c, pid) in sorted(active):
            sim.unsubscribe(c, pid)
        for c in adverts:
            sim.unadvertise(c, ["adv"])
    active.clear()
    sim.run()
    assert sim.table_sizes() == {b: 0 for b in names}
    for node in sim.nodes.values():
        assert node.routing.table.exported_count() == 0
        assert node.routing.table.advert_count == 0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(
    str(v) if not isinstance(v, bool) else k for k, v in c.items()))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_network_delivers_exactly_the_oracle(config: dict[str, Any],
                                             data: st.DataObject) -> None:
    run_scenario(data, config)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(
    str(v) if not isinstance(v, bool) else k for k, v in c.items()))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_clients_that_disconnect_leave_nothing_behind(config: dict[str, Any],
                                                      data: st.DataObject) -> None:
    """Issue 13: a client that goes (publisher or subscriber, no store) takes its
    profiles and advertisements out of every broker; deliveries stay exact."""
    run_scenario(data, config, max_brokers=6, leave="disconnect")


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[3], CONFIGS[5], CONFIGS[7]],
                         ids=["flooding", "covering", "imperfect", "rendezvous"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_network_over_the_wire_codec(config: dict[str, Any], data: st.DataObject) -> None:
    """Every message encoded to a frame and decoded again (bytes are counted too)."""
    run_scenario(data, config, max_brokers=5, roundtrip=True)


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[3], CONFIGS[5], CONFIGS[6],
                                    CONFIGS[7]],
                         ids=["flooding", "covering", "imperfect", "advertisements",
                              "rendezvous"])
@pytest.mark.parametrize("policy", ["snapshot", "levels"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_both_batch_match_paths_deliver_exactly_the_oracle(
        config: dict[str, Any], policy: str, data: st.DataObject) -> None:
    """Routing on the index snapshot (columnar match, CSR result) and on the levelled
    matcher's ``match_batch`` give the same deliveries, through the wire codec."""
    run_scenario(data, config, max_brokers=5, roundtrip=True, policy=policy)


def test_batch_match_switches_to_the_snapshot_after_enough_events() -> None:
    """The automatic rule: after a table change the levels serve until the events at the
    new version reach the threshold, then a snapshot; deliveries exact throughout."""
    rnd = random.Random(4)
    sim = Simulator(SCHEMA, ["B0", "B1"], [("B0", "B1")], roundtrip=True)
    for c, b in (("s0", "B0"), ("s1", "B1"), ("p", "B0")):
        sim.add_client(c, b)
    active: dict[tuple[str, str], Profile] = {}
    for i in range(40):
        c = "s0" if i % 2 else "s1"
        p = _eq(f"q{i}", rnd.randrange(4)) if i % 3 else Profile.from_constraints(
            f"q{i}", T, {"a": IntervalSet.range(rnd.randrange(4), 7)})
        sim.subscribe(c, p)
        active[(c, p.id)] = p
    sim.run()
    bm = sim.nodes["B0"].routing.batch_match
    published: list[tuple[tuple[str, int], Event]] = []
    paths = []
    for k in range(6):  # one block per batch first, then mixed types (many blocks)
        evs = [Event(U, (rnd.randrange(4),)) if k < 3 or rnd.random() < 0.5 else
               Event(T, (rnd.randrange(8), rnd.randrange(3), rnd.choice(["ab", "c"])))
               for _ in range(100)]
        published.extend(zip(sim.publish("p", evs), evs, strict=True))
        sim.run()
        paths.append(bm._snap is not None)
    assert paths == [False, False, False, True, True, True]  # 300 >= 256 events
    assert Counter(sim.deliveries()) == oracle(active, published)
    sim.clear_deliveries()
    sim.unsubscribe("s1", "q0")  # a change: back to the levels, still exact
    del active[("s1", "q0")]
    sim.run()
    evs = [Event(T, (a, 0, "c")) for a in range(8)]
    got = sim.publish("p", evs)
    sim.run()
    assert Counter(sim.deliveries()) == oracle(active, list(zip(got, evs, strict=True)))


def _eq(pid: str, a: int) -> Profile:
    return Profile.from_constraints(pid, U, {"x": IntervalSet.points([a])})


def line_sim(protocol: str, n: int = 4, **kw: Any) -> Simulator:
    names = [f"B{i}" for i in range(n)]
    sim = Simulator(SCHEMA, names, [(names[i], names[i + 1]) for i in range(n - 1)],
                    protocol=protocol, roundtrip=True, **kw)
    for b in names:
        sim.add_client(f"s{b}", b)
        sim.add_client(f"p{b}", b)
    return sim


def test_structural_invariants_of_the_three_protocols() -> None:
    """Bittner's structural checks: EW duplication 1 and every event at every broker; PW
    with unique profiles duplication = brokers and no inter-broker bytes for an event
    nobody wants; identical copies are forwarded once; RK events always reach the RN."""
    ew = line_sim("flooding")
    ew.subscribe("sB3", [_eq("a", 1)])
    ew.run()
    ew.publish("pB0", [Event(U, (1,)), Event(U, (2,))])
    ew.run()
    assert sum(ew.table_sizes().values()) == 1
    assert [s.events_in for s in ew.stats().values()] == [2, 2, 2, 2]
    assert len(ew.deliveries()) == 1

    pw = line_sim("forwarding")
    pw.subscribe("sB3", [_eq("a", 1), _eq("b", 2)])
    pw.subscribe("sB2", [_eq("c", 1), _eq("d", 1)])  # covered by / identical to a
    pw.run()
    sizes = pw.table_sizes()
    assert sizes == {"B0": 2, "B1": 2, "B2": 4, "B3": 3}  # a,b everywhere; c,d stay local
    before = {b: s.bytes_in for b, s in pw.stats().items()}
    pw.publish("pB0", [Event(U, (3,))])  # matches nothing: dropped at B0
    pw.run()
    assert {b: s.bytes_in for b, s in pw.stats().items()} == before
    pw.publish("pB0", [Event(U, (1,))])
    pw.run()
    assert sorted((d.subscriber, d.profile) for d in pw.deliveries()) == \
        [("sB2", "c"), ("sB2", "d"), ("sB3", "a")]
    assert pw.stats()["B2"].events_out == 1  # once toward B3, although two entries match

    rk = line_sim("rendezvous", rendezvous={"T": "B1", "U": "B1"})
    rk.publish("pB3", [Event(U, (0,))])
    rk.run()
    st = rk.stats()
    assert st["B1"].events_in == 1 and st["B0"].events_in == 0  # reached the RN, no further


def test_unsubscribe_resends_the_covered_profile_before_the_unsub() -> None:
    """Bittner Fig. 5.4: after p6 (covering p3) leaves, p3 is re-sent before UNSUB(p6)."""
    sim = line_sim("forwarding", n=3)
    sim.subscribe("sB2", [Profile.from_constraints("p3", U, {"x": IntervalSet.points([1])})])
    sim.subscribe("sB2", [Profile.from_constraints("p6", U, {"x": IntervalSet.range(0, 2)})])
    sim.run()
    assert [e.local_id for e in sim.nodes["B1"].routing.table.entries.values()] == ["B2/sB2/p6"]
    sim.unsubscribe("sB2", "p6")
    sent = sim.links[("B2", "B1")]
    sim.step()  # B2 handles the UNSUB from its client
    assert [m.type.name for m in sent] == ["SUB", "UNSUB"]
    assert sent[0].body["profiles"][0][0] == "B2/sB2/p3"
    sim.run()
    assert sim.table_sizes() == {"B0": 1, "B1": 1, "B2": 1}


def test_a_publisher_that_disconnects_withdraws_its_advertisements() -> None:
    """Issue 13: a publisher's advertisements leave every broker with it, and
    subscriptions stop being forwarded toward it; a new publisher draws them again."""
    sim = line_sim("forwarding", n=3, advertisements=True)
    everything = Profile.from_constraints("adv", U, {})
    sim.advertise("pB0", [everything])
    sim.subscribe("sB2", [_eq("a", 1)])
    sim.run()
    adverts = {b: n.routing.table.advert_count for b, n in sim.nodes.items()}
    assert adverts == {"B0": 1, "B1": 1, "B2": 1}
    assert sim.table_sizes() == {"B0": 1, "B1": 1, "B2": 1}  # forwarded toward pB0
    sim.disconnect("pB0")
    sim.run()
    adverts = {b: n.routing.table.advert_count for b, n in sim.nodes.items()}
    assert adverts == {"B0": 0, "B1": 0, "B2": 0}
    assert sim.table_sizes() == {"B0": 0, "B1": 0, "B2": 1}  # withdrawn toward it
    sim.subscribe("sB2", [_eq("b", 2)])
    sim.run()
    assert sim.table_sizes() == {"B0": 0, "B1": 0, "B2": 2}  # and no longer sent there
    sim.advertise("pB1", [everything])
    sim.run()
    assert sim.table_sizes() == {"B0": 0, "B1": 2, "B2": 2}
    got = sim.publish("pB1", [Event(U, (1,)), Event(U, (2,)), Event(U, (3,))])
    sim.run()
    assert sorted(sim.deliveries(), key=lambda d: d.profile) == [
        Delivery("sB2", "a", got[0]), Delivery("sB2", "b", got[1])]
