"""A claim that must locate its session meets a newer claim of it (issue 30 item 2, the
acyclic handoff's last loss with ``bench/session_races.py --revive``).

Two processes reconnect with one ``SessionState`` at two brokers without naming where it
was (a reconnect, not a ``move``), so each broker locates the session with a wave. The
claims are numbered from the same epoch, B1's below B2's (``siftbus.broker.overlay``).
When B2's claim has taken the state before B1's wave runs, B1 found no copy *older* than
its own, took that for "held nowhere" and started an empty session beside B2's: two
copies of one session, both processes connected, neither told, and B1's process got
nothing more. Now the older claim sees the newer one and defers to it
(``siftbus.broker.locate_order``). Last, a rival claim refused by the broker whose
process holds the session must leave that broker the session's profiles (the acyclic
handoff's ``move``)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from siftbus.client import Client
from siftbus.model import Event
from siftbus.wire.frames import MsgType

from .mobility import T, close_all, start_tree, wait_for
from .test_session_claims_race import HeldRequests, session_left_at_b0

HANDOFFS = [("acyclic", "forwarding"), ("rendezvous", "rendezvous"),
            ("pingpong", "forwarding")]


async def three_brokers(handoff: str, protocol: str) -> dict[str, Any]:
    return await start_tree(handoff, protocol, names=["B0", "B1", "B2"],
                            edges=[("B0", "B1"), ("B0", "B2")])


def rows_of(c: Client) -> list[int]:
    got: list[int] = []
    c.unclaimed_callback = lambda n: got.append(n.event.keys[1])
    return got


@pytest.mark.parametrize(("handoff", "protocol"), HANDOFFS)
async def test_an_older_claim_yields_to_a_newer_one_that_holds_the_session(
        handoff: str, protocol: str) -> None:
    """The process at B2 has the session; the one at B1 (an older claim) is told
    ``SessionMoved`` and B1 keeps no copy; rows go to B2's process once. Before, B1
    started an empty session and neither process was told."""
    servers = await three_brokers(handoff, protocol)
    clients: list[Client] = []
    try:
        state, pub = await session_left_at_b0(servers, clients)
        twin = copy.deepcopy(state)  # the second process, from the same state
        y = await Client.connect(port=servers["B2"].port, session=state, reconnect=False)
        clients.append(y)
        got_y = rows_of(y)
        await wait_for(lambda: state.status.get("state") == "ready", 5)
        x = await Client.connect(port=servers["B1"].port, session=twin, reconnect=False)
        clients.append(x)
        got_x = rows_of(x)
        await wait_for(lambda: x.ended.is_set(), 5)
        assert "moved" in str(x.lost)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await wait_for(lambda: got_y == [2, 3], 5)
        await asyncio.sleep(0.2)
        assert got_y == [2, 3] and got_x == []
        assert not y.ended.is_set()
        assert "m" not in servers["B1"].node.sessions.sessions
        await y.ping()
    finally:
        await close_all(servers, clients)


@pytest.mark.parametrize(("handoff", "protocol"), HANDOFFS)
async def test_an_older_live_claim_takes_over_a_newer_copy_left_without_its_process(
        handoff: str, protocol: str) -> None:
    """B2's process took the session and left; rows 2-3 wait at B2. The process that
    then reconnects at B1 with an older claim gets them and every later row. Before,
    it started an empty session and got nothing."""
    servers = await three_brokers(handoff, protocol)
    clients: list[Client] = []
    try:
        state, pub = await session_left_at_b0(servers, clients)
        twin = copy.deepcopy(state)
        y = await Client.connect(port=servers["B2"].port, session=state, reconnect=False)
        await wait_for(lambda: state.status.get("state") == "ready", 5)
        await y.close()
        await wait_for(lambda: "@m" not in servers["B2"].node.clients, 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await asyncio.sleep(0.2)
        x = await Client.connect(port=servers["B1"].port, session=twin, reconnect=False)
        clients.append(x)
        got = rows_of(x)
        await wait_for(lambda: got == [2, 3], 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (4, 5)], ack=True)
        await wait_for(lambda: got == [2, 3, 4, 5], 5)
        assert not x.ended.is_set()
        assert "m" not in servers["B2"].node.sessions.sessions
    finally:
        await close_all(servers, clients)


class Held:
    """Broker ``node`` reads the ``HANDOFF`` messages ``hold(body)`` picks only when
    :meth:`release` is called (a slow link for them alone)."""

    def __init__(self, node: Any, hold: Callable[[dict[str, Any]], bool]) -> None:
        self.node = node
        self.held: list[tuple[str, Any]] = []
        self.handle = node.handle

        def gated(link: str, msg: Any) -> None:
            if msg.type is MsgType.HANDOFF and hold(msg.body):
                self.held.append((link, msg))
                return
            self.handle(link, msg)

        node.handle = gated

    def release(self) -> None:
        self.node.handle = self.handle
        for link, msg in self.held:
            self.handle(link, msg)


def held_locates(node: Any) -> Held:
    """Locate waves (``loc``) held, so two claims' waves are both in flight at once."""
    return Held(node, lambda body: body.get("k") == "loc")



