"""The MQTT bridge end to end, against a real mosquitto and its command-line clients:
profiles registered by retained ``mosquitto_pub`` messages, events published by
``mosquitto_pub`` (and by a siftbus client at the far broker), notifications read by
``mosquitto_sub``, every delivery checked against the reference matcher's prediction;
and a bridge killed (SIGKILL) mid-stream and started again loses nothing that mosquitto
or siftbus acknowledged."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from cloudevents.core.formats.json import JSONFormat

from broker.servers import start_network
from broker_strategies import SCHEMA
from siftbus.bridge import MqttBridge, parse_mqtt
from siftbus.broker.config import parse_network
from siftbus.client import Client
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict

from .mosquitto import Mosquitto, Subscriber, mosquitto, publish

MQTT = """
[mqtt]
notify = "siftbus/notify"
control = "siftbus/control"

[[mqtt.ingress]]
topic = "dev/{a}/t"
type = "T"

[[mqtt.ingress]]
topic = "u/#"
type = "U"
"""
SCHEMA_TOML = """
[T]
a = "int[0,7]"
b = "enum[LO,MID,HI]"
s = "string"

[U]
x = "int[0,3]"
"""
NAMES = ["B1", "B2", "B3"]
PROBE = "siftbus/notify/_probe/_probe"


def config(ports: dict[str, int], schema: str = "") -> str:
    lines = ["[network]", schema, ""]
    for i, n in enumerate(NAMES):
        lines += [f"[brokers.{n}]", f"port = {ports[n]}"]
        if i:
            lines.append(f'neighbours = ["{NAMES[i - 1]}"]')
    return "\n".join(lines) + "\n" + MQTT


def random_profile(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return f"U(x <= {rng.randint(0, 3)})"
    conds = []
    if rng.random() < 0.7:
        lo = rng.randint(0, 7)
        conds.append(f"a in [{lo}, {rng.randint(lo, 7)}]")
    if rng.random() < 0.5:
        conds.append(f"b = {rng.choice(['LO', 'MID', 'HI'])}")
    if rng.random() < 0.3:
        conds.append(f's prefix "{rng.choice(["a", "b"])}"')
    return f"T({', '.join(conds)})"


def random_event(rng: random.Random, words: tuple[str, ...] = ("ab", "b", "ba")
                 ) -> dict[str, Any]:
    if rng.random() < 0.3:
        return {"type": "U", "x": rng.randint(0, 3)}
    return {"type": "T", "a": rng.randint(0, 7), "b": rng.choice(["LO", "MID", "HI"]),
            "s": rng.choice(words)}


def mqtt_messages(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Topic -> payloads: T's attribute a travels in the topic, U's type is implied."""
    out: dict[str, list[str]] = {}
    for ev in events:
        if ev["type"] == "T":
            body = {k: v for k, v in ev.items() if k not in ("type", "a")}
            out.setdefault(f"dev/{ev['a']}/t", []).append(json.dumps(body))
        else:
            out.setdefault("u/any/level", []).append(json.dumps({"x": ev["x"]}))
    return out


def predicted(profiles: dict[str, str], events: list[dict[str, Any]]) -> Counter[str]:
    """``topic event-json`` for every (registration, event) the reference matches."""
    ref = ReferenceMatcher()
    for key, text in profiles.items():
        ref.add(parse_profile(text, SCHEMA, id=key))
    out: Counter[str] = Counter()
    for ev in events:
        e = event_from_dict(ev, SCHEMA)
        for pid in ref.match(e):
            out[f"siftbus/notify/{pid} {e.to_json()}"] += 1
    return out


def event_json(msg: dict[str, Any]) -> str:
    """The event of a notification payload: the JSON object, or a CloudEvent read by
    the cloudevents SDK's parser."""
    if "specversion" not in msg:
        return event_from_dict(msg["event"], SCHEMA).to_json()
    ce = JSONFormat().read(None, json.dumps(msg).encode())
    data = ce.get_data()
    assert isinstance(data, dict)
    return event_from_dict({"type": ce.get_type(), **data}, SCHEMA).to_json()


def received(sub: Subscriber) -> Counter[str]:
    return Counter(f"{topic} {event_json(msg)}" for topic, msg in sub.messages)


