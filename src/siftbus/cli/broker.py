"""``siftbus broker``, ``siftbus publish``, ``siftbus subscribe`` (and the options every
client command shares: credentials, addresses)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer


def _run(coro: Any) -> Any:
    from siftbus.broker.server import install_uvloop

    install_uvloop()
    return asyncio.run(coro)


TokenOpt = Annotated[str | None, typer.Option(
    "--token", envvar="SIFTBUS_TOKEN", help="Token proving the client's principal "
    "(siftbus certs token NAME); default: $SIFTBUS_TOKEN.")]
TokenFileOpt = Annotated[Path | None, typer.Option(
    "--token-file", help="File holding the token (not visible in ps, unlike --token).")]
CaOpt = Annotated[Path | None, typer.Option(
    "--ca", help="CA certificate to verify the broker (TLS); default: the config's "
    "[security] ca.")]
CertOpt = Annotated[Path | None, typer.Option(
    "--cert", help="Client certificate (siftbus certs issue NAME --kind client).")]
KeyOpt = Annotated[Path | None, typer.Option("--key", help="Key of --cert.")]


def _credentials(config: Path | None, token: str | None, ca: Path | None,
                 cert: Path | None, key: Path | None,
                 token_file: Path | None = None) -> dict[str, Any]:
    """``Client.connect`` keyword arguments: the token (given, or read from
    ``token_file``) and, with a CA (given, or the config's ``[security] ca``), a TLS
    context."""
    from siftbus.errors import ConfigError

    if token_file is not None:
        token = _read_token(token_file)

    if ca is None and config is not None:
        from siftbus.broker.config import load_network

        ca = load_network(config).security.ca
    if ca is None and (cert is not None or key is not None):
        raise ConfigError("--cert/--key need --ca (the CA that signed the broker's "
                          "certificate)", field="ca")
    out: dict[str, Any] = {"token": token}
    if ca is not None:
        from siftbus.client import client_tls

        out["tls"] = client_tls(ca, cert, key)
    return out


def _read_token(path: Path) -> str:
    from siftbus.errors import ConfigError

    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file: {exc.__class__.__name__}: "
                          f"{getattr(exc, 'strerror', None) or exc}", source=str(path),
                          field="token-file") from None
    if not text or "\n" in text:
        raise ConfigError("a token file holds one token on one line", source=str(path),
                          field="token-file")
    return text


def _address(config: Path | None, name: str | None, broker: str | None) -> tuple[str, int]:
    from siftbus.client import parse_address

    if broker:
        return parse_address(broker)
    if config is None:
        return ("127.0.0.1", 7400)
    from siftbus.broker.config import load_network

    net = load_network(config)
    b = net.broker(_broker_name(net, name, config))
    return (b.host, b.port)


def _broker_name(net: Any, name: str | None, config: Path) -> str:
    """``name``, or the config's one broker (several need ``--name``)."""
    from siftbus.errors import ConfigError

    if name is not None:
        return name
    if len(net.brokers) != 1:
        raise ConfigError("the config has several brokers: choose one with --name",
                          source=str(config), field="name")
    return str(next(iter(net.brokers)))


def broker_cmd(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="Network config (TOML); without it, one broker of --schema.")]
    = None,
    name: Annotated[str | None, typer.Option(
        "--name", "-n", help="Which broker of the config (default: its only one; B0 "
        "without a config).")] = None,
    schema: Annotated[Path | None, typer.Option(
        "--schema", "-s", help="Schema (TOML) of a single broker run without --config.")]
    = None,
    port: Annotated[int | None, typer.Option(
        "--port", "-p", help="Port of a single broker (default 7400; 0: any free port).")]
    = None,
    host: Annotated[str | None, typer.Option(
        "--host", help="Address of a single broker (default 127.0.0.1; another needs "
        "--insecure or a network config with [security]).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log link events.")] = False,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve Prometheus metrics on this port (default: the config's metrics_port; "
        "0: any free port).")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Listen on a non-loopback address without TLS and "
        "authentication (logged loudly; see docs/security.md).")] = False,
) -> None:
    """Run a broker until interrupted: one of a network config, or a single broker of a
    schema (siftbus broker --schema schema.toml --port 7400)."""
    from siftbus.broker.config import load_network, parse_network
    from siftbus.errors import ConfigError
    from siftbus.model import load_schema

    if config is not None:
        if schema is not None or port is not None or host is not None:
            raise ConfigError("--schema, --port and --host are for a broker without a "
                              "network config; the config sets them", field="config")
        net = load_network(config)
        name = _broker_name(net, name, config)
    elif schema is not None:
        name = name or "B0"
        where = f"host = {json.dumps(host or '127.0.0.1')}\nport = {port or 7400}\n"
        net = parse_network(f"[brokers.{json.dumps(name)}]\n{where}",
                            schema=load_schema(schema))
        if port == 0:  # any free port: the config checks 1..65535, the server takes 0
            from dataclasses import replace

            net = replace(net, brokers={name: replace(net.broker(name), port=0)})
    else:
        raise ConfigError("give --schema schema.toml (a single broker) or --config net.toml "
                          "--name NAME (a broker of a network)", field="schema")
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format=f"%(asctime)s {name} %(levelname)s %(message)s")

    async def main() -> None:
        from siftbus.wire.signals import stop_on_signals

        stop = asyncio.Event()
        # SIGTERM/SIGINT stop the broker even while a request keeps its loop busy
        stop_on_signals(asyncio.get_running_loop(), stop.set, name=f"broker {name}")
        if os.environ.get("SIFTBUS_SUPERVISED") == "1":  # `network up` stops it on Ctrl-C
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        server = net.server(name, insecure=insecure)
        await server.start()
        b = net.broker(name)
        sec = net.security
        mode = ("open network" if sec.open else
                ", ".join(w for w, on in (("TLS", server.tls is not None),
                                          ("authenticated", sec.authenticates),
                                          ("anonymous allowed", sec.anonymous)) if on))
        print(f"broker {name} ({net.protocol}/{net.strategy}) listening on "
              f"{b.host}:{server.port} ({mode})", flush=True)
        if config is None:
            at, first = f"{b.host}:{server.port}", net.schema.names[0]
            print(f"  subscribe: siftbus subscribe -b {at} '{first}()'\n"
                  f"  publish:   siftbus publish -b {at} events.jsonl\n"
                  f"  Python:    await siftbus.connect({b.host!r}, {server.port})\n"
                  "Ctrl-C stops the broker", flush=True)
        mport = b.metrics_port if metrics_port is None else metrics_port
        metrics = None
        if mport is not None:
            from siftbus.broker.metrics import serve_broker_metrics

            metrics = await serve_broker_metrics(server, b.host, mport)
            print(f"broker {name} metrics at {metrics.url}/metrics", flush=True)
        await stop.wait()
        if metrics is not None:
            await metrics.close()
        await server.close()

    _run(main())


