"""The Spark pipeline end to end on local[2], differentially against the reference matcher."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from siftbus.lang.profile import format_profile
from siftbus.match import ReferenceMatcher, add_all
from siftbus.model import Profile, load_schema, parse_schema
from siftbus.spark.match_stage import index_available
from siftbus.spark.pipeline import Pipeline, run_files, streaming_sinks
from siftbus.spark.sinks import (
    CountsSink,
    DeadLetterSink,
    DeliverySink,
    FileDeliverer,
    JsonLinesSink,
    ParquetSink,
    WebhookDeliverer,
    check_sink,
)
from siftbus.spark.sources import read_source, watch_directory
from siftbus.spark.subscriptions import StoredProfiles, SubscriptionSet, profile_source
from spark_strategies import event_dicts, events_of, profile_sets

from .jobs import (
    PROFILES_TEXT,
    SCHEMA_TOML,
    read_notifications,
    siftbus_exe,
    webhook_server,
    write_event_files,
)

pytestmark = pytest.mark.spark

SCHEMA = parse_schema(SCHEMA_TOML)
ENGINES = ["reference", *(["index"] if index_available() else [])]


def _profiles_text(profiles: list[Profile]) -> str:
    return "".join(format_profile(p) + "\n" for p in profiles)


def _expected(profiles: list[Profile], dicts: list[dict[str, Any]]) -> list[list[str]]:
    return add_all(ReferenceMatcher(), profiles).match_batch(events_of(dicts, SCHEMA))


def _parquet_versions(path: Path) -> dict[str, set[int]]:
    """Source file name -> the ``version`` values of its notifications in a Parquet sink."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(
        columns=["source", "version"])
    out: dict[str, set[int]] = {}
    for src, v in zip(table.column("source").to_pylist(), table.column("version").to_pylist(),
                      strict=True):
        out.setdefault(Path(src).name, set()).add(int(v))
    return out


def _read_matches(path: Path) -> dict[tuple[str, int], list[str]]:
    out = {}
    for line in path.read_text().splitlines():
        d = json.loads(line)
        out[(Path(d.get("source", "")).name, d["event"])] = d["matches"]
    return out


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_batch_job_equals_reference(spark: Any, schema_file: Path, engine: str,
                                    data: st.DataObject) -> None:
    profiles = data.draw(profile_sets(SCHEMA))
    dicts = data.draw(st.lists(event_dicts(), max_size=40))
    want = _expected(profiles, dicts)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "p.txt").write_text(_profiles_text(profiles))
        (root / "e.jsonl").write_text("".join(json.dumps(x) + "\n" for x in dicts))
        report = run_files(spark, SCHEMA, root / "p.txt", [root / "e.jsonl"], root / "out",
                           engine=engine)
        got = _read_matches(root / "out" / "matches.jsonl")
        assert got == {("", i): m for i, m in enumerate(want)}
        assert report.events == len(dicts)
        assert report.notifications == sum(map(len, want))
        pq = ParquetSink(root / "out" / "notifications").read_back(spark)
        assert sorted((e, p) for _, e, p in pq) == sorted(
            (i, p) for i, ms in enumerate(want) for p in ms)
        # One meaning of version everywhere: the subscription set's (1 for a batch job).
        assert report.version == 1
        if pq:
            assert _parquet_versions(root / "out" / "notifications") == {"e.jsonl": {1}}
        counts = json.loads((root / "out" / "counts.json").read_text())["total"]
        owners = {p.id: p.owner for p in profiles}
        want_counts: dict[str, int] = {}
        for ms in want:
            for p in ms:
                want_counts[owners[p]] = want_counts.get(owners[p], 0) + 1
        assert counts == want_counts


