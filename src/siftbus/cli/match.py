"""``siftbus match``: match an event file against a profile file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from siftbus.cli._common import existing_file, stderr
from siftbus.lang.profile import load_profiles
from siftbus.match.engines import DEFAULT_ENGINE, ENGINES, make_matcher
from siftbus.model import Event, Schema, load_schema, read_events

#: inputs above this many bytes get a progress bar on stderr
PROGRESS_THRESHOLD = 1 << 20
BATCH = 4096


def match_files(schema: Schema, profiles_path: Path, events_path: Path, out: TextIO, *,
                engine: str = DEFAULT_ENGINE, progress: bool = False) -> tuple[int, int]:
    """Write one match line per event of ``events_path``; returns (events, notifications).

    Raises the first :class:`SiftbusError` of any input file.
    """
    matcher = make_matcher(engine)
    for p in load_profiles(profiles_path, schema):
        matcher.add(p)
    total = events_path.stat().st_size
    n_events = n_matches = 0
    batch: list[Event] = []

    def flush() -> None:
        nonlocal n_events, n_matches
        for ids in matcher.match_batch(batch):
            out.write(json.dumps({"event": n_events, "matches": ids}) + "\n")
            n_events += 1
            n_matches += len(ids)
        batch.clear()

    with Progress(TextColumn("matching"), BarColumn(), TextColumn("{task.fields[events]} events"),
                  TimeRemainingColumn(), console=stderr, disable=not progress,
                  transient=True) as bar, events_path.open("rb") as raw:
        task = bar.add_task("match", total=total, events=0)
        # read_events: the one rule for event files (UTF-8, BOM, line ends, limits); the
        # first bad line raises an EventError with its line and column.
        for event in read_events(raw, schema, source=str(events_path)):
            batch.append(event)
            if len(batch) >= BATCH:
                flush()
                bar.update(task, completed=raw.tell(), events=n_events)
        flush()
    return n_events, n_matches


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
    ) -> None:
        """Match every event against every profile: one JSON line per event,
        {"event": N, "matches": [ids...]}."""
        if engine not in ENGINES:
            raise typer.BadParameter(f"choose one of {', '.join(ENGINES)}", param_hint="--engine")
        sch = load_schema(existing_file(schema, "schema"))
        existing_file(profiles, "profile file")
        existing_file(events, "event file")
        progress = events.stat().st_size > PROGRESS_THRESHOLD
        if out is None:
            n, m = match_files(sch, profiles, events, sys.stdout, engine=engine,
                               progress=progress)
        else:
            tmp = out.with_name(out.name + ".part")
            try:
                with tmp.open("w", encoding="utf-8") as fh:
                    n, m = match_files(sch, profiles, events, fh, engine=engine,
                                       progress=progress)
                os.replace(tmp, out)
            finally:
                tmp.unlink(missing_ok=True)
        if out is not None or progress:
            stderr.print(f"matched {n} events, {m} notifications ({engine} engine)")
