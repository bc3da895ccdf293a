"""The HTTP publish/subscribe endpoint and the HTTP POST notifier, on real uvicorn servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from lxml import etree

from siftbus.xmlfilter import XmlEventFilter
from siftbus.xmlfilter.http import create_app

from .servers import APPENDIX6, APPENDIX7, receiver_app, serve


@pytest.fixture
async def servers() -> AsyncIterator[dict[str, Any]]:
    inbox: list[tuple[str, bytes, dict[str, str]]] = []
    recv = await serve(receiver_app(inbox))
    filt = XmlEventFilter()
    broker = await serve(create_app(filt, max_body=100_000))
    try:
        yield {"broker": broker.url, "receiver": recv.url, "inbox": inbox, "filter": filt}
    finally:
        await broker.stop()
        await recv.stop()


async def test_subscribe_publish_deliver(servers: dict[str, Any]) -> None:
    url, recv, inbox = servers["broker"], servers["receiver"], servers["inbox"]
    subs = APPENDIX6.replace(b"http://localhost:4001/submit", f"{recv}/submit/a".encode())
    subs = subs.replace(b"http://localhost:4002/submit", f"{recv}/submit/b".encode())
    subs = subs.replace(b"<callbackMethod>HTTPS</callbackMethod>",
                        b"<callbackMethod>HTTP</callbackMethod>")
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(f"{url}/subscriptions", content=subs)
        assert r.status_code == 201, r.text
        ids = r.json()["ids"]
        assert len(ids) == 3
        # the thesis generator's fixed subscriptions sent again: rejected, server unharmed
        r = await c.post(f"{url}/subscriptions", content=subs)
        assert r.status_code == 409
        assert "duplicate" in r.json()["error"]
        r = await c.post(f"{url}/publish", content=APPENDIX7)
        assert r.status_code == 200
        body = r.json()
        assert body["events"] == 3
        assert [n["event"] for n in body["notifications"]] == [1]
        assert sorted(name for name, _, _ in inbox) == ["a", "b"]
        for _, xml, headers in inbox:
            root = etree.fromstring(xml)
            assert root.findtext("bizLocation/id") == "urn:com:location:area-01"
            assert headers["content-type"] == "application/xml"
            assert headers["x-siftbus-event"] == "1"
        # unsubscribe one receiver's subscription: only the other is notified
        r = await c.delete(f"{url}/subscriptions/{ids[0]}")
        assert r.status_code == 200
        r = await c.delete(f"{url}/subscriptions/{ids[0]}")
        assert r.status_code == 404
        inbox.clear()
        r = await c.post(f"{url}/publish", content=APPENDIX7)
        assert [name for name, _, _ in inbox] == ["b"]
        r = await c.get(f"{url}/subscriptions")
        assert sorted(r.json()["ids"]) == sorted(ids[1:])
        r = await c.get(f"{url}/stats")
        assert r.json()["subscriptions"] == 2


async def test_bad_requests_answered_and_server_keeps_serving(servers: dict[str, Any]) -> None:
    url = servers["broker"]
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(f"{url}/publish", content=b"<a><b></a>")
        assert r.status_code == 400
        assert r.json()["type"] == "XmlInputError"
        assert r.json()["line"] == 1
        r = await c.post(f"{url}/subscriptions", content=b"<subscriptionList/>")
        assert r.status_code == 400
        r = await c.post(f"{url}/subscriptions", content=APPENDIX6.replace(
            b"//ObjectEvent", b"//*"))
        assert r.status_code == 400
        assert r.json()["type"] == "XPathSubsetError"
        r = await c.post(f"{url}/publish", content=b"<x>" + b"y" * 200_000 + b"</x>")
        assert r.status_code == 413
        # empty receiver: defaults to HTTP and the X-Callback-Address header
        doc = APPENDIX6.replace(b"<callbackMethod>HTTP</callbackMethod>",
                                b"<callbackMethod/>").replace(
            b"<callbackAddress>http://localhost:4001/submit</callbackAddress>",
            b"<callbackAddress/>")
        r = await c.post(f"{url}/subscriptions", content=doc,
                         headers={"X-Callback-Address": "http://127.0.0.1:9/none"})
        assert r.status_code == 201, r.text
        subs = {s.receiver.address: s for s in servers["filter"].subscriptions()}
        assert subs["http://127.0.0.1:9/none"].receiver.method == "HTTP"
        # delivery to an unreachable receiver fails quietly for the publisher
        r = await c.post(f"{url}/publish", content=APPENDIX7)
        assert r.status_code == 200
        assert len(r.json()["notifications"]) == 1


async def test_notifier_counts_refusals() -> None:
    from siftbus.xmlfilter import Notification, Receiver
    from siftbus.xmlfilter.http import DeliveryError, HttpPostNotifier

    inbox: list[tuple[str, bytes, dict[str, str]]] = []
    recv = await serve(receiver_app(inbox, fail=True))
    notifier = HttpPostNotifier(timeout=5)
    try:
        note = Notification(0, ("//x",), ("s",), (Receiver("HTTP", "r"),), b"<x/>")
        with pytest.raises(DeliveryError):
            await notifier.deliver(Receiver("HTTP", f"{recv.url}/submit/z"), note)
        with pytest.raises(DeliveryError):
            await notifier.deliver(Receiver("HTTP", "mailto:x"), note)
        assert notifier.stats().failed == 2
        assert inbox and inbox[0][1] == b"<x/>"
    finally:
        await notifier.aclose()
        await recv.stop()


TYPED = b"""<subscriptionList xmlns="http://www.adiwa.net/subscription/1.0"
  xmlns:aff="http://www.adiwa.net/filter/1.0"><subscription id="typed">
  <receiver><callbackMethod>HTTP</callbackMethod><callbackAddress>http://127.0.0.1:9/x
  </callbackAddress></receiver><timeoutInSeconds>600</timeoutInSeconds>
  <filterList><aff:contentFilter target="#ObjectEvent"/></filterList>
