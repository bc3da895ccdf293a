"""``siftbus check``: validate a schema, profile files and event files, reporting every error."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from siftbus.cli._common import stderr, stdout
from siftbus.errors import SiftbusError
from siftbus.lang.profile import iter_profile_lines
from siftbus.model import Schema, iter_event_lines, load_schema

#: stop listing after this many errors per file (the count is still reported)
MAX_SHOWN = 200


def check_profiles(path: Path, schema: Schema) -> tuple[int, list[SiftbusError]]:
    """Number of valid profiles and every error of a profile file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return 0, [SiftbusError(f"cannot read: {exc}", source=str(path))]
    good, errors = 0, []
    for item in iter_profile_lines(text, schema, source=str(path)):
        if isinstance(item, SiftbusError):
            errors.append(item)
        else:
            good += 1
    return good, errors


def check_events(path: Path, schema: Schema) -> tuple[int, list[SiftbusError]]:
    """Number of valid events and every error of an event file."""
    good, errors = 0, []
    try:
        with path.open(encoding="utf-8", errors="strict") as fh:
            for item in iter_event_lines(fh, schema, source=str(path)):
                if isinstance(item, SiftbusError):
                    errors.append(item)
                else:
                    good += 1
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(SiftbusError(f"cannot read: {exc}", source=str(path)))
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
        """Validate files and report every error found (exit 1 if there is any)."""
        try:
            sch = load_schema(schema)
        except SiftbusError as exc:
            stderr.print(f"[red]error[/red] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(1) from None
        stdout.print(f"ok  {escape(str(schema))}: {len(sch)} event types")
        failed = False
        jobs = [("profiles", p, check_profiles) for p in profiles or []]
        jobs += [("events", p, check_events) for p in events or []]
        for what, path, fn in jobs:
            good, errors = fn(path, sch)
            for err in errors[:MAX_SHOWN]:
                stderr.print(f"[red]error[/red] {escape(str(err))}", soft_wrap=True)
            if len(errors) > MAX_SHOWN:
                stderr.print(f"... and {len(errors) - MAX_SHOWN} more errors in {path}")
            if errors:
                failed = True
                stdout.print(f"BAD {escape(str(path))}: {good} {what} valid, {len(errors)} errors")
            else:
                stdout.print(f"ok  {escape(str(path))}: {good} {what}")
        if failed:
            raise typer.Exit(1)
