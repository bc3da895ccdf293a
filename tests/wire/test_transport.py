"""The frame transport's write path, plain and over TLS: frames written in one loop turn
leave as one transport write (one send, one TLS record), in order, and none is lost when
the connection closes or drains right after writing."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.security.certs import init_ca, issue
from siftbus.wire.frames import Message, MsgType, encode
from siftbus.wire.limits import Limits
from siftbus.wire.listener import Listener
from siftbus.wire.transport import FLUSH_BYTES, FrameConnection, connect


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    init_ca(d)
    issue(d, "localhost")
    return d


def _contexts(pki: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki / "localhost.pem", pki / "localhost.key")
    client = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    return server, client


class Sink:
    """A listener that records every frame it reads, per connection, until the end."""

    def __init__(self) -> None:
        self.frames: list[int] = []
        self.done = asyncio.Event()

    async def handler(self, conn: FrameConnection) -> None:
        try:
            while True:
                msg, _ = await conn.read(10.0)
                self.frames.append(int(msg.body["i"]))
        except ConnectionError:
            self.done.set()


@contextlib.asynccontextmanager
async def _pair(sink: Sink, tls: bool, pki: Path
                ) -> AsyncIterator[tuple[Listener, FrameConnection]]:
    server_ctx, client_ctx = _contexts(pki) if tls else (None, None)
    listener = Listener(sink.handler, ssl=server_ctx)
    await listener.start()
    conn = await connect("127.0.0.1", listener.port, ssl=client_ctx,
                         server_hostname="localhost" if tls else None)
    try:
        yield listener, conn
    finally:
        conn.abort()
        await listener.close()


def _frame(i: int, pad: int = 20) -> Message:
    return Message(MsgType.NOTIFY, {"i": i, "pad": b"x" * pad})


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_frames_of_one_turn_leave_in_one_write(tls: bool, pki: Path) -> None:
    sink = Sink()
    async with _pair(sink, tls, pki) as (_listener, conn):
        assert conn.transport is not None
        writes: list[int] = []
        real = conn.transport.write

        def counting(data: Any) -> None:
            writes.append(len(data))
            real(data)

        conn.transport.write = counting  # type: ignore[method-assign]
        for i in range(50):
            conn.send(_frame(i))
        assert conn.buffered > 0 and writes == []  # pending until the turn ends
        await asyncio.sleep(0)
        assert len(writes) == 1
        conn.send(_frame(50))  # a lone frame leaves in its own turn
        await asyncio.sleep(0)
        assert len(writes) == 2
        for i in range(51, 51 + 3 * FLUSH_BYTES // 1000):  # a long turn flushes as it goes
            conn.send(_frame(i, pad=1000))
        assert len(writes) >= 4
        conn.close()
        await asyncio.wait_for(sink.done.wait(), 10)
    assert sink.frames == list(range(51 + 3 * FLUSH_BYTES // 1000))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_close_and_drain_send_what_is_pending_abort_drops_it(tls: bool,
                                                                   pki: Path) -> None:
    sink = Sink()
    async with _pair(sink, tls, pki) as (_listener, conn):
        conn.send(_frame(0))
        await conn.drain()  # drain gives the pending frame to the transport first
        assert conn.transport is not None and conn._out == []
        conn.send(_frame(1))
        conn.close()  # close right after a write: the frame still arrives
        assert not conn.send(_frame(2))
        await asyncio.wait_for(sink.done.wait(), 10)
    assert sink.frames == [0, 1]
    sink = Sink()
    async with _pair(sink, tls, pki) as (_listener, conn):
        conn.send(_frame(7))
        conn.abort()  # abort drops what is pending
        await asyncio.wait_for(sink.done.wait(), 10)
    assert sink.frames == []


@settings(max_examples=12, deadline=None)
@given(turns=st.lists(st.integers(0, 40), min_size=1, max_size=12),
       tls=st.booleans())
def test_random_turns_deliver_every_frame_in_order(turns: list[int], tls: bool,
                                                   tmp_path_factory: Any) -> None:
    pki = tmp_path_factory.getbasetemp() / "pki-random"
    if not (pki / "localhost.pem").exists():
        pki.mkdir(exist_ok=True)
        init_ca(pki)
        issue(pki, "localhost")

    async def run() -> list[int]:
        sink = Sink()
        n = 0
        async with _pair(sink, tls, pki) as (_listener, conn):
            for k in turns:
                for _ in range(k):
                    conn.send(_frame(n, pad=n % 3000))
                    n += 1
                await asyncio.sleep(0)
            conn.close()
            await asyncio.wait_for(sink.done.wait(), 10)
        return sink.frames

    assert asyncio.run(run()) == list(range(sum(turns)))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_a_reader_that_stops_holds_a_counted_bounded_queue(tls: bool,
                                                                pki: Path) -> None:
    """Toward a peer that stops reading, the transport (over TLS: the SSL layer) holds
    no more than its high-water mark; the rest waits in the connection's own queue,
    counted in ``buffered``, so ``offer`` drops beyond ``max_out_buffer`` on every
    transport; what was accepted arrives, in order, once the peer reads again."""
    reading = asyncio.Event()
    got: list[int] = []
    done = asyncio.Event()

    async def late_reader(conn: FrameConnection) -> None:
        await reading.wait()
        try:
            while True:
                msg, _ = await conn.read(10.0)
                got.append(int(msg.body["i"]))
        except ConnectionError:
            done.set()

    server_ctx, client_ctx = _contexts(pki) if tls else (None, None)
    listener = Listener(late_reader, ssl=server_ctx)
    await listener.start()
    cap = 2 * 2**20
    conn = await connect("127.0.0.1", listener.port, Limits(max_out_buffer=cap),
                         ssl=client_ctx, server_hostname="localhost" if tls else None)
    try:
        assert conn.transport is not None
        accepted: list[int] = []
        held = 0
        for i in range(1500):  # ~15 MiB offered, far beyond what the sockets take
            if conn.offer(encode(_frame(i, pad=10_000))):
                accepted.append(i)
            if i % 25 == 0:
                await asyncio.sleep(0.001)
                held = max(held, conn.transport.get_write_buffer_size())
                assert conn.buffered <= cap + 26 * 10_100
        assert held <= 1024 * 1024, f"the transport itself holds {held} bytes"
        assert conn.dropped > 0 and len(accepted) + conn.dropped == 1500
        reading.set()
        await conn.drain()
        conn.close()
        await asyncio.wait_for(done.wait(), 20)
    finally:
        conn.abort()
        await listener.close()
    assert got == accepted
