"""The wire codec alone: frames, bodies, profiles and events; fuzzed decoders."""

from __future__ import annotations

import contextlib
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError, WireError
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, parse_schema
from siftbus.wire.events import (
    Block,
    Envelope,
    blocks_of_envelopes,
    decode_batch,
    decode_block,
    decode_envelope,
    encode_block,
    encode_envelope,
    encode_envelope_blocks,
    in_order,
    split_block,
)
from siftbus.wire.frames import VERSION, FrameDecoder, Message, MsgType, decode_payload, encode
from siftbus.wire.profiles import decode_profile, encode_profile

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


# ---- event blocks (columnar PUB / NOTIFY bodies) ------------------------------------

ORD = parse_schema('[O]\nx = "int[0,999]"\ny = "enum[A,B]"\nz = "decimal[0,10,2]"\n')


def _ordered_events(n: int) -> list[Event]:
    et = ORD["O"]
    return [Event(et, (i * 7 % 1000, i % 2, i * 13 % 1001)) for i in range(n)]


def _wire(d: object) -> object:
    return msgpack.unpackb(msgpack.packb(d, use_bin_type=True), raw=False)


@pytest.mark.parametrize("schema, evs", [
    (ORD, _ordered_events(9)),
    (SCHEMA, [Event.of(T, {"a": i, "d": 0.5, "e": "Y", "s": f"w{i}"}) for i in range(5)]),
])
def test_block_roundtrip_for_ordered_and_string_types(schema: object, evs: list[Event]
                                                      ) -> None:
    envs = [Envelope(e, "B0/c" if i % 3 else "B1/d", 10 + i, 100.0 + i / 4)
            for i, e in enumerate(evs)]
    (block,) = blocks_of_envelopes(envs)
    assert block.envelopes() == envs
    got, counts, pids = decode_block(_wire(encode_block(block)), schema)  # type: ignore[arg-type]
    assert got.envelopes() == envs and len(counts) == 0 and pids == []
    rows = np.array([1, 2, 4])
    assert got.take(rows).envelopes() == [envs[i] for i in rows]
    counts = np.array([0, 2, 1] + [1] * (len(evs) - 3), np.int32)
    ids = [f"p{i}" for i in range(int(counts.sum()))]
    d = _wire(encode_block(block, counts, ids))
    got, c2, p2 = decode_block(d, schema, notify=True)  # type: ignore[arg-type]
    assert got.envelopes() == envs and c2.tolist() == counts.tolist() and p2 == ids
    if len(evs) > 5:  # positions travel with the rows they belong to
        d = {**d, "at": np.arange(len(evs), dtype="<i4")[::-1].tobytes()}  # type: ignore[dict-item]
    a, b = split_block(d)  # type: ignore[arg-type]
    ga, ca, pa = decode_block(a, schema, notify=True)  # type: ignore[arg-type]
    gb, cb, pb = decode_block(b, schema, notify=True)  # type: ignore[arg-type]
    assert ga.envelopes() + gb.envelopes() == envs
    assert ca.tolist() + cb.tolist() == counts.tolist() and pa + pb == ids
    if len(evs) > 5:
        assert ga.at.tolist() + gb.at.tolist() == list(range(len(evs)))[::-1]  # type: ignore[union-attr]


