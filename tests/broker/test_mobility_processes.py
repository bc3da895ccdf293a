"""Exactly once with real processes: a broker with a store (``siftbus broker``) and a
``siftbus subscribe --session ID --out FILE`` subscriber, each killed with SIGKILL and
started again while a publisher sends; FILE ends up with every matching event once."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from siftbus.client import Client
from siftbus.client.session import SessionState

SCHEMA = '[T]\na = "int[0,99]"\nb = "int[0,1000000]"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Procs:
    """Child processes of one test, each killed at the end."""

    def __init__(self) -> None:
        self.all: list[subprocess.Popen[str]] = []

    def start(self, *args: str, log: Path) -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, "-m", "siftbus", *args], text=True,
                             stdout=log.open("a"), stderr=subprocess.STDOUT)
        self.all.append(p)
        return p

    def stop(self) -> None:
        for p in self.all:
            if p.poll() is None:
                p.kill()
            p.wait(10)


@pytest.fixture
def procs() -> object:
    ps = Procs()
    yield ps
    ps.stop()


def lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


async def publish(port: int, first: int, n: int) -> None:
    """Publish events ``b = first .. first+n-1`` (acknowledged by the broker)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            c = await Client.connect(port=port, timeout=2)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    try:
        for i in range(first, first + n, 50):
            batch = [{"type": "T", "a": j % 100, "b": j} for j in range(i, min(i + 50,
                                                                              first + n))]
            await c.publish_batch(batch, ack=True)
            await asyncio.sleep(0.005)
    finally:
        await c.close()


def _transient(log: Path) -> int:
    """Refusals in ``log`` that starting again cures: a broker not listening yet, or a
    session claim while the brokers' link is not up yet."""
    text = log.read_text() if log.exists() else ""
    return text.count("connect again later") + text.count("'Connection refused'")


