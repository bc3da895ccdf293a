"""CloudEvents 1.0 envelopes for siftbus events (``docs/cloudevents.md``), with the
``cloudevents`` SDK (no I/O here).

The rule, both ways:

* ``type`` names the event type: the schema's type itself (``Temperature``) or a
  reverse-DNS name ending in ``.`` and the type (``com.example.Temperature``);
* ``data`` is a JSON object of the event's attributes (``datacontenttype`` absent or a
  JSON type); a ``type`` key inside it, if any, must agree;
* written by siftbus: ``type`` is the event type, ``source`` ``/siftbus/{publisher}``,
  ``id`` ``{publisher}/{seq}``, ``time`` the publication time, ``subject`` the
  subscription, and the extension ``siftbusn`` the session number (when there is one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

from siftbus.errors import EventError, SiftbusError
from siftbus.model import Event, Schema, event_from_dict

if TYPE_CHECKING:  # the SDK is imported when a CloudEvent is read or written
    from cloudevents.core.base import BaseCloudEvent
    from cloudevents.core.formats.json import JSONFormat

STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"


@cache
def _format() -> JSONFormat:
    from cloudevents.core.formats.json import JSONFormat

    return JSONFormat()


def type_name(ce_type: str, schema: Schema) -> str:
    """The schema's event type a CloudEvents ``type`` names (see the module's rule)."""
    if ce_type in schema:
        return ce_type
    tail = ce_type.rpartition(".")[2]
    if tail and tail in schema:
        return tail
    raise EventError(f"CloudEvents type {ce_type!r} names no event type of the schema",
                     field="type")


def event_object(ce: BaseCloudEvent, schema: Schema) -> dict[str, Any]:
    """The event-file object of a parsed CloudEvent."""
    tname = type_name(ce.get_type(), schema)
    data = ce.get_data()
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):
            raise EventError("CloudEvents data is not JSON", field="data") from None
    if not isinstance(data, dict):
        raise EventError("CloudEvents data must be a JSON object of attributes",
                         field="data")
    if data.get("type", tname) != tname:
        raise EventError(f"data type {data['type']!r} is not the CloudEvents type {tname!r}",
                         field="type")
    # floats as exact decimals, as the event-file reader has them
    return {**{k: Decimal(repr(v)) if isinstance(v, float) else v for k, v in data.items()},
            "type": tname}


def _read(text: bytes | str) -> BaseCloudEvent:
    try:
        return _format().read(None, text)
    except Exception as exc:  # the SDK raises ValueError, KeyError and its own kinds
        raise EventError(f"not a CloudEvent: {exc}") from None


def parse_structured(text: bytes | str, schema: Schema) -> dict[str, Any]:
    """One structured-mode CloudEvent (JSON) as an event-file object."""
    return event_object(_read(text), schema)


def is_cloudevent_line(text: str) -> bool:
    """Whether a JSON line is a structured CloudEvent rather than an event-file object
    (the key ``specversion``: no event type of a schema can have it as data)."""
    return '"specversion"' in text


def parse_line(text: str, schema: Schema, *, source: str | None = None,
               lineno: int | None = None) -> Event:
    """A structured CloudEvent line as an event; errors carry source and line."""
    try:
        return event_from_dict(parse_structured(text, schema), schema)
    except SiftbusError as exc:
        raise exc.located(source=source, line=lineno, column=1) from None


def event_lines(lines: Iterable[str], schema: Schema, *, source: str | None = None
                ) -> Iterator[str]:
    """Event-file lines for CloudEvents JSON lines (blank lines stay blank, so events
    keep their numbers); the first bad line raises, located."""
    for i, line in enumerate(lines, 1):
        yield parse_line(line, schema, source=source, lineno=i).to_json() \
            if line.strip() else ""


def parse_batch(text: bytes | str, schema: Schema) -> list[dict[str, Any] | EventError]:
    """A batch (a JSON array of structured CloudEvents): each item's event-file object,
    or the error that refuses it."""
    try:
        items = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise EventError(f"a CloudEvents batch is a JSON array: {exc}") from None
    if not isinstance(items, list):
        raise EventError("a CloudEvents batch is a JSON array")
    out: list[dict[str, Any] | EventError] = []
    for item in items:
        try:
            out.append(parse_structured(json.dumps(item), schema))
        except EventError as exc:
            out.append(exc)
    return out


def parse_binary(headers: Mapping[str, str], body: bytes, schema: Schema) -> dict[str, Any]:
    """A binary-mode CloudEvent (``ce-*`` headers, the data as body)."""
    from cloudevents.core.bindings.http import HTTPMessage, from_binary

    try:
        ce = from_binary(HTTPMessage(dict(headers), body), _format())
    except Exception as exc:  # the SDK raises ValueError, KeyError and its own kinds
        raise EventError(f"not a CloudEvent: {exc}") from None
    return event_object(ce, schema)


def is_cloudevent(obj: Any) -> bool:
    """Whether a parsed JSON value looks like a structured CloudEvent."""
    return isinstance(obj, dict) and "specversion" in obj and "type" in obj


def notification_bytes(event: Event, *, src: str, seq: int, ts: float,
                       subscription: str | None = None, number: int | None = None) -> bytes:
    """A notification as a structured CloudEvent, written by the SDK's JSON format."""
    attrs: dict[str, Any] = {
        "specversion": "1.0", "type": event.type_name, "source": f"/siftbus/{src}",
        "id": f"{src}/{seq}", "time": datetime.fromtimestamp(ts, UTC),
        "datacontenttype": "application/json"}
    if subscription is not None:
        attrs["subject"] = subscription
    if number is not None:
        attrs["siftbusn"] = number
    data = event.to_json_dict()
    del data["type"]
    from cloudevents.core.v1.event import CloudEvent

    return _format().write(CloudEvent(attrs, data))


def _time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def from_notification(msg: dict[str, Any]) -> dict[str, Any]:
    """The gateway's notification object (``{"type": "notification", "subscription",
    "src", "seq", "ts", "event", "n"?}``) as a structured CloudEvent's JSON object;
    anything else unchanged."""
    if msg.get("type") != "notification":
        return msg
    data = dict(msg["event"])
    tname = data.pop("type")
    src = msg["src"]
    out = {"specversion": "1.0", "type": tname, "source": f"/siftbus/{src}",
           "id": f"{src}/{msg['seq']}", "time": _time(msg["ts"]),
           "datacontenttype": "application/json", "subject": msg["subscription"]}
    if "n" in msg:
        out["siftbusn"] = msg["n"]
    out["data"] = data
    return out


def notification_event(event: Event, *, src: str, seq: int, ts: float,
                       subscription: str | None = None,
                       number: int | None = None) -> dict[str, Any]:
    """:func:`notification_bytes` as a JSON object (for a stream of JSON messages)."""
    out: dict[str, Any] = json.loads(notification_bytes(
        event, src=src, seq=seq, ts=ts, subscription=subscription, number=number))
    return out


__all__ = ["BATCH", "STRUCTURED", "event_lines", "event_object", "from_notification",
           "is_cloudevent", "is_cloudevent_line", "notification_bytes", "notification_event",
           "parse_batch", "parse_binary", "parse_line", "parse_structured", "type_name"]
