"""A typed event channel: suppliers call an interface, consumers implement it.

The channel is typed by the Protocol ``Thermo``. The supplier calls
``thermo.reading(room=12, value=21.5)``; the typed push consumer's ``reading`` is called
(through an ETCL filter on ``$operation`` and ``$room``); a structured consumer of the
same channel sees the specification's mapping (type ``%TYPED``, ``operation`` first); a
call that does not fit the interface is refused at the supplier.

    python examples/channels/typed.py
"""

from __future__ import annotations

import threading
from typing import Protocol

from siftbus.channel import STRUCTURED_EVENT, EventChannelFactory, TypedEventChannel
from siftbus.errors import TypedEventError


class Thermo(Protocol):
    """The interface: operations return None and have annotated parameters."""

    def reading(self, room: int, value: float) -> None: ...

    def alarm(self, room: int, text: str = "hot") -> None: ...


class Display:
    """A typed push consumer: implements Thermo."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def reading(self, room: int, value: float) -> None:
        print(f"reading: room {room} {value} C")
        self.done.set()

    def alarm(self, room: int, text: str = "hot") -> None:
        print(f"alarm: room {room} {text}")


def main() -> None:
    factory = EventChannelFactory()
    typed, _ = TypedEventChannel.create(factory, Thermo)

    display = Display()
    consumer, _ = typed.default_consumer_admin.obtain_typed_notification_push_supplier()
    only = factory.filter_factory.create_filter()
    only.add_constraints([([("", "%TYPED")],
                           "$operation == 'Thermo::reading' and $room >= 10")])
    consumer.add_filter(only)
    consumer.connect_typed_push_consumer(display)

    plain, _ = typed.channel.default_consumer_admin.obtain_notification_pull_supplier(
        STRUCTURED_EVENT)
    plain.connect_structured_pull_consumer()

    supplier, _ = typed.default_supplier_admin.obtain_typed_notification_push_consumer()
    supplier.connect_typed_push_supplier()
    thermo = supplier.get_typed_consumer()
    try:
        thermo.reading(room="12", value=21.5)  # type: ignore[arg-type]
    except TypedEventError as e:
        print(f"refused: {e}")
    thermo.reading(room=3, value=19.0)     # filtered out for the display
    thermo.reading(room=12, value=21.5)
    display.done.wait(5)
    event = plain.pull_structured_event(timeout=1)
    print(f"structured: {event.type_name} {dict(event.filterable_data)}")
    factory.close()


if __name__ == "__main__":
    main()
