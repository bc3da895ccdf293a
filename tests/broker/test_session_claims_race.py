"""Two claims of one session epoch (issue 30 item 2): two processes reconnect with the
same state at two brokers while the holder has not yet answered either handoff (its
handoff messages are held back, like a slow link). Both brokers claimed the same epoch;
the second was told "not here", started empty, and the rows each broker received went
to its own client only: neither process was told that the other took over, and rows
published meanwhile were split between them or reached nobody (the batch lost at one
reconnected session that ``bench/session_races.py`` found on slow links). Since, the two
claims are rivals of one round, never the same epoch (``siftbus.broker.overlay``), under
every handoff: acyclic, rendezvous and ping/pong."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

import pytest

from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.errors import SiftbusError
from siftbus.model import Event
from siftbus.wire.frames import MsgType

from .mobility import T, close_all, start_tree, wait_for


class HeldRequests:
    """The holder ``node`` reads handoff requests (``move``/``req``) only when
    :meth:`release` is called, like a slow link; everything else as usual."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.held: list[tuple[str, Any]] = []
        self.handle = node.handle

        def gated(link: str, msg: Any) -> None:
            if msg.type is MsgType.HANDOFF and msg.body.get("k") in ("move", "req"):
                self.held.append((link, msg))
                return
            self.handle(link, msg)

        node.handle = gated

    def release(self, first: str | None = None) -> None:
        """Hand the held requests to the node, those from link ``first`` first."""
        self.node.handle = self.handle
        for link, msg in sorted(self.held, key=lambda h: h[0] != first):
            self.handle(link, msg)


def both_claimed(servers: dict[str, Any], gate: HeldRequests, handoff: str) -> bool:
    """Both claims wait for the holder B0: two requests held there -- but under ping/pong
    the claim at B2 pings the claim at B1 (by epoch the newer copy), which waits for B0
    (one request held) and answers once it has the state."""
    if handoff == "pingpong":
        return len(gate.held) >= 1 and "m" in servers["B2"].node.handoff._open
    return len(gate.held) >= 2


async def session_left_at_b0(servers: dict[str, Any], clients: list[Client]
                             ) -> tuple[SessionState, Client]:
    """A session subscribed at B0 that got row 1 and whose process then left, and a
    publisher at B0 (kept in ``clients`` to be closed)."""
    state = SessionState("m")
    first = await Client.connect(port=servers["B0"].port, session=state)
    await first.subscribe("f: T()")
    pub = await Client.connect(port=servers["B0"].port)
    clients.append(pub)
    await asyncio.sleep(0.2)
    await pub.publish_batch([Event(T, (1, 1))], ack=True)
    await wait_for(lambda: state.last == 1, 5)
    await first.close()
    return state, pub



async def two_processes(servers: dict[str, Any], state: SessionState, clients: list[Client],
                        got: dict[str, list[int]]) -> tuple[Client, Client]:
    """Two processes of one session from the same state: ``x`` at B1 with ``state``, ``y``
    at B2 with a copy of it (each process has its own); the rows each is sent go to
    ``got["x"]`` and ``got["y"]``."""
    twin = copy.deepcopy(state)
    out = []
    for name, at, st in (("x", "B1", state), ("y", "B2", twin)):
        c = await Client.connect(port=servers[at].port, session=st, reconnect=False)
        c.unclaimed_callback = lambda n, rows=got[name]: rows.append(n.event.keys[1])
        clients.append(c)
        out.append(c)
    return out[0], out[1]

@pytest.mark.parametrize(("handoff", "protocol"), [
    ("acyclic", "forwarding"), ("rendezvous", "rendezvous"), ("pingpong", "forwarding")])
