"""A secured broker network: mutual TLS between three brokers on loopback delivers exactly
what the reference oracle predicts (rights included), and the secure 3-broker network
of docs/security.md runs end to end through the ``siftbus`` command."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.processes import free_ports, interrupt, run_cli
from broker.servers import delivered, settle
from broker_strategies import SCHEMA, events, oracle, profiles
from secure import Pki, close_all, connect, make_pki, policy, start_secure
from siftbus.client import Client
from siftbus.errors import RemoteError
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, Profile, load_schema, read_events
from siftbus.security.rights import intersection

ROOT = Path(__file__).resolve().parents[2]
TENANT_RIGHT = "T(a <= 3)"
PRINCIPALS = {"ops": {"subscribe": ["*"], "publish": ["*"], "services": ["broker.*"]},
              "tenant": {"subscribe": [TENANT_RIGHT]}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


async def run_secure_network(data: st.DataObject, pki: Pki) -> None:
    names = ["B0", "B1", "B2"]
    edges = data.draw(st.sampled_from([[("B0", "B1"), ("B1", "B2")],
                                       [("B0", "B1"), ("B0", "B2")]]), label="tree")
    strategy = data.draw(st.sampled_from(["covering", "merging", "simple"]))
    servers = await start_secure(names, edges, policy(pki, PRINCIPALS, narrow=True), pki,
                                 strategy=strategy)
    clients: list[Client] = []
    try:
        for i in range(data.draw(st.integers(2, 4))):
            who = data.draw(st.sampled_from(["ops", "tenant"]))
            at = data.draw(st.sampled_from(names))
            clients.append(await connect(servers[at], pki, who, name=f"{who}{i}"))
        right = parse_profile(f"r: {TENANT_RIGHT}", SCHEMA)
        active: dict[tuple[str, str], Profile] = {}
        for j in range(data.draw(st.integers(1, 8))):
            c = data.draw(st.sampled_from(clients))
            p = data.draw(profiles(f"p{j}"))
            if c.name.startswith("tenant") and (
                    p.type_name != "T" or intersection(p, right) is None):
                with pytest.raises(RemoteError, match="may not subscribe"):
                    await c.subscribe(p)  # outside the right entirely: refused
                continue
            await c.subscribe(p)
            active[(c.name, p.id)] = p
        await settle(servers, clients)
        published: list[tuple[tuple[str, int], Event]] = []
        for c in clients:
            if not c.name.startswith("ops"):
                continue
            evs = data.draw(st.lists(events(), max_size=6))
            seq0 = c._seq
            await c.publish_batch(evs, ack=True)
            published += [((f"{c.broker}/{c.name}", seq0 + i), e) for i, e in enumerate(evs)]
        await settle(servers, clients)
        got = delivered(clients)
        # a tenant receives what its profile selects inside its right (narrowed)
        want = oracle({k: p for k, p in active.items() if not k[0].startswith("tenant")},
                      published)
        for (client, pid), p in active.items():
            if client.startswith("tenant"):
                want += oracle({(client, pid): p}, [(i, e) for i, e in published
                                                    if right.matches(e)])
        assert got == want
        for srv in servers.values():
            assert srv.listener.ssl is not None
            assert all(lk in srv.node.neighbours_up() for lk in srv.node.neighbours)
    finally:
        await close_all(servers, clients)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_three_brokers_with_mutual_tls_deliver_exactly_the_oracle(
        pki: Pki, data: st.DataObject) -> None:
    asyncio.run(run_secure_network(data, pki))


# ---- docs/security.md, end to end ------------------------------------------------------

DOC = ROOT / "docs" / "security.md"


def doc_block(marker: str) -> str:
    """The fenced block that follows ``<!-- marker -->`` in docs/security.md."""
    text = DOC.read_text()
    m = re.search(rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"docs/security.md has no block marked {marker}"
    return m.group(1)


def _shell_commands(block: str) -> list[list[str]]:
    """The ``siftbus ...`` lines of a shell block, split as the shell would (the
    ``$(cat FILE)`` substitutions are kept for the caller)."""
    import shlex

    out = []
    for line in block.splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("siftbus "):
            words = shlex.split(line)[1:]
            out.append(words[:words.index(">")] if ">" in words else words)
    return out


def test_the_secure_network_of_the_docs_runs_end_to_end(tmp_path: Path) -> None:
    work = tmp_path / "secure"
    work.mkdir()
    ports = free_ports(3)
    config = doc_block("secure/net.toml")
    config = config.replace('"../building/schema.toml"',
                            json.dumps(str(ROOT / "examples" / "building" / "schema.toml")))
    for i, port in enumerate(ports):
        config = config.replace(f"port = {7500 + i}", f"port = {port}")
    (work / "net.toml").write_text(config)
    setup = _shell_commands(doc_block("secure/setup.sh"))
    assert [c[:2] for c in setup][:2] == [["certs", "init"], ["certs", "issue"]]
    tokens: dict[str, str] = {}
    for cmd in setup:
        cmd = [a.replace("examples/secure/", f"{work}/") for a in cmd]
        r = run_cli(*cmd)
        assert r.returncode == 0, (cmd, r.stderr)
        if cmd[:2] == ["certs", "token"]:
            tokens[cmd[2]] = r.stdout.strip()
            (work / f"{cmd[2]}.token").write_text(r.stdout)  # the doc's `> NAME.token`
    assert set(tokens) == {"ops", "floor4"}

    def expand(cmd: list[str]) -> list[str]:
        out = []
        for a in cmd:
            a = a.replace("examples/secure/", f"{work}/")
            out.append(a)
        return out

    run = [expand(c) for marker in ("secure/up.sh", "secure/subscribe.sh", "secure/publish.sh")
           for c in _shell_commands(doc_block(marker))]
    up_cmd, sub_cmd, pub_cmd, stats_cmd = run
    assert up_cmd[:2] == ["network", "up"] and sub_cmd[0] == "subscribe"
    up = subprocess.Popen([sys.executable, "-m", "siftbus", *up_cmd],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stdout is not None
        lines = []
        for _ in range(10):
            lines.append(up.stdout.readline())
            if "network up" in lines[-1] or not lines[-1]:
                break
        assert "network up: 3 broker(s)" in lines[-1], (lines, up.stderr)
        # the tenant may subscribe on its floor, and nowhere else
        outside = [a if "Temperature(" not in a else "Temperature(room = 200)"
                   for a in sub_cmd]
        r = run_cli(*outside)
        assert r.returncode == 2 and "may not subscribe" in r.stderr, r.stderr
        sub = subprocess.Popen([sys.executable, "-m", "siftbus", *sub_cmd, "--count", "2",
                                "--timeout", "60"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        assert sub.stderr is not None
        assert "subscribed" in sub.stderr.readline()
        events_file = work / "events.jsonl"
        events_file.write_text(doc_block("secure/events.jsonl"))
        assert str(events_file) in pub_cmd
        r = run_cli(*pub_cmd)
        assert r.returncode == 0, r.stderr
        out, _ = sub.communicate(timeout=60)
        schema = load_schema(ROOT / "examples" / "building" / "schema.toml")
        profile_text = next(a for a in sub_cmd if a.startswith("Temperature("))
        want = parse_profile(f"p: {profile_text}", schema)
        expected = [e for e in read_events(events_file, schema) if want.matches(e)]
        assert len(expected) == 2
        got = [json.loads(x)["event"] for x in out.splitlines()]
        assert [(g["room"], g["value"]) for g in got] == \
            [(e["room"], float(e["value"])) for e in expected]
        stats = run_cli(*stats_cmd, "--json")
        assert stats.returncode == 0, stats.stderr
        per_broker = json.loads(stats.stdout)
        assert sum(s["denials"].get("access/subscribe", 0) for s in per_broker.values()) == 1
        # without a token nobody learns anything
        anonymous = run_cli("network", "stats", str(work / "net.toml"), "--json")
        assert anonymous.returncode == 1 and "credentials required" in anonymous.stdout
    finally:
        interrupt(up)