def publish_cmd(
    events: Annotated[Path, typer.Argument(help="Event file (JSON lines); - for stdin.")],
    broker: Annotated[str | None, typer.Option("--broker", "-b", help="host:port")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="Network config (TOML): the broker's address and security.")]
    = None,
    name: Annotated[str | None, typer.Option("--name", "-n", help="Broker of --config.")] =
    None,
    batch: Annotated[int, typer.Option(help="Events per batch.")] = 1000,
    token: TokenOpt = None, token_file: TokenFileOpt = None, ca: CaOpt = None,
    cert: CertOpt = None, key: KeyOpt = None,
) -> None:
    """Publish the events of a file (batched); every line is checked against the schema."""
    host, port = _address(config, name, broker)
    creds = _credentials(config, token, ca, cert, key, token_file)

    sent = 0  # acknowledged by the broker: what an interrupt reports

    async def main() -> None:
        nonlocal sent
        from siftbus.client import Client
        from siftbus.model import read_events

        c = await Client.connect(host, port, **creds)
        try:
            assert c.schema is not None
            buf = []
            source = sys.stdin.buffer if str(events) == "-" else events
            for item in read_events(source, c.schema, source=str(events)):
                buf.append(item)
                if len(buf) >= batch:
                    sent += await c.publish_batch(buf, ack=True)
                    buf = []
            if buf:
                sent += await c.publish_batch(buf, ack=True)
        finally:
            await c.close()

    try:
        _run(main())
    except KeyboardInterrupt:
        print(f"siftbus: interrupted after publishing {sent} event(s) to {host}:{port}",
              file=sys.stderr)
        raise typer.Exit(130) from None
    print(f"published {sent} event(s) to {host}:{port}", file=sys.stderr)


