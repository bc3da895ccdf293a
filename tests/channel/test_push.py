"""Server-side push to remote push consumers (siftbus.channel.remote.hub): order, sequence
batches, flow control with the discard policy, connection loss, re-attachment, hosting in
a broker, and kill-and-restart durability."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel import qos as Q
from siftbus.channel.remote import (
    ChannelClient,
    ChannelServer,
    RemotePushConsumer,
    RemoteSupplier,
    register_with_broker,
)
from siftbus.errors import ClientTypeError, SiftbusError

from .servers import serving, start_server, stop_server


def ev(i: int, **data: Any) -> StructuredEvent:
    return StructuredEvent.of("Telecom", "Alarm", f"e{i}", filterable_data={"i": i, **data})


def num(e: StructuredEvent) -> int:
    return int(e.event_name[1:])


async def until(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def test_every_event_in_order_with_filters_and_window(client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    got: list[int] = []
    odd: list[int] = []
    consumer = await RemotePushConsumer.obtain(client, cid, lambda e: got.append(num(e)),
                                               window=64)

    async def slow_odd(e: StructuredEvent) -> None:
        await asyncio.sleep(0)
        odd.append(num(e))

    odd_consumer = await RemotePushConsumer.obtain(
        client, cid, slow_odd, window=7,
        constraints=[[[["Telecom", "*"]], "$i - ($i / 2) * 2 == 1"]])
    supplier = await RemoteSupplier.obtain(client, cid)
    for i in range(0, 2000, 50):
        await supplier.push([ev(j) for j in range(i, i + 50)])
    await until(lambda: len(got) == 2000 and len(odd) == 1000)
    assert got == list(range(2000))  # every event, once, in order (window 64 < 2000)
    assert odd == list(range(1, 2000, 2))
    assert consumer.duplicates == 0 and consumer.acks_sent >= 2000 // 64  # the window needed them
    await consumer.flush_acks()
    await odd_consumer.flush_acks()
    stats = await client.call("stats", channel=cid)
    assert stats["delivered"] == 3000 and stats["queued"] == 0
    await consumer.disconnect()
    assert consumer.close_reason == "disconnected"
    await client.call("disconnect", channel=cid, proxy=odd_consumer.proxy)  # from outside
    await until(lambda: odd_consumer.closed.is_set())
    assert odd_consumer.close_reason == "the service disconnected the proxy"
    await supplier.push([ev(5000)])
    assert (await client.call("stats", channel=cid))["consumers"] == 0


async def test_priority_order_and_any_events(client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.PRIORITY_ORDER})
    supplier = await RemoteSupplier.obtain(client, cid)
    got: list[int] = []
    # obtained but not attached: events queue, then go out by priority on attach
    pid = await client.call("obtain_push_consumer", channel=cid)
    await supplier.push([StructuredEvent.of("d", "t", f"e{i}", variable_header={
        "Priority": p}) for i, p in enumerate([1, 5, 3])])
    consumer = await RemotePushConsumer.attach(client, cid, pid, lambda e: got.append(num(e)))
    await until(lambda: len(got) == 3)
    assert got == [1, 2, 0]
    await consumer.flush_acks()
    assert (await client.call("stats", channel=cid))["queued"] == 0

    anys: list[Any] = []
    cid2 = await client.call("create_channel")
    await RemotePushConsumer.obtain(client, cid2, anys.append, kind="ANY_EVENT")
    sup2 = await RemoteSupplier.obtain(client, cid2, kind="ANY_EVENT")
    await sup2.push([{"any": {"t": 21.5}}, {"any": [1, 2]}])
    await until(lambda: len(anys) == 2)
    assert anys == [{"t": 21.5}, [1, 2]]


async def test_sequence_proxy_batches_and_pacing(client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    batches: list[list[int]] = []
    pacing = 0.3
    await RemotePushConsumer.obtain(
        client, cid, lambda b: batches.append([num(e) for e in b]), kind="SEQUENCE_EVENT",
        qos={Q.MAXIMUM_BATCH_SIZE: 4, Q.PACING_INTERVAL: int(pacing * 1e7)})
    supplier = await RemoteSupplier.obtain(client, cid)
    loop = asyncio.get_running_loop()
    await supplier.push([ev(i) for i in range(10)])
    t0 = loop.time()
    await until(lambda: sum(map(len, batches)) == 10)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert loop.time() - t0 >= pacing - 0.05  # the partial batch waited for PacingInterval


async def test_suspended_proxy_sends_nothing_until_resumed(client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    got: list[int] = []
    consumer = await RemotePushConsumer.obtain(client, cid, lambda e: got.append(num(e)))
    supplier = await RemoteSupplier.obtain(client, cid)
    await client.call("suspend", channel=cid, proxy=consumer.proxy)
    await supplier.push([ev(i) for i in range(3)])
    await asyncio.sleep(0.2)
    assert got == [] and (await client.call("stats", channel=cid))["queued"] == 3
    await client.call("resume", channel=cid, proxy=consumer.proxy)  # no new event needed
    await until(lambda: got == [0, 1, 2])


@pytest.mark.parametrize(("policy", "kept"), [(Q.FIFO_ORDER, list(range(15, 20))),
                                              (Q.LIFO_ORDER, list(range(4, 9)))])
async def test_slow_consumer_obeys_discard_policy(client: ChannelClient, policy: int,
                                                  kept: list[int]) -> None:
    cid = await client.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    release = asyncio.Event()
    got: list[int] = []

    async def slow(e: StructuredEvent) -> None:
        got.append(num(e))
        await release.wait()

    await RemotePushConsumer.obtain(
        client, cid, slow, window=4,
        qos={Q.MAX_EVENTS_PER_CONSUMER: 5, Q.DISCARD_POLICY: policy})
    supplier = await RemoteSupplier.obtain(client, cid)
    for i in range(4):  # the window fills: four events sent, none acknowledged
        await supplier.push([ev(i)])

    async def delivered() -> int:
        return int((await client.call("stats", channel=cid))["delivered"])

    end = time.monotonic() + 5
    while await delivered() < 4:
        assert time.monotonic() < end
        await asyncio.sleep(0.01)
    await supplier.push([ev(i) for i in range(4, 20)])  # the queue holds 5 of these 16
    stats = await client.call("stats", channel=cid)
    assert stats["discarded"] == 11 and stats["queued"] == 5 and stats["delivered"] == 4
    assert got == [0]  # the consumer is still busy with the first one
    release.set()
    await until(lambda: len(got) == 9)
    await asyncio.sleep(0.1)
    assert got == [0, 1, 2, 3, *kept]


async def test_closed_connection_disconnects_its_best_effort_proxies(
        server: ChannelServer, client: ChannelClient) -> None:
    cid = await client.call("create_channel")
    other = await ChannelClient.connect("127.0.0.1", server.port)
    got: list[int] = []
    consumer = await RemotePushConsumer.obtain(other, cid, lambda e: got.append(num(e)))
    idle = await other.call("obtain_push_consumer", channel=cid)  # never attached
    assert (await client.call("stats", channel=cid))["consumers"] == 2
    await other.close()
    await until(lambda: consumer.closed.is_set())
    stats = await client.call("stats", channel=cid)
    assert stats["consumers"] == 0
    with pytest.raises(SiftbusError):
        await client.call("attach_push", channel=cid, proxy=idle)
    supplier = await RemoteSupplier.obtain(client, cid)
    await supplier.push([ev(1)])
    assert (await client.call("stats", channel=cid))["queued"] == 0  # nobody to queue for


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[ChannelServer]:
    async with serving(EventChannelFactory(tmp_path / "channels.db")) as srv:
        yield srv


async def test_persistent_proxy_waits_for_a_new_connection(durable: ChannelServer) -> None:
    server = durable
    client = await ChannelClient.connect("127.0.0.1", server.port)
    try:
        await _persistent_reattach(server, client)
    finally:
        await client.close()


async def _persistent_reattach(server: ChannelServer, client: ChannelClient) -> None:
    cid = await client.call("create_channel", qos={Q.CONNECTION_RELIABILITY: Q.PERSISTENT,
                                                   Q.ORDER_POLICY: Q.FIFO_ORDER})
    first = await ChannelClient.connect("127.0.0.1", server.port)
    got: list[int] = []
    consumer = await RemotePushConsumer.obtain(first, cid, lambda e: got.append(num(e)),
                                               ack_delay=60.0)  # handles, never acks
    supplier = await RemoteSupplier.obtain(client, cid)
    await supplier.push([ev(i) for i in range(5)])
    await until(lambda: len(got) == 5)
    await first.close()
    await until(lambda: consumer.closed.is_set())
    await supplier.push([ev(i) for i in range(5, 8)])
    stats = await client.call("stats", channel=cid)
    assert stats["consumers"] == 1 and stats["queued"] == 8  # in flight went back
    second = await ChannelClient.connect("127.0.0.1", server.port)
    try:
        again = await RemotePushConsumer.attach(second, cid, consumer.proxy,
                                                lambda e: got.append(num(e)), seen=consumer)
        await until(lambda: len(got) == 8)
        await again.flush_acks()
        assert got == list(range(8)) and again.duplicates == 5
        assert (await client.call("stats", channel=cid))["queued"] == 0
        with pytest.raises(ClientTypeError):  # a pull proxy cannot be attached
            await second.call("attach_push", channel=cid,
                              proxy=await second.call("obtain_consumer", channel=cid))
    finally:
        await second.close()


async def test_pushes_through_a_real_broker_and_its_client_library() -> None:
    broker_server = pytest.importorskip("siftbus.broker.server")
    from siftbus.broker.node import BrokerNode
    from siftbus.channel.remote import BrokerChannelClient
    from siftbus.client.aio import Client
    from siftbus.model import parse_schema

    node = BrokerNode("b1", parse_schema('[T]\na = "int[0,9]"\n'))
    srv = broker_server.BrokerServer(node, "127.0.0.1", 0)
    factory = EventChannelFactory()
    service = register_with_broker(srv, factory)
    await srv.start()
    try:
        bc = BrokerChannelClient(await Client.connect("127.0.0.1", srv.port))
        sup = BrokerChannelClient(await Client.connect("127.0.0.1", srv.port))
        try:
            cid = await bc.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
            got: list[int] = []
            consumer = await RemotePushConsumer.obtain(bc, cid, lambda e: got.append(num(e)),
                                                       window=16)
            supplier = await RemoteSupplier.obtain(sup, cid)
            for i in range(0, 300, 30):
                await supplier.push([ev(j) for j in range(i, i + 30)])
            await until(lambda: len(got) == 300)
            assert got == list(range(300))
        finally:
            await bc.close()
        # the broker tells the hosted service that the connection closed (no sweep runs:
        # register_with_broker gives the push hub no liveness probe)
        assert service.pushes._sweeper is None
        await until(lambda: consumer.closed.is_set())
        await until(lambda: factory.get_event_channel(cid).stats().consumers == 0)
        await sup.close()
    finally:
        await srv.close()
        service.close()
        factory.close()


# ---------------------------------------------------------------------------------------
# kill -9 and restart


PERSISTENT = {Q.EVENT_RELIABILITY: Q.PERSISTENT, Q.CONNECTION_RELIABILITY: Q.PERSISTENT,
              Q.ORDER_POLICY: Q.FIFO_ORDER}


async def _push_phase(port: int, state: dict[str, Any], start: int, count: int,
                      proc: subprocess.Popen[bytes] | None, kill_after: int | None) -> None:
    client = await ChannelClient.connect("127.0.0.1", port)
    received: list[int] = state["received"]
    accepted: list[int] = state["accepted"]
    try:
        if "channel" not in state:
            state["channel"] = await client.call("create_channel", qos=PERSISTENT)
            consumer = await RemotePushConsumer.obtain(
                client, state["channel"], lambda e: received.append(num(e)), window=32,
                ack_delay=1.0)
            state["proxy"] = consumer.proxy
            state["supplier"] = (await RemoteSupplier.obtain(client, state["channel"])).proxy
        else:
            consumer = await RemotePushConsumer.attach(
                client, state["channel"], state["proxy"], lambda e: received.append(num(e)),
                seen=state["consumer"], window=32, ack_delay=1.0)
        state["consumer"] = consumer
        supplier = RemoteSupplier(client, state["channel"], state["supplier"])
        try:
            for i in range(start, start + count, 5):
                batch = list(range(i, min(i + 5, start + count)))
                await supplier.push([ev(j) for j in batch])
                accepted.extend(batch)  # push returned: accepted and stored
                await asyncio.sleep(0.002)
                if kill_after is not None and len(accepted) >= kill_after and proc:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(10)
                    await supplier.push([ev(10**6)])  # must fail: the service is gone
            await until(lambda: len(received) >= len(accepted), 20)
            await consumer.flush_acks()
        except SiftbusError:
            state["killed"] = True
    finally:
        await client.close()


@pytest.mark.timeout(120)
def test_push_consumer_gets_unacknowledged_events_after_sigkill(tmp_path: Path) -> None:
    store, port_file = tmp_path / "channels.db", tmp_path / "port"
    state: dict[str, Any] = {"received": [], "accepted": []}
    proc, port = start_server(store, port_file)
    try:
        asyncio.run(_push_phase(port, state, 0, 400, proc, 213))
        assert state.get("killed") and 213 <= len(state["accepted"]) < 400
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    before = len(state["received"])
    proc, port = start_server(store, port_file)
    try:
        state.pop("killed")
        asyncio.run(_push_phase(port, state, 1000, 100, None, None))
        assert not state.get("killed")
    finally:
        stop_server(proc)
    assert state["received"] == state["accepted"]  # every accepted event once, in order
    # the restart sent again what was unacknowledged (dropped as seen) or not yet sent
    again = state["consumer"].duplicates
    assert again > 0 or any(i < 1000 for i in state["received"][before:])
    assert again <= 32  # at most the window came again
