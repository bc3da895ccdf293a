"""The typed event channel: a Protocol's calls as events, through filters and QoS.

The property runs random calls (valid and not) through a typed supplier, with a random
filter on a typed push consumer, a typed pull consumer and a structured pull consumer of
the same channel, against a reference written for clarity: which calls are valid (by the
interface's annotations, checked literally) and which pass the filter (a Python
predicate beside each ETCL text).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel import (
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    EventChannelFactory,
    StructuredEvent,
)
from siftbus.channel import qos as Q
from siftbus.channel.typed import TypedEventChannel
from siftbus.channel.typed_interface import TypedEvent
from siftbus.errors import ClientTypeError, TypedEventError, UnknownOperation


class Thermo(Protocol):
    def reading(self, room: int, value: float) -> None: ...

    def alarm(self, room: int, text: str = "hot") -> None: ...

    def batch(self, rooms: list[int], tag: str | None) -> None: ...


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def reading(self, room: int, value: float) -> None:
        self.calls.append(("reading", {"room": room, "value": value}))

    def alarm(self, room: int, text: str = "hot") -> None:
        self.calls.append(("alarm", {"room": room, "text": text}))

    def batch(self, rooms: list[int], tag: str | None) -> None:
        self.calls.append(("batch", {"rooms": rooms, "tag": tag}))


@pytest.fixture
def factory() -> Iterator[EventChannelFactory]:
    f = EventChannelFactory()
    yield f
    f.close()


def _wait(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.005)


# ---------------------------------------------------------------------------------
# the reference: which calls are valid, literally


def _is_int(v: Any) -> bool:
    return type(v) is int


def ref_call(op: str, kw: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments a valid call sends (defaults filled in), None for a refused call."""
    if op == "reading":
        if set(kw) != {"room", "value"}:
            return None
        ok = _is_int(kw["room"]) and (type(kw["value"]) is float or _is_int(kw["value"]))
        return dict(kw) if ok else None
    if op == "alarm":
        if "room" not in kw or not set(kw) <= {"room", "text"}:
            return None
        full = {"room": kw["room"], "text": kw.get("text", "hot")}
        return full if _is_int(full["room"]) and type(full["text"]) is str else None
    if op == "batch":
        if set(kw) != {"rooms", "tag"}:
            return None
        rooms, tag = kw["rooms"], kw["tag"]
        ok = type(rooms) is list and all(_is_int(r) for r in rooms) and (
            tag is None or type(tag) is str)
        return {"rooms": rooms, "tag": tag} if ok else None
    return None


FILTERS: list[tuple[str, Callable[[str, dict[str, Any]], bool]]] = [
    ("", lambda op, kw: True),
    ("$operation == 'Thermo::reading'", lambda op, kw: op == "reading"),
    ("$room > 5", lambda op, kw: "room" in kw and kw["room"] > 5),
    ("$operation == 'Thermo::alarm' or $room <= 2",
     lambda op, kw: op == "alarm" or ("room" in kw and kw["room"] <= 2)),
    ("$text ~ 'ot'", lambda op, kw: op == "alarm" and "ot" in kw["text"]),
    ("$operation != 'Thermo::batch' and $value >= 0.5",
     lambda op, kw: op == "reading" and kw["value"] >= 0.5),
]

values = st.one_of(
    st.integers(-3, 12), st.floats(-2, 2, allow_nan=False), st.booleans(),
    st.sampled_from(["hot", "cold", "note", ""]), st.none(),
    st.lists(st.integers(0, 9), max_size=3), st.lists(st.sampled_from(["a", 1]), max_size=2))


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    op = draw(st.sampled_from(["reading", "alarm", "batch", "reset"]))
    names = {"reading": ["room", "value"], "alarm": ["room", "text"],
             "batch": ["rooms", "tag"], "reset": ["room"]}[op]
    if draw(st.booleans()):  # half the calls name exactly the parameters
        kept = names
    else:
        kept = draw(st.lists(st.sampled_from([*names, "extra"]), unique=True, max_size=3))
    return op, {k: draw(values) for k in kept}


