"""``siftbus match``: match an event file against a profile file (the command's options;
the job is :mod:`siftbus.cli._matchfiles`, which ``siftbus match`` runs without typer when
its options are plain: :func:`~siftbus.cli._matchfiles.fast_command`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from siftbus.cli._match_writers import (
    FORMATS,
    ArrowWriter,
    JsonLinesWriter,
    MatchWriter,
    ParquetMatchWriter,
    _numeric,
    _string_array,
)
from siftbus.cli._matchfiles import (
    CHUNK_BYTES,
    PROGRESS_THRESHOLD,
    format_for,
    load_matcher,
    match_and_write,
    match_files,
    option_error,
    run_command,
)
from siftbus.match.engines import DEFAULT_ENGINE, ENGINES

__all__ = ["CHUNK_BYTES", "FORMATS", "PROGRESS_THRESHOLD", "ArrowWriter", "JsonLinesWriter",
           "MatchWriter", "ParquetMatchWriter", "_numeric", "_string_array", "format_for",
           "load_matcher", "match_and_write", "match_files", "register"]


def register(app: typer.Typer) -> None:
    @app.command("match")
    def match_cmd(
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        profiles: Annotated[Path, typer.Option(help="profile file, one profile per line")],
        events: Annotated[Path, typer.Option(help="event file, JSON lines")],
        out: Annotated[Path | None, typer.Option(help="write matches here (default stdout)")]
        = None,
        engine: Annotated[str, typer.Option(help=f"matcher engine: {', '.join(ENGINES)}")]
        = DEFAULT_ENGINE,
        fmt: Annotated[str | None, typer.Option(
            "--format", help="output format: json (lines), arrow (IPC file) or parquet; "
            "default: from the --out suffix (.parquet, .arrow), else json")] = None,
        cloudevents: Annotated[bool | None, typer.Option(
            "--cloudevents/--no-cloudevents", help="the events are CloudEvents JSON lines "
            "(structured mode; default: when the first line has a specversion)")] = None,
    ) -> None:
        """Match every event against every profile: one JSON line per event,
        {"event": N, "matches": [ids...]}."""
        bad = option_error(engine, out, fmt)
        if bad is not None:
            raise typer.BadParameter(bad[1], param_hint=bad[0])
        run_command(schema, profiles, events, out, engine, fmt, cloudevents)
