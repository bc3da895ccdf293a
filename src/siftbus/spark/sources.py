"""Event sources: JSON lines, Parquet, XML documents, a directory of new files, a socket.

Every source yields one of four *kinds* of DataFrame, which the parse stage knows:

* ``text``: ``source, line, events_before, text`` (JSON lines; ``line`` counts from 1
  within ``source``; ``events_before`` counts the non-blank lines of ``source`` in earlier
  partitions, see :func:`number_lines`);
* ``wide``: ``source, event, type, <attribute columns>`` (Parquet tables of events);
* ``keyed``: ``source, event, type, ikeys, skeys`` (already keyed, e.g. generated workloads);
* ``xml``: ``source, content`` (one whole XML document per row; the parse stage cuts it
  into events with :mod:`siftbus.xmlfilter.splitter`);
* ``ranges``: ``source, start, stop, line, events_before`` (byte ranges of JSON-lines
  files that the Python workers read themselves, see :mod:`siftbus.spark.ranges`).

JSON-lines files are read by the Python workers in byte ranges where they share the
driver's filesystem (:mod:`siftbus.spark.ranges`: a small job counts each range's lines,
so numbers are exact; a watched directory's new files are read whole, one range each, so
a micro-batch needs no such job); otherwise, and for sockets, by Spark's text reader,
numbered as follows (a socket's micro-batch: in one partition, see
:func:`number_one_partition`). Line numbers are exact and computed on the JVM side: a
file scan is split into partitions deterministically, rows keep file order inside a
partition, so the line of a row is its ``monotonically_increasing_id`` minus the first id
of its (partition, file) plus the lines of the same file in earlier partitions. One small
aggregation finds those offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from siftbus.errors import ConfigError, EventError
from siftbus.model.textio import TEXT_LIMITS, TextLimits
from siftbus.spark.progress import job_step
from siftbus.spark.ranges import plain_inputs, read_ranges
from siftbus.spark.session import executor_writes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SOURCE_FORMATS = ("jsonl", "parquet", "keyed", "xml")
"""Batch input formats: JSON lines, a wide Parquet table, a keyed Parquet table, or XML
documents."""

STREAM_FORMATS = ("jsonl", "xml")
"""Formats a watched directory can hold."""


@dataclass(frozen=True, slots=True)
class SourceFrame:
    """A source's DataFrame and which kind of rows it holds."""

    frame: DataFrame
    kind: str
    """``text``, ``wide`` or ``keyed`` (see the module docstring)."""


def existing_inputs(paths: Sequence[str | Path]) -> list[str]:
    """The given event files and directories as absolute paths; an
    :class:`~siftbus.errors.EventError` for one that does not exist or holds no files (the
    CLI asks before it starts Spark, so that such a mistake costs no JVM start)."""
    out = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise EventError(f"no such event file or directory: {path}", source=str(path))
        if path.is_dir() and not any(c.is_file() and not c.name.startswith(("_", "."))
                                     for c in path.rglob("*")):
            raise EventError(f"event directory {path} holds no files", source=str(path))
        out.append(str(path.resolve()))
    return out


def _local_path(col: Column) -> Column:
    """``file:/a/b`` becomes ``/a/b``; other URIs (hdfs:, s3a:) stay as they are."""
    from pyspark.sql import functions as F

    return F.regexp_replace(col, "^file:(//)?", "")


BLANK_LINE = (r"^[\t\n\x0B\f\r\x1C-\x1F \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F"
              r"\u205F\u3000]*$")
"""A Java regex for a blank line: only characters Python's ``str.strip()`` removes (the
``str.isspace()`` set), so that the JVM and the parse stage agree on which lines are no
events."""


def number_lines(df: DataFrame, limits: TextLimits = TEXT_LIMITS) -> DataFrame:
    """Number a ``source, text`` DataFrame's lines exactly, per source file.

    Adds ``line`` (from 1, every line counted) and ``events_before``: the non-blank lines
    of the same file in earlier partitions. The parse stage counts on from there, so that
    ``event`` is the 0-based index of the event among the file's events (blank lines are
    no events), as ``siftbus match`` numbers them. A line longer than
    ``limits.max_line_bytes`` is an event (a bad one) whatever it holds, as in the parse
    stage, which must be given the same limits.
    """
    from pyspark.sql import functions as F

    blank = F.col("text").rlike(BLANK_LINE) & (
        F.octet_length("text") <= F.lit(limits.max_line_bytes))
    numbered = _attach_numbers(df.select("source", "text"), blank=blank)
    return numbered.select("source", (F.col("event") + 1).alias("line"), "events_before",
                           "text")


