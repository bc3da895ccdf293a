"""``siftbus match``: match an event file against a profile file.

The fast path works on whole batches: profiles go into the matcher in one bulk step per
event type (``add_columns``), each batch of events becomes key columns per type and is
matched on the matcher's snapshot in one kernel call, and the result (CSR arrays of dense
profile indices) is written without building a list of ids per event: JSON lines from
cached quoted ids, or Arrow/Parquet record batches (``--format arrow|parquet``).
Engines without snapshots fall back to ``match_batch``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from siftbus.cli._common import existing_file, stderr
from siftbus.lang.profile import load_profiles
from siftbus.match.base import BulkLoading, Matcher, Snapshot, Snapshotting, positions_by_type
from siftbus.match.engines import DEFAULT_ENGINE, ENGINES, make_matcher
from siftbus.model import Event, Profile, Schema, load_schema, read_events

#: inputs above this many bytes get a progress bar on stderr
PROGRESS_THRESHOLD = 1 << 20
BATCH = 4096
FORMATS = ("json", "arrow", "parquet")


def match_files(schema: Schema, profiles_path: Path, events_path: Path, out: TextIO | Path,
                *, engine: str = DEFAULT_ENGINE, progress: bool = False,
                fmt: str = "json") -> tuple[int, int]:
    """Write one match row per event of ``events_path``; returns (events, notifications).

    ``out`` is a text stream for ``fmt="json"`` (JSON lines ``{"event": N, "matches":
    [ids]}``) and a file path for ``arrow`` (an Arrow IPC file) and ``parquet``: columns
    ``event`` (int64) and ``matches`` (list of strings). Raises the first
    :class:`SiftbusError` of any input file.
    """
    matcher = load_matcher(schema, profiles_path, engine)
    writer = _writer(fmt, out)
    total = events_path.stat().st_size
    n_events = n_matches = 0
    bar: Any = None
    task: Any = None
    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn("matching"), BarColumn(),
                       TextColumn("{task.fields[events]} events"), TimeRemainingColumn(),
                       console=stderr, transient=True)
        bar.start()
        task = bar.add_task("match", total=total, events=0)

    def advance(n: int) -> None:
        if bar is not None:
            bar.update(task, advance=n, events=n_events)

    try:
        for batch in event_batches(events_path, schema, advance=advance):
            n_matches += match_and_write(matcher, batch, n_events, writer)
            n_events += len(batch)
        writer.close()
    finally:
        if bar is not None:
            bar.stop()
    return n_events, n_matches


def event_batches(path: Path, schema: Schema, *, size: int = 0,
                  advance: Callable[[int], object] | None = None) -> Iterator[list[Event]]:
    """The events of a JSON-lines file in batches of ``size`` (default :data:`BATCH`),
    read by the one rule for event files (:func:`~siftbus.model.read_events`); the first
    bad line raises. ``advance`` is told how many bytes were read."""
    size = size or BATCH
    batch: list[Event] = []
    done = 0
    with path.open("rb") as raw:
        for event in read_events(raw, schema, source=str(path)):
            batch.append(event)
            if len(batch) >= size:
                if advance is not None:
                    advance(raw.tell() - done)
                    done = raw.tell()
                yield batch
                batch = []
    if batch:
        yield batch


def load_matcher(schema: Schema, profiles_path: Path, engine: str = DEFAULT_ENGINE) -> Matcher:
    """A matcher of ``engine`` holding every profile of the file: parse, validate,
    normalise and add (what ``bench/ingest.py`` times as "profiles")."""
    matcher = make_matcher(engine)
    add_profiles(matcher, load_profiles(profiles_path, schema))
    return matcher


def add_profiles(matcher: Matcher, profiles: Sequence[Profile]) -> None:
    """Add ``profiles``: one bulk step per event type when the engine can."""
    if not isinstance(matcher, BulkLoading):
        for p in profiles:
            matcher.add(p)
        return
    from siftbus.match.columns import ProfileColumns

    by_type: dict[str, list[Profile]] = {}
    for p in profiles:
        by_type.setdefault(p.type_name, []).append(p)
    for group in by_type.values():
        matcher.add_columns(ProfileColumns.from_profiles(group[0].etype, group))


def match_and_write(matcher: Matcher, events: Sequence[Event], first: int,
                    writer: MatchWriter) -> int:
    """Match one batch and hand it to ``writer``; returns the number of matches."""
    if not isinstance(matcher, Snapshotting):
        rows = matcher.match_batch(events)
        writer.write_rows(first, rows)
        return sum(map(len, rows))
    import numpy as np

    from siftbus.match.cells import events_to_columns

    snap = matcher.snapshot()
    n = len(events)
    parts = []
    counts = np.zeros(n, np.int64)
    for tname, pos in positions_by_type(events).items():
        group = [events[i] for i in pos]
        csr = snap.match_columns(tname, events_to_columns(group[0].etype, group))
        where = np.asarray(pos, np.int64)
        counts[where] = np.diff(csr.offsets)
        parts.append((where, csr.offsets, csr.profiles))
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
    writer.write_csr(first, offsets, profiles, snap)
    return int(offsets[-1])


class MatchWriter:
    """Where match rows go: JSON lines, or Arrow/Parquet record batches."""

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        """Rows ``first, first+1, ...``: CSR of dense profile indices of ``snap``."""
        raise NotImplementedError

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        """Rows ``first, first+1, ...`` as lists of ids."""
        raise NotImplementedError

    def close(self) -> None:
        """Finish the output (footers)."""


class JsonLinesWriter(MatchWriter):
    """``{"event": N, "matches": [...]}`` per line, exactly what ``json.dumps`` writes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._snap: Snapshot | None = None
        self._quoted: Any = None
        self._have: Any = None

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        import numpy as np

        if self._snap is not snap:  # quote ids once per snapshot, only those matched
            self._snap = snap
            self._quoted = np.empty(len(snap), object)
            self._have = np.zeros(len(snap), bool)
        quoted = self._quoted
        need = np.unique(profiles)
        need = need[~self._have[need]]
        if len(need):
            quoted[need] = [json.dumps(i) for i in snap.profile_ids[need].tolist()]
            self._have[need] = True
        q = quoted[profiles].tolist()
        off = offsets.tolist()
        self.out.write("".join(
            [f'{{"event": {first + i}, "matches": [{", ".join(q[off[i]:off[i + 1]])}]}}\n'
             for i in range(len(off) - 1)]))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        self.out.write("".join(json.dumps({"event": first + i, "matches": list(r)}) + "\n"
                               for i, r in enumerate(rows)))


