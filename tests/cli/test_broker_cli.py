"""Network config validation, and real broker processes started by ``siftbus network up``
delivering the building example exactly as ``expected-matches.jsonl`` says."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from broker.processes import (
    BUILDING,
    ROOT,
    BrokerProcess,
    broker_process,
    config_text,
    free_ports,
    interrupt,
    run_cli,
)
from siftbus.broker.config import load_network, parse_network
from siftbus.client import Client
from siftbus.errors import ConfigError, SiftbusError
from siftbus.lang.profile import load_profiles
from siftbus.model import load_schema

SCHEMA = load_schema(BUILDING / "schema.toml")


def test_example_config_is_valid() -> None:
    net = load_network(ROOT / "examples" / "network" / "net.toml")
    assert set(net.brokers) == {"B0", "B1", "B2", "B3"}
    assert net.brokers["B0"].neighbours == ("B1", "B2", "B3")
    assert net.rendezvous["Temperature"] == "B0"


@pytest.mark.parametrize(("text", "message", "line"), [
    ('[network]\nprotocol = "gossip"\n[brokers.A]\nport = 1', "protocol must be", 2),
    ('[network]\n[brokers.A]\nport = 1\nneighbours = ["B"]\n[brokers.B]\nport = 2\n'
     'neighbours = ["C"]\n[brokers.C]\nport = 3\nneighbours = ["A"]', "cycle", None),
    ('[network]\n[brokers.A]\nport = 1\nneighbours = ["Z"]', "unknown neighbour", 4),
    ('[network]\n[brokers.A]\nport = 1\n[brokers.B]\nport = 2', "connected", None),
    ('[network]\n[brokers.A]\nport = "x"', "port must be", 2),
    ('[network]\nstrategy = "best"\n[brokers.A]\nport = 1', "strategy must be", 2),
    ('[network]\nprotocol = "flooding"\nadvertisements = true\n[brokers.A]\nport = 1',
     "advertisements apply", 3),
    ('[network]\n[network.rendezvous]\nNope = "A"\n[brokers.A]\nport = 1', "unknown event", 3),
    ("[network\n", "invalid TOML", 1),
    ('[network]\nfoo = 1\n[brokers.A]\nport = 1', "unknown [network] key", 2),
])
def test_bad_configs_are_refused_with_a_line(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")) as info:
        parse_network(text, schema=SCHEMA)
    if line is not None:
        assert info.value.line == line


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "net.toml"
    bad.write_text('[network]\nschema = "nope.toml"\n[brokers.A]\nport = 1\n')
    r = run_cli("network", "stats", str(bad))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "schema" in r.stderr and "line 2" in r.stderr


async def _wait_quiet(ports: list[int], clients: list[Client]) -> None:
    prev = None
    for _ in range(300):
        snap = []
        for c in clients:
            s = await c.stats()
            snap.append((s["messages_in"], s["messages_out"]))
        if snap == prev and sum(a for a, _ in snap) == sum(b for _, b in snap):
            break
        prev = snap
        await asyncio.sleep(0.05)
    for c in clients:
        await c.ping()


@pytest.mark.parametrize("protocol", ["forwarding", "rendezvous"])
def test_network_of_processes_delivers_the_building_example(tmp_path: Path,
                                                            protocol: str) -> None:
    ports = free_ports(4)
    cfg = tmp_path / "net.toml"
    cfg.write_text(config_text(ports, protocol))
    up = subprocess.Popen([sys.executable, "-m", "siftbus", "network", "up", str(cfg)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stdout is not None
        lines = []
        for _ in range(10):  # the brokers' own "listening" lines come first
            lines.append(up.stdout.readline())
            if "network up" in lines[-1] or not lines[-1]:
                break
        assert "network up: 4 broker(s)" in lines[-1], lines
        profiles = load_profiles(BUILDING / "profiles.txt", SCHEMA)
        expected: dict[tuple[str, int], int] = defaultdict(int)
        for rec in map(json.loads, (BUILDING / "expected-matches.jsonl").open()):
            for pid in rec["matches"]:
                expected[(pid, rec["event"])] += 1

        async def scenario() -> dict[tuple[str, int], int]:
            clients = [await Client.connect(port=p, name=f"sub{i}")
                       for i, p in enumerate(ports)]
            try:
                for i, c in enumerate(clients):
                    await c.subscribe_many(profiles[i::4])
                await _wait_quiet(ports, clients)
                r = await asyncio.to_thread(
                    run_cli, "publish", "--broker", f"127.0.0.1:{ports[3]}",
                    str(BUILDING / "events.jsonl"), "--batch", "7")
                assert r.returncode == 0, r.stderr
                await _wait_quiet(ports, clients)
                got: dict[tuple[str, int], int] = defaultdict(int)
                for c in clients:
                    for s in c.subscriptions.values():
                        while not s.queue.empty():
                            n = s.queue.get_nowait()
                            got[(n.profile, n.seq)] += 1
                for c in clients:
                    await c.unsubscribe(*c.subscriptions)
                await _wait_quiet(ports, clients)
                stats = [await c.stats() for c in clients]
                assert [s["table_size"] for s in stats] == [0, 0, 0, 0]
                return got
            finally:
                for c in clients:
                    await c.close()

        got = asyncio.run(scenario())
        assert got == expected
        stats = run_cli("network", "stats", str(cfg), "--json")
        assert stats.returncode == 0
        assert all(s["neighbours_up"] >= 1 for s in json.loads(stats.stdout).values())
    finally:
        interrupt(up)
    assert up.returncode == 0


def test_subscribe_and_publish_commands(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    cfg = tmp_path / "net.toml"
    cfg.write_text(config_text([port]))
    broker = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "-c", str(cfg),
                               "-n", "B0"], stdout=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None
        assert "listening" in broker.stdout.readline()
        sub = subprocess.Popen([sys.executable, "-m", "siftbus", "subscribe", "-c", str(cfg),
                                "OutdoorTemp(value > 20)", "--count", "2", "--timeout", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert sub.stderr is not None
        assert "subscribed s1 at B0" in sub.stderr.readline()
        events = tmp_path / "ev.jsonl"
        events.write_text('{"type": "OutdoorTemp", "sensor": 1, "value": 25}\n'
                          '{"type": "OutdoorTemp", "sensor": 1, "value": 5}\n'
                          '{"type": "OutdoorTemp", "sensor": 2, "value": 30.5}\n')
        r = run_cli("publish", "-c", str(cfg), str(events))
        assert r.returncode == 0 and "published 3" in r.stderr
        out, _ = sub.communicate(timeout=60)
        lines = [json.loads(x) for x in out.splitlines()]
        assert [(x["profile"], x["seq"], x["event"]["value"]) for x in lines] == \
            [("s1", 0, 25.0), ("s1", 2, 30.5)]
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"type": "OutdoorTemp", "sensor": 1, "value": 25}\n{"type": "Nope"}\n')
        r = run_cli("publish", "-c", str(cfg), str(bad))
        assert r.returncode == 2 and "line 2" in r.stderr
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(20)
    assert broker.returncode == 0


def test_client_errors_are_siftbus_errors() -> None:
    async def go() -> None:
        with pytest.raises(SiftbusError, match="cannot connect"):
            await Client.connect(port=free_ports(1)[0], timeout=2)

    asyncio.run(go())



# ---- a broker process under hostile input (issue 13) ----------------------------------

import contextlib  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from siftbus.model import Event  # noqa: E402
from siftbus.wire.frames import VERSION, Message, MsgType, decode_error, encode  # noqa: E402
from siftbus.wire.transport import read_frame  # noqa: E402

HOSTILE_LIMITS = """
[network.limits]
max_frame = 1048576
max_conditions = 100
max_profile_text = 4096
frame_timeout = 1.0
hello_timeout = 1.0
max_connections = 40
max_buffered = 8388608
"""
CORPUS = json.loads((ROOT / "tests" / "data" / "wire" / "bad_frames.json").read_text())


async def _open(port: int, hello: bool = True
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    if hello:
        w.write(encode(Message(MsgType.HELLO, {"role": "client"})))
        assert (await read_frame(r))[0].type is MsgType.ACK
        assert (await read_frame(r))[0].type is MsgType.SCHEMA
    return r, w


async def _outcome(r: asyncio.StreamReader, timeout: float = 10.0) -> str:
    """What the broker did with what was sent before a PING (corr 2): 'closed:<limit or
    kind>' (an ERROR, then the end), 'closed:' (the end without ERROR), 'request:<kind>'
    (an ERROR, and the PING is still answered) or 'ok' (the PING answered, no ERROR).
    A broker that does none of these within ``timeout`` fails the test."""
    first: Any = None
    while True:
        try:
            msg, _ = await asyncio.wait_for(read_frame(r, 1 << 24), timeout)
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        if msg.type is MsgType.ERROR and first is None:
            first = decode_error(msg.body)
        elif msg.type is MsgType.ACK and msg.body.get("corr") == 2:
            return "ok" if first is None else f"request:{first.kind}"
    if first is None:
        return "closed:"
    limit = first.field if first.field and first.field.startswith(
        ("max_", "frame_", "hello_")) else None
    return f"closed:{limit or first.kind}"


async def _finish(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> str:
    """The :func:`_outcome` of a hostile connection, which is then closed."""
    try:
        return await _outcome(r, 15)
    finally:
        w.close()


async def _served(good: Client, sub_queue: asyncio.Queue[Any], pub: Client, n: int) -> None:
    """The well-behaved clients are still served: an event reaches the subscriber."""
    await pub.publish_batch([Event(SCHEMA["Motion"], (1, 1, n % 2))], ack=True)
    got = await asyncio.wait_for(sub_queue.get(), 10)
    assert got.event["present"] == n % 2


def test_the_bad_frame_corpus_against_a_broker_process(tmp_path: Path) -> None:
    """Every frame of tests/data/wire/bad_frames.json gets its one clear ERROR (or its
    close), and a subscriber and a publisher are served after each."""
    async def run(b: BrokerProcess) -> None:
        async with await Client.connect(port=b.port, name="good") as good, \
                await Client.connect(port=b.port, name="pub") as pub:
            queue: asyncio.Queue[Any] = asyncio.Queue()
            await good.subscribe("Motion(room = 1)", queue.put_nowait)
            for n, case in enumerate(CORPUS["cases"]):
                r, w = await _open(b.port)
                w.write(bytes.fromhex(case["hex"]))
                if case["expect"] == "closed:":
                    w.write_eof()
                else:
                    w.write(encode(Message(MsgType.PING, {"corr": 2})))
                got = await _outcome(r)
                assert got == case["expect"], (case["name"], got)
                w.close()
                await _served(good, queue, pub, n)
            info = await good.call("broker", "transport")
            assert info["refused"]["max_frame"] == 2 and info["refused"]["WireError"] >= 9

    with broker_process(tmp_path, HOSTILE_LIMITS) as b:
        asyncio.run(run(b))
        assert b.growth_mb < 100, b.growth_mb
        status, seconds, err = b.stop()
    assert status == 0 and seconds < 10, (status, seconds, err[-2000:])


def _random_frame(rng: random.Random) -> bytes:
    """A frame of a random type whose body is a random msgpack value shaped like the
    protocol's (maps with its field names, lists, small ints, strings, bytes)."""
    def value(depth: int) -> Any:
        k = rng.randrange(9 if depth < 3 else 5)
        if k == 0:
            return rng.randrange(-3, 300)
        if k == 1:
            return rng.choice(["Motion", "GlassBreak", "room", "p", "", "x" * 50])
        if k == 2:
            return rng.randbytes(rng.randrange(40))
        if k == 3:
            return rng.choice([None, True, 1.5, 2**63])
        if k == 4:
            return rng.choice(["p: Motion(room = 3)", "Motion(room >", "\ud7ff"])
        if k in (5, 6):
            return [value(depth + 1) for _ in range(rng.randrange(6))]
        keys = ["t", "n", "k", "src", "seq", "ts", "blocks", "events", "profiles", "texts",
                "ids", "corr", "service", "method", "args", "role", "name", "adverts"]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(6))}

    t = rng.choice(list(MsgType))
    body = value(0)
    if not isinstance(body, dict) or rng.random() < 0.8:
        body = {"corr": 5, **(body if isinstance(body, dict) else {"x": body})}
    return encode(Message(t, body))


