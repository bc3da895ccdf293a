"""``siftbus network up|stats``: a whole broker network from its config, on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .broker import (
    CaOpt,
    CertOpt,
    KeyOpt,
    TokenFileOpt,
    TokenOpt,
    _credentials,
    _run,
)

if TYPE_CHECKING:
    from siftbus.broker.config import NetworkConfig

network_app = typer.Typer(help="Run and inspect a whole broker network from its config.",
                          no_args_is_help=True)


async def _gather_stats(net: NetworkConfig, timeout: float,
                        creds: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each broker's counters, or ``{"error": ..., "state": ...}`` saying why they could
    not be read: ``down`` (unreachable), ``auth failed`` (the credentials were refused)
    or ``denied`` (no ``broker.stats`` right)."""
    from siftbus.client import Client
    from siftbus.errors import SiftbusError

    out: dict[str, Any] = {}
    for name, b in net.brokers.items():
        try:
            c = await Client.connect(b.host, b.port, timeout=timeout, reconnect=False,
                                     **(creds or {}))
        except SiftbusError as exc:
            out[name] = {"error": str(exc), "state": _unreadable(exc)}
            continue
        try:
            out[name] = await c.stats()
        except SiftbusError as exc:
            out[name] = {"error": str(exc), "state": _unreadable(exc)}
        finally:
            await c.close()
    return out


def _unreadable(exc: Exception) -> str:
    from siftbus.errors import AccessDenied, AuthenticationError, RemoteError

    kind = exc.kind if isinstance(exc, RemoteError) else type(exc).__name__
    if isinstance(exc, AuthenticationError) or kind == "AuthenticationError":
        return "auth failed"
    if isinstance(exc, AccessDenied) or kind in ("AccessDenied", "SecurityError"):
        return "denied"
    return "down"


_NARROW = ("broker", "state", "clients", "table", "ev in", "ev out", "notified", "dropped",
           "p99 ms", "sessions")
"""The columns of ``network stats`` that fit 100 columns; ``--wide`` shows them all."""


def _print_stats(stats: dict[str, Any], wide: bool = False) -> None:
    from rich.table import Table

    from siftbus.broker.stats import histogram_quantile
    from siftbus.cli._common import stdout

    t = Table(title="broker network")
    cols = ["broker", "state", "links", "clients", "table", "local", "ev in", "ev out",
            "filtered", "notified", "dropped", "bytes in", "bytes out", "p50 ms", "p99 ms",
            "sessions", "buffered", "handoffs in/out"]
    shown = [c for c in cols if wide or c in _NARROW]
    for col in shown:
        t.add_column(col, justify="left" if col in ("broker", "state") else "right")
    for name, s in stats.items():
        if "error" in s:
            row = {"broker": name, "state": s.get("state", "down")}
        else:
            p50 = histogram_quantile(s["latency_ms"], 0.5)
            p99 = histogram_quantile(s["latency_ms"], 0.99)
            sess = _session_cells(s.get("sessions") or {})
            row = {"broker": name, "state": "up", "links": str(s["neighbours_up"]),
                   "clients": str(s["clients"]), "table": str(s["table_size"]),
                   "local": str(s["local_profiles"]), "ev in": str(s["events_in"]),
                   "ev out": str(s["events_out"]), "filtered": str(s["filter_ops"]),
                   "notified": str(s["notifications"]), "dropped": str(s["dropped"]),
                   "bytes in": str(s["bytes_in"]), "bytes out": str(s["bytes_out"]),
                   "p50 ms": "-" if p50 is None else f"<={p50:g}",
                   "p99 ms": "-" if p99 is None else f"<={p99:g}",
                   "sessions": sess[0], "buffered": sess[1], "handoffs in/out": sess[2]}
        t.add_row(*(row.get(c, "-") for c in shown))
    stdout.print(t)
    for name, s in stats.items():
        if "error" in s:
            print(f"siftbus: error: broker {name}: {s['error']}", file=sys.stderr)


def _session_cells(ss: dict[str, Any]) -> list[str]:
    """Sessions (attached/away), rows buffered (and their bytes), handoffs in/out."""
    if not ss:
        return ["-", "-", "-"]
    return [f"{ss.get('sessions', 0)} ({ss.get('attached', 0)}/{ss.get('away', 0)})",
            f"{ss.get('buffered', 0)} ({ss.get('buffered_bytes', 0)} B)",
            f"{ss.get('handoffs_in', 0)}/{ss.get('handoffs_out', 0)}"]


