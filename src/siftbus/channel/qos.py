"""Quality of service and admin properties (CosNotification), with per-level validation.

Levels: ``event`` (variable header), ``channel``, ``consumer_admin``, ``supplier_admin``,
``proxy_supplier`` (serves a consumer), ``proxy_consumer`` (serves a supplier). Lower
levels inherit the higher level's settings when they are created; a per-event value
overrides only the properties allowed per event. Times are ``TimeBase::TimeT``: 100 ns
units (``Timeout``, ``PacingInterval`` relative; ``StartTime``, ``StopTime`` absolute,
since 1582-10-15, as a number or a UtcT ``{"time": ...}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from siftbus.errors import PropertyError, UnsupportedAdmin, UnsupportedQoS

# Values
BEST_EFFORT, PERSISTENT = 0, 1
ANY_ORDER, FIFO_ORDER, PRIORITY_ORDER, DEADLINE_ORDER, LIFO_ORDER = 0, 1, 2, 3, 4
LOWEST_PRIORITY, HIGHEST_PRIORITY, DEFAULT_PRIORITY = -32767, 32767, 0
AND_OP, OR_OP = "AND_OP", "OR_OP"

EVENT_RELIABILITY = "EventReliability"
CONNECTION_RELIABILITY = "ConnectionReliability"
PRIORITY = "Priority"
START_TIME = "StartTime"
STOP_TIME = "StopTime"
TIMEOUT = "Timeout"
START_TIME_SUPPORTED = "StartTimeSupported"
STOP_TIME_SUPPORTED = "StopTimeSupported"
MAX_EVENTS_PER_CONSUMER = "MaxEventsPerConsumer"
ORDER_POLICY = "OrderPolicy"
DISCARD_POLICY = "DiscardPolicy"
MAXIMUM_BATCH_SIZE = "MaximumBatchSize"
PACING_INTERVAL = "PacingInterval"

MAX_QUEUE_LENGTH = "MaxQueueLength"
MAX_CONSUMERS = "MaxConsumers"
MAX_SUPPLIERS = "MaxSuppliers"
REJECT_NEW_EVENTS = "RejectNewEvents"

_LONG = (0, 2**31 - 1)
_TIMET = (0, 2**63 - 1)

# name -> (kind, range, levels)
_E, _C, _CA, _SA, _PS, _PC = ("event", "channel", "consumer_admin", "supplier_admin",
                              "proxy_supplier", "proxy_consumer")
_ALL = {_C, _CA, _SA, _PS, _PC}
_CONSUMER_SIDE = {_C, _CA, _PS}
QOS_TABLE: dict[str, tuple[str, tuple[int, int], frozenset[str]]] = {
    EVENT_RELIABILITY: ("short", (0, 1), frozenset({_E, _C})),
    CONNECTION_RELIABILITY: ("short", (0, 1), frozenset(_ALL)),
    PRIORITY: ("short", (LOWEST_PRIORITY, HIGHEST_PRIORITY), frozenset(_ALL | {_E})),
    START_TIME: ("utc", _TIMET, frozenset({_E})),
    STOP_TIME: ("utc", _TIMET, frozenset({_E})),
    TIMEOUT: ("timet", _TIMET, frozenset(_ALL | {_E})),
    START_TIME_SUPPORTED: ("bool", (0, 1), frozenset(_ALL)),
    STOP_TIME_SUPPORTED: ("bool", (0, 1), frozenset(_ALL)),
    MAX_EVENTS_PER_CONSUMER: ("long", _LONG, frozenset(_CONSUMER_SIDE)),
    ORDER_POLICY: ("short", (0, 3), frozenset(_CONSUMER_SIDE)),
    DISCARD_POLICY: ("short", (0, 4), frozenset(_CONSUMER_SIDE)),
    MAXIMUM_BATCH_SIZE: ("long", (1, 2**31 - 1), frozenset(_CONSUMER_SIDE)),
    PACING_INTERVAL: ("timet", _TIMET, frozenset(_CONSUMER_SIDE)),
}

DEFAULT_QOS: dict[str, Any] = {
    EVENT_RELIABILITY: BEST_EFFORT,
    CONNECTION_RELIABILITY: BEST_EFFORT,
    PRIORITY: DEFAULT_PRIORITY,
    TIMEOUT: 0,
    START_TIME_SUPPORTED: True,
    STOP_TIME_SUPPORTED: True,
    MAX_EVENTS_PER_CONSUMER: 0,
    ORDER_POLICY: PRIORITY_ORDER,
    DISCARD_POLICY: FIFO_ORDER,
    MAXIMUM_BATCH_SIZE: 1,
    PACING_INTERVAL: 0,
}

ADMIN_TABLE: dict[str, tuple[str, tuple[int, int]]] = {
    MAX_QUEUE_LENGTH: ("long", _LONG),
    MAX_CONSUMERS: ("long", _LONG),
    MAX_SUPPLIERS: ("long", _LONG),
    REJECT_NEW_EVENTS: ("bool", (0, 1)),
}
DEFAULT_ADMIN: dict[str, Any] = {MAX_QUEUE_LENGTH: 0, MAX_CONSUMERS: 0, MAX_SUPPLIERS: 0,
                                 REJECT_NEW_EVENTS: False}


def _check_value(name: str, kind: str, rng: tuple[int, int], value: Any) -> PropertyError | None:
    if kind == "bool":
        if not isinstance(value, bool):
            return PropertyError("BAD_TYPE", name, None, "expected a boolean")
        return None
    if kind == "utc" and isinstance(value, Mapping):
        value = value.get("time")
    if not isinstance(value, int) or isinstance(value, bool):
        return PropertyError("BAD_TYPE", name, rng, "expected an integer")
    if not rng[0] <= value <= rng[1]:
        return PropertyError("BAD_VALUE", name, rng, f"{value} is outside {rng[0]}..{rng[1]}")
    return None


def validate_qos(props: Mapping[str, Any], level: str, *, persistent_ok: bool = True,
                 channel_connection: int | None = None, sequence: bool = True,
                 current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check ``props`` for ``level``; return the normalised dict or raise UnsupportedQoS.

    ``persistent_ok``: a durable store exists. ``channel_connection``: the channel's
    ConnectionReliability (a lower level cannot be more reliable). ``sequence``: the proxy
    is a sequence proxy (MaximumBatchSize/PacingInterval apply only there). ``current``:
    the settings the object already has, for the combination checks.
    """
    if not isinstance(props, Mapping):
        raise UnsupportedQoS([PropertyError("BAD_TYPE", "qos", None, "expected a mapping")])
    errors: list[PropertyError] = []
    out: dict[str, Any] = {}
    for name, value in props.items():
        spec = QOS_TABLE.get(name)
        if spec is None:
            errors.append(PropertyError("BAD_PROPERTY", str(name), None, "unknown QoS property"))
            continue
        kind, rng, levels = spec
        if level not in levels:
            errors.append(PropertyError("UNSUPPORTED_PROPERTY", name, None,
                                        f"not settable on a {level.replace('_', ' ')}"))
            continue
        if (level == _PS and not sequence
                and name in (MAXIMUM_BATCH_SIZE, PACING_INTERVAL)):
            errors.append(PropertyError("UNSUPPORTED_PROPERTY", name, None,
                                        "applies to sequence proxies only"))
            continue
        err = _check_value(name, kind, rng, value)
        if err is not None:
            errors.append(err)
            continue
        if name in (EVENT_RELIABILITY, CONNECTION_RELIABILITY) and value == PERSISTENT:
            if not persistent_ok:
                errors.append(PropertyError("UNAVAILABLE_VALUE", name, (0, 0),
                                            "Persistent needs a durable store"))
                continue
            if (name == CONNECTION_RELIABILITY and channel_connection is not None
                    and channel_connection != PERSISTENT):
                errors.append(PropertyError("UNAVAILABLE_VALUE", name, (0, 0),
                                            "the channel is BestEffort"))
                continue
        out[name] = value
    if level in (_C, _E) or EVENT_RELIABILITY in out:
        merged = {**(current or {}), **out}
        if (level == _C and merged.get(EVENT_RELIABILITY) == PERSISTENT
                and merged.get(CONNECTION_RELIABILITY, BEST_EFFORT) != PERSISTENT):
            errors.append(PropertyError(
                "UNSUPPORTED_VALUE", EVENT_RELIABILITY, (0, 0),
                "EventReliability Persistent needs ConnectionReliability Persistent"))
    if errors:
        raise UnsupportedQoS(errors)
    return out


