"""The channel service under a security policy, standalone (TLS, tokens, certificates)
and hosted in a secured broker: unauthenticated callers learn nothing, administrative
methods need their service right, and nobody pulls, acknowledges or pushes through
someone else's proxy or destroys a channel they do not own."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from broker.processes import run_cli
from broker_strategies import SCHEMA
from channel.servers import serving
from secure import Pki, make_pki, policy
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel.remote import (
    ChannelClient,
    ChannelServer,
    ChannelService,
    register_with_broker,
)
from siftbus.channel.remote.client import BrokerChannelClient
from siftbus.client import Client
from siftbus.errors import ConfigError, ConnectionLostError, SiftbusError
from siftbus.security.guard import Guard
from siftbus.security.policy import SecurityPolicy

PRINCIPALS = {"ops": {"services": ["channel.*"]},
              "alice": {"services": ["channel.use"]},
              "bob": {"services": ["channel.use"]},
              "lister": {"services": ["channel.list_channels"]},
              "mallory": {}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), brokers=("B0", "localhost"),
                    clients=("alice", "bob"))


def ev(i: int) -> dict[str, Any]:
    return StructuredEvent.of("Telecom", "Alarm", f"e{i}", filterable_data={"i": i}).to_dict()


def names(pulled: list[Any]) -> list[str]:
    """The event names of a pull reply."""
    return [e["structured"]["header"]["fixed_header"]["event_name"] for _, e in pulled]


def channel_server(pol: SecurityPolicy, pki: Pki | None, store: Path | None = None
                   ) -> contextlib.AbstractAsyncContextManager[ChannelServer]:
    """A secured channel server on 127.0.0.1 port 0 (TLS with the ``localhost``
    certificate when ``pki``)."""
    return serving(EventChannelFactory(store), guard=Guard(pol),
                   tls=pki.broker_tls("localhost") if pki else None,
                   store=str(store) if store else None)


async def caller(srv: ChannelServer, pki: Pki, who: str | None, *, cert: str | None = None,
                 tls: bool = True) -> ChannelClient:
    return await ChannelClient.connect(
        "127.0.0.1", srv.port, token=pki.token(who) if who else None,
        tls=pki.client_tls(cert) if tls else None, server_hostname="localhost", timeout=5)


async def test_an_unauthenticated_caller_learns_nothing(pki: Pki) -> None:
    async with channel_server(policy(pki, PRINCIPALS), pki) as srv:
        ops = await caller(srv, pki, "ops")
        await ops.call("create_channel")
        for token in (None, pki.token("ops")[:-2] + "xx"):
            with pytest.raises(SiftbusError, match=r"credentials required|token is not valid"):
                await ChannelClient.connect("127.0.0.1", srv.port, token=token,
                                            tls=pki.client_tls(),
                                            server_hostname="localhost", timeout=5)
        with pytest.raises(ConnectionLostError):  # plain TCP to a TLS port
            await ChannelClient.connect("127.0.0.1", srv.port, token=pki.token("ops"),
                                        timeout=2)
        stats = await ops.call("security_stats")
        assert stats["denials"]["authentication/connect"] == 2, stats
        assert len(await ops.call("list_channels")) == 1  # nobody harmed the channel
        await ops.close()


async def test_a_client_certificate_is_a_principal(pki: Pki) -> None:
    async with channel_server(policy(pki, PRINCIPALS), pki) as srv:
        alice = await caller(srv, pki, None, cert="alice")
        ops = await caller(srv, pki, "ops")
        cid = await ops.call("create_channel")
        pid = await alice.call("obtain_consumer", channel=cid)
        assert await alice.call("pull", channel=cid, proxy=pid) == []
        with pytest.raises(SiftbusError, match=r"alice may not call channel\.create_channel"):
            await alice.call("create_channel")
        await alice.close()
        await ops.close()


async def test_rights_and_ownership_on_every_method(pki: Pki) -> None:
    async with channel_server(policy(pki, PRINCIPALS), pki) as srv:
        ops, alice, bob, lister, mallory = [await caller(srv, pki, w) for w in
                                            ("ops", "alice", "bob", "lister", "mallory")]
        cid = await ops.call("create_channel")
        for c in (alice, bob, mallory):
            with pytest.raises(SiftbusError, match=r"may not call channel\.list_channels"):
                await c.call("list_channels")
            with pytest.raises(SiftbusError, match=r"may not call channel\.destroy_channel"):
                await c.call("destroy_channel", channel=cid)
        assert [c["id"] for c in await lister.call("list_channels")] == [cid]
        with pytest.raises(SiftbusError, match=r"mallory may not call channel\.obtain_consumer"):
            await mallory.call("obtain_consumer", channel=cid)
        mine = await alice.call("obtain_consumer", channel=cid)
        supply = await bob.call("obtain_supplier", channel=cid)
        assert await bob.call("push", channel=cid, proxy=supply, events=[ev(1), ev(2)]) == 2
        # bob may neither pull nor acknowledge alice's events, nor filter her proxy
        for method, extra in (("pull", {"max": 5, "ack": 10}), ("suspend", {}),
                              ("disconnect", {}),
                              ("add_filter", {"constraints": [[[["*", "*"]], "false"]]})):
            with pytest.raises(SiftbusError, match="belongs to another principal"):
                await bob.call(method, channel=cid, proxy=mine, **extra)
        with pytest.raises(SiftbusError, match="belongs to another principal"):
            # the side is the one the method acts on, whatever the caller says
            await bob.call("ack", channel=cid, proxy=mine, side="supplier", seq=1)
        with pytest.raises(SiftbusError, match=r"may not call channel\.channel_info"):
            await bob.call("channel_info", channel=cid)
        with pytest.raises(SiftbusError, match="belongs to another principal"):
            await alice.call("push", channel=cid, proxy=supply, side="supplier",
                             events=[ev(3)])
        # the channel's shared objects are its owner's
        with pytest.raises(SiftbusError, match="does not own"):
            await bob.call("add_filter", channel=cid, admin=0,
                           constraints=[[[["*", "*"]], "false"]])
        admin = await bob.call("new_for_consumers", channel=cid)
        with pytest.raises(SiftbusError, match="belongs to another principal"):
            await alice.call("add_filter", channel=cid, admin=admin,
                             constraints=[[[["*", "*"]], "false"]])
        got = await alice.call("pull", channel=cid, proxy=mine, max=5)
        assert names(got) == ["e1", "e2"]
        stats = await ops.call("security_stats")
        assert stats["denied_by_principal"] == {"alice": 4, "bob": 9, "mallory": 3}, stats
        assert stats["denials"] == {"access/call": 16}
        await ops.call("destroy_channel", channel=cid)  # the operator's right
        for c in (ops, alice, bob, lister, mallory):
            await c.close()


async def test_owners_survive_a_restart(pki: Pki, tmp_path: Path) -> None:
    store = tmp_path / "channels.db"
    pol = policy(pki, PRINCIPALS)
    async with channel_server(pol, pki, store) as srv:
        alice, bob = await caller(srv, pki, "alice"), await caller(srv, pki, "bob")
        ops = await caller(srv, pki, "ops")
        cid = await ops.call("create_channel", qos={"EventReliability": 1,
                                                    "ConnectionReliability": 1})
        mine = await alice.call("obtain_consumer", channel=cid)
        supply = await bob.call("obtain_supplier", channel=cid)
        await bob.call("push", channel=cid, proxy=supply, events=[ev(1)])
        for c in (alice, bob, ops):
            await c.close()
    async with channel_server(pol, pki, store) as srv:
        alice, bob = await caller(srv, pki, "alice"), await caller(srv, pki, "bob")
        with pytest.raises(SiftbusError, match="belongs to another principal"):
            await bob.call("pull", channel=cid, proxy=mine)
        got = await alice.call("pull", channel=cid, proxy=mine, timeout=2)
        assert names(got) == ["e1"]
        await alice.close()
        await bob.close()


async def test_an_object_gone_after_a_restart_keeps_no_owner(pki: Pki,
                                                            tmp_path: Path) -> None:
    """A channel the store does not bring back (best effort) leaves no owner entry: to
    another principal it is unknown, as if it never existed, not "someone else's"
    (issue 30, item 8)."""
    store = tmp_path / "channels.db"
    pol = policy(pki, PRINCIPALS)
    async with channel_server(pol, pki, store) as srv:
        alice, ops = await caller(srv, pki, "alice"), await caller(srv, pki, "ops")
        cid = await ops.call("create_channel")  # best effort: not stored
        mine = await alice.call("obtain_consumer", channel=cid)
        for c in (alice, ops):
            await c.close()
    owners = Path(f"{store}.owners.json")
    assert "alice" in owners.read_text()
    async with channel_server(pol, pki, store) as srv:
        # the owners file no longer says that channel existed, nor whose its proxy was
        assert "alice" not in owners.read_text() and "ops" not in owners.read_text()
        bob, ops = await caller(srv, pki, "bob"), await caller(srv, pki, "ops")
        assert cid not in [c["id"] for c in await ops.call("list_channels")]
        # the same answer as for a channel that never was
        for channel in (cid, 999):
            with pytest.raises(SiftbusError, match="belongs to another principal"):
                await bob.call("pull", channel=channel, proxy=mine)
        await bob.close()
        await ops.close()


async def test_the_channel_service_in_a_secured_broker(pki: Pki) -> None:
    pol = policy(pki, PRINCIPALS, brokers=["B0"])
    node = BrokerNode("B0", SCHEMA, guard=Guard(pol))
    factory = EventChannelFactory()
    async with BrokerServer(node, port=0, tls=pki.broker_tls("B0")) as server:
        register_with_broker(server, factory)

        async def join(who: str) -> BrokerChannelClient:
            c = await Client.connect(port=server.port, token=pki.token(who),
                                     tls=pki.client_tls(), server_hostname="localhost")
            return BrokerChannelClient(c)

        ops, alice, bob = [await join(w) for w in ("ops", "alice", "bob")]
        cid = await ops.call("create_channel")
        with pytest.raises(SiftbusError, match=r"alice may not call channel\.create_channel"):
            await alice.call("create_channel")
        mine = await alice.call("obtain_consumer", channel=cid)
        supply = await bob.call("obtain_supplier", channel=cid)
        await bob.call("push", channel=cid, proxy=supply, events=[ev(7)])
        with pytest.raises(SiftbusError, match=r"bob may not call channel\.pull on proxy"):
            await bob.call("pull", channel=cid, proxy=mine)
        got = await alice.call("pull", channel=cid, proxy=mine, timeout=2)
        assert names(got) == ["e7"]
        assert node.guard.stats()["denied_by_principal"] == {"alice": 1, "bob": 1}
        for c in (ops, alice, bob):
            await c.close()
    factory.close()


async def test_without_security_the_channel_server_stays_on_loopback() -> None:
    factory = EventChannelFactory()
    srv = ChannelServer(ChannelService(factory), host="0.0.0.0")
    with pytest.raises(ConfigError, match="--insecure"):
        await srv.start()
    factory.close()


def test_channel_serve_refuses_an_open_public_bind() -> None:
    r = run_cli("channel", "serve", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--insecure" in r.stderr, r.stderr


async def test_the_channel_server_reloads_replaced_certificates(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from siftbus.security.certs import issue

    pki = make_pki(tmp_path, brokers=("localhost",), clients=())
    tls = pki.broker_tls("localhost")
    watcher = asyncio.ensure_future(tls.watch("channel server", interval=0.02))
    try:
        await asyncio.sleep(0.1)
        assert "certificates reloaded" not in caplog.text
        before = (tmp_path / "localhost.pem").read_bytes()
        issue(tmp_path, "localhost")  # a new certificate in the same files
        assert (tmp_path / "localhost.pem").read_bytes() != before
        for _ in range(200):
            if "channel server: certificates reloaded" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert "channel server: certificates reloaded" in caplog.text
        async with channel_server(policy(pki, PRINCIPALS), pki) as srv:
            assert srv.tls is not None and any(  # the server watches its own files
                "watch" in repr(t.get_coro()) for t in srv._tasks)
            ops = await caller(srv, pki, "ops")  # the new certificate verifies
            assert await ops.call("list_channels") == []
            await ops.close()
    finally:
        watcher.cancel()


async def test_quotas_on_the_channel_service(pki: Pki, tmp_path: Path) -> None:
    """The broker's quotas on the channel service: objects held (``max_profiles``) and
    events pushed per second (``publish_rate``), each refused whole with a clear,
    retriable error and counted -- never a silent drop; a disconnected proxy and a
    destroyed channel give their objects back, and a restart keeps the count."""
    quotas = {"ops": {"services": ["channel.*"]},
              "alice": {"services": ["channel.use"], "max_profiles": 2},
              "bob": {"services": ["channel.use"], "publish_rate": 1.0,
                      "publish_burst": 3.0}}
    pol = policy(pki, quotas)
    store = tmp_path / "channels.db"
    async with channel_server(pol, pki, store) as srv:
        ops, alice, bob = [await caller(srv, pki, w) for w in ("ops", "alice", "bob")]
        # persistent: its proxies come back after the restart below, and count again
        cid = await ops.call("create_channel", qos={"EventReliability": 1,
                                                    "ConnectionReliability": 1})
        first = await alice.call("obtain_consumer", channel=cid)
        await alice.call("obtain_consumer", channel=cid)
        with pytest.raises(SiftbusError, match=r"alice exceeds its max_profiles quota of 2") \
                as held:
            await alice.call("obtain_consumer", channel=cid)
        assert "max_profiles" in str(held.value)
        await alice.call("disconnect", channel=cid, proxy=first)  # gives one back
        third = await alice.call("obtain_consumer", channel=cid)
        assert third != first
        supply = await bob.call("obtain_supplier", channel=cid)
        assert await bob.call("push", channel=cid, proxy=supply,
                              events=[ev(1), ev(2), ev(3)]) == 3
        with pytest.raises(SiftbusError, match=r"bob exceeds its publish_rate quota") as rate:
            await bob.call("push", channel=cid, proxy=supply, events=[ev(4), ev(5)])
        assert getattr(rate.value, "retriable", False) or "publish_rate" in str(rate.value)
        pulled = await alice.call("pull", channel=cid, proxy=third, max=10)
        assert names(pulled) == ["e1", "e2", "e3"]  # the refused push left nothing behind
        stats = await ops.call("security_stats")
        assert stats["denied_by_principal"].get("alice", 0) >= 1
        assert stats["denied_by_principal"].get("bob", 0) >= 1
        for c in (ops, alice, bob):
            await c.close()
    async with channel_server(pol, pki, store) as srv:  # restarted: still holds two
        alice = await caller(srv, pki, "alice")
        with pytest.raises(SiftbusError, match=r"max_profiles quota of 2"):
            await alice.call("obtain_consumer", channel=cid)
        await alice.close()
