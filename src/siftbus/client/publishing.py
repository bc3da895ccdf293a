"""Publishing from the asyncio client: events buffered per loop turn, sent in columnar
blocks (a mixin of :class:`~siftbus.client.aio.Client`).

Events published in the same loop turn share one PUB frame; a batch travels in frames of
:data:`MAX_BATCH` events, each numbered consecutively per client (the broker drops a
session publisher's repeats by these numbers).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Protocol

import numpy as np

import siftbus.telemetry as telemetry
from siftbus.errors import EventError
from siftbus.model import Event, Schema, event_from_dict, parse_event
from siftbus.wire.events import Block, encode_block, group_by_type
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.transport import FrameConnection

MAX_BATCH = 5000
"""Events per PUB frame when publishing a large batch."""


@contextlib.contextmanager
def traced_send(body: dict[str, Any]) -> Iterator[None]:
    """A ``send`` span around publishing ``body``, whose context the frame carries
    (nothing when tracing is off: ``docs/tracing.md``)."""
    if telemetry.TRACER is None:
        yield
        return
    blocks = body["blocks"]
    with telemetry.span("send", destination=telemetry.destinations(blocks),
                        count=sum(int(b["n"]) for b in blocks)):
        body[telemetry.KEY] = telemetry.carrier()
        yield


class _Sender(Protocol):
    """What the mixin needs of its client (see :class:`~siftbus.client.aio.Client`)."""

    name: str
    schema: Schema | None
    _conn: FrameConnection | None
    _closed: bool
    _lost: BaseException | None
    _seq: int
    _buffer: list[Event]
    _buffer_ts: list[float]
    _flush_scheduled: bool
    connected: asyncio.Event

    def _write(self, msg: Message) -> None: ...

    async def _request(self, mtype: MsgType, body: dict[str, Any],
                       timeout: float | None = 60.0) -> dict[str, Any]: ...

    def event(self, event: Event | Mapping[str, Any] | str) -> Event: ...

    def _blocks(self, events: list[Event], ts: list[float] | float
                ) -> list[dict[str, Any]]: ...

    async def _drain(self) -> None: ...

    def _flush_now(self) -> None: ...


class Publisher:
    """Publishing events (a mixin of ``Client``)."""

    def event(self: _Sender, event: Event | Mapping[str, Any] | str) -> Event:
        """An :class:`Event` from an event, an event-file object or a JSON line."""
        if isinstance(event, Event):
            return event
        assert self.schema is not None
        if isinstance(event, str):
            return parse_event(event, self.schema)
        if not isinstance(event, Mapping):
            raise EventError(f"an event is an Event, a mapping or a JSON line, not "
                             f"{type(event).__name__}")
        data = {k: Decimal(repr(v)) if isinstance(v, float) else v for k, v in event.items()}
        return event_from_dict(data, self.schema)

    def _blocks(self: _Sender, events: list[Event], ts: list[float] | float
                ) -> list[dict[str, Any]]:
        """Encoded blocks (one per event type) for events published now; the events get
        consecutive sequence numbers in the order given."""
        n = len(events)
        seq = np.arange(self._seq, self._seq + n, dtype=np.int64)
        stamps = np.full(n, ts) if isinstance(ts, float) else np.array(ts, np.float64)
        self._seq += n
        out = []
        for at in group_by_type(events):
            if at is None:
                out.append(encode_block(Block.of_events(events, self.name, seq, stamps)))
            else:
                out.append(encode_block(Block.of_events(
                    [events[i] for i in at.tolist()], self.name, seq[at], stamps[at], at)))
        return out

    async def publish(self: _Sender, event: Event | Mapping[str, Any] | str) -> int:
        """Publish one event; events published in the same loop turn share one frame.

        Returns the event's sequence number.
        """
        if self._lost is not None:
            raise self._lost
        self._buffer.append(self.event(event))
        self._buffer_ts.append(time.time())
        seq = self._seq + len(self._buffer) - 1
        if len(self._buffer) >= MAX_BATCH:
            self._flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_now)
        return seq

    async def publish_batch(self: _Sender, events: Iterable[Event | Mapping[str, Any] | str], *,
                            ack: bool = False) -> int:
        """Publish many events in as few frames as possible; returns how many.

        With ``ack=True`` waits until the broker has routed them (flow control). Events
        travel in columnar blocks (one frame per :data:`MAX_BATCH` events); the call
        waits for the socket only when its buffer is above the high-water mark.
        """
        if self._lost is not None:
            raise self._lost
        self._flush_now()
        now = time.time()
        evs = [self.event(e) for e in events]
        for i in range(0, len(evs), MAX_BATCH):
            body = {"blocks": self._blocks(evs[i:i + MAX_BATCH], now)}
            with traced_send(body):
                if ack:
                    await self._request(MsgType.PUB, body)
                else:
                    self._write(Message(MsgType.PUB, body))
        await self._drain()
        return len(evs)

    async def _drain(self: _Sender) -> None:
        if not self.connected.is_set():  # reconnecting: the frames wait in the buffer
            return
        assert self._conn is not None, "not connected"
        await self._conn.drain()

    def _flush_now(self: _Sender) -> None:
        self._flush_scheduled = False
        if self._buffer and not self._closed:
            body = {"blocks": self._blocks(self._buffer, self._buffer_ts)}
            fresh: tuple[list[Event], list[float]] = ([], [])
            self._buffer, self._buffer_ts = fresh
            with traced_send(body):
                self._write(Message(MsgType.PUB, body))

    async def flush(self: _Sender) -> None:
        """Send buffered events and wait until the socket buffer drains."""
        self._flush_now()
        await self._drain()


__all__ = ["MAX_BATCH", "Publisher"]
