"""The pure parts of the pipeline (no JVM): parsing to keys, the match kernel, sorting."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.match import ReferenceMatcher, add_all
from siftbus.model import Profile, parse_schema
from siftbus.spark.match_stage import build_plan, index_available, match_batch, plan_matches
from siftbus.spark.parse import (
    PARSED_SCHEMA,
    TypeLayout,
    layouts_for,
    parse_lines,
    parse_text_batch,
    parse_xml_batch,
    validate_keyed_batch,
)
from spark_strategies import event_dicts, events_of, profile_sets

from .jobs import SCHEMA_TOML

SCHEMA = parse_schema(SCHEMA_TOML)
ENGINES = ["reference", *(["index"] if index_available() else [])]


def test_parse_good_and_bad_lines() -> None:
    lines = [
        '{"type": "Temp", "room": 3, "value": 21.55, "level": "MID", "name": "ab"}',
        "",
        '{"type": "Door", "open": 2, "floor": 0}',
        "not json",
        '{"type": "Nope"}',
        '{"type": "Door", "open": 1, "open": 0, "floor": 0}',
        '{"type": "Door", "open": 1}',
    ]
    out = parse_lines(lines, SCHEMA_TOML, source="e.jsonl")
    assert out.schema == PARSED_SCHEMA
    rows = out.to_pylist()
    # The blank line is not an event; every other line is one row, good or bad.
    assert [r["line"] for r in rows] == [1, 3, 4, 5, 6, 7]
    assert [r["event"] for r in rows] == [0, 1, 2, 3, 4, 5]
    good = rows[0]
    assert good["error"] is None
    assert good["ikeys"] == [3, 216, 1]  # 21.55 rounds half up to 21.6 -> key 216
    assert good["skeys"] == ["ab"]
    reasons = [r["error"] for r in rows[1:]]
    assert "outside the domain int[0,1]" in reasons[0]
    assert reasons[1].startswith("invalid JSON")
    assert "unknown event type 'Nope'" in reasons[2]
    assert "given twice" in reasons[3]
    assert "lacks attribute(s) floor" in reasons[4]
    assert rows[1]["column"] == lines[2].index('"open"') + 1


def test_layout_round_trip() -> None:
    layout = TypeLayout.of(SCHEMA["Temp"])
    assert layout.ordered == ("room", "value", "level")
    assert layout.strings == ("name",)
    keys = (5, -400, 2, "x")
    assert layout.join(*layout.split(keys)) == keys


def test_validate_keyed_rejects_out_of_domain_and_wrong_shape() -> None:
    batch = pa.RecordBatch.from_pydict({
        "source": ["g"] * 4, "event": [0, 1, 2, 3],
        "type": ["Door", "Door", "Temp", "Nope"],
        "ikeys": [[1, 8], [1, 9], [1, 2], [0]], "skeys": [[], [], ["a"], []],
    })
    out = validate_keyed_batch(batch, SCHEMA_TOML).to_pylist()
    assert out[0]["error"] is None
    assert "floor: key 9 is outside -1..8" in out[1]["error"]
    assert "needs 3 ordered and 1 string keys" in out[2]["error"]
    assert "unknown event type" in out[3]["error"]


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_match_kernel_equals_reference(engine: str, data: st.DataObject) -> None:
    profiles = data.draw(profile_sets(SCHEMA))
    events = events_of(data.draw(st.lists(event_dicts(), max_size=30)), SCHEMA)
    ref = add_all(ReferenceMatcher(), profiles)
    plan = build_plan(SCHEMA, profiles, engine=engine)
    assert plan_matches(plan, events) == ref.match_batch(events)


def test_matches_sorted_by_code_point_and_owners_follow() -> None:
    from siftbus.lang.profile import parse_profile

    profiles = [parse_profile(t, SCHEMA) for t in
                ("b@x: Door()", "a@y: Door(open = 1)", "B: Door()", "a-1@z: Door()")]
    plan = build_plan(SCHEMA, profiles, engine="reference")
    layouts = layouts_for(SCHEMA_TOML)
    ik, sk = layouts["Door"].split((1, 0))
    batch = pa.RecordBatch.from_pydict({
        "source": ["s"], "event": [7], "type": ["Door"], "ikeys": [ik], "skeys": [sk],
        "text": [json.dumps({"type": "Door", "open": 1, "floor": 0})]})
    row = match_batch(plan, batch).to_pylist()[0]
    assert row["matches"] == ["B", "a", "a-1", "b"]
    assert row["owners"] == ["B", "y", "z", "x"]
    assert row["event"] == 7 and row["text"] is not None


@pytest.mark.skipif(not index_available(), reason="indexed engine not installed")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_large_batches_use_the_grouped_kernel_and_stay_sorted(data: st.DataObject) -> None:
    # The index path trusts the kernel's per-row order (it skips the stage's own sort);
    # batches of 256+ rows of one type take the grouped kernel, so check that path too.
    from siftbus.match import index as index_module
    from siftbus.match.index import GROUPED_MIN

    saved = index_module.GROUPED_MIN_PROFILES
    index_module.GROUPED_MIN_PROFILES = 0  # the grouped kernel even for these few profiles
    try:
        _grouped_case(data, GROUPED_MIN)
    finally:
        index_module.GROUPED_MIN_PROFILES = saved


def _grouped_case(data: st.DataObject, grouped_min: int) -> None:
    profiles = data.draw(profile_sets(SCHEMA, max_size=60))
    distinct = data.draw(st.lists(event_dicts(), min_size=1, max_size=40))
    rnd = data.draw(st.randoms(use_true_random=False))
    dicts = [rnd.choice(distinct) for _ in range(3 * grouped_min)]
    events = events_of(dicts, SCHEMA)
    ref = add_all(ReferenceMatcher(), profiles)
    plan = build_plan(SCHEMA, profiles, engine="index")
    got = plan_matches(plan, events)
    assert got == ref.match_batch(events)
    assert all(row == sorted(row) for row in got)


async def test_subscription_set_follows_a_running_brokers_durable_store(tmp_path: Path) -> None:
    # The store is the one a broker writes (WAL mode, held open by the running broker), and
    # the Spark job reads it as `--profiles sqlite:PATH`: subscribe and unsubscribe on the
    # broker must show up at the job's next refresh, with the broker's ids and owners.
    from siftbus.broker.node import BrokerNode
    from siftbus.broker.server import BrokerServer
    from siftbus.broker.store import ProfileStore as BrokerStore
    from siftbus.client import Client
    from siftbus.spark.subscriptions import SubscriptionSet, profile_source

    path = tmp_path / "b1.sqlite"
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=BrokerStore(path)))
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="alice") as alice, \
                await Client.connect(port=srv.port, name="bob") as bob:
            await alice.subscribe("door: Door(open = 1)")
            subs = SubscriptionSet(SCHEMA, profile_source(f"sqlite:{path}"),
                                   engine=ENGINES[-1])
            assert [(p.id, p.owner) for p in subs.profiles] == [("alice/door", "alice")]
            v1 = subs.version
            await bob.subscribe('warm: Temp(value > 20, name prefix "a")')
            await alice.subscribe("up: Door(floor > 4)")
            assert subs.refresh() is True
            await alice.unsubscribe("door")
            assert subs.refresh() is True
            assert subs.refresh() is False  # nothing changed since
            assert sorted((p.id, p.owner) for p in subs.profiles) == [
                ("alice/up", "alice"), ("bob/warm", "bob")]
            assert subs.version > v1
            events = events_of([
                {"type": "Door", "open": 1, "floor": 6},
                {"type": "Temp", "room": 2, "value": 21.5, "level": "MID", "name": "ab"},
                {"type": "Temp", "room": 2, "value": 19.0, "level": "MID", "name": "ab"},
            ], SCHEMA)
            got = plan_matches(subs.plan(), events)
            assert got == [["alice/up"], ["bob/warm"], []]
            assert got == add_all(ReferenceMatcher(), subs.profiles).match_batch(events)
    finally:
        await srv.close()


def _xml_doc(dicts: list[dict[str, object]], as_child: list[bool], wrap: str) -> bytes:
    from lxml import etree

    root = etree.Element("batch")
    parent = etree.SubElement(root, wrap) if wrap else root
    for d, child in zip(dicts, as_child, strict=True):
        el = etree.SubElement(parent, str(d["type"]))
        for k, v in d.items():
            if k == "type":
                continue
            if child:
                etree.SubElement(el, k).text = str(v)
            else:
                el.set(k, str(v))
    return etree.tostring(root, xml_declaration=True, encoding="utf-8")


@settings(max_examples=60, deadline=None)
@given(dicts=st.lists(event_dicts(), max_size=20), data=st.data())
def test_xml_documents_parse_like_the_same_json_lines(dicts: list[dict[str, object]],
                                                      data: st.DataObject) -> None:
    as_child = data.draw(st.lists(st.booleans(), min_size=len(dicts), max_size=len(dicts)))
    wrap = data.draw(st.sampled_from(["", "floor3", "x"]))
    xml = pa.RecordBatch.from_pydict({"source": ["d.xml"], "content": [
        _xml_doc(dicts, as_child, wrap)]})
    got = parse_xml_batch(xml, SCHEMA_TOML).to_pylist()
    want = parse_lines([json.dumps(d) for d in dicts], SCHEMA_TOML, source="d.xml").to_pylist()
    assert [(r["event"], r["type"], r["ikeys"], r["skeys"], r["error"]) for r in got] == [
        (r["event"], r["type"], r["ikeys"], r["skeys"], r["error"]) for r in want]
    # A good event's text is its JSON line, which parses to the same keys again.
    again = parse_lines([r["text"] for r in got], SCHEMA_TOML).to_pylist()
    assert [r["ikeys"] for r in again] == [r["ikeys"] for r in got]


def test_bad_xml_events_and_documents_become_bad_rows() -> None:
    doc = b"""<?xml version="1.0"?>