@network_app.command("stats")
def network_stats(
    config: Annotated[Path, typer.Argument(help="Network config (TOML).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] =
    False,
    wide: Annotated[bool, typer.Option(
        "--wide", help="Every column (bytes, latency p50, buffered rows, handoffs); the "
        "default fits 100 columns.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait per broker.")] = 5.0,
    token: TokenOpt = None, token_file: TokenFileOpt = None, ca: CaOpt = None,
    cert: CertOpt = None, key: KeyOpt = None,
) -> None:
    """Instrumentation of every broker: events, bytes, filter operations, table sizes.

    On a secured network the token's (or certificate's) principal needs the service
    right ``broker.stats``."""
    from siftbus.broker.config import load_network

    net = load_network(config)
    creds = _credentials(config, token, ca, cert, key, token_file)
    stats = _run(_gather_stats(net, timeout, creds))
    if as_json:
        print(json.dumps(stats, indent=2))
    else:
        _print_stats(stats, wide)
    if any("error" in s for s in stats.values()):
        raise typer.Exit(1)  # a broker could not be read: scripts see it


@network_app.command("up")
def network_up(
    config: Annotated[Path, typer.Argument(help="Network config (TOML).")],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the tree.")] = 30.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="Let the brokers log link events.")] = False,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Let brokers listen on non-loopback addresses without TLS "
        "and authentication (logged loudly).")] = False,
    token: TokenOpt = None, token_file: TokenFileOpt = None, ca: CaOpt = None,
    cert: CertOpt = None, key: KeyOpt = None,
) -> None:
    """Start every broker of the config on this machine (one process each); Ctrl-C stops.

    On a secured network the readiness check needs credentials with the service right
    ``broker.stats`` (``--token`` or a client certificate)."""
    from siftbus.broker.config import load_network
    from siftbus.errors import EnvironmentProblem

    net = load_network(config)
    creds = _credentials(config, token, ca, cert, key, token_file)
    busy = [f"{b.host}:{b.port} (broker {n})" for n, b in net.brokers.items()
            if not _port_free(b.host, b.port)]
    if busy:
        raise EnvironmentProblem(f"port(s) in use: {', '.join(busy)}; is this network "
                                 "already up? (siftbus network stats "
                                 f"{config} tells)", source=str(config))
    procs: dict[str, subprocess.Popen[bytes]] = {}
    # the brokers leave Ctrl-C to this process, which stops them once, with one line
    env = dict(os.environ, SIFTBUS_SUPERVISED="1")
    interrupted = False

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # stop the brokers on kill as on Ctrl-C
    try:
        for name in net.brokers:
            cmd = [sys.executable, "-m", "siftbus", "broker", "--config", str(config),
                   "--name", name] + (["-v"] if verbose else []) + (
                       ["--insecure"] if insecure else [])
            procs[name] = subprocess.Popen(cmd, env=env)
        deadline = time.monotonic() + timeout
        while True:
            for name, p in procs.items():
                if p.poll() is not None:
                    raise EnvironmentProblem(f"broker {name} exited with code {p.returncode}")
            stats = _run(_gather_stats(net, 1.0, creds))
            ready = [n for n, s in stats.items() if "error" not in s
                     and s["neighbours_up"] == len(net.brokers[n].neighbours)]
            if len(ready) == len(net.brokers):
                break
            if time.monotonic() > deadline:
                missing = sorted(set(net.brokers) - set(ready))
                raise EnvironmentProblem(f"network not up after {timeout:g}s: "
                                         f"{', '.join(missing)} not ready")
            time.sleep(0.2)
        print(f"network up: {len(procs)} broker(s), protocol {net.protocol}/{net.strategy}; "
              "Ctrl-C stops", flush=True)
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        dead = [n for n, p in procs.items() if p.poll() is not None]
        raise EnvironmentProblem(f"broker(s) {', '.join(dead)} exited")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    if interrupted:  # the way to stop it: one line, and a success
        print(f"network down: {len(procs)} broker(s) stopped", file=sys.stderr, flush=True)


def _port_free(host: str, port: int) -> bool:
    """Whether a broker could listen on ``host:port`` now."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
            s.bind((host, port))
    except OSError:
        return False
    return True


def register(app: typer.Typer) -> None:
    app.add_typer(network_app, name="network")


__all__ = ["register"]
