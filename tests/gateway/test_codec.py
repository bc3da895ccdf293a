"""The gateway's batch JSON paths (``gateway.codec``) against the exact, per-event ones,
with hypothesis: publish bodies read by the fast path give the same events and the same
refusals (line, column, message) as the event-file reader line by line; notifications
built per block and column equal ``Event.to_json_dict``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.gateway import GatewayLimits
from siftbus.gateway.codec import block_events, dumps
from siftbus.gateway.publish import parse_publish_body
from siftbus.gateway.streams import Outbox
from siftbus.model import Event, Schema, event_from_dict, parse_event
from siftbus.model.textio import parse_json_line
from siftbus.wire.events import Block

SCHEMA = Schema.from_dict({
    "T": {"a": "int[0,7]", "b": "enum[LO,MID,HI]", "s": "string"},
    "D": {"v": "decimal[-10,10,2]", "n": "int[-5,5]"},
})

EDGES = [-6, -5, -1, 0, 5, 6, 7, 8, 2**63, -2**63 - 1, 2**64, True, False, None, "LO",
         "HI", "lo", "", "7", 1.0, 7.5, "10.00", 9.999, 10.001, -10.005, [1], {}]
"""Values at and just beyond the test schema's domain bounds, and of other kinds."""

VALUES = st.one_of(st.sampled_from(EDGES), st.integers(-10, 12), st.integers(),
                   st.sampled_from(["LO", "MID", "HI", "lo", ""]), st.text(max_size=4),
                   st.booleans(), st.none(),
                   st.floats(allow_nan=False, allow_infinity=False, width=32),
                   st.decimals(-12, 12, places=3, allow_nan=False),
                   st.lists(st.integers(0, 3), max_size=2))
KEYS = st.sampled_from(["type", "a", "b", "s", "v", "n", "x", 'q"', "\\"])


@st.composite
def objects(draw: st.DrawFn) -> str:
    """An event line: mostly valid, often subtly not (keys, values, repeats, spacing)."""
    t = draw(st.sampled_from(["T", "T", "D", "Q", 5]))
    attrs = {"T": ["a", "b", "s"], "D": ["v", "n"]}.get(t, ["a"]) if isinstance(t, str) \
        else ["a"]
    pairs: list[tuple[str, Any]] = [("type", t)]
    valid = {"a": st.integers(0, 7), "b": st.sampled_from(["LO", "MID", "HI"]),
             "s": st.text(max_size=6), "v": st.decimals(-10, 10, places=2, allow_nan=False),
             "n": st.integers(-5, 5)}
    for name in attrs:
        if draw(st.integers(0, 9)) == 9:
            continue  # missing
        pairs.append((name, draw(valid[name] if draw(st.integers(0, 5)) else VALUES)))
    if draw(st.integers(0, 5)) == 5:  # an extra or a repeated key
        key = draw(KEYS)
        pairs.append((key, draw(valid.get(key, VALUES) if draw(st.booleans()) else VALUES)))
    pairs = draw(st.permutations(pairs))
    sep = draw(st.sampled_from([", ", ",", " , "]))
    colon = draw(st.sampled_from([": ", ":"]))

    def enc(v: Any) -> str:
        return str(v) if isinstance(v, Decimal) else json.dumps(v)
    return "{" + sep.join(f"{json.dumps(k)}{colon}{enc(v)}" for k, v in pairs) + "}"


LINES = st.one_of(objects(), objects(), st.text(max_size=12),
                  st.sampled_from(["{", "[]", "null", "  ", '{"type": "T"} {}', "1",
                                   '{"type": "T", "a": 1, "b": "LO", "s": "\\u00e9"}']))


def located(exc: SiftbusError) -> tuple[int | None, int | None, str]:
    return (exc.line, exc.column, exc.message)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=25))
def test_json_lines_give_what_the_event_reader_gives_line_by_line(lines: list[str]) -> None:
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines)
    expected: list[Event] = []
    refused: list[tuple[int | None, int | None, str]] = []
    for i, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        try:
            expected.append(parse_event(ln, SCHEMA, source="body", lineno=i))
        except SiftbusError as exc:
            refused.append(located(exc))
    got = parse_publish_body(text, "application/x-ndjson", SCHEMA, GatewayLimits())
    assert list(got.events) == expected
    assert [(e.line, e.column, e.message) for e in got.errors] == refused


