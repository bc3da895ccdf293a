"""Notification sinks: Parquet, JSON lines, per-subscriber counts, dead letters, live delivery.

Every sink implements :class:`Sink` and passes :func:`check_sink`. A sink receives one
:class:`MatchedBatch` per batch job or per streaming micro-batch and must be *idempotent
per batch id*: a streaming query that is killed after a sink wrote batch ``n`` but before
Spark recorded ``n`` as committed runs batch ``n`` again after the restart, with the same
input; writing it again must not duplicate anything. The file sinks get this by
overwriting exactly the output of that batch (``batch=n`` partitions, dynamic partition
overwrite); live delivery cannot take a message back and is at-least-once on replay. The
deliverers themselves are in :mod:`siftbus.spark.delivery` (re-exported here).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

# live delivery lives in its own module; re-exported here, where callers import it from
from siftbus.spark.delivery import BrokerDeliverer as BrokerDeliverer
from siftbus.spark.delivery import Deliverer as Deliverer
from siftbus.spark.delivery import FileDeliverer as FileDeliverer
from siftbus.spark.delivery import Notification as Notification
from siftbus.spark.delivery import WebhookDeliverer as WebhookDeliverer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True, slots=True)
class StagedOutputs:
    """What the executors wrote themselves for one batch (:mod:`siftbus.spark.fused`),
    for the sinks to commit."""

    parquet: Path | None = None
    """Staging directory of the notifications (hive layout), or ``None``."""
    jsonl: Path | None = None
    """Staging directory of the match lines' parts, or ``None``."""
    parts: tuple[tuple[str, int, int, str], ...] = ()
    """The parts: (source, event of the first line, lines, path), sorted."""
    notes: tuple[Notification, ...] = ()
    """The notifications live delivery asked for."""


def _stage_beside(path: Path) -> Path:
    """A new empty directory beside ``path`` on the same filesystem (renames are atomic
    there); Spark and readers skip names that start with a dot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.stage-", dir=path.parent))


@dataclass(frozen=True, slots=True)
class MatchedBatch:
    """What the sinks see of one batch."""

    matched: DataFrame
    """One row per good event: source, event, type, matches, owners, version, text."""
    dead: DataFrame
    """One row per bad record: source, line, column, reason, text."""
    batch_id: int
    """0 for a batch job; the micro-batch id in a streaming query."""
    streaming: bool = False
    """Whether this is a micro-batch of a streaming query."""
    counts: Mapping[str, int] | None = None
    """Notifications per subscriber, when the pipeline already computed them."""
    sources: int | None = None
    """Number of distinct sources among the matched rows, when known."""
    bad: int | None = None
    """Number of dead-letter rows, when known."""
    events: int | None = None
    """Number of matched rows (good events), when known."""
    staged: StagedOutputs | None = None
    """What the executors already wrote for the sinks to commit, when they did."""

    def subscriber_counts(self) -> dict[str, int]:
        """Notifications per subscriber (computed once by the pipeline, or here)."""
        if self.counts is not None:
            return dict(self.counts)
        from pyspark.sql import functions as F

        rows = (self.matched.select(F.explode("owners").alias("subscriber"))
                .groupBy("subscriber").count().collect())
        return {r["subscriber"]: int(r["count"]) for r in rows}

    def notifications(self) -> DataFrame:
        """One row per (event, profile): source, event, type, profile, subscriber, version,
        text."""
        from pyspark.sql import functions as F

        z = F.explode(F.arrays_zip("matches", "owners")).alias("z")
        return (self.matched.select("source", "event", "type", "version", "text", z)
                .select("source", "event", "type",
                        F.col("z.matches").alias("profile"),
                        F.col("z.owners").alias("subscriber"),
                        "version", "text"))


@dataclass(frozen=True, slots=True)
class SinkResult:
    """What one sink did with one batch."""

    sink: str
    """The sink's name."""
    rows: int
    """Rows written or notifications delivered."""
    where: str = ""
    """Where the output went (a path, a URL, a broker address)."""
    detail: Mapping[str, int] = field(default_factory=dict)
    """Per-key figures (e.g. notifications per subscriber)."""


