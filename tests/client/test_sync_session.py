"""Sessions with the blocking client: the same semantics as the asyncio client's
(``tests/broker/test_mobility_server.py``) -- resume after a disconnect exactly once, a
fresh process with only the session id gets the rows kept for it (at the same broker
and at another one), and a move between
brokers while a publisher sends loses nothing and repeats nothing. The brokers run on
this test's event loop; every blocking call runs in a worker thread."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from typing import Any, TypeVar

from broker.mobility import T, close_all, start_tree, wait_for
from siftbus.client import Client, SyncClient
from siftbus.client.session import SessionState
from siftbus.model import Event

R = TypeVar("R")


async def blocking(fn: Callable[[], R]) -> R:
    return await asyncio.to_thread(fn)


def drain(c: SyncClient, n: int, timeout: float = 20.0) -> list[int]:
    """``n`` notifications from ``c``'s inbox (their ``b`` keys), or what came."""
    out: list[int] = []
    try:
        while len(out) < n:
            out.append(c.receive(timeout).event.keys[1])
    except queue.Empty:
        pass
    return out


async def test_a_sync_session_resumes_after_a_disconnect_exactly_once() -> None:
    servers = await start_tree("acyclic", names=["B0"], edges=[])
    port = servers["B0"].port
    try:
        state = SessionState("m")
        c = await blocking(lambda: SyncClient.connect(port=port, session=state, timeout=20))
        await blocking(lambda: c.subscribe("f: T(a < 50)"))
        pub = await Client.connect(port=port)
        await pub.publish_batch([Event(T, (1, i)) for i in range(10)], ack=True)
        got = await blocking(lambda: drain(c, 10))
        await blocking(c.close)
        await pub.publish_batch([Event(T, (i % 100, 10 + i)) for i in range(200)], ack=True)
        assert servers["B0"].node.stats().sessions["buffered"] == 100
        # a fresh client with the session: the kept rows come to receive(), once each
        c = await blocking(lambda: SyncClient.connect(port=port, session=state, timeout=20))
        got += await blocking(lambda: drain(c, 100))
        assert await blocking(lambda: drain(c, 1, timeout=0.3)) == []  # nothing twice
        want = list(range(10)) + [10 + i for i in range(200) if i % 100 < 50]
        assert got == want and state.last == 110 and state.gaps == []
        assert c.session is state and state.status["state"] == "attached"
        await blocking(c.close)
        await pub.close()
    finally:
        await close_all(servers)


async def test_a_fresh_sync_process_takes_the_session_over_at_another_broker() -> None:
    """Only the session id, at another broker: the rows kept at B3 come once, the ACK
    already numbers it above B3's copy, and that copy goes (docs/mobility.md)."""
    servers = await start_tree("acyclic")
    try:
        state = SessionState("m")
        c = await blocking(lambda: SyncClient.connect(port=servers["B3"].port,
                                                      session=state, timeout=20))
        await blocking(lambda: c.subscribe("f: T(a < 50)"))
        await blocking(c.close)
        pub = await Client.connect(port=servers["B2"].port)
        await asyncio.sleep(0.3)  # the subscription reaches the publisher's broker
        await pub.publish_batch([Event(T, (1, i)) for i in range(20)], ack=True)
        await wait_for(lambda: servers["B3"].node.sessions.sessions["m"].count == 20)
        held = servers["B3"].node.sessions.sessions["m"].epoch
        fresh = SessionState("m")
        c = await blocking(lambda: SyncClient.connect(port=servers["B4"].port,
                                                      session=fresh, timeout=20))
        assert fresh.statuses[0]["epoch"] == servers["B4"].node.handoff.next_epoch(held)
        got = await blocking(lambda: drain(c, 20))
        assert await blocking(lambda: drain(c, 1, timeout=0.3)) == []  # nothing twice
        assert got == list(range(20)) and fresh.status["state"] == "ready"
        assert "m" not in servers["B3"].node.sessions.sessions
        await blocking(c.close)
        await pub.close()
    finally:
        await close_all(servers)


async def test_a_sync_client_moves_between_brokers_losing_nothing() -> None:
    servers = await start_tree("acyclic")
    try:
        state = SessionState("mover")
        seen: list[int] = []
        c = await blocking(lambda: SyncClient.connect(port=servers["B3"].port,
                                                      session=state, timeout=20))
        await blocking(lambda: c.subscribe("f: T(a < 50)",
                                           lambda n: seen.append(n.event.keys[1])))
        pub = await Client.connect(port=servers["B2"].port)
        await asyncio.sleep(0.3)  # the subscription reaches the publisher's broker
        sent = 0
        for to in ["B4", "B0", "B2", "B3"]:
            await pub.publish_batch([Event(T, (i % 100, i)) for i in range(sent, sent + 300)])
            sent += 300
            port = servers[to].port
            await blocking(lambda port=port: c.move("127.0.0.1", port))  # type: ignore[misc]
        await pub.publish_batch([Event(T, (i % 100, i)) for i in range(sent, sent + 300)],
                                ack=True)
        sent += 300
        want = [i for i in range(sent) if i % 100 < 50]
        await wait_for(lambda: len(seen) >= len(want), 30)
        await asyncio.sleep(0.3)
        assert sorted(seen) == want and len(seen) == len(set(seen)) and state.gaps == []
        assert c.client.broker == "B3"
        await blocking(c.close)
        await pub.close()
    finally:
        await close_all(servers)


def test_move_needs_a_session() -> None:
    import pytest

    from siftbus.errors import WireError

    c: Any = SyncClient(timeout=5)
    try:
        c._client = Client(None)  # never connected: move refuses before any I/O
        with pytest.raises(WireError, match="move needs a session"):
            c.move("127.0.0.1", 1)
    finally:
        c._stop()
