"""A federated channel over three brokers: the supplier at B1, the consumer at B3.

Three broker servers in a line (in this process, on 127.0.0.1), a FederationMember beside
each. The consumer's filter at B3 (``$room >= 10 and $value > 20``) becomes a profile at
B3 that the network's profile forwarding carries to B1, so B1 forwards only the events
the consumer may want; B3's own channel makes the exact ETCL check.

    python examples/channels/federated.py
"""

from __future__ import annotations

import asyncio

from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.channel import STRUCTURED_EVENT, EventChannelFactory, StructuredEvent
from siftbus.channel.federation import FederationMember
from siftbus.channel.federation_type import FederatedType
from siftbus.client import Client

FTYPE = FederatedType("Readings", ["room", "value"])  # the fields routing may test


async def main() -> None:
    names = ["B1", "B2", "B3"]
    edges = [("B1", "B2"), ("B2", "B3")]
    servers: dict[str, BrokerServer] = {}
    for b in names:
        nbrs = tuple(x for e in edges if b in e for x in e if x != b)
        dial = {n: ("127.0.0.1", servers[n].port) for n in nbrs if n in servers}
        servers[b] = BrokerServer(BrokerNode(b, FTYPE.schema(), neighbours=nbrs, edges=edges),
                                  dial=dial)
        await servers[b].start()
    for s in servers.values():
        await s.wait_neighbours(10)

    factory = EventChannelFactory()
    members = {}
    for b in names:
        outbound, _ = factory.create_channel()
        inbound, _ = factory.create_channel()
        members[b] = FederationMember(FTYPE, outbound, inbound, b)
        await members[b].attach(await Client.connect("127.0.0.1", servers[b].port,
                                                     name=f"fed-{b}"))

    # the consumer at B3: a pull proxy with a filter, on B3's inbound channel
    consumer, _ = members["B3"].inbound.default_consumer_admin.obtain_notification_pull_supplier(
        STRUCTURED_EVENT)
    warm = factory.filter_factory.create_filter()
    warm.add_constraints([([], "$room >= 10 and $value > 20")])
    consumer.add_filter(warm)
    consumer.connect_structured_pull_consumer()  # type: ignore[attr-defined]
    await members["B3"].refresh()  # its interest goes into the network
    await asyncio.sleep(0.3)
    print(f"B3 subscribes {len(members['B3'].wanted())} profiles (the filter's, and one for "
          f"numbers without an exact key); B1's table holds "
          f"{servers['B1'].node.stats().table_size}")

    # the supplier at B1: its broker's outbound channel
    supplier, _ = members["B1"].outbound.default_supplier_admin.obtain_notification_push_consumer(
        STRUCTURED_EVENT)
    supplier.connect_structured_push_supplier()  # type: ignore[attr-defined]
    for room, value in [(3, 25.0), (12, 19.5), (12, 21.5), (14, 22.0)]:
        supplier.push_structured_event(StructuredEvent.of(
            "Building", "Temperature", filterable_data={"room": room, "value": value}))
    got = []
    for _ in range(2):
        e = await asyncio.to_thread(consumer.pull_structured_event, 5)  # type: ignore[attr-defined]
        got.append(dict(e.filterable_data))
    print(f"B3's consumer got: {got}")
    print(f"events B2 forwarded to B3: {servers['B2'].node.stats().events_out}")

    for m in members.values():
        await m.close()
    factory.close()
    for s in servers.values():
        await s.close()


if __name__ == "__main__":
    asyncio.run(main())
