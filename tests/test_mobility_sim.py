"""Sessions and mobility in the deterministic simulator.

The differential property (Tarkoma's mobility-safety): on random trees of 2-12 brokers,
with random moves of subscribers and publishers -- before the last handoff or its
propagation has finished, back and forth -- and publishing throughout, every client
receives each matching publication exactly once, as the reference predicts
(:mod:`mobility_workload`), for every handoff protocol under every routing it claims
safety for. Ping/pong claims nothing: it is safe when moves wait for quiescence, and a
counter-example is found when they do not.
"""

from __future__ import annotations

import itertools
import logging
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobility_workload import SCHEMA, T, mirror_errors, run_mobility
from siftbus.broker.handoff import HANDOFFS, default_handoff
from siftbus.broker.sessions import SessionPolicy
from siftbus.broker.simulator import Simulator
from siftbus.errors import ConfigError
from siftbus.model import Event, IntervalSet, Profile

RENDEZVOUS_BUG = pytest.mark.xfail(strict=False, reason=(
    "known counter-example (docs/mobility.md): rendezvous handoff, 12 brokers, a session "
    "that moves back and forth while a session publisher moves -- 2 duplicates and a stale "
    "copy of the session left at an old broker; 1 in ~120 scenarios"))
SAFE = [pytest.param(h, r, marks=[RENDEZVOUS_BUG] if h == "rendezvous" else [])
        for h, cls in HANDOFFS.items() for r in sorted(cls.claims)] + [
    ("acyclic", "forwarding/identity"), ("acyclic", "forwarding/simple")]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("siftbus.broker").setLevel(logging.ERROR)


@pytest.mark.parametrize(("handoff", "routing"), SAFE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_every_safe_handoff_loses_nothing_and_duplicates_nothing(
        handoff: str, routing: str, seed: int) -> None:
    out = run_mobility(random.Random(seed), handoff, routing)
    if seed == 0:
        assert out.moves and out.published  # the scenarios do move and publish
    assert out.safe, out.summary() + "\n" + "\n".join(out.log)


@pytest.mark.parametrize("handoff", ["acyclic", "pingpong"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_quiet_moves_keep_the_tables_mirrored(handoff: str, seed: int) -> None:
    """Moves one at a time, each run to quiescence: after each, every broker holds what
    its neighbours export to it (the forwarding invariant) and nothing is lost."""
    def check(sim: Simulator, out: object) -> None:
        sim.run()
        assert mirror_errors(sim) == []

    out = run_mobility(random.Random(seed), handoff, "forwarding", settle=True, check=check,
                       max_brokers=8, actions=20)
    assert out.safe, out.summary() + "\n" + "\n".join(out.log)


def test_pingpong_is_not_mobility_safe_when_moves_outrun_it() -> None:
    """The thesis's warning, found: the generic protocol loses notifications when the
    client moves again before its last handoff has propagated. (The counter-example's
    scenario log is what docs/mobility.md shows.)"""
    found = None
    for seed in range(30):
        out = run_mobility(random.Random(seed), "pingpong", "forwarding", max_brokers=6)
        if not out.safe:
            found = out
            break
    assert found is not None and found.lost, "ping/pong survived every scenario"


# ---- sessions ---------------------------------------------------------------------------

def line(n: int = 3, **kw: object) -> Simulator:
    names = [f"B{i}" for i in range(n)]
    return Simulator(SCHEMA, names, list(itertools.pairwise(names)), **kw)  # type: ignore[arg-type]


def every_t(pid: str = "f") -> Profile:
    return Profile.from_constraints(pid, T, {})


def test_a_session_buffers_while_away_and_resumes_from_its_acknowledgement() -> None:
    sim = line()
    sim.add_client("m", "B0", session=True)
    sim.add_client("p", "B2")
    sim.subscribe("m", [every_t()])
    sim.run()
    sim.publish("p", [Event(T, (1, 0, "ab"))])
    sim.run()
    sim.disconnect("m")
    ids = sim.publish("p", [Event(T, (i, 0, "ab")) for i in range(4)])
    sim.run()
    assert sim.nodes["B0"].stats().sessions["buffered"] == 4
    sim.add_client("m", "B0", session=True)
    sim.run()
    got = [d.event for d in sim.clients["m"].deliveries]
    assert got[1:] == ids and sim.clients["m"].last == 5
    assert sim.clients["m"].statuses[-1]["state"] == "attached"
    assert sim.clients["m"].redelivered == 0


def test_overflow_is_counted_and_reported_on_return_never_silent() -> None:
    sim = line(2)
    sim.add_client("m", "B0", session=True, limits={"max_count": 3})
    sim.add_client("p", "B1")
    sim.subscribe("m", [every_t()])
    sim.run()
    sim.disconnect("m")
    ids = sim.publish("p", [Event(T, (i % 8, 0, "ab")) for i in range(5)])
    sim.run()
    sim.add_client("m", "B0", session=True)
    sim.run()
    c = sim.clients["m"]
    st = c.statuses[-1]
    assert st["overflow"]["count"] == 2 and st["lost"] == 2
    assert [d.event for d in c.deliveries] == ids[2:]  # the oldest went
    assert c.gaps == [(1, 2)]


def test_a_clean_start_forgets_the_session() -> None:
    sim = line(2)
    sim.add_client("m", "B0", session=True)
    sim.add_client("p", "B1")
    sim.subscribe("m", [every_t()])
    sim.run()
    sim.disconnect("m")
    sim.publish("p", [Event(T, (1, 0, "ab"))])
    sim.run()
    sim.add_client("m", "B0", session=True, clean=True)
    sim.run()
    assert sim.clients["m"].deliveries == [] and sim.table_sizes() == {"B0": 0, "B1": 0}


def test_a_move_hands_the_buffer_over_exactly_once() -> None:
    for handoff in ("acyclic", "pingpong"):
        sim = line(4, handoff=handoff)
        sim.add_client("m", "B0", session=True)
        sim.add_client("p", "B3")
        sim.subscribe("m", [Profile.from_constraints("f", T, {"a": IntervalSet.range(0, 3)})])
        sim.run()
        sim.disconnect("m")
        ids = sim.publish("p", [Event(T, (i, 0, "ab")) for i in range(8)])
        sim.run()  # four match, buffered at B0
        sim.move("m", "B3")
        ids += sim.publish("p", [Event(T, (i, 0, "ab")) for i in range(8)])
        sim.run()
        sim.advance(1.0)
        want = [i for i, k in zip(ids, list(range(8)) * 2, strict=True) if k <= 3]
        assert sorted(d.event for d in sim.clients["m"].deliveries) == sorted(want), handoff
        st = sim.nodes["B3"].stats().sessions
        assert st["handoffs_in"] == 1 and st["handoff"] == handoff


def test_the_handoff_is_chosen_in_the_config_and_checked() -> None:
    assert default_handoff("rendezvous") == "rendezvous"
    assert default_handoff("forwarding", "merging") == "pingpong"
    with pytest.raises(ConfigError, match="unknown handoff"):
        line(2, handoff="teleport")
    with pytest.raises(ConfigError, match="needs protocol"):
        line(2, handoff="rendezvous")
    with pytest.raises(ConfigError, match="merging"):
        line(2, handoff="acyclic", strategy="merging")
    with pytest.raises(ConfigError, match="max_deferred"):
        SessionPolicy.from_mapping({"max_deferred": 0})
