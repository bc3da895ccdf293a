"""Channels, admins, proxies: lifecycle, every supplier kind to every consumer kind,
connect/disconnect/suspend/resume, keyed and unkeyed proxies, pull consumers, sequence
batching, subscription/offer bookkeeping, failing consumers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from siftbus.channel import (
    ALL_NOW_UPDATES_ON,
    AND_OP,
    ANY_EVENT,
    NONE_NOW_UPDATES_OFF,
    OR_OP,
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    AdminNotFound,
    AlreadyConnected,
    ChannelNotFound,
    ClientTypeError,
    ConnectionAlreadyActive,
    ConnectionAlreadyInactive,
    EventChannel,
    EventChannelFactory,
    NotConnected,
    ObjectNotExist,
    ProxyNotFound,
    StructuredEvent,
)
from siftbus.channel import qos as Q


@pytest.fixture
def factory() -> Iterator[EventChannelFactory]:
    f = EventChannelFactory()
    yield f
    f.close()


@pytest.fixture
def channel(factory: EventChannelFactory) -> EventChannel:
    return factory.create_channel()[0]


def wait_for(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


def ev(i: int, **extra: Any) -> StructuredEvent:
    return StructuredEvent.of("d", "t", f"e{i}", filterable_data={"i": i, **extra})


class Collector:
    """A push consumer of every kind, and a pull supplier of every kind."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.batches: list[list[StructuredEvent]] = []
        self.lock = threading.Lock()
        self.to_supply: list[Any] = []

    def push(self, data: Any) -> None:
        with self.lock:
            self.items.append(data)

    def push_structured_event(self, e: StructuredEvent) -> None:
        with self.lock:
            self.items.append(e)

    def push_structured_events(self, batch: list[StructuredEvent]) -> None:
        with self.lock:
            self.batches.append(list(batch))
            self.items.extend(batch)

    def try_pull(self) -> tuple[Any, bool]:
        with self.lock:
            return (self.to_supply.pop(0), True) if self.to_supply else (None, False)

    def try_pull_structured_event(self) -> tuple[Any, bool]:
        return self.try_pull()

    def try_pull_structured_events(self, n: int) -> tuple[list[Any], bool]:
        with self.lock:
            out, self.to_supply = self.to_supply[:n], self.to_supply[n:]
        return out, bool(out)


def test_factory_and_admins(factory: EventChannelFactory) -> None:
    ch, cid = factory.create_channel()
    _ch2, cid2 = factory.create_channel()
    assert cid != cid2 and factory.get_all_channels() == sorted([cid, cid2])
    assert factory.get_event_channel(cid) is ch
    with pytest.raises(ChannelNotFound):
        factory.get_event_channel(999)
    assert ch.default_consumer_admin.MyID == 0 and ch.default_supplier_admin.MyID == 0
    assert ch.default_consumer_admin.MyOperator == AND_OP
    ca, aid = ch.new_for_consumers(OR_OP)
    sa, sid = ch.new_for_suppliers(AND_OP)
    assert ch.get_consumeradmin(aid) is ca and ca.MyOperator == OR_OP
    assert ch.get_supplieradmin(sid) is sa
    assert ch.get_all_consumeradmins() == [0, aid]
    with pytest.raises(AdminNotFound):
        ch.get_consumeradmin(12345)
    assert ch.for_consumers() is ch.default_consumer_admin
    assert ch.default_filter_factory is factory.filter_factory


def test_destroy_cascades(factory: EventChannelFactory) -> None:
    ch, cid = factory.create_channel()
    ca, _ = ch.new_for_consumers()
    proxy, pid = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    ca.destroy()
    with pytest.raises(ObjectNotExist):
        proxy.connect_structured_pull_consumer()
    with pytest.raises(ObjectNotExist):
        ca.get_proxy_supplier(pid)
    p2, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(ANY_EVENT)
    ch.destroy()
    with pytest.raises(ObjectNotExist):
        p2.try_pull()
    with pytest.raises(ObjectNotExist):
        ch.get_qos()
    with pytest.raises(ChannelNotFound):
        factory.get_event_channel(cid)


