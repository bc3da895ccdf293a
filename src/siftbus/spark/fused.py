"""Parse, match and write the standard outputs in one pass inside the Python workers.

Measured on 400,000 mixed events and 20,000 profiles (docs/pipeline.md, "Where the time
goes"), the job spent about 90% of its CPU in the JVM moving each event's parsed keys and
text back from Python, caching them, and turning every notification into a Spark row to
explode, shuffle by subscriber and write as Parquet; parsing and matching, the work, were
under 10%. So the executors now do all of it on their Arrow batches: parse, match, and
write the notifications (Parquet, one directory per subscriber) and the match lines (JSON
lines parts) with pyarrow into a staging directory; only a few summary rows per task go
back to the JVM (counts per subscriber, events and matches per source, the parts written,
the dead letters, and the notifications live delivery asked for). The driver then
commits the staged files into place (:mod:`siftbus.spark.sinks`), so a batch job's
outputs appear whole or not at all, and a replayed streaming batch overwrites its own
files.

Task retries rewrite the same file names (partition id and chunk number), so a retried
task leaves no duplicate behind. The staging directory must be on a filesystem that every
executor and the driver see at the same path: always so for ``local[*]`` and for a
standalone cluster on one machine; on a real cluster a shared mount, else the pipeline
keeps Spark's own writers (``executor_writes`` in the ``[spark]`` settings).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from siftbus.model.textio import TEXT_LIMITS, TextLimits
from siftbus.spark.match_stage import MatchPlan, match_parts
from siftbus.spark.parse import iter_parsed
from siftbus.spark.subscriber_files import SubscriberFiles

FUSED_SCHEMA = pa.schema([
    ("kind", pa.string()),
    ("source", pa.string()),
    ("event", pa.int64()),
    ("line", pa.int64()),
    ("column", pa.int32()),
    ("reason", pa.string()),
    ("text", pa.string()),
    ("type", pa.string()),
    ("profile", pa.string()),
    ("subscriber", pa.string()),
    ("n", pa.int64()),
    ("notes", pa.int64()),
    ("hits", pa.int64()),
    ("path", pa.string()),
])
"""The few rows a task hands back to the JVM. ``kind`` says which fields are set:

* ``dead``: a bad record (source, line, column, reason, text);
* ``note``: a notification live delivery asked for (subscriber, profile, source, event,
  type, text);
* ``count``: notifications of one subscriber (subscriber, n);
* ``stat``: one source's good events (n), notifications (notes), events with a match (hits);
* ``part``: a JSON-lines part file (source, event of its first line, n lines, path).
"""

FUSED_DDL = ("kind string, source string, event long, line long, column int, reason string, "
             "text string, type string, profile string, subscriber string, n long, "
             "notes long, hits long, path string")
"""The same schema as a Spark DDL string."""

FLUSH_NOTES = 2_000_000
"""Notifications a task holds before it writes them out as Parquet (bounds its memory)."""

NOTE_SLICE = 1_000_000
"""Notifications a task makes at once, about: events are matched in slices of rows sized
by the matches per event seen so far (1M profiles, 110 matches per event: a worker peaked
at 11 GB with whole 65,536-event batches)."""

FIRST_SLICE = 8192
"""Rows of a task's first slice, before it knows how many matches an event has."""


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """What the executors write themselves (picklable, shipped with the stage's closure)."""

    parquet: str | None = None
    """Staging directory for notifications (hive layout ``subscriber=S[/batch=N]``)."""
    parquet_text: bool = False
    """Whether the notifications carry the event's text."""
    jsonl: str | None = None
    """Staging directory for JSON-lines parts of the match lines."""
    with_source: bool = False
    """Whether each match line names its source (streaming: always)."""
    batch_id: int | None = None
    """The streaming batch id (a ``batch=N`` partition level), or ``None``."""
    deliver: bool = False
    """Whether to hand notifications back for live delivery."""
    deliver_types: frozenset[str] | None = None
    """Only notifications of these event types (``None``: all)."""
    deliver_subscribers: frozenset[str] | None = None
    """Only notifications of these subscribers (``None``: all)."""
    version: int = 1
    """The subscription set's version, for the ``version`` column (not the engine's own
    change counter)."""


