"""``siftbus gateway``: the HTTP/WebSocket gateway and dashboard of one broker."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated, Any

import typer


def gateway_cmd(
    config: Annotated[Path, typer.Option("--config", "-c", help="Network config (TOML).")],
    name: Annotated[str, typer.Option("--name", "-n", help="The broker to be a client of.")],
    port: Annotated[int, typer.Option(help="HTTP port (0: any free port).")] = 8080,
    host: Annotated[str, typer.Option(
        help="Address to listen on (default: loopback). Another address needs "
        "--tls-cert/--tls-key and a network whose [security] authenticates every "
        "client, or --insecure.")] = "127.0.0.1",
    tls_cert: Annotated[Path | None, typer.Option(
        help="Serve HTTPS with this certificate (siftbus certs issue NAME).")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="The key of --tls-cert.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Listen on a non-loopback address without TLS or "
        "authentication (logged loudly).")] = False,
    max_body: Annotated[int | None, typer.Option(help="Bytes of one request body.")] = None,
    max_batch: Annotated[int | None, typer.Option(help="Events of one publish request.")] = None,
    request_timeout: Annotated[float | None, typer.Option(
        help="Seconds one request may take.")] = None,
    queue_size: Annotated[int | None, typer.Option(
        help="Messages queued toward one streaming client before dropping.")] = None,
    max_subscriptions: Annotated[int | None, typer.Option(
        help="Subscriptions per connection.")] = None,
    max_connections: Annotated[int | None, typer.Option(
        help="Connections and requests in progress.")] = None,
    ws_batch: Annotated[int | None, typer.Option(
        help="Notifications in one WebSocket message at most.")] = None,
    ws_batch_bytes: Annotated[int | None, typer.Option(
        help="Bytes of one WebSocket notifications message at most.")] = None,
    duration: Annotated[float, typer.Option(
        help="Stop after this many seconds (0: run until interrupted).")] = 0.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="Log every request.")] = False,
) -> None:
    """Serve REST, WebSocket and SSE access to a broker network, its Prometheus metrics
    (/metrics), the dashboard (/dashboard) and the API description (/docs)."""
    from siftbus.broker.config import load_network
    from siftbus.broker.server import install_uvloop
    from siftbus.gateway import GatewayLimits, GatewayServer

    net = load_network(config)
    given: dict[str, Any] = {
        "max_body": max_body, "max_batch": max_batch, "request_timeout": request_timeout,
        "queue_size": queue_size, "max_subscriptions": max_subscriptions,
        "max_connections": max_connections, "ws_batch": ws_batch,
        "ws_batch_bytes": ws_batch_bytes}  # None: the default of docs/gateway.md
    limits = GatewayLimits(**{k: v for k, v in given.items() if v is not None})
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format=f"%(asctime)s gateway {name} %(levelname)s %(message)s")

    async def main() -> None:
        from siftbus.wire.signals import stop_on_signals

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop_on_signals(loop, stop.set, name=f"gateway {name}")
        if duration:
            loop.call_later(duration, stop.set)
        async with GatewayServer(net, name, host=host, port=port, limits=limits,
                                 tls_cert=str(tls_cert) if tls_cert else None,
                                 tls_key=str(tls_key) if tls_key else None,
                                 insecure=insecure) as gw:
            print(f"gateway of broker {name} at {gw.url} (dashboard {gw.url}/dashboard, "
                  f"API {gw.url}/docs, metrics {gw.url}/metrics)", flush=True)
            await stop.wait()

    install_uvloop()
    asyncio.run(main())


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway_cmd)
