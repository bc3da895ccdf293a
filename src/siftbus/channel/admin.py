"""Admins (CosNotifyChannelAdmin): a SupplierAdmin creates the ProxyConsumers suppliers
use, a ConsumerAdmin the ProxySuppliers consumers use. Each holds filters and QoS that
its proxies inherit, and combines its filters with each proxy's by its
InterFilterGroupOperator: AND_OP needs both to pass, OR_OP either; an object without
filters passes everything (also under OR_OP, as the specification reads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.envelope import Envelope
from siftbus.channel.event_types import type_list
from siftbus.channel.filter import Filter, MappingFilter
from siftbus.channel.node import ChannelHooks, MappingFilterHolder, Node
from siftbus.channel.proxy import (
    ANY_EVENT,
    PULL_CONSUMERS,
    PULL_SUPPLIERS,
    PUSH_CONSUMERS,
    PUSH_SUPPLIERS,
    Proxy,
    ProxyConsumer,
    ProxyPullConsumer,
    ProxyPullSupplier,
    ProxyPushConsumer,
    ProxyPushSupplier,
    ProxySupplier,
)
from siftbus.channel.state import AdminState, ProxyState, props
from siftbus.errors import ClientTypeError, ObjectNotExist, ProxyNotFound

FilterLookup = Callable[[int | None], Filter | None]


def _match_any(filters: list[Filter], view: Any) -> bool | None:
    """Whether some filter matches; None when there are no (live) filters."""
    if not filters:
        return None
    return any(f.first_match(view) is not None for f in filters)


def combine(op: str, admin: bool | None, proxy: bool | None) -> bool:
    """InterFilterGroupOperator: None = no filters (passes everything)."""
    a = admin is not False
    p = proxy is not False
    return (a and p) if op == Q.AND_OP else (a or p)


class Admin(Node, ABC):
    """What both admins share: proxies by id, the operator, destruction, the snapshot."""

    def __init__(self, channel: ChannelHooks, admin_id: int, op: str,
                 qos: Mapping[str, Any]) -> None:
        super().__init__(channel, admin_id, qos)
        if op not in (Q.AND_OP, Q.OR_OP):
            raise ValueError(f"InterFilterGroupOperator must be AND_OP or OR_OP, not {op!r}")
        self.op = op
        self._proxies: dict[int, Proxy] = {}

    @property
    def MyOperator(self) -> str:
        return self.op

    @property
    def priority_filter(self) -> MappingFilter | None:
        return None

    @property
    def lifetime_filter(self) -> MappingFilter | None:
        return None

    @property
    def has_mapping_filters(self) -> bool:
        """A priority or lifetime mapping filter is set (consumer admins only)."""
        return False

    def destroy(self) -> None:
        """Destroy the admin and all its proxies (the default admin cannot be destroyed)."""
        self._alive()
        if self.id == 0:
            raise ObjectNotExist("the default admin lives as long as its channel")
        with self.channel.lock:
            self.destroy_locked()
            self.channel.save()

    def destroy_locked(self) -> None:
        """Destroy the admin with its proxies (channel lock held; the caller saves)."""
        for p in list(self._proxies.values()):
            p.destroy_locked()
        self._detach_all()
        self._destroyed = True
        self.channel.admin_destroyed(self)

    # -- proxies -------------------------------------------------------------------------

    def proxies(self) -> list[Proxy]:
        return list(self._proxies.values())

    @property
    def proxy_count(self) -> int:
        return len(self._proxies)

    def find_proxy(self, proxy_id: int) -> Proxy | None:
        """The proxy with this id (keyed or not), or None."""
        return self._proxies.get(proxy_id)

    def _new_proxy(self, cls: type[Proxy], kind: str, keyed: bool) -> Proxy:
        self._alive()
        with self.channel.lock:
            pid = self.channel.new_proxy_id(self.side)
            proxy = cls(self, pid, kind, dict(self._qos), keyed=keyed)
            self._add(proxy)
            self.channel.save()
        return proxy

    def _add(self, proxy: Proxy) -> None:
        self._proxies[proxy.id] = proxy
        self.channel.proxy_added(proxy)
        self.proxy_filters_changed(proxy)

    def _obtain_typed(self, classes: Mapping[str, type[Proxy]], ctype: str) -> Proxy:
        """A keyed proxy of the class ``classes[ctype]`` (the spec's ClientType)."""
        cls = classes.get(ctype)
        if cls is None:
            raise ClientTypeError(f"unknown client type {ctype!r}")
        return self._new_proxy(cls, ctype, True)

    def _get_proxy(self, proxy_id: int) -> Proxy:
        self._alive()
        p = self._proxies.get(proxy_id)
        if p is None or not p.keyed:
            raise ProxyNotFound(f"admin {self.id} has no proxy {proxy_id}", field=str(proxy_id))
        return p

    def _ids(self, mode: str) -> list[int]:
        return [pid for pid, p in self._proxies.items() if p.mode == mode and p.keyed]

    def proxy_destroyed(self, proxy: Proxy) -> None:
        """A proxy of this admin was destroyed (its own report)."""
        self._proxies.pop(proxy.id, None)

    def proxy_filters_changed(self, proxy: Proxy) -> None:
        """A proxy of this admin got or lost filters (its own report)."""

    # -- state ---------------------------------------------------------------------------

    @abstractmethod
    def _proxy_class(self, state: ProxyState) -> type[Proxy]:
        """The proxy class a saved proxy state restores as (consumer or supplier side)."""

    def snapshot(self) -> AdminState:
        return AdminState(self.side, self.id, self.op, props(self._qos),
                          self._attached_state(), self._next_filter, None, None,
                          tuple(p.snapshot() for p in self._proxies.values()))

    def restore_state(self, state: AdminState, lookup: FilterLookup) -> None:
        """Take back a snapshot's filters and proxies (just after creation)."""
        self._restore_filters(state.filters, state.next_filter, lookup)
        for ps in state.proxies:
            proxy = self._proxy_class(ps)(self, ps.id, ps.kind, dict(ps.qos), keyed=ps.keyed)
            self._add(proxy)
            proxy.restore_state(ps, lookup)


class ConsumerAdmin(MappingFilterHolder, Admin):
    """Creates ProxySuppliers (which serve consumers); holds filters, QoS and the
    priority and lifetime mapping filters for its proxies."""

    side = "consumer"
    level = "consumer_admin"

    def __init__(self, channel: ChannelHooks, admin_id: int, op: str,
                 qos: Mapping[str, Any]) -> None:
        super().__init__(channel, admin_id, op, qos)
        self._unfiltered: dict[int, ProxySupplier] = {}  # proxies without filters

    @property
    def push_suppliers(self) -> list[int]:
        return self._ids("push")

    @property
    def pull_suppliers(self) -> list[int]:
        return self._ids("pull")

    def get_proxy_supplier(self, proxy_id: int) -> ProxySupplier:
        p = self._get_proxy(proxy_id)
        assert isinstance(p, ProxySupplier)
        return p

    def obtain_notification_push_supplier(self, ctype: str) -> tuple[ProxySupplier, int]:
        """A push ProxySupplier for ANY_EVENT, STRUCTURED_EVENT or SEQUENCE_EVENT clients."""
        p = self._obtain_typed(PUSH_SUPPLIERS, ctype)
        assert isinstance(p, ProxySupplier)
        return p, p.id

    def obtain_notification_pull_supplier(self, ctype: str) -> tuple[ProxySupplier, int]:
        p = self._obtain_typed(PULL_SUPPLIERS, ctype)
        assert isinstance(p, ProxySupplier)
        return p, p.id

    def obtain_push_supplier(self) -> ProxyPushSupplier:
        """CosEvent style: an unkeyed Any push supplier."""
        p = self._new_proxy(ProxyPushSupplier, ANY_EVENT, False)
        assert isinstance(p, ProxyPushSupplier)
        return p

    def obtain_pull_supplier(self) -> ProxyPullSupplier:
        p = self._new_proxy(ProxyPullSupplier, ANY_EVENT, False)
        assert isinstance(p, ProxyPullSupplier)
        return p

    def subscription_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        """A consumer announces the event types it now wants (and no longer wants)."""
        self._alive()
        with self.channel.lock:
            self.channel.types_subscribed(type_list(added), type_list(removed))

    # -- routing (lock held) -------------------------------------------------------------

    def proxy_destroyed(self, proxy: Proxy) -> None:
        super().proxy_destroyed(proxy)
        self._unfiltered.pop(proxy.id, None)

    def proxy_filters_changed(self, proxy: Proxy) -> None:
        if not isinstance(proxy, ProxySupplier):
            return
        if proxy.has_filters or proxy.id not in self._proxies:
            self._unfiltered.pop(proxy.id, None)
        else:
            self._unfiltered[proxy.id] = proxy

    def targets(self, admin_passed: bool, hits: Iterable[ProxySupplier]) -> Iterable[Any]:
        """The connected proxies of this admin an event reaches, given whether the
        admin's filters pass it and which proxies' filters do (``hits``)."""
        proxies = self._proxies
        if not proxies:
            return ()
        a_state = admin_passed if self._filters else None
        if a_state is False and self.op == Q.AND_OP:
            return ()
        if a_state is not False and self.op == Q.OR_OP:
            return [p for p in proxies.values() if p.connected]
        # AND with the admin passing, or OR with the admin failing: the proxy decides.
        if self._unfiltered:
            chosen = {p.id: p for p in hits}
            for pid, p in self._unfiltered.items():  # no filters: the proxy side passes
                if p.connected:
                    chosen[pid] = p
            return chosen.values()
        return dict.fromkeys(hits)

    # -- state ---------------------------------------------------------------------------

    def _proxy_class(self, state: ProxyState) -> type[Proxy]:
        table = PUSH_SUPPLIERS if state.mode == "push" else PULL_SUPPLIERS
        return table[state.kind]

    def snapshot(self) -> AdminState:
        s = super().snapshot()
        return AdminState(s.side, s.id, s.op, s.qos, s.filters, s.next_filter,
                          *self._mapping_ids(), s.proxies)

    def restore_state(self, state: AdminState, lookup: FilterLookup) -> None:
        super().restore_state(state, lookup)
        self._set_maps(lookup(state.priority_filter), lookup(state.lifetime_filter))


class SupplierAdmin(Admin):
    """Creates ProxyConsumers (which serve suppliers)."""

    side = "supplier"
    level = "supplier_admin"

    def get_proxy_consumer(self, proxy_id: int) -> ProxyConsumer:
        p = self._get_proxy(proxy_id)
        assert isinstance(p, ProxyConsumer)
        return p

    @property
    def push_consumers(self) -> list[int]:
        return self._ids("push")

    @property
    def pull_consumers(self) -> list[int]:
        return self._ids("pull")

    def obtain_notification_push_consumer(self, ctype: str) -> tuple[ProxyConsumer, int]:
        p = self._obtain_typed(PUSH_CONSUMERS, ctype)
        assert isinstance(p, ProxyConsumer)
        return p, p.id

    def obtain_notification_pull_consumer(self, ctype: str) -> tuple[ProxyConsumer, int]:
        p = self._obtain_typed(PULL_CONSUMERS, ctype)
        assert isinstance(p, ProxyConsumer)
        return p, p.id

    def obtain_push_consumer(self) -> ProxyPushConsumer:
        p = self._new_proxy(ProxyPushConsumer, ANY_EVENT, False)
        assert isinstance(p, ProxyPushConsumer)
        return p

    def obtain_pull_consumer(self) -> ProxyPullConsumer:
        p = self._new_proxy(ProxyPullConsumer, ANY_EVENT, False)
        assert isinstance(p, ProxyPullConsumer)
        return p

    def offer_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        """A supplier announces the event types it now offers (and no longer offers)."""
        self._alive()
        with self.channel.lock:
            self.channel.types_offered(type_list(added), type_list(removed))

    def passes(self, proxy: ProxyConsumer, env: Envelope) -> bool:
        """Whether an event from ``proxy`` passes the supplier side's filters."""
        if not self._filters and not proxy.has_filters:
            return True
        view = env.filter_view
        return combine(self.op, _match_any(self.attached_filters(), view),
                       _match_any(proxy.attached_filters(), view))

    def _proxy_class(self, state: ProxyState) -> type[Proxy]:
        table = PUSH_CONSUMERS if state.mode == "push" else PULL_CONSUMERS
        return table[state.kind]


__all__ = ["Admin", "ConsumerAdmin", "FilterLookup", "SupplierAdmin", "combine"]
