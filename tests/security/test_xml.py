"""The XML endpoint under a security policy (the hook of siftbus.xmlfilter.http_security),
on real uvicorn servers: bearer tokens, HTTPS, rights per route, subscriptions owned by
their principal, callback URLs only under the allow-list, denials counted."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from broker.processes import run_cli
from secure import Pki, make_pki, policy
from siftbus.errors import ConfigError, QuotaExceeded
from siftbus.security.guard import Guard
from siftbus.security.policy import OPEN
from siftbus.security.principal import Principal, PrincipalKind
from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, to_xml
from siftbus.xmlfilter.http import create_app
from siftbus.xmlfilter.http_security import (
    XmlAccess,
    callback_addresses,
    secure_app,
    server_security,
    uvicorn_tls,
)
from xmlfilter.servers import APPENDIX6, APPENDIX7, Running, receiver_app, serve

PRINCIPALS = {"ops": {"services": ["xml.*"]},
              "alice": {"services": ["xml.subscribe"]},
              "bob": {"services": ["xml.subscribe"]},
              "sensor": {"services": ["xml.publish"]},
              "carol": {"services": ["xml.subscribe", "xml.publish"]},
              "nobody": {}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), brokers=("localhost",), clients=())


def doc_for(recv: str, name: str) -> bytes:
    """The thesis' three subscriptions, all calling back ``recv``/submit/``name``."""
    subs = APPENDIX6.replace(b"http://localhost:4001/submit", f"{recv}/submit/{name}".encode())
    subs = subs.replace(b"http://localhost:4002/submit", f"{recv}/submit/{name}".encode())
    return subs.replace(b"<callbackMethod>HTTPS</callbackMethod>",
                        b"<callbackMethod>HTTP</callbackMethod>")


async def serve_tls(app: Any, pki: Pki, tls: dict[str, Any] | None = None) -> Running:
    tls = tls or {"ssl_certfile": str(pki.dir / "localhost.pem"),
                  "ssl_keyfile": str(pki.dir / "localhost.key")}
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            lifespan="on", **tls)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started
    return Running(server, task)


@pytest.fixture
async def world(pki: Pki) -> AsyncIterator[dict[str, Any]]:
    inbox: list[tuple[str, bytes, dict[str, str]]] = []
    recv = await serve(receiver_app(inbox))
    guard = Guard(policy(pki, PRINCIPALS, callback_prefixes=[f"{recv.url}/submit/"]))
    filt = XmlEventFilter()
    app = secure_app(create_app(filt), guard)
    endpoint = await serve_tls(app, pki)
    url = endpoint.url.replace("http://", "https://").replace("127.0.0.1", "localhost")
    try:
        yield {"url": url, "plain": endpoint.url, "recv": recv.url, "inbox": inbox,
               "filter": filt, "guard": guard, "app": app}
    finally:
        await endpoint.stop()
        await recv.stop()


def client(pki: Pki, who: str | None = None, token: str | None = None) -> httpx.AsyncClient:
    headers = {}
    if who is not None or token is not None:
        headers["Authorization"] = f"Bearer {token or pki.token(str(who))}"
    return httpx.AsyncClient(timeout=10, verify=pki.client_tls(), headers=headers)


async def test_without_a_valid_token_nothing_is_learned(world: dict[str, Any],
                                                        pki: Pki) -> None:
    url = world["url"]
    async with client(pki, "alice") as alice:
        r = await alice.post(f"{url}/subscriptions", content=doc_for(world["recv"], "a"))
        assert r.status_code == 201, r.text
    tampered = pki.token("ops")[:-3] + "abc"
    for c in (client(pki), client(pki, token=tampered), client(pki, token="x")):
        async with c:
            for method, path in (("GET", "/subscriptions"), ("GET", "/stats"),
                                 ("POST", "/publish"), ("GET", "/openapi.json"),
                                 ("GET", "/docs"), ("POST", "/subscriptions")):
                r = await c.request(method, f"{url}{path}", content=APPENDIX7)
                assert r.status_code == 401, (method, path, r.text)
                assert "token" in r.json()["error"] or "credentials" in r.json()["error"]
                assert "ids" not in r.text and "matcher" not in r.text
    assert len(world["filter"]) == 3  # nobody harmed alice
    assert world["inbox"] == []  # nothing was published
    assert world["guard"].stats()["denials"]["authentication/connect"] == 18
    # plain HTTP to the HTTPS endpoint: no answer at all
    async with httpx.AsyncClient(timeout=5) as c:
        with pytest.raises(httpx.HTTPError):
            await c.get(f"{world['plain']}/subscriptions",
                        headers={"Authorization": f"Bearer {pki.token('ops')}"})