def register(port: int, rng: random.Random, n: int) -> dict[str, str]:
    """``n`` retained registrations; returns ``subscriber/profile`` -> profile line."""
    profiles = {f"s{rng.randint(1, 3)}/p{i}": random_profile(rng) for i in range(n)}
    for key, text in profiles.items():
        publish(port, f"siftbus/control/{key}", [text], retain=True)
    return profiles


async def test_mqtt_deliveries_equal_the_reference_prediction(tmp_path: Path) -> None:
    """Registrations, MQTT and siftbus publications, bad payloads; then the bridge's
    broker connections break and it goes on: exactly the predicted notifications."""
    rng = random.Random(34)
    servers = await start_network(NAMES, [("B1", "B2"), ("B2", "B3")], "forwarding")
    ports = {n: s.port for n, s in servers.items()}
    net = parse_network(config(ports), schema=SCHEMA)
    settings = parse_mqtt(MQTT, SCHEMA)
    try:
        with mosquitto(tmp_path) as port:
            profiles = register(port, rng, 8)
            profiles["s4/ce"] = "T(a >= 3)"  # notified as CloudEvents
            publish(port, "siftbus/control/s4/ce",
                    ['{"profile": "T(a >= 3)", "format": "cloudevents"}'], retain=True)
            publish(port, "siftbus/control/s9/bad", ["T(nope = 1)"], retain=True)
            publish(port, "siftbus/control/s9/gone", ["T(a = 1)"], retain=True)
            publish(port, "siftbus/control/s9/gone", [""], retain=True)  # deleted
            sub = Subscriber(port, "siftbus/notify/#")
            try:
                sub.ready(port, PROBE)
                async with MqttBridge(net, "B1", ("127.0.0.1", port), settings) as bridge:
                    for _ in range(200):
                        if bridge.stats.registered == len(profiles):
                            break
                        await asyncio.sleep(0.05)
                    assert bridge.stats.registered == len(profiles)
                    assert bridge.stats.refused == 1  # T(nope = 1): no attribute nope
                    mqtt_events = [random_event(rng) for _ in range(60)]
                    native = [random_event(rng) for _ in range(20)]
                    for topic, payloads in mqtt_messages(mqtt_events).items():
                        await asyncio.to_thread(publish, port, topic, payloads)
                    bad = {"dev/3/t": ['{"b": "LO"}', '{"b": "XX", "s": "a"}', "not json",
                                       '{"type": "U", "b": "LO", "s": "a"}'],
                           "u/9": ['{"x": 2, "a": 1}']}
                    for topic, payloads in bad.items():
                        await asyncio.to_thread(publish, port, topic, payloads)
                    async with await Client.connect("127.0.0.1", ports["B3"]) as c:
                        await c.publish_batch(native, ack=True)
                    expect = predicted(profiles, mqtt_events + native)
                    await asyncio.to_thread(sub.wait_for, sum(expect.values()))
                    assert received(sub) == expect
                    stats = bridge.stats
                    assert stats.rejected == 5 and stats.published == 60
                    assert stats.delivered == stats.notified == sum(expect.values())

                    # both broker connections break: the bridge reconnects and resumes
                    for c in (bridge.client, bridge.publisher):
                        assert c is not None and c._conn is not None
                        c._conn.close()
                    more = [random_event(rng) for _ in range(30)]
                    for topic, payloads in mqtt_messages(more).items():
                        await asyncio.to_thread(publish, port, topic, payloads)
                    expect += predicted(profiles, more)
                    await asyncio.to_thread(sub.wait_for, sum(expect.values()))
                    assert received(sub) == expect  # nothing lost, nothing twice
                    assert bridge.stats.broker_connects == 2
            finally:
                sub.close()
    finally:
        for s in reversed(list(servers.values())):
            await s.close()