def read_json_lines(spark: SparkSession, paths: Sequence[str | Path]) -> SourceFrame:
    """JSON-lines files (or directories of them), numbered by line: read by the Python
    workers in byte ranges (:mod:`siftbus.spark.ranges`) where they share the driver's
    filesystem, else by Spark's text reader."""
    from pyspark.sql import functions as F

    inputs = existing_inputs(paths)
    if executor_writes(spark) and plain_inputs(inputs):
        return SourceFrame(read_ranges(spark, inputs), "ranges")
    raw = spark.read.text(inputs).select(
        _local_path(F.col("_metadata.file_path")).alias("source"), F.col("value").alias("text"))
    return SourceFrame(number_lines(raw), "text")


def read_parquet(spark: SparkSession, paths: Sequence[str | Path]) -> SourceFrame:
    """A Parquet table of events: keyed (``type, ikeys, skeys``) or wide (one column per
    attribute). Without an ``event`` column, rows are numbered in file order."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(*existing_inputs(paths))
    cols = set(df.columns)
    if "type" not in cols:
        raise EventError("a Parquet event table needs a 'type' column",
                         source=str(paths[0]), field="type")
    kind = "keyed" if {"ikeys", "skeys"} <= cols else "wide"
    df = df.withColumn("source", _local_path(F.col("_metadata.file_path")))
    if "event" not in cols:
        df = _attach_numbers(df)
    if kind == "keyed":
        df = df.select("source", F.col("event").cast("long"), "type", "ikeys", "skeys")
    else:
        attrs = [c for c in df.columns if c not in ("source", "event", "type")]
        df = df.select("source", F.col("event").cast("long"), "type", *attrs)
    return SourceFrame(df, kind)


def read_xml(spark: SparkSession, paths: Sequence[str | Path]) -> SourceFrame:
    """XML documents (files, or directories of them), one row per document.

    A document is read whole (Spark's binary file source, which holds up to 2 GB per
    file); the parse stage cuts it into events with the XML filter's streaming splitter.
    """
    from pyspark.sql import functions as F

    df = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(
        existing_inputs(paths))
    return SourceFrame(df.select(_local_path(F.col("path")).alias("source"), "content"), "xml")


def _attach_numbers(df: DataFrame, blank: Column | None = None) -> DataFrame:
    """Add ``event`` (from 0, per source file) to a DataFrame with a ``source`` column.

    With ``blank`` (true for rows that are no events) also ``events_before``: the rows of
    the same file in earlier partitions for which ``blank`` is false.
    """
    from pyspark.sql import functions as F

    spark = df.sparkSession
    tagged = df.withColumn("_pid", F.spark_partition_id()).withColumn(
        "_mid", F.monotonically_increasing_id())
    counted = F.sum(F.when(blank, 0).otherwise(1)) if blank is not None else F.lit(0)
    with job_step(spark, "numbering the lines of the input files"):
        stats = (tagged.groupBy("source", "_pid")
                 .agg(F.count(F.lit(1)).alias("_n"), F.min("_mid").alias("_first"),
                      counted.alias("_events")).collect())
    seen: dict[str, tuple[int, int]] = {}
    rows = []
    for r in sorted(stats, key=lambda r: (r["source"], r["_pid"])):
        base, events = seen.get(r["source"], (0, 0))
        rows.append((r["source"], r["_pid"], r["_first"], base, events))
        seen[r["source"]] = (base + r["_n"], events + int(r["_events"] or 0))
    extra = ["events_before"] if blank is not None else []
    if not rows:
        out = df.withColumn("event", F.lit(0).cast("long"))
        for c in extra:
            out = out.withColumn(c, F.lit(0).cast("long"))
        return out.limit(0)
    offsets = spark.createDataFrame(
        rows, "source string, _pid int, _first long, _base long, events_before long")
    return (tagged.join(F.broadcast(offsets), ["source", "_pid"])
            .withColumn("event", F.col("_mid") - F.col("_first") + F.col("_base"))
            .drop("_pid", "_mid", "_first", "_base", *(["events_before"] if not extra else [])))


def read_source(spark: SparkSession, paths: Sequence[str | Path], fmt: str = "jsonl"
                ) -> SourceFrame:
    """A batch source by format name (see :data:`SOURCE_FORMATS`)."""
    if fmt == "jsonl":
        return read_json_lines(spark, paths)
    if fmt in ("parquet", "keyed"):
        return read_parquet(spark, paths)
    if fmt == "xml":
        return read_xml(spark, paths)
    raise ConfigError(f"unknown event format {fmt!r}; choose one of {', '.join(SOURCE_FORMATS)}",
                      field="format")


def watch_directory(spark: SparkSession, directory: str | Path, *,
                    max_files_per_trigger: int | None = None, fmt: str = "jsonl"
                    ) -> DataFrame:
    """A streaming DataFrame of new files in ``directory``: JSON-lines files as ``source,
    stop`` (each file and its size, for the workers to read, see :func:`whole_file_ranges`)
    where the workers share the driver's filesystem, else ``source, text`` (their lines);
    with ``fmt="xml"``, ``source, content`` (whole XML documents; pass ``kind="xml"`` to
    :meth:`Pipeline.stream`).

    Spark's file source remembers (in the checkpoint) which files it has taken, so a
    restarted query continues where the killed one stopped.
    """
    from pyspark.sql import functions as F

    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"watch directory {d} does not exist", source=str(d))
    if fmt not in STREAM_FORMATS:
        raise ConfigError(f"unknown stream format {fmt!r}; choose one of "
                          f"{', '.join(STREAM_FORMATS)}", field="format")
    by_workers = fmt == "jsonl" and executor_writes(spark)
    if fmt == "xml" or by_workers:
        reader = spark.readStream.format("binaryFile").schema(
            "path string, modificationTime timestamp, length long, content binary")
    else:
        reader = spark.readStream.format("text")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    df = reader.load(str(d.resolve()))
    if fmt == "xml":
        return df.select(_local_path(F.col("path")).alias("source"), "content")
    if by_workers:
        # Spark lists the new files and reads none of their bytes (no content column):
        # the Python workers read each file whole, as a batch job's ranges.
        return df.select(_local_path(F.col("path")).alias("source"),
                         F.col("length").alias("stop"))
    return df.select(
        _local_path(F.col("_metadata.file_path")).alias("source"), F.col("value").alias("text"))


def whole_file_ranges(df: DataFrame, tasks: int) -> SourceFrame:
    """A micro-batch of :func:`watch_directory`'s new files (``source, stop``) as ranges
    (:mod:`siftbus.spark.ranges`): each file one range from its first byte, line 1, so no
    job counts lines before the one that reads them. At most ``tasks`` tasks (Spark makes
    one per small file; each task has a fixed cost, the files are read the same)."""
    return SourceFrame(df.coalesce(tasks).selectExpr(
        "source", "0L AS start", "stop", "1L AS line", "0L AS events_before"), "ranges")


def number_one_partition(df: DataFrame) -> SourceFrame:
    """A ``source, text`` micro-batch (a socket's lines) numbered without a Spark job:
    gathered into one partition, in order, a row's line is its position there (Spark's
    ids count from 0 in partition 0), and no earlier partition holds events."""
    return SourceFrame(df.coalesce(1).selectExpr(
        "source", "monotonically_increasing_id() + 1 AS line", "0L AS events_before", "text"),
        "text")


def socket_stream(spark: SparkSession, host: str, port: int) -> DataFrame:
    """A streaming ``source, text`` DataFrame of lines read from a TCP socket (no replay:
    Spark's socket source is for demos and tests, not fault tolerant)."""
    from pyspark.sql import functions as F

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"socket sources read from this machine only, not {host!r}",
                          field="host")
    return (spark.readStream.format("socket").option("host", host).option("port", str(port))
            .load().select(F.lit(f"socket:{host}:{port}").alias("source"),
                           F.col("value").alias("text")))


__all__ = [
    "SOURCE_FORMATS",
    "STREAM_FORMATS",
    "SourceFrame",
    "existing_inputs",
    "number_lines",
    "number_one_partition",
    "read_json_lines",
    "read_parquet",
    "read_source",
    "read_xml",
    "socket_stream",
    "watch_directory",
    "whole_file_ranges",
]