async def wait_lines(out: Path, k: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while len(lines(out)) < k:
        if time.monotonic() > end:
            raise AssertionError(f"{len(lines(out))} of {k} lines in {out}")
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_exactly_once_across_kill_9_of_the_subscriber_and_the_broker(
        tmp_path: Path, procs: Procs) -> None:
    port = free_port()
    (tmp_path / "schema.toml").write_text(SCHEMA)
    cfg = tmp_path / "net.toml"
    cfg.write_text(f'[network]\nschema = "schema.toml"\n\n[network.sessions]\n'
                   f'max_count = 100000\n\n[brokers.B0]\nport = {port}\n'
                   f'store = "b0.sqlite"\n')
    out, log = tmp_path / "got.jsonl", tmp_path / "log.txt"

    def broker() -> subprocess.Popen[str]:
        p = procs.start("broker", "--config", str(cfg), "--name", "B0", "-v", log=log)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return p
            time.sleep(0.1)
        raise AssertionError(log.read_text())

    def subscriber(*profiles: str) -> subprocess.Popen[str]:
        return procs.start("subscribe", *profiles, "--broker", f"127.0.0.1:{port}",
                           "--session", "s1", "--out", str(out), "--no-reconnect", log=log)

    b = broker()
    sub = subscriber("f: T(a < 50)")
    end = time.monotonic() + 60  # start-up is slow on a loaded machine
    while "subscribed f" not in log.read_text():
        assert time.monotonic() < end and sub.poll() is None, log.read_text()
        await asyncio.sleep(0.1)
    await publish(port, 0, 1000)
    await wait_lines(out, 200)
    sub.send_signal(signal.SIGKILL)  # the subscriber dies mid-stream
    sub.wait(10)
    await publish(port, 1000, 1000)  # buffered while it is away
    sub = subscriber()  # resumes after its file's last line
    await wait_lines(out, 700)
    b.send_signal(signal.SIGKILL)  # the broker dies: its store keeps the session
    b.wait(10)
    sub.wait(20)  # its connection went: it exits
    b = broker()
    await publish(port, 2000, 1000)
    sub = subscriber()
    await wait_lines(out, 1500)
    await asyncio.sleep(0.5)
    got = Counter(int(x["event"]["b"]) for x in lines(out))  # type: ignore[index, call-overload]
    want = {i for i in range(3000) if i % 100 < 50}
    assert set(got) == want, (sorted(want - set(got))[:20], log.read_text()[-2000:])
    assert max(got.values()) == 1
    nums = [int(x["n"]) for x in lines(out)]  # type: ignore[call-overload]
    assert nums == list(range(1, 1501))
    sub.send_signal(signal.SIGTERM)
    assert sub.wait(10) == 0
    b.send_signal(signal.SIGTERM)
    b.wait(10)
    assert os.path.getsize(out) > 0


async def test_the_readme_form_restarted_here_and_elsewhere_and_a_takeover_told(
        tmp_path: Path, procs: Procs) -> None:
    """The README's ``siftbus subscribe --session ID --out FILE 'PROFILE'``, killed and
    started again as written -- at its broker and at the other one -- resumes (it used
    to exit 2 after the kept rows: "profile ... is already subscribed"); a third
    process that takes the session over at the first broker ends the running one with
    one error line (it used to keep running and receive nothing)."""
    ports = [free_port(), free_port()]
    (tmp_path / "schema.toml").write_text(SCHEMA)
    cfg = tmp_path / "net.toml"
    cfg.write_text(f'[network]\nschema = "schema.toml"\n\n[brokers.B0]\nport = {ports[0]}\n'
                   f'\n[brokers.B1]\nport = {ports[1]}\nneighbours = ["B0"]\n')
    out, log = tmp_path / "seen.jsonl", tmp_path / "log.txt"
    for b in ("B0", "B1"):
        procs.start("broker", "--config", str(cfg), "--name", b, log=log)

    async def subscriber(b: int) -> subprocess.Popen[str]:
        end = time.monotonic() + 60  # start-up is slow on a loaded machine
        while True:
            mark = log.read_text().count("subscribed ") if log.exists() else 0
            refusals = _transient(log)
            p = procs.start("subscribe", "-c", str(cfg), "-n", f"B{b}", "--session",
                            "phone", "--out", str(out), "T(a < 50)", log=log)
            while log.read_text().count("subscribed ") <= mark:
                if p.poll() is not None and time.monotonic() < end and \
                        _transient(log) > refusals:
                    break  # a broker or the brokers' link not up yet: again
                assert time.monotonic() < end and p.poll() is None, log.read_text()
                await asyncio.sleep(0.1)
            else:
                return p
            await asyncio.sleep(0.3)

    sub = await subscriber(0)
    await publish(ports[0], 0, 100)
    await wait_lines(out, 50)
    sub.send_signal(signal.SIGKILL)
    sub.wait(10)
    await publish(ports[0], 100, 100)  # kept for it
    sub = await subscriber(0)  # as written: its profile again, at the same broker
    await wait_lines(out, 100)
    await asyncio.sleep(0.3)
    assert sub.poll() is None, log.read_text()[-2000:]
    sub.send_signal(signal.SIGKILL)
    sub.wait(10)
    await publish(ports[0], 200, 100)
    sub = await subscriber(1)  # and at the other broker
    await wait_lines(out, 150)
    await publish(ports[0], 300, 100)
    await wait_lines(out, 200)
    assert sub.poll() is None, log.read_text()[-2000:]
    third = await subscriber(0)  # takes it over: the running one is told and ends
    assert sub.wait(20) == 2, log.read_text()[-2000:]
    assert "another process took it over" in log.read_text()
    assert third.poll() is None
    got = Counter(int(x["event"]["b"]) for x in lines(out))  # type: ignore[index, call-overload]
    assert set(got) == {i for i in range(400) if i % 100 < 50} and max(got.values()) == 1
    assert [int(x["n"]) for x in lines(out)] == list(range(1, 201))  # type: ignore[call-overload]


@pytest.mark.parametrize(("handoff", "protocol"), [("rendezvous", "rendezvous"),
                                                   ("pingpong", "forwarding")])
async def test_two_processes_from_one_state_leave_the_session_to_one(
        tmp_path: Path, procs: Procs, handoff: str, protocol: str) -> None:
    """Three ``siftbus broker`` processes (B1 and B2 behind B0); two clients reconnect
    with one ``SessionState`` at B1 and B2 at the same moment, while publishers at all
    three send: one of the two is told ``SessionMoved``, and every row published after
    the state was taken reaches exactly one of them (issue 30 item 2: both brokers
    claimed the same epoch; under rendezvous the loser's teardown withdrew the winner's
    routes, under ping/pong the claim pinged a broker whose client was connected)."""
    ports = {b: free_port() for b in ("B0", "B1", "B2")}
    (tmp_path / "schema.toml").write_text(SCHEMA)
    cfg = tmp_path / "net.toml"
    cfg.write_text(
        f'[network]\nschema = "schema.toml"\nprotocol = "{protocol}"\nhandoff = "{handoff}"'
        '\n\n[network.rendezvous]\nT = "B0"\n\n'
        + "".join(f'[brokers.{b}]\nport = {p}\n'
                  + ('neighbours = ["B0"]\n' if b != "B0" else "") + "\n"
                  for b, p in ports.items()))
    log = tmp_path / "log.txt"
    for b in ports:
        procs.start("broker", "--config", str(cfg), "--name", b, log=log)
    hub = None
    end = time.monotonic() + 60  # start-up is slow on a loaded machine
    while hub is None or (await hub.stats())["neighbours_up"] < 2:
        assert time.monotonic() < end, log.read_text()[-2000:]
        await asyncio.sleep(0.2)
        if hub is None:
            try:
                hub = await Client.connect(port=ports["B0"], timeout=2)
            except Exception:
                hub = None
    await hub.close()
    state = SessionState("m")
    first = await Client.connect(port=ports["B0"], session=state)
    await first.subscribe("f: T()")
    await publish(ports["B0"], 0, 10)
    end = time.monotonic() + 10
    while state.last < 10:
        assert time.monotonic() < end
        await asyncio.sleep(0.05)
    await first.close()

    got: dict[str, list[int]] = {"B1": [], "B2": []}
    states = {"B1": state, "B2": copy.deepcopy(state)}  # two processes, one state

    async def claim(b: str) -> Client:
        c = await Client.connect(port=ports[b], session=states[b], reconnect=False)
        c.unclaimed_callback = lambda n: got[b].append(int(n.event.keys[1]))
        return c

    claims: list[Client] = []
    try:
        claims = list(await asyncio.gather(claim("B1"), claim("B2")))
        await asyncio.gather(*(publish(ports[b], 100 * (i + 1), 50)
                               for i, b in enumerate(ports)))
        want = {b for i in range(3) for b in range(100 * (i + 1), 100 * (i + 1) + 50)}
        end = time.monotonic() + 20
        while not (any(c.ended.is_set() for c in claims)
                   and want <= set(got["B1"]) | set(got["B2"])):
            assert time.monotonic() < end, (
                [c.ended.is_set() for c in claims], sorted(want - set(got["B1"] + got["B2"])),
                log.read_text()[-2000:])
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        assert [c.ended.is_set() for c in claims].count(True) == 1
        told = next(c.lost for c in claims if c.ended.is_set())
        assert "another process took it over" in str(told)
        rows = got["B1"] + got["B2"]
        assert sorted(rows) == sorted(want), Counter(rows).most_common(3)
        await next(c for c in claims if not c.ended.is_set()).ping()
    finally:
        for c in claims:
            await c.close()


async def test_a_state_whose_broker_lost_the_session_gets_the_rows_after_its_own(
        tmp_path: Path, procs: Procs) -> None:
    """A ``siftbus broker`` without a store, killed with SIGKILL and started again, has
    forgotten the session; its client comes back with its ``SessionState`` (rows 0-9
    processed): the session starts anew and the rows published then arrive. They were
    numbered from 1 while the new session took the client's 10 as acknowledged, so the
    first ten rows after the restart were never sent (issue 30 item 2)."""
    port = free_port()
    (tmp_path / "schema.toml").write_text(SCHEMA)
    cfg = tmp_path / "net.toml"
    cfg.write_text(f'[network]\nschema = "schema.toml"\n\n[brokers.B0]\nport = {port}\n')
    log = tmp_path / "log.txt"

    async def start() -> None:
        procs.start("broker", "--config", str(cfg), "--name", "B0", log=log)
        end = time.monotonic() + 60  # start-up is slow on a loaded machine
        while True:
            try:
                await (await Client.connect(port=port, timeout=2)).close()
                return
            except Exception:
                assert time.monotonic() < end, log.read_text()[-2000:]
                await asyncio.sleep(0.2)

    await start()
    state = SessionState("m")
    c = await Client.connect(port=port, session=state)
    await c.subscribe("f: T()")
    await publish(port, 0, 10)
    end = time.monotonic() + 10
    while state.last < 10:
        assert time.monotonic() < end
        await asyncio.sleep(0.05)
    await c.close()
    procs.all[-1].kill()
    procs.all[-1].wait(10)
    await start()
    got: list[int] = []
    c = await Client.connect(port=port, session=state)
    try:
        # the session's profile went with the broker's memory
        await c.subscribe("f: T()", lambda n: got.append(int(n.event.keys[1])))
        await publish(port, 100, 5)
        end = time.monotonic() + 10
        while len(got) < 5:
            assert time.monotonic() < end, (got, state.statuses, c.errors, log.read_text()[-2000:])
            await asyncio.sleep(0.05)
        assert got == [100, 101, 102, 103, 104] and state.last == 15
    finally:
        await c.close()


async def test_session_processes_scenario_exactly_once(tmp_path: Path) -> None:
    """One short run of ``bench/session_processes.py`` (issue 30 item 2 on real
    processes): five ``siftbus broker`` processes under forwarding with advertisements,
    three ``siftbus subscribe --session`` processes each killed or stopped and started
    again at another broker while the session publisher moves and publishes a batch
    with ack: every FILE holds every row once, numbered without gap."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import session_processes

    run = session_processes.Run(seed=3, pair="adv", rounds=3, kill=0.5, work=tmp_path,
                               mode="app")
    try:
        res = await asyncio.wait_for(run.go(), 120)
    finally:
        run.stop_all()
    assert res["sent"] >= 6
    assert (res["status"], res["missing"], res["dups"], res["numbering"]) == (
        "ok", {}, {}, {}), "\n".join(run.events)
