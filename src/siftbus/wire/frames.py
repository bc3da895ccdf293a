"""Frames of the siftbus wire protocol: header, message types, msgpack bodies (no I/O).

A frame is::

    +----------------+---------+------+------------------+
    | length: u32 BE | version | type | msgpack body     |
    +----------------+---------+------+------------------+

``length`` counts the bytes after itself (version + type + body). The version byte is
:data:`VERSION`; the type byte is a :class:`MsgType`; the body is a msgpack map whose
shape depends on the type (see ``docs/broker.md``). A frame that is malformed, longer
than the receiver's limit, of another version or of an unknown type raises
:class:`~siftbus.errors.WireError`; a server answers it with ERROR and closes only that
connection.
See :mod:`siftbus.wire.events` and :mod:`siftbus.wire.profiles` for the bodies' payloads.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack

from siftbus.errors import SiftbusError, WireError

VERSION = 1
"""The wire protocol version carried in every frame."""

MAX_FRAME = 16 * 1024 * 1024
"""Default limit on a frame's length (bytes after the length prefix)."""

_HEADER = struct.Struct(">IBB")
_LEN = struct.Struct(">I")


class MsgType(enum.IntEnum):
    """Message types; the numbers are part of the wire format."""

    HELLO = 1
    SCHEMA = 2
    SUB = 3
    UNSUB = 4
    ADV = 5
    UNADV = 6
    PUB = 7
    NOTIFY = 8
    ACK = 9
    ERROR = 10
    PING = 11
    CALL = 12
    REPLY = 13


@dataclass(slots=True)
class Message:
    """One decoded frame: its type and its body (a msgpack map)."""

    type: MsgType
    body: dict[str, Any] = field(default_factory=dict)


def encode(msg: Message) -> bytes:
    """The frame for ``msg`` (length prefix included)."""
    payload = msgpack.packb(msg.body, use_bin_type=True)
    return _HEADER.pack(len(payload) + 2, VERSION, int(msg.type)) + payload


def decode_payload(data: bytes | memoryview) -> Message:
    """Decode the bytes after the length prefix (version, type, body)."""
    if len(data) < 2:
        raise WireError(f"frame of {len(data)} bytes is too short for version and type")
    version, mtype = data[0], data[1]
    if version != VERSION:
        raise WireError(f"unsupported wire version {version} (this side speaks {VERSION})")
    try:
        t = MsgType(mtype)
    except ValueError:
        raise WireError(f"unknown message type {mtype}") from None
    try:
        body = msgpack.unpackb(data[2:], raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise WireError(f"{t.name} frame body is not valid msgpack: {exc}") from None
    if not isinstance(body, dict):
        raise WireError(f"{t.name} frame body must be a map, got {type(body).__name__}")
    return Message(t, body)


def check_length(n: int, limit: int = MAX_FRAME) -> None:
    """Refuse a frame length over ``limit`` before reading its bytes."""
    if n > limit:
        raise WireError(f"frame of {n} bytes exceeds the limit of {limit} bytes")
    if n < 2:
        raise WireError(f"frame of {n} bytes is too short for version and type")


class FrameDecoder:
    """Incremental decoder: feed bytes, get whole messages (for sockets and tests)."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self.limit = limit
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[Message]:
        """Append ``data`` and yield every complete message; raises :class:`WireError`."""
        self._buf += data
        while len(self._buf) >= 4:
            (n,) = _LEN.unpack_from(self._buf)
            check_length(n, self.limit)
            if len(self._buf) < 4 + n:
                return
            payload = bytes(self._buf[4:4 + n])
            del self._buf[:4 + n]
            yield decode_payload(payload)

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a whole frame."""
        return len(self._buf)


def get(body: dict[str, Any], name: str, kind: type | tuple[type, ...], *,
        optional: bool = False, where: str = "") -> Any:
    """The field ``name`` of a body, checked to be of ``kind``; :class:`WireError` if not."""
    if name not in body:
        if optional:
            return None
        raise WireError(f"{where or 'message'} lacks field {name!r}", field=name)
    value = body[name]
    if isinstance(value, bool) and kind is int:
        raise WireError(f"{where or 'message'} field {name!r} must be an integer", field=name)
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise WireError(f"{where or 'message'} field {name!r} must be {names}, "
                        f"got {type(value).__name__}", field=name)
    return value


def error_body(exc: BaseException, corr: int | None = None) -> dict[str, Any]:
    """The ERROR body for an exception (location fields when it is a SiftbusError)."""
    body: dict[str, Any] = {"message": str(exc), "kind": type(exc).__name__}
    if isinstance(exc, SiftbusError):
        for name in ("line", "column", "field"):
            v = getattr(exc, name)
            if v is not None:
                body[name] = v
        body["message"] = exc.message
    if corr is not None:
        body["corr"] = corr
    return body