@runtime_checkable
class Sink(Protocol):
    """A destination for the pipeline's results."""

    @property
    def name(self) -> str:
        """Short name for tables and logs."""

    def write(self, batch: MatchedBatch) -> SinkResult:
        """Write one batch; idempotent per ``batch.batch_id`` (see the module docstring)."""

    def close(self) -> None:
        """Release connections; further writes are errors."""


def _overwrite(df: DataFrame, path: Path, fmt: str, *, partition_by: Sequence[str] = (),
               streaming: bool = False) -> None:
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if fmt == "parquet":
        writer.parquet(str(path))
    else:
        writer.option("ignoreNullFields", "false").json(str(path))


class ParquetSink:
    """Notifications as Parquet, partitioned by subscriber (and by batch when streaming).

    Columns: source, event, type, profile, version (+ the partition columns). Key: (source,
    event, profile).
    """

    name = "parquet"

    def __init__(self, path: str | Path, *, with_text: bool = False) -> None:
        self.path = Path(path)
        self.with_text = with_text

    def staging(self) -> Path:
        """A new staging directory for the executors to write a batch into."""
        return _stage_beside(self.path)

    def write(self, batch: MatchedBatch) -> SinkResult:
        from pyspark.sql import functions as F

        if batch.staged is not None and batch.staged.parquet is not None:
            return self._commit(batch, batch.staged.parquet)
        notes = batch.notifications()
        cols = ["source", "event", "type", "profile", "version", "subscriber"]
        if self.with_text:
            cols.insert(5, "text")
        notes = notes.select(*cols)
        if batch.streaming:
            notes = notes.withColumn("batch", F.lit(batch.batch_id).cast("long"))
            parts: tuple[str, ...] = ("subscriber", "batch")
        else:
            parts = ("subscriber",)
        counts = batch.subscriber_counts()
        if counts or not batch.streaming:
            _overwrite(notes.repartition(*[F.col(p) for p in parts]), self.path, "parquet",
                       partition_by=parts)
        return SinkResult(self.name, sum(counts.values()), str(self.path), counts)

    def _commit(self, batch: MatchedBatch, staged: Path) -> SinkResult:
        """Put the executors' files in place: the whole directory for a batch job (as
        Spark's overwrite does), the ``batch=N`` partitions of every subscriber for a
        streaming batch (a replay replaces its own files)."""
        counts = batch.subscriber_counts()
        if not batch.streaming:
            _replace_dir(staged, self.path)
            (self.path / "_SUCCESS").touch()
        else:
            mine = f"batch={batch.batch_id}"
            if self.path.is_dir():
                for old in self.path.glob(f"subscriber=*/{mine}"):
                    shutil.rmtree(old)
            for new in staged.glob(f"subscriber=*/{mine}"):
                dest = self.path / new.parent.name / mine
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(new, dest)
        return SinkResult(self.name, sum(counts.values()), str(self.path), counts)

    def read_back(self, spark: SparkSession) -> list[tuple[str, int, str]]:
        """Every (source, event, profile) stored, duplicates included."""
        if not any(self.path.rglob("*.parquet")):
            return []
        rows = spark.read.parquet(str(self.path)).select("source", "event", "profile").collect()
        return [(r["source"], int(r["event"]), r["profile"]) for r in rows]

    def close(self) -> None:
        return None


