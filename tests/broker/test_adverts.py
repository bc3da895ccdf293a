"""Advertisement mode on real asyncio broker servers (127.0.0.1, port 0).

Issue 13: a publisher that disconnects must take its advertisements out of every
broker, and subscriptions must stop being forwarded toward it, as they are when a
subscriber goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from broker_strategies import SCHEMA
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.broker.store import ProfileStore
from siftbus.client import Client
from siftbus.wire.frames import Message, MsgType

from .servers import start_network

LINE = ["B0", "B1", "B2"]


@pytest.fixture
async def line() -> AsyncIterator[dict[str, BrokerServer]]:
    """B0 - B1 - B2, profile forwarding with covering and advertisements."""
    servers = await start_network(LINE, [("B0", "B1"), ("B1", "B2")], "forwarding",
                                  advertisements=True)
    try:
        yield servers
    finally:
        for srv in servers.values():
            await srv.close()


async def until(what: str, cond: Callable[[], bool], timeout: float = 10) -> None:
    """Wait (bounded) until ``cond()`` holds."""
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


def adverts(servers: dict[str, BrokerServer]) -> list[int]:
    return [servers[b].node.stats().adverts for b in LINE]


def tables(servers: dict[str, BrokerServer]) -> list[int]:
    return [servers[b].node.stats().table_size for b in LINE]


async def test_a_publisher_that_disconnects_withdraws_its_advertisements(
        line: dict[str, BrokerServer]) -> None:
    pub = await Client.connect(port=line["B0"].port, name="pub")
    async with await Client.connect(port=line["B2"].port, name="sub") as sub:
        await pub.advertise("T(a < 4)", id="temps")
        await until("the advertisement reached every broker",
                    lambda: adverts(line) == [1, 1, 1])
        await sub.subscribe("s1: T(a = 1)")
        await until("s1 travelled toward the publisher", lambda: tables(line) == [1, 1, 1])
        await sub.subscribe("s2: T(a = 6)")  # overlaps no advertisement: stays at B2
        await until("s2 is stored at B2", lambda: tables(line) == [1, 1, 2])

        await pub.close()
        await until("the advertisement left every broker",
                    lambda: adverts(line) == [0, 0, 0])
        await until("s1 was withdrawn toward the publisher",
                    lambda: tables(line) == [0, 0, 2])
        await sub.subscribe("s3: T(a = 2)")
        await sub.ping()
        await asyncio.sleep(0.2)  # give a wrong forward time to arrive
        assert tables(line) == [0, 0, 3]

        async with await Client.connect(port=line["B1"].port, name="pub2") as pub2:
            await pub2.advertise("T(a < 4)", id="temps")
            await until("s1 and s3 travel toward the new publisher",
                        lambda: tables(line) == [0, 2, 3])
            stream = await sub.subscribe("s4: T(a in [1, 2])")  # covers s1 and s3
            await until("s4 replaced s1 and s3 at B1", lambda: tables(line) == [0, 1, 4])
            await pub2.publish_batch([{"type": "T", "a": a, "b": "LO", "s": "x"}
                                      for a in (1, 2, 3)], ack=True)
            got = [await stream.get(5), await stream.get(5)]
            assert [n.event["a"] for n in got] == [1, 2]


def test_a_durable_client_keeps_its_profiles_but_not_its_advertisements(
        tmp_path: Path) -> None:
    """With a store a client's profiles outlive its connection; its advertisements do
    not (it cannot publish while it is away, and the store never held them)."""
    store = ProfileStore(tmp_path / "b.sqlite")
    node = BrokerNode("B0", SCHEMA, advertisements=True, store=store)
    sent: list[tuple[str, Message]] = []
    node.transport_send = lambda link, msg: sent.append((link, msg))
    link, _ = node.client_up("both")
    node.handle(link, Message(MsgType.SUB, {"texts": ["s: T(a = 1)"]}))
    node.handle(link, Message(MsgType.ADV, {"texts": ["temps: T(a < 4)"]}))
    assert [m.type for _, m in sent] == []  # no error, no neighbour to tell
    assert (node.stats().table_size, node.stats().adverts) == (1, 1)
    node.client_down(link)
    assert (node.stats().table_size, node.stats().adverts) == (1, 0)
    assert node.client_up("both")[1] == ["s"]
    store.close()
