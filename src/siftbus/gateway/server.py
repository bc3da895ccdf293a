"""Running a gateway: its broker client and its HTTP listener in one event loop.

::

    async with GatewayServer(load_network("net.toml"), "B1", port=8080) as gw:
        print(gw.url)          # http://127.0.0.1:8080 (the dashboard at /dashboard)
        await stop.wait()

The listener binds 127.0.0.1 unless told otherwise. Like a broker, it refuses a
non-loopback address unless it speaks HTTPS (``tls_cert``/``tls_key``) and the network
authenticates every client (``[security]`` without anonymous access; requests then need a
bearer token, passed through to the brokers) -- or ``insecure=True``, logged loudly.
"""

from __future__ import annotations

from siftbus.broker.config import NetworkConfig
from siftbus.errors import ConfigError
from siftbus.security.guard import check_bind
from siftbus.wire.httpserver import EmbeddedHTTPServer

from .app import create_app
from .hub import Gateway
from .limits import DEFAULT_LIMITS, GatewayLimits


class GatewayServer:
    """A :class:`Gateway` served over HTTP on ``host:port`` (0: a free port)."""

    def __init__(self, net: NetworkConfig, broker: str, *, host: str = "127.0.0.1",
                 port: int = 0, limits: GatewayLimits = DEFAULT_LIMITS,
                 tls_cert: str | None = None, tls_key: str | None = None,
                 insecure: bool = False) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise ConfigError("give both the gateway's TLS certificate and its key",
                              field="tls_cert")
        check_bind(host, tls=tls_cert is not None, authenticated=net.security.authenticates,
                   insecure=insecure, what=f"gateway of {broker}")
        self.gateway = Gateway(net, broker, limits=limits)
        self.http = EmbeddedHTTPServer(create_app(self.gateway), host, port,
                                       name=f"gateway of {broker}",
                                       limit_concurrency=limits.max_connections,
                                       ws_max_size=limits.ws_max_message,
                                       ssl_certfile=tls_cert, ssl_keyfile=tls_key)

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def port(self) -> int:
        return self.http.port

    async def start(self) -> None:
        await self.gateway.start()
        try:
            await self.http.start()
        except BaseException:
            await self.gateway.close()
            raise

    async def close(self) -> None:
        await self.http.close()
        await self.gateway.close()

    async def __aenter__(self) -> GatewayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["GatewayServer"]
