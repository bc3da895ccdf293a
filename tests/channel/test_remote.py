"""The channel service over the wire: against the standalone server and hosted inside a
real siftbus broker server, both on 127.0.0.1 port 0."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel import qos as Q
from siftbus.channel.remote import (
    ChannelClient,
    ChannelServer,
    RemoteConsumer,
    RemoteSupplier,
    register_with_broker,
)
from siftbus.errors import (
    ChannelNotFound,
    ClientTypeError,
    InvalidConstraint,
    SiftbusError,
    WireError,
)


def ev(i: int, **data: Any) -> StructuredEvent:
    return StructuredEvent.of("Telecom", "Alarm", f"e{i}", filterable_data={"i": i, **data})


async def test_round_trip_with_filters(client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    consumer = await RemoteConsumer.obtain(client, cid)
    await consumer.add_filter([[[["Telecom", "*"]], "$i >= 5 and $severity == 'high'"]])
    everyone = await RemoteConsumer.obtain(client, cid)
    supplier = await RemoteSupplier.obtain(client, cid)
    n = await supplier.push([ev(i, severity="high" if i % 2 else "low") for i in range(10)])
    assert n == 10
    got = await consumer.pull(100, timeout=1)
    assert [e.event_name for e in got] == ["e5", "e7", "e9"]
    assert len(await everyone.pull(100, timeout=1)) == 10
    info = await client.call("channel_info", channel=cid)
    assert info["stats"]["accepted"] == 10 and info["stats"]["delivered"] == 13
    assert [c["id"] for c in await client.call("list_channels")] == [cid]


async def test_long_poll_wakes_on_push(client: ChannelClient, server: ChannelServer) -> None:
    cid = await client.call("create_channel")
    consumer = await RemoteConsumer.obtain(client, cid)
    other = await ChannelClient.connect("127.0.0.1", server.port)
    try:
        supplier = await RemoteSupplier.obtain(other, cid)
        waiting = asyncio.ensure_future(consumer.pull(10, timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await supplier.push([ev(1)])
        got = await asyncio.wait_for(waiting, 2)
        assert [e.event_name for e in got] == ["e1"]
    finally:
        await other.close()


async def test_unacknowledged_events_come_again_and_are_deduplicated(
        client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    pid = await client.call("obtain_consumer", channel=cid)
    supplier = await RemoteSupplier.obtain(client, cid)
    await supplier.push([ev(i) for i in range(3)])
    first = await client.call("pull", channel=cid, proxy=pid, max=2)
    again = await client.call("pull", channel=cid, proxy=pid, max=2)  # no ack: same two
    assert [s for s, _ in first] == [s for s, _ in again]
    acked = await client.call("pull", channel=cid, proxy=pid, max=2, ack=first[-1][0])
    assert len(acked) == 1 and acked[0][0] > first[-1][0]
    consumer = RemoteConsumer(client, cid, pid)
    consumer.last_seq = first[-1][0]
    assert [e.event_name for e in await consumer.pull(5)] == ["e2"]


async def test_any_events_remote(client: ChannelClient) -> None:
    cid = await client.call("create_channel")
    consumer = await RemoteConsumer.obtain(client, cid, kind="ANY_EVENT")
    supplier = await RemoteSupplier.obtain(client, cid, kind="ANY_EVENT")
    await supplier.push([{"any": {"temperature": 21.5}}, {"any": [1, 2]}])
    assert await consumer.pull(10) == [{"temperature": 21.5}, [1, 2]]


async def test_bad_requests_get_errors_and_service_goes_on(client: ChannelClient) -> None:
    with pytest.raises(ChannelNotFound):
        await client.call("get_qos", channel=999)
    with pytest.raises(WireError):
        await client.call("no_such_method")
    with pytest.raises(SiftbusError):
        await client.call("create_channel", qos={"Priority": 99999})
    cid = await client.call("create_channel")
    with pytest.raises(InvalidConstraint):
        await client.call("add_filter", channel=cid, admin=0, side="consumer",
                          constraints=[[[], "$x =="]])
    sup = await RemoteSupplier.obtain(client, cid)
    with pytest.raises(ClientTypeError):
        await sup.push([{"any": 1}])
    with pytest.raises(SiftbusError):
        await sup.push([{"header": "nonsense"}])
    assert await client.call("get_qos", channel=cid)  # still serving


async def test_malformed_frame_closes_only_that_connection(server: ChannelServer,
                                                           client: ChannelClient) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">I", 3) + b"\x09\x01\x00")  # wrong version
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    assert data  # an ERROR frame, then EOF
    writer.close()
    assert await client.call("create_channel") >= 1


async def test_hosted_in_a_real_broker_server() -> None:
    broker_server = pytest.importorskip("siftbus.broker.server")
    from siftbus.broker.node import BrokerNode
    from siftbus.model import parse_schema

    pytest.importorskip("siftbus.client.aio")
    from siftbus.channel.remote import BrokerChannelClient
    from siftbus.client.aio import Client

    node = BrokerNode("b1", parse_schema('[T]\na = "int[0,9]"\n'))
    srv = broker_server.BrokerServer(node, "127.0.0.1", 0)
    factory = EventChannelFactory()
    register_with_broker(srv, factory)
    await srv.start()
    try:
        c = await ChannelClient.connect("127.0.0.1", srv.port)
        try:
            cid = await c.call("create_channel")
            consumer = await RemoteConsumer.obtain(c, cid)
            supplier = await RemoteSupplier.obtain(c, cid)
            await supplier.push([ev(1), ev(2)])
            assert [e.event_name for e in await consumer.pull(10, timeout=2)] == ["e1", "e2"]
            with pytest.raises(ChannelNotFound):
                await c.call("stats", channel=cid + 100)
            waiting = asyncio.ensure_future(consumer.pull(10, timeout=5))
            await asyncio.sleep(0.05)
            await supplier.push([ev(3)])
            assert [e.event_name for e in await asyncio.wait_for(waiting, 3)] == ["e3"]
        finally:
            await c.close()
        # the same service through siftbus.client, the broker's own client library
        bc = BrokerChannelClient(await Client.connect("127.0.0.1", srv.port))
        try:
            assert cid in [i["id"] for i in await bc.call("list_channels")]
            consumer = await RemoteConsumer.obtain(bc, cid)
            supplier = await RemoteSupplier.obtain(bc, cid)
            await supplier.push([ev(4)])
            assert [e.event_name for e in await consumer.pull(10, timeout=2)] == ["e4"]
            with pytest.raises(ChannelNotFound):
                await bc.call("stats", channel=cid + 100)
        finally:
            await bc.close()
    finally:
        await srv.close()
        factory.close()


async def test_linger_paces_pulls_into_batches(client: ChannelClient) -> None:
    cid = await client.call("create_channel")
    pid = await client.call("obtain_consumer", channel=cid)
    supplier = await RemoteSupplier.obtain(client, cid)
    await supplier.push([ev(1)])
    first = await client.call("pull", channel=cid, proxy=pid, timeout=1.0, linger=0.3)
    assert len(first) == 1
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await supplier.push([ev(2)])
    waiting = asyncio.ensure_future(client.call("pull", channel=cid, proxy=pid,
                                                ack=first[-1][0], timeout=2.0, linger=0.3))
    await asyncio.sleep(0.05)
    await supplier.push([ev(3)])
    second = await waiting
    assert loop.time() - t0 >= 0.25  # no second reply within the linger period
    assert [w["structured"]["header"]["fixed_header"]["event_name"] for _, w in second] == \
        ["e2", "e3"]  # ... so the events arrive as one batch