class JsonLinesSink:
    """Matches per event as JSON lines ``{"event": N, "matches": [...]}`` (DESIGN.md format).

    A batch job writes one file ``matches.jsonl`` sorted by source and event (with a
    ``source`` field when there are several sources); a streaming query writes a directory
    per batch.
    """

    name = "jsonl"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def staging(self) -> Path:
        """A new staging directory for the executors to write a batch's parts into."""
        return _stage_beside(self.path)

    def write(self, batch: MatchedBatch) -> SinkResult:
        from pyspark.sql import functions as F

        if batch.staged is not None and batch.staged.jsonl is not None:
            return self._commit(batch, batch.staged)
        df = batch.matched
        n_sources = (batch.sources if batch.sources is not None
                     else df.select("source").distinct().limit(2).count())
        several = batch.streaming or n_sources > 1
        cols = (["source"] if several else []) + ["event", "matches"]
        if batch.streaming:
            target = self.path / f"batch={batch.batch_id}"
            out = df.select(*cols)
            rows = out.count() if batch.events is None else batch.events
            _overwrite(out, target, "json")
            return SinkResult(self.name, rows, str(target))
        out = df.select(*cols).orderBy(*[F.col(c) for c in cols if c != "matches"])
        rows = write_one_file(out.coalesce(1), self.path, "json")
        return SinkResult(self.name, rows, str(self.path))

    def _commit(self, batch: MatchedBatch, staged: StagedOutputs) -> SinkResult:
        """Put the executors' parts in place: joined into one file in (source, event)
        order for a batch job, naming the source on each line when there are several;
        as the ``batch=N`` directory for a streaming batch."""
        assert staged.jsonl is not None
        rows = sum(n for _, _, n, _ in staged.parts)
        if batch.streaming:
            target = self.path / f"batch={batch.batch_id}"
            _replace_dir(staged.jsonl, target)
            return SinkResult(self.name, rows, str(target))
        several = (batch.sources or 0) > 1
        tmp = staged.jsonl / "joined"
        if not several:
            _join_files([Path(path) for _, _, _, path in staged.parts], tmp)
            os.replace(tmp, self.path)
            return SinkResult(self.name, rows, str(self.path))
        with open(tmp, "wb") as dst:
            for source, _, _, path in staged.parts:  # sorted by source, then first event
                data = Path(path).read_bytes()
                if several:
                    # every line starts so, and nothing else in a line can (ids are
                    # letters, digits and _ . - /)
                    data = data.replace(b'{"event": ', b'{"source": '
                                        + json.dumps(source).encode() + b', "event": ')
                dst.write(data)
        os.replace(tmp, self.path)
        return SinkResult(self.name, rows, str(self.path))

    def read_back(self, spark: SparkSession) -> list[tuple[str, int, str]]:
        """(source, event, profile) per match in the file(s); ``source`` may be ``""``."""
        out: list[tuple[str, int, str]] = []
        files = ([self.path] if self.path.is_file()
                 else sorted(self.path.rglob("*.json")) if self.path.exists() else [])
        for f in files:
            # JSON lines end at "\n" only: str.splitlines() would also cut at U+2028 and
            # \x1c, which Spark's JSON writer leaves raw inside strings (a source path).
            for line in f.read_text(encoding="utf-8").split("\n"):
                if line.strip():
                    d = json.loads(line)
                    out.extend((d.get("source", ""), int(d["event"]), m) for m in d["matches"])
        return out

    def close(self) -> None:
        return None


def _join_files(parts: Sequence[Path], target: Path) -> None:
    """``parts`` joined into ``target``, moving them: the first is renamed, the others
    are appended by the kernel (``copy_file_range``), not read into the driver (the
    match lines of 2M events at 100k profiles are 3.5 GB)."""
    if not parts:
        target.write_bytes(b"")
        return
    os.replace(parts[0], target)
    # not "ab": the kernel refuses to copy into a file opened for appending
    with open(target, "r+b", buffering=0) as dst:
        dst.seek(0, os.SEEK_END)
        for part in parts[1:]:
            with open(part, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                copy_range = getattr(os, "copy_file_range", None)
                done = 0
                while copy_range is not None and done < size:
                    try:
                        n = copy_range(src.fileno(), dst.fileno(), size - done)
                    except OSError:
                        break  # not on this filesystem: copy below from where it stopped
                    if n == 0:
                        break
                    done += n
                src.seek(done)
                dst.seek(0, os.SEEK_END)
                shutil.copyfileobj(src, dst, 1 << 20)
            part.unlink()


def _replace_dir(new: Path, target: Path) -> None:
    """Make ``new`` the directory ``target`` (whatever was there goes)."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new, target)


def write_one_file(df: DataFrame, target: Path, fmt: str) -> int:
    """Write a one-partition DataFrame as exactly one ``json`` or ``text`` lines file at
    ``target`` (atomic rename); returns the line count."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        if fmt == "json":
            df.write.mode("overwrite").option("ignoreNullFields", "false").json(str(tmp / "out"))
        elif fmt == "text":
            df.write.mode("overwrite").text(str(tmp / "out"))
        else:
            raise ValueError(f"write_one_file writes json or text lines, not {fmt!r}")
        rows = 0
        with open(tmp / "joined", "wb") as dst:
            for part in sorted((tmp / "out").glob("part-*")):
                data = part.read_bytes()
                rows += data.count(b"\n")
                dst.write(data)
        os.replace(tmp / "joined", target)
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class DeadLetterSink:
    """Bad records with the reason, as JSON lines: source, line, column, reason, text."""

    name = "dead-letters"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, batch: MatchedBatch) -> SinkResult:
        from pyspark.sql import functions as F

        dead = batch.dead.select("source", "line", "column", "reason", "text")
        if batch.streaming:
            target = self.path / f"batch={batch.batch_id}"
            rows = dead.count() if batch.bad is None else batch.bad
            if rows:
                _overwrite(dead, target, "json")
            return SinkResult(self.name, rows, str(target))
        rows = write_one_file(dead.orderBy(F.col("source"), F.col("line")).coalesce(1),
                             self.path, "json")
        return SinkResult(self.name, rows, str(self.path))

    def read_back(self) -> list[dict[str, Any]]:
        """Every dead letter written, as dicts (lines end at "\\n" only, as in
        :meth:`JsonLinesSink.read_back`)."""
        files = ([self.path] if self.path.is_file()
                 else sorted(self.path.rglob("*.json")) if self.path.exists() else [])
        return [json.loads(line) for f in files
                for line in f.read_text(encoding="utf-8").split("\n") if line.strip()]

    def close(self) -> None:
        return None


