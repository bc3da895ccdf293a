"""The asyncio frame transport: one connection class and one listener for every siftbus
server and client (the broker, its neighbour links, the client library, the channel
server).

A :class:`FrameConnection` is an :class:`asyncio.Protocol`: it buffers what the peer
sends, finds frame boundaries as bytes arrive and hands out whole decoded frames with
:meth:`~FrameConnection.read`, under the :class:`~siftbus.wire.limits.Limits` of its
owner:

* a declared frame length over ``max_frame`` is refused from the 4-byte header, before
  any of its body is buffered;
* a frame whose first byte arrived more than ``frame_timeout`` seconds ago and that is
  still incomplete is refused (idle time between frames is free);
* complete frames the owner has not read yet stop the reading beyond 256 KiB, so a
  fast sender cannot fill the memory of a slow handler (TCP pushes back on it);
* a listener's connections share a budget of ``max_buffered`` bytes: over it, those
  holding a partial frame are not read until it drops (and time out if it does not).

Writes are coalesced per event-loop turn: the frames written while one turn runs go to
the transport as one write at its end (at once beyond :data:`FLUSH_BYTES`), so a server
working through a backlog of requests answers with one send (and, over TLS, one record)
instead of one per frame, and its peer wakes once for them; a lone frame still leaves in
the same turn.

Each connection keeps its own bounded outbound queue: the transport is given more only
while it has not asked to pause writing (its own buffer stays below its high-water mark,
some 64-512 KiB), the rest waits in the connection's queue and goes out as the peer
reads. So what waits toward a slow or dead reader is counted exactly
(:attr:`~FrameConnection.buffered`) on every transport: over TLS the SSL layer encrypts
only what the socket can take, instead of holding an unbounded, uncounted backlog that
it would hand to the socket in one piece when the peer reads again.
:meth:`~FrameConnection.offer` writes a frame that may be dropped (notifications) and
drops it, counted, when more than ``max_out_buffer`` bytes are queued toward the peer
(the slow-consumer policy: nobody else waits for that peer); :meth:`~FrameConnection.
drain` sends what is pending and waits for a congested peer (backpressure for the
connection's own requests only); closing sends what is pending first.

A :class:`~siftbus.wire.listener.Listener` accepts connections (at most
``max_connections``; one more gets an ERROR and is closed), runs the owner's handler for
each, and turns a :class:`~siftbus.errors.SiftbusError` escaping a handler into one ERROR
frame naming the limit or the problem, closing only that connection. :func:`connect`
opens a client connection (the client library's, a broker's links to its neighbours).
Nothing in :mod:`~siftbus.wire.frames`, :mod:`~siftbus.wire.events` or
:mod:`~siftbus.wire.profiles` does I/O; this module is where frames meet sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from siftbus.errors import AuthenticationError, ConnectionLostError, WireError

from .counters import TransportCounters, TransportStats
from .frames import (
    _LEN,
    MAX_FRAME,
    Message,
    MsgType,
    check_length,
    decode_payload,
    encode,
    error_body,
)
from .limits import CLIENT_LIMITS, DEFAULT_LIMITS, Limits

READ_HIGH_WATER = 256 * 1024
"""Bytes of complete, unread frames beyond which a connection stops reading."""

FLUSH_BYTES = 64 * 1024
"""Pending written bytes that go to the transport at once rather than at the end of the
loop turn (bounds the memory and the delay a long turn adds)."""

LINGER = 1.0
"""Seconds a refused connection is kept half-closed, its input discarded, so that the
peer reads the ERROR and an orderly end instead of a reset."""


class ConnectionClosed(ConnectionError):
    """The peer closed the connection (between frames, or in the middle of one)."""


class FrameConnection(asyncio.Protocol):
    """One framed connection (either side): read whole frames, write frames.

    ``link`` is free for the owner (the broker names its links there). Counters:
    ``frames_in``/``bytes_in`` (handed out by :meth:`read`), ``frames_out``/
    ``bytes_out`` (written) and ``dropped`` (offered frames not written).
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS, *,
                 counters: TransportCounters | None = None,
                 on_made: Callable[[FrameConnection], None] | None = None,
                 on_lost: Callable[[FrameConnection], None] | None = None) -> None:
        self.limits = limits
        self.counters = counters if counters is not None else TransportCounters(
            limits.max_buffered)
        self._on_made = on_made
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.link = ""
        self._buf = bytearray()
        self._pos = 0
        """Start of the first frame not yet read."""
        self._scan = 0
        """End of the complete frames (``_pos..._scan`` are whole frames)."""
        self._scanned = 0
        """Frames found complete so far (keys the partial-frame timer)."""
        self._bad: WireError | None = None
        self._expired: WireError | None = None
        self._eof = False
        self._lost = False
        self._closing = False
        self._discard = False
        self._paused = False
        self._write_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._drainers: list[asyncio.Future[None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed: asyncio.Future[None] | None = None
        self._out: list[bytes] = []
        """Frames written in this loop turn, not yet given to the transport."""
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._queue: deque[bytes] = deque()
        """Flushed data the transport has not been given yet (it asked to pause)."""
        self._queued = 0
        self.frames_in = self.bytes_in = self.frames_out = self.bytes_out = self.dropped = 0

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a uvloop transport does not subclass asyncio.Transport but has its methods
        self.transport = cast(asyncio.Transport, transport)
        self._closed = asyncio.get_running_loop().create_future()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "")
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        if self._discard:
            return
        self._buf += data
        self.counters.add(len(data))
        self._find_frames()
        self._wake()
        self._regulate()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # keep the transport open (an ERROR may still have to be written), unless it
        # was refused and lingers only for the peer to finish; TLS cannot half-close
        return not self._discard and self.ssl_object is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = self._closing = True
        self._cancel_timer()
        self._drop_pending()
        self._drop_queue()
        self._forget_input()
        for fut in self._drainers:
            if not fut.done():
                fut.set_exception(ConnectionClosed("connection closed"))
        self._drainers.clear()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        if self._on_lost is not None:
            self._on_lost(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._feed()
        if self._write_paused or self._queue:
            return
        for fut in self._drainers:
            if not fut.done():
                fut.set_result(None)
        self._drainers.clear()

    # ---- reading -----------------------------------------------------------------------------

    def _find_frames(self) -> None:
        """Advance over the frames that are complete; time the one that is not."""
        buf = self._buf
        i, n = self._scan, len(buf)
        limit = self.limits.max_frame
        before = self._scanned
        while self._bad is None and n - i >= 4:
            (length,) = _LEN.unpack_from(buf, i)
            if length > limit or length < 2:
                try:
                    check_length(length, limit)
                except WireError as exc:
                    self._bad = exc
                break
            if n - i < 4 + length:
                break
            i += 4 + length
            self._scanned += 1
        self._scan = i
        if i < n and self._bad is None:
            if self._timer is not None and self._scanned != before:
                self._cancel_timer()  # the timed frame is complete; time the new one
            if self._timer is None:  # a frame has begun: it has frame_timeout to finish
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.limits.frame_timeout, self._expire,
                                              self._scanned)
        else:
            self._cancel_timer()

    def _expire(self, frame: int) -> None:
        self._timer = None
        if frame != self._scanned or self._lost:
            return
        have = len(self._buf) - self._scan
        need = ""
        if have >= 4:
            need = f" of {_LEN.unpack_from(self._buf, self._scan)[0] + 4}"
        self._expired = WireError(
            f"a frame was not completed within {self.limits.frame_timeout:g} s "
            f"({have}{need} bytes received)", field="frame_timeout")
        self._wake()
        self._regulate()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _forget_input(self) -> None:
        """Drop what was received and not read (returning it to the budget); wake a
        reader, which then finds the connection ending."""
        held = len(self._buf) - self._pos
        self._buf = bytearray()
        self._pos = self._scan = 0
        self.counters.held_back.discard(self)
        self.counters.release(held)
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _regulate(self) -> None:
        """Pause or resume reading from the socket (see the module docstring)."""
        t = self.transport
        if t is None or self._lost:
            return
        partial = len(self._buf) > self._scan
        spent = partial and self.counters.over_budget
        if spent:
            self.counters.held_back.add(self)
        pause = (self._bad is not None or self._expired is not None or spent
                 or self._scan - self._pos > READ_HIGH_WATER)
        if pause and not self._paused:
            self._paused = True
            with contextlib.suppress(RuntimeError, AttributeError):
                t.pause_reading()
        elif not pause and self._paused:
            self._paused = False
            with contextlib.suppress(RuntimeError, AttributeError):
                t.resume_reading()

    async def read(self, timeout: float | None = None) -> tuple[Message, int]:
        """The next frame and its size in bytes.

        Raises :class:`WireError` for a malformed, oversized or timed-out frame (after
        every complete frame before it has been read), :class:`ConnectionClosed` when the
        peer has gone, and ``TimeoutError`` when ``timeout`` seconds pass without a
        whole frame.
        """
        while True:
            if self._pos < self._scan:
                return self._take()
            if self._bad is not None:
                raise self._bad
            if self._expired is not None:
                raise self._expired
            if self._lost or self._eof or self._discard:
                left = len(self._buf) - self._pos
                raise ConnectionClosed("the peer closed the connection" + (
                    f" in the middle of a frame ({left} bytes of it received)" if left else ""))
            fut = asyncio.get_running_loop().create_future()
            self._waiter = fut
            try:
                if timeout is None:
                    await fut
                else:
                    await asyncio.wait_for(fut, timeout)
            finally:
                self._waiter = None

    def _take(self) -> tuple[Message, int]:
        buf, i = self._buf, self._pos
        (length,) = _LEN.unpack_from(buf, i)
        end = i + 4 + length
        with memoryview(buf) as mv:
            payload = bytes(mv[i + 4:end])
        if end == len(buf):
            buf.clear()
            self._pos = self._scan = 0
        elif end > 65536 and 2 * end > len(buf):
            del buf[:end]
            self._scan -= end
            self._pos = 0
        else:
            self._pos = end
        self.counters.release(4 + length)
        self.frames_in += 1
        self.bytes_in += 4 + length
        if self._paused:
            self._regulate()
        return decode_payload(payload, self.limits), 4 + length

    async def read_hello(self) -> Message:
        """The first frame of an accepted connection: it must be HELLO and complete
        within ``hello_timeout`` seconds."""
        try:
            msg, _ = await self.read(self.limits.hello_timeout)
        except TimeoutError:
            raise WireError(f"no HELLO frame within {self.limits.hello_timeout:g} s of "
                            "connecting", field="hello_timeout") from None
        if msg.type is not MsgType.HELLO:
            raise WireError(f"the first frame must be HELLO, got {msg.type.name}")
        return msg

    @property
    def ssl_object(self) -> Any:
        """The connection's ``ssl.SSLObject`` (its peer certificate: ``getpeercert()``),
        or ``None`` on plain TCP."""
        t = self.transport
        return t.get_extra_info("ssl_object") if t is not None else None

    # ---- writing -----------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """Closed, closing or lost: nothing more can be written."""
        t = self.transport
        return self._closing or t is None or t.is_closing()

    @property
    def buffered(self) -> int:
        """Bytes written and not yet sent to the peer (pending in this turn included)."""
        t = self.transport
        if t is None or self._lost:
            return 0
        return self._out_bytes + self._queued + t.get_write_buffer_size()

    def write(self, frame: bytes) -> bool:
        """Write an encoded frame (sent at the end of this loop turn with the others
        written in it); ``False`` when the connection is closing."""
        if self.closing:
            return False
        self._out.append(frame)
        self._out_bytes += len(frame)
        self.frames_out += 1
        self.bytes_out += len(frame)
        if self._out_bytes >= FLUSH_BYTES:
            self.flush()
        elif self._flush_handle is None:
            try:
                self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop running (a test's transport): now
                self.flush()
        return True

    def flush(self) -> None:
        """Give the frames written so far to the transport now, as one write (to the
        outbound queue while the transport has asked to pause writing)."""
        out = self._drop_pending()
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        t = self.transport
        if t is None or self._lost or t.is_closing():
            return
        if self._write_paused or self._queue:
            self._queue.append(data)
            self._queued += len(data)
        else:
            t.write(data)

    def _feed(self) -> None:
        """Hand queued data to the transport until it asks to pause again (a
        transport's ``write`` calls :meth:`pause_writing` at once when it is full)."""
        t = self.transport
        q = self._queue
        while q and not self._write_paused:
            if t is None or self._lost or t.is_closing():
                self._drop_queue()
                return
            data = q.popleft()
            self._queued -= len(data)
            t.write(data)

    def _unload(self) -> None:
        """Hand the whole queue to the transport (the connection is ending: what was
        written must still go out first, within the close's own bound)."""
        t = self.transport
        if self._queue and t is not None and not self._lost and not t.is_closing():
            queued = list(self._queue)
            self._drop_queue()
            for data in queued:  # piece by piece: an SSL layer copies what a write leaves
                t.write(data)

    def _drop_queue(self) -> None:
        self._queue.clear()
        self._queued = 0

    def _drop_pending(self) -> list[bytes]:
        """Forget the frames not yet given to the transport (and the flush scheduled
        for them); returns them."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out, self._out = self._out, []
        self._out_bytes = 0
        return out

    def send(self, msg: Message) -> bool:
        """Encode and write ``msg``; ``False`` when the connection is closing."""
        return self.write(encode(msg))

    @property
    def congested(self) -> bool:
        """More than ``max_out_buffer`` bytes wait for the peer."""
        return self.buffered > self.limits.max_out_buffer

    def count_dropped(self) -> None:
        """Count a frame the owner did not write (the peer was gone or congested)."""
        self.dropped += 1
        self.counters.dropped_frames += 1

    def offer(self, frame: bytes) -> bool:
        """Write a frame that may be dropped: dropped (and counted) when the connection
        is :attr:`congested` or closing."""
        if self.closing or self.congested:
            self.count_dropped()
            return False
        return self.write(frame)

    async def drain(self) -> None:
        """Wait until the peer has taken most of what was written (backpressure);
        :class:`ConnectionClosed` if the connection goes meanwhile."""
        if self._lost:
            raise ConnectionClosed("connection closed")
        self.flush()
        if not self._write_paused and not self._queue:
            return
        fut = asyncio.get_running_loop().create_future()
        self._drainers.append(fut)
        await fut

    def refuse(self, exc: BaseException, corr: int | None = None) -> None:
        """Answer with one ERROR frame (``exc``'s message and limit) and close."""
        field_ = getattr(exc, "field", None)
        self.counters.refused[field_ if isinstance(field_, str) and field_.startswith(
            ("max_", "frame_", "hello_")) else type(exc).__name__] += 1
        self.send(Message(MsgType.ERROR, error_body(exc, corr)))
        self._linger()

    def _linger(self) -> None:
        """End our side after the ERROR, discard what the peer still sends, close when
        it ends too or after :data:`LINGER` seconds (closing a socket with unread input
        would reset the connection, and the peer might lose the ERROR)."""
        t = self.transport
        self._closing = True
        self._cancel_timer()
        if t is None or self._lost or self._discard:
            return
        self._discard = True
        self._forget_input()
        self.flush()
        self._unload()
        try:
            if not t.can_write_eof():
                t.close()
                return
            t.write_eof()
            if self._paused:
                self._paused = False
                t.resume_reading()
        except (RuntimeError, OSError, AttributeError):
            t.abort()
            return
        asyncio.get_running_loop().call_later(LINGER, self.abort)

    def close(self) -> None:
        """Close after what is written has been sent (a refused connection lingers)."""
        self._closing = True
        self._cancel_timer()
        if self._discard:
            return
        self.flush()
        self._unload()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is not sent."""
        self._closing = True
        self._cancel_timer()
        self._drop_pending()
        self._drop_queue()
        if self.transport is not None and not self._lost:
            self.transport.abort()

    async def wait_closed(self, timeout: float | None = None) -> None:
        """Wait until the connection is gone (aborting it after ``timeout`` seconds)."""
        if self._closed is None or self._closed.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._closed), timeout)
        except TimeoutError:
            self.abort()


async def connect(host: str, port: int, limits: Limits = CLIENT_LIMITS, *,
                  timeout: float = 10.0, what: str = "server",
                  counters: TransportCounters | None = None,
                  ssl: ssl_module.SSLContext | None = None,
                  server_hostname: str | None = None) -> FrameConnection:
    """Open a framed connection to ``host:port`` (the client side of every siftbus
    protocol); :class:`~siftbus.errors.ConnectionLostError` when it cannot be reached.

    ``counters`` shares a listener's counters and budget (a broker's outgoing links).
    With ``ssl`` the connection speaks TLS, verifying the server's certificate for
    ``server_hostname`` (default: ``host``); a certificate that does not verify raises
    :class:`~siftbus.errors.AuthenticationError` (retrying cannot help)."""
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(loop.create_connection(
            lambda: FrameConnection(limits, counters=counters), host, port, ssl=ssl,
            server_hostname=(server_hostname or host) if ssl is not None else None,
            ssl_handshake_timeout=timeout if ssl is not None else None), timeout)
    except ssl_module.SSLCertVerificationError as exc:
        raise AuthenticationError(f"{what} at {host}:{port} presented a certificate that "
                                  f"does not verify: {exc.verify_message}") from None
    except (OSError, TimeoutError) as exc:
        raise ConnectionLostError(f"cannot connect to {what} at {host}:{port}: "
                                  f"{getattr(exc, 'strerror', None) or exc!r}") from None
    return conn


async def read_frame(reader: asyncio.StreamReader, limit: int = MAX_FRAME
                     ) -> tuple[Message, int]:
    """Read one frame from an asyncio stream (for tools and tests speaking raw frames);
    returns the message and its size in bytes."""
    head = await reader.readexactly(4)
    (n,) = _LEN.unpack(head)
    check_length(n, limit)
    payload = await reader.readexactly(n)
    return decode_payload(payload, CLIENT_LIMITS), n + 4


__all__ = ["FLUSH_BYTES", "LINGER", "READ_HIGH_WATER", "ConnectionClosed", "FrameConnection",
           "TransportCounters", "TransportStats", "connect", "read_frame"]
