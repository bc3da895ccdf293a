"""Anys and their JSON form (channel.values): bounded decoding, strict tagged forms, and
the decoder fuzzed (a value or a SiftbusError, nothing else)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel.event import StructuredEvent
from siftbus.channel.values import MAX_VALUE_DEPTH, from_json_value, to_json_value
from siftbus.errors import EventError, SiftbusError
from siftbus.lang.etcl import Struct, Union, parse_constraint


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def test_tagged_forms_round_trip() -> None:
    u = Union(1, "one", member="first", type_id="U", repos_id="IDL:U:1.0")
    d = Union(9, 42, member="other", is_default=True)
    s = Struct("Point", "IDL:Point:1.0", ("x", "y"), (1, [u, d]))
    for v in [u, d, s, {"a": s}, [1, "x", None, True, 2.5], b"\x00\xff"]:
        assert from_json_value(to_json_value(v)) == v
    assert to_json_value(s) == {"@struct": {"type_id": "Point", "repos_id": "IDL:Point:1.0",
                                            "members": {"x": 1, "y": [to_json_value(u),
                                                                      to_json_value(d)]}}}


def test_depth_up_to_the_limit_and_one_beyond() -> None:
    assert from_json_value(nested(MAX_VALUE_DEPTH)) == nested(MAX_VALUE_DEPTH)
    with pytest.raises(EventError, match=f"nests deeper than {MAX_VALUE_DEPTH} levels"):
        from_json_value(nested(MAX_VALUE_DEPTH + 1))
    with pytest.raises(EventError):
        from_json_value(nested(900))  # in etcl eval this used to be a RecursionError
    assert from_json_value(nested(5), max_depth=5) == nested(5)
    with pytest.raises(EventError, match="nests deeper than 4 levels"):
        from_json_value(nested(5), max_depth=4)


def test_a_deep_value_in_an_event_is_an_event_error() -> None:
    with pytest.raises(EventError):
        StructuredEvent.from_dict({"domain_name": "d", "type_name": "t",
                                   "filterable_data": {"x": nested(900)}})


@pytest.mark.parametrize("value, message", [
    ({"@union": {"d": 1, "value": 2, "member": 5}}, "member must be a string"),
    ({"@union": {"d": 1, "default": "yes"}}, "default must be true or false"),
    ({"@union": {"d": 1, "colour": "red"}}, "unknown field(s) 'colour'"),
    ({"@struct": {"members": [1, 2]}}, "members must be an object"),
    ({"@struct": {"type_id": 7, "members": {}}}, "type_id and repos_id must be strings"),
    ({"@struct": {"members": {}, "extra": 1}}, "unknown field(s) 'extra'"),
])
def test_malformed_tagged_forms_are_event_errors(value: Any, message: str) -> None:
    with pytest.raises(EventError) as info:
        from_json_value(value)
    assert message in info.value.message


def test_event_lines_turn_every_bad_text_into_one_event_error(tmp_path: Any) -> None:
    """``etcl eval`` reads event lines by the one rule for text (siftbus.model.textio)."""
    from siftbus.cli.etcl import _lines, read_event

    bad = tmp_path / "e.jsonl"
    bad.write_bytes(b'{"any": 1}\n{"a": "x\xff"}\n')
    with pytest.raises(EventError, match=r"0xff") as info:
        list(_lines(bad))
    assert (info.value.line, info.value.column) == (2, 9)
    with pytest.raises(EventError, match="nest"):
        read_event("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EventError, match="digits"):
        read_event("1" * 5000)
    with pytest.raises(EventError) as info:
        read_event("{\"a\": }")
    assert info.value.column == 7
    assert read_event('{"any": [1, "\u00e9"]}') == [1, "é"]
    deep: Any = 1
    for _ in range(MAX_VALUE_DEPTH - 1):
        deep = [deep]
    assert read_event(json.dumps({"any": deep})) == deep



JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=5), st.sampled_from(["@union", "@struct", "d", "value",
                                                    "member", "members", "type_id"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["@union", "@struct", "d", "value", "member", "default",
                                         "members", "type_id", "repos_id", "x"]),
                        inner, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=800, deadline=None)
@given(JSON)
def test_fuzz_decoder_gives_a_value_or_a_siftbus_error(value: Any) -> None:
    try:
        decoded = from_json_value(value)
    except SiftbusError:
        return
    again = from_json_value(to_json_value(decoded))
    assert again == decoded
    # every decoded value can be filtered on
    ev = StructuredEvent.of("d", "t", filterable_data={"v": decoded})
    for text in ["$v == 1", "exist $v.d", "$v._d == 1", "$v.(1) == 2", "$v._length > 0",
                 "default $v", "1 in $v"]:
        assert parse_constraint(text).evaluate(ev) in (True, False)
        assert parse_constraint(text).explain(ev).split(":")[0] in ("true", "false", "error")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=60),
                 JSON.map(lambda v: json.dumps(v).encode()),
                 st.tuples(st.integers(0, 5000), st.sampled_from([b"[", b'{"a":'])).map(
                     lambda t: t[1] * t[0])))
def test_fuzz_text_decoder(data: bytes) -> None:
    from siftbus.cli.etcl import read_event
    from siftbus.model.textio import decode_line

    try:
        read_event(decode_line(data, kind=EventError))
    except SiftbusError as exc:
        assert len(str(exc)) < 300