def test_bad_records_go_to_dead_letters_with_reason(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("d@alice: Door(open = 1)\n")
    lines = ['{"type": "Door", "open": 1, "floor": 2}', "{oops",
             '{"type": "Door", "open": 1, "floor": 99}', "",
             '{"type": "Door", "open": 1, "floor": 3}']
    (tmp_path / "e.jsonl").write_text("\n".join(lines) + "\n")
    report = run_files(spark, SCHEMA, tmp_path / "p.txt", [tmp_path / "e.jsonl"],
                       tmp_path / "out", engine="reference")
    assert (report.events, report.bad, report.notifications) == (2, 2, 2)
    dead = DeadLetterSink(tmp_path / "out" / "dead_letters.jsonl").read_back()
    assert [(d["line"], d["text"]) for d in dead] == [(2, "{oops"), (3, lines[2])]
    assert dead[0]["reason"].startswith("invalid JSON")
    assert "outside the domain int[-1,8]" in dead[1]["reason"]
    assert dead[1]["column"] == lines[2].index('"floor"') + 1
    assert Path(dead[0]["source"]).name == "e.jsonl"
    # The blank line is no event: the last line is event 3, as `siftbus match` counts.
    assert _read_matches(tmp_path / "out" / "matches.jsonl") == {("", 0): ["d"], ("", 3): ["d"]}


@pytest.mark.parametrize("engine", ENGINES)
def test_version_column_is_the_subscription_sets(spark: Any, tmp_path: Path,
                                                 engine: str) -> None:
    # The index engine counts its own changes (3 adds here); the Parquet column, the
    # summary and the reference engine all mean the subscription set's version: 1.
    (tmp_path / "p.txt").write_text(
        "a@alice: Door(open = 1)\nb@bob: Door(floor > 2)\nc@carol: Door()\n")
    (tmp_path / "e.jsonl").write_text('{"type": "Door", "open": 1, "floor": 3}\n')
    report = run_files(spark, SCHEMA, tmp_path / "p.txt", [tmp_path / "e.jsonl"],
                       tmp_path / "out", engine=engine)
    assert (report.version, report.notifications) == (1, 3)
    assert _parquet_versions(tmp_path / "out" / "notifications") == {"e.jsonl": {1}}


def test_hostile_lines_are_dead_letters_and_the_job_goes_on(spark: Any, tmp_path: Path) -> None:
    # Invalid UTF-8, JSON nested 100,000 deep, a 5,000-digit integer and a lone surrogate
    # each become one dead letter with its reason; they used to abort the whole job.
    good = b'{"type": "Door", "open": 1, "floor": 2}'
    surrogate = b'{"type": "Temp", "room": 1, "value": 2, "level": "LOW", "name": "\\ud800"}'
    lines = [good, b"\xff", b"[" * 100_000, b'{"type": "Door", "open": 1, "floor": '
             + b"1" * 5000 + b"}", surrogate, b'{"type": "Do\xc3or"}', good]
    (tmp_path / "e.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "p.txt").write_text("d@alice: Door(open = 1)\n")
    report = run_files(spark, SCHEMA, tmp_path / "p.txt", [tmp_path / "e.jsonl"],
                       tmp_path / "out", engine=ENGINES[-1])
    assert (report.events, report.bad, report.notifications) == (2, 5, 2)
    dead = DeadLetterSink(tmp_path / "out" / "dead_letters.jsonl").read_back()
    assert [(d["line"], d["column"], d["reason"]) for d in dead] == [
        (2, 1, "not UTF-8: byte 0xff invalid start byte"),
        (3, 65, "JSON nested deeper than 64 (TextLimits.max_json_depth)"),
        (4, 38, "JSON integer of more than 1000 digits (TextLimits.max_int_digits)"),
        (5, surrogate.index(b"\\ud800") + 1,
         "JSON string holds a lone UTF-16 surrogate (not a Unicode character)"),
        (6, 13, "not UTF-8: byte 0xc3 invalid continuation byte"),
    ]
    assert dead[0]["text"] == "\\xff" and dead[4]["text"] == '{"type": "Do\\xc3or"}'
    assert _read_matches(tmp_path / "out" / "matches.jsonl") == {("", 0): ["d"], ("", 6): ["d"]}


def _siftbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([siftbus_exe(), *args], capture_output=True, text=True,
                          timeout=120)


_CHECK_ERROR = re.compile(r"^siftbus: error: .*?, line (\d+), column (\d+): (.*)$", re.M)


def test_the_hostile_event_corpus_gives_checks_errors_as_dead_letters(
        spark: Any, tmp_path: Path) -> None:
    # Every bad event line of the hostile corpus (test_hostile_parsers: nesting, huge
    # numbers, bad UTF-8, surrogates, 1 MB names, ...) between good lines: `pipeline run`
    # and `siftbus check` name the same line, column and reason for each, and the good
    # lines still match. The corpus's 8-40 MB lines are left to the parse stage's own
    # tests (the line limit), to keep this test quick on a shared machine.
    from hostile_inputs import EVENT_LINES, GOOD_EVENT, PROFILES, SCHEMA

    bad = [v for v in EVENT_LINES.values() if isinstance(v, bytes) and len(v) < 2 << 20]
    lines = [GOOD_EVENT]
    for b in bad:
        lines += [b, GOOD_EVENT]
    events = tmp_path / "hostile.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    r = _siftbus("check", "--schema", str(SCHEMA), "--events", str(events))
    errors = [(int(m[1]), int(m[2]), m[3]) for m in _CHECK_ERROR.finditer(r.stderr)]
    assert len(errors) == len(bad), r.stderr[-2000:]
    report = run_files(spark, load_schema(SCHEMA), PROFILES, [events], tmp_path / "out",
                       engine=ENGINES[-1])
    assert (report.events, report.bad) == (len(bad) + 1, len(bad))
    dead = DeadLetterSink(tmp_path / "out" / "dead_letters.jsonl").read_back()
    assert [(d["line"], d["column"], d["reason"]) for d in dead] == errors
    (tmp_path / "good.jsonl").write_bytes(GOOD_EVENT + b"\n")
    r = _siftbus("match", "--schema", str(SCHEMA), "--profiles", str(PROFILES), "--events",
                 str(tmp_path / "good.jsonl"))
    assert r.returncode == 0, r.stderr
    want = json.loads(r.stdout)["matches"]
    got = _read_matches(tmp_path / "out" / "matches.jsonl")
    assert sorted(got) == [("", 2 * k) for k in range(len(bad) + 1)]  # bad lines count
    assert all(m == want for m in got.values())


def test_pipeline_reads_event_files_by_the_rules_of_check_and_match(
        spark: Any, tmp_path: Path) -> None:
    # One rule for every line-oriented file: a BOM at the start is skipped, \n, \r\n and a
    # lone \r end lines (U+2028 and \x1c do not), blank lines are no events, and every bad
    # line gets the same place and reason from the pipeline as from `siftbus check`.
    schema = tmp_path / "s.toml"
    schema.write_text(SCHEMA_TOML)
    prof = tmp_path / "p.txt"
    prof.write_text(PROFILES_TEXT)
    door = b'{"type": "Door", "open": %d, "floor": %d}'
    temp = '{"type": "Temp", "room": 3, "value": 21.5, "level": "MID", "name": "a\u2028b"}'
    good = (b"\xef\xbb\xbf" + door % (1, 2) + b"\r\n" + b"\r\n" + door % (0, 5) + b"\r"
            + b"  \t\n" + temp.encode() + b"\n" + b"\x1c\n" + door % (1, 7) + b"\r\r"
            + door % (1, 0))  # the last line has no line end
    bad = b"\n".join([
        b"\xef\xbb\xbf" + door % (1, 1), b"\xff", b"[" * 100, (door % (1, 3))[:-1] + b"0" * 1500
        + b"}", b'{"type": "Door", "open": 1, "floor": NaN}',
        b'{"type": "Door", "open": 1, "open": 1, "floor": 2}', b'{"type": "\\ud800"}',
        b"\xef\xbb\xbf" + door % (1, 4), door % (2, 2), door % (1, 6) + b"\x0c"])
    (tmp_path / "good.jsonl").write_bytes(good)
    (tmp_path / "bad.jsonl").write_bytes(bad)

    r = _siftbus("match", "--schema", str(schema), "--profiles", str(prof), "--events",
                 str(tmp_path / "good.jsonl"))
    assert r.returncode == 0, r.stderr
    want = {(d["event"]): d["matches"] for d in map(json.loads, r.stdout.splitlines())}
    assert len(want) == 5
    report = run_files(spark, SCHEMA, prof, [tmp_path / "good.jsonl"], tmp_path / "out1",
                       engine=ENGINES[-1])
    assert report.bad == 0
    assert {e: m for (_, e), m in _read_matches(tmp_path / "out1" / "matches.jsonl").items()
            } == want

    r = _siftbus("check", "--schema", str(schema), "--events", str(tmp_path / "bad.jsonl"))
    errors = [(int(m[1]), int(m[2]), m[3]) for m in _CHECK_ERROR.finditer(r.stderr)]
    assert len(errors) == 9, r.stderr
    assert "bad.jsonl: 1 events valid, 9 errors" in r.stdout
    report = run_files(spark, SCHEMA, prof, [tmp_path / "bad.jsonl"], tmp_path / "out2",
                       engine=ENGINES[-1])
    dead = DeadLetterSink(tmp_path / "out2" / "dead_letters.jsonl").read_back()
    assert [(d["line"], d["column"], d["reason"]) for d in dead] == errors
    assert (report.events, report.bad) == (1, 9)


def _numbered_lines(source: Any) -> dict[tuple[str, int], str]:
    """(file name, line) -> text of a JSON-lines source, read by Spark or in ranges."""
    from siftbus.spark.ranges import range_lines

    rows = source.frame.collect()
    if source.kind == "text":
        return {(Path(r["source"]).name, r["line"]): r["text"] for r in rows}
    return {(Path(r["source"]).name, r["line"] + i): line.decode()
            for r in rows for i, line in enumerate(range_lines(r["source"], r["start"],
                                                               r["stop"]))}


@pytest.mark.parametrize("executor_writes", ["true", "false"])
def test_line_and_event_numbers_exact_across_files_and_partitions(
        spark: Any, tmp_path: Path, executor_writes: str) -> None:
    # Many small files plus some split across partitions (Spark's text reader, or the
    # workers' ranges), with blank lines (by Python's str.strip(): also \x1c and U+3000)
    # and a bad line: every line keeps its number and every event the index `siftbus
    # match` gives it (blank lines are no events).
    d = tmp_path / "events"
    d.mkdir()
    blanks = ["", "   ", "\x1c", "\u3000\t"]
    for f in range(5):
        lines = [json.dumps({"type": "Door", "open": 1, "floor": (i + f) % 9})
                 for i in range(50 + f)]
        for i in range(3 + f, len(lines), 7):
            lines[i] = blanks[i % len(blanks)]
        lines[20] = '{"type": "Door", "open": 1, "floor": 99}'
        (d / f"f{f}.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "p.txt").write_text("d@alice: Door(open = 1)\n")
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "700")
    spark.conf.set("spark.siftbus.executorWrites", executor_writes)
    try:
        source = read_source(spark, [d])
        assert source.kind == ("ranges" if executor_writes == "true" else "text")
        got_lines = _numbered_lines(source)
        run_files(spark, SCHEMA, tmp_path / "p.txt", [d], tmp_path / "out", engine="reference")
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
        spark.conf.unset("spark.siftbus.executorWrites")
    want_lines = {(f.name, i + 1): text for f in sorted(d.iterdir())
                  for i, text in enumerate(f.read_text().split("\n")[:-1])}
    assert got_lines == want_lines
    want_events = {}
    for f in sorted(d.iterdir()):
        events = [t for t in f.read_text().split("\n")[:-1] if t.strip()]
        want_events.update({(f.name, k): ["d"] for k, t in enumerate(events)
                            if '"floor": 99' not in t})
    got = {(Path(s).name, e): m for (s, e), m in
           _read_matches(tmp_path / "out" / "matches.jsonl").items()}
    assert got == want_events
    dead = DeadLetterSink(tmp_path / "out" / "dead_letters.jsonl").read_back()
    assert sorted((Path(x["source"]).name, x["line"]) for x in dead) == [
        (f"f{f}.jsonl", 21) for f in range(5)]


def test_keyed_parquet_source(spark: Any, tmp_path: Path) -> None:
    rows = [("g", 0, "Door", [1, 8], []), ("g", 1, "Door", [0, 8], []),
            ("g", 2, "Door", [1, 9], [])]
    spark.createDataFrame(rows, "source string, event long, type string, ikeys array<long>, "
                          "skeys array<string>").write.parquet(str(tmp_path / "k.parquet"))
    (tmp_path / "p.txt").write_text("d: Door(open = 1)\n")
    report = run_files(spark, SCHEMA, tmp_path / "p.txt", [tmp_path / "k.parquet"],
                       tmp_path / "out", engine="reference", fmt="keyed")
    assert (report.events, report.bad, report.notifications) == (2, 1, 1)


def test_profiles_from_the_broker_store(spark: Any, tmp_path: Path) -> None:
    from siftbus.broker.store import ProfileStore

    db = tmp_path / "store.db"
    ProfileStore(db).close()  # the broker's module creates the table
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO profiles VALUES (?, ?, ?, ?)", [
        ("s1", "alice", "Door", "Door(open = 1)"),
        ("s2", "bob", "Temp", "x: Temp(room = 3)"),
    ])
    con.commit()
    con.close()
    src = profile_source(f"sqlite:{db}")
    assert isinstance(src, StoredProfiles)
    subs = SubscriptionSet(SCHEMA, src, engine="reference")
    assert sorted((p.id, p.owner) for p in subs.profiles) == [("s1", "alice"), ("s2", "bob")]
    con = sqlite3.connect(db)
    con.execute("INSERT INTO profiles VALUES ('s3', 'carol', 'Door', 'Door(open = 1, oops)')")
    con.commit()
    con.close()
    with pytest.raises(Exception, match="s3"):
        SubscriptionSet(SCHEMA, src, engine="reference")
    # A running job skips the bad row and keeps the good ones.
    assert subs.refresh() is False
    assert len(subs) == 2


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with webhook_server() as hook:
        yield hook


