"""The typed event channel (CosTypedNotifyChannelAdmin): calls of an interface as events.

A :class:`TypedEventChannel` is an :class:`EventChannel` typed by a Protocol (see
:mod:`siftbus.channel.typed_interface`). Its typed proxies stand on structured proxies of
the channel, so a typed event goes through the same filters, QoS, queues, persistence and
dispatcher as any other event, and untyped proxies of the same channel see it in the
specification's structured form::

    typed, _ = TypedEventChannel.create(factory, Thermo)
    sup, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
    sup.connect_typed_push_supplier()
    thermo = sup.get_typed_consumer()          # implements Thermo
    thermo.reading(room=12, value=21.5)        # checked here, then pushed as an event

    con, _ = typed.default_consumer_admin.obtain_typed_notification_push_supplier()
    con.connect_typed_push_consumer(my_thermo) # my_thermo.reading(room=12, value=21.5)

A call the interface does not have, or with arguments that do not fit its signature and
annotations, raises :class:`~siftbus.errors.TypedEventError` in the supplier and sends
nothing. Typed consumers receive only the typed events of their interface that fit it;
other events reaching their proxy are counted (``ignored``) and dropped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from siftbus.channel import qos as Q
from siftbus.channel.admin import ConsumerAdmin, SupplierAdmin
from siftbus.channel.channel import EventChannel
from siftbus.channel.event import StructuredEvent
from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.filter import Filter
from siftbus.channel.proxy import (
    STRUCTURED_EVENT,
    Proxy,
    StructuredProxyPullConsumer,
    StructuredProxyPullSupplier,
    StructuredProxyPushConsumer,
    StructuredProxyPushSupplier,
)
from siftbus.channel.typed_interface import Interface, TypedEvent
from siftbus.errors import ClientTypeError, TypedEventError

T = TypeVar("T")
P = TypeVar("P", bound=Proxy)

PUSH_TYPED = "PUSH_TYPED"
PULL_TYPED = "PULL_TYPED"


class _TypedProxy(Generic[P]):
    """What every typed proxy forwards to the structured proxy it stands on."""

    def __init__(self, interface: Interface, proxy: P) -> None:
        self.interface = interface
        self.proxy = proxy

    @property
    def MyID(self) -> int:
        return self.proxy.MyID

    def add_filter(self, new_filter: Filter) -> int:
        return self.proxy.add_filter(new_filter)

    def remove_filter(self, filter_id: int) -> None:
        self.proxy.remove_filter(filter_id)

    def get_all_filters(self) -> list[int]:
        return self.proxy.get_all_filters()

    def get_qos(self) -> dict[str, Any]:
        return self.proxy.get_qos()

    def set_qos(self, qos: Mapping[str, Any]) -> None:
        self.proxy.set_qos(qos)

    def disconnect(self) -> None:
        self.proxy.disconnect()


class _Caller:
    """The object a typed supplier calls: each operation of the interface, checked."""

    def __init__(self, interface: Interface, send: Any) -> None:
        self._interface = interface
        self._send = send

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._interface.operation(name)  # UnknownOperation if it has none

        def call(*args: Any, **kwargs: Any) -> None:
            self._send(self._interface.call(name, args, kwargs))

        call.__name__ = name
        return call

    def __dir__(self) -> list[str]:
        return sorted(self._interface.operations)


class TypedProxyPushConsumer(_TypedProxy[StructuredProxyPushConsumer], Generic[T]):
    """Supplier side, push: :meth:`get_typed_consumer` is the interface to call."""

    MyType = PUSH_TYPED

    def connect_typed_push_supplier(self, supplier: Any = None) -> None:
        self.proxy.connect_structured_push_supplier(supplier)

    def disconnect_push_consumer(self) -> None:
        self.proxy.disconnect()

    def push_typed(self, event: TypedEvent) -> None:
        """Push an already made typed event (checked against the interface)."""
        if event.interface != self.interface.name:
            raise TypedEventError(f"a {event.interface} event cannot go into a channel "
                                  f"typed {self.interface.name}")
        self.proxy.push_structured_event(
            self.interface.call(event.operation, (), event.kwargs).to_structured())

    def get_typed_consumer(self) -> T:
        """An object implementing the interface; each call becomes one typed event."""
        return cast(T, _Caller(self.interface, lambda e: self.proxy.push_structured_event(
            e.to_structured())))


class _Deliver:
    """The structured consumer a typed push consumer is connected through."""

    def __init__(self, interface: Interface, consumer: Any) -> None:
        self.interface = interface
        self.consumer = consumer
        self.ignored = 0

    def push_structured_event(self, event: StructuredEvent) -> None:
        typed = TypedEvent.from_structured(event)
        if typed is None or not self.interface.accepts(typed):
            self.ignored += 1
            return
        getattr(self.consumer, typed.operation)(**typed.kwargs)


class TypedProxyPushSupplier(_TypedProxy[StructuredProxyPushSupplier]):
    """Consumer side, push: the channel calls the connected object's operations."""

    MyType = PUSH_TYPED

    def __init__(self, interface: Interface, proxy: StructuredProxyPushSupplier) -> None:
        super().__init__(interface, proxy)
        self._deliver: _Deliver | None = None

    def connect_typed_push_consumer(self, consumer: Any) -> None:
        missing = [op for op in self.interface.operations
                   if not callable(getattr(consumer, op, None))]
        if missing:
            raise ClientTypeError(f"a typed push consumer of {self.interface.name} needs "
                                  f"the operations {', '.join(sorted(missing))}")
        self._deliver = _Deliver(self.interface, consumer)
        self.proxy.connect_structured_push_consumer(self._deliver)

    def disconnect_push_supplier(self) -> None:
        self.proxy.disconnect()

    @property
    def ignored(self) -> int:
        """Events that reached this proxy but were no call of the interface."""
        return self._deliver.ignored if self._deliver else 0