def subscribe_cmd(
    profiles: Annotated[list[str] | None, typer.Argument(help="Profile lines, e.g. "
                        "'Temperature(room = 12, value > 20)'.")] = None,
    broker: Annotated[str | None, typer.Option("--broker", "-b", help="host:port")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="Network config (TOML): the broker's address and security.")]
    = None,
    name: Annotated[str | None, typer.Option("--name", "-n", help="Broker of --config.")] =
    None,
    client: Annotated[str | None, typer.Option("--client", help="Client name (durable "
                                               "subscriptions are kept per name).")] = None,
    count: Annotated[int, typer.Option(help="Exit after this many notifications (0: never).")]
    = 0,
    timeout: Annotated[float, typer.Option(help="Exit after this many seconds (0: never).")]
    = 0.0,
    composite: Annotated[bool, typer.Option("--composite", help="The lines are composite "
                                            "profiles ('alarm: A(...) -> B(...) within 60 s "
                                            "same room', docs/composite.md).")] = False,
    token: TokenOpt = None, token_file: TokenFileOpt = None, ca: CaOpt = None,
    cert: CertOpt = None, key: KeyOpt = None,
    session: Annotated[str | None, typer.Option(
        "--session", help="Session id: the broker keeps what comes while this client is "
        "away and resumes after the last acknowledged one (docs/mobility.md).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Append the notifications to this file, each with its session "
        "number; a restart resumes after its last line (exactly once, also after kill -9)."
        )] = None,
    clean: Annotated[bool, typer.Option(
        "--clean", help="Start the session afresh: the broker drops what it keeps under "
        "the id (rows and profiles, also those of types the schema no longer has).")] =
    False,
    no_reconnect: Annotated[bool, typer.Option(
        "--no-reconnect", help="Exit when the broker connection is lost (default: "
        "reconnect with backoff and subscribe again).")] = False,
) -> None:
    """Subscribe and print each notification (or composite match) as a JSON line."""
    from siftbus.errors import ConfigError

    host, port = _address(config, name, broker)
    creds = _credentials(config, token, ca, cert, key, token_file)
    if not profiles and session is None:
        raise ConfigError("give at least one profile (or --session to resume one)",
                          field="profiles")
    if clean and session is None:
        raise ConfigError("--clean needs --session (the session to start afresh)",
                          field="clean")
    if composite:
        _run(_subscribe_composite(host, port, profiles or [], client, count, timeout, creds))
        return
    last = _resume_point(out) if out is not None else 0

    async def main() -> None:
        from siftbus.client import Client
        from siftbus.client.aio import Notification, event_json
        from siftbus.client.session import SessionState

        state = SessionState(session, last=last, clean=clean) if session else None
        c = await Client.connect(host, port, name=client, session=state,
                                 reconnect=not no_reconnect,
                                 on_disconnect=_say_disconnected,
                                 on_reconnect=_say_reconnected, **creds)
        c.unclaimed_callback = lambda n: show(n)  # the session's kept profiles
        got = 0
        done = asyncio.Event()
        sink = out.open("a", encoding="utf-8") if out is not None else sys.stdout

        def show(n: Notification) -> None:
            nonlocal got
            if count and got >= count:
                return  # the rest of the frame that reached the count
            line = event_json(n)
            if state is not None:  # its number: where a restart resumes
                line = f'{{"n": {n.n}, {line[1:]}'
            sink.write(line + "\n")
            sink.flush()  # in the file before the frame is acknowledged
            got += 1
            if count and got >= count:
                done.set()

        try:
            subs = await c.subscribe_many(profiles or [], show)
            for pid in c.restored if state is None else []:
                print(f"restored {pid}", file=sys.stderr)
            if state is not None:
                while not c.unclaimed.empty():  # kept profiles' rows in the ACK's wake
                    show(c.unclaimed.get_nowait())
                print(_session_banner(state.id, c.broker, state), file=sys.stderr,
                      flush=True)
            if subs or state is None:
                print(f"subscribed {', '.join(s.id for s in subs)} at {c.broker}",
                      file=sys.stderr, flush=True)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, done.set)
            if timeout:
                loop.call_later(timeout, done.set)
            ended = asyncio.ensure_future(c.ended.wait())
            await asyncio.wait([asyncio.ensure_future(done.wait()), ended],
                               return_when=asyncio.FIRST_COMPLETED)
            if c.ended.is_set() and not done.is_set():  # e.g. taken over elsewhere
                raise c.end_error
        finally:
            await c.close()
            if sink is not sys.stdout:
                sink.close()

    _run(main())