def test_every_sink_passes_the_conformance_check(
        spark: Any, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]) -> None:
    pq = ParquetSink(tmp_path / "pq")
    check_sink(pq, spark, read_back=lambda: pq.read_back(spark))
    js = JsonLinesSink(tmp_path / "js")
    check_sink(js, spark, read_back=lambda: js.read_back(spark))
    check_sink(CountsSink(tmp_path / "counts.json"), spark)
    assert CountsSink(tmp_path / "counts.json").totals() == {"alice": 2, "bob": 2}
    check_sink(DeadLetterSink(tmp_path / "dead"), spark)
    check_sink(DeliverySink(FileDeliverer(tmp_path / "deliveries")), spark)
    assert sorted(p.name for p in (tmp_path / "deliveries").iterdir()) == ["alice", "bob"]
    url, received = webhook
    check_sink(DeliverySink(WebhookDeliverer({"*": url})), spark)
    # batch 1 twice (a replay re-delivers: at-least-once), then batch 2.
    assert sorted((b["batch"], b["subscriber"], len(b["notifications"])) for b in received) == [
        (1, "alice", 1), (1, "alice", 1), (1, "bob", 2), (1, "bob", 2), (2, "alice", 1)]


def test_stream_picks_up_subscription_changes(spark: Any, tmp_path: Path) -> None:
    watch = tmp_path / "in"
    watch.mkdir()
    prof = tmp_path / "p.txt"
    prof.write_text("a@alice: Door(open = 1)\n")
    subs = SubscriptionSet(SCHEMA, profile_source(prof), engine=ENGINES[-1])
    pipe = Pipeline(spark, SCHEMA, subs, streaming_sinks(tmp_path / "out"))
    reports = []
    line = json.dumps({"type": "Door", "open": 1, "floor": 0}) + "\n"
    (watch / "1.jsonl").write_text(line)
    q = pipe.stream(watch_directory(spark, watch, max_files_per_trigger=1), tmp_path / "ck",
                    on_batch=reports.append)
    try:
        q.processAllAvailable()
        prof.write_text("a@alice: Door(open = 1)\nb@bob: Door(floor = 0)\n")
        (watch / "2.jsonl").write_text(line)
        q.processAllAvailable()
        prof.write_text("b@bob: Door(floor = 0)\n")
        (watch / "3.jsonl").write_text(line)
        q.processAllAvailable()
    finally:
        q.stop()
        pipe.close()
    assert [r.notifications for r in reports] == [1, 2, 1]
    assert [r.version for r in reports] == [1, 2, 3]  # the set's versions, in order
    assert _parquet_versions(tmp_path / "out" / "notifications") == {
        "1.jsonl": {1}, "2.jsonl": {2}, "3.jsonl": {3}}
    got = sorted((Path(s).name, p) for s, _, p in
                 ParquetSink(tmp_path / "out" / "notifications").read_back(spark))
    assert got == [("1.jsonl", "a"), ("2.jsonl", "a"), ("2.jsonl", "b"), ("3.jsonl", "b")]