</subscription></subscriptionList>"""


async def test_subscription_manager_and_types_over_http(servers: dict[str, Any]) -> None:
    """WS-Notification's operations on a real server: GetStatus, Renew, Pause, Resume,
    Unsubscribe; and the event-type hierarchy that ``#ObjectEvent`` resolves through."""
    url = servers["broker"]
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        assert (await c.post("/subscriptions", content=TYPED)).status_code == 201

        async def matched() -> list[list[str]]:
            r = await c.post("/publish?deliver=false", content=APPENDIX7)
            return [n["subscriptions"] for n in r.json()["notifications"]]

        assert await matched() == []  # the type is not defined yet
        r = await c.put("/types/ObjectEvent", json={"targets": ["//ObjectEvent"]})
        assert r.status_code == 200, r.text
        assert (await c.get("/types")).json() == {"ObjectEvent": ["//ObjectEvent"]}
        assert await matched() == [["typed"]] * 3
        st = (await c.get("/subscriptions/typed")).json()
        assert st["state"] == "active" and st["timeoutInSeconds"] == 600
        assert 0 < st["expiresIn"] <= 600
        st = (await c.post("/subscriptions/typed/renew?timeout=30")).json()
        assert st["timeoutInSeconds"] == 30 and 0 < st["expiresIn"] <= 30
        st = (await c.post("/subscriptions/typed/pause")).json()
        assert st["state"] == "paused"
        assert await matched() == []
        assert (await c.get("/subscriptions")).json() == {"ids": [], "paused": ["typed"]}
        st = (await c.post("/subscriptions/typed/resume")).json()
        assert st["state"] == "active"
        assert await matched() == [["typed"]] * 3
        # bad requests: unknown ids, a cycle, bodies that are not the JSON asked for
        assert (await c.get("/subscriptions/nope")).status_code == 404
        assert (await c.post("/subscriptions/nope/pause")).status_code == 404
        assert (await c.post("/subscriptions/typed/renew?timeout=0")).status_code == 400
        r = await c.put("/types/A", json={"targets": ["#A"]})
        assert r.status_code == 400 and "own subtype" in r.json()["error"]
        for body in (b"[" * 100_000, b"\xff", b"[]", b'{"targets": [1]}', b'{"targets": "x"}'):
            r = await c.put("/types/B", content=body)
            assert r.status_code == 400, body[:20]
        assert (await c.delete("/types/ObjectEvent")).status_code == 200
        assert await matched() == []
        assert (await c.delete("/subscriptions/typed")).status_code == 200
        assert (await c.get("/subscriptions/typed")).status_code == 404


def documented_answers() -> dict[str, str]:
    """The answer column of docs/xmlfilter.md's route table, by request."""
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2].joinpath("docs", "xmlfilter.md").read_text()
    table = doc.split("## HTTP endpoint", 1)[1].split("\n\n")[2]
    rows = [[c.strip() for c in r.strip().strip("|").split("|")]
            for r in table.splitlines()[2:]]
    return {r[0].strip("`"): r[2] for r in rows}


async def test_the_answers_are_as_documented(servers: dict[str, Any]) -> None:
    from siftbus.xmlfilter.subscription import MAX_TIMEOUT

    docs = documented_answers()
    url = servers["broker"]

    def keys(answer: str) -> set[str]:
        import re

        return set(re.findall(r'"(\w+)"', answer.split("[{", 1)[0]))

    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        r = await c.post("/subscriptions", content=TYPED)
        assert set(r.json()) == keys(docs["POST /subscriptions"]) == {"ids"}
        r = await c.put("/types/ObjectEvent", json={"targets": ["//ObjectEvent"],
                                                    "namespaces": {"e": "urn:x"}})
        assert set(r.json()) == keys(docs["PUT /types/{name}"]) == {"name", "targets"}
        r = await c.post("/publish?deliver=false", content=APPENDIX7)
        answer = r.json()
        assert set(answer) == {"events", "notifications"}
        assert set(answer["notifications"][0]) == {"event", "targets", "subscriptions",
                                                   "receivers", "xml"}
        assert {"events", "notifications", "event", "targets", "subscriptions", "receivers",
                "method", "address", "xml"} == set(
            __import__("re").findall(r'"(\w+)"', docs["POST /publish[?deliver=false]"]))
        r = await c.get("/subscriptions")
        assert set(r.json()) == keys(docs["GET /subscriptions"]) == {"ids", "paused"}
        st = (await c.post(f"/subscriptions/typed/renew?timeout={MAX_TIMEOUT}")).json()
        assert st["timeoutInSeconds"] == MAX_TIMEOUT == 3_153_600_000
        r = await c.post(f"/subscriptions/typed/renew?timeout={MAX_TIMEOUT + 1}")
        assert r.status_code == 400 and "3,153,600,000" in r.json()["error"]
        assert set(r.json()) == {"error", "type", "line", "column"}
