"""Every numeric field of every frame a client sends, at the boundaries of its range
(issue 30: a HELLO with a session ``ack`` of 2**64-1 got no answer for 11 s, logged
``OverflowError`` at two brokers and left a phantom client holding the session id).

The frames are those the client library really sends (recorded), each numeric leaf set
to a boundary value. The decoder either gives a frame whose every integer fits 64 bits
or one :class:`WireError`; a broker answers each such frame with a normal answer or one
ERROR, promptly, logs no error, and leaves nothing behind: the session id and the name
can be had again at once."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.broker.server import read_frame
from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.errors import WireError
from siftbus.model import Event
from siftbus.wire.frames import INT64_MAX, Message, MsgType, decode_payload, encode

from .mobility import T, close_all, start_tree

BOUNDS: list[int | float] = [
    -(2**63), -(2**63) + 1, -(2**31) - 1, -1, 0, 1, 2**31 - 1, 2**31, 2**32, 2**53,
    2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1,
    math.nan, math.inf, -math.inf, -0.0, 1e308, -1e308, 5e-324]
"""Boundary values: of int32, int64, uint64, the exact doubles, and odd floats."""

EDGES: list[int | float] = [2**63 - 1, 2**63, 2**64 - 1, -(2**63)]
"""The edges of the 64-bit ranges, drawn half of the time."""

HELLO = {"role": "client", "corr": 0, "name": "h", "session": {
    "id": "h", "ack": 3, "clean": False, "epoch": 2, "tag": 1, "from": "B1",
    "limits": {"max_count": 50, "max_bytes": 4096, "max_age": 60.5, "expiry": 120.5},
    "profiles": [["f", "h", "T", [[0, [[1, 5]]]]]],
    "adverts": [["a", "h", "T", [[1, [[0, 9]]]]]]}}
"""A move's HELLO (epoch, the old broker, the profiles and advertisements it names)."""
HELLOS = [HELLO,
          {"role": "client", "corr": 0, "session": {"id": "h", "ack": 3}},  # only the id
          {"role": "client", "corr": 0, "session": {"id": "h", "ack": 3, "epoch": 1,
                                                    "tag": 1}}]  # a reconnect


async def recorded_frames(port: int) -> list[Message]:
    """What a session client sends doing a bit of everything (its frames after HELLO)."""
    c = await Client.connect(port=port, session=SessionState("rec", auto_ack=False))
    frames: list[Message] = []
    write = c._write

    def record(msg: Message) -> None:
        frames.append(Message(msg.type, dict(msg.body)))
        write(msg)

    c._write = record  # type: ignore[method-assign]
    await c.subscribe("f: T(a in [3, 40], b > 7)")
    await c.advertise("T(a < 50)", id="ad")
    await c.publish_batch([Event(T, (1, 2)), Event(T, (3, 4))], ack=True)
    await c.ping()
    await c.ack(1)
    await c.call("broker", "stats")
    await c.retain("T(a in [1, 4])", id="r1", ttl=60.0)
    await c.subscribe_retained("T(a < 9)", id="rs")
    await c.unsubscribe_retained("rs")
    await c.withdraw("r1")
    await c.unadvertise("ad")
    await c.unsubscribe("f")
    await c.close()
    return frames