def test_keyed_and_unkeyed_proxies(channel: EventChannel) -> None:
    ca = channel.default_consumer_admin
    keyed, kid = ca.obtain_notification_pull_supplier(ANY_EVENT)
    unkeyed = ca.obtain_pull_supplier()
    assert ca.get_proxy_supplier(kid) is keyed
    with pytest.raises(ProxyNotFound):
        ca.get_proxy_supplier(unkeyed.id)
    assert ca.pull_suppliers == [kid]
    keyed.connect_any_pull_consumer()
    unkeyed.connect_any_pull_consumer()
    push = channel.default_supplier_admin.obtain_push_consumer()
    push.connect_any_push_supplier()
    push.push(42)
    assert keyed.try_pull() == (42, True)
    assert unkeyed.try_pull() == (42, True)
    assert keyed.MyType == "PULL_ANY"


PREFIX = {ANY_EVENT: "any", STRUCTURED_EVENT: "structured", SEQUENCE_EVENT: "sequence"}
SUPPLIER_KINDS = [("push", ANY_EVENT), ("push", STRUCTURED_EVENT), ("push", SEQUENCE_EVENT),
                  ("pull", ANY_EVENT), ("pull", STRUCTURED_EVENT), ("pull", SEQUENCE_EVENT)]


def _supply(channel: EventChannel, mode: str, kind: str, values: list[Any]) -> Collector:
    sa = channel.default_supplier_admin
    src = Collector()
    if mode == "push":
        p, _ = sa.obtain_notification_push_consumer(kind)
        if kind == ANY_EVENT:
            p.connect_any_push_supplier()
            for v in values:
                p.push(v)
        elif kind == STRUCTURED_EVENT:
            p.connect_structured_push_supplier()
            for v in values:
                p.push_structured_event(v)
        else:
            p.connect_sequence_push_supplier()
            p.push_structured_events(values)
    else:
        p, _ = sa.obtain_notification_pull_consumer(kind)
        src.to_supply = list(values)
        getattr(p, f"connect_{PREFIX[kind]}_pull_supplier")(src)
    return src


@pytest.mark.parametrize("supplier", SUPPLIER_KINDS)
@pytest.mark.parametrize("consumer", SUPPLIER_KINDS)
def test_every_supplier_kind_to_every_consumer_kind(
        factory: EventChannelFactory, supplier: tuple[str, str],
        consumer: tuple[str, str]) -> None:
    channel = factory.create_channel()[0]
    ca = channel.default_consumer_admin
    cmode, ckind = consumer
    sink = Collector()
    if cmode == "push":
        proxy, _ = ca.obtain_notification_push_supplier(ckind)
        getattr(proxy, f"connect_{PREFIX[ckind]}_push_consumer")(sink)
    else:
        proxy, _ = ca.obtain_notification_pull_supplier(ckind)
        getattr(proxy, f"connect_{PREFIX[ckind]}_pull_consumer")()
    smode, skind = supplier
    values: list[Any] = [{"n": i} for i in range(3)] if skind == ANY_EVENT else \
        [ev(i) for i in range(3)]
    _supply(channel, smode, skind, values)
    if cmode == "push":
        wait_for(lambda: len(sink.items) == 3)
        got = sink.items
    else:
        got = []
        end = time.monotonic() + 5
        while len(got) < 3 and time.monotonic() < end:
            if ckind == ANY_EVENT:
                got.append(proxy.pull(timeout=5))
            elif ckind == STRUCTURED_EVENT:
                got.append(proxy.pull_structured_event(timeout=5))
            else:
                got.extend(proxy.pull_structured_events(10, timeout=5))
    # Conversions happen at the outgoing proxy (the specification's translation rules).
    if skind == ANY_EVENT and ckind != ANY_EVENT:
        assert [g.type_name for g in got] == ["%ANY"] * 3
        assert [g.remainder_of_body for g in got] == values
    else:
        assert got == values
    assert channel.stats().delivered == 3


def test_connect_twice_and_wrong_client(channel: EventChannel) -> None:
    ca = channel.default_consumer_admin
    p, _ = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
    with pytest.raises(ClientTypeError):
        p.connect_structured_push_consumer(object())
    p.connect_structured_push_consumer(Collector())
    with pytest.raises(AlreadyConnected):
        p.connect_structured_push_consumer(Collector())
    pull, _ = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    with pytest.raises(ClientTypeError):
        pull.connect_any_pull_consumer()
    with pytest.raises(ClientTypeError):
        ca.obtain_notification_pull_supplier("TYPED_EVENT")


