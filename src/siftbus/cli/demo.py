"""``siftbus demo``: what ``make demo`` runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from siftbus.spark.demo import LiveNetwork

KEEP_UP = ("to keep a broker network and its dashboard up after the demo:\n"
           "  siftbus network up examples/network/net.toml &\n"
           "  siftbus gateway -c examples/network/net.toml -n B0 --port 8080\n"
           "  then open http://127.0.0.1:8080/dashboard (Ctrl-C stops each)")


def start_gateway(net: LiveNetwork, broker: str, port: int) -> Any:
    """Start the gateway of ``broker`` in the demo network's event loop (on ``port``,
    else on any free port); it stops with the network. Returns the server."""
    from siftbus.errors import EnvironmentProblem
    from siftbus.gateway import GatewayServer

    async def up(p: int) -> GatewayServer:
        gw = GatewayServer(net.config, broker, port=p)
        await gw.start()
        return gw

    try:
        gw = net.run(lambda: up(port))
    except EnvironmentProblem:  # the port is taken: any free one will do
        gw = net.run(lambda: up(0))
    net.on_close(gw.close)
    return gw


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path(
            "demo-out"),
        seed: Annotated[int, typer.Option(help="Seed of the generated day.")] = 42,
        scale: Annotated[float, typer.Option(help="Events per day, relative to ~300k.")] = 1.0,
        master: Annotated[str, typer.Option(help="Spark master URL.")] = "local[*]",
        live: Annotated[str, typer.Option(
            help="Alarm delivery: auto (broker network if usable, else files), broker, "
            "files.")] = "auto",
        examples: Annotated[Path | None, typer.Option(
            help="The building example directory (default: examples/building).")] = None,
        no_progress: Annotated[bool, typer.Option(
            "--no-progress", help="No progress bars (for logs).")] = False,
        gateway_port: Annotated[int, typer.Option(
            help="Port of the dashboard while the demo runs (taken: any free port; "
            "-1: no gateway).")] = 8080,
    ) -> None:
        """Generate a day of building events, match them on Spark, deliver the alarms live,
        and print a summary with where the outputs and plots are."""
        from siftbus.errors import SiftbusError
        from siftbus.spark.demo import print_demo, run_demo

        gateway: list[Any] = []

        def on_live(net: LiveNetwork) -> None:
            if gateway_port < 0:
                return
            try:
                gw = start_gateway(net, "B1", gateway_port)
            except SiftbusError as exc:  # the demo goes on without its dashboard
                typer.echo(f"(no dashboard: {exc})", err=True)
                return
            gateway.append(gw)
            typer.echo(f"dashboard of the live broker network, while the demo runs: "
                       f"{gw.url}/dashboard", err=True)

        from ._spark_stop import spark_interruptible

        start = time.perf_counter()
        with spark_interruptible():
            result = run_demo(out, seed=seed, scale=scale, master=master, live=live,
                              examples=examples, progress=not no_progress,
                              say=lambda text: typer.echo(text, err=True), on_live=on_live)
        print_demo(result)
        typer.echo(f"\ndemo finished in {time.perf_counter() - start:.0f} s")
        if gateway:
            typer.echo(f"the dashboard ({gateway[0].url}/dashboard) stopped with the demo; "
                       + KEEP_UP)
