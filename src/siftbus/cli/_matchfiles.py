"""The ``siftbus match`` job, without the command line: match an event file against a
profile file (:func:`match_files`), and the command's steps (:func:`run_command`), which
both the typer command (:mod:`siftbus.cli.match`) and the start-up path of ``siftbus
match`` (:func:`fast_command`: the options read by ``argparse``, typer and pydantic not
imported) run.

The fast path works on whole files and chunks: the profile file is scanned into columns
and goes into the matcher in one bulk step per event type (``add_columns``); the event
file is scanned chunk by chunk into key columns per type (both by
:mod:`siftbus.match.ingest`, which leaves every line it is not sure about to the
specification's parsers), each chunk is matched on the matcher's snapshot in one kernel
call per type, and the result (CSR arrays of dense profile indices) is written without
building a list of ids per event: JSON lines from cached quoted ids, or Arrow/Parquet
record batches (``--format arrow|parquet``). Engines without snapshots fall back to
``match_batch``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from siftbus.cli._common import existing_file
from siftbus.cli._match_writers import FORMATS, MatchWriter, _writer
from siftbus.match.base import BulkLoading, Matcher, Snapshot, Snapshotting
from siftbus.match.engines import DEFAULT_ENGINE, ENGINES, make_matcher
from siftbus.model import Schema, load_schema

if TYPE_CHECKING:  # numpy and the scanners are loaded when a command runs
    from siftbus.match.ingest import EventChunk

#: inputs above this many bytes get a progress bar on stderr (when it is a terminal)
PROGRESS_THRESHOLD = 1 << 20
CHUNK_BYTES = 1 << 22
"""Bytes of the event file read, scanned and matched at a time (whole lines)."""


def match_files(schema: Schema, profiles_path: Path, events_path: Path, out: TextIO | Path,
                *, engine: str = DEFAULT_ENGINE, progress: bool = False,
                fmt: str = "json") -> tuple[int, int]:
    """Write one match row per event of ``events_path``; returns (events, notifications).

    ``out`` is a text stream for ``fmt="json"`` (JSON lines ``{"event": N, "matches":
    [ids]}``) and a file path for ``arrow`` (an Arrow IPC file) and ``parquet``: columns
    ``event`` (int64) and ``matches`` (list of strings). Raises the first
    :class:`SiftbusError` of any input file.

    Python's cyclic collector is paused meanwhile: the job makes long-lived objects
    without cycles (an index, its profiles' constraints), which each collection would
    scan again (at 100,000 mixed profiles, 0.17 CPU-s of collections: more than half of
    what a ``json.loads`` loop over 100,000 events costs).
    """
    from siftbus.match.gcpause import collector_paused

    with collector_paused():
        return _match_files(schema, profiles_path, events_path, out, engine=engine,
                            progress=progress, fmt=fmt)


def _match_files(schema: Schema, profiles_path: Path, events_path: Path,
                 out: TextIO | Path, *, engine: str, progress: bool, fmt: str
                 ) -> tuple[int, int]:
    from siftbus.match import kernel
    from siftbus.match.ingest import read_event_chunks

    # One choice for the whole job (kernel.AUTO_BYTES): a small profile file beside a
    # large event file is scanned compiled too, as numba loads for the events anyway.
    kernel.compiled_for(sum(p.stat().st_size for p in (profiles_path, events_path)
                            if p.is_file()))
    matcher = load_matcher(schema, profiles_path, engine)
    writer = _writer(fmt, out)
    total = events_path.stat().st_size
    n_events = n_matches = 0
    bar: Any = None
    task: Any = None
    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        from siftbus.cli._common import stderr

        bar = Progress(TextColumn("matching"), BarColumn(),
                       TextColumn("{task.fields[events]} events"), TimeRemainingColumn(),
                       console=stderr, transient=True)
        bar.start()
        task = bar.add_task("match", total=total, events=0)
    try:
        if schema.extended:
            # optional/nested/array/open kinds: events as objects, matched by the
            # engine with its residual side list (match.residual)
            n_events, n_matches = _match_objects(matcher, schema, events_path, writer)
        else:
            for chunk in read_event_chunks(events_path, schema, chunk_bytes=CHUNK_BYTES):
                n_matches += match_and_write(matcher, chunk, writer)
                n_events += chunk.n
                if bar is not None:
                    bar.update(task, advance=chunk.bytes_read, events=n_events)
        writer.close()
    finally:
        if bar is not None:
            bar.stop()
    return n_events, n_matches


def load_matcher(schema: Schema, profiles_path: Path, engine: str = DEFAULT_ENGINE) -> Matcher:
    """A matcher of ``engine`` holding every profile of the file: parse, validate,
    normalise and add (what ``bench/ingest.py`` times as "profiles")."""
    from siftbus.lang.profile import load_profiles
    from siftbus.match.columns import ExtendedProfileError
    from siftbus.match.gcpause import full_collections_deferred
    from siftbus.match.ingest import load_profile_columns

    matcher = make_matcher(engine)
    try:
        # a schema with extended types has extended profiles: read once, as objects
        loaded = [] if schema.extended else load_profile_columns(profiles_path, schema)
    except ExtendedProfileError:
        loaded = []
    if not loaded:  # checks, "or", open kinds: profile objects, kept as they are
        with full_collections_deferred():
            for p in load_profiles(profiles_path, schema):
                matcher.add(p)
        return matcher
    while loaded:
        cols = loaded.pop()  # let each type's columns go once they are compiled
        if isinstance(matcher, BulkLoading):
            # a new matcher, and ids the file's load checked unique across the file
            matcher.add_columns(cols, unregistered=True)
        else:
            for p in cols.profiles():
                matcher.add(p)
        del cols
    return matcher


def _match_objects(matcher: Matcher, schema: Schema, events_path: Path,
                   writer: MatchWriter) -> tuple[int, int]:
    # JSON events as they come: the compiled open index where its kernel reads the line,
    # the specification's parser and the matcher elsewhere (match.open_batch)
    from typing import cast

    from siftbus.match.open_batch import JsonEventMatcher

    n_events = n_matches = 0
    for chunk in JsonEventMatcher(matcher, schema).match_file(events_path):
        if chunk.rows is not None:
            writer.write_rows(chunk.first, chunk.rows)
            n_matches += sum(map(len, chunk.rows))
        else:  # the writers read only the ids of a snapshot
            writer.write_csr(chunk.first, chunk.offsets, chunk.profiles,
                             cast(Snapshot, chunk.ids))
            n_matches += int(chunk.offsets[-1])
        n_events += chunk.n
    return n_events, n_matches


def match_and_write(matcher: Matcher, chunk: EventChunk, writer: MatchWriter) -> int:
    """Match one chunk of events and hand it to ``writer``; returns the number of matches."""
    if not isinstance(matcher, Snapshotting):
        rows = matcher.match_batch(chunk.events())
        writer.write_rows(chunk.first, rows)
        return sum(map(len, rows))
    import numpy as np

    snap = matcher.snapshot()
    n = chunk.n
    parts = []
    counts = np.zeros(n, np.int64)
    for g in chunk.groups:
        csr = snap.match_columns(g.etype.name, g.columns)
        counts[g.positions] = np.diff(csr.offsets)
        parts.append((g.positions, csr.offsets, csr.profiles))
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if len(parts) == 1 and len(parts[0][0]) == n:
        profiles = parts[0][2]
    else:
        profiles = np.empty(int(offsets[-1]), np.int32)
        for where, off, prof in parts:
            lengths = np.diff(off)
            dest = np.repeat(offsets[where] - off[:-1], lengths) + np.arange(len(prof))
            profiles[dest] = prof
    writer.write_csr(chunk.first, offsets, profiles, snap)
    return int(offsets[-1])


def format_for(out: Path | None, fmt: str | None) -> str:
    """The output format: as given, or from the ``--out`` suffix (``.parquet``,
    ``.arrow``/``.feather``/``.ipc``), else JSON lines."""
    if fmt is not None:
        return fmt
    suffix = out.suffix.lower() if out is not None else ""
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".arrow", ".feather", ".ipc"):
        return "arrow"
    return "json"


def _first_is_cloudevent(path: Path) -> bool:
    """Whether the first non-blank line of an event file is a structured CloudEvent."""
    from siftbus.wire.cloudevents import is_cloudevent_line

    with path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                return is_cloudevent_line(raw[:65536].decode("utf-8", "replace"))
    return False


@contextlib.contextmanager
def _as_event_file(path: Path, schema: Schema) -> Iterator[Path]:
    """A temporary event file of the events of a CloudEvents JSON-lines file (same
    numbering; the first bad line raises with the CloudEvents file's name and line)."""
    import tempfile  # here: CloudEvents input only, ~4 ms of every start

    from siftbus.errors import EventError
    from siftbus.model.textio import read_lines
    from siftbus.wire.cloudevents import event_lines

    with tempfile.TemporaryDirectory(prefix="siftbus-ce-") as d:
        tmp = Path(d) / "events.jsonl"
        with tmp.open("w", encoding="utf-8") as fh:
            lines = (text for _, text in read_lines(path, kind=EventError))
            for line in event_lines(lines, schema, source=str(path)):
                fh.write(line + "\n")
        yield tmp


def option_error(engine: str, out: Path | None, fmt: str | None) -> tuple[str, str] | None:
    """``(option, message)`` of the first bad option value, or ``None``."""
    if engine not in ENGINES:
        return "--engine", f"choose one of {', '.join(ENGINES)}"
    kind = format_for(out, fmt)
    if kind not in FORMATS:
        return "--format", f"choose one of {', '.join(FORMATS)}"
    if kind != "json" and out is None:
        return "--format", f"{kind} output needs --out FILE"
    return None


def run_command(schema: Path, profiles: Path, events: Path, out: Path | None, engine: str,
                fmt: str | None, cloudevents: bool | None) -> None:
    """What ``siftbus match`` does once its options are read and checked
    (:func:`option_error`)."""
    kind = format_for(out, fmt)
    sch = load_schema(existing_file(schema, "schema"))
    existing_file(profiles, "profile file")
    existing_file(events, "event file")
    with contextlib.ExitStack() as stack:
        if cloudevents or (cloudevents is None and _first_is_cloudevent(events)):
            events = stack.enter_context(_as_event_file(events, sch))
        _run(sch, profiles, events, out, engine, kind)


def _run(sch: Schema, profiles: Path, events: Path, out: Path | None, engine: str,
         kind: str) -> None:
    big = events.stat().st_size > PROGRESS_THRESHOLD
    progress = big and sys.stderr.isatty()  # a bar is drawn on a terminal only
    if out is None:
        n, m = match_files(sch, profiles, events, sys.stdout, engine=engine,
                           progress=progress)
    else:
        # a file appears whole or not at all; a device or a pipe (/dev/null, a FIFO) is
        # written in place: renaming over it would replace the device with a file
        special = out.exists() and not out.is_file()
        tmp = out if special else out.with_name(out.name + ".part")
        try:
            if kind == "json":
                with tmp.open("w", encoding="utf-8") as fh:
                    n, m = match_files(sch, profiles, events, fh, engine=engine,
                                       progress=progress)
            else:
                n, m = match_files(sch, profiles, events, tmp, engine=engine,
                                   progress=progress, fmt=kind)
            if not special:
                os.replace(tmp, out)
        finally:
            if not special:
                tmp.unlink(missing_ok=True)
    if out is not None or big:
        print(f"matched {n} events, {m} notifications ({engine} engine)", file=sys.stderr)


class _NotPlain(Exception):
    """The command line is not one :func:`fast_command` reads: typer reads it."""


class _Options(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # no usage text, no exit: typer says it
        raise _NotPlain(message)


def fast_command(args: Sequence[str]) -> bool:
    """Run ``siftbus match`` with these arguments (after ``match``) when they are plain
    options with good values, and say whether it did. Anything else -- ``--help``, an
    unknown, missing or bad option, a positional argument -- is left to the typer command,
    which gives its help and its errors. Start-up: typer, click and pydantic cost about
    0.1 CPU-s before a command runs, a third of a ``json.loads`` loop over 100,000
    events (docs/matching.md)."""
    if any(a in ("--", "-h", "--help") or a.startswith("--help") for a in args):
        return False
    parser = _Options(add_help=False, allow_abbrev=False)
    for name in ("--schema", "--profiles", "--events"):
        parser.add_argument(name, required=True)
    parser.add_argument("--out")
    parser.add_argument("--engine", default=DEFAULT_ENGINE)
    parser.add_argument("--format", dest="fmt")
    parser.add_argument("--cloudevents", action="store_true", default=None)
    parser.add_argument("--no-cloudevents", dest="cloudevents", action="store_false")
    try:
        opts, rest = parser.parse_known_args(list(args))
    except _NotPlain:
        return False
    paths = [opts.schema, opts.profiles, opts.events, opts.out]
    if rest or any(p is not None and (not p or p.startswith("-")) for p in paths):
        return False
    out = Path(opts.out) if opts.out is not None else None
    if option_error(opts.engine, out, opts.fmt) is not None:
        return False
    run_command(Path(opts.schema), Path(opts.profiles), Path(opts.events), out, opts.engine,
                opts.fmt, opts.cloudevents)
    return True
