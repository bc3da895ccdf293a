"""Frames of the siftbus wire protocol: header, message types, msgpack bodies (no I/O).

A frame is::

    +----------------+---------+------+------------------+
    | length: u32 BE | version | type | msgpack body     |
    +----------------+---------+------+------------------+

``length`` counts the bytes after itself (version + type + body). The version byte is
:data:`VERSION`; the type byte is a :class:`MsgType`; the body is a msgpack map whose
shape depends on the type (see ``docs/broker.md``). A frame that is malformed, longer
than the receiver's limit (:class:`~siftbus.wire.limits.Limits`), of another version or
of an unknown type raises :class:`~siftbus.errors.WireError`; a server answers it with
ERROR and closes only that connection. An ERROR body is made by :func:`error_body` and
read by :func:`decode_error`, the one decoder of error replies.
See :mod:`siftbus.wire.events` and :mod:`siftbus.wire.profiles` for the bodies' payloads.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack

from siftbus.errors import MAX_MESSAGE, RemoteError, SiftbusError, WireError, excerpt

from .limits import DEFAULT_LIMITS, MAX_FRAME, Limits

VERSION = 1
"""The wire protocol version carried in every frame."""

MAX_ERROR_MESSAGE = MAX_MESSAGE
"""Characters of an ERROR's message: a readable excerpt, never the whole bad input. The
same limit as every error's message, so the reply a client decodes and the error it raises
say the same thing."""

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
    TSUB = 14
    """Temporal filters: a client's (with semantics) or a neighbour's (routing boxes)."""
    TUNSUB = 15
    TPUB = 16
    """Persistent notifications: a client publishes, updates, withdraws; brokers put,
    drop and sync (``docs/temporal.md``)."""
    TNOTIFY = 17
    """Changes of a client's collections."""
    HANDOFF = 20
    """Broker to broker: a session handoff step (``docs/mobility.md``)."""
    SACK = 21
    """Client to broker: session rows processed up to ``ack`` (``resend``: send again
    what follows)."""


@dataclass(slots=True)
class Message:
    """One decoded frame: its type and its body (a msgpack map)."""

    type: MsgType
    body: dict[str, Any] = field(default_factory=dict)


def encode(msg: Message) -> bytes:
    """The frame for ``msg`` (length prefix included)."""
    payload = msgpack.packb(msg.body, use_bin_type=True)
    return _HEADER.pack(len(payload) + 2, VERSION, int(msg.type)) + payload


def decode_payload(data: bytes | bytearray | memoryview,
                   limits: Limits = DEFAULT_LIMITS) -> Message:
    """Decode the bytes after the length prefix (version, type, body).

    Every string of the body is bounded by ``limits.max_string``; msgpack refuses a
    longer one from its length header, before building it.
    """
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
        body = msgpack.unpackb(data[2:], raw=False, strict_map_key=True,
                               max_str_len=limits.max_string, max_bin_len=limits.max_frame)
    except ValueError as exc:
        if "max_str_len" in str(exc):
            raise WireError(f"{t.name} frame holds a string over the limit of "
                            f"{limits.max_string} bytes", field="max_string") from None
        raise WireError(f"{t.name} frame body is not valid msgpack: {exc}") from None
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise WireError(f"{t.name} frame body is not valid msgpack: {exc}") from None
    if not isinstance(body, dict):
        raise WireError(f"{t.name} frame body must be a map, got {type(body).__name__}")
    if _UINT64 in data:  # only msgpack's uint64 goes beyond int64: most frames skip this
        check_ints(body, t.name)
    return Message(t, body)


INT64_MAX = 2**63 - 1
"""The largest integer a frame may carry anywhere: every number of the protocol is a
64-bit signed integer (numpy arrays, SQLite columns, msgpack's int64), so a larger one
is refused when the frame is decoded, before any layer computes with it (a session
``ack`` of 2**64-1 used to fail deep in a handoff with ``OverflowError``, issue 30)."""

_UINT64 = 0xCF
"""msgpack's uint64 marker byte (a frame without this byte holds no such integer)."""


def check_ints(body: Any, what: str) -> None:
    """Refuse an integer above :data:`INT64_MAX` anywhere in ``body`` (msgpack decodes
    none below int64's minimum), naming its field."""
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:
        value, path = stack.pop()
        if type(value) is dict:
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif type(value) is list:
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif type(value) is int and value > INT64_MAX:
            raise WireError(f"{what} field {excerpt(path, 200)} holds {value}, beyond the "
                            f"largest number a frame may carry ({INT64_MAX})",
                            field=excerpt(path.rsplit(".", 1)[-1], 200) or "body")


def check_length(n: int, limit: int = MAX_FRAME) -> None:
    """Refuse a frame length over ``limit`` before reading its bytes."""
    if n > limit:
        raise WireError(f"frame of {n} bytes exceeds the limit of {limit} bytes",
                        field="max_frame")
    if n < 2:
        raise WireError(f"frame of {n} bytes is too short for version and type")


class FrameDecoder:
    """Incremental decoder: feed bytes, get whole messages (for sockets and tests)."""

    def __init__(self, limit: int | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits if limit is None else limits.replace(max_frame=limit)
        self.limit = self.limits.max_frame
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
            yield decode_payload(payload, self.limits)

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
    body: dict[str, Any] = {"message": excerpt(str(exc), MAX_ERROR_MESSAGE),
                            "kind": type(exc).__name__}
    if isinstance(exc, SiftbusError):
        for name in ("line", "column", "field"):
            v = getattr(exc, name)
            if v is not None:
                body[name] = excerpt(v, 200) if isinstance(v, str) else v
        body["message"] = excerpt(exc.message, MAX_ERROR_MESSAGE)
        if exc.retriable:
            body["retriable"] = True
    if corr is not None:
        body["corr"] = corr
    return body


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A decoded ERROR body: what went wrong at the peer, and where."""

    message: str
    kind: str = ""
    """The peer's error class name (e.g. ``ProfileSyntaxError``), ``""`` if not given."""
    line: int | None = None
    column: int | None = None
    field: str | None = None
    """The offending field, attribute or exceeded limit (e.g. ``max_frame``)."""
    corr: int | None = None
    """The request this answers (``None``: no request, e.g. a refused frame)."""
    retriable: bool = False
    """Whether the peer says a retry can help (a quota used up for now)."""

    def location(self) -> dict[str, Any]:
        """``line``, ``column`` and ``field`` where given (keyword arguments of an error)."""
        loc = {"line": self.line, "column": self.column, "field": self.field}
        return {k: v for k, v in loc.items() if v is not None}

    def to_error(self) -> RemoteError:
        """The :class:`~siftbus.errors.RemoteError` a client raises for this reply."""
        err = RemoteError(self.message, kind=self.kind, **self.location())
        err.retriable = self.retriable
        return err


def decode_error(body: Any) -> ErrorReply:
    """Read an ERROR body; never raises (missing or odd fields are left out, the message
    is cut to an excerpt)."""
    if not isinstance(body, dict):
        return ErrorReply("malformed ERROR frame")
    field = body.get("field")
    return ErrorReply(excerpt(str(body.get("message", "error")), MAX_ERROR_MESSAGE),
                      excerpt(str(body.get("kind", "")), 100),
                      _opt_int(body.get("line")), _opt_int(body.get("column")),
                      excerpt(str(field), 200) if field is not None else None,
                      _opt_int(body.get("corr")), body.get("retriable") is True)
