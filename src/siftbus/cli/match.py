"""``siftbus match``: match an event file against a profile file.

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

import contextlib
import json
import os
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from siftbus.cli._common import existing_file
from siftbus.match.base import BulkLoading, Matcher, Snapshot, Snapshotting
from siftbus.match.engines import DEFAULT_ENGINE, ENGINES, make_matcher
from siftbus.model import Schema, load_schema

if TYPE_CHECKING:  # numpy and the scanners are loaded when a command runs
    from siftbus.match.ingest import EventChunk

#: inputs above this many bytes get a progress bar on stderr (when it is a terminal)
PROGRESS_THRESHOLD = 1 << 20
CHUNK_BYTES = 1 << 22
"""Bytes of the event file read, scanned and matched at a time (whole lines)."""
FORMATS = ("json", "arrow", "parquet")
ROW_GROUP_EVENTS = 1 << 20
"""Parquet output: at most this many events per row group (Parquet's default length)."""
ROW_GROUP_MATCHES = 1 << 23
"""Parquet output: a row group ends after this many matches (~32 MiB of held indices)."""


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
    from siftbus.match.ingest import load_profile_columns

    matcher = make_matcher(engine)
    try:
        loaded = load_profile_columns(profiles_path, schema)
    except ExtendedProfileError:  # checks or "or": profile objects, kept as they are
        for p in load_profiles(profiles_path, schema):
            matcher.add(p)
        return matcher
    while loaded:
        cols = loaded.pop()  # let each type's columns go once they are compiled
        if isinstance(matcher, BulkLoading):
            matcher.add_columns(cols)
        else:
            for p in cols.profiles():
                matcher.add(p)
        del cols
    return matcher


OBJECT_BATCH = 4096
"""Events matched per call on the object path (extended schemas)."""


def _match_objects(matcher: Matcher, schema: Schema, events_path: Path,
                   writer: MatchWriter) -> tuple[int, int]:
    from itertools import islice

    from siftbus.model import read_events

    n_events = n_matches = 0
    events = read_events(events_path, schema)
    while batch := list(islice(events, OBJECT_BATCH)):
        rows = matcher.match_batch(batch)
        writer.write_rows(n_events, rows)
        n_events += len(batch)
        n_matches += sum(map(len, rows))
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


class MatchWriter(ABC):
    """Where match rows go: JSON lines, or Arrow/Parquet record batches."""

    @abstractmethod
    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        """Rows ``first, first+1, ...``: CSR of dense profile indices of ``snap``."""

    @abstractmethod
    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        """Rows ``first, first+1, ...`` as lists of ids."""

    def close(self) -> None:  # noqa: B027 - a hook: nothing by default
        """Finish the output (footers)."""


class JsonLinesWriter(MatchWriter):
    """``{"event": N, "matches": [...]}`` per line, exactly what ``json.dumps`` writes.

    With the compiled kernels a whole batch is formatted in one call
    (:func:`siftbus.match.scan_numba.format_matches`) from the ids quoted once per
    snapshot; otherwise the pieces are laid out by array arithmetic and joined once.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._snap: Snapshot | None = None
        self._quoted: Any = None
        self._quoted_str: Any = None

    def _quoted_ids(self, snap: Snapshot) -> Any:
        """Per dense index its id as a JSON string: ``(bytes, offsets)``."""
        import numpy as np

        if self._snap is not snap:
            self._snap = snap
            self._quoted_str = None
            ids = snap.profile_ids
            try:
                raw = np.char.encode(ids, "ascii") if len(ids) else np.zeros(0, "S1")
                plain = True
            except UnicodeEncodeError:
                plain = False
            if plain:  # ASCII ids need no escapes: ids are letters, digits and _ - . /
                width = raw.dtype.itemsize
                mat = np.zeros((len(raw), width + 2), np.uint8)
                mat[:, 1:width + 1] = raw.view(np.uint8).reshape(len(raw), width)
                lens = np.char.str_len(raw).astype(np.int64)
                mat[:, 0] = 34
                mat[np.arange(len(raw)), lens + 1] = 34
                keep = np.arange(width + 2)[None, :] < (lens + 2)[:, None]
                qbytes = mat[keep]
                qoff = np.zeros(len(raw) + 1, np.int64)
                np.cumsum(lens + 2, out=qoff[1:])
            else:
                quoted = [json.dumps(i).encode() for i in ids.tolist()]
                qbytes = np.frombuffer(b"".join(quoted) or b"\0", np.uint8)
                qoff = np.zeros(len(quoted) + 1, np.int64)
                np.cumsum([len(q) for q in quoted], out=qoff[1:])
            self._quoted = (qbytes, qoff)
        return self._quoted

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        from siftbus.match import kernel

        qbytes, qoff = self._quoted_ids(snap)
        if kernel.name() == "numba":
            from siftbus.match.events_numba import format_matches

            text = format_matches(first, offsets, profiles, qbytes, qoff).tobytes()
            self.out.write(text.decode("ascii"))
            return
        import numpy as np

        if self._quoted_str is None:
            text = qbytes.tobytes().decode("ascii")
            bounds = qoff.tolist()
            self._quoted_str = np.array([text[bounds[i]:bounds[i + 1]]
                                         for i in range(len(bounds) - 1)] or [""], object)
        quoted = self._quoted_str
        # '{"event": N, "matches": [' id ", " id ... ']}\n' laid out by array arithmetic
        n = len(offsets) - 1
        counts = np.diff(offsets)
        width = 2 + counts + np.maximum(counts - 1, 0)  # head, ids, separators, tail
        at = np.zeros(n + 1, np.int64)
        np.cumsum(width, out=at[1:])
        pieces = np.empty(int(at[-1]), object)
        numbers = np.arange(first, first + n).astype(str).astype(object)
        pieces[at[:-1]] = '{"event": ' + numbers + ', "matches": ['
        pieces[at[1:] - 1] = "]}\n"
        row = np.repeat(np.arange(n), counts)
        k = np.arange(len(profiles)) - np.repeat(offsets[:-1], counts)  # index in its row
        pos = at[row] + 1 + 2 * k
        pieces[pos] = quoted[profiles]
        pieces[pos[k < counts[row] - 1] + 1] = ", "
        self.out.write("".join(pieces.tolist()))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        self.out.write("".join(json.dumps({"event": first + i, "matches": list(r)}) + "\n"
                               for i, r in enumerate(rows)))


class ArrowWriter(MatchWriter):
    """Record batches ``event int64, matches list<string>`` to an Arrow IPC file (pyarrow
    is imported only for the Arrow and Parquet formats)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        self.pa = pa
        self.schema = pa.schema([("event", pa.int64()), ("matches", pa.list_(pa.string()))])
        self.sink: Any = pa.ipc.new_file(str(path), self.schema)
        self._snap: Snapshot | None = None
        self._ids: Any = None

    def _ids_of(self, snap: Snapshot) -> Any:
        """The snapshot's ids as an Arrow string array (dense index -> id), made once."""
        if self._snap is not snap:
            self._snap = snap
            self._ids = _string_array(self.pa, snap.profile_ids)
        return self._ids

    def _events(self, first: int, n: int) -> Any:
        import numpy as np

        return _numeric(self.pa, np.arange(first, first + n, dtype=np.int64))

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        pa = self.pa
        matches = pa.ListArray.from_arrays(_numeric(pa, offsets, "int32"),
                                           self._ids_of(snap).take(_numeric(pa, profiles)))
        self.sink.write_batch(pa.record_batch([self._events(first, len(offsets) - 1), matches],
                                              schema=self.schema))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        matches = self.pa.array([list(r) for r in rows], self.pa.list_(self.pa.string()))
        self.sink.write_batch(self.pa.record_batch([self._events(first, len(rows)), matches],
                                                   schema=self.schema))

    def close(self) -> None:
        self.sink.close()


class ParquetMatchWriter(ArrowWriter):
    """The same columns in a Parquet file, written from the dense indices the kernel
    returns: the ids are a dictionary-typed list (``DictionaryArray`` of the CSR's int32
    indices over the snapshot's ids, put under the CSR offsets without a copy), so no id
    string is copied or hashed per match and the file stores each id once per row group.

    Batches are held (indices only: ~4 bytes per match) and written as one row group of up
    to :data:`ROW_GROUP_EVENTS` events or :data:`ROW_GROUP_MATCHES` matches, so the
    dictionary page and the per-group costs are paid rarely. ``event`` is delta-encoded
    (it counts up by one). Statistics are kept for ``event`` only: min/max of the ids in a
    list column select nothing and cost as much as the writing. The Arrow schema is not
    stored, so readers see ``matches`` as ``list<string>``, exactly as before (the ids
    are strings in Parquet either way). Measured choices: ``bench/ingest.py``,
    docs/matching.md.
    """

    def __init__(self, path: Path, compression: str = "snappy") -> None:
        import pyarrow as pa

        self.pa = pa
        self.path = path
        self.compression = compression
        self.schema = pa.schema([("event", pa.int64()), ("matches", pa.list_(
            pa.dictionary(pa.int32(), pa.string())))])
        self.sink = None  # made at the first row group: the dictionary's size sets a limit
        self._snap = None
        self._ids = None
        self._held: list[Any] = []
        self._held_dict: Any = None
        self._held_events = self._held_matches = 0

    def _open(self, dict_bytes: int) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetWriter(
            str(self.path), self.schema, compression=self.compression, store_schema=False,
            use_dictionary=["matches.list.element"],
            column_encoding={"event": "DELTA_BINARY_PACKED"}, write_statistics=["event"],
            # the whole id dictionary in one page, else the writer falls back to plain
            dictionary_pagesize_limit=max(1 << 20, 2 * dict_bytes))

    def _hold(self, first: int, offsets: Any, indices: Any, dictionary: Any) -> None:
        """Hold rows whose ids are ``dictionary[indices]``; a new dictionary (a new
        snapshot, or each ``write_rows`` batch) starts a new row group."""
        pa = self.pa
        if self._held and dictionary is not self._held_dict:
            self._flush()
        values = pa.DictionaryArray.from_arrays(indices, dictionary)
        n = len(offsets) - 1
        self._held.append(pa.record_batch([self._events(first, n), pa.ListArray.from_arrays(
                                               _numeric(pa, offsets, "int32"), values)],
                                          schema=self.schema))
        self._held_dict = dictionary
        self._held_events += n
        self._held_matches += len(values)
        if self._held_events >= ROW_GROUP_EVENTS or self._held_matches >= ROW_GROUP_MATCHES:
            self._flush()

    def _flush(self) -> None:
        if not self._held:
            return
        if self.sink is None:
            self.sink = self._open(self._held_dict.nbytes + 4 * len(self._held_dict))
        table = self.pa.Table.from_batches(self._held, self.schema)
        self.sink.write_table(table, row_group_size=table.num_rows)
        self._held = []
        self._held_events = self._held_matches = 0

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        pa = self.pa
        self._hold(first, offsets, _numeric(pa, profiles, "int32"), self._ids_of(snap))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        import numpy as np

        pa = self.pa
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        flat = pa.array([i for r in rows for i in r], pa.string())
        coded = flat.dictionary_encode()
        self._hold(first, offsets, coded.indices, coded.dictionary)

    def close(self) -> None:
        self._flush()
        if self.sink is None:  # no events: an empty file with the schema
            self.sink = self._open(0)
        self.sink.close()


def _numeric(pa: Any, values: Any, dtype: str | None = None) -> Any:
    """A numpy vector as an Arrow array over the same memory (after a cast to ``dtype``).

    ``pa.array`` would do, but it asks pandas whether the input is one of its objects,
    and importing pandas costs ~0.2 CPU-s: as much as writing 1M events to Parquet."""
    import numpy as np

    arr = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr),
                                 [None, pa.py_buffer(arr)])