def _matches_by_source(path: Path) -> dict[tuple[str, int], list[str]]:
    """(source, event) -> matches of a match-lines file or a streaming sink's directory."""
    files = [path] if path.is_file() else sorted(path.rglob("*.json"))
    return {(d["source"], d["event"]): d["matches"] for f in files
            for d in map(json.loads, f.read_text().split("\n")[:-1])}


def test_a_watched_directory_gives_the_batch_jobs_results_in_one_job_per_batch(
        spark: Any, tmp_path: Path) -> None:
    # The stream's workers read each new file whole, as the batch job's ranges: the same
    # line rule (BOM, \r, \r\n, blank lines, bad UTF-8), the same event numbers, the same
    # dead letters, and the source named as the batch job names it (a space, a %).
    watch = tmp_path / "in"
    watch.mkdir()
    door = b'{"type": "Door", "open": %d, "floor": %d}'
    files = {
        "a b%20.jsonl": b"\xef\xbb\xbf" + door % (1, 2) + b"\r\n\r\n" + door % (0, 1)
        + b"\r  \t\n" + door % (1, 7) + b"\r\r" + door % (1, 0),
        "bad.jsonl": b"\n".join([door % (1, 1), b"\xff", b"[" * 100, door % (2, 2),
                                 b'{"type": "Door", "open": 1, "floor": NaN}', door % (1, 4)]),
        "c.jsonl": b"".join(door % (i % 2, i % 9) + b"\n" for i in range(30)),
    }
    for name, data in files.items():
        (watch / name).write_bytes(data)
    prof = tmp_path / "p.txt"
    prof.write_text(PROFILES_TEXT)
    subs = SubscriptionSet(SCHEMA, profile_source(prof), engine=ENGINES[-1])
    pipe = Pipeline(spark, SCHEMA, subs, streaming_sinks(tmp_path / "stream"))
    reports: list[Any] = []
    q = pipe.stream(watch_directory(spark, watch, max_files_per_trigger=1), tmp_path / "ck",
                    available_now=True, on_batch=reports.append)
    try:
        assert q.awaitTermination(120), "the available-now query did not finish"
    finally:
        q.stop()
        pipe.close()
    batch = run_files(spark, SCHEMA, prof, [watch], tmp_path / "batch", engine=ENGINES[-1])
    assert len(reports) == 3
    # one job reads, parses, matches and writes; writing dead letters is one more
    assert sorted(r.jobs - (r.bad > 0) for r in reports) == [1, 1, 1]
    assert (sum(r.events for r in reports), sum(r.bad for r in reports)) == (
        batch.events, batch.bad)
    assert _matches_by_source(tmp_path / "stream" / "matches") == _matches_by_source(
        tmp_path / "batch" / "matches.jsonl")
    out = [tmp_path / x / "notifications" for x in ("stream", "batch")]
    assert sorted(ParquetSink(out[0]).read_back(spark)) == sorted(
        ParquetSink(out[1]).read_back(spark))
    dead = [sorted(tuple(d.values()) for d in DeadLetterSink(p).read_back()) for p in (
        tmp_path / "stream" / "dead_letters", tmp_path / "batch" / "dead_letters.jsonl")]
    assert dead[0] == dead[1] and len(dead[0]) == batch.bad == 4
    assert {d[0] for d in dead[0]} == {str(watch / "bad.jsonl")}


