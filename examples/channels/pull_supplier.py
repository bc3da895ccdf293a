"""A pull supplier: the channel polls it (``try_pull_structured_event``), here a sensor
that has a reading now and then.

    python examples/channels/pull_supplier.py
"""

from __future__ import annotations

import time

from siftbus.channel import STRUCTURED_EVENT, EventChannelFactory, StructuredEvent


class Sensor:
    """What a pull supplier implements: try_pull_structured_event() -> (event, has_event)."""

    def __init__(self, n: int) -> None:
        self.left = n

    def try_pull_structured_event(self) -> tuple[StructuredEvent | None, bool]:
        if self.left == 0:
            return None, False
        self.left -= 1
        return StructuredEvent.of("Building", "Motion", "hall",
                                  filterable_data={"detected": self.left % 2 == 0}), True


def main(n: int = 6) -> None:
    with EventChannelFactory() as factory:
        channel, _ = factory.create_channel()
        proxy, _ = channel.default_supplier_admin.obtain_notification_pull_consumer(
            STRUCTURED_EVENT)
        consumer, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(
            STRUCTURED_EVENT)
        consumer.connect_structured_pull_consumer()
        proxy.connect_structured_pull_supplier(Sensor(n))  # polling starts here
        got = [consumer.pull_structured_event(timeout=5) for _ in range(n)]
        print(f"the channel pulled {len(got)} events from the sensor:",
              [e.filterable_data[0][1] for e in got])
        proxy.disconnect_structured_pull_consumer()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
