"""CloudEvents 1.0 conformance: what siftbus writes is read back by the ``cloudevents``
SDK's own parser (its JSON format and HTTP binding, not ours) with the attributes the
rule promises; what the SDK writes (structured, batch, binary) siftbus reads as the same
event; the mapping rule refuses what it must, with a SiftbusError."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime

import pytest
from cloudevents.core.bindings.http import to_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_strategies import SCHEMA
from siftbus.errors import EventError, SiftbusError
from siftbus.model import Event, parse_schema
from siftbus.wire.cloudevents import (
    event_lines,
    from_notification,
    notification_bytes,
    parse_batch,
    parse_binary,
    parse_line,
    parse_structured,
)

FORMAT = JSONFormat()
DECIMALS = parse_schema('[R]\nv = "decimal[-40,60,1]"\nroom = "int[1,300]"\n')


@st.composite
def events(draw: st.DrawFn) -> Event:
    if draw(st.booleans()):
        return Event.of(SCHEMA["U"], {"x": draw(st.integers(0, 3))})
    return Event.of(SCHEMA["T"], {"a": draw(st.integers(0, 7)),
                                  "b": draw(st.sampled_from(["LO", "MID", "HI"])),
                                  "s": draw(st.text(max_size=5))})


@settings(max_examples=60, deadline=None)
@given(events(), st.integers(0, 2**40), st.floats(0, 2e9), st.integers(1, 10**6))
def test_the_sdk_reads_what_siftbus_writes(ev: Event, seq: int, ts: float, n: int) -> None:
    ce = FORMAT.read(None, notification_bytes(ev, src="B1/c1", seq=seq, ts=ts,
                                              subscription="alice/warm", number=n))
    assert ce.get_specversion() == "1.0"
    assert ce.get_type() == ev.type_name
    assert ce.get_source() == "/siftbus/B1/c1" and ce.get_id() == f"B1/c1/{seq}"
    assert ce.get_subject() == "alice/warm" and ce.get_extension("siftbusn") == n
    t = ce.get_time()
    assert t is not None and abs(t.timestamp() - ts) < 1e-3
    assert {"type": ce.get_type(), **ce.get_data()} == json.loads(ev.to_json())  # type: ignore[dict-item]
    # and back: the SDK's CloudEvent is the same event by siftbus's rule
    assert parse_structured(FORMAT.write(ce), SCHEMA) == {
        k: v for k, v in json.loads(ev.to_json()).items()}


def test_the_gateway_notification_object_as_a_cloudevent() -> None:
    msg = {"type": "notification", "subscription": "hot", "src": "B1/c3", "seq": 7,
           "ts": 1764000000.25, "n": 41, "event": {"type": "U", "x": 2}}
    ce = FORMAT.read(None, json.dumps(from_notification(msg)).encode())
    assert (ce.get_type(), ce.get_subject(), ce.get_id()) == ("U", "hot", "B1/c3/7")
    assert ce.get_extension("siftbusn") == 41 and ce.get_data() == {"x": 2}
    assert ce.get_time() == datetime.fromtimestamp(1764000000.25, UTC)
    other = {"type": "dropped", "count": 1}
    assert from_notification(other) is other


def sdk_event(ce_type: str, data: object, **attrs: object) -> CloudEvent:
    return CloudEvent({"type": ce_type, "source": "/test", "id": "1", "specversion": "1.0",
                       **attrs}, data)  # type: ignore[arg-type]


def test_structured_batch_and_binary_modes_written_by_the_sdk() -> None:
    one = sdk_event("com.example.R", {"v": 21.5, "room": 12},
                    datacontenttype="application/json")
    want = parse_structured(FORMAT.write(one), DECIMALS)
    assert str(want["v"]) == "21.5" and want["type"] == "R"  # an exact decimal
    msg = to_binary(one, FORMAT)
    assert parse_binary(msg.headers, msg.body, DECIMALS) == want
    batch = b"[" + FORMAT.write(one) + b"," + FORMAT.write(sdk_event("Nope", {})) + b"]"
    got = parse_batch(batch, DECIMALS)
    assert got[0] == want and isinstance(got[1], EventError)
    assert "names no event type" in str(got[1])


@pytest.mark.parametrize(("text", "message"), [
    ('{"specversion": "1.0", "type": "R", "source": "/x", "id": "1", "data": [1]}',
     "JSON object of attributes"),
    ('{"specversion": "1.0", "type": "R", "source": "/x", "id": "1", '
     '"data": {"type": "S", "v": 1, "room": 2}}', "is not the CloudEvents type"),
    ('{"specversion": "1.0", "type": "R", "id": "1", "data": {}}', "not a CloudEvent"),
    ('{"specversion": "1.0", "type": "R", "source": "/x", "id": "1", '
     '"data": {"v": 99, "room": 2}}', "R.v"),
    ("not json", "not a CloudEvent"),
])
def test_bad_cloudevents_are_siftbus_errors_with_their_line(text: str, message: str) -> None:
    with pytest.raises(SiftbusError, match=message) as info:
        parse_line(text, DECIMALS, source="ce.jsonl", lineno=3)
    assert info.value.line == 3 and info.value.source == "ce.jsonl"


def test_event_lines_keep_blank_lines_and_numbers() -> None:
    ce = FORMAT.write(sdk_event("R", {"v": 1.5, "room": 3})).decode()
    assert list(event_lines([ce, "", ce], DECIMALS)) == \
        ['{"type": "R", "v": 1.5, "room": 3}', "", '{"type": "R", "v": 1.5, "room": 3}']


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c,
                                                                           max_size=3),
                       max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), JSONISH.map(json.dumps),
                 st.dictionaries(st.sampled_from(["specversion", "type", "source", "id",
                                                  "data", "data_base64", "time",
                                                  "datacontenttype"]), JSONISH)
                 .map(json.dumps),
                 st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)))
def test_the_decoders_give_an_event_or_a_siftbus_error(text: str) -> None:
    for decode in (lambda: parse_structured(text, SCHEMA),
                   lambda: parse_batch(text, SCHEMA),
                   lambda: parse_binary({"ce-specversion": "1.0", "ce-type": "T",
                                         "ce-source": "/x", "ce-id": "1",
                                         "content-type": "application/json"},
                                        text.encode(), SCHEMA),
                   lambda: parse_line(text, SCHEMA)):
        with contextlib.suppress(SiftbusError):
            decode()