def test_schema_loaded_from_file_matches_fixture(schema_file: Path) -> None:
    assert load_schema(schema_file).names == SCHEMA.names


def test_building_day_is_valid_seeded_and_complete(spark: Any, tmp_path: Path) -> None:
    from siftbus.model.event import parse_event
    from siftbus.spark.demo import find_examples
    from siftbus.spark.workload import BuildingDay, building_day, write_day

    schema = load_schema(find_examples() / "schema.toml")
    day = BuildingDay().scaled(0.005)
    n = write_day(building_day(spark, schema, seed=3, day=day), tmp_path / "a.jsonl")
    write_day(building_day(spark, schema, seed=3, day=day), tmp_path / "b.jsonl")
    a = (tmp_path / "a.jsonl").read_text()
    assert a == (tmp_path / "b.jsonl").read_text()
    lines = a.splitlines()
    assert n == len(lines) == day.expected_events()
    types = {parse_event(line, schema).type_name for line in lines}
    assert types == set(schema.names)


def test_matches_per_event_plot_has_a_true_axis_and_a_caption() -> None:
    from siftbus.spark.analysis import matches_figure, ranking_figure

    fig = matches_figure([(0, 900), (1, 80), (2, 15), (8, 4), (91, 1)], "run X\n1,000 events")
    ax = fig.axes[0]
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert centres == [0, 1, 2, 8, 91]  # gaps between 2, 8 and 91 stay visible
    assert ax.get_yscale() == "log"
    assert any("run X" in t.get_text() and "1,000 events" in t.get_text()
               for t in fig.texts)
    fig = ranking_figure([("a", 50), ("b", 30)], 3, 100, "per subscriber", "subscriber",
                         "run X")
    assert fig.axes[0].get_title() == "per subscriber: top 2 of 3 subscribers with notifications"
    assert any("got 80 of all 100 notifications (80.0%)" in t.get_text() for t in fig.texts)