<batch xmlns:b="urn:b">
  <b:Door open="1" floor="0"/>
  <Door open="3" floor="0"/>
  <Door open="1"><floor>2</floor><floor>3</floor></Door>
  <Temp room="x" value="1" level="LOW" name=""/>
  <Temp room="2" value="1" level="LOW"><name><i>a</i></name></Temp>
  <Door open="1"/>
  <Nope a="1"/>
</batch>"""
    broken = b'<e><Door open="1" floor="2"/><Door open="1" floor="2"></e>'
    batch = pa.RecordBatch.from_pydict({"source": ["a.xml", "b.xml"],
                                        "content": [doc, broken]})
    rows = parse_xml_batch(batch, SCHEMA_TOML).to_pylist()
    assert [(r["source"], r["event"], r["error"] is None) for r in rows] == [
        ("a.xml", 0, True), ("a.xml", 1, False), ("a.xml", 2, False), ("a.xml", 3, False),
        ("a.xml", 4, False), ("a.xml", 5, False), ("b.xml", 0, True), ("b.xml", 1, False)]
    reasons = [r["error"] for r in rows if r["error"]]
    assert reasons[0] == "XML line 4: Door.open: 3 is outside the domain int[0,1]"
    assert reasons[1] == "XML line 5: Door: attribute 'floor' is given twice"
    assert reasons[2] == "XML line 6: Temp.room: 'x' is not a number (domain int[1,20])"
    assert reasons[3].startswith("XML line 7: Temp: element <name> has child elements")
    assert reasons[4] == "XML line 8: Door event lacks attribute(s) floor"
    assert rows[1]["text"] == '<Door xmlns:b="urn:b" open="3" floor="0"/>'
    assert "not well-formed XML" in reasons[5] and rows[-1]["column"] == 59
    assert rows[0]["text"] == '{"type": "Door", "open": 1, "floor": 0}'


def test_bench_results_plot(tmp_path: Path) -> None:
    from siftbus.spark.analysis import plot_bench

    results = tmp_path / "spark.json"
    results.write_text(json.dumps({"match_stage": [
        {"profiles": 1000, "formulation": "index (mapInArrow)", "events_per_s": 150000.0},
        {"profiles": 10000, "formulation": "index (mapInArrow)", "events_per_s": 130000.0},
        {"profiles": 1000, "formulation": "naive cross join", "events_per_s": 1000.0},
    ]}))
    png = Path(plot_bench(results, tmp_path / "spark.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stream_activity_counts_idle_time_only_without_a_batch_or_new_input() -> None:
    from siftbus.spark.pipeline import StreamActivity

    now = [0.0]
    act = StreamActivity(clock=lambda: now[0])
    waiting = {"message": "Waiting for data to arrive", "isDataAvailable": False}
    listing = {"message": "Getting offsets from FileStreamSource[x]", "isDataAvailable": False}
    assert act.idle_seconds({"message": "Initializing sources", "isDataAvailable": False}) == 0
    now[0] = 50.0  # a slow start-up does not count as idle
    assert act.idle_seconds(waiting) == 0.0
    now[0] = 52.0
    assert act.idle_seconds(listing) == 2.0
    act.batch_started()  # batch 0: long, whatever Spark's status says
    for t in (60.0, 200.0):
        now[0] = t
        assert act.idle_seconds(waiting) == 0.0
    act.batch_finished()
    now[0] = 201.0
    # The batch is done but Spark has not yet looked for more input since.
    assert act.idle_seconds({"message": "Waiting for next trigger",
                             "isDataAvailable": True}) == 0.0
    now[0] = 202.0
    assert act.idle_seconds(waiting) == 0.0
    now[0] = 205.5
    assert act.idle_seconds(waiting) == 3.5
    assert act.batches == 1


def _raw_batch(lines: list[bytes]) -> pa.RecordBatch:
    """Lines as Spark's text source hands them over: a string column whose bytes nobody
    checked (``view`` skips Arrow's UTF-8 validation, as the JVM side does)."""
    return pa.RecordBatch.from_arrays([
        pa.array(["f.jsonl"] * len(lines), pa.string()),
        pa.array(range(1, len(lines) + 1), pa.int64()),
        pa.array(lines, pa.binary()).view(pa.string()),
    ], names=["source", "line", "text"])


_HOSTILE_LINES = [
    b"[" * 100_000, b"{" * 5000, b"1" * 5000,
    b'{"type": "Door", "open": ' + b"9" * 5000 + b', "floor": 1}',
    b'{"type": "Door", "open": 1e999999999999, "floor": 1}',
    b'{"type": "\\ud800"}', b'{"\\udc00": 1}', b"\xef\xbb\xbf{}",
    b'{"type": "Temp", "room": 1, "value": 2, "level": "LOW", "name": "\\ud800"}',
]
_HOSTILE = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(_HOSTILE_LINES),
    st.builds(lambda d: json.dumps(d).encode(), event_dicts()),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_HOSTILE, max_size=8))
