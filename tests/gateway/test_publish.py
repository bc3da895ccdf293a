"""Reading publish bodies (``gateway.publish``): differentially against the event-file
reader, line by line, with hypothesis; and a corpus of hostile bodies through a live
gateway, each answered with a 4xx while the gateway keeps serving."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_strategies import SCHEMA
from siftbus.errors import SiftbusError
from siftbus.gateway import GatewayLimits
from siftbus.gateway.publish import parse_publish_body
from siftbus.model import parse_event

from .servers import GatewayNetwork, start_gateway_network

GOOD = st.builds(lambda a, b, s: json.dumps({"type": "T", "a": a, "b": b, "s": s}),
                 st.integers(0, 7), st.sampled_from(["LO", "MID", "HI"]), st.text(max_size=5))
BAD = st.one_of(
    st.builds(lambda a: json.dumps({"type": "T", "a": a, "b": "LO", "s": ""}),
              st.integers(8, 10**30)),
    st.sampled_from(["{", "[]", "null", '{"type": "Q"}', '{"type": "U", "x": 1, "x": 2}',
                     '{"type": "U", "x": NaN}', '{"type": "U", "x": 1.5}', "  \t"]),
    st.text(max_size=20))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(GOOD, BAD), max_size=30))
def test_json_lines_are_read_as_the_event_reader_reads_each_line(lines: list[str]) -> None:
    lines = [ln.replace("\n", " ").replace("\r", " ") for ln in lines]
    text = "\n".join(lines)
    expected, refused = [], []
    for i, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        try:
            expected.append(parse_event(ln, SCHEMA))
        except SiftbusError:
            refused.append(i)
    got = parse_publish_body(text, "application/x-ndjson", SCHEMA, GatewayLimits())
    assert list(got.events) == expected
    assert [e.line for e in got.errors] == refused and got.error_count == len(refused)


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network(limits=GatewayLimits(max_body=1 << 20))
    yield net
    await net.close()


HOSTILE: list[tuple[str, bytes]] = [
    ("application/json", b"[" * 100_000),                        # nesting
    ("application/json", b'{"type": "U", "x": ' + b"9" * 5000 + b"}"),  # digits
    ("application/json", b"\xff\xfe not utf-8"),
    ("application/json", b'{"type": "U", "x": 1}' * 3),
    ("application/json", b'"just a string"'),
    ("application/json", b""),
    ("application/x-ndjson", b"\n".join([b'{"type": "U", "x": 1}'] * 20_000)),  # > max_batch
    ("application/x-ndjson", b"[" * 200_000),
    ("application/x-ndjson", b"\x00\x01\x02"),
    ("application/json", b'{"type": "U", "x": 1, "type": "T"}'),
    ("text/html", b"<html>"),
]


async def test_hostile_bodies_get_a_4xx_and_the_gateway_keeps_serving(
        gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=30) as http:
        for ctype, body in HOSTILE:
            r = await http.post("/api/publish", content=body,
                                headers={"content-type": ctype})
            assert 400 <= r.status_code < 500, (body[:40], r.status_code, r.text[:200])
            out = r.json()  # nothing published: a whole-body error or every line refused
            assert out.get("published", 0) == 0 and ("error" in out or out["rejected"] > 0)
            assert len(r.text) < 20_000  # an excerpt, never the input
        r = await http.post("/api/publish", json={"type": "U", "x": 1})
        assert r.json() == {"published": 1, "rejected": 0, "errors": []}


async def test_the_fast_publish_route_answers_as_the_declared_one(gn: GatewayNetwork
                                                                  ) -> None:
    """``app.PublishRoute`` serves POST /api/publish in front of the router; the FastAPI
    route (reached here through the bare router) must give the same answers."""
    bodies = [("application/json", b'{"type": "U", "x": 1}'),
              ("application/json", b'[{"type": "U", "x": 1}, {"type": "U", "x": 99}]'),
              ("application/x-ndjson", b'{"type": "U", "x": 2}\n{"type": "Q"}\n\n{'),
              ("application/x-ndjson", b'{"type": "Q"}'),
              ("application/json", b'[{"type": "U", "x": 1.5}, {"type": "U", "x": 2}]')]
    app = gn.gateway.http.app
    fast = httpx.AsyncClient(base_url=gn.url, timeout=30)
    bare = AsyncExitStackMiddleware(app.router)  # what FastAPI puts around its router
    declared = httpx.AsyncClient(transport=httpx.ASGITransport(app=bare),
                                 base_url="http://gateway", timeout=30)
    async with fast, declared:
        for ctype, body in bodies:
            a = await fast.post("/api/publish", content=body, headers={"content-type": ctype})
            b = await declared.post("/api/publish", content=body,
                                    headers={"content-type": ctype})
            assert (a.status_code, a.json()) == (b.status_code, b.json()), body
            assert a.headers["content-type"] == "application/json"
        r = await fast.post("/api/publish", content=b"[1, ", headers={
            "content-type": "application/json"})  # a whole-body error: the one shape
        assert r.status_code == 400 and r.json()["error"]["type"] == "EventError"
        assert r.json()["error"]["line"] == 1