def test_analysis_and_demo_with_live_delivery(spark: Any, tmp_path: Path) -> None:
    from siftbus.spark.demo import run_demo

    result = run_demo(tmp_path / "demo", seed=5, scale=0.05, progress=False)
    a = result.analysis
    assert sum(n for _, n in a.histogram) == result.report.events == result.events
    assert sum(k * n for k, n in a.histogram) == a.notifications == result.report.notifications
    counts = json.loads((tmp_path / "demo" / "counts.json").read_text())["total"]
    assert dict(a.subscribers) == counts
    for png in a.plots:
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.alarms_sent, "a building's day has alarms"
    if result.alarms_received is not None:  # the broker network was usable
        assert result.alarms_received == result.alarms_sent
        # Timed from the day's file written: no alarm before it, none after the demo.
        assert result.latency is not None
        p50, p99 = result.latency
        assert 0 < p50 <= p99 <= sum(result.seconds.values())
    else:
        assert (tmp_path / "demo" / "alarms").is_dir()


def test_progress_names_each_step_never_spark_internals(spark: Any) -> None:
    import io

    from rich.console import Console

    from siftbus.spark.progress import job_step, spark_progress

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=150)
    # Two tasks of two rows, each row sleeping 0.7 s in the JVM (no Python worker needed).
    slow = spark.range(4, numPartitions=2).selectExpr(
        "id", "reflect('java.lang.Thread', 'sleep', cast(700 as bigint)) as s").where(
        "coalesce(s, '') != 'never'")
    with spark_progress(spark, console=console, interval=0.1):
        with job_step(spark, "matching the events of the test"):
            assert slow.count() == 4
        assert slow.count() == 4  # outside any step
    text = buf.getvalue()
    assert "matching the events of the test" in text
    assert "Spark stage " in text  # the unnamed job: a plain fallback
    assert "$anonfun" not in text and "withThreadLocalCaptured" not in text
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def _xml(dicts: list[dict[str, Any]]) -> str:
    body = "".join(
        f'<{d["type"]} ' + " ".join(f'{k}="{v}"' for k, v in d.items() if k != "type") + "/>\n"
        for d in dicts)
    return f'<?xml version="1.0"?>\n<events>\n{body}</events>\n'