def test_parse_stage_turns_any_bytes_into_good_rows_or_dead_letters(lines: list[bytes]) -> None:
    out = parse_text_batch(_raw_batch(lines), SCHEMA_TOML).to_pylist()
    kept = [i for i, b in enumerate(lines) if b.decode("utf-8", "replace").strip()]
    assert [r["line"] for r in out] == [i + 1 for i in kept]  # a row per non-blank line
    assert [r["event"] for r in out] == list(range(len(kept)))
    for r in out:
        assert (r["error"] is None) == (r["ikeys"] is not None)
        if r["error"] is not None:
            assert r["error"] and len(r["error"]) < 2000


def test_spark_layer_imports_no_cli_and_reads_the_store_through_the_broker() -> None:
    # cli imports spark, never the reverse (also not inside functions); the broker's store
    # module owns the SQLite table, so the spark layer has no SQL of its own.
    import ast

    import siftbus.spark

    found: list[tuple[str, str]] = []
    for path in sorted(Path(siftbus.spark.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [(path.name, n) for n in names
                      if n == "siftbus.cli" or n.startswith("siftbus.cli.") or n == "sqlite3"]
    assert found == []


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_HOSTILE.map(lambda b: b.replace(b"\r", b" ").replace(b"\n", b" ")),
                      max_size=8),
       max_line=st.sampled_from([30, 200, 1 << 20]))
