"""Profiles registered by MQTT clients through retained control messages.

A retained message on ``{control}/{subscriber}/{profile}`` registers a profile: its
payload is a profile line (``Temperature(room = 130, value > 21)``) or a JSON object
``{"profile": "...", "format": "json" | "cloudevents"}``; an empty retained message (the
MQTT way of deleting one) removes it. The profile id at the broker is
``{subscriber}.{profile}.{digest}`` (the digest of the payload), so a registration is
recognised again after a bridge restart, and a changed one is a new id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from siftbus.errors import ConfigError, ProfileError

from .mqtt_config import check_name

FORMATS = ("json", "cloudevents")
"""How notifications are written on the notification topic."""


@dataclass(frozen=True, slots=True)
class Registration:
    """One MQTT client's profile."""

    subscriber: str
    profile: str
    text: str
    """The profile line (without id)."""
    format: str
    pid: str
    """The profile's id at the broker."""


def parse_control(subscriber: str, profile: str, payload: bytes) -> Registration | None:
    """The registration a control message makes (``None``: it removes one)."""
    try:
        check_name(subscriber, "subscriber")
        check_name(profile, "profile")
    except ConfigError as exc:
        raise ProfileError(exc.message, field=exc.field) from None
    if not payload:
        return None
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ProfileError("a control message is UTF-8 text", field="payload") from None
    fmt = "json"
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise ProfileError(f"control message: bad JSON ({exc})", field="payload") \
                from None
        if not isinstance(obj, dict) or not isinstance(obj.get("profile"), str) \
                or set(obj) - {"profile", "format"}:
            raise ProfileError('control message: {"profile": "...", "format": "json"}',
                               field="payload")
        fmt = obj.get("format", "json")
        if fmt not in FORMATS:
            raise ProfileError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}",
                               field="format")
        text = obj["profile"].strip()
    if not text:
        raise ProfileError("control message: empty profile", field="payload")
    digest = hashlib.sha256(payload).hexdigest()[:10]
    return Registration(subscriber, profile, text, fmt, f"{subscriber}.{profile}.{digest}")


__all__ = ["FORMATS", "Registration", "parse_control"]