def _string_array(pa: Any, values: Any) -> Any:
    """Strings (a numpy or Python sequence) as an Arrow string array, without pandas (see
    :func:`_numeric`)."""
    import numpy as np

    items = [str(v) for v in values] if not isinstance(values, np.ndarray) else values.tolist()
    data = "".join(items).encode("utf-8")
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    if int(lengths.sum()) != len(data):  # not all ASCII: lengths in UTF-8 bytes
        lengths = np.fromiter((len(i.encode("utf-8")) for i in items), np.int64, len(items))
    if len(data) >= 1 << 31:  # beyond int32 offsets: let pyarrow choose
        return pa.array(items, pa.string())
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(items), [None, pa.py_buffer(offsets),
                                                           pa.py_buffer(data)])


def _writer(fmt: str, out: TextIO | Path) -> MatchWriter:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        if isinstance(out, Path):
            raise ValueError("json output goes to a text stream")
        return JsonLinesWriter(out)
    if not isinstance(out, Path):
        raise ValueError(f"{fmt} output needs a file path (--out)")
    from siftbus.errors import require_extra

    require_extra("spark", f"{fmt} output", "pyarrow")
    return ParquetMatchWriter(out) if fmt == "parquet" else ArrowWriter(out)


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
        with contextlib.ExitStack() as stack:
            if cloudevents or (cloudevents is None and _first_is_cloudevent(events)):
                events = stack.enter_context(_as_event_file(events, sch))
            _match_cmd(sch, profiles, events, out, engine, kind)

    def _match_cmd(sch: Schema, profiles: Path, events: Path, out: Path | None, engine: str,
                   kind: str) -> None:
        big = events.stat().st_size > PROGRESS_THRESHOLD
        progress = big and sys.stderr.isatty()  # a bar is drawn on a terminal only
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
        if out is not None or big:
            print(f"matched {n} events, {m} notifications ({engine} engine)", file=sys.stderr)