class CountsSink:
    """Notifications per subscriber, kept in one JSON file per job, per batch id.

    ``{"batches": {"0": {"alice": 3}}, "total": {"alice": 3}}``; rewriting a batch id
    replaces its figures, so replays do not double count.
    """

    name = "counts"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _load(self) -> dict[str, dict[str, int]]:
        if not self.path.is_file():
            return {}
        data = json.loads(self.path.read_text(encoding="utf-8"))
        return {k: dict(v) for k, v in data.get("batches", {}).items()}

    def write(self, batch: MatchedBatch) -> SinkResult:

        counts = batch.subscriber_counts()
        batches = self._load() if batch.streaming else {}
        batches[str(batch.batch_id)] = counts
        total: dict[str, int] = {}
        for per in batches.values():
            for sub, n in per.items():
                total[sub] = total.get(sub, 0) + n
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"batches": batches, "total": dict(sorted(total.items()))},
                                  indent=1), encoding="utf-8")
        os.replace(tmp, self.path)
        return SinkResult(self.name, sum(counts.values()), str(self.path), counts)

    def totals(self) -> dict[str, int]:
        """Notifications per subscriber over every batch written so far."""
        if not self.path.is_file():
            return {}
        return dict(json.loads(self.path.read_text(encoding="utf-8"))["total"])

    def read_back(self, spark: SparkSession) -> list[tuple[str, int, str]] | None:
        return None

    def close(self) -> None:
        return None


class DeliverySink:
    """Live delivery from ``foreachBatch``: collect the batch's notifications on the driver
    (only those ``accept`` lets through, e.g. alarms) and hand them to a :class:`Deliverer`.
    """

    name = "delivery"

    def __init__(self, deliverer: Deliverer, *,
                 accept: Callable[[Notification], bool] | None = None,
                 types: Iterable[str] | None = None,
                 subscribers: Iterable[str] | None = None) -> None:
        self.deliverer = deliverer
        self.accept = accept
        self.types = frozenset(types) if types is not None else None
        self.subscribers = frozenset(subscribers) if subscribers is not None else None
        self.delivered = 0

    def write(self, batch: MatchedBatch) -> SinkResult:
        from pyspark.sql import functions as F

        if batch.staged is not None:
            items = [n for n in batch.staged.notes
                     if (self.types is None or n.type in self.types)
                     and (self.subscribers is None or n.subscriber in self.subscribers)]
        else:
            notes = batch.notifications()
            if self.types is not None:
                notes = notes.where(F.col("type").isin(list(self.types)))
            if self.subscribers is not None:
                notes = notes.where(F.col("subscriber").isin(list(self.subscribers)))
            items = [Notification(r["subscriber"], r["profile"], r["source"], int(r["event"]),
                                  r["type"], r["text"])
                     for r in notes.select("subscriber", "profile", "source", "event", "type",
                                           "text").toLocalIterator()]
        if self.accept is not None:
            items = [n for n in items if self.accept(n)]
        items.sort(key=lambda n: (n.source, n.event, n.profile))
        sent = self.deliverer.deliver(batch.batch_id, items)
        self.delivered += sent
        counts: dict[str, int] = {}
        for n in items:
            counts[n.subscriber] = counts.get(n.subscriber, 0) + 1
        return SinkResult(self.name, sent, self.deliverer.where, counts)

    def read_back(self, spark: SparkSession) -> list[tuple[str, int, str]] | None:
        return None

    def close(self) -> None:
        self.deliverer.close()