def test_fuzzed_connections_against_a_broker_process(tmp_path: Path) -> None:
    """Random bytes, random and truncated frames, huge declared lengths, slow partial
    frames, held partial frames and more connections than allowed: every hostile
    connection ends with a clear ERROR or a close (or, for a frame that only makes a bad
    request, an ERROR on a connection that still answers), the good clients are served
    throughout, the broker's memory stays bounded and SIGTERM stops it at once."""
    seed = int(os.environ.get("SIFTBUS_FUZZ_SEED", "20261124"))
    rng = random.Random(seed)

    async def attack_once(port: int, kind: str) -> str:
        if kind == "random-bytes":
            r, w = await _open(port, hello=rng.random() < 0.7)
            w.write(rng.randbytes(rng.randrange(1, 3000)))
        elif kind == "random-frame":
            r, w = await _open(port)
            w.write(_random_frame(rng))
        elif kind == "truncated":
            r, w = await _open(port)
            frame = _random_frame(rng)
            w.write(frame[:rng.randrange(1, len(frame))])
            if rng.random() < 0.5:
                w.write_eof()  # and gone
                return await _finish(r, w)
        else:  # huge declared length, maybe some bytes of it
            r, w = await _open(port, hello=rng.random() < 0.5)
            w.write(struct.pack(">IBB", rng.choice([2**32 - 1, 2**24, 1048577]), VERSION, 7)
                    + rng.randbytes(rng.randrange(100)))
        w.write(encode(Message(MsgType.PING, {"corr": 2})))
        return await _finish(r, w)

    async def slow_partial(port: int) -> str:
        r, w = await _open(port)
        frame = encode(Message(MsgType.PING, {"corr": 1, "pad": "x" * 100}))
        for byte in frame[:20]:  # a byte every 0.15 s: the frame is not done in 1 s
            w.write(bytes([byte]))
            await asyncio.sleep(0.15)
            if r.at_eof() or r._buffer:  # type: ignore[attr-defined]
                break
        return await _finish(r, w)

    async def held_partial(port: int) -> str:
        r, w = await _open(port)
        w.write(struct.pack(">IBB", 1_000_000, VERSION, 7) + b"\x80" * 900_000)
        return await _finish(r, w)

    async def crowd(port: int) -> list[str]:
        conns = []
        for _ in range(45):
            with contextlib.suppress(OSError):
                conns.append(await asyncio.open_connection("127.0.0.1", port))
        out = await asyncio.gather(*(_outcome(r, 15) for r, _ in conns))
        for _, w in conns:
            w.close()
        return list(out)

    async def run(b: BrokerProcess) -> None:
        async with await Client.connect(port=b.port, name="good") as good, \
                await Client.connect(port=b.port, name="pub") as pub:
            queue: asyncio.Queue[Any] = asyncio.Queue()
            await good.subscribe("Motion(room = 1)", queue.put_nowait)
            kinds = ["random-bytes", "random-frame", "truncated", "huge-length"]
            for n in range(8):
                got = await asyncio.gather(*(attack_once(b.port, rng.choice(kinds))
                                             for _ in range(12)))
                assert all(g == "ok" or g.startswith(("closed:", "request:"))
                           for g in got), (seed, got)
                await _served(good, queue, pub, n)
            slow = await asyncio.gather(*(slow_partial(b.port) for _ in range(8)))
            assert slow == ["closed:frame_timeout"] * 8, (seed, slow)
            await _served(good, queue, pub, 8)
            held = await asyncio.gather(*(held_partial(b.port) for _ in range(30)))
            assert held == ["closed:frame_timeout"] * 30, (seed, held)
            await _served(good, queue, pub, 9)
            await asyncio.sleep(1.5)  # the refused connections linger a moment
            crowded = await crowd(b.port)
            assert crowded.count("closed:max_connections") >= 45 - 38, (seed, crowded)
            assert set(crowded) <= {"closed:max_connections", "closed:hello_timeout"}
            await _served(good, queue, pub, 10)
            info = await good.call("broker", "transport")
            assert info["buffered"] < 1_100_000 and info["peak_buffered"] < 8_388_608 + \
                30 * 300_000, info

    with broker_process(tmp_path, HOSTILE_LIMITS) as b:
        asyncio.run(run(b))
        # 30 x 0.9 MB held partial frames would be 27 MB; the budget keeps them to 8 MiB
        assert b.growth_mb < 120, (seed, b.growth_mb)
        status, seconds, err = b.stop()
    assert status == 0 and seconds < 10, (status, seconds, err[-2000:])