class TypedProxyPullSupplier(_TypedProxy[StructuredProxyPullSupplier]):
    """Consumer side, pull: ``pull``/``try_pull`` any operation's event, or through
    :meth:`get_typed_supplier` ``pull_<op>()``/``try_<op>()`` one operation's arguments
    (events of other operations wait for their own pull, in arrival order)."""

    MyType = PULL_TYPED

    def __init__(self, interface: Interface, proxy: StructuredProxyPullSupplier) -> None:
        super().__init__(interface, proxy)
        self._held: deque[TypedEvent] = deque()
        self._lock = threading.Lock()
        self.ignored = 0

    def connect_typed_pull_consumer(self, consumer: Any = None) -> None:
        self.proxy.connect_structured_pull_consumer(consumer)

    def disconnect_pull_supplier(self) -> None:
        self.proxy.disconnect()

    def _fetch(self, timeout: float | None) -> TypedEvent | None:
        """The next typed event of the interface from the queue (None: none in time)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                event = self.proxy.pull_structured_event(None)
            else:
                left = deadline - time.monotonic()
                got, has = (self.proxy.try_pull_structured_event() if left <= 0 else
                            _timed(self.proxy, left))
                if not has or got is None:
                    return None
                event = got
            typed = TypedEvent.from_structured(event)
            if typed is not None and self.interface.accepts(typed):
                return typed
            self.ignored += 1

    def _take(self, op: str | None, timeout: float | None) -> TypedEvent | None:
        with self._lock:
            for i, held in enumerate(self._held):
                if op is None or held.operation == op:
                    del self._held[i]
                    return held
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                typed = self._fetch(left)
                if typed is None:
                    return None
                if op is None or typed.operation == op:
                    return typed
                self._held.append(typed)

    def pull(self, timeout: float | None = None) -> TypedEvent:
        """Block for the next typed event (``TimeoutError`` after ``timeout`` seconds)."""
        got = self._take(None, timeout)
        if got is None:
            raise TimeoutError("no event within the timeout")
        return got

    def try_pull(self) -> tuple[TypedEvent | None, bool]:
        got = self._take(None, 0.0)
        return got, got is not None

    def get_typed_supplier(self) -> Any:
        """An object with ``pull_<op>(timeout=None) -> dict`` and
        ``try_<op>() -> (dict | None, bool)`` for each operation of the interface."""
        return _PullOps(self)


def _timed(proxy: StructuredProxyPullSupplier,
           left: float) -> tuple[StructuredEvent | None, bool]:
    try:
        return proxy.pull_structured_event(left), True
    except TimeoutError:
        return None, False


class _PullOps:
    def __init__(self, owner: TypedProxyPullSupplier) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        iface = self._owner.interface
        if name.startswith("pull_"):
            op = name[5:]
            iface.operation(op)

            def pull(timeout: float | None = None) -> dict[str, Any]:
                got = self._owner._take(op, timeout)
                if got is None:
                    raise TimeoutError("no event within the timeout")
                return got.kwargs

            return pull
        if name.startswith("try_"):
            op = name[4:]
            iface.operation(op)

            def try_op() -> tuple[dict[str, Any] | None, bool]:
                got = self._owner._take(op, 0.0)
                return (got.kwargs, True) if got else (None, False)

            return try_op
        raise AttributeError(f"typed pull operations are pull_<op> and try_<op>, not {name}")


class _Poll:
    """The structured pull supplier a typed pull supplier is polled through: asks each
    operation's ``try_<op>()`` in turn, checks the arguments, maps the call."""

    def __init__(self, interface: Interface, supplier: Any) -> None:
        self.interface = interface
        self.supplier = supplier
        self._ops = sorted(interface.operations)
        self._next = 0

    def try_pull_structured_event(self) -> tuple[StructuredEvent | None, bool]:
        for _ in range(len(self._ops)):
            op = self._ops[self._next]
            self._next = (self._next + 1) % len(self._ops)
            kwargs, has = getattr(self.supplier, f"try_{op}")()
            if has:
                return self.interface.call(op, (), kwargs or {}).to_structured(), True
        return None, False