async def test_rights_per_route_and_ownership(world: dict[str, Any], pki: Pki) -> None:
    url, recv, inbox = world["url"], world["recv"], world["inbox"]
    async with (client(pki, "alice") as alice, client(pki, "bob") as bob,
                client(pki, "sensor") as sensor, client(pki, "ops") as ops,
                client(pki, "nobody") as nobody):
        r = await alice.post(f"{url}/subscriptions", content=doc_for(recv, "a"))
        ids = r.json()["ids"]
        assert r.status_code == 201 and len(ids) == 3
        for c, method, path in ((alice, "POST", "/publish"), (sensor, "POST", "/subscriptions"),
                                (sensor, "GET", "/subscriptions"), (alice, "GET", "/stats"),
                                (nobody, "GET", "/subscriptions"), (bob, "GET", "/docs")):
            r = await c.request(method, f"{url}{path}", content=APPENDIX7)
            assert r.status_code == 403, (method, path, r.text)
            assert "may not call xml." in r.json()["error"]
        # bob neither sees nor deletes alice's subscriptions
        assert (await bob.get(f"{url}/subscriptions")).json()["ids"] == []
        assert sorted((await alice.get(f"{url}/subscriptions")).json()["ids"]) == sorted(ids)
        assert sorted((await ops.get(f"{url}/subscriptions")).json()["ids"]) == sorted(ids)
        r = await bob.delete(f"{url}/subscriptions/{ids[0]}")
        assert r.status_code == 404
        assert len(world["filter"]) == 3
        r = await sensor.post(f"{url}/publish", content=APPENDIX7)
        assert r.status_code == 200 and r.json()["events"] == 3
        assert {name for name, _, _ in inbox} == {"a"}
        assert (await alice.delete(f"{url}/subscriptions/{ids[0]}")).status_code == 200
        assert len(world["filter"]) == 2
        assert (await ops.get(f"{url}/stats")).status_code == 200
    denied = world["guard"].stats()["denied_by_principal"]
    assert denied == {"alice": 2, "sensor": 2, "nobody": 1, "bob": 2}, denied


async def test_callbacks_only_under_the_allowed_prefixes(world: dict[str, Any],
                                                         pki: Pki) -> None:
    url, recv = world["url"], world["recv"]
    async with client(pki, "alice") as alice:
        evil = doc_for(recv, "a").replace(f"{recv}/submit/a".encode(),
                                          b"http://169.254.169.254/latest", 1)
        r = await alice.post(f"{url}/subscriptions", content=evil)
        assert r.status_code == 403 and "allowed prefix" in r.json()["error"], r.text
        assert len(world["filter"]) == 0  # the whole document refused, nothing registered
        # an empty address defaults to the client's host: outside the list too
        empty = doc_for(recv, "a").replace(f"{recv}/submit/a".encode(), b"")
        r = await alice.post(f"{url}/subscriptions", content=empty)
        assert r.status_code == 403
        # a header naming an allowed address is accepted as the default
        r = await alice.post(f"{url}/subscriptions", content=empty,
                             headers={"X-Callback-Address": f"{recv}/submit/h"})
        assert r.status_code == 201, r.text
        # what the hook cannot read it does not pass on
        r = await alice.post(f"{url}/subscriptions", content=b"<subscriptionList><")
        assert r.status_code == 403
        r = await alice.post(f"{url}/publish", content=APPENDIX7)
        assert r.status_code == 403
    stats = world["guard"].stats()
    assert stats["denials"]["access/register a callback to"] == 2, stats


