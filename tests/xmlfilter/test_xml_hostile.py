"""Bad XML subscriptions, bad XML events and bad HTTP bodies, as a hostile user sends them.

Every item of the corpus goes through the real ``siftbus xml-filter`` command
(``hostile.run_bad``: exit 2, one line ``siftbus: error: ...``, no traceback, bounded time
and memory) and through the HTTP endpoint (a 4xx JSON answer, and the server keeps serving).
The defects of issue 13 each have a test here that failed before their fix.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from lxml import etree

from hostile import run_bad, run_cli
from siftbus.xmlfilter import XmlEventFilter
from siftbus.xmlfilter.http import create_app
from siftbus.xmlfilter.limits import XmlLimits

from .servers import serve, start_cli_server

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
SUBS = (DATA / "appendix6_subscriptions.xml").read_bytes()
MSG = (DATA / "appendix7_message.xml").read_bytes()

S_NS = "http://www.adiwa.net/subscription/1.0"
F_NS = "http://www.adiwa.net/filter/1.0"


def sub_doc(filters: str, *, extra: str = "", decl: str = "", sub_attrs: str = "") -> bytes:
    """A one-subscription document around the given filter XML (``aff:`` prefix)."""
    return (f'{decl}<subscriptionList xmlns="{S_NS}" xmlns:aff="{F_NS}">'
            f"<subscription{sub_attrs}><receiver><callbackMethod>HTTP</callbackMethod>"
            "<callbackAddress>http://r/</callbackAddress></receiver>"
            f"{extra}<filterList>{filters}</filterList></subscription>"
            "</subscriptionList>").encode()


def cond(attr: str, op: str, *values: str, extra: str = "") -> str:
    vals = "".join(f"<aff:value>{v}</aff:value>" for v in values)
    return f'<aff:condition attribute="{attr}" operatorId="{op}"{extra}>{vals}</aff:condition>'


def cf(target: str, *conds: str) -> str:
    return f'<aff:contentFilter target="{target}">{"".join(conds)}</aff:contentFilter>'


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
          + b"".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode()
                     for i in range(9))
          + b"]>")

#: (name, document, text the error line must contain)
BAD_SUBSCRIPTIONS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "not well-formed"),
    ("binary", bytes(range(256)) * 4, "not well-formed"),
    ("not xml", b"hello world\n", "line 1"),
    ("invalid utf-8", sub_doc(cf("//x")).replace(b"http://r/", b"http://\xff/"), "line 1"),
    ("truncated", SUBS[: len(SUBS) // 2], "not well-formed"),
    ("nested 100,000 deep", b"<a>" * 100_000 + b"</a>" * 100_000, "not well-formed"),
    ("billion laughs", LAUGHS + b"<subscriptionList>&j;</subscriptionList>", "entit"),
    ("external dtd", b'<!DOCTYPE r SYSTEM "file:///etc/passwd"><subscriptionList '
     b'xmlns="' + S_NS.encode() + b'"/>', "DTD"),
    ("wrong root", b"<foo/>", "ADiWa schema"),
    ("no receiver", f'<subscription xmlns="{S_NS}"><filterList/></subscription>'.encode(),
     "ADiWa schema"),
    ("bad quantifier", sub_doc(cf("//x", cond("a", "attribute-exists",
                                              extra=' quantifier="some"'))), "ADiWa schema"),
    ("unknown operator", sub_doc(cf("//x", cond("a", "string-between", "1"))), "operatorId"),
    ("two values for equals", sub_doc(cf("//x", cond("a", "string-equals", "1", "2"))),
     "exactly 1"),
    ("not a number", sub_doc(cf("//x", cond("a", "numeric-gt", "abc"))), "decimal number"),
    ("5,000-digit number", sub_doc(cf("//x", cond("a", "numeric-gt", "1" * 5000))),
     "decimal number"),
    ("bad epc pattern", sub_doc(cf("//x", cond("a", "match-epc", "urn:x:y"))), "EPC"),
    ("empty epc range", sub_doc(cf("//x", cond("a", "match-epc",
                                               "urn:epc:idpat:sgtin:1.[9-2]"))), "EPC range"),
    ("wildcard target", sub_doc(cf("//x/*")), "wildcard"),
    ("function target", sub_doc(cf("//x[contains(a, 'b')]")), "function"),
    ("axis in path", sub_doc(cf("//x", cond("child::a", "attribute-exists"))), "axis"),
    ("undeclared prefix", sub_doc(cf("//q:x")), "prefix"),
    ("1 MB target", sub_doc(cf("//x/" + "a" * 1_000_000 + "/*")), "target"),
    ("50 kB bad operand", sub_doc(cf("//x", cond("a", "numeric-gt", "9" * 50_000 + "x"))),
     "decimal number"),
    ("100 kB operand", sub_doc(cf("//x", cond("a", "string-equals", "9" * 100_000))),
     "max_value"),
    ("concept filter", sub_doc("<aff:conceptFilter><aff:dummy>x</aff:dummy>"
                               "</aff:conceptFilter>"), "conceptFilter"),
    ("id used twice", SUBS.replace(b"<subscription>", b'<subscription id="same">'),
     "already in use"),
    ("5,000-digit timeout", sub_doc(cf("//x"), extra="<timeoutInSeconds>" + "9" * 5000
                                    + "</timeoutInSeconds>"), "line 1"),
    ("negative timeout", sub_doc(cf("//x"), extra="<timeoutInSeconds>-5</timeoutInSeconds>"),
     "timeoutInSeconds"),
    ("1,001 conditions", sub_doc(cf("//x", *[cond(f"a{i}", "attribute-exists")
                                           for i in range(1001)])), "max_conditions"),
    ("100,000 operands", sub_doc(cf("//x", cond("a", "string-in-set",
                                                *map(str, range(100_000))))), "max_values"),
    ("5 kB path", sub_doc(cf("//x", cond("a/" * 2500, "attribute-exists"))),
     "max_expression"),
    ("65-step path", sub_doc(cf("//x", cond("a/" * 64 + "a", "attribute-exists"))),
     "64 steps"),
    ("nested 9 deep", sub_doc('<aff:contentFilter target="//x">'
                              + '<aff:contentFilter target="a">' * 9
                              + "</aff:contentFilter>" * 10), "max_nesting"),
    ("nested attribute target", sub_doc('<aff:contentFilter target="//x"><aff:contentFilter '
                                        'target="@a"/></aff:contentFilter>'), "elements"),
    ("empty visibleAttributes", sub_doc('<aff:contentFilter target="//x" '
                                        'visibleAttributes=" "/>'), "visibleAttributes"),
    ("type with a step", sub_doc(cf("#T/a")), "event type"),
]

#: (name, message, text the error line must contain)
BAD_EVENTS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "not well-formed"),
    ("binary", bytes(range(256)) * 4, "not well-formed"),
    ("mismatched tags", b"<a>\n<ObjectEvent></a>", "line 2"),
    ("undefined entity", b"<r>\n<ObjectEvent>&e;</ObjectEvent></r>", "line 2"),
    ("declared entity", b'<!DOCTYPE r [<!ENTITY e "v">]><r><ObjectEvent>&e;</ObjectEvent>'
     b"</r>", "entities"),
    ("billion laughs", LAUGHS + b"<r><ObjectEvent>&j;</ObjectEvent></r>", "entit"),
    ("external dtd", b'<!DOCTYPE r SYSTEM "file:///etc/passwd"><r><ObjectEvent/></r>',
     "DTD"),
    ("invalid utf-8", b"<r><ObjectEvent><a>\xff\xfe</a></ObjectEvent></r>", "line 1"),
    ("nested 100,000 deep", b"<a>" * 100_000 + b"</a>" * 100_000, "not well-formed"),
    ("two roots", b"<ObjectEvent/>\n<ObjectEvent/>", "line 2"),
    ("unclosed comment", b"<r><!-- </r>", "not well-formed"),
    ("10 MB name", b"<" + b"a" * 10_000_000, "not well-formed"),
]


@pytest.fixture(scope="module")
def subs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("subs") / "subs.xml"
    p.write_bytes(SUBS)
    return p


@pytest.mark.parametrize(("name", "doc", "where"), BAD_SUBSCRIPTIONS,
                         ids=[c[0] for c in BAD_SUBSCRIPTIONS])
def test_bad_subscription_documents_through_the_cli(tmp_path: Path, name: str, doc: bytes,
                                                    where: str) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_bytes(doc)
    line = run_bad(["xml-filter", "-s", str(bad), "-i", "-"], stdin=MSG, where=where)
    assert "bad.xml" in line


@pytest.mark.parametrize(("name", "doc", "where"), BAD_EVENTS, ids=[c[0] for c in BAD_EVENTS])
def test_bad_event_messages_through_the_cli(subs_file: Path, tmp_path: Path, name: str,
                                            doc: bytes, where: str) -> None:
    bad = tmp_path / "events.xml"
    bad.write_bytes(doc)
    for fmt in ("json", "xml"):
        line = run_bad(["xml-filter", "-s", str(subs_file), "-i", str(bad), "-f", fmt],
                       where=where)
        assert "events.xml" in line


def test_undefined_entity_names_its_place() -> None:
    """Issue 13: ``<x>&e;</x>`` gave 'line 0, column 0: no element found' (or, with a DTD
    declaring the entity, a notification holding ``&e;`` and an XMLSyntaxError traceback
    from ``--format xml``)."""
    line = run_bad(["xml-filter", "-s", str(DATA / "appendix6_subscriptions.xml"), "-i", "-",
                    "-f", "xml"], stdin=b"<r>\n  <ObjectEvent>&e;</ObjectEvent></r>")
    assert "<stdin>, line 2, column " in line and "'e' not defined" in line


# -- the glob that froze the CLI and the HTTP endpoint ---------------------------------------

STARS = sub_doc(cf("//x", cond("v", "string-match", "*" * 12 + "b")))
FORTY = b"<r><x><v>" + b"a" * 40 + b"</v></x><x><v>" + b"a" * 39 + b"b</v></x></r>"


def test_a_pathological_glob_does_not_hang_the_cli(tmp_path: Path) -> None:
    subs = tmp_path / "stars.xml"
    subs.write_bytes(STARS)
    o = run_cli(["xml-filter", "-s", str(subs), "-i", "-"], stdin=FORTY, timeout=60)
    assert o.returncode == 0, o.stderr
    assert [line.count('"event": 1') for line in o.stdout.splitlines()] == [1]


def test_a_pathological_glob_does_not_hang_the_server_and_sigterm_stops_it(
        tmp_path: Path) -> None:
    subs = tmp_path / "stars.xml"
    subs.write_bytes(STARS)
    proc, url = start_cli_server("-s", str(subs))
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            r = c.post("/publish?deliver=false", content=FORTY)
            assert r.status_code == 200
            assert [n["event"] for n in r.json()["notifications"]] == [1]
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def many_events(n: int) -> bytes:
    return b"<r>" + b"<x><v>ab</v></x>" * n + b"</r>"


def test_sigterm_stops_a_request_in_flight(tmp_path: Path) -> None:
    """A signal ends the process promptly: the request in flight is stopped (503), not
    waited for."""
    subs = tmp_path / "subs.xml"
    subs.write_bytes(sub_doc(cf("//x", cond("v", "string-match", "a*"))))
    proc, url = start_cli_server("-s", str(subs))
    try:
        body = many_events(2_000_000)  # about a minute of matching on one core

        async def go() -> int:
            async with httpx.AsyncClient(base_url=url, timeout=120) as c:
                req = asyncio.create_task(c.post("/publish?deliver=false", content=body))
                await asyncio.sleep(3)
                assert not req.done()
                proc.send_signal(signal.SIGTERM)
                t = time.monotonic()
                try:
                    r = await req
                except httpx.HTTPError:
                    return -1  # the connection closed: also a stop
                assert time.monotonic() - t < 30
                assert r.json()["type"] == "RequestAbortedError", r.text
                return r.status_code

        status = asyncio.run(go())
        assert status in (503, -1)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- the HTTP endpoint -----------------------------------------------------------------------


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, XmlEventFilter]]:
    filt = XmlEventFilter()
    filt.subscribe_xml(SUBS, default_method="HTTP", sender="http://localhost/")
    running = await serve(create_app(filt, limits=XmlLimits(max_body=2_000_000,
                                                            max_request_seconds=5)))
    try:
        yield running.url, filt
    finally:
        await running.stop()


async def _still_serving(c: httpx.AsyncClient) -> None:
    r = await c.post("/publish?deliver=false", content=MSG)
    assert r.status_code == 200
    assert [n["event"] for n in r.json()["notifications"]] == [1]


def _small(doc: bytes) -> bool:
    return len(doc) <= 2_000_000


async def test_bad_bodies_answered_with_4xx_and_the_server_keeps_serving(
        endpoint: tuple[str, XmlEventFilter]) -> None:
    url, filt = endpoint
    before = len(filt)
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        for path, corpus in (("/subscriptions", BAD_SUBSCRIPTIONS), ("/publish", BAD_EVENTS)):
            for name, doc, _ in corpus:
                r = await c.post(path, content=doc)
                want = (400, 409) if _small(doc) else (413,)
                assert r.status_code in want, (path, name, r.status_code, r.text[:300])
                body = r.json()
                assert set(body) == {"error", "type", "line", "column"}, name
                assert len(body["error"]) <= 600, (name, len(body["error"]))
            await _still_serving(c)
    assert len(filt) == before  # no bad document registered anything


async def test_a_chunked_body_is_refused_once_past_the_limit(
        endpoint: tuple[str, XmlEventFilter]) -> None:
    """Issue 13: a chunked 200 MB body was read whole (98 -> 487 MB) before the 413. The
    client here sends 1 MiB chunks until the answer comes: it must come once the 2 MB
    limit is passed, not after the 200 MiB, and the server's memory must not follow."""
    url, _ = endpoint
    host, port = url.removeprefix("http://").split(":")
    me = psutil.Process()  # the server runs in this process
    rss = me.memory_info().rss
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /publish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                 b"Content-Type: application/xml\r\n\r\n")
    answer = asyncio.create_task(reader.read(4096))
    block = b"<x>" + b"y" * (1 << 20) + b"</x>"
    sent = 0
    try:
        for _ in range(200):
            if answer.done():
                break
            writer.write(b"%x\r\n%s\r\n" % (len(block), block))
            await asyncio.wait_for(writer.drain(), 10)
            sent += len(block)
            await asyncio.sleep(0.005)
        head = await asyncio.wait_for(answer, 30)
    except (ConnectionError, TimeoutError):
        head = await asyncio.wait_for(answer, 30)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"max_body" in head
    assert sent < 32 * (1 << 20), f"{sent / 2**20:.0f} MiB sent before the answer"
    assert me.memory_info().rss - rss < 64 * 2**20
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        await _still_serving(c)


