"""Issue 17 item 1: a session id belongs to its principal across the whole network.

Real brokers on 127.0.0.1 with TLS and tokens for two principals, for every handoff the
network config accepts with security (acyclic, ping/pong, rendezvous). Bob connecting
with alice's session id at a broker that does not hold it is refused before any handoff
moves her state or routes (``siftbus.broker.claims``): he gets one clear error and
nothing else, alice keeps her buffer and receives every matching event exactly once,
and alice herself can still move -- also after the broker holding her session restarts
on its store. An owner check nobody answers refuses the client rather than granting it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest

from broker.servers import restart
from broker_strategies import SCHEMA
from secure import Pki, close_all, make_pki, policy, start_secure
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer, read_frame
from siftbus.broker.sessions import SessionPolicy
from siftbus.broker.store import ProfileStore
from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.errors import RemoteError
from siftbus.security.guard import Guard
from siftbus.wire.frames import Message, MsgType, decode_error, encode

RIGHTS = {"alice": {"subscribe": ["*"], "publish": ["*"]},
          "bob": {"subscribe": ["*"], "publish": ["*"]}}
NAMES = ["B0", "B1", "B2"]
LINE = [("B0", "B1"), ("B1", "B2")]

#: (routing protocol, strategy) -> the handoff it selects: acyclic, pingpong, rendezvous
SETUPS = [("forwarding", "covering"), ("forwarding", "merging"), ("rendezvous", "covering")]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), brokers=tuple(NAMES))


async def _start(pki: Pki, protocol: str, strategy: str, **kw: Any
                 ) -> dict[str, BrokerServer]:
    return await start_secure(NAMES, LINE, policy(pki, RIGHTS), pki, protocol=protocol,
                              strategy=strategy, rendezvous={"T": "B1", "U": "B1"}
                              if protocol == "rendezvous" else None, **kw)


async def _session(srv: BrokerServer, pki: Pki, who: str, state: SessionState) -> Client:
    return await Client.connect(port=srv.port, session=state, token=pki.token(who),
                                tls=pki.client_tls(None), server_hostname="localhost")


def _ev(i: int) -> dict[str, object]:
    return {"type": "T", "a": 3, "b": "HI", "s": f"e{i}"}


async def _wait(pred: object, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if pred():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


def _session_profiles(srv: BrokerServer, sid: str) -> set[str]:
    """Gids of ``sid``'s profiles registered at a broker from its client link."""
    return {e.id for e in srv.node.routing.table.entries_from("@" + sid)}


def _denials(servers: dict[str, BrokerServer]) -> int:
    return sum(s.node.stats().denials.get("access/connect", 0) for s in servers.values())


async def _steal(servers: dict[str, BrokerServer], pki: Pki, how: str) -> Client:
    """Bob claims alice's session ``s1`` at B2: as a fresh process that knows only the
    id (the owner check floods the tree), asking for a clean start under her id, or
    naming alice's broker B0 and a profile of alice's id ``f`` (the check goes to B0)
    -- the way a handoff from B0 would."""
    if how != "from-B0":
        return await _session(servers["B2"], pki, "bob",
                              SessionState("s1", clean=how == "clean"))
    bob = await _session(servers["B0"], pki, "bob", SessionState("bobs"))
    await bob.subscribe("f: T(a = 3)")
    assert bob.session is not None
    bob.session.id = "s1"
    await bob.move("127.0.0.1", servers["B2"].port, server_hostname="localhost")
    return bob


