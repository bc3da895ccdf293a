"""``siftbus mqtt-bridge``: bridge one broker and an MQTT broker (``docs/mqtt.md``)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from siftbus.cli.broker import TokenFileOpt, TokenOpt, _read_token


def mqtt_bridge_cmd(
    config: Annotated[Path, typer.Option("--config", "-c", help="Network config (TOML) "
                                         "with an [mqtt] table.")],
    name: Annotated[str, typer.Option("--name", "-n", help="The broker to be a client of.")],
    mqtt: Annotated[str, typer.Option("--mqtt", metavar="HOST:PORT",
                                      help="The MQTT broker.")] = "127.0.0.1:1883",
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    duration: Annotated[float, typer.Option(
        help="Stop after this many seconds (0: run until interrupted).")] = 0.0,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log each connection, rule and rejected message.")] = False,
) -> None:
    """MQTT topics in as events (the [[mqtt.ingress]] rules), notifications out to
    {notify}/{subscriber}/{profile} with QoS 1, profiles registered by retained
    messages on {control}/{subscriber}/{profile}. Prints its counters when it stops."""
    from siftbus.bridge import MqttBridge, load_mqtt
    from siftbus.broker.config import load_network
    from siftbus.client.aio import parse_address

    if token_file is not None:
        token = _read_token(token_file)
    net = load_network(config)
    settings = load_mqtt(config, net.schema)
    address = parse_address(mqtt)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format=f"%(asctime)s mqtt-bridge {name} %(levelname)s %(message)s")

    async def main() -> None:
        from siftbus.wire.signals import stop_on_signals

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop_on_signals(loop, stop.set, name=f"mqtt-bridge {name}")
        if duration:
            loop.call_later(duration, stop.set)
        async with MqttBridge(net, name, address, settings, token=token) as bridge:
            print(f"mqtt bridge: broker {name} <-> MQTT {mqtt} ({len(settings.ingress)} "
                  f"ingress rules; profiles on {settings.control_filter()}, "
                  f"notifications on {settings.notify}/+/+)", flush=True)
            await stop.wait()
        print(json.dumps(asdict(bridge.stats)), file=sys.stderr, flush=True)

    asyncio.run(main())


def register(app: typer.Typer) -> None:
    app.command("mqtt-bridge")(mqtt_bridge_cmd)
