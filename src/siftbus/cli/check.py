"""``siftbus check``: validate a schema, profile files and event files, reporting every error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from siftbus.cli._common import grid_warnings, print_error, stdout
from siftbus.errors import SiftbusError
from siftbus.lang.profile import iter_profile_lines, read_profile_lines
from siftbus.model import Schema, load_schema, read_events

#: stop listing after this many errors per file (the count is still reported)
MAX_SHOWN = 200


def check_profiles(path: Path, schema: Schema) -> tuple[int, list[SiftbusError]]:
    """Number of valid profiles and every error of a profile file."""
    good, errors = 0, list[SiftbusError]()
    try:
        lines = read_profile_lines(path, on_error=errors.append)
        for item in iter_profile_lines(lines, schema, source=str(path)):
            if isinstance(item, SiftbusError):
                errors.append(item)
            else:
                good += 1
    except SiftbusError as exc:  # the file cannot be opened
        errors.append(exc)
    return good, errors


def check_events(path: Path, schema: Schema) -> tuple[int, list[SiftbusError]]:
    """Number of valid events and every error of an event file."""
    good, errors = 0, list[SiftbusError]()
    try:
        for _ in read_events(path, schema, on_error=errors.append):
            good += 1
    except SiftbusError as exc:  # the file cannot be opened
        errors.append(exc)
    return good, errors


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        profiles: Annotated[list[Path] | None, typer.Option(help="profile file (repeatable)")]
        = None,
        events: Annotated[list[Path] | None, typer.Option(help="event file (repeatable)")]
        = None,
    ) -> None:
        """Validate files and report every error found, one 'siftbus: error:' line each
        (exit 2 if there is any)."""
        sch = load_schema(schema)  # a bad schema: one error line, exit 2 (cli.main)
        stdout.print(f"ok  {escape(str(schema))}: {len(sch)} event types")
        failed = False
        jobs = [("profiles", p, check_profiles) for p in profiles or []]
        jobs += [("events", p, check_events) for p in events or []]
        for what, path, fn in jobs:
            good, errors = fn(path, sch)
            if what == "profiles" and path.is_file():
                for warning in grid_warnings(read_profile_lines(path, on_error=lambda e: None),
                                             sch, str(path)):
                    print(warning, file=sys.stderr)
            for err in errors[:MAX_SHOWN]:
                print_error(err)
            if len(errors) > MAX_SHOWN:
                print_error(f"{path}: {len(errors) - MAX_SHOWN} more errors not shown")
            if errors:
                failed = True
                stdout.print(f"BAD {escape(str(path))}: {good} {what} valid, {len(errors)} errors")
            else:
                stdout.print(f"ok  {escape(str(path))}: {good} {what}")
        if failed:
            raise typer.Exit(2)
