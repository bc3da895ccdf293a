"""A push supplier: it calls the channel (``push_structured_event``).

In process (default), or against a running channel service with ``--server HOST:PORT``
(``siftbus channel serve --port 7650``)::

    python examples/channels/push_supplier.py
    python examples/channels/push_supplier.py --server 127.0.0.1:7650 --channel 1
"""

from __future__ import annotations

import argparse
import asyncio

from siftbus.channel import STRUCTURED_EVENT, EventChannelFactory, StructuredEvent
from siftbus.channel.remote import ChannelClient, RemoteSupplier


def readings(n: int) -> list[StructuredEvent]:
    return [StructuredEvent.of("Building", "Temperature", f"room-{i % 4}",
                               variable_header={"Priority": 5 if i % 4 == 0 else 0},
                               filterable_data={"room": i % 4, "celsius": 18.0 + i})
            for i in range(n)]


def in_process(n: int) -> None:
    with EventChannelFactory() as factory:
        channel, _ = factory.create_channel()
        proxy, _ = channel.default_supplier_admin.obtain_notification_push_consumer(
            STRUCTURED_EVENT)
        proxy.connect_structured_push_supplier(None)  # a nil supplier reference is fine
        puller, _ = channel.default_consumer_admin.obtain_notification_pull_supplier(
            STRUCTURED_EVENT)
        puller.connect_structured_pull_consumer()
        for e in readings(n):
            proxy.push_structured_event(e)
        print(f"pushed {n} events; the channel accepted {channel.stats().accepted}")
        proxy.disconnect_structured_push_consumer()


async def remote(addr: str, channel: int | None, n: int) -> None:
    host, _, port = addr.rpartition(":")
    client = await ChannelClient.connect(host, int(port))
    try:
        if channel is None:
            channel = await client.call("create_channel")
            print(f"created channel {channel}")
        supplier = await RemoteSupplier.obtain(client, channel)
        accepted = await supplier.push(readings(n))
        print(f"pushed {accepted} events to channel {channel}")
    finally:
        await client.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--channel", type=int)
    ap.add_argument("-n", type=int, default=8)
    a = ap.parse_args()
    if a.server:
        asyncio.run(remote(a.server, a.channel, a.n))
    else:
        in_process(a.n)