def check_sink(sink: Sink, spark: SparkSession, *,
               read_back: Callable[[], list[tuple[str, int, str]] | None] | None = None
               ) -> None:
    """Conformance checks every sink passes (raises ``AssertionError`` on a violation).

    Writes an empty batch, then a small batch twice under one batch id (a replay) and a
    second batch, as a streaming query would; the results must count what was given, and
    where the sink can be read back, every (source, event, profile) must be there exactly
    once.
    """
    assert isinstance(sink, Sink), f"{sink!r} does not implement the Sink protocol"
    assert isinstance(sink.name, str) and sink.name

    matched_ddl = ("source string, event long, type string, matches array<string>, "
                   "owners array<string>, version long, text string")
    dead_ddl = "source string, line long, column int, reason string, text string"
    text = '{"type": "T", "a": 1}'
    first = [("f.jsonl", 0, "T", ["p1", "p2"], ["alice", "bob"], 1, text),
             ("f.jsonl", 1, "T", [], [], 1, text),
             ("f.jsonl", 2, "T", ["p2"], ["bob"], 1, text)]
    second = [("g.jsonl", 0, "T", ["p1"], ["alice"], 2, text)]
    dead = [("f.jsonl", 4, 3, "invalid JSON: Expecting value", "{oops")]

    def batch(rows: list[Any], dead_rows: list[Any], bid: int) -> MatchedBatch:
        return MatchedBatch(spark.createDataFrame(rows, matched_ddl),
                            spark.createDataFrame(dead_rows, dead_ddl), bid, streaming=True)

    r0 = sink.write(batch([], [], 0))
    assert isinstance(r0, SinkResult) and r0.sink == sink.name
    r1 = sink.write(batch(first, dead, 1))
    r1b = sink.write(batch(first, dead, 1))
    assert r1.rows == r1b.rows, "a replayed batch must give the same result"
    r2 = sink.write(batch(second, [], 2))
    if sink.name != "dead-letters":
        assert r0.rows == 0, f"empty batch reported {r0.rows} rows"
        assert r1.rows == 3, f"batch 1 has 3 notifications, sink reported {r1.rows}"
        assert r2.rows == 1, f"batch 2 has 1 notification, sink reported {r2.rows}"
        if r1.detail:
            assert dict(r1.detail) == {"alice": 1, "bob": 2}, r1.detail
    else:
        assert (r0.rows, r1.rows, r2.rows) == (0, 1, 0)
    if read_back is not None:
        got = read_back()
        if got is not None:
            want = [("f.jsonl", 0, "p1"), ("f.jsonl", 0, "p2"), ("f.jsonl", 2, "p2"),
                    ("g.jsonl", 0, "p1")]
            norm = sorted((os.path.basename(s) if s else s, e, p) for s, e, p in got)
            assert len(norm) == len(set(norm)), f"duplicates after a replay: {norm}"
            assert norm == sorted(want), f"read back {norm}, want {sorted(want)}"
    sink.close()


__all__ = [
    "BrokerDeliverer",
    "CountsSink",
    "DeadLetterSink",
    "Deliverer",
    "DeliverySink",
    "FileDeliverer",
    "JsonLinesSink",
    "MatchedBatch",
    "Notification",
    "ParquetSink",
    "Sink",
    "SinkResult",
    "StagedOutputs",
    "write_one_file",
    "WebhookDeliverer",
    "check_sink",
]
