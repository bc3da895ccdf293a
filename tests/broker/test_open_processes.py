"""Events of extended types between real broker processes (issue 31): a line of three
``siftbus broker`` processes on 127.0.0.1 started by ``siftbus network up``, events with
absent, nested, array and open-kind values (keys beyond int64 included) published at one
end, subscribers at every broker; flooding and forwarding deliver exactly the reference's
matches, and each delivered event is the one published."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from broker.processes import free_ports, interrupt
from open_orders import ORDERS_SCHEMA
from siftbus.client import Client
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict, parse_schema

SCHEMA_TEXT = ORDERS_SCHEMA
SCHEMA = parse_schema(SCHEMA_TEXT)

PROFILES = [
    "big: Order(price >= 100.5)",
    "gold: Order(customer.tier = GOLD)",
    'vip: Order(customer.tier >= SILVER, tags = "vip")',
    "unpaid: Order(paid not exists or paid = false)",
    'v6: Order(client cidr "ffff::/16")',
    'old: Order(at < "1600-01-01T00:00:00Z")',
    'late: Order(at >= "2262-04-12T00:00:00Z")',
    'named: Order(customer.name prefix "an" ignorecase, id > -9223372036854775808)',
    'notags: Order(tags not in {"vip", "sale"})',
    "edge: Order(id = 9223372036854775807)",
]

EVENTS = [
    {"type": "Order", "id": 1, "price": 100.5, "tags": ["vip"],
     "customer": {"tier": "GOLD", "name": "Anna"}},
    {"type": "Order", "id": -9223372036854775808, "price": -0.5, "paid": True,
     "at": "1500-01-01T00:00:00Z", "client": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
     "tags": ["sale", "new"], "customer": {"tier": "BRONZE"}},
    {"type": "Order", "id": 9223372036854775807, "price": 1e300, "paid": False,
     "at": "9999-12-31T23:59:59.999999999Z", "client": "10.1.2.3", "tags": ["sale"],
     "customer": {"tier": "SILVER", "name": "bob"}},
    {"type": "Order", "id": 7, "price": 3.25, "at": "2024-05-01T12:00:00+02:00",
     "client": "::1", "tags": ["vip", "x"], "customer": {"tier": "SILVER", "name": "ANdy"}},
]


def _config(tmp_path: Path, ports: list[int], protocol: str) -> Path:
    schema = tmp_path / "schema.toml"
    schema.write_text(SCHEMA_TEXT)
    lines = ["[network]", f'schema = "{schema}"', f'protocol = "{protocol}"', ""]
    for i, port in enumerate(ports):
        lines += [f"[brokers.B{i}]", f"port = {port}"]
        if i:
            lines.append(f'neighbours = ["B{i - 1}"]')
        lines.append("")
    cfg = tmp_path / "net.toml"
    cfg.write_text("\n".join(lines))
    return cfg


async def _settle(clients: list[Client]) -> None:
    prev = None
    for _ in range(200):
        snap = [(s["messages_in"], s["messages_out"]) for s in
                [await c.stats() for c in clients]]
        if snap == prev:
            break
        prev = snap
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("protocol", ["forwarding", "flooding"])  # all: test_open_profiles
def test_extended_events_cross_broker_processes(tmp_path: Path, protocol: str) -> None:
    profiles = [parse_profile(t, SCHEMA) for t in PROFILES]
    events = [event_from_dict(d, SCHEMA) for d in EVENTS]
    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    want = Counter((pid, i) for i, row in enumerate(ref.match_batch(events)) for pid in row)
    ports = free_ports(3)
    up = subprocess.Popen([sys.executable, "-m", "siftbus", "network", "up",
                           str(_config(tmp_path, ports, protocol))],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stdout is not None
        for _ in range(10):
            line = up.stdout.readline()
            if "network up" in line or not line:
                break
        assert "network up: 3 broker(s)" in line

        async def scenario() -> tuple[Counter[tuple[str, int]], list[bool]]:
            subs = [await Client.connect(port=p, name=f"sub{i}", reconnect=False)
                    for i, p in enumerate(ports)]
            pub = await Client.connect(port=ports[2], name="pub", reconnect=False)
            try:
                for i, c in enumerate(subs):  # each profile at one broker
                    await c.subscribe_many(profiles[i::3])
                await _settle([*subs, pub])
                await pub.publish_batch(events, ack=True)
                await _settle([*subs, pub])
                got: Counter[tuple[str, int]] = Counter()
                same = []
                for c in subs:
                    for s in c.subscriptions.values():
                        while not s.queue.empty():
                            n = s.queue.get_nowait()
                            got[(n.profile, n.seq)] += 1
                            same.append(n.event == events[n.seq])
                return got, same
            finally:
                for c in [*subs, pub]:
                    await c.close()

        got, same = asyncio.run(scenario())
        assert got == want
        assert all(same) and len(want) >= 10
    finally:
        interrupt(up)
