"""JSON-lines files read by the Python workers themselves, in byte ranges.

Spark's text reader turns every line into a JVM string, and the parse stage needs exact
line and event numbers, which took a second pass over every line (a group-by over the
whole input) before the job. Reading a file is cheap next to that: the driver cuts each
file into ranges of about ``SPLIT_BYTES`` at line starts; a first small job has each range
counted (lines, and lines that are events: not blank) in a worker; the job proper then
reads each range again in a worker and hands its lines, numbered exactly, to the parse
stage. The JVM only schedules tasks.

The line rule is :func:`siftbus.model.textio.read_lines`'s (the rule of ``siftbus check``
and ``siftbus match``): a UTF-8 BOM at the start of a file is skipped, lines end at
``\\n``, ``\\r\\n`` or a lone ``\\r``, and a blank line (only characters ``str.strip()``
removes) is no event; a line that is not UTF-8 or longer than the limit is an event (a
bad one, in the dead letters). Needs the files where every worker can read them at the
same path (as the executors' writes do, see :func:`siftbus.spark.pipeline.executor_writes`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from siftbus.model.textio import BOM, TEXT_LIMITS, TextLimits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPLIT_BYTES = 32 << 20
"""Bytes per range (and so per task): large enough that a task's start-up is amortised,
small enough to keep both cores of a small machine busy on a file of 100 MB."""

BATCH_LINES = 65536
"""Lines per Arrow batch handed to the parse stage."""

RANGES_DDL = "source string, start long, stop long, line long, events_before long"
"""One row per range: its file, bytes [start, stop), its first line's number (from 1) and
the events (non-blank lines) of the file before it."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_WINDOW = 1 << 16


def input_files(paths: Sequence[str]) -> list[str]:
    """The files of ``paths`` in Spark's order (a directory: its files, sorted, skipping
    names that start with ``_`` or ``.`` as Spark does)."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(str(f) for f in sorted(path.iterdir())
                       if f.is_file() and not f.name.startswith(("_", ".")))
        else:
            out.append(str(path))
    return out


def plain_inputs(paths: Sequence[str]) -> bool:
    """Whether ``paths`` are files and directories of files only (no subdirectories, whose
    partition discovery is Spark's own business: those inputs keep Spark's reader)."""
    return all(Path(p).is_file() or not any(c.is_dir() for c in Path(p).iterdir())
               for p in paths)


def _line_start_at_or_after(fh: Any, offset: int, size: int) -> int:
    """The first position >= ``offset`` where a line starts (``size`` if none does)."""
    pos = offset - 1  # the byte before a candidate start decides whether it is one
    while pos < size:
        fh.seek(pos)
        window = fh.read(_WINDOW + 1)
        if not window:
            return size
        for m in _LINE_END.finditer(window):
            end = pos + m.end()
            if m.group() == b"\r" and m.end() == len(window):
                break  # "\r" at the window's end: a "\n" may follow, read on from it
            if end >= offset:
                return min(end, size)
        pos += max(len(window) - 1, 1)
    return size


def plan_ranges(files: Sequence[str], split_bytes: int = SPLIT_BYTES
                ) -> list[tuple[str, int, int]]:
    """Each file cut at line starts into ranges of about ``split_bytes``."""
    out: list[tuple[str, int, int]] = []
    for name in files:
        size = os.path.getsize(name)
        start = 0
        with open(name, "rb") as fh:
            while start < size:
                stop = size if size - start <= split_bytes else \
                    _line_start_at_or_after(fh, start + split_bytes, size)
                out.append((name, start, stop))
                start = stop
    return out


def range_lines(source: str, start: int, stop: int) -> list[bytes]:
    """The lines of ``source``'s bytes [start, stop) by the line rule (no line ends)."""
    with open(source, "rb") as fh:
        fh.seek(start)
        data = fh.read(stop - start)
    if start == 0 and data.startswith(BOM):
        data = data[len(BOM):]
    lines = _LINE_END.split(data)
    if lines and not lines[-1]:
        lines.pop()  # what follows the last line end is no line
    return lines


def _is_event(line: bytes, max_bytes: int) -> bool:
    if len(line) > max_bytes:
        return True
    try:
        return not line.decode("utf-8").isspace() and line != b""
    except UnicodeDecodeError:
        return True  # a bad line is an event: it goes to the dead letters