def _say_disconnected(c: Any) -> None:
    if c.ended.is_set():
        return  # gave up: the command ends with the reason
    print(f"connection to broker {c.broker} lost; reconnecting", file=sys.stderr,
          flush=True)


def _say_reconnected(c: Any) -> None:
    print(f"reconnected to broker {c.broker}", file=sys.stderr, flush=True)


def _session_banner(session: str, broker: str, state: Any) -> str:
    """``session phone arriving at B3: resumes after 2`` and, when the broker dropped
    rows over the session's limits while it was away, how many and by which limit."""
    st = state.status
    line = f"session {session} {st.get('state', 'open')} at {broker}: resumes after {state.last}"
    lost = st.get("lost", 0)
    if lost:
        over = ", ".join(f"{n} by {k}" for k, n in (st.get("overflow") or {}).items() if n)
        line += f"; {lost} notification(s) lost over its limits ({over or 'see stats'})"
    return line


def _resume_point(out: Path) -> int:
    """The session number of the last complete line of ``out`` (a partial last line, cut
    by a crash, is removed: its notification comes again)."""
    if not out.exists():
        return 0
    data = out.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with out.open("r+b") as f:
            f.truncate(end)
    lines = data[:end].splitlines()
    if not lines:
        return 0
    try:
        n = json.loads(lines[-1]).get("n")
    except (ValueError, AttributeError):
        n = None
    if not isinstance(n, int):
        from siftbus.errors import ConfigError

        raise ConfigError("the last line has no session number \"n\"; not a file written "
                          "by subscribe --session --out", source=str(out),
                          line=len(lines), field="out")
    return n


async def _until_done(done: asyncio.Event, timeout: float) -> None:
    """Wait for ``done``, which a signal (SIGINT, SIGTERM) or ``timeout`` seconds also set."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    if timeout:
        loop.call_later(timeout, done.set)
    await done.wait()


async def _subscribe_composite(host: str, port: int, lines: list[str], client: str | None,
                               count: int, timeout: float, creds: dict[str, Any]) -> None:
    from siftbus.client import Client
    from siftbus.client.composite import CompositeClient, CompositeSubscription, match_json

    # composite subscriptions live in the broker's composite service, which a
    # reconnection does not restore: the command ends with the connection
    c = await Client.connect(host, port, name=client, reconnect=False, **creds)
    done = asyncio.Event()
    got = 0

    async def pump(sub: CompositeSubscription) -> None:
        nonlocal got
        async for m in sub:
            if count and got >= count:
                return
            print(match_json(m), flush=True)
            got += 1
            if count and got >= count:
                done.set()

    try:
        subs = await CompositeClient.of(c).subscribe(*lines)
        print(f"subscribed {', '.join(s.id for s in subs)} at {c.broker}", file=sys.stderr,
              flush=True)
        tasks = [asyncio.ensure_future(pump(s)) for s in subs]
        await _until_done(done, timeout)
        for t in tasks:
            t.cancel()
    finally:
        await c.close()


def register(app: typer.Typer) -> None:
    app.command("broker")(broker_cmd)
    app.command("publish")(publish_cmd)
    app.command("subscribe")(subscribe_cmd)


__all__ = ["register"]
