"""``siftbus xml-filter``: run the ADiWa XML event filter on files, or serve it over HTTP."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import typer

from siftbus.errors import SiftbusError

if TYPE_CHECKING:
    from siftbus.security.policy import SecurityPolicy
    from siftbus.xmlfilter import XmlEventFilter
    from siftbus.xmlfilter.output import Notification
    from siftbus.xmlfilter.subscription import Receiver

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
    types: Path = typer.Option(None, "--types", help="event-type hierarchy (TOML: "
                               "[types] Name = [targets or #Subtypes], [namespaces])."),
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
    for path in input:  # fail before any output, not halfway through it
        if str(path) != "-" and not path.is_file():
            raise SiftbusError(f"cannot read input {path}: no such file")
    from siftbus.xmlfilter import XmlEventFilter

    f = XmlEventFilter(precheck=precheck, strategy=strategy)  # type: ignore[arg-type]
    if types is not None:
        _load_types(f, types)
    for path in subscriptions:
        f.subscribe_xml(_read(path, "subscriptions"), source=str(path), default_method="cli",
                        sender="stdout", freeze=True)
    if fmt == "json":
        _json_lines(f, input, all_events)
    else:
        _xml_document(f, input)


def _load_types(f: XmlEventFilter, path: Path) -> None:
    """The event-type hierarchy from a TOML file (``[types]`` and ``[namespaces]``)."""
    import tomllib

    from siftbus.errors import ConfigError

    data = _read(path, "types")
    if len(data) > 1 << 20:
        raise ConfigError("a types file is at most 1 MiB", source=str(path))
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"not a TOML types file: {str(exc)[:200]}", source=str(path)) from None
    types = doc.get("types", {})
    namespaces = doc.get("namespaces", {})
    if (not isinstance(types, dict) or not isinstance(namespaces, dict)
            or not all(isinstance(v, list) and all(isinstance(t, str) for t in v)
                       for v in types.values())
            or not all(isinstance(v, str) for v in namespaces.values())):
        raise ConfigError('expected [types] Name = ["//Target", "#Subtype"] and '
                          '[namespaces] prefix = "uri"', source=str(path))
    for name, entries in types.items():
        try:
            f.define_type(name, entries, namespaces)
        except SiftbusError as exc:
            raise exc.located(source=str(path)) from None


def _messages(inputs: list[Path]) -> Iterator[tuple[int, str, IO[bytes] | bytes]]:
    """Each input as a binary stream, opened one at a time: the engine parses it as it
    reads, so memory is bounded by the largest event, not by the input. A regular file
    of at most :data:`~siftbus.xmlfilter.splitter.SMALL` bytes is read whole instead and
    parsed in one go, as a message given to the API in memory is (the chunked reading
    and pruning cost the command a fifth of its rate on 0.5 MB messages)."""
    from siftbus.xmlfilter.splitter import SMALL

    for msg_no, path in enumerate(inputs):
        if str(path) == "-":
            yield msg_no, "<stdin>", sys.stdin.buffer
            continue
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise SiftbusError(f"cannot read input {path}: {exc.strerror}") from None
        with stream:
            try:
                st = os.fstat(stream.fileno())
                whole = stream.read() if stat.S_ISREG(st.st_mode) and st.st_size <= SMALL \
                    else None
            except OSError as exc:
                raise SiftbusError(f"cannot read input {path}: {exc.strerror}") from None
            yield msg_no, str(path), stream if whole is None else whole


def _json_lines(f: XmlEventFilter, inputs: list[Path], all_events: bool) -> None:
    out = sys.stdout
    line = _LineWriter()
    notification, unmatched = line.notification, line.unmatched
    lines: list[str] = []
    try:
        for msg_no, name, stream in _messages(inputs):
            for r in f.iter_results(stream, name=name):
                if not r.notifications:
                    if all_events:
                        lines.append(unmatched(msg_no, r.event, r.match.targets))
                else:
                    for note in r.notifications:  # one per view of the event
                        lines.append(notification(msg_no, note))
                if len(lines) >= 64:  # one write per few lines, not per line
                    out.write("".join(lines))
                    lines.clear()
    finally:  # what came before a malformed input is written before its error
        out.write("".join(lines))
        out.flush()


class _LineWriter:
    """JSON lines exactly as ``json.dumps(..., ensure_ascii=False)`` writes them, without
    building a dict per notification (that and the generic encoder took a fifth of the
    command's time on the automotive scenario).

    The event's XML goes through orjson's escaper (four times faster than the json
    module's on ASCII text, which escapes the same characters the same way). A list of
    ids or of addresses is encoded in one orjson call too, its compact ``","``
    separators then replaced by what ``json.dumps`` writes between them, when no item
    has a comma; otherwise, and for what orjson refuses (lone
    surrogates), the json module's C escaper item by item. The lists of targets are
    encoded once per distinct list.

    Nothing is cached per receiver or subscription id: on the automotive scenario a
    notification's ~7.6 receivers are mostly distinct (34,611 in 10,000 events), and a
    cache keyed by them made the command slower (0.68x of the API instead of 0.77x):
    filling it costs about what it saves, and each lookup reads cold memory where the
    receiver's own strings are one read away."""

    def __init__(self) -> None:
        import orjson  # here: every other siftbus command imports this module

        self.enc = json.encoder.encode_basestring  # the C escaper, as ensure_ascii=False
        self._dumps = orjson.dumps
        self._targets: dict[tuple[str, ...], str] = {}
        #: per method: what goes before a receiver's address, and between two of them
        self._method: dict[str, tuple[str, str]] = {}

    def _target_list(self, targets: tuple[str, ...]) -> str:
        s = self._targets.get(targets)
        if s is None:
            s = "[" + ", ".join([self.enc(x) for x in targets]) + "]"
            if len(self._targets) < 10_000:
                self._targets[targets] = s
        return s

    def _compact(self, items: tuple[str, ...] | list[str]) -> str | None:
        """``items`` as orjson writes the list (``"a","b"``) without its brackets when
        every comma in it is between two items (then so is every ``","``), else None
        (also when orjson refuses an item)."""
        try:
            s = self._dumps(items).decode()
        except TypeError:
            return None
        return None if s.count(",") >= len(items) else s[1:-1]

    def _ids(self, ids: tuple[str, ...]) -> str:
        s = self._compact(ids)
        return ", ".join(map(self.enc, ids)) if s is None else s.replace('","', '", "')

    def _receivers(self, recs: tuple[Receiver, ...]) -> str:
        if not recs:
            return ""
        m = recs[0].method
        addresses = [r.address for r in recs if r.method == m]
        if len(addresses) == len(recs):  # one method, the rule: its text around each address
            s = self._compact(addresses)
            if s is not None:
                parts = self._method.get(m)
                if parts is None:
                    if len(self._method) >= 1000:  # methods are few; bounded all the same
                        self._method.clear()
                    head = f'{{"method": {self.enc(m)}, "address": '
                    parts = self._method[m] = (head, '"}, ' + head + '"')
                return parts[0] + s.replace('","', parts[1]) + "}"
        enc = self.enc
        return ", ".join([f'{{"method": {enc(r.method)}, "address": {enc(r.address)}}}'
                          for r in recs])

    def notification(self, msg_no: int, note: Notification) -> str:
        return (f'{{"message": {msg_no}, "event": {note.event}, "targets": '
                f'{self._target_list(note.targets)}, "subscriptions": '
                f'[{self._ids(note.subscriptions)}], "receivers": '
                f'[{self._receivers(note.receivers)}], "xml": '
                # UTF-8 decoded strictly has no lone surrogates: orjson takes any
                f'{self._dumps(note.xml.decode()).decode()}}}\n')

    def unmatched(self, msg_no: int, event: int, targets: tuple[str, ...]) -> str:
        return (f'{{"message": {msg_no}, "event": {event}, "targets": '
                f'{self._target_list(tuple(targets))}, "subscriptions": [], '
                f'"receivers": [], "xml": null}}\n')


def _xml_document(f: XmlEventFilter, inputs: list[Path]) -> None:
    """A ``<notifications>`` document written as notifications come (lxml's incremental
    writer), each event exactly as it was in the input: nothing is re-indented, since
    whitespace in text is content."""
    from lxml import etree

    from siftbus.xmlfilter.output import NOTIFICATION_NS

    ns = f"{{{NOTIFICATION_NS}}}"
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    out = sys.stdout.buffer
    with etree.xmlfile(out, encoding="UTF-8") as xf:
        xf.write_declaration()
        # a prefix, not a default namespace: an event in no namespace stays in none
        with xf.element(ns + "notifications", nsmap={"sb": NOTIFICATION_NS}):
            xf.write("\n")
            for msg_no, name, stream in _messages(inputs):
                for note in (x for r in f.iter_results(stream, name=name)
                             for x in r.notifications):
                    n = etree.Element(ns + "notification", message=str(msg_no),
                                      event=str(note.event), nsmap={"sb": NOTIFICATION_NS})
                    for rec in note.receivers:
                        etree.SubElement(n, ns + "receiver", method=rec.method,
                                         address=rec.address)
                    for sid in note.subscriptions:
                        etree.SubElement(n, ns + "subscription", id=sid)
                    etree.SubElement(n, ns + "event").append(etree.fromstring(note.xml,
                                                                               parser))
                    xf.write(n)
                    xf.write("\n")
                    xf.flush()
    out.write(b"\n")
    out.flush()


@xml_app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", help="address to bind."),
    port: int = typer.Option(8001, help="port (the thesis used 8001 for publish, 8002 for "
                             "subscribe; this app serves both)."),
    subscriptions: list[Path] = typer.Option(None, "--subscriptions", "-s",
                                             help="subscriptions to register at start."),
    types: Path = typer.Option(None, "--types", help="event-type hierarchy (TOML)."),
    max_body: int = typer.Option(64 * 1024 * 1024, help="bytes of one request body (413 "
                                 "beyond)."),
    max_request_seconds: float = typer.Option(60.0, help="seconds one request may compute "
                                              "(503 beyond)."),
    config: Path = typer.Option(None, "--config", help="network config whose [security] "
                                "applies: bearer tokens, rights, callback prefixes."),
    cert: Path = typer.Option(None, "--cert", help="the server's certificate (HTTPS)."),
    key: Path = typer.Option(None, "--key", help="key of --cert."),
    insecure: bool = typer.Option(False, "--insecure", help="listen on a non-loopback "
                                  "address without TLS and authentication (logged loudly)."),
    store: Path = typer.Option(None, "--store", help="with --config: keep the documents "
                               "registered over HTTP and their owners in STORE.owners.json "
                               "and STORE.documents/ (restored at start)."),
) -> None:
    """Serve POST /publish, POST|GET /subscriptions, DELETE /subscriptions/{id}, GET /stats."""
    from siftbus.xmlfilter import XmlEventFilter
    from siftbus.xmlfilter.http import create_app, run_server
    from siftbus.xmlfilter.limits import XmlLimits

    if max_body < 1 or max_request_seconds <= 0:
        raise SiftbusError("--max-body and --max-request-seconds must be positive")
    f = XmlEventFilter()
    if types is not None:
        _load_types(f, types)
    for path in subscriptions or []:
        f.subscribe_xml(_read(path, "subscriptions"), source=str(path), default_method="HTTP",
                        sender="http://localhost/", freeze=True)
    limits = XmlLimits(max_body=max_body, max_request_seconds=max_request_seconds)
    # security: the hook at the HTTP boundary (siftbus.xmlfilter.http_security)
    from siftbus.xmlfilter.http_security import secure_app, server_security, uvicorn_tls

    guard, tls = server_security(_policy(config), cert, key, host=host, insecure=insecure)
    inner = create_app(f, limits=limits)
    if store is not None and guard.open:
        raise SiftbusError("--store keeps subscription owners: it needs --config with a "
                           "[security] section")
    run_server(secure_app(inner, guard, max_body=max_body, tls=tls, store=store), host, port,
               inner=inner, tls=uvicorn_tls(tls))


def _policy(config: Path | None) -> SecurityPolicy:
    """The ``[security]`` policy of a network config (open without one; imported here:
    the filter command needs none of it, and it costs a third of the start-up)."""
    from siftbus.security.policy import OPEN

    if config is None:
        return OPEN
    from siftbus.broker.config import load_network

    return load_network(config).security


def register(app: typer.Typer) -> None:
    app.add_typer(xml_app, name="xml-filter")