async def test_a_declared_oversized_length_is_refused_unread(
        endpoint: tuple[str, XmlEventFilter]) -> None:
    url, _ = endpoint
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        r = await c.post("/subscriptions", content=b"x" * 2_000_001)
        assert r.status_code == 413 and r.json()["type"] == "BodyTooLargeError"
        await _still_serving(c)


async def test_a_request_running_past_its_time_limit_is_stopped() -> None:
    filt = XmlEventFilter()
    filt.subscribe_xml(sub_doc(cf("//x", cond("v", "string-match", "a*"))),
                       default_method="HTTP", sender="http://localhost/")
    running = await serve(create_app(filt, limits=XmlLimits(max_request_seconds=0.5)))
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=60) as c:
            t = time.monotonic()
            r = await c.post("/publish?deliver=false", content=many_events(2_000_000))
            assert r.status_code == 503
            assert "max_request_seconds" in r.json()["error"]
            assert time.monotonic() - t < 30
            r = await c.post("/publish?deliver=false", content=many_events(3))
            assert len(r.json()["notifications"]) == 3
    finally:
        await running.stop()


# -- output -----------------------------------------------------------------------------------


def test_non_ascii_names_give_well_formed_notifications() -> None:
    """Issue 13: ``<Gerät>`` came out as ``<Ger&#228;t>``, and ``--format xml`` crashed."""
    subs = sub_doc(cf("//Gerät", cond("Zähler/@wert", "numeric-gt", "1")))
    doc = "<r><Gerät><Zähler wert='2'>ä</Zähler></Gerät></r>".encode()
    f = XmlEventFilter()
    f.subscribe_xml(subs, default_method="cli", sender="x")
    (note,) = f.publish(doc)
    assert note.xml.decode() == "<Gerät><Zähler wert=\"2\">ä</Zähler></Gerät>"
    assert etree.fromstring(note.xml).tag == "Gerät"


