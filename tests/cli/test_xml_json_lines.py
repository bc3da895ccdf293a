"""The JSON-lines writer of ``siftbus xml-filter`` against ``json.dumps`` (its reference):
any ids, targets, receivers and event text give the same line, byte for byte."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.cli.xmlfilter import _LineWriter
from siftbus.xmlfilter.output import Notification
from siftbus.xmlfilter.subscription import Receiver

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
receivers = st.builds(Receiver, text, text)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.lists(text, max_size=3),
       st.lists(text, max_size=4), st.lists(receivers, max_size=3), text)
def test_a_line_is_json_dumps_of_the_notification(msg: int, event: int, targets: list[str],
                                                  subs: list[str], recs: list[Receiver],
                                                  xml: str) -> None:
    w = _LineWriter()
    note = Notification(event, tuple(targets), tuple(subs), tuple(recs), xml.encode())
    want = json.dumps({"message": msg, **note.to_json_dict()}, ensure_ascii=False) + "\n"
    assert w.notification(msg, note) == want
    assert w.notification(msg, note) == want  # the lists from the cache
    unmatched = json.dumps({"message": msg, "event": event, "targets": targets,
                            "subscriptions": [], "receivers": [], "xml": None},
                           ensure_ascii=False) + "\n"
    assert w.unmatched(msg, event, tuple(targets)) == unmatched