@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_xml_documents_through_the_splitter_equal_reference(spark: Any,
                                                            data: st.DataObject) -> None:
    profiles = data.draw(profile_sets(SCHEMA))
    docs = [data.draw(st.lists(event_dicts(), min_size=1, max_size=25)) for _ in range(2)]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "p.txt").write_text(_profiles_text(profiles))
        (root / "xml").mkdir()
        for i, dicts in enumerate(docs):
            (root / "xml" / f"d{i}.xml").write_text(_xml(dicts))
        # A broken third document: its first event counts, the rest is a dead letter.
        (root / "xml" / "d2.xml").write_text(
            '<events><Door open="1" floor="2"/><Door open="1"</events>')
        report = run_files(spark, SCHEMA, root / "p.txt", [root / "xml"], root / "out",
                           fmt="xml", engine=ENGINES[-1])
        got = _read_matches(root / "out" / "matches.jsonl")
        want = {(f"d{i}.xml", k): m for i, dicts in enumerate(docs)
                for k, m in enumerate(_expected(profiles, dicts))}
        want[("d2.xml", 0)] = _expected(profiles, [{"type": "Door", "open": 1, "floor": 2}])[0]
        assert {(Path(s).name, e): m for (s, e), m in got.items()} == want
        assert report.bad == 1
        dead = DeadLetterSink(root / "out" / "dead_letters.jsonl").read_back()
        assert [Path(x["source"]).name for x in dead] == ["d2.xml"]
        assert "not well-formed XML" in dead[0]["reason"]


def test_stream_of_xml_files(spark: Any, tmp_path: Path) -> None:
    watch = tmp_path / "in"
    watch.mkdir()
    (tmp_path / "p.txt").write_text("d@alice: Door(open = 1)\n")
    subs = SubscriptionSet(SCHEMA, profile_source(tmp_path / "p.txt"), engine=ENGINES[-1])
    pipe = Pipeline(spark, SCHEMA, subs, streaming_sinks(tmp_path / "out"))
    (watch / "a.xml").write_text(_xml([{"type": "Door", "open": 1, "floor": f}
                                       for f in range(3)]))
    (watch / "b.xml").write_text(_xml([{"type": "Door", "open": o, "floor": 1}
                                       for o in (0, 1, 5)]))
    reports: list[Any] = []
    q = pipe.stream(watch_directory(spark, watch, fmt="xml"), tmp_path / "ck",
                    available_now=True, on_batch=reports.append, kind="xml")
    try:
        assert q.awaitTermination(120), "the available-now query did not finish"
    finally:
        q.stop()
        pipe.close()
    assert sum(r.events for r in reports) == 5 and sum(r.bad for r in reports) == 1
    got = sorted((Path(s).name, e) for s, e, _ in
                 ParquetSink(tmp_path / "out" / "notifications").read_back(spark))
    assert got == [("a.xml", 0), ("a.xml", 1), ("a.xml", 2), ("b.xml", 1)]