@settings(max_examples=40, deadline=None)
@given(st.lists(calls(), max_size=25), st.sampled_from(range(len(FILTERS))))
def test_typed_channel_delivers_what_the_reference_says(
        workload: list[tuple[str, dict[str, Any]]], which: int) -> None:
    text, pred = FILTERS[which]
    factory = EventChannelFactory()
    try:
        typed, _ = TypedEventChannel.create(factory, Thermo, {Q.ORDER_POLICY: Q.FIFO_ORDER})
        flt = factory.filter_factory.create_filter()
        flt.add_constraints([([], text)])
        sup, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
        sup.connect_typed_push_supplier()
        push, _ = typed.default_consumer_admin.obtain_typed_notification_push_supplier()
        push.add_filter(flt)
        rec = Recorder()
        push.connect_typed_push_consumer(rec)
        pull, _ = typed.default_consumer_admin.obtain_typed_notification_pull_supplier()
        pull.add_filter(flt)
        pull.connect_typed_pull_consumer()
        plain, _ = typed.channel.default_consumer_admin.obtain_notification_pull_supplier(
            SEQUENCE_EVENT)
        plain.add_filter(flt)
        plain.connect_sequence_pull_consumer()

        thermo: Any = sup.get_typed_consumer()
        expected: list[tuple[str, dict[str, Any]]] = []
        for op, kw in workload:
            want = ref_call(op, kw)
            if want is None:
                with pytest.raises(TypedEventError):
                    getattr(thermo, op)(**kw)
                continue
            getattr(thermo, op)(**kw)
            if pred(op, want):
                expected.append((op, want))

        _wait(lambda: len(rec.calls) >= len(expected))
        time.sleep(0.01)
        assert rec.calls == expected
        pulled = []
        while True:
            got, has = pull.try_pull()
            if not has:
                break
            assert got is not None
            pulled.append((got.operation, got.kwargs))
        assert pulled == expected
        structured = plain.try_pull_structured_events(1000)[0] if expected else []
        assert structured == [TypedEvent("Thermo", op, tuple(kw.items())).to_structured()
                              for op, kw in expected]
        assert all(e.type_name == "%TYPED" for e in structured)
    finally:
        factory.close()


# ---------------------------------------------------------------------------------
# the supplier refuses what does not fit, and sends nothing


def test_calls_that_do_not_fit_are_refused_at_the_supplier(
        factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo)
    sup, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
    sup.connect_typed_push_supplier()
    plain, _ = typed.channel.default_consumer_admin.obtain_notification_pull_supplier(
        STRUCTURED_EVENT)
    plain.connect_structured_pull_consumer()
    thermo: Any = sup.get_typed_consumer()
    with pytest.raises(UnknownOperation, match=r"Thermo has no operation 'reset' "
                       r"\(it has: alarm, batch, reading\)"):
        thermo.reset(room=1)
    assert not hasattr(thermo, "reset")  # an AttributeError too
    with pytest.raises(TypedEventError,
                       match=r"Thermo.reading\(\): parameter 'room' must be int, not str"):
        thermo.reading(room="12", value=1.0)
    with pytest.raises(TypedEventError, match="parameter 'room' must be int, not bool"):
        thermo.reading(room=True, value=1.0)
    with pytest.raises(TypedEventError, match="missing a required argument: 'value'"):
        thermo.reading(12)
    with pytest.raises(TypedEventError, match="unexpected keyword argument 'colour'"):
        thermo.alarm(room=1, colour="red")
    with pytest.raises(TypedEventError, match=r"'rooms' must be list\[int\], not list"):
        thermo.batch(rooms=[1, "2"], tag=None)
    assert plain.try_pull_structured_event() == (None, False)
    thermo.reading(12, 21.5)  # positional arguments bind by the signature
    assert plain.pull_structured_event(1) == StructuredEvent.of(
        "", "%TYPED", "", filterable_data=[("operation", "Thermo::reading"), ("room", 12),
                                           ("value", 21.5)])


class NoResult(Protocol):
    def f(self, x: int) -> int: ...


class NoAnnotation(Protocol):
    def f(self, x) -> None: ...  # type: ignore[no-untyped-def]


class VarArgs(Protocol):
    def f(self, *xs: int) -> None: ...


class Unchecked(Protocol):
    def f(self, x: set[int]) -> None: ...


class Clash(Protocol):
    def f(self, operation: str) -> None: ...


class Empty(Protocol):
    pass


class Plain:
    def f(self, x: int) -> None: ...


@pytest.mark.parametrize(("interface", "message"), [
    (NoResult, "NoResult.f must return None"),
    (NoAnnotation, "parameter 'x' has no annotation"),
    (VarArgs, r"\*args and \*\*kwargs cannot be typed events"),
    (Unchecked, r"annotation set\[int\] is not one a typed channel can check"),
    (Clash, "may not be called 'operation'"),
    (Empty, "Empty has no operations"),
    (Plain, "needs a typing.Protocol class"),
])
def test_interfaces_that_cannot_type_a_channel_are_refused(
        factory: EventChannelFactory, interface: Any, message: str) -> None:
    with pytest.raises(TypedEventError, match=message):
        TypedEventChannel.create(factory, interface)
    assert factory.get_all_channels() == []


def test_a_typed_push_consumer_must_implement_the_interface(
        factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo)
    con, _ = typed.default_consumer_admin.obtain_typed_notification_push_supplier()

    class Half:
        def reading(self, room: int, value: float) -> None: ...

    with pytest.raises(ClientTypeError, match="needs the operations alarm, batch"):
        con.connect_typed_push_consumer(Half())