def test_callback_addresses_of_a_document() -> None:
    assert callback_addresses(APPENDIX6, "d") == ["http://localhost:4001/submit",
                                                  "http://localhost:4002/submit",
                                                  "http://localhost:4002/submit"]
    empty = APPENDIX6.replace(b"http://localhost:4001/submit", b"")
    assert callback_addresses(empty, "http://me/")[0] == "http://me/"


def test_safe_defaults_of_the_xml_endpoint(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--insecure"):
        server_security(OPEN, None, None, host="0.0.0.0", insecure=False)
    guard, tls = server_security(OPEN, None, None, host="0.0.0.0", insecure=True)
    assert guard.open and tls is None and uvicorn_tls(tls) == {}
    pol = policy(pki, PRINCIPALS)
    with pytest.raises(ConfigError, match="needs --cert and --key"):
        server_security(pol, None, None, host="127.0.0.1", insecure=False)
    guard, tls = server_security(pol, pki.dir / "localhost.pem", pki.dir / "localhost.key",
                                 host="0.0.0.0", insecure=False)
    assert not guard.open and uvicorn_tls(tls)["ssl_certfile"].endswith("localhost.pem")
    r = run_cli("xml-filter", "serve", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--insecure" in r.stderr, \
        r.stderr
    r = run_cli("xml-filter", "serve", "--port", "0", "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--store keeps subscription owners: it needs --config" in r.stderr


def _served_serial(port: int, pki: Pki) -> int:
    """The serial number of the certificate a new TLS connection to ``port`` gets."""
    import socket

    from cryptography import x509

    ctx = pki.client_tls()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _file_serial(path: Path) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


async def test_the_xml_endpoint_reloads_replaced_certificates(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from secure import make_pki
    from siftbus.security.certs import issue

    pki = make_pki(tmp_path, brokers=("localhost",), clients=())
    guard, tls = server_security(policy(pki, PRINCIPALS), tmp_path / "localhost.pem",
                                 tmp_path / "localhost.key", host="127.0.0.1",
                                 insecure=False)
    app = secure_app(create_app(XmlEventFilter()), guard, tls=tls)
    app.reload_interval = 0.02
    endpoint = await serve_tls(app, pki, uvicorn_tls(tls))
    port = int(endpoint.url.rsplit(":", 1)[1])
    try:
        first = _file_serial(tmp_path / "localhost.pem")
        assert await asyncio.to_thread(_served_serial, port, pki) == first
        issue(tmp_path, "localhost")  # a new certificate in the same files
        st = (tmp_path / "localhost.pem").stat()
        os.utime(tmp_path / "localhost.pem", (st.st_atime, st.st_mtime + 5))
        second = _file_serial(tmp_path / "localhost.pem")
        assert second != first
        for _ in range(250):
            if "XML endpoint: certificates reloaded" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert "XML endpoint: certificates reloaded" in caplog.text
        assert await asyncio.to_thread(_served_serial, port, pki) == second
        async with client(pki, "ops") as c:  # the new certificate verifies; still secured
            assert (await c.get(f"https://localhost:{port}/stats")).status_code == 200
    finally:
        await endpoint.stop()


async def test_quotas_on_the_xml_endpoint(pki: Pki) -> None:
    """The broker's quotas at the XML endpoint: subscriptions held (``max_profiles``: a
    document that would pass it is refused whole) and documents published per second
    (``publish_rate``), each answered 429 naming the quota and counted."""
    inbox: list[tuple[str, bytes, dict[str, str]]] = []
    recv = await serve(receiver_app(inbox))
    quotas = {**PRINCIPALS, "alice": {"services": ["xml.subscribe"], "max_profiles": 4},
              "sensor": {"services": ["xml.publish"], "publish_rate": 0.01,
                         "publish_burst": 2.0}}
    guard = Guard(policy(pki, quotas, callback_prefixes=[f"{recv.url}/submit/"]))
    filt = XmlEventFilter()
    endpoint = await serve_tls(secure_app(create_app(filt), guard), pki)
    url = endpoint.url.replace("http://", "https://").replace("127.0.0.1", "localhost")
    try:
        async with client(pki, "alice") as alice, client(pki, "sensor") as sensor:
            r = await alice.post(f"{url}/subscriptions", content=doc_for(recv.url, "a"))
            assert r.status_code == 201 and len(r.json()["ids"]) == 3
            r = await alice.post(f"{url}/subscriptions", content=doc_for(recv.url, "b"))
            assert r.status_code == 429, r.text  # 3 + 3 > 4: refused whole
            assert "alice exceeds its max_profiles quota of 4" in r.json()["error"]
            assert r.json()["type"] == "QuotaExceeded" and len(filt) == 3
            first = await alice.get(f"{url}/subscriptions")
            r = await alice.delete(f"{url}/subscriptions/{first.json()['ids'][0]}")
            assert r.status_code == 200 and len(filt) == 2
            for _ in range(2):  # the burst
                r = await sensor.post(f"{url}/publish", content=APPENDIX7)
                assert r.status_code == 200, r.text
            r = await sensor.post(f"{url}/publish", content=APPENDIX7)
            assert r.status_code == 429 and "publish_rate" in r.json()["error"]
        denials = guard.stats()["denied_by_principal"]
        assert denials["alice"] == 1 and denials["sensor"] == 1
    finally:
        await endpoint.stop()
        await recv.stop()


async def test_subscription_owners_survive_a_restart_with_a_store(pki: Pki,
                                                                   tmp_path: Path) -> None:
    """With a store the endpoint registers the documents again after a restart, and
    every ownership check holds as before: the owner lists, inspects and deletes its
    subscriptions, another principal gets 404 for them, a deletion stays deleted."""
    store = tmp_path / "xml"
    inbox: list[tuple[str, bytes, dict[str, str]]] = []
    recv = await serve(receiver_app(inbox))
    pol = policy(pki, PRINCIPALS, callback_prefixes=[f"{recv.url}/submit/"])

    async def start() -> tuple[Running, str, XmlEventFilter]:
        filt = XmlEventFilter()
        ep = await serve_tls(secure_app(create_app(filt), Guard(pol), store=store), pki)
        return ep, ep.url.replace("http://", "https://").replace("127.0.0.1", "localhost"), \
            filt

    try:
        endpoint, url, filt = await start()
        async with client(pki, "alice") as alice:
            r = await alice.post(f"{url}/subscriptions", content=doc_for(recv.url, "a"))
            ids = r.json()["ids"]
            assert r.status_code == 201 and len(ids) == 3
            assert (await alice.delete(f"{url}/subscriptions/{ids[2]}")).status_code == 200
        await endpoint.stop()
        endpoint, url, filt = await start()  # restarted
        assert sorted(s.id for s in filt.subscriptions()) == sorted(ids[:2])
        async with client(pki, "alice") as alice, client(pki, "bob") as bob:
            assert sorted((await alice.get(f"{url}/subscriptions")).json()["ids"]) == \
                sorted(ids[:2])
            assert (await bob.get(f"{url}/subscriptions")).json()["ids"] == []
            assert (await bob.get(f"{url}/subscriptions/{ids[0]}")).status_code == 404
            assert (await bob.delete(f"{url}/subscriptions/{ids[0]}")).status_code == 404
            assert (await alice.get(f"{url}/subscriptions/{ids[0]}")).status_code == 200
            assert (await alice.delete(f"{url}/subscriptions/{ids[0]}")).status_code == 200
        await endpoint.stop()
        endpoint, url, filt = await start()  # and again: the deletion stayed
        assert [s.id for s in filt.subscriptions()] == [ids[1]]
        (store.parent / "xml.owners.json").write_text("{not json")
        with pytest.raises(ConfigError, match="owners file"):
            secure_app(create_app(XmlEventFilter()), Guard(pol), store=store)
    finally:
        await endpoint.stop()
        await recv.stop()


def test_the_xml_quota_count_follows_expiry_without_a_scan(pki: Pki) -> None:
    """``max_profiles`` at the XML endpoint is counted as subscriptions come and go: a
    subscription that expires (or is removed from the filter any other way) frees its
    place at once, a delete after it does not free it twice, and another principal's
    subscriptions do not count."""
    quotas = {**PRINCIPALS, "alice": {"services": ["xml.subscribe"], "max_profiles": 4}}
    guard = Guard(policy(pki, quotas, callback_prefixes=["http://r/"]))
    now = [0.0]
    filt = XmlEventFilter(clock=lambda: now[0])
    access = XmlAccess(guard)
    access.attach(filt)
    alice = Principal("alice", PrincipalKind.TOKEN)
    bob = Principal("bob", PrincipalKind.TOKEN)

    def register(who: Principal, names: list[str], timeout: int | None) -> list[str]:
        doc = to_xml([Subscription.build(("HTTP", "http://r/"), [ContentFilter.build(
            "//ObjectEvent", [("bizStep", "string-equals", n)])], id=n,
            timeout_seconds=timeout) for n in names])
        access.charge_subscribe(who, len(names))
        ids = filt.subscribe_xml(doc, default_method="HTTP", sender="http://r/")
        access.registered(who, ids, doc, "http://r/")
        return ids

    register(alice, ["a1", "a2"], 5)
    register(alice, ["a3"], None)
    register(bob, ["b1", "b2", "b3"], None)
    assert access.held(alice) == 3 and access.held(bob) == 3
    with pytest.raises(QuotaExceeded, match="max_profiles"):
        register(alice, ["a4", "a5"], None)  # 3 + 2 > 4: refused before registering
    assert len(filt) == 6
    now[0] = 6.0
    filt.publish(b"<ObjectEvent><bizStep>x</bizStep></ObjectEvent>")  # a1, a2 expire
    assert len(filt) == 4 and access.held(alice) == 1
    register(alice, ["a4", "a5", "a6"], None)  # 1 + 3 = 4: now it fits
    assert access.held(alice) == 4
    filt.unsubscribe("a4")
    access.deleted("a4")  # the endpoint's delete after the filter's: counted once
    assert access.held(alice) == 3 and access.held(bob) == 3
    with pytest.raises(QuotaExceeded):
        register(alice, ["a7", "a8"], None)

    def no_scan(sid: str) -> Subscription:
        raise AssertionError(f"the quota count looked {sid} up in the filter")

    filt.get = no_scan  # type: ignore[method-assign]
    assert access.held(alice) == 3
    with pytest.raises(QuotaExceeded):
        access.charge_subscribe(alice, 2)


async def test_a_publish_answer_names_only_the_callers_own_subscriptions(
        world: dict[str, Any], pki: Pki) -> None:
    """A publisher sees what its document caused for its own subscriptions only: never
    another principal's subscription ids or callback URLs (issue 30, item 8)."""
    url, recv = world["url"], world["recv"]
    async with (client(pki, "alice") as alice, client(pki, "carol") as carol,
                client(pki, "sensor") as sensor, client(pki, "ops") as ops):
        a_ids = (await alice.post(f"{url}/subscriptions",
                                  content=doc_for(recv, "a"))).json()["ids"]
        c_ids = (await carol.post(f"{url}/subscriptions",
                                  content=doc_for(recv, "c"))).json()["ids"]
        r = await sensor.post(f"{url}/publish?deliver=false", content=APPENDIX7)
        assert r.status_code == 200 and r.json()["events"] == 3
        assert r.json()["notifications"] == [], r.text
        r = await carol.post(f"{url}/publish?deliver=false", content=APPENDIX7)
        notes = r.json()["notifications"]
        assert notes and all(set(n["subscriptions"]) <= set(c_ids) for n in notes)
        assert "/submit/a" not in r.text and not any(i in r.text for i in a_ids), r.text
        r = await ops.post(f"{url}/publish?deliver=false", content=APPENDIX7)
        seen = {i for n in r.json()["notifications"] for i in n["subscriptions"]}
        assert seen & set(a_ids) and seen & set(c_ids)  # an administrator sees all
