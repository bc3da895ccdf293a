"""Each QoS policy's observable effect, and validation with the specification's error
codes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from siftbus.channel import (
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    EventChannel,
    EventChannelFactory,
    ImplLimit,
    StructuredEvent,
    UnsupportedAdmin,
    UnsupportedQoS,
)
from siftbus.channel import qos as Q
from siftbus.channel.clock import timet_now


@pytest.fixture
def factory() -> Iterator[EventChannelFactory]:
    f = EventChannelFactory(dispatch=False)
    yield f
    f.close()


def ev(i: int, **header: Any) -> StructuredEvent:
    return StructuredEvent.of("d", "t", f"e{i}", variable_header=header,
                              filterable_data={"i": i})


def setup(ch: EventChannel, **qos: Any) -> tuple[Any, Any]:
    sup, _ = ch.default_supplier_admin.obtain_notification_push_consumer(SEQUENCE_EVENT)
    sup.connect_sequence_push_supplier()
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(SEQUENCE_EVENT)
    if qos:
        pull.set_qos(qos)
    pull.connect_sequence_pull_consumer()
    return sup, pull


def names(pull: Any) -> list[str]:
    got, _ = pull.try_pull_structured_events(100)
    return [e.event_name for e in got]


def codes(exc: pytest.ExceptionInfo[UnsupportedQoS]) -> list[tuple[str, str]]:
    return [(e.name, e.code) for e in exc.value.errors]


def test_validation_codes(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    with pytest.raises(UnsupportedQoS) as info:
        ch.set_qos({"Nonsense": 1, Q.PRIORITY: 40000, Q.TIMEOUT: "soon", Q.START_TIME: 5})
    assert codes(info) == [("Nonsense", "BAD_PROPERTY"), (Q.PRIORITY, "BAD_VALUE"),
                           (Q.TIMEOUT, "BAD_TYPE"), (Q.START_TIME, "UNSUPPORTED_PROPERTY")]
    assert info.value.errors[1].available == (-32767, 32767)
    with pytest.raises(UnsupportedQoS) as info:
        factory.create_channel({Q.EVENT_RELIABILITY: Q.PERSISTENT})
    assert codes(info) == [(Q.EVENT_RELIABILITY, "UNAVAILABLE_VALUE")]  # no store
    with pytest.raises(UnsupportedQoS) as info:
        ch.default_supplier_admin.set_qos({Q.MAX_EVENTS_PER_CONSUMER: 3})
    assert codes(info) == [(Q.MAX_EVENTS_PER_CONSUMER, "UNSUPPORTED_PROPERTY")]
    with pytest.raises(UnsupportedQoS):
        ch.default_consumer_admin.set_qos({Q.EVENT_RELIABILITY: Q.BEST_EFFORT})
    p, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    with pytest.raises(UnsupportedQoS) as info:
        p.set_qos({Q.MAXIMUM_BATCH_SIZE: 10})
    assert codes(info) == [(Q.MAXIMUM_BATCH_SIZE, "UNSUPPORTED_PROPERTY")]
    with pytest.raises(UnsupportedQoS):
        p.validate_event_qos({Q.MAX_EVENTS_PER_CONSUMER: 1})
    assert Q.START_TIME in p.validate_event_qos({Q.PRIORITY: 3})
    with pytest.raises(UnsupportedAdmin):
        factory.create_channel(initial_admin={"MaxQueueLength": -1})
    with pytest.raises(UnsupportedAdmin):
        ch.set_admin({"Whatever": 1})


def test_persistent_combinations(tmp_path: Path) -> None:
    with EventChannelFactory(tmp_path / "s.db", dispatch=False) as f:
        with pytest.raises(UnsupportedQoS) as info:
            f.create_channel({Q.EVENT_RELIABILITY: Q.PERSISTENT})
        assert codes(info) == [(Q.EVENT_RELIABILITY, "UNSUPPORTED_VALUE")]
        ch = f.create_channel({Q.EVENT_RELIABILITY: Q.PERSISTENT,
                               Q.CONNECTION_RELIABILITY: Q.PERSISTENT})[0]
        with pytest.raises(UnsupportedQoS):
            ch.set_qos({Q.CONNECTION_RELIABILITY: Q.BEST_EFFORT})
        be = f.create_channel()[0]
        with pytest.raises(UnsupportedQoS) as info:
            be.default_consumer_admin.set_qos({Q.CONNECTION_RELIABILITY: Q.PERSISTENT})
        assert codes(info) == [(Q.CONNECTION_RELIABILITY, "UNAVAILABLE_VALUE")]


def test_inheritance_at_creation(factory: EventChannelFactory) -> None:
    ch = factory.create_channel({Q.PRIORITY: 7, Q.MAX_EVENTS_PER_CONSUMER: 9})[0]
    ca, _ = ch.new_for_consumers()
    assert ca.get_qos()[Q.PRIORITY] == 7
    ca.set_qos({Q.PRIORITY: 3})
    p, _ = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    assert p.get_qos()[Q.PRIORITY] == 3 and p.get_qos()[Q.MAX_EVENTS_PER_CONSUMER] == 9


def test_priority_order(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch, **{Q.ORDER_POLICY: Q.PRIORITY_ORDER})
    sup.push_structured_events([ev(0, Priority=1), ev(1, Priority=5), ev(2), ev(3, Priority=5)])
    assert names(pull) == ["e1", "e3", "e0", "e2"]


def test_fifo_order(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch, **{Q.ORDER_POLICY: Q.FIFO_ORDER})
    sup.push_structured_events([ev(0, Priority=1), ev(1, Priority=5), ev(2)])
    assert names(pull) == ["e0", "e1", "e2"]


def test_deadline_order(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch, **{Q.ORDER_POLICY: Q.DEADLINE_ORDER})
    sup.push_structured_events([ev(0), ev(1, Timeout=50_000_000), ev(2, Timeout=10_000_000)])
    assert names(pull) == ["e2", "e1", "e0"]


@pytest.mark.parametrize("policy, kept", [
    (Q.FIFO_ORDER, ["e2", "e3", "e4"]),  # the oldest go first
    (Q.ANY_ORDER, ["e2", "e3", "e4"]),
    (Q.LIFO_ORDER, ["e0", "e1", "e2"]),  # the newest go first
    (Q.PRIORITY_ORDER, ["e1", "e3", "e4"]),  # the lowest priority go first
    (Q.DEADLINE_ORDER, ["e0", "e3", "e4"]),  # the soonest deadline go first
])
def test_discard_policy_with_max_events_per_consumer(
        factory: EventChannelFactory, policy: int, kept: list[str]) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch, **{Q.MAX_EVENTS_PER_CONSUMER: 3, Q.DISCARD_POLICY: policy,
                             Q.ORDER_POLICY: Q.FIFO_ORDER})
    big = 10**9
    sup.push_structured_events([
        ev(0, Priority=0, Timeout=big), ev(1, Priority=9, Timeout=10_000_000),
        ev(2, Priority=-3, Timeout=20_000_000), ev(3, Priority=5, Timeout=big),
        ev(4, Priority=5, Timeout=big)])
    assert pull.queue_length == 3
    assert names(pull) == kept
    assert ch.stats().discarded == 2


def test_max_queue_length_reject_new_events(factory: EventChannelFactory) -> None:
    ch = factory.create_channel(initial_admin={Q.MAX_QUEUE_LENGTH: 2,
                                               Q.REJECT_NEW_EVENTS: True})[0]
    sup, pull = setup(ch)
    sup.push_structured_events([ev(0), ev(1)])
    with pytest.raises(ImplLimit):
        sup.push_structured_events([ev(2)])
    assert names(pull) == ["e0", "e1"]
    sup.push_structured_events([ev(3)])  # room again after the pull
    assert names(pull) == ["e3"] and ch.stats().rejected == 1


def test_max_queue_length_discards(factory: EventChannelFactory) -> None:
    ch = factory.create_channel(initial_admin={Q.MAX_QUEUE_LENGTH: 2})[0]
    sup, pull = setup(ch, **{Q.ORDER_POLICY: Q.FIFO_ORDER})
    sup.push_structured_events([ev(i) for i in range(5)])
    assert names(pull) == ["e3", "e4"] and ch.stats().discarded == 3


def test_timeouts_expire_events(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch)
    sup.push_structured_events([ev(0, Timeout=300_000), ev(1), ev(2, Timeout=10**9)])
    time.sleep(0.06)
    assert names(pull) == ["e1", "e2"] and ch.stats().expired == 1
    pull.set_qos({Q.TIMEOUT: 300_000})  # a proxy-level default lifetime
    sup.push_structured_events([ev(3), ev(4, Timeout=10**9)])
    time.sleep(0.06)
    assert names(pull) == ["e4"]


def test_stop_time_and_start_time(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    sup, pull = setup(ch)
    now = timet_now()
    sup.push_structured_events([ev(0, StopTime=now - 1), ev(1, StartTime={"time": now + 1_000_000}),
                                ev(2)])
    assert names(pull) == ["e2"]  # e0 already stopped, e1 not started
    time.sleep(0.12)
    assert names(pull) == ["e1"]


def test_start_time_unsupported_is_ignored(factory: EventChannelFactory) -> None:
    ch = factory.create_channel({Q.START_TIME_SUPPORTED: False})[0]
    sup, pull = setup(ch)
    sup.push_structured_events([ev(1, StartTime=timet_now() + 10**9)])
    assert names(pull) == ["e1"]