def test_values_at_the_domain_bounds_are_read_as_the_event_reader_reads_them() -> None:
    base = {"T": {"type": "T", "a": 3, "b": "MID", "s": "x"},
            "D": {"type": "D", "v": 1.25, "n": 0}}
    lines = []
    for obj in base.values():
        for attr in obj:
            lines += [json.dumps({**obj, attr: v}) for v in EDGES]
    text = "\n".join(lines)
    expected, refused = [], []
    for i, ln in enumerate(lines, 1):
        try:
            expected.append(parse_event(ln, SCHEMA))
        except SiftbusError as exc:
            refused.append((i, exc.message))
    got = parse_publish_body(text, "application/x-ndjson", SCHEMA,
                             GatewayLimits(max_errors=1000))
    assert list(got.events) == expected
    assert [(e.line, e.message) for e in got.errors] == refused
    assert 20 < len(expected) < len(lines) - 20  # both kinds, many of each
    array = parse_publish_body("[" + ",".join(lines) + "]", "application/json", SCHEMA,
                               GatewayLimits(max_errors=1000))
    assert array.events == got.events
    assert [(e.line, e.message) for e in array.errors] == refused


@settings(max_examples=200, deadline=None)
@given(st.lists(objects(), max_size=25))
def test_a_json_array_gives_what_event_from_dict_gives_item_by_item(items: list[str]
                                                                     ) -> None:
    text = "[" + ",".join(items) + "]"
    try:
        data = parse_json_line(text, decimals=True, unique_keys=True)
    except SiftbusError:
        data = None
    if data is None:  # a repeated key: the whole body is refused, by both paths
        try:
            parse_publish_body(text, "application/json", SCHEMA, GatewayLimits())
        except SiftbusError:
            return
        raise AssertionError("a body the exact reader refuses was read")
    expected: list[Event] = []
    refused: list[tuple[int, str]] = []
    for i, item in enumerate(data, 1):
        try:
            expected.append(event_from_dict(item, SCHEMA))
        except SiftbusError as exc:
            refused.append((i, exc.message))
    got = parse_publish_body(text, "application/json", SCHEMA, GatewayLimits())
    assert list(got.events) == expected
    assert [(e.line, e.message) for e in got.errors] == refused


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["LO", "MID", "HI"]),
                          st.text(max_size=5)), min_size=1, max_size=20),
       st.lists(st.tuples(st.decimals(-10, 10, places=2, allow_nan=False),
                          st.integers(-5, 5)), min_size=1, max_size=20))
def test_block_events_equal_each_events_json(ts: list[tuple[int, str, str]],
                                             ds: list[tuple[Decimal, int]]) -> None:
    for evs in ([event_from_dict({"type": "T", "a": a, "b": b, "s": s}, SCHEMA)
                 for a, b, s in ts],
                [event_from_dict({"type": "D", "v": v, "n": n}, SCHEMA) for v, n in ds]):
        n = len(evs)
        block = Block.of_events(evs, "B1/c1", np.arange(n, dtype=np.int64),
                                np.zeros(n, np.float64))
        got = block_events(block)
        assert got == [e.to_json_dict() for e in evs]
        assert json.loads(dumps(got)) == json.loads(json.dumps(got))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3000), max_size=60), st.integers(1, 20),
       st.integers(200, 5000))
def test_an_outbox_hands_out_everything_in_order_within_its_bounds(
        sizes: list[int], limit: int, max_bytes: int) -> None:
    """Messages taken as JSON arrays: in order, none lost or twice, each array within
    ``limit`` items and ``max_bytes`` (unless one item alone is longer); what overflows
    ``queue_size`` is dropped and counted."""
    ob = Outbox("w1", 40, None)  # type: ignore[arg-type]  # no broker needed
    msgs = [{"i": i, "pad": "x" * k} for i, k in enumerate(sizes)]
    assert ob.offer(msgs) == min(40, len(msgs))
    assert ob.dropped == max(0, len(msgs) - 40)
    out: list[dict[str, Any]] = []
    while (array := ob.take_encoded(limit, max_bytes)) is not None:
        part = json.loads(array)
        assert 1 <= len(part) <= limit
        assert len(array) <= max_bytes or len(part) == 1
        out += part
    assert out == msgs[:40] and ob.queued == 0 and not ob.ready.is_set()
