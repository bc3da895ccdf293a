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


# ---- every decoder, fuzzed: a value or a WireError, nothing else ----------------------

from siftbus.errors import excerpt  # noqa: E402
from siftbus.wire.events import decode_events  # noqa: E402
from siftbus.wire.frames import (  # noqa: E402
    MAX_ERROR_MESSAGE,
    ErrorReply,
    decode_error,
    error_body,
)
from siftbus.wire.limits import Limits  # noqa: E402
from siftbus.wire.profiles import (  # noqa: E402
    check_profile,
    decode_profile_texts,
    decode_profiles,
)

# msgpack-able values shaped like bodies: small ints near the domains, short strings
# (also the schema's names), bytes, floats, nesting
_LEAVES = (st.none() | st.booleans() | st.integers(-3, 120) | st.integers(-2**63, 2**64 - 1)
           | st.sampled_from(["T", "O", "U", "a", "s", "x", "p", ""]) | st.text(max_size=4)
           | st.binary(max_size=24) | st.floats(allow_nan=False))
WIRE_VALUES = st.recursive(
    _LEAVES, lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.sampled_from(["t", "n", "k", "src", "seq", "ts", "at", "np", "p",
                                       "blocks", "events", "profiles", "texts", "ids",
                                       "corr", "message", "kind", "line", "field"]),
                      inner, max_size=6), max_leaves=30)


def _only_wire_errors(fn: object, *args: object, **kw: object) -> object:
    try:
        return fn(*args, **kw)  # type: ignore[operator]
    except WireError:
        return None


@settings(max_examples=400, deadline=None)
@given(WIRE_VALUES)
def test_fuzzed_bodies_through_every_structured_decoder(data: object) -> None:
    """Envelopes, event lists, blocks, batches and profiles: a value or a WireError."""
    for schema in (SCHEMA, ORD):
        _only_wire_errors(decode_envelope, data, schema)
        _only_wire_errors(decode_events, data, schema)
        _only_wire_errors(decode_profile, data, schema)
        _only_wire_errors(decode_profile, data, schema, None)
        _only_wire_errors(decode_profiles, data, schema)
        for notify in (False, True):
            _only_wire_errors(decode_block, data, schema, notify=notify)
            if isinstance(data, dict):
                got = _only_wire_errors(decode_batch, data, schema, notify=notify)
                for block, counts, pids in got or []:  # type: ignore[attr-defined]
                    assert len(block.envelopes()) == len(block)
                    assert len(pids) == (int(counts.sum()) if notify else 0)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(MsgType)), WIRE_VALUES, st.integers(0, 12))
def test_fuzzed_frames_decode_to_a_message_or_a_wire_error(t: MsgType, body: object,
                                                           cut: int) -> None:
    """Whole frames with arbitrary bodies, also cut short or with a byte changed."""
    raw = struct.pack(">IBB", 0, VERSION, int(t)) + msgpack.packb(body, use_bin_type=True)
    frame = struct.pack(">I", len(raw) - 4) + raw[4:]
    for data in (frame, frame[:len(frame) - cut], frame[:6] + bytes([cut]) + frame[7:]):
        dec = FrameDecoder(limits=Limits(max_string=8))
        try:
            for msg in dec.feed(data):
                assert isinstance(msg.body, dict) and msg.type is t
        except WireError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30) | st.sampled_from(PROFILES), max_size=4))
def test_fuzzed_profile_texts_give_profiles_or_a_siftbus_error(texts: list[str]) -> None:
    with contextlib.suppress(SiftbusError):
        for p in decode_profile_texts(texts, SCHEMA):
            assert check_profile(p) is p


@settings(max_examples=200, deadline=None)
@given(WIRE_VALUES)
def test_the_error_reply_decoder_never_raises(body: object) -> None:
    reply = decode_error(body)
    assert isinstance(reply, ErrorReply) and len(reply.message) <= MAX_ERROR_MESSAGE
    err = reply.to_error()
    assert err.kind == reply.kind and err.message == reply.message