def validate_admin(props: Mapping[str, Any]) -> dict[str, Any]:
    """Check channel admin properties; raise UnsupportedAdmin."""
    if not isinstance(props, Mapping):
        raise UnsupportedAdmin([PropertyError("BAD_TYPE", "admin", None, "expected a mapping")])
    errors: list[PropertyError] = []
    out: dict[str, Any] = {}
    for name, value in props.items():
        spec = ADMIN_TABLE.get(name)
        if spec is None:
            errors.append(PropertyError("BAD_PROPERTY", str(name), None,
                                        "unknown admin property"))
            continue
        err = _check_value(name, spec[0], spec[1], value)
        if err is not None:
            errors.append(err)
        else:
            out[name] = value
    if errors:
        raise UnsupportedAdmin(errors)
    return out


def qos_ranges(level: str) -> dict[str, tuple[Any, Any]]:
    """The properties settable at ``level`` and their ranges (validate_qos' answer)."""
    out: dict[str, tuple[Any, Any]] = {}
    for name, (kind, rng, levels) in QOS_TABLE.items():
        if level in levels:
            out[name] = (False, True) if kind == "bool" else rng
    return out


def utc_time(value: Any) -> int | None:
    """A UtcT (number or ``{"time": n}``) as its TimeT, or None if it is neither."""
    if isinstance(value, Mapping):
        value = value.get("time")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


__all__ = [
    "ADMIN_TABLE",
    "AND_OP",
    "DEFAULT_ADMIN",
    "DEFAULT_QOS",
    "OR_OP",
    "QOS_TABLE",
    "qos_ranges",
    "utc_time",
    "validate_admin",
    "validate_qos",
]
