"""The bridge's egress flow control, with a stand-in for the paho client (what it
returns is what paho returns): at most MAX_OUTSTANDING notifications wait for their
PUBACK (MQTT message ids are 16 bits), a notification the client refuses is tried again
and never acknowledged unsent, and a session row is acknowledged only once every one of
its notifications has its PUBACK."""

from __future__ import annotations

import asyncio
from typing import Any

import paho.mqtt.client as paho
import pytest

from broker_strategies import SCHEMA
from siftbus.bridge import MqttBridge, parse_control, parse_mqtt
from siftbus.bridge import mqtt as bridge_mqtt
from siftbus.broker.config import parse_network
from siftbus.client import Notification
from siftbus.model import Event


class Info:
    def __init__(self, mid: int, rc: int) -> None:
        self.mid, self.rc = mid, rc


class FakeMqtt:
    """Refuses the first ``refuse`` publications (as paho does when its queue is full)."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.sent: list[tuple[str, int]] = []
        self.mid = 0

    def publish(self, topic: str, payload: bytes, qos: int) -> Info:
        if self.refuse:
            self.refuse -= 1
            return Info(0, paho.MQTT_ERR_QUEUE_SIZE)
        self.mid += 1
        self.sent.append((topic, self.mid))
        return Info(self.mid, paho.MQTT_ERR_SUCCESS)


class FakeClient:
    def __init__(self) -> None:
        self.acks: list[int] = []

    def ack_nowait(self, upto: int) -> None:
        self.acks.append(upto)


def bridge(fake: FakeMqtt) -> tuple[MqttBridge, FakeClient]:
    net = parse_network("[brokers.B1]\nport = 7999\n", schema=SCHEMA)
    b = MqttBridge(net, "B1", ("127.0.0.1", 1), parse_mqtt("", SCHEMA))
    b._loop = asyncio.get_running_loop()
    b._mqtt = fake  # type: ignore[assignment]
    client = FakeClient()
    b.client = client  # type: ignore[assignment]
    b.ready.set()
    reg = parse_control("alice", "all", b"U()")
    assert reg is not None
    b.by_pid[reg.pid] = reg
    return b, client


def note(b: MqttBridge, number: int, seq: int) -> Notification:
    b.session.numbers[("B1/c1", seq)] = number
    b.session.last = max(b.session.last, number)
    n = Notification(next(iter(b.by_pid)), Event.of(SCHEMA["U"], {"x": 1}), "B1/c1", seq,
                     1.0)
    b._on_note(n)
    return n


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_outstanding_notifications_are_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(bridge_mqtt, "MAX_OUTSTANDING", 2)
    fake = FakeMqtt()
    b, client = bridge(fake)
    for i in range(1, 6):
        note(b, i, i)
    assert len(fake.sent) == 2 and len(b._backlog) == 3
    b._on_puback(fake.sent[0][1])  # row 1 done: acknowledged, one more handed to MQTT
    await settle()
    assert client.acks == [1] and len(fake.sent) == 3
    for _, mid in list(fake.sent[1:]):
        b._on_puback(mid)
    await settle()
    for _, mid in list(fake.sent[3:]):
        b._on_puback(mid)
    await settle()
    assert len(fake.sent) == 5 and client.acks[-1] == 5 and not b._pending


@pytest.mark.parametrize("refuse", [1, 3])
async def test_a_refused_notification_is_retried_never_acknowledged_unsent(
        refuse: int) -> None:
    fake = FakeMqtt(refuse)
    b, client = bridge(fake)
    note(b, 1, 1)
    note(b, 2, 2)
    await settle()
    # refused: kept in order (the second note's turn sends both once the client accepts)
    assert len(fake.sent) == (2 if refuse == 1 else 0)
    assert client.acks == [] and b._pending == {1: 1, 2: 1}
    async with asyncio.timeout(5):
        while len(fake.sent) < 2:
            await asyncio.sleep(0.05)
    assert client.acks == []  # sent, not yet acknowledged by the MQTT broker
    b._on_puback(fake.sent[1][1])
    await settle()
    assert client.acks == []  # row 1 still waits: acknowledgements are cumulative
    b._on_puback(fake.sent[0][1])
    await settle()
    assert client.acks == [2]