@pytest.mark.parametrize(("handoff", "protocol"), HANDOFFS)
async def test_two_claims_locating_at_once_do_not_wait_for_each_other(
        handoff: str, protocol: str) -> None:
    """Both waves pass B0 after both claims exist, so each claim's wave meets the
    other still locating. Seeing newer claims must not make them wait for each
    other (the naive fix did, until the handoff timed out and both started empty):
    one process keeps the session, the other is told ``SessionMoved``, and rows
    published afterwards reach the one that kept it."""
    servers = await three_brokers(handoff, protocol)
    clients: list[Client] = []
    try:
        state, pub = await session_left_at_b0(servers, clients)
        twin = copy.deepcopy(state)
        gate = held_locates(servers["B0"].node)
        x = await Client.connect(port=servers["B1"].port, session=twin, reconnect=False)
        clients.append(x)
        got_x = rows_of(x)
        y = await Client.connect(port=servers["B2"].port, session=state, reconnect=False)
        clients.append(y)
        got_y = rows_of(y)
        await wait_for(lambda: len(gate.held) >= 2, 5)
        gate.release()
        await wait_for(lambda: x.ended.is_set() or y.ended.is_set(), 5)
        live, got = (y, got_y) if x.ended.is_set() else (x, got_x)
        await wait_for(lambda: live.session is not None
                       and live.session.status.get("state") == "ready", 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await wait_for(lambda: got == [2, 3], 5)
        await asyncio.sleep(0.2)
        assert sorted(got_x + got_y) == [2, 3]
        assert not (x.ended.is_set() and y.ended.is_set())
        await live.ping()
    finally:
        await close_all(servers, clients)


def held_moves(node: Any, above: int) -> Held:
    """``move`` messages of an epoch above ``above`` held (a rival's renumbered claim on
    a slow link)."""
    return Held(node, lambda body: body.get("k") == "move" and body.get("e", 0) > above)



async def test_a_refused_rival_move_leaves_the_holder_its_profiles() -> None:
    """Acyclic handoff: x (B1) holds the session, connected; y's rival claim (B2, same
    round) reaches B1 and is refused, then y claims again in the next round, slowly.
    Meanwhile a third process z takes the session over from B1 at B0 (a locate finds
    B1's copy). z must be told the session's profile. Before, B1 applied the refused
    rival's move to its routes first: the profile left B1 while the session stayed,
    z was told the session has no profiles (``SessionState.profiles`` emptied, so its
    next ``move`` named none) and z received nothing while it held the session."""
    servers = await three_brokers("acyclic", "forwarding")
    clients: list[Client] = []
    try:
        state, pub = await session_left_at_b0(servers, clients)
        twin = copy.deepcopy(state)
        n = 3  # brokers: an epoch is round * 3 + rank (B0, B1, B2)
        e_y = (state.epoch // n + 1) * n + 2
        gate = HeldRequests(servers["B0"].node)
        x = await Client.connect(port=servers["B1"].port, session=state, reconnect=False)
        clients.append(x)
        y = await Client.connect(port=servers["B2"].port, session=twin, reconnect=False)
        clients.append(y)
        await wait_for(lambda: len(gate.held) >= 2, 5)
        gate.release("B1")  # x gets the session; y is sent on to B1, refused there
        slow = held_moves(servers["B0"].node, above=e_y)  # y's next round waits at B0
        await wait_for(lambda: state.status.get("state") == "ready", 5)
        await wait_for(lambda: len(slow.held) >= 1, 5)
        z_state = copy.deepcopy(state)  # a third process, from x's state
        z = await Client.connect(port=servers["B0"].port, session=z_state, reconnect=False)
        clients.append(z)
        got = rows_of(z)
        await wait_for(lambda: z_state.status.get("state") == "ready", 5)
        assert set(z_state.profiles) == {"f"}, z_state.status
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await wait_for(lambda: got == [2, 3], 5)
        slow.release()
        await wait_for(lambda: z.ended.is_set(), 5)  # y's next round takes it over
    finally:
        await close_all(servers, clients)


def held_moves_from(node: Any, origin: str) -> Held:
    """``move`` messages that broker ``origin`` started held (that claim's request on a
    slow link)."""
    return Held(node, lambda body: body.get("k") == "move" and body.get("o") == origin)



async def test_a_claim_whose_located_copy_lost_to_it_locates_the_session_again() -> None:
    """Acyclic handoff, seed 302 of ``bench/session_races.py --revive``: q's claim at
    B2 located the state at B0 and its request is slow; p's claim at B1 takes the
    state from B0 meanwhile; then n reconnects at B0 with q's newer state and its
    locate finds q's arriving copy, the newest older one, and asks it. q's request
    reaches B0 late, meets n's newer claim there and q's copy folds into n's -- and
    answers n's waiting request "not here". n must locate the session again and take
    it over from p (p is told ``SessionMoved``); rows then reach n only. Before, n
    started an empty second session (``handoff_failed``) while p kept the real one:
    two copies lived on, both processes got every row."""
    servers = await three_brokers("acyclic", "forwarding")
    clients: list[Client] = []
    try:
        state, pub = await session_left_at_b0(servers, clients)
        p_state = copy.deepcopy(state)
        slow = held_moves_from(servers["B0"].node, "B2")
        q = await Client.connect(port=servers["B2"].port, session=state, reconnect=False)
        clients.append(q)
        await wait_for(lambda: len(slow.held) >= 1, 5)  # q's request waits at B0
        p = await Client.connect(port=servers["B1"].port, session=p_state, reconnect=False)
        clients.append(p)
        got_p = rows_of(p)
        await wait_for(lambda: p_state.status.get("state") == "ready", 5)
        n_state = copy.deepcopy(state)  # q's state, numbered above p's claim
        n = await Client.connect(port=servers["B0"].port, session=n_state, reconnect=False)
        clients.append(n)
        got_n = rows_of(n)
        b2 = servers["B2"].node.handoff
        await wait_for(lambda: "m" in b2._waiting, 5)  # n asks q's arriving copy
        slow.release()
        await wait_for(lambda: n_state.status.get("state") not in (None, "arriving"), 5)
        assert n_state.status.get("state") == "ready", n_state.status
        await wait_for(lambda: p.ended.is_set(), 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await wait_for(lambda: got_n == [2, 3], 5)
        await asyncio.sleep(0.2)
        assert got_n == [2, 3] and got_p == []
        assert [b for b in servers if "m" in servers[b].node.sessions.sessions] == ["B0"]
    finally:
        await close_all(servers, clients)
