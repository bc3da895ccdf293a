"""Retained state at a broker: its clients' requests and its limits.

Clients publish, update and withdraw *persistent notifications* and subscribe *temporal
filters* (``TPUB`` and ``TSUB``/``TUNSUB`` from a client, answered by an ``ACK`` once
complete); :class:`RetainedState` checks them against the broker's
:class:`RetainedLimits` and the ``[security]`` policy and hands them to the routing of
:mod:`siftbus.broker.retained_routing`, which stores them and forwards them through the
broker network. The protocol is described and proven in ``docs/temporal.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from siftbus.errors import ConfigError, DuplicateProfileError, UnknownProfileError, WireError
from siftbus.lang.profile import format_profile
from siftbus.model import Profile
from siftbus.temporal.notification import PersistentNotification, TemporalFilter
from siftbus.temporal.text import notification_to_json
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.profiles import check_count
from siftbus.wire.retained import check_id, decode_filter, decode_publication

from .retained_routing import RetainedHost, RetainedRouting

TYPES = (MsgType.TSUB, MsgType.TUNSUB, MsgType.TPUB, MsgType.TNOTIFY)
"""The message types this module handles."""


@dataclass(frozen=True, slots=True)
class RetainedLimits:
    """What one broker holds of retained state (each exceeded with one ERROR)."""

    max_per_client: int = 10_000
    """Notifications one client name may have published at this broker at once."""
    max_total: int = 1_000_000
    """Notifications all clients together may have published at this broker at once (not
    yet active ones included; what it caches from its neighbours does not count)."""
    max_filters_per_client: int = 10_000
    """Temporal filters one client may hold at once."""

    def __post_init__(self) -> None:
        for name in ("max_per_client", "max_total", "max_filters_per_client"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive whole number, got {v!r}",
                                  field=name)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any]) -> RetainedLimits:
        """Limits from a config table (``[network.retained]``); unknown keys are errors."""
        known = ("max_per_client", "max_total", "max_filters_per_client")
        for key in table:
            if key not in known:
                raise ConfigError(f"unknown retained limit {key!r} (limits: "
                                  f"{', '.join(known)})", field=key)
        return cls(**dict(table))


DEFAULT_RETAINED_LIMITS = RetainedLimits()


class RetainedState(RetainedRouting):
    """One broker's retained state: the routing, plus its clients' requests."""

    def __init__(self, host: RetainedHost, *, protocol: str,
                 toward: Callable[[Profile], Collection[str] | None],
                 direction: Callable[[str], str | None] | None = None,
                 limits: RetainedLimits | None = None) -> None:
        super().__init__(host, protocol=protocol, toward=toward, direction=direction)
        self.limits = limits or RetainedLimits()

    # ---- entry points ------------------------------------------------------------------

    def handle(self, link: str, msg: Message, corr: int | None) -> None:
        """One TSUB, TUNSUB or TPUB from a client or a neighbour (one atomic step)."""
        self.tick()
        try:
            if self.host.is_broker(link):
                self._from_broker(link, msg)
            else:
                self._from_client(link, msg, corr)
        finally:
            self._arm()

    # ---- clients ---------------------------------------------------------------------

    def _from_client(self, link: str, msg: Message, corr: int | None) -> None:
        body, client = msg.body, link[1:]
        if msg.type is MsgType.TPUB:
            ids = self._client_publish(client, body)
            self._ack(link, corr, ids=ids)
        elif msg.type is MsgType.TSUB:
            items = check_count(get(body, "filters", list), "filters", self.host.limits)
            fs = [decode_filter(it, self.host.schema, self.host.limits) for it in items]
            self._check_rights(link, "subscribe", [f.profile for f in fs])
            gids = [f"{self.host.name}/{client}/{f.id}" for f in fs]
            mine = self._filters_of[link]
            if mine + len(fs) > self.limits.max_filters_per_client:
                raise WireError(f"{client} would hold {mine + len(fs)} temporal filters, "
                                f"over the limit of {self.limits.max_filters_per_client}",
                                field="max_filters_per_client")
            if len(set(gids)) != len(gids):
                raise DuplicateProfileError("a filter id repeats in one request")
            for f, gid in zip(fs, gids, strict=True):
                if gid in self.src:
                    raise DuplicateProfileError(f"filter id {f.id!r} is already subscribed",
                                                field=f.id)
            self._collect = []
            try:
                for f, gid in zip(fs, gids, strict=True):
                    self.local[gid] = f.id
                    self.hold(gid)
                    self._add_entry(TemporalFilter(f.profile.with_id(gid, client),
                                                   f.semantics), link)
                # what the answer takes from this broker's cache is confirmed by the
                # brokers it came from (a withdrawal on its way arrives first)
                self._flush({n.id for gid in gids for n in self.df.collection(gid)})
            except BaseException:
                for gid in gids:  # what was installed answers as it is, held no longer
                    self.answer(gid)
                raise
            finally:
                collected, self._collect = self._collect, None

            def answered() -> None:
                for gid in gids:
                    self.answer(gid)
                self._ack(link, corr, ids=[f.id for f in fs])

            self._wait(collected, answered)
        elif msg.type is MsgType.TUNSUB:
            ids = [str(i) for i in check_count(get(body, "ids", list), "ids",
                                               self.host.limits)]
            gids = [f"{self.host.name}/{client}/{i}" for i in ids]
            for i, gid in zip(ids, gids, strict=True):
                if self.src.get(gid) != link:
                    raise UnknownProfileError(f"{client} has no temporal filter {i!r}",
                                              field=i)
            for gid in gids:
                self._remove_entry(gid)
            self._ack(link, corr, ids=ids)
        else:
            raise WireError(f"{msg.type.name} is not a client request")

    def _client_publish(self, client: str, body: dict[str, Any]) -> list[str]:
        op = get(body, "op", str, where="TPUB")
        home = f"{self.host.name}/{client}"
        if op == "withdraw":
            ids = [check_id(i, "notification") for i in
                   check_count(get(body, "ids", list), "ids", self.host.limits)]
            gids = [f"{home}/{i}" for i in ids]
            for i, gid in zip(ids, gids, strict=True):
                if gid not in self._published[client]:
                    raise UnknownProfileError(f"{client} has no notification {i!r}", field=i)
            for gid in gids:
                self._dispatch(gid, self.df.withdraw(gid), "withdrawn")
                self._forget(gid)
            return ids
        if op not in ("publish", "update"):
            raise WireError(f"TPUB op must be publish, update or withdraw, not {op[:50]!r}",
                            field="op")
        now = self.df.now
        items = check_count(get(body, "notes", list), "notes", self.host.limits)
        notes = []
        for it in items:
            lid, box, validity = decode_publication(it, self.host.schema, self.host.limits, now)
            gid = f"{home}/{lid}"
            if validity.expired(now):
                raise WireError(f"notification {lid!r} has already expired", field="end")
            notes.append(PersistentNotification(gid, box, home, validity))
        gids = [n.id for n in notes]
        if len(set(gids)) != len(gids):
            raise DuplicateProfileError("a notification id repeats in one request")
        self._check_rights(f"@{client}", "publish", [n.subspace for n in notes])
        held = self._published[client]
        for n in notes:
            lid = n.id[len(home) + 1:]
            if op == "publish" and self.df.get(n.id) is not None:
                raise DuplicateProfileError(f"notification {lid!r} is already published "
                                            "(update or withdraw it)", field=lid)
            if op == "update" and n.id not in held:
                raise UnknownProfileError(f"{client} has no notification {lid!r}", field=lid)
        if op == "publish":
            if len(held) + len(notes) > self.limits.max_per_client:
                raise WireError(f"{client} would hold {len(held) + len(notes)} retained "
                                f"notifications, over the limit of "
                                f"{self.limits.max_per_client}", field="max_per_client")
            here = self.published_here
            if here + len(notes) > self.limits.max_total:
                raise WireError(f"broker {self.host.name} would hold {here + len(notes)} "
                                f"notifications published by its clients, over the limit "
                                f"of {self.limits.max_total}", field="max_total")
        for n in notes:
            if op == "publish":
                self.origin[n.id] = ""
                held.add(n.id)
                self._dispatch(n.id, self.df.publish(n), None)
            else:
                self._dispatch(n.id, self.df.update(n), "updated")
        return [n.id[len(home) + 1:] for n in notes]

    @property
    def published_here(self) -> int:
        """Notifications this broker's clients have published here and that still hold
        (what ``max_total`` counts)."""
        return sum(len(s) for s in self._published.values())

    def _check_rights(self, link: str, action: str, boxes: list[Profile]) -> None:
        """With a ``[security]`` policy: a persistent notification must lie inside its
        publisher's publish right, a temporal filter inside its subscriber's subscribe
        right (whole: its semantics are defined on the filter, so it is not narrowed)."""
        access = self.host.access
        if access.open:
            return
        rights = access.rights(link)
        allowed = rights.publish if action == "publish" else rights.subscribe
        what = "notification" if action == "publish" else "temporal filter"
        for p in boxes:
            if not allowed.covers(p):
                raise access.guard.deny(access.principal(link), f"retain ({action})",
                                        f"{p.id} ({p.type_name})", f"the {what} reaches "
                                        f"outside the {action} right")

    def _ack(self, link: str, corr: int | None, **fields: Any) -> None:
        if corr is not None and link in self.host.clients:
            self.host.transport_send(link, Message(MsgType.ACK, {"corr": corr, **fields}))

    # ---- neighbours --------------------------------------------------------------------
    # ---- inspection ------------------------------------------------------------------------

    def service(self, method: str, args: dict[str, Any], caller: str) -> Any:
        """The ``retained`` service: ``stats``, ``notifications``, ``filters``."""
        self.tick()
        if method == "stats":
            return {"notifications": self.df.notification_count,
                    "published_here": self.published_here,
                    "filters": self.df.filter_count, "orphans": len(self.orphans),
                    **self.counters}
        if method == "notifications":
            return [{**notification_to_json(n), "origin": self.origin.get(n.id, "")}
                    for n in self.df.notifications()]
        if method == "filters":
            return [{"id": f.id, "source": self.src[f.id], "semantics": f.semantics.value,
                     "text": format_profile(f.profile)} for f in self.df.filter_list()]
        raise WireError(f"the retained service has no method {method!r} "
                        "(stats, notifications, filters)", field="method")


__all__ = ["TYPES", "RetainedLimits", "RetainedState"]
