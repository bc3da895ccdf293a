"""Structured events and envelopes: every malformed event is refused with an EventError
that names what is wrong; the decoders' only outcomes are a value or a SiftbusError
(hypothesis); valid events survive their JSON and msgpack forms."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel import StructuredEvent
from siftbus.channel.envelope import Envelope
from siftbus.errors import EventError, SiftbusError

FIXED = {"event_type": {"domain_name": "d", "type_name": "t"}, "event_name": "e"}


@pytest.mark.parametrize("data, words", [
    (5, "a structured event must be an object, not a number"),
    ([], "a structured event must be an object, not an array"),
    ({"header": 5}, "header must be an object, not a number"),
    ({"header": {}}, "header lacks fixed_header"),
    ({"header": {"fixed_header": "x"}}, "header.fixed_header must be an object, not a string"),
    ({"header": {"fixed_header": {}}}, "header.fixed_header lacks event_type"),
    ({"header": {"fixed_header": {"event_type": 1}}},
     "header.fixed_header.event_type must be an object"),
    ({"header": {"fixed_header": {"event_type": {"type_name": "t"}}}},
     "header.fixed_header.event_type lacks domain_name"),
    ({"header": {"fixed_header": {"event_type": {"domain_name": "d"}}}},
     "header.fixed_header.event_type lacks type_name"),
    ({"header": {"fixed_header": {"event_type": {"domain_name": 1, "type_name": "t"}}}},
     "header.fixed_header.event_type.domain_name must be a string, not a number"),
    ({"header": {"fixed_header": {**FIXED, "event_name": None}}},
     "header.fixed_header.event_name must be a string, not null"),
    ({"header": {"fixed_header": {**FIXED, "extra": 1}}},
     "header.fixed_header has an unknown field 'extra'"),
    ({"header": {"fixed_header": FIXED, "variable_header": 3}},
     "variable_header must be an object or a list of name/value pairs, not a number"),
    ({"header": {"fixed_header": FIXED}, "type_name": "t"},
     "give either header or the flat fields, not both"),
    ({"type_name": ["t"]}, "type_name must be a string, not an array"),
    ({"filterable_data": [1]}, "filterable_data[0] needs a name and a value"),
    ({"filterable_data": [{"name": 2, "value": 1}]},
     "filterable_data[0]: the name must be a string, not a number"),
    ({"filterable_data": [["a", 1], ["b"]]}, "filterable_data[1] needs a name and a value"),
    ({"filterable_data": True}, "filterable_data must be an object or a list"),
    ({"filterable_data": {"p": {"@struct": {"members": 1}}}},
     "@struct members must be an object (in filterable_data.p)"),
    ({"remainder_of_body": {"@struct": {"members": "m"}}},
     "@struct members must be an object (in remainder_of_body)"),
    ({"bogus": 1}, "unknown structured-event field(s) bogus"),
])
def test_malformed_events_name_what_is_wrong(data: Any, words: str) -> None:
    with pytest.raises(EventError) as info:
        StructuredEvent.from_dict(data)
    assert words in str(info.value)
    assert "object is not" not in str(info.value)  # never a Python internals message


@pytest.mark.parametrize("text, words", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    ('{"remainder_of_body": ' + "7" * 5000 + "}", "digits"),
    ('{"header": ', "invalid JSON"),
])
def test_bad_json_gives_an_event_error(text: str, words: str) -> None:
    with pytest.raises(EventError) as info:
        StructuredEvent.from_json(text)
    assert words in str(info.value) and len(str(info.value)) < 200


def test_deep_values_are_refused_not_crashed() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    with pytest.raises(EventError, match="nests deeper than 100 levels"):
        StructuredEvent.from_dict({"remainder_of_body": deep})
    with pytest.raises(EventError):
        Envelope.from_wire({"structured": {"filterable_data": {"x": deep}}})


def test_a_long_unknown_field_is_cut_in_the_message() -> None:
    with pytest.raises(EventError) as info:
        StructuredEvent.from_dict({"x" * 100_000: 1})
    assert len(str(info.value)) < 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["header", "fixed_header", "event_type", "domain_name", "type_name",
                         "event_name", "variable_header", "filterable_data", "name", "value",
                         "remainder_of_body", "@struct", "@union", "members", "any",
                         "structured", "d", "x"]), inner, max_size=4),
    max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_from_dict_gives_an_event_or_an_event_error(data: Any) -> None:
    try:
        e = StructuredEvent.from_dict(data)
    except EventError:
        return
    assert StructuredEvent.from_dict(e.to_dict()) == e


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_envelope_from_wire_gives_an_envelope_or_a_siftbus_error(data: Any) -> None:
    if not isinstance(data, dict):
        data = {"structured": data}
    try:
        env = Envelope.from_wire(data)
        packed = env.packed()  # an integer beyond 64 bits has no wire form: EventError
    except SiftbusError:
        return
    assert Envelope.from_packed(packed).to_wire() == env.to_wire()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_msgpack_decoders_give_a_value_or_a_siftbus_error(data: bytes) -> None:
    for decode in (StructuredEvent.from_msgpack, Envelope.from_packed):
        with contextlib.suppress(SiftbusError):
            decode(data)


def test_valid_forms_round_trip() -> None:
    e = StructuredEvent.of("Telecom", "Alarm", "down", variable_header={"Priority": 3},
                           filterable_data={"severity": 4, "site": "b3"},
                           remainder_of_body={"port": [1, 2]})
    assert StructuredEvent.from_json(e.to_json()) == e
    assert StructuredEvent.from_msgpack(e.to_msgpack()) == e
    flat = {"domain_name": "Telecom", "type_name": "Alarm", "event_name": "down",
            "variable_header": {"Priority": 3}, "filterable_data": [["severity", 4],
                                                                     ["site", "b3"]],
            "remainder_of_body": {"port": [1, 2]}}
    assert StructuredEvent.from_dict(flat) == e
    assert Envelope.from_packed(msgpack.packb({"structured": json.loads(e.to_json())})
                                ).structured == e


def test_an_event_without_a_wire_form_is_refused_before_it_is_queued(tmp_path: Any) -> None:
    from siftbus.channel import EventChannelFactory
    from siftbus.channel import qos as Q

    huge = StructuredEvent.of("d", "t", "e", filterable_data={"n": 2**70})
    with pytest.raises(EventError, match="no wire form"):
        Envelope.of_structured(huge).packed()
    persistent = {Q.CONNECTION_RELIABILITY: Q.PERSISTENT, Q.EVENT_RELIABILITY: Q.PERSISTENT}
    with EventChannelFactory(tmp_path / "s.db", dispatch=False) as f:
        ch, _ = f.create_channel(persistent)
        pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier("STRUCTURED_EVENT")
        pull.connect_structured_pull_consumer()
        sup, _ = ch.default_supplier_admin.obtain_notification_push_consumer(
            "SEQUENCE_EVENT")
        sup.connect_sequence_push_supplier()
        ok = StructuredEvent.of("d", "t", "ok")
        with pytest.raises(EventError):
            sup.push_structured_events([ok, huge])  # all or nothing
        assert ch.stats().queued == 0 and pull.try_pull_structured_event() == (None, False)
        sup.push_structured_events([ok])
        assert f.store is not None and f.store.event_count() == 1