# ---------------------------------------------------------------------------------
# interoperation with untyped proxies, QoS, pull forms


def test_untyped_suppliers_reach_typed_consumers_as_the_mapping_says(
        factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo)
    con, _ = typed.default_consumer_admin.obtain_typed_notification_push_supplier()
    rec = Recorder()
    con.connect_typed_push_consumer(rec)
    anys, _ = typed.channel.default_consumer_admin.obtain_notification_pull_supplier("ANY_EVENT")
    anys.connect_any_pull_consumer()
    sup, _ = typed.channel.default_supplier_admin.obtain_notification_push_consumer(
        STRUCTURED_EVENT)
    sup.connect_structured_push_supplier()
    sup.push_structured_event(StructuredEvent.of(
        "", "%TYPED", "", filterable_data=[("operation", "Thermo::alarm"), ("room", 4),
                                           ("text", "smoke")]))
    sup.push_structured_event(StructuredEvent.of("Telecom", "Alarm", "x"))  # not typed
    sup.push_structured_event(StructuredEvent.of(  # typed, but the arguments do not fit
        "", "%TYPED", "", filterable_data=[("operation", "Thermo::alarm"), ("room", "4"),
                                           ("text", "smoke")]))
    _wait(lambda: con.ignored == 2)
    assert rec.calls == [("alarm", {"room": 4, "text": "smoke"})]
    assert con.ignored == 2
    first = anys.pull(1)  # an Any consumer gets the structured event itself
    assert isinstance(first, StructuredEvent) and first.type_name == "%TYPED"


def test_typed_pull_by_operation_and_queue_qos(factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo, {Q.ORDER_POLICY: Q.FIFO_ORDER})
    sup, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
    sup.connect_typed_push_supplier()
    pull, _ = typed.default_consumer_admin.obtain_typed_notification_pull_supplier()
    pull.set_qos({Q.MAX_EVENTS_PER_CONSUMER: 3, Q.DISCARD_POLICY: Q.FIFO_ORDER})
    pull.connect_typed_pull_consumer()
    thermo: Any = sup.get_typed_consumer()
    for room in range(5):  # the queue keeps the last 3 (FIFO discard: oldest go)
        thermo.reading(room=room, value=0.5)
    thermo.alarm(room=9)
    ops = pull.get_typed_supplier()
    assert ops.pull_alarm(1) == {"room": 9, "text": "hot"}
    assert ops.try_reading() == ({"room": 3, "value": 0.5}, True)
    assert pull.pull(1) == TypedEvent("Thermo", "reading", (("room", 4), ("value", 0.5)))
    assert ops.try_alarm() == (None, False)
    with pytest.raises(TimeoutError):
        ops.pull_reading(0.05)
    with pytest.raises(UnknownOperation):
        ops.pull_reset()


def test_a_typed_pull_supplier_is_polled(factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo)

    class Source:
        def __init__(self) -> None:
            self.readings: list[dict[str, Any]] = [{"room": 1, "value": 2.0},
                                                   {"room": "bad", "value": 2.0}]

        def try_reading(self) -> tuple[dict[str, Any] | None, bool]:
            return (self.readings.pop(0), True) if self.readings else (None, False)

        def try_alarm(self) -> tuple[None, Literal[False]]:
            return None, False

        def try_batch(self) -> tuple[None, Literal[False]]:
            return None, False

    pc, _ = typed.default_supplier_admin.obtain_typed_notification_pull_consumer()
    with pytest.raises(ClientTypeError, match="try_alarm, try_batch, try_reading"):
        pc.connect_typed_pull_supplier(object())
    pc.connect_typed_pull_supplier(Source())
    pull, _ = typed.default_consumer_admin.obtain_typed_notification_pull_supplier()
    pull.connect_typed_pull_consumer()
    assert pull.pull(5).kwargs == {"room": 1, "value": 2.0}
    with pytest.raises(TimeoutError):  # the ill-typed one never entered the channel
        pull.pull(0.3)


def test_push_typed_checks_the_event_against_the_interface(
        factory: EventChannelFactory) -> None:
    typed, _ = TypedEventChannel.create(factory, Thermo)
    sup, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
    sup.connect_typed_push_supplier()
    pull, _ = typed.default_consumer_admin.obtain_typed_notification_pull_supplier()
    pull.connect_typed_pull_consumer()
    with pytest.raises(TypedEventError, match="a Other event cannot go into a channel typed"):
        sup.push_typed(TypedEvent("Other", "reading", (("room", 1), ("value", 1.0))))
    with pytest.raises(TypedEventError, match="parameter 'value' must be float"):
        sup.push_typed(TypedEvent("Thermo", "reading", (("room", 1), ("value", "hot"))))
    sup.push_typed(TypedEvent("Thermo", "alarm", (("room", 2),)))
    assert pull.pull(1) == TypedEvent("Thermo", "alarm", (("room", 2), ("text", "hot")))
