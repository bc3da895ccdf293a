"""``siftbus xml-filter``: run the ADiWa XML event filter on files, or serve it over HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from siftbus.errors import SiftbusError
from siftbus.security.policy import OPEN, SecurityPolicy

xml_app = typer.Typer(
    help="XML event filter (ADiWa): XML subscriptions with restricted XPath targets, "
    "streaming event cutting, counting matcher, XML notifications.",
    no_args_is_help=False,
    invoke_without_command=True,
)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SiftbusError(f"cannot read {what} {path}: {exc.strerror}") from None


@xml_app.callback()
def filter_files(
    ctx: typer.Context,
    subscriptions: list[Path] = typer.Option(
        None, "--subscriptions", "-s", help="subscriptionList/subscription XML file(s)."),
    input: list[Path] = typer.Option(
        None, "--input", "-i", help="XML message file(s) with events ('-' = stdin)."),
    fmt: str = typer.Option("json", "--format", "-f", help="json (one line per notification) "
                            "or xml (a <notifications> document)."),
    all_events: bool = typer.Option(False, "--all", help="also print located events that "
                                    "matched nobody (json only)."),
    precheck: bool = typer.Option(True, "--precheck/--no-precheck",
                                  help="selectivity pre-check (sound version)."),
    strategy: str = typer.Option("access", help="access (default) or counting."),
) -> None:
    """Print one notification per matched event of the input messages.

    Example: siftbus xml-filter --subscriptions subs.xml --input events.xml
    """
    if ctx.invoked_subcommand is not None:
        return
    if not subscriptions or not input:
        print(ctx.get_help())
        raise typer.Exit(2)
    if fmt not in ("json", "xml"):
        raise SiftbusError(f"--format must be json or xml, got {fmt!r}")
    if strategy not in ("access", "counting"):
        raise SiftbusError(f"--strategy must be access or counting, got {strategy!r}")
    from lxml import etree

    from siftbus.xmlfilter import XmlEventFilter
    from siftbus.xmlfilter.output import NOTIFICATION_NS

    f = XmlEventFilter(precheck=precheck, strategy=strategy)  # type: ignore[arg-type]
    for path in subscriptions:
        f.subscribe_xml(_read(path, "subscriptions"), source=str(path), default_method="cli",
                        sender="stdout")
    out = sys.stdout
    root = etree.Element(f"{{{NOTIFICATION_NS}}}notifications", nsmap={None: NOTIFICATION_NS})
    for msg_no, path in enumerate(input):
        data = sys.stdin.buffer.read() if str(path) == "-" else _read(path, "input")
        for r in f.iter_results(data, name=str(path)):
            note = r.notification
            if fmt == "json":
                if note is None and not all_events:
                    continue
                line = (note.to_json_dict() if note is not None else
                        {"event": r.event, "targets": list(r.match.targets),
                         "subscriptions": [], "receivers": [], "xml": None})
                line = {"message": msg_no, **line}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
            elif note is not None:
                n = etree.SubElement(root, f"{{{NOTIFICATION_NS}}}notification",
                                     message=str(msg_no), event=str(note.event))
                for rec in note.receivers:
                    etree.SubElement(n, f"{{{NOTIFICATION_NS}}}receiver", method=rec.method,
                                     address=rec.address)
                for sid in note.subscriptions:
                    etree.SubElement(n, f"{{{NOTIFICATION_NS}}}subscription", id=sid)
                ev = etree.SubElement(n, f"{{{NOTIFICATION_NS}}}event")
                ev.append(etree.fromstring(note.xml))
    if fmt == "xml":
        out.write(etree.tostring(root, pretty_print=True, encoding="unicode"))
    out.flush()


@xml_app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", help="address to bind."),
    port: int = typer.Option(8001, help="port (the thesis used 8001 for publish, 8002 for "
                             "subscribe; this app serves both)."),
    subscriptions: list[Path] = typer.Option(None, "--subscriptions", "-s",
                                             help="subscriptions to register at start."),
    config: Path = typer.Option(None, "--config", help="network config whose [security] "
                                "applies: bearer tokens, rights, callback prefixes."),
    cert: Path = typer.Option(None, "--cert", help="the server's certificate (HTTPS)."),
    key: Path = typer.Option(None, "--key", help="key of --cert."),
    insecure: bool = typer.Option(False, "--insecure", help="listen on a non-loopback "
                                  "address without TLS and authentication (logged loudly)."),
) -> None:
    """Serve POST /publish, POST|GET /subscriptions, DELETE /subscriptions/{id}, GET /stats."""
    import uvicorn

    from siftbus.xmlfilter import XmlEventFilter
    from siftbus.xmlfilter.http import create_app

    f = XmlEventFilter()
    for path in subscriptions or []:
        f.subscribe_xml(_read(path, "subscriptions"), source=str(path), default_method="HTTP",
                        sender="http://localhost/")
    # security: the hook at the HTTP boundary (siftbus.xmlfilter.http_security)
    from siftbus.xmlfilter.http_security import secure_app, server_security

    guard, tls = server_security(_policy(config), cert, key, host=host, insecure=insecure)
    uvicorn.run(secure_app(create_app(f), guard), host=host, port=port, log_level="info",
                **tls)


def _policy(config: Path | None) -> SecurityPolicy:
    """The ``[security]`` policy of a network config (open without one)."""
    if config is None:
        return OPEN
    from siftbus.broker.config import load_network

    return load_network(config).security


def register(app: typer.Typer) -> None:
    app.add_typer(xml_app, name="xml-filter")