def _rows(kind: str, size: int, **cols: Any) -> pa.RecordBatch:
    """``size`` rows of ``kind`` with the given columns; every other column null."""
    arrays = []
    for f in FUSED_SCHEMA:
        if f.name == "kind":
            arrays.append(pa.array([kind] * size, pa.string()))
        elif f.name in cols:
            v = cols[f.name]
            arrays.append(v.cast(f.type) if isinstance(v, pa.Array | pa.ChunkedArray)
                          else pa.array(v, f.type))
        else:
            arrays.append(pa.nulls(size, f.type))
    return pa.RecordBatch.from_arrays(
        [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
        schema=FUSED_SCHEMA)


def _quoted(strings: pa.Array) -> pa.Array:
    """Each string as a JSON string literal, as ``json.dumps`` writes it."""
    if len(strings) == 0 or pc.all(pc.string_is_ascii(strings)).as_py():
        # ids and paths seldom need escapes; when none does, quoting is concatenation
        needs = pc.match_substring_regex(strings, r'["\\\x00-\x1f\x7f]')
        if not pc.any(needs).as_py():
            return pc.binary_join_element_wise("", strings, "", '"')
    return pa.array([json.dumps(s) for s in strings.to_pylist()], pa.string())


class _PartWriter:
    """The files one task writes: Parquet notifications and JSON-lines parts."""

    def __init__(self, plan: MatchPlan, task: TaskPlan, partition: int) -> None:
        self.plan = plan
        self.task = task
        self.partition = partition
        # per slice held for Parquet: its good rows, and per notification the row
        # (int32), the dense profile index and the subscriber code
        self.pending: list[tuple[pa.RecordBatch, np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending_rows = 0
        self.files: SubscriberFiles | None = None
        self.tally: np.ndarray | None = None  # notifications per subscriber code
        self.stats: dict[str, list[int]] = {}  # source -> [events, notes, hits]
        self.parts: dict[str, tuple[Any, int, int, str]] = {}  # source -> file, first, n, path
        self.quoted: pa.Array | None = None
        self.owned: tuple[np.ndarray, pa.Array, np.ndarray] | None = None
        self.seen = [0, 0]  # events matched, notifications made

    # -- one batch of good events -----------------------------------------------------

    def slice_rows(self, left: int) -> int:
        """How many of the ``left`` rows to match next (see :data:`NOTE_SLICE`)."""
        events, notes = self.seen
        if not events:
            return min(left, FIRST_SLICE)
        per_event = notes / events
        rows = int(NOTE_SLICE / per_event) if per_event > 0 else left
        return max(1, min(left, max(rows, 1024)))

    def add(self, good: pa.RecordBatch) -> pa.RecordBatch | None:
        """Match one batch of good keyed rows (in input order) and take its outputs;
        returns the live-delivery notes."""
        parts = list(match_parts(self.plan, good))
        per_row = np.zeros(good.num_rows, np.int64)
        for rows, offsets, _ in parts:
            per_row[rows] = np.diff(offsets)
        at = np.zeros(good.num_rows + 1, np.int64)
        np.cumsum(per_row, out=at[1:])
        # each type's matches scattered back to input order, each event's ids kept in order
        hits = np.empty(int(at[-1]), np.int32)
        for rows, offsets, part_hits in parts:
            counts = np.diff(offsets)
            start = np.repeat(at[rows] - offsets[:-1], counts)
            hits[start + np.arange(len(part_hits))] = part_hits
        parent = np.repeat(np.arange(good.num_rows, dtype=np.int32), per_row)
        self.seen[0] += good.num_rows
        self.seen[1] += len(hits)
        self._stat(good, per_row)
        if self.task.jsonl is not None:
            self._lines(good, per_row, hits)
        if not len(hits):
            return None
        codes, owners = self.plan.owner_codes()
        owner = codes[hits]
        tally = np.bincount(owner, minlength=len(owners))
        self.tally = tally if self.tally is None else self.tally + tally
        if self.task.parquet is not None:
            # Only integer arrays are held: the notifications' columns are gathered once,
            # in subscriber order, when they are written (_flush).
            self.pending.append((good, parent, hits, owner))
            self.pending_rows += len(hits)
            if self.pending_rows >= FLUSH_NOTES:
                self._flush()
        if not self.task.deliver:
            return None
        ids, _ = self.plan.derived()
        take = pa.array(parent)
        notes = pa.table({
            "source": good.column("source").take(take),
            "event": good.column("event").take(take),
            "type": good.column("type").take(take),
            "profile": pa.DictionaryArray.from_arrays(pa.array(hits), ids),
            "subscriber": pa.DictionaryArray.from_arrays(
                pa.array(owner.astype(np.int32, copy=False)), owners),
            "parent": take,
        })
        return self._deliveries(notes, good)

    def _stat(self, good: pa.RecordBatch, per_row: np.ndarray) -> None:
        t = pa.table({"source": good.column("source"), "n": pa.array(per_row),
                      "hit": pa.array((per_row > 0).astype(np.int64))})
        for r in t.group_by("source").aggregate(
                [("n", "count"), ("n", "sum"), ("hit", "sum")]).to_pylist():
            s = self.stats.setdefault(r["source"], [0, 0, 0])
            s[0] += r["n_count"]
            s[1] += r["n_sum"] or 0
            s[2] += r["hit_sum"] or 0

    def _deliveries(self, notes: pa.Table, good: pa.RecordBatch) -> pa.RecordBatch | None:
        keep = None
        if self.task.deliver_types is not None:
            keep = pc.is_in(pc.cast(notes.column("type"), pa.string()),
                            pa.array(sorted(self.task.deliver_types), pa.string()))
        if self.task.deliver_subscribers is not None:
            more = pc.is_in(pc.cast(notes.column("subscriber"), pa.string()),
                            pa.array(sorted(self.task.deliver_subscribers), pa.string()))
            keep = more if keep is None else pc.and_(keep, more)
        if keep is not None:
            notes = notes.filter(keep)
        if not notes.num_rows:
            return None
        text = good.column("text").take(notes.column("parent"))
        return _rows("note", notes.num_rows, text=text, **{
            c: pc.cast(notes.column(c), pa.string()) if c != "event" else notes.column(c)
            for c in ("source", "event", "type", "profile", "subscriber")})

    # -- JSON lines ------------------------------------------------------------------

    def _quoted_ids(self) -> pa.Array:
        if self.quoted is None:
            ids, _ = self.plan.derived()
            self.quoted = _quoted(ids)
        return self.quoted

    def _lines(self, good: pa.RecordBatch, per_row: np.ndarray, hits: np.ndarray) -> None:
        """Append each event's line to its source's part (rows come in file order)."""
        offsets = np.zeros(len(per_row) + 1, np.int32)
        np.cumsum(per_row, out=offsets[1:])
        quoted = pa.ListArray.from_arrays(pa.array(offsets),
                                          self._quoted_ids().take(pa.array(hits)))
        body = pc.binary_join_element_wise(
            pc.cast(good.column("event"), pa.string()), ', "matches": [',
            pc.binary_join(quoted, ", "), "]}\n", "")
        sources = good.column("source")
        distinct = pc.unique(sources).to_pylist()
        for s in distinct:
            mask = pc.equal(sources, s)
            part = body.filter(mask) if len(distinct) > 1 else body
            first = int(pc.min(good.column("event").filter(mask)).as_py())
            prefix = ('{"event": ' if not self.task.with_source
                      else '{"source": ' + json.dumps(s) + ', "event": ')
            self._write_lines(s, first, pc.binary_join_element_wise(prefix, part, ""))

    def _write_lines(self, source: str, first: int, text: pa.Array) -> None:
        entry = self.parts.get(source)
        if entry is None:
            path = (Path(self.task.jsonl or ".")
                    / f"part-{self.partition:05d}-{len(self.parts):05d}.json")
            entry = (open(path, "wb"), first, 0, str(path))  # noqa: SIM115 - closed in finish
        f, start, n, path_s = entry
        # the lines lie back to back in the array's data buffer
        offsets = np.frombuffer(text.buffers()[1], np.int32, count=len(text) + 1,
                                offset=text.offset * 4)
        f.write(memoryview(text.buffers()[2])[int(offsets[0]):int(offsets[-1])])
        self.parts[source] = (f, start, n + len(text), path_s)

    # -- Parquet ---------------------------------------------------------------------

    def _flush(self) -> None:
        """Write the held notifications: per subscriber, in input order (event, then
        profile id), in the directory layout of Spark's ``partitionBy``."""
        if not self.pending:
            return
        held, self.pending, self.pending_rows = self.pending, [], 0
        _, owners = self.plan.owner_codes()
        if self.files is None:
            self.files = SubscriberFiles(Path(self.task.parquet or "."), owners.to_pylist(),
                                         self.partition, self.task.batch_id)
        base = np.cumsum([0] + [g.num_rows for g, _, _, _ in held[:-1]])
        rows = np.concatenate([p + np.int32(b) for (_, p, _, _), b in zip(held, base,
                                                                            strict=True)])
        owner = np.concatenate([o for _, _, _, o in held])
        # a stable sort of small codes is a radix sort: 16-bit keys where they fit
        order = np.argsort(owner.astype(np.uint16) if len(owners) <= 1 << 16 else owner,
                           kind="stable")
        bounds = np.zeros(len(owners) + 1, np.int64)
        np.cumsum(np.bincount(owner, minlength=len(owners)), out=bounds[1:])
        rows = rows[order]
        local, members, member_at = self._owned()
        profile = local[np.concatenate([h for _, _, h, _ in held])[order]]
        goods = [g for g, _, _, _ in held]

        def column(name: str) -> pa.Array:
            return pa.concat_arrays([g.column(name) for g in goods])

        def coded(name: str) -> pa.DictionaryArray:
            # Repeated strings gathered as 4-byte codes (a task's events are few next to
            # its notifications: about 170 per event at 100k profiles).
            enc = column(name).dictionary_encode()
            codes = enc.indices.to_numpy(zero_copy_only=False)[rows]
            return pa.DictionaryArray.from_arrays(pa.array(codes), enc.dictionary)

        cols: dict[str, pa.Array] = {
            "source": coded("source"),
            "event": pa.array(column("event").to_numpy(zero_copy_only=False)[rows]),
            "type": coded("type"),
            "version": pa.array(np.full(len(rows), self.task.version, np.int64)),
        }
        if self.task.parquet_text:
            cols["text"] = column("text").take(pa.array(rows))
        notes = pa.table(cols)
        for code in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
            lo, hi = int(bounds[code]), int(bounds[code + 1])
            # The file's profile dictionary is its subscriber's profiles only: a whole
            # set's ids in every file cost more than the notifications (100k profiles).
            at = int(member_at[code])
            ids = pa.DictionaryArray.from_arrays(
                pa.array(profile[lo:hi]),
                members.slice(at, int(member_at[code + 1]) - at))
            self.files.write(code, notes.slice(lo, hi - lo).add_column(3, "profile", ids))
        self.files.flushed()

    def _owned(self) -> tuple[np.ndarray, pa.Array, np.ndarray]:
        """Per dense profile index its position among its subscriber's profiles; the ids
        grouped by subscriber code; where each code's group starts (made once per task)."""
        if self.owned is None:
            ids, _ = self.plan.derived()
            codes, owners = self.plan.owner_codes()
            order = np.argsort(codes, kind="stable")
            bounds = np.zeros(len(owners) + 1, np.int64)
            np.cumsum(np.bincount(codes, minlength=len(owners)), out=bounds[1:])
            local = np.empty(len(codes), np.int32)
            local[order] = np.arange(len(codes)) - np.repeat(bounds[:-1], np.diff(bounds))
            self.owned = (local, ids.take(pa.array(order)), bounds)
        return self.owned

    # -- the end of the task ---------------------------------------------------------

    def finish(self) -> Iterator[pa.RecordBatch]:
        """Write what is held and describe the task's output."""
        self._flush()
        if self.files is not None:
            self.files.close()
        if self.tally is not None and self.tally.any():
            _, owners = self.plan.owner_codes()
            some = np.flatnonzero(self.tally)
            counts = dict(zip(owners.take(pa.array(some)).to_pylist(),
                              self.tally[some].tolist(), strict=True))
            subs = sorted(counts)
            yield _rows("count", len(subs), subscriber=subs, n=[counts[s] for s in subs])
        if self.stats:
            srcs = sorted(self.stats)
            yield _rows("stat", len(srcs), source=srcs,
                        n=[self.stats[s][0] for s in srcs],
                        notes=[self.stats[s][1] for s in srcs],
                        hits=[self.stats[s][2] for s in srcs])
        if self.parts:
            srcs = sorted(self.parts)
            for s in srcs:
                self.parts[s][0].close()
            yield _rows("part", len(srcs), source=srcs,
                        event=[self.parts[s][1] for s in srcs],
                        n=[self.parts[s][2] for s in srcs],
                        path=[self.parts[s][3] for s in srcs])


def _dead_rows(parsed: pa.RecordBatch) -> pa.RecordBatch | None:
    bad = pc.is_valid(parsed.column("error"))
    if not pc.any(bad).as_py():
        return None
    d = parsed.filter(bad)
    return _rows("dead", d.num_rows, source=d.column("source"), line=d.column("line"),
                 column=d.column("column"), reason=d.column("error"), text=d.column("text"),
                 type=d.column("type"), event=d.column("event"))


def iter_fused(plan_value: Any, task: TaskPlan, schema_text: str, kind: str,
               batches: Iterator[pa.RecordBatch], limits: TextLimits = TEXT_LIMITS
               ) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` body: source rows in, the task's few summary rows out."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    plan: MatchPlan = plan_value
    writer = _PartWriter(plan, task, ctx.partitionId() if ctx is not None else 0)
    for parsed in iter_parsed(batches, schema_text, kind, limits):
        dead = _dead_rows(parsed)
        if dead is not None:
            yield dead
        good = parsed.filter(pc.is_null(parsed.column("error")))
        at = 0
        while at < good.num_rows:
            # Slices of about NOTE_SLICE notifications: an event matching a hundred of
            # 1M profiles makes a whole Arrow batch's notifications gigabytes at once.
            rows = writer.slice_rows(good.num_rows - at)
            notes = writer.add(good.slice(at, rows))
            at += rows
            if notes is not None:
                yield notes
    yield from writer.finish()


__all__ = ["FLUSH_NOTES", "FUSED_DDL", "FUSED_SCHEMA", "TaskPlan", "iter_fused"]