def test_disconnect_stops_delivery_and_destroys(channel: EventChannel) -> None:
    ca = channel.default_consumer_admin
    sink = Collector()
    p, pid = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
    p.connect_structured_push_consumer(sink)
    sup, _ = channel.default_supplier_admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
    sup.connect_structured_push_supplier()
    sup.push_structured_event(ev(1))
    wait_for(lambda: len(sink.items) == 1)
    p.disconnect_structured_push_supplier()
    sup.push_structured_event(ev(2))
    time.sleep(0.05)
    assert len(sink.items) == 1
    with pytest.raises(ProxyNotFound):
        ca.get_proxy_supplier(pid)
    sup.disconnect_structured_push_consumer()
    with pytest.raises(ObjectNotExist):
        sup.push_structured_event(ev(3))


def test_suspend_and_resume(channel: EventChannel) -> None:
    ca = channel.default_consumer_admin
    sink = Collector()
    p, _ = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
    with pytest.raises(NotConnected):
        p.suspend_connection()
    p.connect_structured_push_consumer(sink)
    with pytest.raises(ConnectionAlreadyActive):
        p.resume_connection()
    p.suspend_connection()
    with pytest.raises(ConnectionAlreadyInactive):
        p.suspend_connection()
    sup, _ = channel.default_supplier_admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
    sup.connect_structured_push_supplier()
    for i in range(3):
        sup.push_structured_event(ev(i))
    time.sleep(0.05)
    assert sink.items == [] and p.queue_length == 3
    p.resume_connection()
    wait_for(lambda: len(sink.items) == 3)
    assert [e.event_name for e in sink.items] == ["e0", "e1", "e2"]


def test_suspended_pull_consumer_stops_polling(channel: EventChannel) -> None:
    sa = channel.default_supplier_admin
    src = Collector()
    p, _ = sa.obtain_notification_pull_consumer(STRUCTURED_EVENT)
    p.connect_structured_pull_supplier(src)
    p.suspend_connection()
    src.to_supply = [ev(1)]
    pull, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    time.sleep(0.05)
    assert src.to_supply  # not polled while suspended
    p.resume_connection()
    assert pull.pull_structured_event(timeout=5).event_name == "e1"
    p.disconnect_structured_pull_consumer()
    src.to_supply = [ev(2)]
    time.sleep(0.05)
    assert src.to_supply  # no polling after disconnect


def test_pull_consumer_fifo_and_try_pull(channel: EventChannel) -> None:
    channel.set_qos({Q.ORDER_POLICY: Q.FIFO_ORDER})
    pull, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(SEQUENCE_EVENT)
    pull.connect_sequence_pull_consumer()
    assert pull.try_pull_structured_events(5) == ([], False)
    with pytest.raises(TimeoutError):
        pull.pull_structured_events(5, timeout=0.01)
    _supply(channel, "push", STRUCTURED_EVENT, [ev(i) for i in range(7)])
    got, has = pull.try_pull_structured_events(5)
    assert has and [e.event_name for e in got] == [f"e{i}" for i in range(5)]
    assert [e.event_name for e in pull.pull_structured_events(5)] == ["e5", "e6"]


def test_blocking_pull_wakes_on_push(channel: EventChannel) -> None:
    pull, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    result: list[StructuredEvent] = []
    t = threading.Thread(target=lambda: result.append(pull.pull_structured_event(timeout=5)))
    t.start()
    time.sleep(0.02)
    _supply(channel, "push", STRUCTURED_EVENT, [ev(9)])
    t.join(5)
    assert result and result[0].event_name == "e9"