def test_error_replies_round_trip_and_are_cut_to_an_excerpt() -> None:
    exc = WireError("x" * 5000, line=3, column=7, field="max_string")
    body = _wire(error_body(exc, corr=9))
    reply = decode_error(body)
    assert (reply.kind, reply.line, reply.column, reply.field, reply.corr) == (
        "WireError", 3, 7, "max_string", 9)
    assert len(reply.message) <= MAX_ERROR_MESSAGE and "… (5000 characters) …" in reply.message
    assert excerpt("short") == "short"
    # a message from a non-siftbus exception, longer than an error keeps: the reply the
    # client decodes and the error it raises say the same (they once kept 1000 and 360)
    long = decode_error(_wire(error_body(ValueError("z" * 900), corr=1)))
    assert long.to_error().message == long.message and "(900 characters)" in long.message
    odd = decode_error({"message": 5, "line": True, "column": "2", "field": 3})
    assert (odd.message, odd.line, odd.column, odd.field) == ("5", None, None, "3")


# ---- limits of one request (issue 13, item 2) ------------------------------------------


def test_a_string_over_max_string_is_refused_before_it_is_built() -> None:
    frame = encode(Message(MsgType.SUB, {"texts": ["x" * 2000]}))
    with pytest.raises(WireError, match="over the limit of 1000 bytes") as info:
        list(FrameDecoder(limits=Limits(max_string=1000)).feed(frame))
    assert info.value.field == "max_string"
    assert list(FrameDecoder(limits=Limits(max_string=3000)).feed(frame))


def test_profiles_conditions_and_text_have_limits() -> None:
    lim = Limits(max_profiles=3, max_conditions=5, max_profile_text=60)
    p = parse_profile("p: T(a in {1, 3, 5}, s in {\"x\", \"y\"})", SCHEMA)
    wire = encode_profile(p)
    assert decode_profiles([wire] * 3, SCHEMA, lim) == [p] * 3
    with pytest.raises(WireError, match="4 profiles in one request") as info:
        decode_profiles([wire] * 4, SCHEMA, lim)
    assert info.value.field == "max_profiles"
    big = parse_profile("p: T(a in {1, 3, 5}, s in {\"x\", \"y\", \"z\"})", SCHEMA)
    for data in (encode_profile(big), ["p", "", "T", [[0, [0] + [1, 1, 3, 3, 5, 5] * 2]]],
                 ["p", "", "T", [[3, [1, [str(i) for i in range(6)], "", []]]]]):
        with pytest.raises(WireError, match="over the limit of 5") as info:
            decode_profile(data, SCHEMA, lim)
        assert info.value.field == "max_conditions"
    assert decode_profile(encode_profile(big), SCHEMA, None) == big  # neighbours: unchecked
    with pytest.raises(WireError) as info:
        decode_profile_texts(["p: T(a = 1)", "q: T(s prefix \"" + "y" * 60 + "\")"],
                             SCHEMA, lim)
    assert info.value.field == "max_profile_text"


def test_a_lone_surrogate_is_refused_by_the_wire_decoder() -> None:
    """Issue 13: a profile holding "\\ud800" cannot be stored as UTF-8. Profile text is
    refused by the profile grammar (naming line and column); the structured form, which
    no grammar reads, by the wire decoder (naming the place)."""
    from siftbus.errors import ProfileSyntaxError
    from siftbus.wire.profiles import check_string

    with pytest.raises(ProfileSyntaxError, match="lone UTF-16 surrogate") as info:
        decode_profile_texts(['p: T(a = 1)', 'q: T(s in {"ok", "x\\ud800"})'], SCHEMA)
    assert info.value.source == "profile 2" and info.value.column is not None
    with pytest.raises(ProfileSyntaxError, match="surrogate"):
        decode_profile_texts(['q: T(s prefix "\\udfff")'], SCHEMA)
    with pytest.raises(WireError, match=r"lone surrogate U\+D800 at character 2") as winfo:
        check_string("x\ud800", "profile q")
    assert winfo.value.field == "string"
    ok = encode_profile(decode_profile_texts(['q: T(s = "ok")'], SCHEMA)[0])
    ok[3][0][1][1] = ["x\ud800"]
    with pytest.raises(WireError, match="lone surrogate"):
        decode_profile(ok, SCHEMA)
    assert decode_profile_texts(['q: T(s = "\\u00e9\\ud83d\\ude00")'], SCHEMA)[0].matches(
        Event.of(T, {"a": 1, "d": 0, "e": "X", "s": "\u00e9\U0001F600"}))