def leaves(body: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the numeric leaves of a body (ints and floats; not bools or bytes)."""
    if isinstance(body, dict):
        return [p for k, v in body.items() for p in leaves(v, (*path, k))]
    if isinstance(body, list):
        return [p for i, v in enumerate(body) for p in leaves(v, (*path, i))]
    if isinstance(body, int | float) and not isinstance(body, bool):
        return [path]
    return []


def mutated(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(body, dict):
        return {**body, head: mutated(body[head], rest, value)}
    out = list(body)
    out[head] = mutated(body[head], rest, value)
    return out


TEMPLATES: list[Message] = []


@pytest.fixture(scope="module")
def templates() -> list[Message]:
    async def record() -> list[Message]:
        servers = await start_tree("acyclic", names=["B0"], edges=[])
        try:
            return await recorded_frames(servers["B0"].port)
        finally:
            await close_all(servers)

    if not TEMPLATES:
        TEMPLATES.extend(Message(MsgType.HELLO, h) for h in HELLOS)
        TEMPLATES.extend(asyncio.run(record()))
    kinds = {m.type for m in TEMPLATES}
    assert set(KINDS) <= kinds, kinds
    return TEMPLATES


KINDS = [MsgType.HELLO, MsgType.SUB, MsgType.UNSUB, MsgType.ADV, MsgType.UNADV,
         MsgType.PUB, MsgType.PING, MsgType.SACK, MsgType.CALL, MsgType.TSUB,
         MsgType.TUNSUB, MsgType.TPUB]
"""Every kind of frame a client sends."""


def cases(templates: list[Message]) -> list[tuple[int, tuple[Any, ...]]]:
    return [(i, p) for i, m in enumerate(templates) for p in leaves(m.body)]


def test_every_frame_decodes_to_64_bit_numbers_or_one_wire_error(
        templates: list[Message]) -> None:
    """Exhaustive: every numeric leaf of every recorded frame, every boundary value."""
    for i, path in cases(templates):
        for value in BOUNDS:
            m = templates[i]
            frame = encode(Message(m.type, mutated(m.body, path, value)))
            try:
                got = decode_payload(frame[4:])
            except WireError as exc:
                assert value > INT64_MAX and exc.field, (m.type, path, value)
                continue
            assert not [p for p in leaves(got.body) if isinstance(
                _at(got.body, p), int) and _at(got.body, p) > INT64_MAX]


def _at(body: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        body = body[k]
    return body


async def _answer(r: asyncio.StreamReader, corr: Any) -> Message:
    """The first ERROR, or the ACK/REPLY answering ``corr`` (any ACK for ``None``;
    notifications skipped)."""
    while True:
        msg, _ = await asyncio.wait_for(read_frame(r), 5)
        if msg.type is MsgType.ERROR or (msg.type in (MsgType.ACK, MsgType.REPLY) and (
                corr is None or msg.body.get("corr") == corr)):
            return msg


async def hostile_case(templates: list[Message],
                       picks: list[tuple[tuple[int, tuple[Any, ...]], int | float]]) -> None:
    servers = await start_tree("acyclic", names=["B0", "B1"], edges=[("B0", "B1")])
    try:
        port = servers["B0"].port
        for k, ((i, path), value) in enumerate(picks):
            m = templates[i]
            body = mutated(m.body, path, value)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            try:
                if m.type is MsgType.HELLO:
                    w.write(encode(Message(m.type, body)))
                    first = await _answer(r, None)
                    assert first.type in (MsgType.ACK, MsgType.ERROR)
                else:
                    w.write(encode(Message(MsgType.HELLO, {
                        "role": "client", "session": {"id": f"x{k}"}})))
                    assert (await _answer(r, None)).type is MsgType.ACK
                    w.write(encode(Message(m.type, body)))
                    w.write(encode(Message(MsgType.PING, {"corr": 424242})))
                    corr = body.get("corr")
                    reply = await _answer(r, corr if type(corr) is int else 424242)
                    assert reply.type in (MsgType.ACK, MsgType.REPLY, MsgType.ERROR)
            finally:
                w.close()
        # nothing left behind: every id and name can be had again at once
        for k in range(len(picks)):
            c = await Client.connect(port=port, session=f"x{k}", timeout=5)
            await c.close()
        for sid in ("h", "h"):
            c = await Client.connect(port=port, session=SessionState(sid, clean=True),
                                     timeout=5)
            await c.ping()
            await c.close()
    finally:
        await close_all(servers)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_broker_answers_every_boundary_number_and_keeps_nothing(
        templates: list[Message], kind: MsgType, data: st.DataObject,
        caplog: pytest.LogCaptureFixture) -> None:
    """Per kind of frame: up to four of its numeric fields set to boundary values."""
    mine = [(i, p) for i, m in enumerate(templates) if m.type is kind
            for p in leaves(m.body)]
    if not mine:
        return  # a kind without numbers (UNSUB, UNADV, TUNSUB carry ids only)
    picks = data.draw(st.lists(st.tuples(st.sampled_from(mine),
                                         st.sampled_from(EDGES) | st.sampled_from(BOUNDS)),
                                min_size=1, max_size=4))
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="siftbus"):
        asyncio.run(hostile_case(templates, picks))
    bugs = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bugs, [r.getMessage() for r in bugs]


def test_every_number_of_a_session_hello_at_the_int64_edges(
        templates: list[Message], caplog: pytest.LogCaptureFixture) -> None:
    """Every numeric field of the HELLO, each at the edges of int64 and uint64."""
    hello = [(i, p) for i, m in enumerate(templates) if m.type is MsgType.HELLO
             for p in leaves(m.body)]
    edges: list[int | float] = [2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), math.nan]
    with caplog.at_level(logging.ERROR, logger="siftbus"):
        asyncio.run(hostile_case(templates, [(c, v) for c in hello for v in edges]))
    bugs = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bugs, [r.getMessage() for r in bugs]


def test_the_reported_hello_gets_one_error_at_once() -> None:
    """The issue's reproduction: ``ack`` 2**64-1 (and 2**63-1: a session counts on
    from it) is refused with one ERROR naming the field."""
    async def run() -> None:
        servers = await start_tree("acyclic", names=["B0", "B1"], edges=[("B0", "B1")])
        try:
            for ack in (2**64 - 1, 2**63 - 1):
                r, w = await asyncio.open_connection("127.0.0.1", servers["B0"].port)
                w.write(encode(Message(MsgType.HELLO, {"role": "client", "session": {
                    "id": "x", "ack": ack}})))
                msg, _ = await asyncio.wait_for(read_frame(r), 2)
                w.close()
                assert msg.type is MsgType.ERROR and msg.body.get("field") == "ack"
            c = await Client.connect(port=servers["B0"].port, session="x", timeout=5)
            await c.close()
        finally:
            await close_all(servers)

    asyncio.run(run())
