"""Extended events and their profiles through the frame codec (issue 31): absent values,
arrays, nested paths and keys beyond int64 come back exactly, in envelopes and blocks;
a bad key is refused naming its attribute."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import WireError
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, event_from_dict, parse_schema
from siftbus.wire.events import (
    Envelope,
    decode_batch,
    decode_events,
    encode_envelope_blocks,
    encode_events,
)
from siftbus.wire.frames import Message, MsgType, decode_payload, encode
from siftbus.wire.profiles import decode_profile, encode_profile

SCHEMA = parse_schema("""
[E]
n = "int"
f = "optional float"
ok = "optional bool"
at = "optional timestamp"
ip = "optional ip"
tags = "optional array<string>"
nums = "optional array<int[0,9]>"
[E.a.b]
s = "optional string"
""")

IPS = ["0.0.0.0", "::", "::1", "10.1.2.3", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]
TIMES = ["0001-01-01T00:00:00Z", "1677-09-21T00:12:43Z", "2024-05-01T12:00:00.5+02:00",
         "9999-12-31T23:59:59.999999999Z"]


@st.composite
def events(draw: st.DrawFn) -> Event:
    d: dict[str, Any] = {"type": "E", "n": draw(st.integers(-(1 << 63), (1 << 63) - 1))}
    opt = {"f": st.floats(allow_nan=False, allow_infinity=False),
           "ok": st.booleans(), "at": st.sampled_from(TIMES), "ip": st.sampled_from(IPS),
           "tags": st.lists(st.text(max_size=3), min_size=1, max_size=3),
           "nums": st.lists(st.integers(0, 9), min_size=1, max_size=3)}
    for k, strategy in opt.items():
        if draw(st.booleans()):
            d[k] = draw(strategy)
    if draw(st.booleans()):
        d["a"] = {"b": {"s": draw(st.text(max_size=4))}}
    return event_from_dict(d, SCHEMA)


def _frame(body: dict[str, Any]) -> dict[str, Any]:
    data = encode(Message(MsgType.PUB, body))
    return decode_payload(data[4:]).body


@settings(max_examples=60, deadline=None)
@given(st.lists(events(), min_size=1, max_size=5))
def test_extended_events_round_trip_exactly(evs: list[Event]) -> None:
    envs = [Envelope(e, "pub", i, 1.5) for i, e in enumerate(evs)]
    back = decode_events(_frame({"events": encode_events(envs)})["events"], SCHEMA)
    assert [b.event for b in back] == evs
    blocks = decode_batch(_frame({"blocks": encode_envelope_blocks(envs)}), SCHEMA)
    assert [e for b, _, _ in blocks for e in b.events()] == evs


def test_profiles_with_bounds_beyond_int64_travel() -> None:
    for text in ['p: E(ip cidr "ffff::/16")', 'p: E(at < "1000-01-01T00:00:00Z")',
                 'p: E(ip != "::1", n > -5)', 'p: E(tags suffix "x" or ip exists)']:
        p = parse_profile(text, SCHEMA)
        body = _frame({"profiles": [encode_profile(p)]})
        assert decode_profile(body["profiles"][0], SCHEMA) == p


@pytest.mark.parametrize(("keys", "message"), [
    ([None, None, None, None, None, None, None, None], "E.n is required, not absent"),
    ([1, None, None, None, None, [], None, None], "E.tags must be a non-empty array"),
    ([1, None, None, None, None, None, [3, 10], None], "E.nums: key 10 is outside"),
    ([1, None, None, None, b"\x01" * 18, None, None, None], "E.ip: key"),
    ([1, None, 2, None, None, None, None, None], "E.ok: key 2 is outside bool"),
    ([1, None, None, None, None, None, None, 5], "E.a.b.s must be a string"),
    ([1, None], "E event needs 8 keys"),
])
def test_bad_extended_keys_are_refused_by_name(keys: list[Any], message: str) -> None:
    with pytest.raises(WireError, match=message.replace(".", r"\.")):
        decode_events([["E", keys, "pub", 0, 0.0]], SCHEMA)