def test_sequence_batching_max_batch_size_and_pacing(channel: EventChannel) -> None:
    ca = channel.default_consumer_admin
    sink = Collector()
    p, _ = ca.obtain_notification_push_supplier(SEQUENCE_EVENT)
    p.set_qos({Q.MAXIMUM_BATCH_SIZE: 4, Q.PACING_INTERVAL: 3_000_000})  # 0.3 s
    p.connect_sequence_push_consumer(sink)
    _supply(channel, "push", SEQUENCE_EVENT, [ev(i) for i in range(10)])
    wait_for(lambda: len(sink.batches) >= 2, 2)
    assert [len(b) for b in sink.batches[:2]] == [4, 4]  # full batches go at once
    t0 = time.monotonic()
    wait_for(lambda: len(sink.items) == 10, 3)
    assert len(sink.batches[2]) == 2  # the partial batch waits for the pacing interval
    assert time.monotonic() - t0 < 1.5
    assert all(len(b) <= 4 for b in sink.batches)
    assert [e.event_name for e in sink.items] == [f"e{i}" for i in range(10)]


def test_failing_push_consumer_is_disconnected(channel: EventChannel) -> None:
    class Bad:
        def push_structured_event(self, e: StructuredEvent) -> None:
            raise RuntimeError("consumer is broken")

    ca = channel.default_consumer_admin
    bad, bid = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
    bad.connect_structured_push_consumer(Bad())
    good_sink = Collector()
    good, _ = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
    good.connect_structured_push_consumer(good_sink)
    _supply(channel, "push", STRUCTURED_EVENT, [ev(i) for i in range(5)])
    wait_for(lambda: len(good_sink.items) == 5)
    wait_for(lambda: bid not in ca.push_suppliers)


def test_admin_limits(factory: EventChannelFactory) -> None:
    ch, _ = factory.create_channel(initial_admin={Q.MAX_CONSUMERS: 2, Q.MAX_SUPPLIERS: 1})
    from siftbus.channel import AdminLimitExceeded

    ca = ch.default_consumer_admin
    ca.obtain_notification_pull_supplier(ANY_EVENT)
    ch.new_for_consumers()[0].obtain_notification_pull_supplier(ANY_EVENT)
    with pytest.raises(AdminLimitExceeded) as info:
        ca.obtain_notification_pull_supplier(ANY_EVENT)
    assert info.value.name == "MaxConsumers" and info.value.value == 2
    ch.default_supplier_admin.obtain_push_consumer()
    with pytest.raises(AdminLimitExceeded):
        ch.default_supplier_admin.obtain_push_consumer()


def test_subscription_and_offer_changes(channel: EventChannel) -> None:
    seen: list[tuple[list[Any], list[Any]]] = []

    class Sup:
        def subscription_change(self, added: list[Any], removed: list[Any]) -> None:
            seen.append((list(added), list(removed)))

    sup, _ = channel.default_supplier_admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
    sup.connect_structured_push_supplier(Sup())
    assert sup.obtain_subscription_types(ALL_NOW_UPDATES_ON) == []
    ca = channel.default_consumer_admin
    ca.subscription_change([("Telecom", "Alarm")], [])
    f = channel.default_filter_factory.create_filter()
    f.add_constraints([([("Finance", "Quote")], "")])
    pull, _ = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.add_filter(f)
    assert sup.obtain_subscription_types(NONE_NOW_UPDATES_OFF) == []
    assert channel.subscribed_types() == [("Finance", "Quote"), ("Telecom", "Alarm")]
    ca.subscription_change([], [("Telecom", "Alarm")])
    # the filter's event types count as subscriptions; no updates after NONE_NOW_UPDATES_OFF
    assert seen == [([("Telecom", "Alarm")], []), ([("Finance", "Quote")], [])]
    sup.offer_change([("Telecom", "Alarm")], [])
    assert pull.obtain_offered_types() == [("Telecom", "Alarm")]
    channel.default_supplier_admin.offer_change([], [("Telecom", "Alarm")])
    assert pull.obtain_offered_types() == []


def test_cosevent_push_consumer_gets_any(channel: EventChannel) -> None:
    sink = Collector()
    p = channel.default_consumer_admin.obtain_push_supplier()
    p.connect_push_consumer(sink)
    _supply(channel, "push", STRUCTURED_EVENT, [ev(1)])
    wait_for(lambda: len(sink.items) == 1)
    # Structured -> Any: the whole structured event inside the any.
    assert sink.items[0] == ev(1)
