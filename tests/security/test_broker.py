"""A secured broker against an attacker: who gets in, who may speak as whom.

Every test runs real servers on 127.0.0.1 with TLS (a CA made per module) and tokens:
unauthenticated clients learn nothing and harm nobody, neighbours cannot be
impersonated from either end, ``src`` cannot be forged, names and durable sessions
belong to their principals, auto-assigned names cannot be squatted, expired and
tampered tokens are refused, and a server refuses to listen openly by default.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl
from pathlib import Path
from typing import Any

import jwt
import pytest

from broker_strategies import SCHEMA
from secure import Pki, close_all, connect, eventually, make_pki, policy, start_secure
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer, read_frame
from siftbus.client import Client
from siftbus.errors import AuthenticationError, ConfigError, RemoteError
from siftbus.security.guard import Guard, check_bind
from siftbus.security.tokens import TokenSigner, new_secret
from siftbus.wire.frames import Message, MsgType, decode_error, encode

RIGHTS = {"alice": {"subscribe": ["*"], "publish": ["*"], "services": ["broker.*"]},
          "bob": {"subscribe": ["*"], "publish": ["*"]}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), brokers=("B0", "B1", "B2", "B9"))


async def _raw(port: int, ctx: ssl.SSLContext | None
               ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname="localhost" if ctx else None), 10)


async def _refused(r: asyncio.StreamReader) -> Any:
    """The one ERROR frame a refused peer gets; then the stream ends (no SCHEMA, no
    HELLO, nothing else)."""
    msg, _ = await asyncio.wait_for(read_frame(r), 10)
    assert msg.type is MsgType.ERROR, msg
    rest = await asyncio.wait_for(r.read(), 10)
    assert rest == b"", rest[:100]
    return decode_error(msg.body)


def _hello(**body: Any) -> bytes:
    return encode(Message(MsgType.HELLO, {"role": "client", **body}))


async def test_an_unauthenticated_client_learns_nothing_and_harms_nobody(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS), pki)
    srv = servers["B1"]
    good = await connect(srv, pki, "alice", name="watcher")
    try:
        sub = await good.subscribe("T(a >= 0)")
        other_key = TokenSigner(new_secret())
        expired = pki.token("alice", ttl=-120)
        valid = pki.token("alice")
        head, _, sig = valid.split(".")
        forged_payload = jwt.utils.base64url_encode(  # type: ignore[attr-defined]
            b'{"sub":"alice","aud":"siftbus","exp":9999999999}').decode()
        attempts: list[tuple[dict[str, Any], str]] = [
            ({}, "credentials required"),
            ({"token": "not.a.token"}, "not valid"),
            ({"token": expired}, "expired"),
            ({"token": other_key.issue("alice")}, "not valid"),
            ({"token": f"{head}.{forged_payload}.{sig}"}, "not valid"),  # tampered
            ({"token": valid[:-3] + ("AAA" if valid[-3:] != "AAA" else "BBB")}, "not valid"),
            ({"token": 12345}, "non-empty string"),
            ({"token": "x" * 20_000}, "exceeds"),
            ({"name": "watcher"}, "credentials required"),  # no token, someone's name
        ]
        for body, why in attempts:
            r, w = await _raw(srv.port, pki.client_tls())
            w.write(_hello(**body))
            err = await _refused(r)
            assert err.kind == "AuthenticationError" and why in err.message, err
            w.close()
        # the same on the broker role: no HELLO answer, no schema, no link
        r, w = await _raw(srv.port, pki.client_tls())
        w.write(encode(Message(MsgType.HELLO, {"role": "broker", "name": "B0",
                                               "schema": SCHEMA.to_dict()})))
        assert (await _refused(r)).kind == "AuthenticationError"
        w.close()
        # plain TCP on the TLS port: the handshake fails, nothing readable comes back
        r, w = await _raw(srv.port, None)
        w.write(_hello(token=valid))
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(read_frame(r), 10)
        w.close()
        # harmed nobody: the legitimate subscriber still gets what is published
        async with await connect(srv, pki, "bob") as pub:
            await pub.publish_batch([{"type": "T", "a": 1, "b": "LO", "s": "x"}], ack=True)
        assert (await sub.get(5)).event["a"] == 1
        stats = await good.stats()
        assert stats["denials"]["authentication/connect"] == len(attempts)
        assert stats["denials"]["authentication/link"] == 1
        assert stats["clients"] == 1 and stats["neighbours_up"] == 0
        def failed_handshakes() -> int:
            gc.collect()  # a failed handshake's protocol may wait in a reference cycle
            return srv.transport_stats().refused.get("tls_handshake", 0)

        await eventually(lambda: failed_handshakes() >= 1)
    finally:
        await close_all(servers, [good])


async def test_tls_failures_are_clear_errors(pki: Pki, tmp_path: Path) -> None:
    """A client that does not trust the broker's certificate refuses it; an unknown
    principal with a valid token gets in with the default rights (none here)."""
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS), pki)
    try:
        stranger = make_pki(tmp_path / "other", brokers=(), clients=())
        with pytest.raises(AuthenticationError, match="does not verify"):
            await Client.connect(port=servers["B1"].port, token=pki.token("alice"),
                                 tls=stranger.client_tls(), server_hostname="localhost")
        async with await connect(servers["B1"], pki, "nobody") as c:
            with pytest.raises(RemoteError) as info:
                await c.subscribe("T(a = 1)")
            assert info.value.kind == "AccessDenied"
    finally:
        await close_all(servers)


async def test_client_certificates_authenticate_and_must_agree_with_the_token(
        pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS), pki)
    srv = servers["B1"]
    try:
        async with await connect(srv, pki, None, cert="alice") as c:  # certificate only
            assert await c.call("broker", "stats")  # alice's right
        with pytest.raises(RemoteError, match="not the certificate's"):
            await connect(srv, pki, "bob", cert="alice")
        with pytest.raises(RemoteError, match="broker certificate"):
            await connect(srv, pki, None, cert="B0")  # a broker's certificate as a client
    finally:
        await close_all(servers)


async def test_a_token_expiring_mid_connection_closes_it(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS), pki)
    try:
        c = await Client.connect(port=servers["B1"].port, tls=pki.client_tls(),
                                 token=pki.signer.issue("alice", ttl=1.5),
                                 server_hostname="localhost")
        await asyncio.wait_for(c.ended.wait(), 10)
        assert any("expired" in e.message for e in c.errors)
        await c.close()
        assert servers["B1"].node.stats().denials["authentication/connect"] == 1
    finally:
        await close_all(servers)


async def test_neighbours_cannot_be_impersonated(pki: Pki) -> None:
    """B1's neighbour B0 is down. Nobody can take its place: not another broker of the
    CA (B9, B2), not a client certificate, not a peer without one."""
    servers = await start_secure(["B1"], [("B0", "B1")], policy(pki, RIGHTS), pki,
                                 wait=False)
    srv = servers["B1"]
    try:
        hello = encode(Message(MsgType.HELLO, {"role": "broker", "name": "B0",
                                               "protocol": "forwarding",
                                               "schema": SCHEMA.to_dict()}))
        for cert in ("B9", "B2", "alice", None):
            r, w = await _raw(srv.port, pki.client_tls(cert))
            w.write(hello)
            err = await _refused(r)
            assert err.kind == "AuthenticationError", err
            assert "cannot speak as broker" in err.message or "no certificate" in \
                err.message
            w.close()
        assert srv.node.neighbours_up() == frozenset()
        assert srv.node.stats().denials["authentication/link"] == 4
    finally:
        await close_all(servers)


async def test_a_dialer_refuses_a_neighbour_with_the_wrong_certificate(pki: Pki) -> None:
    """B1 dials B0's address, where B2 (a broker of the same CA) listens: B1 sees the
    certificate names B2 and never brings the link up; B2 refuses the link too."""
    pol = policy(pki, RIGHTS)
    impostor = BrokerServer(BrokerNode("B2", SCHEMA, neighbours=("B1",), guard=Guard(pol)),
                            tls=pki.broker_tls("B2"))
    await impostor.start()
    b1 = BrokerServer(BrokerNode("B1", SCHEMA, neighbours=("B0",), guard=Guard(pol)),
                      dial={"B0": ("127.0.0.1", impostor.port)}, tls=pki.broker_tls("B1"),
                      retry_max=0.1)
    await b1.start()
    try:
        await eventually(lambda: b1.node.guard.audit.denials[
            ("authentication", "link")] >= 2)
        assert b1.node.neighbours_up() == frozenset()
        assert impostor.node.neighbours_up() == frozenset()
    finally:
        await b1.close()
        await impostor.close()


async def test_src_is_stamped_by_the_broker_and_cannot_be_forged(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS), pki)
    srv = servers["B1"]
    sub = await connect(srv, pki, "alice", name="victim")
    try:
        s = await sub.subscribe("T(a = 2)")
        r, w = await _raw(srv.port, pki.client_tls())
        w.write(_hello(token=pki.token("bob"), name="mallory"))
        assert (await read_frame(r))[0].type is MsgType.ACK
        assert (await read_frame(r))[0].type is MsgType.SCHEMA
        forged = "B1/victim"
        w.write(encode(Message(MsgType.PUB, {"corr": 1, "events": [
            ["T", [2, 0, "x"], forged, 0, 0.0]]})))
        w.write(encode(Message(MsgType.PUB, {"corr": 2, "blocks": [
            {"t": "T", "n": 1, "k": [[2, 0, "y"]], "src": forged,
             "seq": (7).to_bytes(8, "little"), "ts": bytes(8)}]})))
        for _ in range(2):
            assert (await read_frame(r))[0].type is MsgType.ACK
        got = [await s.get(5), await s.get(5)]
        assert [n.src for n in got] == ["B1/mallory", "B1/mallory"]
        w.close()
    finally:
        await close_all(servers, [sub])


async def test_names_and_durable_sessions_belong_to_their_principal(
        pki: Pki, tmp_path: Path) -> None:
    pol = policy(pki, RIGHTS)
    stores = {"B1": tmp_path / "b1.sqlite"}
    servers = await start_secure(["B1"], [], pol, pki, stores=stores)
    try:
        alice = await connect(servers["B1"], pki, "alice", name="heater")
        await alice.subscribe("p1: T(a = 3)")
        await alice.close()
        with pytest.raises(RemoteError) as info:
            await connect(servers["B1"], pki, "bob", name="heater")
        assert info.value.kind == "AccessDenied" and "another principal" in str(info.value)
        await close_all(servers)
        # after a restart the store still knows whose session it is
        servers = await start_secure(["B1"], [], pol, pki, stores=stores)
        with pytest.raises(RemoteError, match="another principal"):
            await connect(servers["B1"], pki, "bob", name="heater")
        async with await connect(servers["B1"], pki, "alice", name="heater") as back, \
                await connect(servers["B1"], pki, "bob") as pub:
            assert back.restored == ["p1"]
            await pub.publish_batch([{"type": "T", "a": 3, "b": "HI", "s": ""}], ack=True)
            n = await asyncio.wait_for(anext(back.notifications()), 5)
            assert n.profile == "p1"
        assert servers["B1"].node.stats().denials["access/connect"] == 1  # since the restart
    finally:
        await close_all(servers)


async def test_auto_assigned_names_cannot_be_squatted(pki: Pki) -> None:
    # open network: names taken by hand are skipped
    srv = BrokerServer(BrokerNode("B1", SCHEMA))
    await srv.start()
    squat = [await Client.connect(port=srv.port, name=f"c{i}") for i in range(1, 6)]
    fresh = [await Client.connect(port=srv.port) for _ in range(3)]
    assert len({c.name for c in squat + fresh}) == 8
    await close_all({"B1": srv}, squat + fresh)
    # secured: bob's names are bob's; alice's auto names avoid them; an anonymous client
    # (allowed here) may not choose a name at all
    servers = await start_secure(["B1"], [], policy(pki, RIGHTS, anonymous=True), pki)
    try:
        bobs = [await connect(servers["B1"], pki, "bob", name=f"c{i}") for i in (1, 2, 3)]
        for c in bobs:
            await c.close()
        alices = [await connect(servers["B1"], pki, "alice") for _ in range(2)]
        assert {c.name for c in alices}.isdisjoint({"c1", "c2", "c3"})
        for c in alices:
            await c.close()
        again = await connect(servers["B1"], pki, "alice")  # reuses its own idle name
        assert again.name in {c.name for c in alices}
        await again.close()
        with pytest.raises(RemoteError, match="assigned name"):
            await Client.connect(port=servers["B1"].port, name="c9", tls=pki.client_tls(),
                                 server_hostname="localhost")
        anon = await Client.connect(port=servers["B1"].port, tls=pki.client_tls(),
                                    server_hostname="localhost")
        assert anon.name not in {"c1", "c2", "c3"}
        await anon.close()
    finally:
        await close_all(servers)


async def test_servers_listen_on_loopback_unless_secured_or_told_otherwise(
        pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    srv = BrokerServer(BrokerNode("B1", SCHEMA), host="0.0.0.0")
    with pytest.raises(ConfigError, match="--insecure"):
        await srv.start()
    tokens_only = policy(None, RIGHTS, token_key=str(pki.dir / "token.key"))
    srv = BrokerServer(BrokerNode("B1", SCHEMA, guard=Guard(tokens_only)), host="10.1.2.3")
    with pytest.raises(ConfigError, match="without TLS"):
        await srv.start()
    # TLS and authentication: any address; --insecure: any address, logged loudly
    check_bind("0.0.0.0", tls=True, authenticated=True, insecure=False, what="broker B1")
    with caplog.at_level(logging.ERROR, "siftbus.security"):
        check_bind("0.0.0.0", tls=False, authenticated=False, insecure=True,
                   what="broker B1")
    assert "INSECURE" in caplog.text
    for host in ("127.0.0.1", "::1", "localhost", "127.5.5.5"):
        check_bind(host, tls=False, authenticated=False, insecure=False, what="x")