def test_parse_stage_reads_lines_as_read_events_does(lines: list[bytes], max_line: int) -> None:
    # The same bytes and limits through the one reader (what `siftbus check` and `match`
    # use) and through the parse stage (given the lines as Spark's text reader splits
    # them, a leading BOM already gone): the same events and the same errors, in place.
    import io

    from siftbus.errors import SiftbusError
    from siftbus.model import read_events
    from siftbus.model.textio import TextLimits

    limits = TextLimits(max_line_bytes=max_line)
    errors: list[SiftbusError] = []
    good = list(read_events(io.BytesIO(b"\n".join(lines)), SCHEMA, source="f.jsonl",
                            limits=limits, on_error=errors.append))
    split = list(lines)
    if split and split[0].startswith(b"\xef\xbb\xbf"):
        split[0] = split[0][3:]
    out = parse_text_batch(_raw_batch(split), SCHEMA_TOML, limits).to_pylist()
    assert [(r["line"], r["column"], r["error"]) for r in out if r["error"] is not None] == [
        (e.line, e.column, e.message) for e in errors]
    assert [(r["type"], r["ikeys"], r["skeys"]) for r in out if r["error"] is None] == [
        (ev.etype.name, *TypeLayout.of(ev.etype).split(ev.keys)) for ev in good]


