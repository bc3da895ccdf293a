"""``siftbus etcl eval``: an ETCL constraint against events, one answer per event line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from siftbus.errors import ConfigError, EventError, SiftbusError


def _lines(events: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of the file or of stdin (``-``), by the one rule
    for text input (strict UTF-8, BOM, line ends: ``siftbus.model.textio``)."""
    from siftbus.model.textio import read_lines

    if str(events) == "-":
        yield from read_lines(sys.stdin.buffer, source="<stdin>", kind=EventError)
        return
    if not events.is_file():
        raise EventError(f"event file {events} does not exist", source=str(events))
    yield from read_lines(events, kind=EventError)


def read_event(line: str) -> Any:
    """One event line: ``{"any": v}`` is an any event, anything else a structured event
    (IDL or flat form); raises :class:`EventError` (column within the line)."""
    from siftbus.channel.event import StructuredEvent
    from siftbus.channel.values import MAX_VALUE_DEPTH, from_json_value
    from siftbus.model.textio import TextLimits, parse_json_line

    # the any form wraps each value in a tagged object: allow its nesting
    data = parse_json_line(line, kind=EventError,
                           limits=TextLimits(max_json_depth=2 * MAX_VALUE_DEPTH + 2))
    if isinstance(data, dict) and set(data) == {"any"}:
        return from_json_value(data["any"])
    return StructuredEvent.from_dict(data)


def register(app: typer.Typer) -> None:
    etcl_app = typer.Typer(help="The Extended Trader Constraint Language.",
                           no_args_is_help=True)
    app.add_typer(etcl_app, name="etcl")

    @etcl_app.command("eval")
    def eval_cmd(
        constraint: Annotated[str, typer.Option(help="the ETCL constraint")],
        events: Annotated[Path, typer.Option(
            help="structured events, JSON lines ('-' for stdin)")],
        event_type: Annotated[list[str] | None, typer.Option(
            "--type", help="DOMAIN,TYPE the constraint applies to (repeatable; '*' wildcards)")]
        = None,
        explain: Annotated[bool, typer.Option(
            help="say why: the comparison that decided, with the values it saw")] = False,
    ) -> None:
        """Print true or false for each event (one line per event)."""
        from siftbus.lang.etcl import event_type_of, parse_constraint, types_match

        c = parse_constraint(constraint, source="--constraint")
        types = []
        for t in event_type or []:
            d, sep, tname = t.partition(",")
            if not sep:
                raise ConfigError(f"--type must be DOMAIN,TYPE, got {t[:60]!r}", field="type")
            types.append((d, tname))
        for n, line in _lines(events):
            if not line.strip():
                continue
            try:
                e = read_event(line)
            except SiftbusError as exc:
                # the line's own line number is 1: the file's is n
                exc.line = n
                raise exc.located(source=str(events), column=1) from None
            covered = types_match(types, *event_type_of(e))
            if explain:
                print(c.explain(e) if covered else
                      "false: the event type is not covered by --type")
            else:
                print("true" if covered and c.evaluate(e) else "false")
