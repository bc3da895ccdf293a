"""A pull consumer: it asks the channel for events (``pull``/``try_pull``).

In process (default), or as a persistent remote consumer with exactly-once delivery
(acknowledge + deduplicate by sequence number) against a channel service::

    python examples/channels/pull_consumer.py
    python examples/channels/pull_consumer.py --server 127.0.0.1:7650 --channel 1
"""

from __future__ import annotations

import argparse
import asyncio

from siftbus.channel import STRUCTURED_EVENT, EventChannelFactory
from siftbus.channel.remote import ChannelClient, RemoteConsumer


def in_process() -> None:
    from push_supplier import readings

    with EventChannelFactory() as factory:
        channel, _ = factory.create_channel()
        proxy, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(
            STRUCTURED_EVENT)
        proxy.connect_structured_pull_consumer()
        room0 = factory.filter_factory.create_filter()
        room0.add_constraints(["$room == 0"])
        proxy.add_filter(room0)
        supplier, _ = channel.default_supplier_admin.obtain_notification_push_consumer(
            STRUCTURED_EVENT)
        supplier.connect_structured_push_supplier(None)
        for e in readings(8):
            supplier.push_structured_event(e)
        while True:
            event, has = proxy.try_pull_structured_event()
            if not has:
                break
            assert event is not None
            print("pulled:", event.event_name, dict(event.filterable_data))


async def remote(addr: str, channel: int, seconds: float) -> None:
    host, _, port = addr.rpartition(":")
    client = await ChannelClient.connect(host, int(port))
    try:
        consumer = await RemoteConsumer.obtain(client, channel)
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            for e in await consumer.pull(100, timeout=1.0):
                print("pulled:", e.event_name)
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
