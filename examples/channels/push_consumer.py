"""A push consumer with an ETCL filter, a priority order and a sequence batch.

In process (default): the channel calls ``push_structured_events(batch)`` on us. With
``--server HOST:PORT --channel N`` the channel service pushes the events to this
connection and :class:`RemotePushConsumer` calls the callback for each one
(acknowledging what was handled, so the service can send more).

    python examples/channels/push_consumer.py
"""

from __future__ import annotations

import argparse
import asyncio
import threading

from siftbus.channel import SEQUENCE_EVENT, STRUCTURED_EVENT, EventChannelFactory
from siftbus.channel import qos as Q
from siftbus.channel.event import StructuredEvent
from siftbus.channel.remote import ChannelClient, RemotePushConsumer

WARM = "$domain_name == 'Building' and $type_name == 'Temperature' and $celsius > 20"


class Printer:
    """What a sequence push consumer implements."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.seen = 0

    def push_structured_events(self, batch: list[StructuredEvent]) -> None:
        print("batch:", [(e.event_name, dict(e.filterable_data)["celsius"]) for e in batch])
        self.seen += len(batch)
        if self.seen >= 5:
            self.done.set()


def in_process() -> None:
    from push_supplier import readings

    with EventChannelFactory() as factory:
        channel, _ = factory.create_channel({Q.ORDER_POLICY: Q.PRIORITY_ORDER})
        proxy, _ = channel.default_consumer_admin.obtain_notification_push_supplier(
            SEQUENCE_EVENT)
        proxy.set_qos({Q.MAXIMUM_BATCH_SIZE: 3, Q.PACING_INTERVAL: 1_000_000})  # 0.1 s
        warm = factory.filter_factory.create_filter()
        warm.add_constraints([([("Building", "*")], WARM)])
        proxy.add_filter(warm)
        printer = Printer()
        proxy.connect_sequence_push_consumer(printer)
        supplier, _ = channel.default_supplier_admin.obtain_notification_push_consumer(
            STRUCTURED_EVENT)
        supplier.connect_structured_push_supplier(None)
        for e in readings(8):  # 18.0 ... 25.0 degrees: five are above 20
            supplier.push_structured_event(e)
        printer.done.wait(5)


async def remote(addr: str, channel: int, seconds: float) -> None:
    host, _, port = addr.rpartition(":")
    client = await ChannelClient.connect(host, int(port))
    try:
        consumer = await RemotePushConsumer.obtain(
            client, channel, lambda e: print("pushed:", e.event_name, flush=True),
            constraints=[[[["Building", "*"]], WARM]])
        await asyncio.sleep(seconds)
        await consumer.disconnect()
    finally:
        await client.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--channel", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    if a.server:
        asyncio.run(remote(a.server, a.channel, a.seconds))
    else:
        in_process()