@pytest.mark.parametrize("how", ["fresh", "clean", "from-B0"])
@pytest.mark.parametrize(("protocol", "strategy"), SETUPS)
async def test_another_principal_cannot_take_a_session_over(
        pki: Pki, protocol: str, strategy: str, how: str) -> None:
    servers = await _start(pki, protocol, strategy)
    got: Counter[str] = Counter()
    clients: list[Client] = []
    try:
        mine = SessionState("s1")
        alice = await _session(servers["B0"], pki, "alice", mine)
        first: list[str] = []
        await alice.subscribe("f: T(a = 3)", lambda n: first.append(n.event.keys[2]))
        await asyncio.sleep(0.5)  # the route reaches B1 (bounded: _wait below fails)
        pub = await _session(servers["B1"], pki, "bob", SessionState("pub"))
        clients.append(pub)
        await pub.publish_batch([_ev(i) for i in range(3)], ack=True)
        await _wait(lambda: len(first) == 3)
        first.clear()
        await alice.close()
        held = _session_profiles(servers["B0"], "s1")
        assert held
        await pub.publish_batch([_ev(i) for i in range(3, 6)], ack=True)
        with pytest.raises(RemoteError, match="another principal") as info:
            clients.append(await _steal(servers, pki, how))
        assert info.value.kind == "AccessDenied"
        assert _denials(servers) == 1
        # nothing of hers moved: no session, no profile, no name binding at B2
        b2 = servers["B2"].node
        assert "s1" not in b2.sessions.sessions and not _session_profiles(servers["B2"], "s1")
        assert "s1" not in b2.access.owners
        assert servers["B0"].node.sessions.sessions["s1"].state == "away"
        assert _session_profiles(servers["B0"], "s1") == held
        await pub.publish_batch([_ev(i) for i in range(6, 9)], ack=True)
        # alice herself, a fresh process with her state, moves to B2 and finds all once
        alice = await _session(servers["B2"], pki, "alice", mine)
        clients.append(alice)
        await _wait(lambda: alice.unclaimed.qsize() >= 6)
        await pub.publish_batch([_ev(i) for i in range(9, 12)], ack=True)
        await _wait(lambda: alice.unclaimed.qsize() >= 9)
        await asyncio.sleep(0.3)
        while not alice.unclaimed.empty():
            got[alice.unclaimed.get_nowait().event.keys[2]] += 1
        assert got == Counter({f"e{i}": 1 for i in range(3, 12)}), got
        assert not first  # nothing reached the closed client
        assert _denials(servers) == 1
    finally:
        await close_all(servers, clients)


@pytest.mark.parametrize(("protocol", "strategy"), SETUPS)
async def test_the_owner_moves_across_secured_brokers_exactly_once(
        pki: Pki, protocol: str, strategy: str) -> None:
    """``client.move`` (the check asks the broker it comes from) back and forth every
    100 ms while a publisher keeps sending: every event once, no denial."""
    servers = await _start(pki, protocol, strategy)
    seen: Counter[str] = Counter()
    clients: list[Client] = []
    try:
        alice = await _session(servers["B0"], pki, "alice", SessionState("s1"))
        clients.append(alice)
        await alice.subscribe("f: T(a = 3)", lambda n: seen.update([n.event.keys[2]]))
        pub = await _session(servers["B2"], pki, "bob", SessionState("pub"))
        clients.append(pub)
        for _ in range(50):
            await pub.publish_batch([_ev(-1)], ack=True)
            await asyncio.sleep(0.1)
            if seen:
                break
        await _wait(lambda: bool(seen))
        await asyncio.sleep(0.2)
        seen.clear()
        sent = 0
        stop = asyncio.Event()

        async def publish() -> None:
            nonlocal sent
            while not stop.is_set() and sent < 2000:
                await pub.publish_batch([_ev(i) for i in range(sent, sent + 10)], ack=True)
                sent += 10
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(publish())
        hops = ["B1", "B2", "B0", "B2", "B1", "B0"]
        for hop in hops:
            await asyncio.sleep(0.1)
            await alice.move("127.0.0.1", servers[hop].port, server_hostname="localhost")
            assert alice.broker == hop
        stop.set()
        await task
        await _wait(lambda: len(seen) >= sent, 20)
        await asyncio.sleep(0.3)
        assert sent >= 100
        assert seen == Counter({f"e{i}": 1 for i in range(sent)}), (sent, len(seen))
        assert _denials(servers) == 0
        assert sum(s.node.sessions.counts["handoffs_in"] for s in servers.values()) \
            == len(hops)
    finally:
        await close_all(servers, clients)


