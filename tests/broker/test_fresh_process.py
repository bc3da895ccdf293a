"""A fresh process -- one that knows only its session id, no epoch, no broker -- at a
broker that holds no copy of the session, in the deterministic simulator.

Its broker finds the newest copy anywhere with one wave before the HELLO's ACK
(:meth:`ClaimCheck.find <siftbus.broker.claims.ClaimCheck.find>`), numbers the client
above it and takes the session over from its holder (docs/mobility.md, "A fresh
process"). The property: with fresh processes in the random workload (at random brokers,
often before the last handoff has ended, and giving up before their ACK), every client
receives each matching publication exactly once, for every handoff/routing pair that
claims mobility-safety, and every run ends (seed 9 looped before).
"""

from __future__ import annotations

import itertools
import logging
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.broker.sessions import SessionPolicy
from siftbus.broker.simulator import Simulator
from siftbus.model import Event, Profile

from .mobility_workload import SCHEMA, T, run_mobility
from .test_mobility_sim import SAFE

MAX_STEPS = 200_000
"""Far above any quiet run (at most ~700 messages in 100 such scenarios): a run that
needs more is a loop."""


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("siftbus.broker").setLevel(logging.ERROR)


@pytest.mark.parametrize("publishers_move", [False, True])
@pytest.mark.parametrize(("handoff", "routing"), SAFE)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), fresh=st.sampled_from([0.3, 0.6, 1.0]))
def test_fresh_processes_lose_nothing_and_get_nothing_twice(
        handoff: str, routing: str, publishers_move: bool, seed: int, fresh: float) -> None:
    """Half the moves do not name their last broker; of those, ``fresh`` are processes
    that know no epoch either."""
    out = run_mobility(random.Random(seed), handoff, routing, fresh=fresh, tell=0.5,
                       publishers_move=publishers_move, max_steps=MAX_STEPS)
    assert out.safe, f"seed {seed}: " + out.summary() + "\n" + "\n".join(out.log)


FRESH_COUNTER_EXAMPLES = [
    # (handoff, routing, publishers move, seed, fresh, tell): found with fresh processes
    ("acyclic", "forwarding", True, 9, 0.6, 0.5),  # two copies shared an epoch: a loop
    ("acyclic", "flooding", False, 1, 0.6, 0.5),  # an older copy here was resumed
    ("acyclic", "flooding", False, 214, 0.6, 0.5),
]


@pytest.mark.parametrize(("handoff", "routing", "publishers_move", "seed", "fresh", "tell"),
                         FRESH_COUNTER_EXAMPLES)
def test_fresh_counter_examples(handoff: str, routing: str, publishers_move: bool,
                                seed: int, fresh: float, tell: float) -> None:
    out = run_mobility(random.Random(seed), handoff, routing, fresh=fresh, tell=tell,
                       publishers_move=publishers_move, max_steps=MAX_STEPS)
    assert out.safe, out.summary() + "\n" + "\n".join(out.log)
    assert any("fresh process" in line for line in out.log)  # the case is exercised


# ---- single scenarios ----------------------------------------------------------------------

def line(n: int, handoff: str = "acyclic") -> Simulator:
    names = [f"B{i}" for i in range(n)]
    return Simulator(SCHEMA, names, list(itertools.pairwise(names)), handoff=handoff)


def epoch(round_: int, broker: str, brokers: int) -> int:
    """The epoch ``broker`` claims in round ``round_`` on a line of ``brokers`` (an
    epoch is a pair, ``round * brokers + rank``: ``broker.overlay``)."""
    return round_ * brokers + int(broker[1:])


def away_with_rows(sim: Simulator, at: str = "B0") -> list[tuple[str, int]]:
    """Session ``m`` subscribed at ``at``, gone; four rows kept for it there."""
    sim.add_client("m", at, session=True)
    sim.add_client("p", "B2")
    sim.run()
    sim.subscribe("m", [Profile.from_constraints("f", T, {})])
    sim.run()
    sim.disconnect("m")
    ids = sim.publish("p", [Event(T, (i, 0, "ab")) for i in range(4)])
    sim.run()
    assert sim.nodes[at].sessions.sessions["m"].count == 4
    return ids


def settled_once(sim: Simulator, ids: list[tuple[str, int]], *, epoch: int, at: str
                 ) -> None:
    """Run to quiet: ``m`` got the kept rows once each, with ``epoch``, held at ``at``
    only."""
    sim.run()
    sim.advance(1.0)
    c = sim.clients["m"]
    assert [d.event for d in c.deliveries] == ids and c.epoch == epoch
    assert [b for b, n in sim.nodes.items() if "m" in n.sessions.sessions] == [at]


