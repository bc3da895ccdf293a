"""The JSON-lines writer of ``siftbus xml-filter`` against ``json.dumps`` (its reference):
any ids, targets, receivers and event text give the same line, byte for byte."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from siftbus.cli.xmlfilter import _json_lines, _LineWriter
from siftbus.xmlfilter.output import Notification
from siftbus.xmlfilter.subscription import Receiver

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "xml"

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
receivers = st.builds(Receiver, text, text)
#: what the writer joins without escaping, and what it must escape
plain = st.text("abz09:/.-_ é✓\u2028", max_size=12)
#: (orjson writes the id "," as '","', whose comma separates nothing)
escaped = st.text('"\\\t\n\x00\x1f,a', min_size=1, max_size=4)
#: lone surrogates, which orjson refuses and ``json.dumps`` writes as they are
surrogate = st.text(st.sampled_from("a\ud800\udfff"), min_size=1, max_size=3)
ids = st.one_of(plain, escaped, text, surrogate)
#: several receivers of one method (the writer's joined path), their addresses with and
#: without characters to escape; the method strings equal but not always the same object
one_method = st.tuples(st.sampled_from(["HTTP", "cli", 'm"é\n']), st.booleans(),
                       st.lists(st.one_of(plain, plain, escaped, surrogate), min_size=1,
                                max_size=6))


def _line(msg: int, note: Notification) -> str:
    return json.dumps({"message": msg, **note.to_json_dict()}, ensure_ascii=False) + "\n"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.lists(text, max_size=3),
       st.lists(text, max_size=4), st.lists(receivers, max_size=3), text)
def test_a_line_is_json_dumps_of_the_notification(msg: int, event: int, targets: list[str],
                                                  subs: list[str], recs: list[Receiver],
                                                  xml: str) -> None:
    w = _LineWriter()
    note = Notification(event, tuple(targets), tuple(subs), tuple(recs), xml.encode())
    want = _line(msg, note)
    assert w.notification(msg, note) == want
    assert w.notification(msg, note) == want  # the lists from the cache
    unmatched = json.dumps({"message": msg, "event": event, "targets": targets,
                            "subscriptions": [], "receivers": [], "xml": None},
                           ensure_ascii=False) + "\n"
    assert w.unmatched(msg, event, tuple(targets)) == unmatched


@settings(max_examples=150, deadline=None)
@given(st.lists(ids, min_size=1, max_size=8), one_method, st.lists(one_method, max_size=2))
@example([',', 'b",'], ("HTTP", False, [',', 'x",']), [])
def test_joined_ids_and_receivers_are_json_dumps(sids: list[str],
                                                 first: tuple[str, bool, list[str]],
                                                 more: list[tuple[str, bool, list[str]]]
                                                 ) -> None:
    """Ids with and without characters to escape; receivers of one method (joined around
    their addresses) and of several; one writer for every notification, as in a run."""
    w = _LineWriter()
    for method, copy, addresses in [first, *more]:
        m = (method + " ")[:-1] if copy else method  # equal, another object
        recs = tuple(sorted({Receiver(method if i % 2 else m, a)
                             for i, a in enumerate(addresses)}))
        note = Notification(3, ("//ObjectEvent",), tuple(sorted(sids)), recs, b"<e/>")
        assert w.notification(0, note) == _line(0, note)
    mixed = tuple(sorted({Receiver(m, a) for m, _, adr in [first, *more] for a in adr}))
    note = Notification(4, (), tuple(sids), mixed, '<e a="1">\\ é\n</e>'.encode())
    assert w.notification(1, note) == _line(1, note)


@pytest.mark.parametrize("all_events", [False, True])
def test_the_shipped_example_prints_json_dumps_of_the_api(all_events: bool,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The command's lines on examples/xml, byte for byte, against ``json.dumps`` of the
    API's notifications: the writer's joins change no byte of what a user reads."""
    from siftbus.xmlfilter import XmlEventFilter

    f = XmlEventFilter()
    f.subscribe_xml((EXAMPLES / "subs.xml").read_bytes(), default_method="cli",
                    sender="stdout")
    events = EXAMPLES / "events.xml"
    want = []
    for r in f.iter_results(events.read_bytes()):
        if not r.notifications and all_events:
            want.append(json.dumps({"message": 0, "event": r.event,
                                    "targets": list(r.match.targets), "subscriptions": [],
                                    "receivers": [], "xml": None}, ensure_ascii=False) + "\n")
        want.extend(_line(0, n) for n in r.notifications)
    assert sum(len(json.loads(x)["receivers"]) > 1 for x in want) >= 1  # a joined list
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    _json_lines(f, [events], all_events)
    assert out.getvalue() == "".join(want)
