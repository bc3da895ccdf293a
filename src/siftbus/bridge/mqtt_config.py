"""The ``[mqtt]`` table of a network config: how MQTT topics become events and where
notifications go (``docs/mqtt.md``).

::

    [mqtt]
    notify = "siftbus/notify"      # egress: {notify}/{subscriber}/{profile}, QoS 1
    control = "siftbus/control"    # profiles: retained {control}/{subscriber}/{profile}
    client_id = "siftbus-bridge-{broker}"
    status = "siftbus/status"      # retained "online" on {status}/{client_id} while it runs

    [[mqtt.ingress]]               # first rule whose topic matches wins
    topic = "building/{room}/temperature"    # {attr}: a level that fills attribute attr
    type = "Temperature"

A rule's ``topic`` is an MQTT topic filter whose levels are literal text, ``+`` (any one
level), ``#`` (the rest, last only) or ``{name}`` (any one level, whose text fills the
attribute ``name``: read as a JSON number when it is one, else as a string). The payload
is a JSON object of the event's attributes; its ``type`` may be left out, and must be the
rule's when given; an attribute given both by a level and by the payload must agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from siftbus.errors import ConfigError, EventError
from siftbus.model import Schema
from siftbus.model.textio import parse_toml, read_text, split_lines

_LEVEL_ATTR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


@dataclass(frozen=True, slots=True)
class TopicRule:
    """One ingress rule: a topic filter, the event type, the levels that fill attributes."""

    topic: str
    """As written (``building/{room}/temperature``)."""
    type: str
    levels: tuple[str, ...]

    @property
    def filter(self) -> str:
        """The MQTT subscription filter (``building/+/temperature``)."""
        return "/".join("+" if _LEVEL_ATTR.fullmatch(x) else x for x in self.levels)

    def attributes(self, topic: str) -> dict[str, Any] | None:
        """The attributes the topic's levels give, or ``None`` when the topic does not
        match this rule."""
        parts = topic.split("/")
        out: dict[str, Any] = {}
        for i, lv in enumerate(self.levels):
            if lv == "#":
                return out
            if i >= len(parts):
                return None
            m = _LEVEL_ATTR.fullmatch(lv)
            if m is not None:
                out[m.group(1)] = level_value(parts[i])
            elif lv != "+" and lv != parts[i]:
                return None
        return out if len(parts) == len(self.levels) else None


def level_value(text: str) -> Any:
    """A topic level as an attribute value: a JSON number when it reads as one (an
    integer, or an exact decimal), else the text."""
    if _NUMBER.fullmatch(text):
        try:
            return int(text) if "." not in text else Decimal(text)
        except (ValueError, InvalidOperation):  # pragma: no cover - the regex rules out
            return text
    return text


def event_object(rule: TopicRule, topic: str, payload: Any) -> dict[str, Any]:
    """The event-file object for an MQTT message (payload already parsed as JSON)."""
    if not isinstance(payload, dict):
        raise EventError("an MQTT payload must be a JSON object of attributes")
    given = payload.get("type", rule.type)
    if given != rule.type:
        raise EventError(f"payload type {given!r} is not the topic's type {rule.type!r}",
                         field="type")
    levels = rule.attributes(topic) or {}
    data = {**payload, "type": rule.type}
    for k, v in levels.items():
        if k in payload and payload[k] != v:
            raise EventError(f"{k}: the topic says {v!r}, the payload {payload[k]!r}",
                             field=k)
        data[k] = v
    return data


def check_name(text: str, what: str) -> str:
    """A subscriber or profile name of the control topic: 1 to 64 letters, digits, ``_``
    or ``-`` (one MQTT level, usable in a profile id)."""
    if not _NAME.fullmatch(text):
        raise ConfigError(f"{what} {text!r}: 1 to 64 letters, digits, '_' or '-'",
                          field=what)
    return text


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """The bridge's side of the network config."""

    ingress: tuple[TopicRule, ...] = ()
    notify: str = "siftbus/notify"
    control: str = "siftbus/control"
    client_id: str = "siftbus-bridge-{broker}"
    keepalive: int = 30
    status: str = "siftbus/status"
    """The bridge's retained ``online`` on ``{status}/{client id}`` while it runs."""

    def rule_for(self, topic: str) -> TopicRule | None:
        """The first rule whose filter matches ``topic``."""
        for r in self.ingress:
            if r.attributes(topic) is not None:
                return r
        return None

    def notify_topic(self, subscriber: str, profile: str) -> str:
        return f"{self.notify}/{subscriber}/{profile}"

    def control_filter(self) -> str:
        return f"{self.control}/+/+"

    def control_names(self, topic: str) -> tuple[str, str] | None:
        """``(subscriber, profile)`` of a control topic, else ``None``."""
        head = self.control + "/"
        if not topic.startswith(head):
            return None
        parts = topic[len(head):].split("/")
        return (parts[0], parts[1]) if len(parts) == 2 else None


