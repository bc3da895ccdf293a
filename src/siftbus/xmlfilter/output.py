"""Notifications and their delivery.

One :class:`Notification` per located event that has receivers: the event subtree
re-serialised as XML (its root is the target's event root; every namespace in scope is
declared on it, so it is a standalone document), with the receivers and subscriptions it
matched. Delivery goes through a :class:`NotificationSink`; :class:`Dispatcher` chooses the
sink per receiver by ``callbackMethod``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from siftbus.xmlfilter.subscription import Receiver

NOTIFICATION_NS = "urn:siftbus:xmlfilter:notification"


class Notification(NamedTuple):
    """One event and everyone it goes to (a named tuple: one is made per matched event,
    and a tuple is built in C)."""

    event: int
    """0-based index of the event in its message, in the order events complete."""
    targets: tuple[str, ...]
    """The targets that located the event."""
    subscriptions: tuple[str, ...]
    """Ids of the matched subscriptions, sorted."""
    receivers: tuple[Receiver, ...]
    """Distinct receivers, sorted by (method, address)."""
    xml: bytes
    """The event subtree as a standalone UTF-8 XML document (no declaration)."""

    def to_json_dict(self) -> dict[str, object]:
        return {
            "event": self.event,
            "targets": list(self.targets),
            "subscriptions": list(self.subscriptions),
            "receivers": [{"method": r.method, "address": r.address} for r in self.receivers],
            "xml": self.xml.decode(),
        }


@runtime_checkable
class NotificationSink(Protocol):
    """Somewhere notifications go. ``deliver`` is called once per (notification, receiver)."""

    async def deliver(self, receiver: Receiver, notification: Notification) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SinkStats:
    """Delivery counters of a sink."""

    delivered: int
    """Deliveries that succeeded."""
    failed: int
    """Deliveries that raised or were refused by the receiver."""


class MemorySink:
    """Keeps every delivery in a list (tests, embedding)."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[Receiver, Notification]] = []

    async def deliver(self, receiver: Receiver, notification: Notification) -> None:
        self.deliveries.append((receiver, notification))

    async def aclose(self) -> None:
        return None

    def stats(self) -> SinkStats:
        return SinkStats(len(self.deliveries), 0)


class CountingSink:
    """Base of the sinks that count their own deliveries: each delivery runs through
    :meth:`_counted`, which counts a success or a failure (and lets the error through)."""

    def __init__(self) -> None:
        self._ok = 0
        self._failed = 0

    async def _counted(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            r = fn(*args)
            if inspect.isawaitable(r):
                await r
        except Exception:
            self._failed += 1
            raise
        self._ok += 1

    async def aclose(self) -> None:
        return None

    def stats(self) -> SinkStats:
        return SinkStats(self._ok, self._failed)


class CallbackSink(CountingSink):
    """Calls a function (sync or async) per delivery."""

    def __init__(self, fn: Callable[[Receiver, Notification], object]) -> None:
        super().__init__()
        self._fn = fn

    async def deliver(self, receiver: Receiver, notification: Notification) -> None:
        await self._counted(self._fn, receiver, notification)


@dataclass(slots=True)
class Dispatcher:
    """Routes each (notification, receiver) to the sink registered for its method.

    Methods are compared case-insensitively; ``default`` takes the rest (None: counted as
    undeliverable). A failing delivery is counted and never stops the others.
    """

    sinks: Mapping[str, NotificationSink] = field(default_factory=dict)
    default: NotificationSink | None = None
    undeliverable: int = 0
    failures: list[tuple[Receiver, str]] = field(default_factory=list)

    def sink_for(self, receiver: Receiver) -> NotificationSink | None:
        for name, sink in self.sinks.items():
            if name.lower() == receiver.method.lower():
                return sink
        return self.default

    async def dispatch(self, notification: Notification) -> None:
        jobs: list[Awaitable[None]] = []
        targets: list[Receiver] = []
        for r in notification.receivers:
            sink = self.sink_for(r)
            if sink is None:
                self.undeliverable += 1
                continue
            jobs.append(sink.deliver(r, notification))
            targets.append(r)
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for r, res in zip(targets, results, strict=True):
            if isinstance(res, BaseException):
                self.failures.append((r, f"{type(res).__name__}: {res}"))
                del self.failures[:-1000]  # bounded

    async def aclose(self) -> None:
        seen: set[int] = set()
        for sink in [*self.sinks.values(), *([self.default] if self.default else [])]:
            if id(sink) not in seen:
                seen.add(id(sink))
                await sink.aclose()


class Publisher(Protocol):
    """What :class:`ClientSink` needs of a siftbus client (``siftbus.client.Client``)."""

    schema: Any

    async def publish(self, event: Mapping[str, Any]) -> int: ...


#: the event type a :class:`ClientSink` publishes, as a schema TOML table
CLIENT_SINK_SCHEMA = """\
[XmlNotification]
receiver = "string"
method = "string"
subscriptions = "string"
event = "int[0, 2147483647]"
xml = "string"
"""


class ClientSink(CountingSink):
    """Publishes every delivery as an ``XmlNotification`` event through a siftbus client.

    The broker's schema must declare the type (see :data:`CLIENT_SINK_SCHEMA`; it may
    leave out ``method``, ``subscriptions`` and ``event``). Receivers subscribe with a
    profile such as ``XmlNotification(receiver = "plant-7")`` and get the event XML in
    the ``xml`` attribute.
    """

    _FIELDS = ("receiver", "method", "subscriptions", "event", "xml")

    def __init__(self, client: Publisher, *, type_name: str = "XmlNotification") -> None:
        from siftbus.errors import ConfigError

        schema = client.schema
        etype = None
        if schema is not None:
            try:
                etype = schema[type_name]
            except (KeyError, LookupError):
                etype = None
        if etype is None:
            raise ConfigError(f"the broker schema has no event type {type_name!r}; add\n"
                              + CLIENT_SINK_SCHEMA)
        names = [a.name for a in etype.attributes]
        extra = [n for n in names if n not in self._FIELDS]
        if "receiver" not in names or "xml" not in names or extra:
            raise ConfigError(f"event type {type_name!r} must have the attributes receiver "
                              f"and xml and only those of {self._FIELDS}, has {names}")
        super().__init__()
        self._client = client
        self._type = type_name
        self._names = names

    async def deliver(self, receiver: Receiver, notification: Notification) -> None:
        values: dict[str, Any] = {
            "receiver": receiver.address, "method": receiver.method,
            "subscriptions": " ".join(notification.subscriptions),
            "event": notification.event, "xml": notification.xml.decode(),
        }
        event = {"type": self._type, **{n: values[n] for n in self._names}}
        await self._counted(self._client.publish, event)