def test_limits_are_checked_when_made() -> None:
    from siftbus.errors import ConfigError

    assert Limits().replace(frame_timeout=0.5).frame_timeout == 0.5
    for bad in ({"max_frame": 0}, {"frame_timeout": -1}, {"max_string": True},
                {"max_buffered": 1000}):
        with pytest.raises(ConfigError):
            Limits(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown limit 'max_conection'"):
        Limits.from_mapping({"max_conection": 3})


# ---- the frame transport's reader against the incremental decoder (the reference) ----

import asyncio  # noqa: E402

from siftbus.wire.transport import READ_HIGH_WATER, FrameConnection  # noqa: E402


class FakeTransport:
    """Just enough of an asyncio transport to drive a FrameConnection by hand."""

    def __init__(self) -> None:
        self.paused = False
        self.closing = False
        self.out = bytearray()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.out += data

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    abort = close


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(MsgType)), WIRE_VALUES), max_size=8),
       st.lists(st.integers(1, 300), min_size=1, max_size=20), st.booleans())
def test_the_connection_reads_what_the_reference_decoder_reads(
        msgs: list[tuple[MsgType, object]], cuts: list[int], bad_tail: bool) -> None:
    """Frames cut into random chunks: the connection hands out exactly the messages of
    FrameDecoder, in order, then the same WireError (an oversized tail) or nothing."""
    data = b"".join(encode(Message(t, {"v": v})) for t, v in msgs)
    if bad_tail:
        data += struct.pack(">IBB", 5000, VERSION, 1)
    lim = Limits(max_frame=4000, max_buffered=8000)
    want: list[object] = []
    try:
        want.extend(FrameDecoder(limits=lim).feed(data))
    except WireError as exc:
        want.append(exc.field)

    async def run() -> list[object]:
        conn = FrameConnection(lim)
        conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        i = 0
        for c in cuts * (len(data) // max(sum(cuts), 1) + 1):
            conn.data_received(data[i:i + c])
            i += c
            if i >= len(data):
                break
        conn.eof_received()
        got: list[object] = []
        while True:
            try:
                got.append((await conn.read())[0])
            except WireError as exc:
                got.append(exc.field)
                break
            except ConnectionError:
                break
        done = [m for m in got if isinstance(m, Message)]
        used = sum(len(encode(m)) for m in done)
        if len(got) > len(done) and got[-1] != "max_frame":  # a whole frame refused
            t, v = msgs[len(done)]  # (a number beyond int64): its bytes were read
            used += len(encode(Message(t, {"v": v})))
        assert conn.counters.buffered == len(data) - used
        return got

    assert asyncio.run(run()) == want


def test_the_connection_stops_reading_a_peer_its_owner_does_not_keep_up_with() -> None:
    async def run() -> None:
        conn = FrameConnection(Limits())
        t = FakeTransport()
        conn.connection_made(t)  # type: ignore[arg-type]
        frame = encode(Message(MsgType.PING, {"pad": b"x" * 1000}))
        n = READ_HIGH_WATER // len(frame) + 2
        for _ in range(n):
            conn.data_received(frame)
        assert t.paused  # complete frames pile up: the socket is no longer read
        for _ in range(n):
            await conn.read()
        assert not t.paused and conn.counters.buffered == 0 and conn.frames_in == n
        conn.data_received(struct.pack(">I", 1 << 30))  # oversized: refused from the header
        assert t.paused
        with pytest.raises(WireError, match="exceeds the limit") as info:
            await conn.read()
        assert info.value.field == "max_frame"

    asyncio.run(run())


def test_a_half_sent_frame_times_out_and_idle_time_does_not() -> None:
    async def run() -> None:
        conn = FrameConnection(Limits(frame_timeout=0.2))
        conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        frame = encode(Message(MsgType.PING, {"corr": 1}))
        await asyncio.sleep(0.3)  # idle before a frame: fine
        conn.data_received(frame[:3])
        await asyncio.sleep(0.1)
        conn.data_received(frame[3:] + frame[:5])  # completes one, starts the next
        assert (await conn.read())[0].body == {"corr": 1}
        await asyncio.sleep(0.15)  # the second frame's own clock: not expired yet
        conn.data_received(frame[5:7])
        with pytest.raises(WireError, match=r"not completed within 0.2 s \(7 of 13 bytes") \
                as info:
            await asyncio.wait_for(conn.read(), 2)
        assert info.value.field == "frame_timeout"

    asyncio.run(run())