class TypedProxyPullConsumer(_TypedProxy[StructuredProxyPullConsumer]):
    """Supplier side, pull: the channel polls the supplier's ``try_<op>()`` methods, each
    returning ``(kwargs, True)`` or ``(None, False)``."""

    MyType = PULL_TYPED

    def connect_typed_pull_supplier(self, supplier: Any) -> None:
        missing = [op for op in self.interface.operations
                   if not callable(getattr(supplier, f"try_{op}", None))]
        if missing:
            raise ClientTypeError(f"a typed pull supplier of {self.interface.name} needs "
                                  + ", ".join(f"try_{op}" for op in sorted(missing)))
        self.proxy.connect_structured_pull_supplier(_Poll(self.interface, supplier))


class TypedSupplierAdmin(Generic[T]):
    """A supplier admin of a typed channel; ``admin`` is the untyped one underneath
    (filters, QoS, untyped proxies)."""

    def __init__(self, interface: Interface, admin: SupplierAdmin) -> None:
        self.interface = interface
        self.admin = admin

    @property
    def MyID(self) -> int:
        return self.admin.MyID

    def obtain_typed_notification_push_consumer(self) -> tuple[TypedProxyPushConsumer[T], int]:
        proxy, pid = self.admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
        return TypedProxyPushConsumer(self.interface,
                                      cast(StructuredProxyPushConsumer, proxy)), pid

    def obtain_typed_notification_pull_consumer(self) -> tuple[TypedProxyPullConsumer, int]:
        proxy, pid = self.admin.obtain_notification_pull_consumer(STRUCTURED_EVENT)
        return TypedProxyPullConsumer(self.interface,
                                      cast(StructuredProxyPullConsumer, proxy)), pid

    def add_filter(self, new_filter: Filter) -> int:
        return self.admin.add_filter(new_filter)


class TypedConsumerAdmin(Generic[T]):
    """A consumer admin of a typed channel; ``admin`` is the untyped one underneath."""

    def __init__(self, interface: Interface, admin: ConsumerAdmin) -> None:
        self.interface = interface
        self.admin = admin

    @property
    def MyID(self) -> int:
        return self.admin.MyID

    def obtain_typed_notification_push_supplier(self) -> tuple[TypedProxyPushSupplier, int]:
        proxy, pid = self.admin.obtain_notification_push_supplier(STRUCTURED_EVENT)
        return TypedProxyPushSupplier(self.interface,
                                      cast(StructuredProxyPushSupplier, proxy)), pid

    def obtain_typed_notification_pull_supplier(self) -> tuple[TypedProxyPullSupplier, int]:
        proxy, pid = self.admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
        return TypedProxyPullSupplier(self.interface,
                                      cast(StructuredProxyPullSupplier, proxy)), pid

    def add_filter(self, new_filter: Filter) -> int:
        return self.admin.add_filter(new_filter)


class TypedEventChannel(Generic[T]):
    """An event channel typed by the Protocol ``interface``; ``channel`` is the
    untyped channel underneath (its admins and proxies see typed events as structured
    ones)."""

    def __init__(self, channel: EventChannel, interface: type[T]) -> None:
        self.channel = channel
        self.interface = Interface(interface)

    @classmethod
    def create(cls, factory: EventChannelFactory, interface: type[T],
               qos: Mapping[str, Any] | None = None,
               admin: Mapping[str, Any] | None = None) -> tuple[TypedEventChannel[T], int]:
        """A new channel of ``factory`` typed by ``interface`` (checked first)."""
        Interface(interface)
        channel, cid = factory.create_channel(qos or {}, admin or {})
        return cls(channel, interface), cid

    @property
    def default_supplier_admin(self) -> TypedSupplierAdmin[T]:
        return TypedSupplierAdmin(self.interface, self.channel.default_supplier_admin)

    @property
    def default_consumer_admin(self) -> TypedConsumerAdmin[T]:
        return TypedConsumerAdmin(self.interface, self.channel.default_consumer_admin)

    def new_for_suppliers(self, op: str = Q.AND_OP) -> tuple[TypedSupplierAdmin[T], int]:
        admin, aid = self.channel.new_for_suppliers(op)
        return TypedSupplierAdmin(self.interface, admin), aid

    def new_for_consumers(self, op: str = Q.AND_OP) -> tuple[TypedConsumerAdmin[T], int]:
        admin, aid = self.channel.new_for_consumers(op)
        return TypedConsumerAdmin(self.interface, admin), aid

    def destroy(self) -> None:
        self.channel.destroy()


__all__ = ["PULL_TYPED", "PUSH_TYPED", "TypedConsumerAdmin", "TypedEventChannel",
           "TypedProxyPullConsumer", "TypedProxyPullSupplier", "TypedProxyPushConsumer",
           "TypedProxyPushSupplier", "TypedSupplierAdmin"]