@pytest.mark.parametrize("handoff", ["acyclic", "pingpong"])
def test_a_fresh_process_elsewhere_is_numbered_above_the_holder_before_its_ack(
        handoff: str) -> None:
    sim = line(4, handoff)
    ids = away_with_rows(sim)
    sim.move("m", "B3", tell=False, fresh=True)
    c = sim.clients["m"]
    assert c.pending and c.statuses[-1]["epoch"] == epoch(1, "B0", 4)  # no ACK yet
    sim.run()
    ack = c.statuses[-2]
    assert ack["epoch"] == epoch(2, "B3", 4) and ack["state"] == "arriving"  # then "ready"
    ids += sim.publish("p", [Event(T, (5, 0, "ab"))])
    sim.run()
    sim.advance(1.0)
    assert [d.event for d in c.deliveries] == ids and c.statuses[-1]["state"] == "ready"
    assert "m" not in sim.nodes["B0"].sessions.sessions


def test_a_fresh_process_right_after_a_move_takes_the_newest_copy() -> None:
    """It attaches while the move before has not reached the holder: it is numbered
    above the moving copy (round 3), which hands the state on once it has it."""
    sim = line(4)
    ids = away_with_rows(sim)
    sim.add_client("m", "B0", session=True)
    sim.run()
    sim.move("m", "B1")  # told: round 2, its request to B0 not delivered yet
    sim.move("m", "B3", tell=False, fresh=True)
    settled_once(sim, ids, epoch=epoch(3, "B3", 4), at="B3")


def test_a_fresh_process_that_gives_up_before_its_ack_leaves_no_copy() -> None:
    """Two fresh attaches at two brokers, the first abandoned before its ACK once its
    wave has passed the holder B0: its broker's wave ends unheard, only the second holds
    the session, numbered in the round after the one B0 told the first (2): round 3."""
    sim = line(4)
    ids = away_with_rows(sim)
    sim.move("m", "B1", tell=False, fresh=True)
    while not sim.nodes["B0"].handoff.counts["ce"]:  # B0 has answered the first wave
        assert sim.step()
    sim.move("m", "B3", tell=False, fresh=True)
    settled_once(sim, ids, epoch=epoch(3, "B3", 4), at="B3")


def test_a_fresh_process_where_an_old_copy_waits_takes_the_newer_one() -> None:
    """B0 still holds the copy the client left (its move to B2 has not asked for it
    yet): the fresh process at B0 is not resumed on it but numbered above B2's."""
    sim = line(3)
    ids = away_with_rows(sim, at="B0")
    sim.add_client("m", "B0", session=True)
    sim.run()
    sim.move("m", "B2")
    sim.move("m", "B0", tell=False, fresh=True)
    settled_once(sim, ids, epoch=epoch(3, "B0", 3), at="B0")


def test_a_fresh_process_behind_a_down_link_is_refused_not_split() -> None:
    """A copy may lie behind a down link: the client is refused (connect again), it
    does not start a second session."""
    sim = line(3)
    away_with_rows(sim, at="B0")
    sim.nodes["B1"].broker_down("B0")
    sim.move("m", "B2", tell=False, fresh=True)
    sim.run()
    c = sim.clients["m"]
    assert not c.connected and c.refused == 1
    assert "could not all be asked" in c.errors[-1]["message"]
    assert "m" not in sim.nodes["B2"].sessions.sessions


def test_a_fresh_process_nobody_answers_in_time_is_refused() -> None:
    """No answer within ``claim_timeout``: refused with the reason, and the wave's late
    end changes nothing."""
    names = ["B0", "B1", "B2"]
    sim = Simulator(SCHEMA, names, list(itertools.pairwise(names)),
                    sessions=SessionPolicy(claim_timeout=0.001))
    away_with_rows(sim, at="B0")
    sim.move("m", "B2", tell=False, fresh=True)
    sim.advance(0.01)  # the timer first, then the wave's messages
    c = sim.clients["m"]
    assert not c.connected and c.refused == 1
    assert "did not answer within 0.001 s" in c.errors[-1]["message"]
    assert "m" not in sim.nodes["B2"].sessions.sessions
    assert sim.nodes["B0"].sessions.sessions["m"].count == 4  # the rows stay


def test_a_new_session_is_answered_at_once_as_new() -> None:
    """Held nowhere: the wave finds nothing, the ACK says ``new`` (no second wave)."""
    sim = line(3)
    sim.add_client("m", "B1", session=True)
    sim.run()
    c = sim.clients["m"]
    assert c.statuses == [c.statuses[0]] and c.statuses[0]["state"] == "new"
    counts = sim.nodes["B1"].handoff.counts
    assert counts["loc"] == 0 and counts["cw"] == 2
