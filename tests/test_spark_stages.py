"""The pure parts of the pipeline (no JVM): parsing to keys, the match kernel, sorting."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.match import ReferenceMatcher, add_all
from siftbus.model import parse_schema
from siftbus.spark.match_stage import build_plan, index_available, match_batch, plan_matches
from siftbus.spark.parse import (
    PARSED_SCHEMA,
    TypeLayout,
    layouts_for,
    parse_lines,
    validate_keyed_batch,
)
from spark_fixtures import SCHEMA_TOML
from spark_strategies import event_dicts, events_of, profile_sets

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
    assert [r["event"] for r in rows] == [0, 2, 3, 4, 5, 6]
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
    from siftbus.match.index import GROUPED_MIN

    profiles = data.draw(profile_sets(SCHEMA, max_size=60))
    distinct = data.draw(st.lists(event_dicts(), min_size=1, max_size=40))
    rnd = data.draw(st.randoms(use_true_random=False))
    dicts = [rnd.choice(distinct) for _ in range(3 * GROUPED_MIN)]
    events = events_of(dicts, SCHEMA)
    ref = add_all(ReferenceMatcher(), profiles)
    plan = build_plan(SCHEMA, profiles, engine="index")
    got = plan_matches(plan, events)
    assert got == ref.match_batch(events)
    assert all(row == sorted(row) for row in got)