def test_one_huge_profile_costs_a_broker_little_memory_and_time(tmp_path: Path) -> None:
    """Issue 13: one 4 MB profile over the wire raised a broker to 932 MB, and a 15 MB
    profile line kept it parsing (deaf to SIGTERM) for minutes. With the default limits
    both are refused from their string's length."""
    async def run(b: BrokerProcess) -> list[str]:
        out = []
        for body in ({"texts": ['p: GlassBreak(zone = "' + "z" * 4_000_000 + '")']},
                     {"profiles": [["p", "", "GlassBreak", [[2, [1, ["z" * 4_000_000], "",
                                                                   []]]]]]},
                     {"texts": ["p: Motion(room in {" + ", ".join(["1"] * 5_000_000)
                                + "})"]}):
            r, w = await _open(b.port)
            w.write(encode(Message(MsgType.SUB, {**body, "corr": 1})))
            out.append(await _outcome(r, 30))
            w.close()
        async with await Client.connect(port=b.port) as c:
            await c.ping()
        return out

    with broker_process(tmp_path) as b:
        assert asyncio.run(run(b)) == ["closed:max_string"] * 3
        assert b.growth_mb < 150, b.growth_mb
        status, seconds, err = b.stop()
    assert status == 0 and seconds < 10, (status, seconds, err[-2000:])