def test_format_xml_keeps_text_exactly(tmp_path: Path) -> None:
    """Issue 13: ``--format xml`` pretty-printed, so ``r`` came back as ``\\n  r\\n``."""
    subs = tmp_path / "s.xml"
    subs.write_bytes(sub_doc(cf("//Gerät")))
    doc = "<r><Gerät>r</Gerät><Gerät> \n s <i>t</i></Gerät></r>".encode()
    o = run_cli(["xml-filter", "-s", str(subs), "-i", "-", "-f", "xml"], stdin=doc)
    assert o.returncode == 0, o.stderr
    root = etree.fromstring(o.stdout.encode())
    events = [n.find("{*}event")[0] for n in root]
    assert [e.tag for e in events] == ["Gerät", "Gerät"]
    assert ["".join(e.itertext()) for e in events] == ["r", " \n s t"]
    assert [etree.tostring(e, method="c14n", exclusive=True) for e in events] == [
        "<Gerät>r</Gerät>".encode(), "<Gerät> \n s <i>t</i></Gerät>".encode()]


def test_prefix_declared_on_the_condition_itself() -> None:
    """Issue 13: ``xmlns:p`` on the ``condition`` element was refused as undeclared."""
    c = ('<aff:condition xmlns:p="urn:p" attribute="p:v" operatorId="string-equals">'
         "<aff:value>1</aff:value></aff:condition>")
    f = XmlEventFilter()
    f.subscribe_xml(sub_doc(cf("//x", c)), default_method="cli", sender="x")
    doc = b'<r xmlns:q="urn:p"><x><q:v>1</q:v></x><x><v>1</v></x></r>'
    assert [n.event for n in f.publish(doc)] == [0]