_DEFAULTS = MqttSettings()


def _line_of(text: str, needle: str) -> int | None:
    for i, line in split_lines(text):
        if needle in line:
            return i
    return None


def parse_mqtt(text: str, schema: Schema, *, source: str | None = None) -> MqttSettings:
    """The ``[mqtt]`` table of config text (defaults when absent); errors carry the line."""
    data = parse_toml(text, source=source, kind=ConfigError)
    table = data.get("mqtt", {})

    def fail(msg: str, needle: str, field: str | None = None) -> ConfigError:
        return ConfigError(f"[mqtt] {msg}", source=source, line=_line_of(text, needle),
                           field=field)

    if not isinstance(table, dict):
        raise fail("must be a table", "mqtt")
    unknown = set(table) - {"ingress", "notify", "control", "client_id", "keepalive", "status"}
    if unknown:
        key = sorted(unknown)[0]
        raise fail(f"unknown key {key!r}", key, key)
    strings: dict[str, str] = {}
    for key in ("notify", "control", "client_id", "status"):
        v = table.get(key, getattr(_DEFAULTS, key))
        if not isinstance(v, str) or not v or any(c in v for c in "+#\0"):
            raise fail(f"{key} must be a topic without wildcards", key, key)
        strings[key] = v.rstrip("/")
    keepalive = table.get("keepalive", 30)
    if isinstance(keepalive, bool) or not isinstance(keepalive, int) or keepalive < 5:
        raise fail("keepalive must be a whole number of seconds >= 5", "keepalive",
                   "keepalive")
    raw = table.get("ingress", [])
    if not isinstance(raw, list):
        raise fail("ingress must be an array of tables ([[mqtt.ingress]])", "ingress")
    rules = []
    for item in raw:
        if not isinstance(item, dict) or set(item) - {"topic", "type"}:
            raise fail("each [[mqtt.ingress]] has topic and type only", "ingress", "ingress")
        rules.append(_rule(item, schema, fail))
    return MqttSettings(tuple(rules), strings["notify"], strings["control"],
                        strings["client_id"], keepalive, strings["status"])


def _rule(item: Mapping[str, Any], schema: Schema, fail: Any) -> TopicRule:
    topic, tname = item.get("topic"), item.get("type")
    if not isinstance(tname, str) or tname not in schema:
        raise fail(f"ingress type {tname!r} is not an event type of the schema",
                   str(tname), "type")
    if not isinstance(topic, str) or not topic:
        raise fail("ingress topic must be a non-empty string", "topic", "topic")
    levels = tuple(topic.split("/"))
    etype = schema[tname]
    names = {a.name for a in etype.attributes}
    for i, lv in enumerate(levels):
        m = _LEVEL_ATTR.fullmatch(lv)
        if m is not None:
            if m.group(1) not in names:
                raise fail(f"topic {topic!r}: {tname} has no attribute {m.group(1)!r}",
                           topic, "topic")
        elif lv == "#" and i != len(levels) - 1:
            raise fail(f"topic {topic!r}: '#' only as the last level", topic, "topic")
        elif lv not in ("+", "#") and any(c in lv for c in "+#{}\0"):
            raise fail(f"topic {topic!r}: a level is text, '+', '#' or {{attribute}}",
                       topic, "topic")
    return TopicRule(topic, tname, levels)


def load_mqtt(path: str | Path, schema: Schema) -> MqttSettings:
    """The ``[mqtt]`` table of a network config file."""
    p = Path(path)
    return parse_mqtt(read_text(p, kind=ConfigError), schema, source=str(p))


__all__ = ["MqttSettings", "TopicRule", "check_name", "event_object", "level_value",
           "load_mqtt", "parse_mqtt"]
