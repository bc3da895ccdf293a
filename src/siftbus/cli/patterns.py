"""``siftbus patterns import|export`` (EventBridge / event-ruler JSON patterns) and
``siftbus schema infer`` (a schema proposed from sample events)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from siftbus.cli._common import existing_file


def register(app: typer.Typer) -> None:
    pat = typer.Typer(help="EventBridge / event-ruler JSON patterns as profiles and back.",
                      no_args_is_help=True)
    app.add_typer(pat, name="patterns")
    sch_app = typer.Typer(help="Schemas: propose one from sample events.",
                          no_args_is_help=True)
    app.add_typer(sch_app, name="schema")

    @pat.command("import")
    def import_cmd(
        file: Annotated[Path, typer.Argument(help='pattern file: {"id": ..., "pattern": ...} '
                                                  "lines")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        type_name: Annotated[str | None, typer.Option(
            "--type", help='event type of patterns without "type": ["T"]')] = None,
    ) -> None:
        """Print each pattern as a profile line (same semantics; refused when it has none)."""
        from siftbus.errors import ProfileError
        from siftbus.lang.patterns import read_pattern_lines
        from siftbus.lang.profile import format_profile
        from siftbus.model import load_schema
        from siftbus.model.textio import read_text

        sch = load_schema(existing_file(schema, "schema"))
        path = existing_file(file, "pattern file")
        text = read_text(path, source=str(path), kind=ProfileError)
        for p in read_pattern_lines(text, sch, type_name, source=str(path)):
            print(format_profile(p))

    @pat.command("export")
    def export_cmd(
        profiles: Annotated[Path, typer.Argument(help="profile file")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
    ) -> None:
        """Print each profile as a pattern line (refused where a profile has no pattern)."""
        from siftbus.errors import SiftbusError
        from siftbus.lang.patterns import format_pattern_line
        from siftbus.lang.profile import load_profiles
        from siftbus.model import load_schema

        sch = load_schema(existing_file(schema, "schema"))
        for p in load_profiles(existing_file(profiles, "profile file"), sch):
            try:
                print(format_pattern_line(p))
            except SiftbusError as exc:
                raise exc.located(source=str(profiles)) from None

    @sch_app.command("infer")
    def infer_cmd(
        events: Annotated[Path, typer.Argument(help="sample events, JSON lines with a type")],
    ) -> None:
        """Propose a schema (TOML) from sample events: kinds, optional fields, enums and
        observed integer ranges; read and edit it before use."""
        from siftbus.errors import EventError
        from siftbus.model.infer import infer_schema, schema_toml
        from siftbus.model.textio import parse_json_line, read_lines

        path = existing_file(events, "event file")

        def samples():  # type: ignore[no-untyped-def]
            for n, line in read_lines(path, source=str(path), kind=EventError):
                if line.strip():
                    obj = parse_json_line(line, source=str(path), line=n, kind=EventError)
                    if not isinstance(obj, dict):
                        raise EventError("an event must be a JSON object", source=str(path),
                                         line=n, column=1)
                    yield obj

        print(schema_toml(infer_schema(samples())), end="")