# -- memory: the CLI streams its input ----------------------------------------------------------


def _big_document(path: Path, mib: int) -> None:
    """``mib`` MiB of events that no subscription's target names, then one that matches."""
    filler = b"<other><a>" + b"z" * 1000 + b"</a></other>"
    with path.open("wb") as out:
        out.write(b"<r>")
        for _ in range(mib * 1024):
            out.write(filler)
        out.write(MSG.split(b"<EventList>")[1].split(b"</EventList>")[0])
        out.write(b"</r>")


def _peak_rss(cmd: list[str], stdin: Path | None) -> tuple[int, int, str]:
    with (stdin.open("rb") if stdin else open(os.devnull, "rb")) as inp:
        proc = subprocess.Popen(cmd, stdin=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ps = psutil.Process(proc.pid)
        peak = 0
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
        out, _ = proc.communicate(timeout=120)
        return proc.returncode, peak, out.decode()


@pytest.fixture(scope="module")
def big_document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    p = tmp_path_factory.mktemp("big") / "big.xml"
    _big_document(p, 200)
    yield p
    p.unlink()


@pytest.mark.parametrize("from_stdin", [False, True], ids=["file", "stdin"])
def test_the_cli_streams_a_200_mb_document(big_document: Path, from_stdin: bool) -> None:
    """Issue 13: a 210 MB document took 288 MB RSS against 80 MB for a 2 MB one."""
    base = [sys.executable, "-m", "siftbus", "xml-filter", "-s",
            str(DATA / "appendix6_subscriptions.xml"), "-i"]
    small = big_document.with_name("small.xml")
    small.write_bytes(MSG)
    rc, small_peak, _ = _peak_rss([*base, str(small)], None)
    assert rc == 0
    cmd = [*base, "-"] if from_stdin else [*base, str(big_document)]
    rc, peak, out = _peak_rss(cmd, big_document if from_stdin else None)
    assert rc == 0
    assert len(out.splitlines()) == 1  # the area-01 event at the end
    assert peak < small_peak + 40 * 2**20, (peak / 2**20, small_peak / 2**20)


#: (name, types file, text the error line must contain)
BAD_TYPES: list[tuple[str, bytes, str]] = [
    ("not toml", b"[types\n", "TOML"),
    ("invalid utf-8", b"[types]\nA = ['\xff']\n", "TOML"),
    ("nested 100,000 deep", b"x = " + b"[" * 100_000 + b"]" * 100_000, "TOML"),
    ("not lists", b"[types]\nA = 3\n", "expected"),
    ("a cycle", b"[types]\nA = ['#B']\nB = ['#A']\n", "own subtype"),
    ("a wildcard", b"[types]\nA = ['//*']\n", "wildcard"),
    ("a bad name", b"[types]\n'a b' = ['//x']\n", "event type name"),
]


@pytest.mark.parametrize(("name", "text", "where"), BAD_TYPES, ids=[c[0] for c in BAD_TYPES])
def test_bad_types_files_through_the_cli(subs_file: Path, tmp_path: Path, name: str,
                                         text: bytes, where: str) -> None:
    bad = tmp_path / "types.toml"
    bad.write_bytes(text)
    line = run_bad(["xml-filter", "-s", str(subs_file), "--types", str(bad), "-i", "-"],
                   stdin=MSG, where=where)
    assert "types.toml" in line