def test_socket_stream(spark: Any, tmp_path: Path) -> None:
    import socket as socketlib
    import time

    from siftbus.spark.sources import socket_stream

    lines = [json.dumps({"type": "Door", "open": i % 2, "floor": i % 9}) for i in range(40)]
    lines.insert(7, '{"type": "Door", "open": 7, "floor": 0}')
    server = socketlib.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(60)
    port = server.getsockname()[1]
    (tmp_path / "p.txt").write_text("d@alice: Door(open = 1)\nf@bob: Door(floor < 2)\n")
    subs = SubscriptionSet(SCHEMA, profile_source(tmp_path / "p.txt"), engine=ENGINES[-1])
    pipe = Pipeline(spark, SCHEMA, subs, streaming_sinks(tmp_path / "out"))
    reports: list[Any] = []
    q = pipe.stream(socket_stream(spark, "127.0.0.1", port), tmp_path / "ck",
                    on_batch=reports.append, per_batch_sources=True)
    conn = None
    try:
        conn, _ = server.accept()
        for half in (lines[:20], lines[20:]):  # two writes, likely two micro-batches
            conn.sendall(("\n".join(half) + "\n").encode())
            time.sleep(1)
        deadline = time.monotonic() + 120
        while sum(r.events + r.bad for r in reports) < len(lines):
            assert time.monotonic() < deadline, f"only {reports} after 120 s"
            assert q.isActive, q.exception()
            q.processAllAvailable()
            time.sleep(0.2)
    finally:
        q.stop()
        pipe.close()
        if conn is not None:
            conn.close()
        server.close()
    assert sum(r.bad for r in reports) == 1
    # one job per micro-batch (its lines numbered in one partition), one more for dead letters
    assert [r.jobs for r in reports] == [1 + (r.bad > 0) for r in reports]
    good = [json.loads(x) for x in lines if '"open": 7' not in x]
    want = sum(d["open"] == 1 for d in good) + sum(d["floor"] < 2 for d in good)
    got = ParquetSink(tmp_path / "out" / "notifications").read_back(spark)
    assert len(got) == want
    assert len(set(got)) == len(got)  # (source, event, profile) unique across batches
    assert all(s.startswith(f"socket:127.0.0.1:{port}#batch=") for s, _, _ in got)


def test_spark_writers_and_executor_writes_give_the_same_outputs(spark: Any,
                                                                tmp_path: Path) -> None:
    # The executors write the standard outputs themselves (spark/fused.py); with
    # spark.siftbus.executorWrites=false Spark's own writers do (executors that do not
    # share the driver's filesystem). Both: the same notifications, match lines (several
    # sources: each line names its source), counts and dead letters.
    (tmp_path / "p.txt").write_text(PROFILES_TEXT)
    write_event_files(tmp_path / "events", files=3, per_file=150, seed=11)
    reports = {}
    for mode in ("true", "false"):
        spark.conf.set("spark.siftbus.executorWrites", mode)
        try:
            reports[mode] = run_files(spark, SCHEMA, tmp_path / "p.txt", [tmp_path / "events"],
                                      tmp_path / mode)
        finally:
            spark.conf.unset("spark.siftbus.executorWrites")
    fast, rows = tmp_path / "true", tmp_path / "false"
    assert (reports["true"].events, reports["true"].bad, reports["true"].notifications) == (
        reports["false"].events, reports["false"].bad, reports["false"].notifications)
    assert reports["true"].notifications > 0 and reports["true"].bad > 0
    assert sorted(read_notifications(fast / "notifications")) == sorted(
        read_notifications(rows / "notifications"))
    lines = [json.loads(x) for x in (fast / "matches.jsonl").read_text().splitlines()]
    assert lines == [json.loads(x) for x in (rows / "matches.jsonl").read_text().splitlines()]
    assert all("source" in d for d in lines)
    assert json.loads((fast / "counts.json").read_text()) == json.loads(
        (rows / "counts.json").read_text())
    assert (fast / "dead_letters.jsonl").read_text() == (rows / "dead_letters.jsonl").read_text()
    assert not [p for p in tmp_path.rglob(".*stage-*")], "staging directories left behind"
