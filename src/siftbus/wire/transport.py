"""Reading frames from asyncio streams: the I/O half of the wire protocol."""

from __future__ import annotations

import asyncio

from .frames import _LEN, MAX_FRAME, Message, check_length, decode_payload


async def read_frame(reader: asyncio.StreamReader, limit: int = MAX_FRAME
                     ) -> tuple[Message, int]:
    """Read one frame; returns the message and its size in bytes."""
    head = await reader.readexactly(4)
    (n,) = _LEN.unpack(head)
    check_length(n, limit)
    payload = await reader.readexactly(n)
    return decode_payload(payload), n + 4
