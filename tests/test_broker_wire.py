"""The wire codec alone: frames, bodies, profiles and events; fuzzed decoders."""

from __future__ import annotations

import contextlib
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.broker.wire import (
    VERSION,
    Envelope,
    FrameDecoder,
    Message,
    MsgType,
    decode_envelope,
    decode_payload,
    decode_profile,
    encode,
    encode_envelope,
    encode_profile,
)
from siftbus.errors import SiftbusError, WireError
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, parse_schema

SCHEMA = parse_schema("""
[T]
a = "int[0,99]"
d = "decimal[-5,5,1]"
e = "enum[X,Y,Z]"
s = "string"
""")
T = SCHEMA["T"]


def test_roundtrip_every_type() -> None:
    for t in MsgType:
        msg = Message(t, {"corr": 3, "x": [1, "a", None, 2.5]})
        frame = encode(msg)
        assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
        assert frame[4] == VERSION and frame[5] == int(t)
        assert decode_payload(frame[4:]) == msg


def test_incremental_decoder_splits_and_joins() -> None:
    msgs = [Message(MsgType.PING, {"corr": i}) for i in range(5)]
    data = b"".join(encode(m) for m in msgs)
    dec = FrameDecoder()
    got = []
    for i in range(0, len(data), 3):
        got.extend(dec.feed(data[i:i + 3]))
    assert got == msgs and dec.pending == 0


def test_oversized_unknown_and_wrong_version_frames() -> None:
    with pytest.raises(WireError, match="exceeds"):
        list(FrameDecoder(limit=10).feed(encode(Message(MsgType.PUB, {"events": [1] * 20}))))
    with pytest.raises(WireError, match="unknown message type"):
        decode_payload(bytes([VERSION, 99]) + msgpack.packb({}))
    with pytest.raises(WireError, match="version"):
        decode_payload(bytes([7, 1]) + msgpack.packb({}))
    with pytest.raises(WireError, match="map"):
        decode_payload(bytes([VERSION, 1]) + msgpack.packb([1, 2]))
    with pytest.raises(WireError, match="msgpack"):
        decode_payload(bytes([VERSION, 1, 0xC1]))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_fuzzed_frames_give_a_message_or_a_wire_error(data: bytes) -> None:
    with contextlib.suppress(WireError):
        list(FrameDecoder(limit=1000).feed(data))


PROFILES = [
    'p: T(a = 5)', 'p: T(a in [3, 9], a != 5, e = Y)', 'p@sub: T(d > 1.5, s prefix "ab")',
    'p: T(s in {"x", "y"})', 'p: T(s != "q")', 'p: T(a exists)', 'p: T(e in {X, Z})',
]


@pytest.mark.parametrize("text", PROFILES)
def test_profile_roundtrip(text: str) -> None:
    p = parse_profile(text, SCHEMA)
    data = msgpack.unpackb(msgpack.packb(encode_profile(p)))
    assert decode_profile(data, SCHEMA) == p


def test_envelope_roundtrip_and_checks() -> None:
    ev = Event.of(T, {"a": 1, "d": 2.5, "e": "Z", "s": "hi"})
    env = Envelope(ev, "B1/c", 7, 12.5)
    assert decode_envelope(msgpack.unpackb(msgpack.packb(encode_envelope(env))), SCHEMA) == env
    bad = [["T", [100, 0, 0, "x"], "s", 1, 0.0], ["T", [1, 0, 0], "s", 1, 0.0],
           ["Q", [1], "s", 1, 0.0], ["T", [1, 0, 5, "x"], "s", 1, 0.0],
           ["T", [1, 0, 0, 3], "s", 1, 0.0], ["T", [1, 0, 0, "x"], 1, 1, 0.0], "junk"]
    for b in bad:
        with pytest.raises(WireError):
            decode_envelope(b, SCHEMA)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-3, 120) | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=5), max_leaves=20))
def test_fuzzed_profiles_and_events_give_a_value_or_an_error(data: object) -> None:
    for fn in (decode_profile, decode_envelope):
        with contextlib.suppress(SiftbusError):
            fn(data, SCHEMA)
