"""Frozen state records: what channel objects save and restore themselves from.

Every persistent object writes its state as one of these records (``snapshot()``) and is
rebuilt from it (``restore(...)``); the store keeps records, as JSON documents and rows,
and never sees the objects. The JSON form is the store's format (also the one written
before these records existed, which is still read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Props = tuple[tuple[str, Any], ...]
"""QoS or admin properties as (name, value) pairs."""
Attached = tuple[tuple[int, int], ...]
"""Filters attached to an object: (the object's FilterID, the filter's id) pairs."""


_KINDS = frozenset({"ANY_EVENT", "STRUCTURED_EVENT", "SEQUENCE_EVENT"})


def props(values: Mapping[str, Any]) -> Props:
    return tuple(values.items())


def _attached(data: Any) -> Attached:
    return tuple((int(k), int(fid)) for k, fid in dict(data or {}).items())


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class ProxyState:
    """A proxy (either side) of a persistent channel."""

    id: int
    mode: str
    """``push`` or ``pull``."""
    kind: str
    """ANY_EVENT, STRUCTURED_EVENT or SEQUENCE_EVENT."""
    qos: Props
    connected: bool
    has_client: bool
    """An in-process client object was connected (it does not survive a restart)."""
    suspended: bool
    keyed: bool
    """Reachable by id (obtain_notification_*), not a CosEvent-style proxy."""
    filters: Attached = ()
    next_filter: int = 1
    priority_filter: int | None = None
    lifetime_filter: int | None = None
    updates: bool = False
    """``obtain_*_types`` asked for updates."""
    delivered: int = 0
    cls: str = ""
    """The proxy's class name (for people reading the store)."""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "cls": self.cls, "mode": self.mode, "kind": self.kind,
                "qos": dict(self.qos), "connected": self.connected,
                "client": self.has_client, "suspended": self.suspended, "keyed": self.keyed,
                "filters": {str(k): fid for k, fid in self.filters},
                "next_filter": self.next_filter, "priority_filter": self.priority_filter,
                "lifetime_filter": self.lifetime_filter, "updates": self.updates,
                "delivered": self.delivered}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProxyState:
        name = str(d.get("cls", ""))
        mode = d.get("mode") or ("push" if "Push" in name else "pull")
        if mode not in ("push", "pull") or d["kind"] not in _KINDS:
            raise ValueError(f"proxy {d.get('id')}: unknown mode {mode!r} or kind "
                             f"{d['kind']!r}")
        return cls(int(d["id"]), str(mode), str(d["kind"]), props(d["qos"]),
                   bool(d["connected"]), bool(d["client"]), bool(d["suspended"]),
                   bool(d["keyed"]), _attached(d.get("filters")),
                   int(d.get("next_filter", 1)), _opt_int(d.get("priority_filter")),
                   _opt_int(d.get("lifetime_filter")), bool(d.get("updates")),
                   int(d.get("delivered", 0)), name)


@dataclass(frozen=True, slots=True)
class AdminState:
    """A supplier or consumer admin with its proxies."""

    side: str
    """``consumer`` (a ConsumerAdmin) or ``supplier``."""
    id: int
    op: str
    qos: Props
    filters: Attached = ()
    next_filter: int = 1
    priority_filter: int | None = None
    lifetime_filter: int | None = None
    proxies: tuple[ProxyState, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side, "id": self.id, "op": self.op, "qos": dict(self.qos),
                "filters": {str(k): fid for k, fid in self.filters},
                "next_filter": self.next_filter, "priority_filter": self.priority_filter,
                "lifetime_filter": self.lifetime_filter,
                "proxies": [p.to_json() for p in self.proxies]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AdminState:
        if d["side"] not in ("consumer", "supplier"):
            raise ValueError(f"admin {d.get('id')}: unknown side {d['side']!r}")
        return cls(str(d["side"]), int(d["id"]), str(d["op"]), props(d["qos"]),
                   _attached(d.get("filters")), int(d.get("next_filter", 1)),
                   _opt_int(d.get("priority_filter")), _opt_int(d.get("lifetime_filter")),
                   tuple(ProxyState.from_json(p) for p in d.get("proxies", ())))


@dataclass(frozen=True, slots=True)
class ChannelState:
    """A persistent channel: QoS, admin properties, admins, announced types, id counters."""

    id: int
    qos: Props
    admin: Props
    next_admin: int
    next_proxy: int
    admins: tuple[AdminState, ...]
    subscriptions: tuple[tuple[str, str, int], ...] = ()
    offers: tuple[tuple[str, str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "qos": dict(self.qos), "admin": dict(self.admin),
                "next_admin": self.next_admin, "next_proxy": self.next_proxy,
                "admins": [a.to_json() for a in self.admins],
                "subs": [list(s) for s in self.subscriptions],
                "offers": [list(o) for o in self.offers]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ChannelState:
        return cls(int(d["id"]), props(d["qos"]), props(d["admin"]), int(d["next_admin"]),
                   int(d["next_proxy"]), tuple(AdminState.from_json(a) for a in d["admins"]),
                   tuple((str(a), str(b), int(n)) for a, b, n in d.get("subs", ())),
                   tuple((str(a), str(b), int(n)) for a, b, n in d.get("offers", ())))


@dataclass(frozen=True, slots=True)
class ConstraintState:
    """One constraint of a filter: its id, event types, expression and (mapping filters)
    value."""

    id: int
    event_types: tuple[tuple[str, str], ...]
    expression: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class FilterState:
    """A filter object (or mapping filter) with its constraints."""

    id: int
    grammar: str
    constraints: tuple[ConstraintState, ...] = ()
    mapping: bool = False
    default_value: Any = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id, "mapping": self.mapping, "grammar": self.grammar,
            "constraints": [[c.id, {"event_types": [list(t) for t in c.event_types],
                                    "constraint_expr": c.expression}, c.value]
                            for c in self.constraints]}
        if self.mapping:
            d["default_value"] = self.default_value
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any], grammar: str = "EXTENDED_TCL") -> FilterState:
        cons = []
        for cid, exp, value in d.get("constraints", ()):
            types = tuple((str(a), str(b)) for a, b in exp.get("event_types", ()))
            cons.append(ConstraintState(int(cid), types, str(exp.get("constraint_expr", "")),
                                        value))
        return cls(int(d["id"]), str(d.get("grammar", grammar)), tuple(cons),
                   bool(d.get("mapping")), d.get("default_value"))


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A persistent event still to be delivered to one ProxySupplier."""

    channel: int
    proxy: int
    seq: int
    priority: int
    deadline: int | None
    start: int | None
    body: bytes
    """The msgpack wire form (:meth:`siftbus.channel.envelope.Envelope.packed`)."""


@dataclass(frozen=True, slots=True)
class StoreContents:
    """Everything a store holds, as records (what a factory restores from)."""

    channels: Sequence[ChannelState]
    filters: Sequence[FilterState]
    events: Sequence[StoredEvent]
    """Ordered by channel, then sequence number."""
    reserved: Mapping[int, int]
    """Per channel, the sequence numbers below this are reserved (used or skipped)."""


__all__ = ["AdminState", "Attached", "ChannelState", "ConstraintState", "FilterState",
           "Props", "ProxyState", "StoreContents", "StoredEvent", "props"]
