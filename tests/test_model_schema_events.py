"""Schema files and events: loading, validation and located errors."""

import json
from pathlib import Path

import pytest

from siftbus.errors import DomainError, EventError, SchemaError
from siftbus.model import Event, load_schema, parse_event, parse_schema, read_events

SCHEMA = """
[Temperature]
sensor = "int[1,400]"
value = "decimal[-40,60,1]"

[Lamp]
state = "enum[OK,DEGRADED,FAILED]"
name = "string"
"""


@pytest.fixture
def schema():  # type: ignore[no-untyped-def]
    return parse_schema(SCHEMA, source="s.toml")


def test_schema_keeps_declaration_order(schema) -> None:  # type: ignore[no-untyped-def]
    assert schema.names == ("Temperature", "Lamp")
    assert schema["Temperature"].names == ("sensor", "value")
    assert schema["Lamp"].attribute("name").position == 1
    assert parse_schema(schema.to_toml()) == schema


def test_schema_errors_name_the_line() -> None:
    bad = SCHEMA.replace('"decimal[-40,60,1]"', '"decimal[-40,60]"')
    with pytest.raises(SchemaError) as info:
        parse_schema(bad, source="s.toml")
    assert info.value.line == 4 and info.value.source == "s.toml"
    assert "Temperature.value" in str(info.value)


def test_toml_syntax_error_has_line_and_column() -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema("[T]\na = \"int[0,1]\nb = 1\n")
    assert info.value.line == 2 and info.value.column is not None


@pytest.mark.parametrize("text", ["", "[T]\ntype = \"int[0,1]\"\n", "[T]\na = 3\n",
                                  "x = 1\n", "[1T]\na = \"int[0,1]\"\n"])
def test_bad_schemas(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_schema(text)


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read"):
        load_schema(tmp_path / "nope.toml")


def test_event_round_trip(schema) -> None:  # type: ignore[no-untyped-def]
    e = parse_event('{"type": "Temperature", "sensor": 3, "value": 21.55}', schema)
    assert e.key("value") == 216 and str(e["value"]) == "21.6"
    assert e.to_json() == '{"type": "Temperature", "sensor": 3, "value": 21.6}'
    assert parse_event(e.to_json(), schema) == e
    assert json.loads(e.to_json()) == e.to_json_dict()


@pytest.mark.parametrize(
    ("line", "error", "column", "fragment"),
    [
        ('{"type": "Temperature", "sensor": 3}', EventError, 1, "lacks attribute(s) value"),
        ('{"type": "Temperature", "sensor": 3, "value": 1, "x": 2}', EventError, 50,
         "no attribute(s) x"),
        ('{"type": "Temperature", "sensor": 3, "sensor": 4, "value": 1}', EventError, 38,
         "'sensor' is given twice"),
        ('{"type": "Temperature", "sensor": 0, "value": 1}', DomainError, 25,
         "0 is outside the domain int[1,400]"),
        ('{"type": "Temperature", "sensor": 1, "value": 60.1}', DomainError, 38, "outside"),
        ('{"type": "Lamp", "state": "BROKEN", "name": "x"}', DomainError, 18, "not one of"),
        ('{"type": "Lamp", "state": "OK", "name": 7}', DomainError, 33, "not a string"),
        ('{"type": "Heat", "sensor": 1}', EventError, 2, "unknown event type 'Heat'"),
        ('{"sensor": 1}', EventError, 1, 'no "type"'),
        ('[1, 2]', EventError, 1, "must be a JSON object"),
        ('{"type": "Lamp", "state": "OK"', EventError, 31, "invalid JSON"),
    ],
)
def test_bad_events_are_located(schema, line, error, column, fragment) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as info:
        parse_event(line, schema, source="e.jsonl", lineno=7)
    assert info.value.line == 7 and info.value.source == "e.jsonl"
    assert info.value.column == column
    assert fragment in str(info.value)


def test_read_events_skips_blank_lines_and_stops_at_the_first_bad_one(schema, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "e.jsonl"
    f.write_text('{"type": "Lamp", "state": "OK", "name": "a"}\n\n'
                 '{"type": "Lamp", "state": "KO", "name": "a"}\n')
    it = read_events(f, schema)
    assert next(it)["state"] == "OK"
    with pytest.raises(DomainError) as info:
        next(it)
    assert info.value.line == 3


def test_events_are_immutable_values(schema) -> None:  # type: ignore[no-untyped-def]
    e = Event.of(schema["Lamp"], {"state": "FAILED", "name": "hall"})
    assert e == Event.of(schema["Lamp"], {"name": "hall", "state": "FAILED"})
    assert hash(e) == hash(Event.of(schema["Lamp"], {"name": "hall", "state": "FAILED"}))
    with pytest.raises(AttributeError):
        e.keys = ()  # type: ignore[misc]
