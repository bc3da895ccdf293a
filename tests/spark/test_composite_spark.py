"""Composite profiles on Spark, batch and Structured Streaming, against the reference and
the broker's engine on the same stream."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composite_strategies import SCHEMA, TIMED, S, composites, shuffle_within, streams, timed
from siftbus.lang.composite import CompositeProfile, format_composite, parse_composite
from siftbus.match.composite import (
    CompositeEngine,
    CompositeMatch,
    StampedEvent,
    reference_matches,
)
from siftbus.model import Event

pytestmark = pytest.mark.spark

Key = tuple[str, tuple[tuple[str, float, str, int], ...], float]


def ref_keys(profiles: list[CompositeProfile], stream: list[StampedEvent]) -> list[Key]:
    out = []
    for p in profiles:
        for m in reference_matches(p, stream):
            out.append(_key(p.id, m))
    return sorted(out)


def _key(pid: str, m: CompositeMatch) -> Key:
    return (pid, tuple((lab, e.time / 1e6, str(e.order[0]), int(e.order[1]))
                       for lab, e in m.bindings), m.completed / 1e6)


def spark_keys(rows: list[Any]) -> list[Key]:
    return sorted((r["profile"], tuple(zip(r["labels"], r["times"], r["sources"], r["lines"],
                                           strict=True)), r["completed"]) for r in rows)


def _profiles(cs: list[CompositeProfile]) -> list[CompositeProfile]:
    return [parse_composite(format_composite(c.with_id(f"x{i}", f"sub{i % 2}")), TIMED)
            for i, c in enumerate(cs)]


def joined(parts: list[list[StampedEvent]], gap: int = 100 * S) -> list[StampedEvent]:
    """Random streams one after another, ``gap`` apart (no window spans two of them), as
    one longer stream: one Spark job tests as much as several small ones."""
    out: list[StampedEvent] = []
    for j, part in enumerate(parts):
        out += [StampedEvent(e.event, e.time + j * gap, (len(out) + i,))
                for i, e in enumerate(part)]
    return out


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(composites(), min_size=1, max_size=6),
       st.lists(streams(), min_size=1, max_size=4))
def test_batch_equals_the_reference_and_the_engine(spark: Any, cs: list[CompositeProfile],
                                                   parts: list[list[StampedEvent]]) -> None:
    from siftbus.spark.composite import composite_matches

    profiles = _profiles(cs)
    # one source, line = position: the tie-breaker is (source, line)
    full = [StampedEvent(timed(e), e.time, ("day", i)) for i, e in enumerate(joined(parts))]
    rows = [("day", i, e.event.to_json()) for i, e in enumerate(full)]
    df = spark.createDataFrame(rows or [("day", 0, "")], "source string, line long, text string")
    if not rows:
        df = df.limit(0)
    got = spark_keys(composite_matches(df, TIMED, profiles).collect())
    assert got == ref_keys(profiles, full)
    engine = CompositeEngine(matcher="reference")
    for p in profiles:
        engine.add(p)
    out: list[CompositeMatch] = []
    for e in full:
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    assert got == sorted(_key(m.profile, m) for m in out)


def test_batch_takes_the_time_from_a_column(spark: Any) -> None:
    """Types without "@time" (the building's): the time column, in seconds."""
    from siftbus.spark.composite import composite_matches

    p = parse_composite("ab@sub: a=A(v = 1) -> b=B(v = 2) within 2 s same k", SCHEMA)
    evs = [("A", 0, 1, 0.0), ("B", 1, 2, 1.0), ("B", 0, 2, 1.5), ("A", 0, 1, 5.0),
           ("B", 0, 2, 7.5)]
    rows = [("f", i, json.dumps({"type": t, "k": k, "v": v}), at)
            for i, (t, k, v, at) in enumerate(evs)]
    df = spark.createDataFrame(rows, "source string, line long, text string, t double")
    got = composite_matches(df, SCHEMA, [p], time_col="t").collect()
    assert [(r["profile"], r["subscriber"], r["labels"], r["times"], r["lines"])
            for r in got] == [("ab", "sub", ["a", "b"], [0.0, 1.5], [0, 2])]
    assert json.loads(got[0]["texts"][1]) == {"type": "B", "k": 0, "v": 2}


def _write(d: Path, name: str, events: list[Event]) -> None:
    tmp = d.parent / f".{name}"
    tmp.write_text("".join(e.to_json() + "\n" for e in events))
    tmp.rename(d / name)


@settings(max_examples=2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(composites(), min_size=1, max_size=4),
       st.lists(streams(max_events=10), min_size=1, max_size=3), st.integers(0, 2**32))
def test_streaming_equals_the_reference_with_out_of_order_files(
        spark: Any, tmp_path_factory: Any, cs: list[CompositeProfile],
        parts: list[list[StampedEvent]], seed: int) -> None:
    """Events arrive in files out of time order (within the lateness bound), one micro-batch
    per group of files; heartbeats far ahead move the watermark at the end. Spark drops
    rows at or before its watermark (the broker: before it), and its first watermark is
    0: the stream starts at 100 s and Spark's delay is the bound plus 1 s."""
    from pyspark.sql import functions as F

    from siftbus.spark.composite import composite_stream

    profiles = _profiles(cs)
    lateness = 3
    stream = [StampedEvent(e.event, e.time + 100 * S, e.order) for e in joined(parts)]
    tmp = tmp_path_factory.mktemp("cstream")
    inbox = tmp / "in"
    inbox.mkdir()
    # One event per file, named by its arrival: the file's number is the event's source
    # (its tie-breaker, so events of the same time count in arrival order).
    arrivals = shuffle_within(stream, lateness * S, seed)
    full = [StampedEvent(timed(e), e.time, (f"{i:05d}", 0)) for i, e in enumerate(arrivals)]
    df = (spark.readStream.format("text").option("maxFilesPerTrigger", 1000).load(str(inbox))
          .select(F.regexp_extract(F.input_file_name(), r"(\d+)\.jsonl$", 1).alias("source"),
                  F.lit(0).cast("long").alias("line"), F.col("value").alias("text")))
    out = composite_stream(df, TIMED, profiles, lateness=lateness + 1)
    name = f"cmatches_{seed}"
    # two state partitions (fixed by the checkpoint at the start): fewer tasks a batch
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        q = out.writeStream.format("memory").queryName(name).outputMode("append") \
            .option("checkpointLocation", str(tmp / "ck")).start()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    try:
        group = 12  # arrivals per micro-batch
        for g in range(0, len(full), group):
            for i in range(g, min(g + group, len(full))):
                _write(inbox, f"{i:05d}.jsonl", [full[i].event])
            q.processAllAvailable()
        # heartbeats: far ahead, so the watermark passes every event and window
        _write(inbox, "90000.jsonl", [Event.of(TIMED["Z"], {"t": 10**6})])
        q.processAllAvailable()
        _write(inbox, "90001.jsonl", [Event.of(TIMED["Z"], {"t": 2 * 10**6})])
        q.processAllAvailable()
        deadline = time.monotonic() + 60
        want = ref_keys(profiles, full)
        while True:
            got = spark_keys(spark.sql(f"select * from {name}").collect())
            if got == want or time.monotonic() > deadline:
                break
            q.processAllAvailable()
            time.sleep(0.5)
        assert got == want
    finally:
        q.stop()


def test_grouping_by_profile_and_key_gives_each_subscriber_its_copy(spark: Any) -> None:
    from siftbus.spark.composite import composite_matches

    a = parse_composite("g1@alice: A() -> B() within 5 s same k", TIMED)
    b = parse_composite("g2@bob: A() -> B() within 5 s same k", TIMED)
    evs = [Event.of(TIMED["A"], {"k": 0, "v": 0, "t": 1}),
           Event.of(TIMED["B"], {"k": 1, "v": 0, "t": 2}),
           Event.of(TIMED["B"], {"k": 0, "v": 0, "t": 3})]
    df = spark.createDataFrame([("d", i, e.to_json()) for i, e in enumerate(evs)],
                               "source string, line long, text string")
    got = defaultdict(list)
    for r in composite_matches(df, TIMED, [a, b]).collect():
        got[(r["profile"], r["subscriber"])].append(r["lines"])
    assert dict(got) == {("g1", "alice"): [[0, 2]], ("g2", "bob"): [[0, 2]]}


def test_the_demo_step_finds_the_break_ins_and_the_broken_heaters(spark: Any) -> None:
    """The building's composite profiles over a (small) generated day: an alarm for each
    real glass break, with the intruder's motion in its room; a heating fault in every
    room whose heater is broken (at this scale the sensors report too rarely to clear the
    others); the broker's engine finds the same matches on the same stream."""
    from siftbus.model import load_schema
    from siftbus.spark.composite_demo import run_composites
    from siftbus.spark.demo import find_examples
    from siftbus.spark.workload import BuildingDay, building_day, faulty_heater_rooms

    ex = find_examples()
    schema = load_schema(ex / "schema.toml")
    day = BuildingDay().scaled(0.005)
    result = run_composites(building_day(spark, schema, seed=7, day=day), schema, ex)
    assert result is not None and result.agreed
    assert result.engine_matches == len(result.matches)
    alarms = [m for m in result.matches if m.profile == "security-alarm"]
    assert len(alarms) == day.glass_breaks
    for m in alarms:
        (_, t_glass, glass), (_, t_motion, motion) = m.events
        assert json.loads(glass)["level"] > 5 and json.loads(motion)["present"] == 1
        assert json.loads(glass)["room"] == json.loads(motion)["room"]
        assert 0 < t_motion - t_glass <= 50 and m.subscriber == "security"
    faults = {json.loads(m.events[0][2])["room"] for m in result.matches
              if m.profile == "heating-fault"}
    assert set(faulty_heater_rooms(7, day)) <= faults
