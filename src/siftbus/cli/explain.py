"""``siftbus explain``: why an event does or does not match a profile, condition by condition."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from siftbus.cli._common import grid_warnings, stdout
from siftbus.errors import SiftbusError
from siftbus.match.explain import explain
from siftbus.model import load_schema, parse_event


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain_cmd(
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        profile: Annotated[str, typer.Option(help="a profile, e.g. 'Temperature(value > 20)'")],
        event: Annotated[str, typer.Option(help="an event as JSON")],
        as_json: Annotated[bool, typer.Option("--json", help="print the explanation as JSON")]
        = False,
    ) -> None:
        """Show condition by condition why EVENT does or does not match PROFILE
        (exit 0 on a match, 1 otherwise)."""
        sch = load_schema(schema)
        try:
            ev = parse_event(event, sch, source="--event", lineno=1)
        except SiftbusError as exc:
            raise exc.located(source="--event") from None
        try:
            result = explain(sch, profile, ev)
        except SiftbusError as exc:
            raise exc.located(source="--profile") from None
        for warning in grid_warnings([(1, profile)], sch, "--profile"):
            print(warning, file=sys.stderr)
        if as_json:
            print(json.dumps(result.to_dict()))
        else:
            stdout.print(f"profile  {escape(result.profile)}")
            stdout.print(f"event    {escape(ev.to_json())}")
            if result.rows:
                arrays = any(r.elements is not None for r in result.rows)
                table = Table("condition", "event value", "holds",
                              *(["held by"] if arrays else []))
                for r in result.rows:
                    table.add_row(escape(r.condition), escape(r.event_value),
                                  "[green]yes[/green]" if r.holds else "[red]no[/red]",
                                  *([escape(r.held_by())] if arrays else []))
                stdout.print(table)
            stdout.print(result.summary)
        raise typer.Exit(0 if result.matches else 1)
