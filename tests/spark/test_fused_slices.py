"""A task matches its events in slices sized by the matches per event seen so far
(``fused.NOTE_SLICE``, bounding a worker's memory): whatever the slices, it writes the
same Parquet notifications, match lines, counts and dead letters. In one process, no JVM
(``iter_fused`` is the ``mapInArrow`` body)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from siftbus.model import parse_schema
from siftbus.spark import fused, subscriber_files
from siftbus.spark.fused import TaskPlan, iter_fused
from siftbus.spark.match_stage import index_available
from siftbus.spark.subscriptions import ProfileFile, SubscriptionSet

from .jobs import PROFILES_TEXT, SCHEMA_TOML, write_event_files

pytestmark = pytest.mark.skipif(not index_available(), reason="no index engine")


def _run(tmp: Path, event_file: Path, profiles: Path) -> tuple[Any, ...]:
    schema = parse_schema(SCHEMA_TOML)
    subs = SubscriptionSet(schema, ProfileFile(profiles))
    (tmp / "pq").mkdir(parents=True)
    (tmp / "js").mkdir()
    task = TaskPlan(parquet=str(tmp / "pq"), jsonl=str(tmp / "js"), version=1)
    rows = pa.RecordBatch.from_pylist([{"source": str(event_file), "start": 0,
                                        "stop": event_file.stat().st_size, "line": 1,
                                        "events_before": 0}])
    out = [r for b in iter_fused(subs.plan(), task, subs.schema_text, "ranges", iter([rows]))
           for r in b.to_pylist()]
    summary = sorted((r["kind"], r["source"], r["subscriber"], r["n"], r["notes"], r["hits"],
                      r["line"], r["reason"]) for r in out if r["kind"] != "part")
    table = ds.dataset(str(tmp / "pq"), format="parquet", partitioning="hive").to_table()
    notes = sorted(zip(*(table.column(c).to_pylist() for c in
                         ("subscriber", "profile", "source", "event", "type")), strict=True))
    lines = b"".join(p.read_bytes() for p in sorted((tmp / "js").iterdir()))
    return summary, notes, lines


def test_any_slicing_writes_the_same_outputs(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    [events] = write_event_files(tmp_path / "in", files=1, per_file=3000, seed=4)
    profiles = tmp_path / "profiles.txt"
    profiles.write_text(PROFILES_TEXT)
    whole = _run(tmp_path / "whole", events, profiles)
    assert whole[1] and whole[2].count(b"\n") > 2500  # notifications and match lines
    # First slice 100 rows, then about 50 notifications a slice: dozens of slices, and
    # slices that start in the middle of a parse batch.
    monkeypatch.setattr(fused, "FIRST_SLICE", 100)
    monkeypatch.setattr(fused, "NOTE_SLICE", 50)
    sliced = _run(tmp_path / "sliced", events, profiles)
    assert sliced == whole


def test_a_file_per_flush_beyond_the_open_writers_writes_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task keeps one open file per subscriber up to ``MAX_OPEN`` subscribers; beyond,
    it writes a file per subscriber and flush. Both give the same notifications."""
    [events] = write_event_files(tmp_path / "in", files=1, per_file=3000, seed=5)
    profiles = tmp_path / "profiles.txt"
    profiles.write_text(PROFILES_TEXT)
    monkeypatch.setattr(fused, "FIRST_SLICE", 100)  # slices of about 50 notifications,
    monkeypatch.setattr(fused, "NOTE_SLICE", 50)  # flushed every 200: many flushes
    monkeypatch.setattr(fused, "FLUSH_NOTES", 200)
    kept = _run(tmp_path / "kept", events, profiles)
    assert all(len(list(d.iterdir())) == 1 for d in (tmp_path / "kept" / "pq").iterdir())
    monkeypatch.setattr(subscriber_files, "MAX_OPEN", 0)
    per_flush = _run(tmp_path / "per-flush", events, profiles)
    assert any(len(list(d.iterdir())) > 1 for d in (tmp_path / "per-flush" / "pq").iterdir())
    assert per_flush == kept
