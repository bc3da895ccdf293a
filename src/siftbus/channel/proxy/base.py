"""What every proxy has: its admin, its client type, connection state (connect,
disconnect, suspend, resume), and its part of the channel's snapshot."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from siftbus.channel.event_types import EventType
from siftbus.channel.filter import Filter, MappingFilter
from siftbus.channel.node import ChannelHooks, Node
from siftbus.channel.state import ProxyState, props
from siftbus.errors import (
    AlreadyConnected,
    ClientTypeError,
    ConnectionAlreadyActive,
    ConnectionAlreadyInactive,
    NotConnected,
)

ANY_EVENT, STRUCTURED_EVENT, SEQUENCE_EVENT = "ANY_EVENT", "STRUCTURED_EVENT", "SEQUENCE_EVENT"
CLIENT_TYPES = (ANY_EVENT, STRUCTURED_EVENT, SEQUENCE_EVENT)
ALL_NOW_UPDATES_OFF, ALL_NOW_UPDATES_ON = "ALL_NOW_UPDATES_OFF", "ALL_NOW_UPDATES_ON"
NONE_NOW_UPDATES_OFF, NONE_NOW_UPDATES_ON = "NONE_NOW_UPDATES_OFF", "NONE_NOW_UPDATES_ON"
OBTAIN_MODES = (ALL_NOW_UPDATES_OFF, ALL_NOW_UPDATES_ON, NONE_NOW_UPDATES_OFF,
                NONE_NOW_UPDATES_ON)


class AdminHooks(Protocol):
    """What a proxy needs from its admin."""

    id: int
    channel: ChannelHooks

    @property
    def priority_filter(self) -> MappingFilter | None: ...

    @property
    def lifetime_filter(self) -> MappingFilter | None: ...

    @property
    def has_mapping_filters(self) -> bool: ...

    def proxy_destroyed(self, proxy: Proxy) -> None: ...

    def proxy_filters_changed(self, proxy: Proxy) -> None: ...


class Proxy(Node):
    """A proxy of either side; ``mode`` is ``push`` or ``pull``, ``kind`` its client type."""

    mode: ClassVar[str] = ""

    def __init__(self, admin: AdminHooks, proxy_id: int, kind: str, qos: Mapping[str, Any],
                 *, keyed: bool = True) -> None:
        super().__init__(admin.channel, proxy_id, qos)
        self.admin = admin
        self.kind = kind
        self.keyed = keyed
        """Reachable by id (``obtain_notification_*``); CosEvent-style proxies are not."""
        self.client: Any = None
        self.connected = False
        self.suspended = False
        self._updates_on = False

    @property
    def MyAdmin(self) -> AdminHooks:
        return self.admin

    @property
    def MyType(self) -> str:
        side = "PUSH" if self.mode == "push" else "PULL"
        return f"{side}_{self.kind.split('_')[0]}"

    @property
    def sequence(self) -> bool:
        return self.kind == SEQUENCE_EVENT

    # -- connection ----------------------------------------------------------------------

    def _connect(self, client: Any, need: tuple[str, ...]) -> None:
        self._alive()
        with self.channel.lock:
            if self.connected:
                raise AlreadyConnected(f"{type(self).__name__} {self.id} already has a client")
            if client is not None:
                missing = [m for m in need if not callable(getattr(client, m, None))]
                if missing:
                    raise ClientTypeError(f"{type(self).__name__} needs a client with "
                                          f"{', '.join(need)}")
            self.client = client
            self.connected = True
            self.channel.proxy_connected(self)
            self.channel.save()

    def connect_remote(self) -> None:
        """Connect a client that is not an object in this process (a remote one: it
        calls in, nothing is called on it)."""
        self._connect(None, ())

    def disconnect(self) -> None:
        """Disconnect the client; the proxy is destroyed (every ``disconnect_*``)."""
        self._alive()
        with self.channel.lock:
            self.destroy_locked()
            self.channel.save()

    def destroy_locked(self) -> None:
        """Destroy the proxy (channel lock held; the caller saves)."""
        self.connected = False
        self.client = None
        self._detach_all()
        self._destroyed = True
        self.admin.proxy_destroyed(self)
        self.channel.proxy_removed(self)

    def suspend_connection(self) -> None:
        self._alive()
        with self.channel.lock:
            if not self.connected:
                raise NotConnected(f"{type(self).__name__} {self.id} is not connected")
            if self.suspended:
                raise ConnectionAlreadyInactive(f"proxy {self.id} is already suspended")
            self.suspended = True
            self.channel.save()

    def resume_connection(self) -> None:
        self._alive()
        with self.channel.lock:
            if not self.connected:
                raise NotConnected(f"{type(self).__name__} {self.id} is not connected")
            if not self.suspended:
                raise ConnectionAlreadyActive(f"proxy {self.id} is not suspended")
            self.suspended = False
            self.channel.wake(self)
            self.channel.save()

    # -- announced types -----------------------------------------------------------------

    def _obtain_types(self, mode: str, current: Callable[[], list[EventType]]
                      ) -> list[EventType]:
        self._alive()
        if mode not in OBTAIN_MODES:
            raise ValueError(f"unknown ObtainInfoMode {mode!r}")
        self._updates_on = mode.endswith("UPDATES_ON")
        return current() if mode.startswith("ALL") else []

    def notify_types(self, method: str, new: list[EventType], gone: list[EventType]) -> None:
        """Tell the client about changed subscriptions/offers (``method`` is
        ``subscription_change`` or ``offer_change``) if it asked for updates."""
        fn = getattr(self.client, method, None)
        if self._updates_on and callable(fn):
            try:
                fn(new, gone)
            except Exception:  # a failing client must not break the channel
                return

    # -- state ---------------------------------------------------------------------------

    def _mapping_ids(self) -> tuple[int | None, int | None]:
        return None, None

    def _restore_mapping(self, state: ProxyState,
                         lookup: Callable[[int | None], Filter | None]) -> None:
        """Mapping filters come back (proxy suppliers only)."""

    @property
    def delivered_count(self) -> int:
        return 0

    def snapshot(self) -> ProxyState:
        pf, lf = self._mapping_ids()
        return ProxyState(self.id, self.mode, self.kind, props(self._qos), self.connected,
                          self.client is not None, self.suspended, self.keyed,
                          self._attached_state(), self._next_filter, pf, lf,
                          self._updates_on, self.delivered_count, type(self).__name__)

    def restore_state(self, state: ProxyState,
                      lookup: Callable[[int | None], Filter | None]) -> None:
        """Take back a snapshot's filters and connection state (just after creation).
        A proxy whose client was an in-process object comes back disconnected (that
        object is gone); one with a remote or nil client comes back connected."""
        self._restore_filters(state.filters, state.next_filter, lookup)
        self._restore_mapping(state, lookup)
        self.connected = state.connected and not state.has_client
        self.suspended = state.suspended and self.connected
        self._updates_on = state.updates


__all__ = ["ALL_NOW_UPDATES_OFF", "ALL_NOW_UPDATES_ON", "ANY_EVENT", "CLIENT_TYPES",
           "NONE_NOW_UPDATES_OFF", "NONE_NOW_UPDATES_ON", "OBTAIN_MODES", "SEQUENCE_EVENT",
           "STRUCTURED_EVENT", "AdminHooks", "Proxy"]