def test_batch_keeps_the_order_of_mixed_types_and_accepts_the_envelope_form() -> None:
    u = parse_schema('[U]\nx = "int[0,9]"\n[V]\nw = "string"\n')
    evs = [Event(u["U"], (1,)), Event(u["U"], (2,)), Event(u["V"], ("a",)),
           Event(u["U"], (3,))]
    envs = [Envelope(e, "s", i, 1.5) for i, e in enumerate(evs)]
    body = _wire({"blocks": encode_envelope_blocks(envs)})
    batch = decode_batch(body, u)  # type: ignore[arg-type]
    assert [len(b) for b, _, _ in batch] == [3, 1]  # one block per type, with positions
    assert [b.at.tolist() for b, _, _ in batch if b.at is not None] == [[0, 1, 3], [2]]
    assert [e for b, _, _ in batch for e in b.envelopes()] == [envs[i] for i in (0, 1, 3, 2)]
    legacy = decode_batch({"events": [encode_envelope(e) for e in envs]}, u)
    assert [e for b, _, _ in legacy for e in b.envelopes()] == [envs[i] for i in (0, 1, 3, 2)]
    # a NOTIFY of such blocks comes out in publication order, ids with their rows
    notify = [encode_block(b, np.ones(len(b), np.int32), [f"p{s}" for s in b.seq.tolist()])
              for b, _, _ in batch]
    rows = in_order(decode_batch(_wire({"blocks": notify}), u, notify=True))  # type: ignore[arg-type]
    assert [(r[0], r[2], r[4]) for r in rows] == [(e, i, [f"p{i}"]) for i, e in enumerate(evs)]
    # without positions: block after block
    plain = [encode_block(Block.of_events([e], "s", np.array([i]), np.array([0.0])),
                          np.array([1], np.int32), ["q"]) for i, e in enumerate(evs)]
    rows = in_order(decode_batch(_wire({"blocks": plain[::-1]}), u, notify=True))  # type: ignore[arg-type]
    assert [r[2] for r in rows] == [3, 2, 1, 0]
    with pytest.raises(WireError, match="needs 'blocks'"):
        decode_batch({"events": []}, u, notify=True)
    with pytest.raises(WireError, match="lacks field 'events'"):
        decode_batch({}, u)


def test_bad_blocks_are_wire_errors_naming_the_problem() -> None:
    good = encode_block(blocks_of_envelopes(
        [Envelope(e, "s", i, 0.0) for i, e in enumerate(_ordered_events(3))])[0],
        np.array([1, 0, 1], np.int32), ["p", "q"])
    keys = np.frombuffer(good["k"], "<i8").copy()
    keys[4] = 5  # y (enum of 2) of row 1
    cases = {
        "unknown event type": {"t": "Q"},
        "row count": {"n": -1},
        "int64 values": {"k": good["k"][:-8]},
        "O.y: key 5 is outside": {"k": keys.tobytes()},
        "'src'": {"src": ["a"]},
        "'seq' must be 3 x 8": {"seq": b"\0" * 8},
        "'ts' must be": {"ts": [0.0, 0.0, 0.0]},
        "'p'": {"p": ["p"]},
        "'np' must be": {"np": b""},
        "'p': np.i. profile ids": {"np": np.array([2**31 - 1, 2**31 - 1, 2], "<i4").tobytes()},
        "'at' must be 3 x 4": {"at": b"\0" * 8},
    }
    for message, change in cases.items():
        with pytest.raises(WireError, match=message):
            decode_block({**good, **change}, ORD, notify=True)
    for junk in ("junk", {"blocks": 3}):
        with pytest.raises(WireError):
            decode_batch(junk if isinstance(junk, dict) else {"blocks": [junk]}, ORD)
    with pytest.raises(WireError, match="list of 2 rows"):
        decode_block({"t": "T", "n": 2, "k": [[1, 0, 0, "x"]], "src": "s",
                      "seq": b"\0" * 16, "ts": b"\0" * 16}, SCHEMA)
    with pytest.raises(WireError, match="outside"):
        decode_block({"t": "T", "n": 1, "k": [[100, 0, 0, "x"]], "src": "s",
                      "seq": b"\0" * 8, "ts": b"\0" * 8}, SCHEMA)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "t": st.sampled_from(["O", "T", "Q", 3]), "n": st.integers(-1, 3) | st.booleans(),
    "k": st.binary(max_size=80) | st.lists(st.lists(st.integers(-1, 3) | st.text(max_size=2),
                                                    max_size=5), max_size=3),
    "src": st.text(max_size=2) | st.lists(st.text(max_size=2), max_size=3),
    "seq": st.binary(max_size=24), "ts": st.binary(max_size=24),
    "np": st.binary(max_size=12), "p": st.lists(st.text(max_size=2), max_size=4),
    "at": st.binary(max_size=12)}))
def test_fuzzed_blocks_give_a_block_or_an_error(d: dict[str, object]) -> None:
    for schema in (ORD, SCHEMA):
        for notify in (False, True):
            with contextlib.suppress(SiftbusError):
                block, counts, pids = decode_block(d, schema, notify=notify)
                assert len(block.envelopes()) == len(block) == d["n"]
                assert len(pids) == int(counts.sum())