def count_events(lines: Sequence[bytes], limits: TextLimits = TEXT_LIMITS) -> int:
    """How many of ``lines`` are events (not blank)."""
    max_bytes = limits.max_line_bytes
    return sum(1 for x in lines if _is_event(x, max_bytes))


def line_batches(row: Any, batch_lines: int = BATCH_LINES) -> Iterator[pa.RecordBatch]:
    """A range row's lines as the parse stage's ``source, line, events_before, text``
    batches (``text`` as bytes: the parse stage decodes, so a bad line is its error)."""
    lines = range_lines(row["source"], row["start"], row["stop"])
    first = int(row["line"])
    for i in range(0, len(lines), batch_lines):
        chunk = lines[i:i + batch_lines]
        n = len(chunk)
        yield pa.RecordBatch.from_arrays([
            pa.array([row["source"]] * n, pa.string()),
            pa.array(range(first + i, first + i + n), pa.int64()),
            pa.array([int(row["events_before"])] * n, pa.int64()),
            pa.array(chunk, pa.binary()),
        ], names=["source", "line", "events_before", "text"])


def _count_fn(limits: TextLimits, batches: Iterator[pa.RecordBatch]
              ) -> Iterator[pa.RecordBatch]:
    for b in batches:
        rows = b.to_pylist()
        lines = [range_lines(r["source"], r["start"], r["stop"]) for r in rows]
        yield pa.RecordBatch.from_arrays([
            pa.array([r["source"] for r in rows], pa.string()),
            pa.array([r["start"] for r in rows], pa.int64()),
            pa.array([len(x) for x in lines], pa.int64()),
            pa.array([count_events(x, limits) for x in lines], pa.int64()),
        ], names=["source", "start", "lines", "events"])


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30}


def partition_bytes(spark: SparkSession) -> int:
    """Spark's ``spark.sql.files.maxPartitionBytes`` (bytes per partition of a file scan),
    which caps the ranges too."""
    text = str(spark.conf.get("spark.sql.files.maxPartitionBytes", "128m")).strip().lower()
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", text)
    if m is None or m[2] not in _UNITS:
        return SPLIT_BYTES
    return max(1, int(m[1]) * _UNITS[m[2]])


def read_ranges(spark: SparkSession, paths: Sequence[str], limits: TextLimits = TEXT_LIMITS,
                split_bytes: int = SPLIT_BYTES) -> Any:
    """A DataFrame of ranges (:data:`RANGES_DDL`), one partition each, numbered exactly;
    a range holds at most ``split_bytes`` and ``spark.sql.files.maxPartitionBytes`` (and
    then up to the end of the line it ends in)."""
    from functools import partial

    from siftbus.spark.progress import job_step

    ranges = plan_ranges(input_files(paths), min(split_bytes, partition_bytes(spark)))
    n = max(len(ranges), 1)
    frame = spark.createDataFrame(
        [(s, a, b, 0, 0) for s, a, b in ranges], RANGES_DDL).repartition(n)
    counted: dict[tuple[str, int], tuple[int, int]] = {}
    if ranges:
        with job_step(spark, "numbering the lines of the input files"):
            for r in frame.select("source", "start", "stop").mapInArrow(
                    partial(_count_fn, limits),
                    "source string, start long, lines long, events long").collect():
                counted[(r["source"], int(r["start"]))] = (int(r["lines"]), int(r["events"]))
    rows = []
    seen: dict[str, tuple[int, int]] = {}
    for s, a, b in ranges:  # in file order: each range starts where the last one stopped
        lines_before, events_before = seen.get(s, (0, 0))
        rows.append((s, a, b, lines_before + 1, events_before))
        n_lines, n_events = counted[(s, a)]
        seen[s] = (lines_before + n_lines, events_before + n_events)
    rdd = spark.sparkContext.parallelize(rows, n)
    return spark.createDataFrame(rdd, RANGES_DDL)


__all__ = ["BATCH_LINES", "RANGES_DDL", "SPLIT_BYTES", "count_events", "input_files",
           "line_batches", "partition_bytes", "plain_inputs", "plan_ranges", "range_lines",
           "read_ranges"]
