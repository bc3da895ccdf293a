"""CloudEvents at the gateway (``docs/cloudevents.md``): publish bodies in structured
mode (``application/cloudevents+json``), batch mode (``application/cloudevents-batch+json``)
and binary mode (``ce-*`` headers, the data as body), read by the ``cloudevents`` SDK and
mapped to events by :mod:`siftbus.wire.cloudevents`; notifications written as CloudEvents
for consumers that ask (``?format=cloudevents``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from siftbus.errors import SiftbusError, WireError
from siftbus.model import Event, Schema, event_from_dict
from siftbus.wire.cloudevents import (
    BATCH,
    STRUCTURED,
    parse_batch,
    parse_binary,
    parse_structured,
)

FORMATS = ("json", "cloudevents")
"""How a streaming consumer receives notifications."""


def check_format(fmt: Any) -> bool:
    """Whether ``format`` asks for CloudEvents (``json``, the default, or
    ``cloudevents``; anything else is refused)."""
    if fmt is None or fmt == "json":
        return False
    if fmt == "cloudevents":
        return True
    raise WireError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}",
                    field="format")


def is_cloudevents_body(media: str, headers: Mapping[str, str]) -> bool:
    return media in (STRUCTURED, BATCH) or "ce-specversion" in headers


def cloudevents_items(raw: bytes, media: str, headers: Mapping[str, str],
                      schema: Schema) -> list[Event | SiftbusError]:
    """Each CloudEvent of a publish body as an event, or the error refusing it (a body
    that is no CloudEvent at all is one refused item)."""
    items: list[dict[str, Any] | SiftbusError]
    try:
        if media == BATCH:
            items = list(parse_batch(raw, schema))
        elif media == STRUCTURED:
            items = [parse_structured(raw, schema)]
        else:
            items = [parse_binary(headers, raw, schema)]
    except SiftbusError as exc:
        items = [exc]
    out: list[Event | SiftbusError] = []
    for item in items:
        if isinstance(item, SiftbusError):
            out.append(item)
            continue
        try:
            out.append(event_from_dict(item, schema))
        except SiftbusError as exc:
            out.append(exc)
    return out


__all__ = ["FORMATS", "check_format", "cloudevents_items", "is_cloudevents_body"]