async def test_a_restarted_holder_keeps_the_owner(pki: Pki, tmp_path: Path) -> None:
    """The owner is in the holder's store: after a restart bob is still refused, alice
    still gets her session -- also from a store written before owners were recorded in
    the session (its name binding says whose it is)."""
    store = tmp_path / "b2.db"
    pol = policy(pki, RIGHTS)
    servers = await start_secure(NAMES, LINE, pol, pki, stores={"B2": store})
    clients: list[Client] = []
    try:
        mine = SessionState("s1")
        alice = await _session(servers["B2"], pki, "alice", mine)
        await alice.subscribe("f: T(a = 3)")
        await alice.close()
        await _wait(lambda: servers["B2"].node.sessions.sessions["s1"].state == "away")
        # an older store: the session's meta without its principal
        db = servers["B2"].node.store
        assert db is not None
        meta = msgpack.unpackb(db.connection.execute(
            "SELECT meta FROM sessions WHERE id = 's1'").fetchone()[0], raw=False)
        assert meta["principal"] == "alice"
        del meta["principal"]
        db.connection.execute("UPDATE sessions SET meta = ? WHERE id = 's1'",
                              (msgpack.packb(meta, use_bin_type=True),))
        db.connection.commit()
        node = BrokerNode("B2", SCHEMA, neighbours=("B1",), edges=LINE, guard=Guard(pol),
                          store=ProfileStore(store))
        await restart(servers, "B2", node, tls=pki.broker_tls("B2"), wait=20)
        assert node.sessions.sessions["s1"].principal == "alice"
        # her restored profile routes events to B2 again, where they wait for her
        await _wait(lambda: bool(servers["B1"].node.routing.table.entries_from("B2")))
        pub = await _session(servers["B1"], pki, "bob", SessionState("pub"))
        clients.append(pub)
        await pub.publish_batch([_ev(i) for i in range(3)], ack=True)
        await _wait(lambda: node.sessions.sessions["s1"].count == 3)
        with pytest.raises(RemoteError, match="another principal"):
            clients.append(await _session(servers["B0"], pki, "bob", SessionState("s1")))
        alice = await _session(servers["B0"], pki, "alice", mine)
        clients.append(alice)
        await _wait(lambda: alice.unclaimed.qsize() >= 3)
        await asyncio.sleep(0.3)
        got = Counter(alice.unclaimed.get_nowait().event.keys[2]
                      for _ in range(alice.unclaimed.qsize()))
        assert got == Counter({f"e{i}": 1 for i in range(3)}), got
        assert "s1" not in servers["B2"].node.sessions.sessions
        assert _denials(servers) == 1
    finally:
        await close_all(servers, clients)


async def test_the_state_s_owner_decides_at_the_holder_too(pki: Pki) -> None:
    """Where the session is held, its recorded owner decides even when the broker's name
    binding does not object (a binding lost, e.g. with a replaced store)."""
    servers = await start_secure(["B0"], [], policy(pki, RIGHTS), pki)
    try:
        alice = await _session(servers["B0"], pki, "alice", SessionState("s1"))
        await alice.close()
        node = servers["B0"].node
        await _wait(lambda: node.sessions.sessions["s1"].state == "away")
        del node.access.owners["s1"]
        with pytest.raises(RemoteError, match="another principal"):
            await _session(servers["B0"], pki, "bob", SessionState("s1"))
        assert "s1" not in node.access.owners  # a refused claim binds nothing
        alice = await _session(servers["B0"], pki, "alice", SessionState("s1"))
        assert alice.session is not None and alice.session.status["state"] == "attached"
        assert node.access.owners["s1"] == "alice"
        await alice.close()
    finally:
        await close_all(servers)


async def _raw_hello(srv: BrokerServer, pki: Pki, who: str, session: dict[str, Any]
                     ) -> Message:
    ctx: ssl.SSLContext = pki.client_tls(None)
    r, w = await asyncio.open_connection("127.0.0.1", srv.port, ssl=ctx,
                                         server_hostname="localhost")
    try:
        w.write(encode(Message(MsgType.HELLO, {"role": "client", "token": pki.token(who),
                                               "session": session})))
        msg, _ = await asyncio.wait_for(read_frame(r), 10)
        return msg
    finally:
        w.close()


async def test_an_owner_check_nobody_answers_refuses(pki: Pki) -> None:
    """B0's neighbour B1 is down: a check sent toward it (a client that knows its epoch)
    times out, and a check of the whole tree (a fresh process) cannot look behind it;
    both refuse with one clear error, counted, and bind nothing."""
    servers = await start_secure(["B0"], LINE, policy(pki, RIGHTS), pki, wait=False,
                                 sessions=SessionPolicy(claim_timeout=0.3))
    try:
        msg = await _raw_hello(servers["B0"], pki, "alice",
                               {"id": "s1", "from": "B1", "epoch": 1})
        assert msg.type is MsgType.ERROR
        err = decode_error(msg.body)
        assert "did not answer within 0.3 s" in err.message, err.message
        msg = await _raw_hello(servers["B0"], pki, "alice", {"id": "s1"})
        assert "could not all be asked" in decode_error(msg.body).message
        node = servers["B0"].node
        assert node.stats().denials.get("access/connect") == 2
        assert "s1" not in node.sessions.sessions and "s1" not in node.access.owners
        assert not node.clients
    finally:
        await close_all(servers)
