"""A real 3-broker network on loopback with a gateway in front of B1, for the gateway's
tests: in the test's event loop (:func:`start_gateway_network`) or in a thread of its own
for synchronous drivers such as schemathesis and Playwright (:class:`NetworkThread`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from broker_strategies import SCHEMA
from siftbus.broker.config import NetworkConfig, parse_network
from siftbus.broker.server import BrokerServer
from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.remote import register_with_broker
from siftbus.gateway import GatewayLimits, GatewayServer
from siftbus.model import Schema

NAMES = ("B1", "B2", "B3")
"""A path B1 - B2 - B3: the gateway's broker, a middle one, the far end."""

T = TypeVar("T")


def network_text(ports: dict[str, int], protocol: str = "forwarding",
                 security: str = "") -> str:
    lines = ["[network]", f'protocol = "{protocol}"', 'strategy = "covering"', "", security]
    for i, name in enumerate(NAMES):
        lines += [f"[brokers.{name}]", 'host = "127.0.0.1"', f"port = {ports[name]}"]
        if "ca =" in security:  # certificates named after the brokers, beside the CA
            lines += [f'cert = "{name}.pem"', f'key = "{name}.key"']
        if i:
            lines.append(f'neighbours = ["{NAMES[i - 1]}"]')
        lines.append("")
    return "\n".join(lines)


@dataclass
class GatewayNetwork:
    net: NetworkConfig
    brokers: dict[str, BrokerServer]
    gateway: GatewayServer

    @property
    def url(self) -> str:
        return self.gateway.url

    async def close(self) -> None:
        await self.gateway.close()
        for srv in reversed(list(self.brokers.values())):
            await srv.close()


async def start_gateway_network(schema: Schema = SCHEMA, *,
                                limits: GatewayLimits = GatewayLimits(),
                                protocol: str = "forwarding",
                                channels: bool = True, security: str = "",
                                base: Path | None = None) -> GatewayNetwork:
    """Brokers B1 - B2 - B3 on port 0, then the gateway of B1 on port 0 (``security``: a
    ``[security]`` section, its files relative to ``base``)."""
    path = base / "net.toml" if base is not None else None
    draft = parse_network(network_text(dict.fromkeys(NAMES, 1), protocol, security),
                          schema=schema, path=path)
    servers: dict[str, BrokerServer] = {}
    for name in NAMES:
        node = draft.node(name)
        dial = {n: ("127.0.0.1", servers[n].port) for n in node.neighbours if n in servers}
        srv = BrokerServer(node, dial=dial, tls=draft.tls(name))
        await srv.start()
        servers[name] = srv
    for srv in servers.values():
        await srv.wait_neighbours(10)
    if channels:  # B1 hosts the channel service too (the gateway's channel admin)
        register_with_broker(servers["B1"], EventChannelFactory(None))
    net = parse_network(network_text({n: s.port for n, s in servers.items()}, protocol,
                                     security), schema=schema, path=path)
    gw = GatewayServer(net, "B1", limits=limits)
    await gw.start()
    return GatewayNetwork(net, servers, gw)


class NetworkThread:
    """A gateway network running in its own thread and event loop (``with`` block)."""

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.network: GatewayNetwork | None = None

    def run(self, fn: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
        """Run ``fn()`` in the network's loop and wait for its result."""
        async def wrap() -> T:
            return await fn()
        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def __enter__(self) -> GatewayNetwork:
        self.thread.start()
        self.network = self.run(lambda: start_gateway_network(**self.kw))
        return self.network

    def __exit__(self, *exc: object) -> None:
        try:
            if self.network is not None:
                self.run(self.network.close)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