def bridge_process(cfg: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "siftbus", "mqtt-bridge", "-c", str(cfg),
                             "-n", "B1", "--mqtt", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "mqtt bridge" in line, proc.stderr.read() if proc.stderr else line
    return proc


async def test_a_killed_bridge_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Round 1 is published while the bridge runs and the bridge is killed in its middle;
    round 2 (by MQTT, queued by mosquitto for the bridge's session, and by a siftbus
    client, kept by the broker's session) while no bridge runs; the restarted bridge
    delivers everything predicted: duplicates only of what was in flight at the kill."""
    rng = random.Random(7)
    (tmp_path / "schema.toml").write_text(SCHEMA_TOML)
    servers = await start_network(NAMES, [("B1", "B2"), ("B2", "B3")], "forwarding")
    ports = {n: s.port for n, s in servers.items()}
    cfg = tmp_path / "net.toml"
    cfg.write_text(config(ports, 'schema = "schema.toml"'))
    procs: list[subprocess.Popen[str]] = []
    try:
        with mosquitto(tmp_path) as port:
            profiles = register(port, rng, 6)
            sub = Subscriber(port, "siftbus/notify/#")
            try:
                sub.ready(port, PROBE)
                procs.append(await asyncio.to_thread(bridge_process, cfg, port))
                for _ in range(200):  # the profiles subscribed
                    if servers["B1"].node.stats().local_profiles == len(profiles):
                        break
                    await asyncio.sleep(0.05)
                round1 = [random_event(rng, ("ab", "abc")) for _ in range(150)]
                messages = list(mqtt_messages(round1).items())
                for i, (topic, payloads) in enumerate(messages):
                    await asyncio.to_thread(publish, port, topic, payloads)
                    if i == len(messages) // 2:
                        procs[0].send_signal(signal.SIGKILL)
                procs[0].wait(10)
                round2 = [random_event(rng, ("b",)) for _ in range(40)]
                native = [random_event(rng, ("ba", "bab")) for _ in range(30)]
                for topic, payloads in mqtt_messages(round2).items():
                    await asyncio.to_thread(publish, port, topic, payloads)
                async with await Client.connect("127.0.0.1", ports["B3"]) as c:
                    await c.publish_batch(native, ack=True)
                procs.append(await asyncio.to_thread(bridge_process, cfg, port))
                expect = predicted(profiles, round1 + round2 + native)
                await asyncio.to_thread(sub.wait_for, sum(expect.values()), 30.0)
                got = received(sub)
                assert not expect - got, "lost"
                assert set(got) == set(expect), "something not predicted"
            finally:
                sub.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for s in reversed(list(servers.values())):
            await s.close()


async def test_the_bridge_reconnects_to_a_restarted_mqtt_broker(tmp_path: Path) -> None:
    """mosquitto (persistent) restarts between two rounds: the bridge reconnects by
    itself and the second round's notifications arrive like the first's."""
    rng = random.Random(11)
    servers = await start_network(NAMES, [("B1", "B2"), ("B2", "B3")], "forwarding")
    ports = {n: s.port for n, s in servers.items()}
    net = parse_network(config(ports), schema=SCHEMA)
    mq = Mosquitto(tmp_path, persistence=True)
    mq.start()
    sub: Subscriber | None = None
    try:
        profiles = register(mq.port, rng, 4)
        sub = Subscriber(mq.port, "siftbus/notify/#")
        sub.ready(mq.port, PROBE)
        async with MqttBridge(net, "B1", ("127.0.0.1", mq.port),
                              parse_mqtt(MQTT, SCHEMA)) as bridge:
            first = [random_event(rng) for _ in range(20)]
            for topic, payloads in mqtt_messages(first).items():
                await asyncio.to_thread(publish, mq.port, topic, payloads)
            expect = predicted(profiles, first)
            await asyncio.to_thread(sub.wait_for, sum(expect.values()))
            await asyncio.to_thread(mq.stop)
            await asyncio.to_thread(mq.start)
            async with asyncio.timeout(20):
                while bridge.stats.mqtt_connects < 2:
                    await asyncio.sleep(0.05)
            sub.probes = 0
            await asyncio.to_thread(sub.ready, mq.port, PROBE)  # mosquitto_sub is back
            second = [random_event(rng) for _ in range(20)]
            for topic, payloads in mqtt_messages(second).items():
                await asyncio.to_thread(publish, mq.port, topic, payloads)
            expect += predicted(profiles, second)
            await asyncio.to_thread(sub.wait_for, sum(expect.values()))
            assert received(sub) == expect
    finally:
        if sub is not None:
            sub.close()
        mq.stop()
        for s in reversed(list(servers.values())):
            await s.close()
