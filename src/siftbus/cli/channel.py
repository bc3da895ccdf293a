"""``siftbus channel create|list|destroy|serve`` (``siftbus etcl`` is in cli/etcl.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from siftbus.errors import ConfigError, excerpt
from siftbus.model.textio import parse_json_line

from .broker import CaOpt, CertOpt, KeyOpt, TokenFileOpt, TokenOpt, _credentials

MAX_OPTION_TEXT = 1024 * 1024
"""Longest JSON text ``--qos``/``--admin`` take (bytes of characters)."""


def _json_option(text: str | None, what: str) -> dict[str, Any]:
    if not text:
        return {}
    if len(text) > MAX_OPTION_TEXT:
        raise ConfigError(f"--{what} is longer than {MAX_OPTION_TEXT} characters", field=what)
    value = parse_json_line(text, source=f"--{what}", kind=ConfigError)
    if not isinstance(value, dict):
        raise ConfigError(f"--{what} must be a JSON object", field=what)
    return value


def _server(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--server must be HOST:PORT (port 1-65535), got {excerpt(addr)}",
                          field="server")
    return host, int(port)


def _remote(addr: str, method: str, creds: dict[str, Any], **args: Any) -> Any:
    from siftbus.channel.remote import ChannelClient

    host, port = _server(addr)

    async def run() -> Any:
        client = await ChannelClient.connect(host, port, **creds)
        try:
            return await client.call(method, **args)
        finally:
            await client.close()

    return asyncio.run(run())


def _local(store: Path, method: str, **args: Any) -> Any:
    from siftbus.channel import EventChannelFactory
    from siftbus.channel.remote import ChannelService

    with EventChannelFactory(store, dispatch=False) as factory:
        return ChannelService(factory)(method, args)


def _call(server: str | None, store: Path | None, method: str,
          creds: dict[str, Any] | None = None, **args: Any) -> Any:
    if (server is None) == (store is None):
        raise ConfigError("give exactly one of --server HOST:PORT or --store FILE",
                          field="server")
    if server is not None:
        return _remote(server, method, creds or {}, **args)
    assert store is not None
    return _local(store, method, **args)


ServerOpt = Annotated[str | None, typer.Option(
    help="a running channel service or broker, HOST:PORT")]
StoreOpt = Annotated[Path | None, typer.Option(
    help="work on a channel store file directly (persistent channels only)")]
def _creds(server: str | None, config: Path | None, token: str | None, ca: Path | None,
           cert: Path | None, key: Path | None,
           token_file: Path | None = None) -> dict[str, Any]:
    """``ChannelClient.connect`` credentials (as the broker commands take them)."""
    if server is None:
        return {}
    return _credentials(config, token, ca, cert, key, token_file)


ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="network config whose [security] section applies (docs/security.md)")]


def _server_security(config: Path | None, cert: Path | None, key: Path | None
                     ) -> tuple[Any, Any]:
    """The guard and TLS contexts of ``channel serve`` from a network config's
    ``[security]`` (open without a config)."""
    from siftbus.security.guard import Guard
    from siftbus.security.tls import ContextSet

    if config is None:
        if cert is not None or key is not None:
            raise ConfigError("--cert/--key need --config (its [security] ca)", field="cert")
        return Guard(), None
    from siftbus.broker.config import load_network

    policy = load_network(config).security
    if policy.ca is None:
        if cert is not None:
            raise ConfigError("--cert needs a [security] ca in the config", field="cert")
        return Guard(policy), None
    if cert is None or key is None:
        raise ConfigError("[security] has a ca: the channel server needs --cert and --key "
                          "(siftbus certs issue NAME)", field="cert")
    tls = policy.tls(cert, key)
    assert tls is not None
    return Guard(policy), ContextSet(tls.check())


def register(app: typer.Typer) -> None:
    channel_app = typer.Typer(help="Notification channels (CORBA Notification Service model).",
                              no_args_is_help=True)
    app.add_typer(channel_app, name="channel")

    @channel_app.command("create")
    def create_cmd(
        server: ServerOpt = None,
        store: StoreOpt = None,
        qos: Annotated[str | None, typer.Option(help='QoS JSON, e.g. {"OrderPolicy": 1}')]
        = None,
        admin: Annotated[str | None, typer.Option(
            help='admin properties JSON, e.g. {"MaxQueueLength": 1000}')] = None,
        persistent: Annotated[bool, typer.Option(
            help="EventReliability and ConnectionReliability Persistent")] = False,
        config: ConfigOpt = None, token: TokenOpt = None,
        token_file: TokenFileOpt = None, ca: CaOpt = None,
        cert: CertOpt = None, key: KeyOpt = None,
    ) -> None:
        """Create a channel; prints its id."""
        q = _json_option(qos, "qos")
        if persistent or store is not None:
            q.setdefault("ConnectionReliability", 1)
            if persistent:
                q.setdefault("EventReliability", 1)
        cid = _call(server, store, "create_channel",
                    _creds(server, config, token, ca, cert, key, token_file),
                    qos=q, admin=_json_option(admin, "admin"))
        print(cid)

    @channel_app.command("list")
    def list_cmd(server: ServerOpt = None, store: StoreOpt = None,
                 as_json: Annotated[bool, typer.Option("--json", help="JSON lines")] = False,
                 config: ConfigOpt = None, token: TokenOpt = None,
        token_file: TokenFileOpt = None, ca: CaOpt = None,
                 cert: CertOpt = None, key: KeyOpt = None) -> None:
        """List the channels with their QoS and counters."""
        infos = _call(server, store, "list_channels",
                      _creds(server, config, token, ca, cert, key, token_file))
        if as_json:
            for info in infos:
                print(json.dumps(info, sort_keys=True))
            return
        print("id  reliability  consumer-admins  supplier-admins  accepted  delivered  queued")
        for i in infos:
            rel = "persistent" if i["qos"].get("ConnectionReliability") == 1 else "best-effort"
            s = i["stats"]
            print(f"{i['id']:<3} {rel:<12} {len(i['consumer_admins']):<16} "
                  f"{len(i['supplier_admins']):<16} {s['accepted']:<9} {s['delivered']:<10} "
                  f"{s['queued']}")

    @channel_app.command("destroy")
    def destroy_cmd(channel: Annotated[int, typer.Argument(help="channel id")],
                    server: ServerOpt = None, store: StoreOpt = None,
                    config: ConfigOpt = None, token: TokenOpt = None,
        token_file: TokenFileOpt = None, ca: CaOpt = None,
                    cert: CertOpt = None, key: KeyOpt = None) -> None:
        """Destroy a channel with its admins, proxies and queued events."""
        _call(server, store, "destroy_channel",
              _creds(server, config, token, ca, cert, key, token_file),
              channel=channel)

    @channel_app.command("serve")
    def serve_cmd(
        store: Annotated[Path | None, typer.Option(help="SQLite store for persistent channels")]
        = None,
        host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port (0: any free port)")] = 7650,
        port_file: Annotated[Path | None, typer.Option(help="write the bound port here")]
        = None,
        metrics_port: Annotated[int | None, typer.Option(
            help="serve Prometheus metrics on this port (0: any free port)")] = None,
        config: ConfigOpt = None,
        cert: Annotated[Path | None, typer.Option(
            "--cert", help="the server's certificate (siftbus certs issue NAME)")] = None,
        key: Annotated[Path | None, typer.Option("--key", help="key of --cert")] = None,
        insecure: Annotated[bool, typer.Option(
            "--insecure", help="Listen on a non-loopback address without TLS and "
            "authentication (logged loudly).")] = False,
    ) -> None:
        """Run the channel service (standalone; see docs/channels.md for the broker).

        With ``--config`` its ``[security]`` section applies: TLS (``--cert``/``--key``),
        authenticated callers, service rights and ownership (docs/security.md)."""
        from siftbus.channel.remote import serve

        guard, tls = _server_security(config, cert, key)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(str(store) if store else None, host, port,
                              str(port_file) if port_file else None, guard=guard, tls=tls,
                              insecure=insecure, metrics_port=metrics_port))