async def test_two_claims_of_one_epoch_leave_the_session_to_one_process(
        handoff: str, protocol: str) -> None:
    """Both processes stay connected: one is told that the other took the session
    over, and every row reaches one of them once. Before, neither was told, and rows
    5-7 reached both."""
    servers = await start_tree(handoff, protocol, names=["B0", "B1", "B2"],
                               edges=[("B0", "B1"), ("B0", "B2")])
    clients: list[Client] = []
    try:
        got: dict[str, list[int]] = {"x": [], "y": []}
        state, pub = await session_left_at_b0(servers, clients)

        gate = HeldRequests(servers["B0"].node)  # both claims are answered only later
        x, y = await two_processes(servers, state, clients, got)
        await wait_for(lambda: both_claimed(servers, gate, handoff), 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        gate.release()
        await pub.publish_batch([Event(T, (1, b)) for b in (4, 5)], ack=True)
        await asyncio.sleep(0.3)
        await pub.publish_batch([Event(T, (1, b)) for b in (6, 7)], ack=True)

        # one process at a time: one of them is told that the other took over; every
        # row published after the first reached one of them, once (the one that ended
        # had acknowledged what it got: the other resumed after it)
        await wait_for(lambda: x.ended.is_set() or y.ended.is_set(), 5)
        assert not (x.ended.is_set() and y.ended.is_set())
        await wait_for(lambda: sorted(got["x"] + got["y"]) == [2, 3, 4, 5, 6, 7], 5)
        await asyncio.sleep(0.2)
        assert sorted(got["x"] + got["y"]) == [2, 3, 4, 5, 6, 7]
        live = y if x.ended.is_set() else x
        await live.ping()
    finally:
        await close_all(servers, clients)


# The rendezvous handoff with the holder answering B2 first lost rows 10-11 (published at
# B1 after the claims settled): both claims registered the same gid (tag = epoch) and
# the loser's teardown withdrew it. Ping/pong delivered nothing (B1 first) or lost rows
# 8-11: its claim pinged a broker whose client was connected, which never answered.
# Both failed before epochs were unique per broker (broker/overlay.py).
@pytest.mark.parametrize(("first", "handoff", "protocol"), [
    ("B1", "acyclic", "forwarding"), ("B2", "acyclic", "forwarding"),
    ("B1", "rendezvous", "rendezvous"), ("B2", "rendezvous", "rendezvous"),
    ("B1", "pingpong", "forwarding"), ("B2", "pingpong", "forwarding")])
async def test_a_claim_whose_client_went_hands_its_rows_to_the_other(
        first: str, handoff: str, protocol: str) -> None:
    """The same race, but the process at B1 is gone before the holder answers (killed
    right after its reconnect); rows published at B1 meanwhile wait there. Whichever
    claim the holder answers first, the live process at B2 gets every row once. Before,
    the claim answered second was told "not here": B2 started empty ("handoff_failed")
    and the rows held at B1 reached nobody -- or B2 waited in a loop of "moved" answers
    until its handoff timed out."""
    servers = await start_tree(handoff, protocol, names=["B0", "B1", "B2"],
                               edges=[("B0", "B1"), ("B0", "B2")])
    clients: list[Client] = []
    try:
        got: list[int] = []
        state = SessionState("m")
        c = await Client.connect(port=servers["B0"].port, session=state)
        await c.subscribe("f: T()")
        pubs = {b: await Client.connect(port=servers[b].port) for b in ("B0", "B1", "B2")}
        clients.extend(pubs.values())
        await asyncio.sleep(0.2)
        await pubs["B0"].publish_batch([Event(T, (1, 1))], ack=True)
        await wait_for(lambda: state.last == 1, 5)
        await c.close()

        gate = HeldRequests(servers["B0"].node)
        twin = copy.deepcopy(state)
        x = await Client.connect(port=servers["B1"].port, session=state, reconnect=False)
        await wait_for(lambda: len(gate.held) >= 1, 5)
        y = await Client.connect(port=servers["B2"].port, session=twin, reconnect=False)
        y.unclaimed_callback = lambda n: got.append(n.event.keys[1])
        clients.append(y)
        await wait_for(lambda: both_claimed(servers, gate, handoff), 5)
        await x.close()  # gone while its claim waits
        await wait_for(lambda: "@m" not in servers["B1"].node.clients, 5)
        await pubs["B1"].publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await pubs["B2"].publish_batch([Event(T, (1, b)) for b in (4, 5)], ack=True)
        await pubs["B0"].publish_batch([Event(T, (1, b)) for b in (6, 7)], ack=True)
        gate.release(first)
        await pubs["B0"].publish_batch([Event(T, (1, b)) for b in (8, 9)], ack=True)
        await asyncio.sleep(0.3)
        await pubs["B1"].publish_batch([Event(T, (1, b)) for b in (10, 11)], ack=True)
        await wait_for(lambda: sorted(got) == list(range(2, 12)), 5)
        await asyncio.sleep(0.2)
        assert sorted(got) == list(range(2, 12))
        assert not y.ended.is_set()
    finally:
        await close_all(servers, clients)


class HeldAcks:
    """Node ``node`` reads its clients' acknowledgements (SACK) and handoff requests
    only when told (:meth:`requests`, :meth:`acks`), like a slow link."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.handle = node.handle
        self.held: dict[bool, list[tuple[str, Any]]] = {True: [], False: []}
        self.open = {True: False, False: False}

        def gated(link: str, msg: Any) -> None:
            ack = msg.type is MsgType.SACK
            if (ack or (msg.type is MsgType.HANDOFF and msg.body.get("k") in (
                    "move", "req"))) and not self.open[ack]:
                self.held[ack].append((link, msg))
                return
            self.handle(link, msg)

        node.handle = gated

    def let_through(self, ack: bool) -> None:
        self.open[ack] = True
        for link, msg in self.held[ack]:
            with contextlib.suppress(SiftbusError):  # a SACK after its session left
                self.handle(link, msg)
        self.held[ack] = []


@pytest.mark.parametrize(("handoff", "protocol"), [
    ("acyclic", "forwarding"), ("rendezvous", "rendezvous")])
async def test_rows_the_first_claim_delivered_do_not_go_to_the_rival_too(
        handoff: str, protocol: str) -> None:
    """The holder answers B1 first and B1's process gets rows 2-3; the claim at B2,
    told that B1 holds a rival epoch, takes the session in the next round while B1's
    process's acknowledgement of 2-3 is still on its way. Before, B1 handed 2-3 over as
    unacknowledged and both processes got them (rows published at B2 reached both in 1
    run in 7 of ``test_two_processes_from_one_state_leave_the_session_to_one``); now B1
    waits for its connected process to acknowledge what it was sent, and sends it
    nothing more meanwhile."""
    servers = await start_tree(handoff, protocol, names=["B0", "B1", "B2"],
                               edges=[("B0", "B1"), ("B0", "B2")])
    clients: list[Client] = []
    try:
        got: dict[str, list[int]] = {"x": [], "y": []}
        state, pub = await session_left_at_b0(servers, clients)

        gate = HeldRequests(servers["B0"].node)
        slow = HeldAcks(servers["B1"].node)
        x, y = await two_processes(servers, state, clients, got)
        await wait_for(lambda: both_claimed(servers, gate, handoff), 5)
        gate.release("B1")  # B1 has the session; B2's request for it waits at B1
        await wait_for(lambda: len(slow.held[False]) >= 1, 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        await wait_for(lambda: got["x"] == [2, 3], 5)
        slow.let_through(ack=False)  # B2 asks while B1's process's SACK is on its way
        await asyncio.sleep(0.3)
        slow.let_through(ack=True)
        await pub.publish_batch([Event(T, (1, b)) for b in (4, 5)], ack=True)
        await wait_for(lambda: x.ended.is_set() or y.ended.is_set(), 5)
        await wait_for(lambda: {2, 3, 4, 5} <= set(got["x"] + got["y"]), 5)
        await asyncio.sleep(0.3)
        assert x.ended.is_set() and not y.ended.is_set()
        assert sorted(got["x"] + got["y"]) == [2, 3, 4, 5], got
        await y.ping()
    finally:
        await close_all(servers, clients)
