"""``siftbus xml-filter`` end to end, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lxml import etree

from xmlfilter.servers import start_cli_server

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
SUBS = str(DATA / "appendix6_subscriptions.xml")
MSG = str(DATA / "appendix7_message.xml")


def siftbus(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", "xml-filter", *args],
                          capture_output=True, text=True, timeout=120, input=stdin)


def test_json_lines_and_xml_output() -> None:
    r = siftbus("--subscriptions", SUBS, "--input", MSG, "--input", "-",
                stdin=Path(MSG).read_text())
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["message"], x["event"]) for x in lines] == [(0, 1), (1, 1)]
    assert [rec["address"] for rec in lines[0]["receivers"]] == [
        "http://localhost:4001/submit", "http://localhost:4002/submit"]
    assert etree.fromstring(lines[0]["xml"]).findtext("bizLocation/id") == (
        "urn:com:location:area-01")
    r = siftbus("-s", SUBS, "-i", MSG, "--all", "--no-precheck", "--strategy", "counting")
    assert [json.loads(x)["event"] for x in r.stdout.splitlines()] == [0, 1, 2]
    r = siftbus("-s", SUBS, "-i", MSG, "--format", "xml")
    assert r.returncode == 0, r.stderr
    doc = etree.fromstring(r.stdout.encode())
    assert len(doc) == 1 and doc[0].get("event") == "1"


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(Path(SUBS).read_text().replace("//ObjectEvent", "//ObjectEvent/*", 1))
    r = siftbus("-s", str(bad), "-i", MSG)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "wildcard" in r.stderr and "line" in r.stderr
    broken = tmp_path / "broken.xml"
    broken.write_text("<a>\n<b>\n</a>")
    r = siftbus("-s", SUBS, "-i", str(broken))
    assert r.returncode == 2 and "line 3" in r.stderr
    r = siftbus("-s", SUBS, "-i", str(tmp_path / "missing.xml"))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_serve_answers_publish_and_subscribe() -> None:
    """``siftbus xml-filter serve`` as a user starts it: the endpoint takes subscriptions and
    messages over HTTP and keeps serving after a bad request."""
    import httpx

    proc, url = start_cli_server("-s", SUBS)
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            ids = c.get("/subscriptions").json()["ids"]
            assert len(ids) == 3
            r = c.post("/publish?deliver=false", content=Path(MSG).read_bytes())
            assert r.status_code == 200
            notes = r.json()["notifications"]
            assert r.json()["events"] == 3 and [n["event"] for n in notes] == [1]
            assert len(notes[0]["receivers"]) == 2
            assert c.post("/publish", content=b"<a><b></a>").status_code == 400
            assert c.post("/subscriptions", content=Path(SUBS).read_bytes()).status_code == 409
            assert c.delete(f"/subscriptions/{ids[0]}").status_code == 200
            assert c.get("/subscriptions").json()["ids"] == ids[1:]
            r = c.post("/publish?deliver=false", content=Path(MSG).read_bytes())
            left = [x for x in notes[0]["subscriptions"] if x != ids[0]]
            assert [n["subscriptions"] for n in r.json()["notifications"]] == [left]
    finally:
        proc.terminate()
        proc.wait(30)


def test_types_file_and_views_in_the_cli(tmp_path: Path) -> None:
    """``--types`` defines the hierarchy that a ``#Type`` target resolves through, and a
    filter's ``visibleAttributes`` shapes the printed event."""
    types = tmp_path / "types.toml"
    types.write_text('[types]\nObjectEvent = ["//ObjectEvent"]\nEPCISEvent = ["#ObjectEvent"]\n')
    subs = tmp_path / "subs.xml"
    subs.write_text(
        '<subscriptionList xmlns="http://www.adiwa.net/subscription/1.0" '
        'xmlns:aff="http://www.adiwa.net/filter/1.0"><subscription><receiver>'
        "<callbackMethod>HTTP</callbackMethod><callbackAddress>http://r/</callbackAddress>"
        '</receiver><filterList><aff:contentFilter target="//#EPCISEvent" '
        'visibleAttributes="bizLocation/id"/></filterList></subscription></subscriptionList>')
    r = siftbus("-s", str(subs), "--types", str(types), "-i", MSG)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["event"] for x in lines] == [0, 1, 2]
    for x in lines:
        ev = etree.fromstring(x["xml"])
        assert [c.tag for c in ev] == ["bizLocation"] and len(ev[0]) == 1


def test_json_lines_are_exactly_json_dumps_of_the_notifications(tmp_path: Path) -> None:
    """The command's lines, byte for byte, are ``json.dumps({"message": m,
    **notification.to_json_dict()}, ensure_ascii=False)`` of the API's notifications
    (``--all``: the unmatched events too), with text a JSON encoder must escape."""
    from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, to_xml

    tabs = ["", "\t"]  # with a tab the line takes the encoder's escapes, without not
    odd = (f'<ObjectEvent><action>Gerät "x" \\\\ {tabs[i % 2]} é ✓ \u2028</action>'
           f'<readPoint><id>rp-{i}</id></readPoint></ObjectEvent>' for i in range(40))
    msg = tmp_path / "m.xml"
    msg.write_text("<r>" + "".join(odd) + "</r>", encoding="utf-8")
    subs = tmp_path / "s.xml"
    subs.write_bytes(to_xml([Subscription.build(
        ("HTTP", f'http://r/{k}?"é"'), [ContentFilter.build(
            "//ObjectEvent", [("readPoint/id", "string-match", [f"rp-{k}*"])])])
        for k in range(1, 4)]))
    f = XmlEventFilter()
    f.subscribe_xml(subs.read_bytes(), default_method="cli", sender="stdout")
    want = []
    for m in (0, 1):
        for r in f.iter_results(msg.read_bytes()):
            if not r.notifications:
                want.append(json.dumps({"message": m, "event": r.event,
                                        "targets": list(r.match.targets), "subscriptions": [],
                                        "receivers": [], "xml": None}, ensure_ascii=False))
            for n in r.notifications:
                want.append(json.dumps({"message": m, **n.to_json_dict()},
                                       ensure_ascii=False))
    r = siftbus("-s", str(subs), "-i", str(msg), "-i", str(msg), "--all")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n") == [*want, ""]  # (splitlines() cuts at U+2028)
    assert sum('"subscriptions": []' not in x for x in want) == 2 * 33
