"""Sessions and mobility on real asyncio brokers on 127.0.0.1 (in this process): resume
after a disconnect, durable across a broker restart with a store, and a subscriber moving
every 200 ms across a 5-broker tree while a publisher sends -- every event exactly once."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.model import Event

from .mobility import NAMES, T, close_all, start_tree, wait_for
from .servers import settle


async def test_a_session_resumes_after_a_disconnect_exactly_once() -> None:
    servers = await start_tree("acyclic", names=["B0"], edges=[])
    port = servers["B0"].port
    try:
        state = SessionState("m")
        got: list[int] = []
        c = await Client.connect(port=port, session=state)
        await c.subscribe("f: T(a < 50)", lambda n: got.append(n.event.keys[1]))
        pub = await Client.connect(port=port)
        await pub.publish_batch([Event(T, (1, i)) for i in range(10)], ack=True)
        await wait_for(lambda: len(got) == 10)
        await c.close()
        await pub.publish_batch([Event(T, (i % 100, 10 + i)) for i in range(200)], ack=True)
        assert servers["B0"].node.stats().sessions["buffered"] == 100
        c = await Client.connect(port=port, session=state)  # "f" is kept: unclaimed here
        await wait_for(lambda: c.unclaimed.qsize() == 100)
        while not c.unclaimed.empty():
            got.append(c.unclaimed.get_nowait().event.keys[1])
        assert state.status["state"] == "attached" and state.gaps == []
        want = list(range(10)) + [10 + i for i in range(200) if i % 100 < 50]
        assert got == want and state.last == 110
        await c.close()
        await pub.close()
    finally:
        await close_all(servers)


async def test_buffers_survive_a_broker_restart_with_a_store(tmp_path: Path) -> None:
    db = tmp_path / "b0.sqlite"
    servers = await start_tree("acyclic", names=["B0"], edges=[], store=db)
    state = SessionState("m", limits={"max_count": 30})
    c = await Client.connect(port=servers["B0"].port, session=state)
    await c.subscribe("f: T()")
    await c.close()
    pub = await Client.connect(port=servers["B0"].port)
    await pub.publish_batch([Event(T, (1, i)) for i in range(40)], ack=True)
    await pub.close()
    await close_all(servers)
    servers = await start_tree("acyclic", names=["B0"], edges=[], store=db)
    try:
        got: list[int] = []
        c = await Client.connect(port=servers["B0"].port, session=state)
        c.unclaimed_dropped = 0
        await wait_for(lambda: c.unclaimed.qsize() == 30)
        while not c.unclaimed.empty():
            got.append(c.unclaimed.get_nowait().event.keys[1])
        assert got == list(range(10, 40))  # the 10 oldest went over max_count: reported
        assert state.status["overflow"]["count"] == 10 and state.gaps == [(1, 10)]
        await c.close()
    finally:
        await close_all(servers)


@pytest.mark.parametrize(("handoff", "protocol"), [("acyclic", "forwarding"),
                                                  ("pingpong", "forwarding"),
                                                  ("rendezvous", "rendezvous")])
async def test_a_fresh_process_with_only_the_session_id_takes_it_over_elsewhere(
        handoff: str, protocol: str) -> None:
    """A new process that knows only the id (no epoch, no broker: ``siftbus subscribe
    --session`` restarted at another broker) gets the rows kept at the session's first
    broker, once, and the old copy goes: its broker finds the newest copy before the ACK
    and numbers it above (it used to start a second session with epoch 1 beside it)."""
    servers = await start_tree(handoff, protocol)
    try:
        c = await Client.connect(port=servers["B3"].port, session=SessionState("m"))
        await c.subscribe("f: T(a < 50)")
        await c.close()
        pub = await Client.connect(port=servers["B2"].port)
        await wait_for(lambda: servers["B3"].node.sessions.sessions["m"].state == "away")
        for i in range(40):  # until the route is everywhere: the rows reach B3
            await pub.publish_batch([Event(T, (1, i))], ack=True)
            await asyncio.sleep(0.02)
        await wait_for(lambda: servers["B3"].node.sessions.sessions["m"].count >= 1)
        # acked at B2 is not yet buffered at B3: read the count once nothing is in flight
        await settle(servers, [])
        kept = servers["B3"].node.sessions.sessions["m"].count
        held = servers["B3"].node.sessions.sessions["m"].epoch
        state = SessionState("m")
        c = await Client.connect(port=servers["B4"].port, session=state)
        # decided before the ACK, above B3's: B4's epoch of the next round
        epoch = servers["B4"].node.handoff.next_epoch(held)
        assert state.statuses[0]["epoch"] == epoch
        await wait_for(lambda: c.unclaimed.qsize() >= kept, 5)
        await pub.publish_batch([Event(T, (2, 100 + i)) for i in range(5)], ack=True)
        await wait_for(lambda: c.unclaimed.qsize() >= kept + 5)
        await asyncio.sleep(0.3)
        got = Counter(c.unclaimed.get_nowait().event.keys[1]
                      for _ in range(c.unclaimed.qsize()))
        assert max(got.values()) == 1 and len(got) == kept + 5
        assert set(range(100, 105)) <= set(got)
        assert "m" not in servers["B3"].node.sessions.sessions
        assert state.status["state"] == "ready" and state.epoch == epoch
        await c.close()
        await pub.close()
    finally:
        await close_all(servers)


@pytest.mark.parametrize(("handoff", "protocol"), [("acyclic", "forwarding"),
                                                   ("rendezvous", "rendezvous")])
async def test_a_subscriber_moving_every_200ms_gets_every_event_exactly_once(
        handoff: str, protocol: str) -> None:
    """10,000 events/s (MOB_RATE) for 3 s while the subscriber hops every 200 ms to a random broker
    of a 5-broker tree (the 2-core shared test machine sustains this rate; bench/mobility.py
    measures more)."""
    rate, seconds = int(os.environ.get("MOB_RATE", "10000")), 3.0
    servers = await start_tree(handoff, protocol)
    rng = random.Random(7)
    try:
        state = SessionState("mover")
        seen: Counter[int] = Counter()
        at = "B3"
        c = await Client.connect(port=servers[at].port, session=state)
        await c.subscribe("f: T(a < 50)", lambda n: seen.update([n.event.keys[1]]))
        pub = await Client.connect(port=servers["B2"].port)
        await asyncio.sleep(0.3)  # the subscription reaches the publisher's broker
        sent = 0
        moves = 0

        async def publish() -> None:  # paced at ``rate`` for ``seconds``, then a tenth
            nonlocal sent       # of it until 12 moves are done: moves slow under load
            t0 = time.monotonic()  # must not multiply the events (271,146 at load 10)
            while moves < 12 or time.monotonic() - t0 < seconds:
                dt = time.monotonic() - t0
                due = int(min(dt, seconds) * rate + max(0.0, dt - seconds) * rate / 10) + 1
                batch = [Event(T, (i % 100, i)) for i in range(sent, due)]
                if batch:
                    await pub.publish_batch(batch)
                    sent += len(batch)
                await asyncio.sleep(0.01)
            await pub.flush()

        task = asyncio.ensure_future(publish())
        while not task.done():
            await asyncio.sleep(0.2)
            at = rng.choice([b for b in NAMES if b != at])
            await c.move("127.0.0.1", servers[at].port)
            moves += 1
        await task
        await pub.ping()
        want = {i for i in range(sent) if i % 100 < 50}
        try:
            await wait_for(lambda: set(seen) >= want, 30)
        finally:
            print(f"{handoff}: {sent} events, {moves} moves, {len(seen)} of {len(want)}, "
                  f"gaps {state.gaps}")
        await asyncio.sleep(0.3)
        assert set(seen) == want and max(seen.values()) == 1 and moves >= 10
        assert state.gaps == []
        await c.close()
        await pub.close()
    finally:
        await close_all(servers)


async def test_two_fresh_processes_at_once_are_numbered_apart_and_one_keeps_it() -> None:
    """Two processes with only the id connect at once at B2 and B4 while the session is
    kept at B3: the holder numbers their finds apart (epochs of the next two rounds,
    ``broker.overlay``), the later takes
    the session from the earlier (no ``handoff_failed``, one copy left), and every kept
    row reaches one of them."""
    servers = await start_tree("acyclic")
    try:
        c = await Client.connect(port=servers["B3"].port, session=SessionState("m"))
        await c.subscribe("f: T(a < 50)")
        await c.close()
        pub = await Client.connect(port=servers["B2"].port)
        await asyncio.sleep(0.3)  # the subscription reaches the publisher's broker
        await pub.publish_batch([Event(T, (1, i)) for i in range(10)], ack=True)
        await wait_for(lambda: servers["B3"].node.sessions.sessions["m"].count == 10)
        overlay = servers["B3"].node.handoff.overlay
        held = overlay.round(servers["B3"].node.sessions.sessions["m"].epoch)
        states = [SessionState("m"), SessionState("m")]
        clients = await asyncio.gather(*(
            Client.connect(port=servers[b].port, session=st)
            for b, st in zip(["B2", "B4"], states, strict=True)))
        epochs = [st.statuses[0]["epoch"] for st in states]
        assert sorted(overlay.round(e) for e in epochs) == [held + 1, held + 2]
        later = servers["B2" if epochs[0] > epochs[1] else "B4"]
        await wait_for(lambda: [b for b, s in servers.items()
                                if "m" in s.node.sessions.sessions] == [later.node.name])
        await wait_for(lambda: sum(k.unclaimed.qsize() for k in clients) >= 10)
        got = {k.unclaimed.get_nowait().event.keys[1] for k in clients
               for _ in range(k.unclaimed.qsize())}
        assert got == set(range(10))
        assert sum(s.node.sessions.counts["handoffs_failed"] for s in servers.values()) == 0
        assert later.node.sessions.sessions["m"].epoch == max(epochs)
        await pub.close()
        for k in clients:
            await k.close()
    finally:
        await close_all(servers)
