"""Clients survive a broker restart (on by default): a real ``siftbus broker`` process is
killed and started again on its port; the client reconnects with backoff, subscribes
again, sends what was published meanwhile and tells its hooks. Without reconnection, or
once it gives up, ``get()`` raises a SiftbusError, never a bare StopAsyncIteration."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from siftbus.client import Client, SyncClient
from siftbus.client.reconnect import Reconnect
from siftbus.errors import BrokerUnavailable, ConnectionLostError, SiftbusError, TimedOut
from siftbus.model import load_schema, parse_event

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "examples" / "building" / "schema.toml"
FAST = Reconnect(first_wait=0.05, max_wait=0.3, attempts=200)


class Broker:
    """``siftbus broker --schema ... --port P`` in its own process; restartable."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        deadline = time.monotonic() + 20
        while True:  # the old process's port may take a moment to be free again
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "siftbus", "broker", "--schema", str(SCHEMA),
                 "--port", str(self.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if "listening on" in line:
                self.port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
                return
            self.proc.wait(5)
            assert time.monotonic() < deadline, self.proc.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.2)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker()
    b.start()
    try:
        yield b
    finally:
        b.stop()


def warm(room: int) -> dict[str, object]:
    return {"type": "Temperature", "sensor": 1, "room": room, "value": 22.5}


async def test_a_subscriber_and_publisher_survive_a_restart(broker: Broker) -> None:
    told: list[str] = []
    c = await Client.connect(port=broker.port, reconnect=FAST,
                             on_disconnect=lambda c: told.append("down"),
                             on_reconnect=lambda c: told.append("up"))
    try:
        sub = await c.subscribe("Temperature(room = 12)")
        await c.publish(warm(12))
        assert (await sub.get(timeout=10)).event["room"] == 12
        await asyncio.to_thread(broker.kill)
        for _ in range(100):
            if not c.connected.is_set():
                break
            await asyncio.sleep(0.02)
        assert told == ["down"]
        await c.publish(warm(12))  # kept while the broker is away
        await asyncio.to_thread(broker.start)
        for _ in range(600):  # connected, subscribed again, the buffer sent: then told
            if c.events.reconnects:
                break
            await asyncio.sleep(0.05)
        assert told == ["down", "up"] and c.events.reconnects == 1
        n = await sub.get(timeout=10)  # the buffered one, through the new subscription
        assert n.event["room"] == 12
        await c.publish_batch([warm(12), warm(13)], ack=True)
        assert (await sub.get(timeout=10)).event["room"] == 12
        with pytest.raises(TimedOut):
            await sub.get(timeout=0.3)
    finally:
        await c.close()
    with pytest.raises(ConnectionLostError, match="closed"):
        await sub.get(timeout=1)


async def test_without_reconnection_get_raises_a_siftbus_error(broker: Broker) -> None:
    c = await Client.connect(port=broker.port, reconnect=False)
    sub = await c.subscribe("Temperature(room = 12)")
    await asyncio.to_thread(broker.kill)
    with pytest.raises(ConnectionLostError, match="lost"):
        await sub.get(timeout=10)
    async for _ in sub:  # iteration simply ends
        pytest.fail("no notification expected")
    await c.close()


async def test_giving_up_ends_the_subscriptions_with_broker_unavailable(broker: Broker
                                                                         ) -> None:
    c = await Client.connect(port=broker.port,
                             reconnect=Reconnect(first_wait=0.02, max_wait=0.05, attempts=3))
    sub = await c.subscribe("Temperature(room = 12)")
    await asyncio.to_thread(broker.kill)
    with pytest.raises(BrokerUnavailable, match="gave up reconnecting after 3"):
        await sub.get(timeout=10)
    with pytest.raises(BrokerUnavailable):
        await c.publish(warm(12))
    await c.close()


async def test_the_publish_buffer_is_bounded(broker: Broker) -> None:
    c = await Client.connect(port=broker.port, reconnect=Reconnect(buffer=3, attempts=-1))
    try:
        await asyncio.to_thread(broker.kill)
        for _ in range(100):
            if not c.connected.is_set():
                break
            await asyncio.sleep(0.02)
        with pytest.raises(ConnectionLostError, match="publish buffer is full"):
            await c.publish_batch([warm(1)] * 4)
    finally:
        await c.close()


async def test_a_list_of_servers_is_tried_in_turn(broker: Broker) -> None:
    dead = Broker()
    dead.start()
    dead_port = dead.port
    dead.kill()
    c = await Client.connect(port=dead_port, servers=[f"127.0.0.1:{broker.port}"])
    try:
        assert c.servers[0] == ("127.0.0.1", broker.port)
        await c.ping()
    finally:
        await c.close()


async def test_a_refused_first_connect_is_a_clear_error() -> None:
    dead = Broker()
    dead.start()
    port = dead.port
    dead.kill()
    with pytest.raises(BrokerUnavailable, match=rf"cannot connect to broker at 127.0.0.1:"
                                                rf"{port}.*siftbus broker --schema"):
        await Client.connect(port=port, timeout=2)


def test_the_sync_client_mirrors_the_async_api(broker: Broker) -> None:
    with SyncClient.connect(port=broker.port, timeout=20, reconnect=FAST) as c:
        sub = c.subscribe("Temperature(room = 12)")
        c.publish(warm(12))
        assert sub.get(timeout=10).event["room"] == 12
        with pytest.raises(TimedOut):
            sub.get(timeout=0.2)
        broker.kill()
        broker.start()
        c.publish_batch([warm(12)], ack=True)  # waits out the reconnection
        got = next(iter(sub))
        assert got.event["room"] == 12 and got.profile == sub.id
    with pytest.raises(ConnectionLostError):
        sub.get(timeout=1)


def test_every_user_error_is_a_siftbus_error(broker: Broker) -> None:
    schema = load_schema(SCHEMA)
    assert parse_event(warm(12), schema)["room"] == 12  # a dict is an event too
    with pytest.raises(SiftbusError):
        parse_event(42, schema)  # type: ignore[arg-type]
    with SyncClient.connect(port=broker.port, timeout=20) as c:
        with pytest.raises(SiftbusError):
            c.publish(42)  # type: ignore[arg-type]
        with pytest.raises(SiftbusError):
            c.publish({"type": "Nope"})
        with pytest.raises(SiftbusError):
            c.receive(timeout=0.1)
    with contextlib.suppress(Exception):
        broker.stop()
