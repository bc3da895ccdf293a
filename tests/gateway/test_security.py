"""The gateway on a secured network (``[security]`` with tokens, no anonymous access):
every route needs a bearer token, and what a token may do through the gateway is exactly
what the brokers' guard grants its principal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from broker.servers import settle
from secure import make_pki
from siftbus.errors import ConfigError
from siftbus.gateway import GatewayServer

from .servers import NAMES, GatewayNetwork, start_gateway_network

SECURITY = """
[security]
ca = "ca.pem"
token_key = "token.key"

[security.principals.ops]
subscribe = ["*"]
publish = ["*"]
services = ["broker.*", "inspect.*", "channel.*"]

[security.principals.tenant]
subscribe = ["T(a >= 4)"]
publish = ["U"]
"""


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[GatewayNetwork, dict[str, str]]]:
    pki = make_pki(tmp_path, brokers=NAMES, clients=())
    gn = await start_gateway_network(security=SECURITY, base=tmp_path, channels=False)
    tokens = {who: pki.token(who, ttl=300) for who in ("ops", "tenant")}
    yield gn, tokens
    await gn.close()


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_every_route_needs_credentials(secured: tuple[GatewayNetwork, dict[str, str]]
                                             ) -> None:
    gn, tokens = secured
    async with httpx.AsyncClient(base_url=gn.url) as http:
        assert (await http.get("/api/health")).json()["secured"] is True
        for method, path in (("GET", "/api/schema"), ("POST", "/api/publish"),
                             ("GET", "/api/network"), ("GET", "/api/subscriptions"),
                             ("GET", "/api/brokers/B2/table")):
            r = await http.request(method, path, json={"type": "U", "x": 1})
            assert r.status_code == 401, (path, r.text)
            assert r.json()["error"]["type"] == "AuthenticationError"
        r = await http.get("/api/schema", headers=auth("not-a-token"))
        assert r.status_code == 401
        r = await http.get("/api/schema", headers=auth(tokens["tenant"]))
        assert r.status_code == 200 and "T" in r.json()
    with pytest.raises(websockets.InvalidStatus):
        await websockets.connect(gn.url.replace("http", "ws") + "/api/ws")


async def test_a_token_has_exactly_its_principals_rights(
        secured: tuple[GatewayNetwork, dict[str, str]]) -> None:
    gn, tokens = secured
    ws = await websockets.connect(gn.url.replace("http", "ws") + "/api/ws?token="
                                  + tokens["tenant"])

    async def ask(**msg: object) -> dict[str, object]:
        await ws.send(json.dumps(msg))
        reply: dict[str, object] = json.loads(await asyncio.wait_for(ws.recv(), 10))
        return reply

    assert (await ask(op="subscribe", id="mine", profile="T(a >= 5)"))["type"] == "subscribed"
    denied = await ask(op="subscribe", id="all", profile="T()")
    assert denied["type"] == "error"
    assert denied["error"]["type"] == "AccessDenied"  # type: ignore[index]
    async with httpx.AsyncClient(base_url=gn.url) as http:
        r = await http.post("/api/publish", json={"type": "T", "a": 7, "b": "LO", "s": ""},
                            headers=auth(tokens["tenant"]))
        assert r.status_code == 403 and r.json()["error"]["type"] == "AccessDenied"
        r = await http.post("/api/publish", json={"type": "U", "x": 1},
                            headers=auth(tokens["tenant"]))
        assert r.status_code == 200 and r.json()["published"] == 1
        r = await http.post("/api/subscriptions", json={"profile": "U()"},
                            headers=auth(tokens["tenant"]))
        assert r.status_code == 403
        await settle(gn.brokers, [])
        r = await http.post("/api/publish", headers=auth(tokens["ops"]), json=[
            {"type": "T", "a": a, "b": "HI", "s": ""} for a in range(8)])
        assert r.json()["published"] == 8
        got: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while len(got) < 3:
                got += json.loads(await ws.recv())["notifications"]
        assert [g["event"]["a"] for g in got] == [5, 6, 7]
        # the operator reads every broker; the tenant may not call broker.stats
        ops = (await http.get("/api/network", headers=auth(tokens["ops"]))).json()
        assert all("stats" in s for s in ops["stats"].values())
        tenant = (await http.get("/api/network", headers=auth(tokens["tenant"]))).json()
        assert all("may not" in s["error"] for s in tenant["stats"].values())
        # a pull subscription belongs to its token
        r = await http.post("/api/subscriptions", json={"profile": "T()", "id": "p"},
                            headers=auth(tokens["ops"]))
        assert r.status_code == 201
        r = await http.get("/api/subscriptions/p/notifications",
                           headers=auth(tokens["tenant"]))
        assert r.status_code == 404
    await ws.close()


def test_a_public_address_needs_tls_and_authentication() -> None:
    from broker_strategies import SCHEMA
    from siftbus.broker.config import parse_network

    net = parse_network('[brokers.B1]\nport = 7401\n', schema=SCHEMA)
    with pytest.raises(ConfigError, match="without TLS and authentication"):
        GatewayServer(net, "B1", host="0.0.0.0")
    with pytest.raises(ConfigError, match="certificate and its key"):
        GatewayServer(net, "B1", tls_cert="x.pem")


async def test_metrics_and_malformed_requests_need_credentials_first(
        secured: tuple[GatewayNetwork, dict[str, str]]) -> None:
    """``/metrics`` needs a token like every data route, and an unauthenticated request
    with a malformed body gets 401, not the schema's 422 (issue 30, items 7 and 8)."""
    gn, tokens = secured
    async with httpx.AsyncClient(base_url=gn.url) as http:
        r = await http.get("/metrics")
        assert r.status_code == 401 and r.json()["error"]["type"] == "AuthenticationError"
        assert (await http.get("/metrics", headers=auth("forged"))).status_code == 401
        r = await http.get("/metrics", headers=auth(tokens["tenant"]))
        assert r.status_code == 200 and "siftbus_gateway_events_published_total" in r.text
        for body in (b"{not json", b'{"profile": 5}'):
            r = await http.post("/api/subscriptions", content=body,
                                headers={"content-type": "application/json"})
            assert r.status_code == 401, r.text
            r = await http.post("/api/subscriptions", content=body,
                                headers={"content-type": "application/json",
                                         **auth(tokens["tenant"])})
            assert r.status_code == 422 and "error" in r.json(), r.text
