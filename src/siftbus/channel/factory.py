"""The channel factory (CosNotifyChannelAdmin::EventChannelFactory): creates and finds
channels, owns the filter factory and, when given one, the durable store from which
persistent channels come back."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.channel import EventChannel
from siftbus.channel.filter import Filter, FilterFactory
from siftbus.channel.state import StoredEvent
from siftbus.channel.store import ChannelStore
from siftbus.errors import ChannelNotFound
from siftbus.lang.etcl import DEFAULT_LIMITS, ConstraintLimits


class EventChannelFactory:
    """Creates and finds channels; with ``store`` (a path or ChannelStore) persistent
    channels survive restarts: constructing the factory on the same store restores them.

    ``engine``: the matcher engine of the channels' filter indexes; ``dispatch=False``
    starts no dispatcher threads (nothing is pushed to in-process consumers: for tools
    that only inspect or edit a store); ``compile_filters=False`` evaluates every filter
    constraint one by one (the reference the index is measured against);
    ``constraint_limits``: what one filter constraint may cost (length, nesting).
    """

    def __init__(self, store: ChannelStore | str | Path | None = None, *,
                 engine: str | None = None, dispatch: bool = True,
                 compile_filters: bool = True,
                 constraint_limits: ConstraintLimits = DEFAULT_LIMITS) -> None:
        self.engine = engine
        self.compile_filters = compile_filters
        self.dispatch = dispatch
        self.filter_factory = FilterFactory(limits=constraint_limits)
        self._channels: dict[int, EventChannel] = {}
        self._next = 1
        self._lock = threading.Lock()
        if store is not None and not isinstance(store, ChannelStore):
            store = ChannelStore(store)
        self.store: ChannelStore | None = store
        self.filter_factory.on_change = self._filter_changed
        self.filter_factory.on_destroy = self._filter_destroyed
        if self.store is not None:
            self._restore(self.store)

    def create_channel(self, initial_qos: Mapping[str, Any] | None = None,
                       initial_admin: Mapping[str, Any] | None = None
                       ) -> tuple[EventChannel, int]:
        """A new channel; raises UnsupportedQoS / UnsupportedAdmin."""
        qos = Q.validate_qos(initial_qos or {}, "channel", persistent_ok=self.store is not None)
        admin = Q.validate_admin(initial_admin or {})
        with self._lock:
            cid = self._next
            self._next += 1
            ch = EventChannel(self, cid, qos, admin)
            self._channels[cid] = ch
        ch.save()
        return ch, cid

    def get_all_channels(self) -> list[int]:
        return sorted(self._channels)

    def get_event_channel(self, channel_id: int) -> EventChannel:
        ch = self._channels.get(channel_id)
        if ch is None:
            raise ChannelNotFound(f"no channel {channel_id}", field=str(channel_id))
        return ch

    def channel_destroyed(self, ch: EventChannel) -> None:
        """A channel of this factory was destroyed (its own report)."""
        with self._lock:
            self._channels.pop(ch.id, None)
        if self.store is not None:
            self.store.delete_channel(ch.id)

    def _filter_changed(self, f: Filter) -> None:
        if self.store is not None and not f.destroyed:
            self.store.save_filter(f.snapshot())

    def _filter_destroyed(self, f: Filter) -> None:
        for ch in list(self._channels.values()):
            ch.forget_filter(f)
        if self.store is not None:
            self.store.delete_filter(f.id)

    def _restore(self, store: ChannelStore) -> None:
        """Rebuild every stored channel with its filters and undelivered events.

        Proxies whose client was a remote or nil reference come back connected (remote
        clients simply go on calling them); proxies that held an in-process client object
        come back disconnected with their queue intact, ready for ``connect_*`` again.
        """
        contents = store.load()
        for fs in contents.filters:
            self.filter_factory.restore(fs)
        events: dict[int, list[StoredEvent]] = {}
        for ev in contents.events:
            events.setdefault(ev.channel, []).append(ev)
        for cs in contents.channels:
            ch = EventChannel(self, cs.id, dict(cs.qos), dict(cs.admin), state=cs,
                              lookup=self.filter_factory.find_filter)
            ch.restore_events(events.get(cs.id, []), contents.reserved.get(cs.id, 0))
            self._channels[cs.id] = ch
            self._next = max(self._next, cs.id + 1)

    def close(self) -> None:
        """Stop the dispatcher threads and close the store (channels stay stored)."""
        for ch in list(self._channels.values()):
            ch.close()
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> EventChannelFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EventChannelFactory"]