def test_sigterm_stops_a_broker_whose_loop_is_busy(tmp_path: Path) -> None:
    """A server whose event loop never returns still stops on SIGTERM: gracefully when it
    can, at once ``grace`` seconds later when it cannot (wire.signals)."""
    script = (
        "import asyncio, sys, time\n"
        "from siftbus.wire.signals import stop_on_signals\n"
        "async def main():\n"
        "    stop_on_signals(asyncio.get_running_loop(), lambda: None, grace=1.0,\n"
        "                    name='busy')\n"
        "    print('ready', flush=True)\n"
        "    while True:\n"
        "        time.sleep(0.01)  # a request that never ends\n"
        "asyncio.run(main())\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    assert 0.9 < time.monotonic() - t0 < 8
    assert err.strip() == "siftbus: busy stopped at once (1s after SIGTERM)"


def test_subscribe_count_prints_exactly_n(tmp_path: Path) -> None:
    """Issue 13: `siftbus subscribe --count N` printed every notification of the frame
    that reached N."""
    with broker_process(tmp_path) as b:
        sub = subprocess.Popen([sys.executable, "-m", "siftbus", "subscribe", "--broker",
                                f"127.0.0.1:{b.port}", "a: Motion(room = 1)",
                                "b: Motion(room <= 2)", "c: Motion(present = 1)",
                                "--count", "2", "--timeout", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert sub.stderr is not None
        assert "subscribed a, b, c at B0" in sub.stderr.readline()
        events = tmp_path / "ev.jsonl"
        events.write_text('{"type": "Motion", "sensor": 1, "room": 1, "present": 1}\n' * 3)
        r = run_cli("publish", "--broker", f"127.0.0.1:{b.port}", str(events))
        assert r.returncode == 0, r.stderr
        out, _ = sub.communicate(timeout=60)
        assert [json.loads(x)["profile"] for x in out.splitlines()] == ["a", "b"]
        b.stop()