def _numbered_batch(lines: list[bytes], sources: list[str], befores: list[int]
                    ) -> pa.RecordBatch:
    """Rows ``(source, line, events_before, text)`` as ``sources.number_lines`` makes them:
    lines count from 1 within each (source, events_before) part, in order."""
    counts: dict[tuple[str, int], int] = {}
    nums = []
    for s, b in zip(sources, befores, strict=True):
        counts[(s, b)] = counts.get((s, b), 0) + 1
        nums.append(counts[(s, b)] + b)  # a part's lines follow the previous parts'
    return pa.RecordBatch.from_arrays([
        pa.array(sources, pa.string()), pa.array(nums, pa.int64()),
        pa.array(befores, pa.int64()), pa.array(lines, pa.binary()).view(pa.string()),
    ], names=["source", "line", "events_before", "text"])


_GOOD = st.builds(lambda d: json.dumps(d).encode(), event_dicts())


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.one_of(_GOOD, _GOOD, _HOSTILE, st.just(b"")),
                               st.sampled_from(["a.jsonl", "b.jsonl"]),
                               st.sampled_from([0, 100])), max_size=30),
       max_line=st.sampled_from([60, 1 << 20]), cut=st.integers(0, 30))
def test_parse_stage_columns_from_the_scanner_equal_the_row_path(
        rows: list[tuple[bytes, str, int]], max_line: int, cut: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The rows the compiled scanner is sure of are built as columns; every other row goes
    # through parse_event. With the scanner and without it (every row through
    # parse_event), the same batches, in the same order, with the same numbering carried
    # from one batch of a partition to the next (``counted``).
    import siftbus.spark.parse as stage
    from siftbus.match import kernel
    from siftbus.model.textio import TextLimits

    limits = TextLimits(max_line_bytes=max_line)
    rows = sorted(rows, key=lambda r: (r[1], r[2]))  # a part's rows arrive in order
    full = _numbered_batch([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    parts = [full.slice(0, cut), full.slice(cut)]
    kernel.use("numba")
    try:
        counted: dict[tuple[str | None, int], tuple[int, int]] = {}
        fast = [parse_text_batch(b, SCHEMA_TOML, limits, counted) for b in parts]
        with monkeypatch.context() as m:
            m.setattr(stage, "scan_text_columns", lambda *a, **k: None)
            counted = {}
            slow = [parse_text_batch(b, SCHEMA_TOML, limits, counted) for b in parts]
    finally:
        kernel.use()
    for f, s in zip(fast, slow, strict=True):
        assert f.schema == s.schema == PARSED_SCHEMA
        assert f.to_pylist() == s.to_pylist()


def test_the_parse_stage_builds_the_scanners_rows_as_columns() -> None:
    """Both kinds of row in one batch, interleaved: good lines the scanner takes (with a
    string attribute and both types), and lines it leaves to parse_event."""
    from siftbus.match import kernel
    from siftbus.match.ingest import scan_text_columns

    lines = [b'{"type": "Temp", "room": 3, "value": 21.55, "level": "MID", "name": "ab"}',
             b"", b'{"type": "Door", "open": 1, "floor": 0}', b"not json",
             b'{"type": "Temp", "room": 4, "value": -1, "level": "LOW", "name": "\\u00e9"}',
             b'{"type": "Door", "open": 0, "floor": 8}']
    kernel.use("numba")
    try:
        scanned = scan_text_columns(lines, SCHEMA)
        rows = parse_text_batch(_raw_batch(lines), SCHEMA_TOML).to_pylist()
    finally:
        kernel.use()
    assert scanned is not None and scanned.rows.tolist() == [0, 2, 5]
    assert [(r["event"], r["line"], r["type"], r["ikeys"], r["skeys"], r["error"] is None)
            for r in rows] == [
        (0, 1, "Temp", [3, 216, 1], ["ab"], True), (1, 3, "Door", [1, 0], [], True),
        (2, 4, None, None, None, False), (3, 5, "Temp", [4, -10, 0], ["\u00e9"], True),
        (4, 6, "Door", [0, 8], [], True)]
    assert rows[0]["text"] == lines[0].decode()


@pytest.mark.skipif(not index_available(), reason="indexed engine not installed")
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_subscription_set_loads_a_file_in_bulk_then_follows_its_changes(
        data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    # A profile file's first load goes into the matcher as columns (no Profile per line);
    # the later refreshes apply adds, removes and replacements: at every step the plan
    # matches as the reference matcher does and the set holds the file's profiles.
    import os

    from siftbus.lang.profile import format_profile
    from siftbus.match import kernel
    from siftbus.spark.subscriptions import ProfileFile, SubscriptionSet

    path = tmp_path_factory.mktemp("subs") / "p.txt"
    events = events_of(data.draw(st.lists(event_dicts(), min_size=1, max_size=30)), SCHEMA)
    kernel.use("numba")  # the scanners, whatever the file's size
    try:
        subs = None
        before: list[Profile] = []
        for step in range(3):
            profiles = data.draw(profile_sets(SCHEMA, max_size=30))
            owned = [p.with_id(p.id, data.draw(st.sampled_from(["", "s1", "s2"])) or None)
                     for p in profiles]
            path.write_text("".join(format_profile(p) + "\n" for p in owned))
            os.utime(path, ns=(step * 10**9, step * 10**9))  # a new fingerprint each step
            if subs is None:
                subs = SubscriptionSet(SCHEMA, ProfileFile(path), engine="index")
                version = 1
            else:
                changed = subs.refresh()
                now = sorted(owned, key=lambda p: p.id)
                assert changed == (now != sorted(before, key=lambda p: p.id))
                version += changed
            before = owned
            assert len(subs) == len(owned) and subs.version == version
            assert sorted(subs.profiles, key=lambda p: p.id) == sorted(owned,
                                                                       key=lambda p: p.id)
            ref = add_all(ReferenceMatcher(), owned)
            assert plan_matches(subs.plan(), events) == ref.match_batch(events)
    finally:
        kernel.use()


def test_cloudevents_lines_parse_as_their_events() -> None:
    """The parse stage reads structured CloudEvents lines (docs/cloudevents.md) into the
    same rows as the plain event lines they carry; a bad one is a dead letter."""
    plain = ['{"type": "Temp", "room": 3, "value": 21.55, "level": "MID", "name": "ab"}',
             '{"type": "Door", "open": 1, "floor": 0}']
    ce = ['{"specversion": "1.0", "type": "org.example.Temp", "source": "/s", "id": "1", '
          '"data": {"room": 3, "value": 21.55, "level": "MID", "name": "ab"}}',
          '{"specversion": "1.0", "type": "Door", "source": "/s", "id": "2", '
          '"datacontenttype": "application/json", "data": {"open": 1, "floor": 0}}',
          '{"specversion": "1.0", "type": "Door", "source": "/s", "id": "3", "data": {}}']
    keep = ("event", "type", "ikeys", "skeys", "error")
    want = [{k: r[k] for k in keep} for r in parse_lines(plain, SCHEMA_TOML).to_pylist()]
    rows = parse_lines(ce, SCHEMA_TOML, source="ce.jsonl").to_pylist()
    assert [{k: r[k] for k in keep} for r in rows[:2]] == want
    assert "lacks attribute(s) open, floor" in rows[2]["error"] and rows[2]["line"] == 3