class ArrowWriter(MatchWriter):
    """Record batches ``event int64, matches list<string>`` to an Arrow IPC or Parquet
    file (pyarrow is imported only for these formats)."""

    def __init__(self, path: Path, fmt: str) -> None:
        import pyarrow as pa

        self.pa = pa
        self.schema = pa.schema([("event", pa.int64()), ("matches", pa.list_(pa.string()))])
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self.sink: Any = pq.ParquetWriter(str(path), self.schema)
        else:
            self.sink = pa.ipc.new_file(str(path), self.schema)
        self._snap: Snapshot | None = None
        self._ids: Any = None

    def _batch(self, first: int, n: int, matches: Any) -> None:
        pa = self.pa
        events = pa.array(range(first, first + n), pa.int64())
        self.sink.write_table(pa.Table.from_arrays([events, matches], schema=self.schema))

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        pa = self.pa
        if self._snap is not snap:
            self._snap = snap
            self._ids = pa.array(snap.profile_ids, pa.string())
        off = pa.array(offsets.astype("int32"), pa.int32())
        self._batch(first, len(offsets) - 1,
                    pa.ListArray.from_arrays(off, self._ids.take(pa.array(profiles))))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        self._batch(first, len(rows), self.pa.array([list(r) for r in rows],
                                                    self.pa.list_(self.pa.string())))

    def close(self) -> None:
        self.sink.close()


def _writer(fmt: str, out: TextIO | Path) -> MatchWriter:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        if isinstance(out, Path):
            raise ValueError("json output goes to a text stream")
        return JsonLinesWriter(out)
    if not isinstance(out, Path):
        raise ValueError(f"{fmt} output needs a file path (--out)")
    return ArrowWriter(out, fmt)


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
    ) -> None:
        """Match every event against every profile: one JSON line per event,
        {"event": N, "matches": [ids...]}."""
        if engine not in ENGINES:
            raise typer.BadParameter(f"choose one of {', '.join(ENGINES)}", param_hint="--engine")
        kind = format_for(out, fmt)
        if kind not in FORMATS:
            raise typer.BadParameter(f"choose one of {', '.join(FORMATS)}", param_hint="--format")
        if kind != "json" and out is None:
            raise typer.BadParameter(f"{kind} output needs --out FILE", param_hint="--format")
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
                if kind == "json":
                    with tmp.open("w", encoding="utf-8") as fh:
                        n, m = match_files(sch, profiles, events, fh, engine=engine,
                                           progress=progress)
                else:
                    n, m = match_files(sch, profiles, events, tmp, engine=engine,
                                       progress=progress, fmt=kind)
                os.replace(tmp, out)
            finally:
                tmp.unlink(missing_ok=True)
        if out is not None or progress:
            stderr.print(f"matched {n} events, {m} notifications ({engine} engine)")
