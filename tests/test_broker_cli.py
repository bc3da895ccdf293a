"""Network config validation, and real broker processes started by ``siftbus network up``
delivering the building example exactly as ``expected-matches.jsonl`` says."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from siftbus.broker.config import load_network, parse_network
from siftbus.client import Client
from siftbus.errors import ConfigError, SiftbusError
from siftbus.lang.profile import load_profiles
from siftbus.model import load_schema

ROOT = Path(__file__).resolve().parent.parent
BUILDING = ROOT / "examples" / "building"
SCHEMA = load_schema(BUILDING / "schema.toml")


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def config_text(ports: list[int], protocol: str = "forwarding", extra: str = "") -> str:
    lines = ["[network]", f'schema = "{BUILDING / "schema.toml"}"', f'protocol = "{protocol}"',
             extra, ""]
    for i, port in enumerate(ports):
        lines += [f"[brokers.B{i}]", f"port = {port}"]
        if i:
            lines.append(f'neighbours = ["B{(i - 1) // 2}"]')
        lines.append("")
    return "\n".join(lines)


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


def run_cli(*args: str, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, **kw)  # type: ignore[call-overload]


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
        up.send_signal(signal.SIGINT)
        try:
            up.wait(20)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
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

