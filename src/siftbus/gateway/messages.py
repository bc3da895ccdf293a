"""The messages of the gateway's streams (WebSocket ``/api/ws`` and SSE ``/api/sse``) as
pydantic models: the one description both API documents are generated from (the OpenAPI
document lists them among its schemas, ``/asyncapi.json`` gives them as message
payloads). The server builds its messages as plain dicts (the hot path); the tests check
that what it sends validates against these models' JSON Schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Reply(_Message):
    ref: Any = Field(None, description="The request's ref, echoed.")


# ---- client to gateway (WebSocket) ----------------------------------------------------

class SubscribeOp(_Message):
    op: Literal["subscribe"]
    profile: str = Field(description="A profile line, e.g. 'T(a > 2)'.", max_length=65536)
    id: str | None = Field(None, description="The subscription's id (1 to 64 letters, "
                           "digits, '_', '.', '-'; default: the line's own id, else s<n>).")
    ref: Any = None


class UnsubscribeOp(_Message):
    op: Literal["unsubscribe"]
    id: str
    ref: Any = None


class PublishOp(_Message):
    op: Literal["publish"]
    events: list[dict[str, Any]] | None = Field(None, description="Events as in an event "
                                                "file (or one as event).")
    event: dict[str, Any] | None = None
    ref: Any = None


class WatchOp(_Message):
    op: Literal["watch"]
    interval: float = Field(1.0, description="Seconds between network snapshots (0 stops).")
    ref: Any = None


class PingOp(_Message):
    op: Literal["ping"]
    ref: Any = None


class SessionOp(_Message):
    op: Literal["session"]
    id: str = Field(description="The session id (before any subscribe).")
    ack: int = Field(0, ge=0, description="The last session number already processed.")
    clean: bool = False
    ref: Any = None


class AckOp(_Message):
    op: Literal["ack"]
    n: int = Field(ge=0, description="Every notification up to this session number is "
                   "processed.")
    ref: Any = None


# ---- gateway to client -------------------------------------------------------------------

class SubscribedReply(_Reply):
    type: Literal["subscribed"]
    id: str
    profile: str = Field(description="The profile as the broker resolved it.")


class UnsubscribedReply(_Reply):
    type: Literal["unsubscribed"]
    id: Any


class PublishedReply(_Reply):
    type: Literal["published"]
    count: int


class WatchingReply(_Reply):
    type: Literal["watching"]
    interval: float


class PongReply(_Reply):
    type: Literal["pong"]


class SessionReply(_Reply):
    type: Literal["session"]
    id: str
    state: str | None
    acked: int
    subscriptions: list[str]
    lost: int
    overflow: dict[str, int]


class AckedReply(_Reply):
    type: Literal["acked"]
    n: int


class ErrorBody(BaseModel):
    type: str = Field(description="The SiftbusError class.")
    message: str
    line: int | None = None
    column: int | None = None
    field: str | None = None


class ErrorReply(_Reply):
    type: Literal["error"]
    error: ErrorBody


class Notification(_Message):
    type: Literal["notification"]
    subscription: str
    src: str = Field(description="The publisher (broker/client).")
    seq: int = Field(description="The publication's number at its publisher.")
    ts: float = Field(description="The publisher's clock at publication (seconds).")
    event: dict[str, Any] = Field(description="The event, as in an event file.")
    n: int | None = Field(None, description="The session number (session sockets only).")


class CloudEventNotification(BaseModel):
    """A notification as a structured CloudEvent (``?format=cloudevents``)."""

    model_config = ConfigDict(extra="forbid")
    specversion: Literal["1.0"]
    type: str = Field(description="The event type.")
    source: str = Field(description="/siftbus/{publisher}")
    id: str = Field(description="{publisher}/{seq}")
    time: str
    datacontenttype: Literal["application/json"]
    subject: str = Field(description="The subscription.")
    siftbusn: int | None = Field(None, description="The session number.")
    data: dict[str, Any] = Field(description="The event's attributes.")


class NotificationsMessage(_Message):
    type: Literal["notifications"]
    notifications: list[Notification] | list[CloudEventNotification]


class DroppedMessage(_Message):
    type: Literal["dropped"]
    count: int = Field(description="Notifications dropped since the last such message.")
    total: int


class NetworkMessage(BaseModel):
    """A network snapshot (``watch``): as ``GET /api/network``."""

    model_config = ConfigDict(extra="allow")
    type: Literal["network"]


class SseSubscribed(_Message):
    type: Literal["subscribed"]
    subscriptions: list[dict[str, str]] = Field(description="id and profile of each.")


SENT: dict[str, type[BaseModel]] = {
    "subscribe": SubscribeOp, "unsubscribe": UnsubscribeOp, "publish": PublishOp,
    "watch": WatchOp, "ping": PingOp, "session": SessionOp, "ack": AckOp}
"""What a WebSocket client sends, by ``op``."""
RECEIVED: dict[str, type[BaseModel]] = {
    "subscribed": SubscribedReply, "unsubscribed": UnsubscribedReply,
    "published": PublishedReply, "watching": WatchingReply, "pong": PongReply,
    "session": SessionReply, "acked": AckedReply, "error": ErrorReply,
    "notifications": NotificationsMessage, "dropped": DroppedMessage,
    "network": NetworkMessage}
"""What a WebSocket client receives, by ``type``."""
SSE: dict[str, type[BaseModel]] = {
    "subscribed": SseSubscribed, "notification": Notification,
    "cloudevent": CloudEventNotification, "dropped": DroppedMessage}
"""The events of an SSE stream (``cloudevent``: a notification with ``format=cloudevents``,
whose SSE event name is the event type)."""

MODELS: list[type[BaseModel]] = list(dict.fromkeys([*SENT.values(), *RECEIVED.values(),
                                                    *SSE.values()]))

__all__ = ["MODELS", "RECEIVED", "SENT", "SSE"]
