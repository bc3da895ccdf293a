"""Schema files and events: loading, validation and located errors."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import DomainError, EventError, SchemaError, SiftbusError
from siftbus.model import Event, Schema, load_schema, parse_event, parse_schema, read_events
from strategies import event_types, events

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


# --- hostile schemas and events --------------------------------------------------------

def test_a_valid_schema_looks_up_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # Looking up each key's line (tomllib keeps none) made 10,000 types take 15 s and more:
    # lines are found only for an error.
    import siftbus.model.schema as schema_module

    def no_lookup(*args: object) -> None:
        raise AssertionError("line lookup on the success path")

    monkeypatch.setattr(schema_module, "_find_line", no_lookup)
    text = "".join(f'[T{i}]\na = "int[0,9]"\nb = "enum[X,MAX]"\n' for i in range(10_000))
    assert len(parse_schema(text)) == 10_000


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("[T]\na = " + "[" * 100_000, 2, "nested deeper than 32"),
    ("[T]\na = " + "{b = " * 100_000, 2, "nested deeper than 32"),
    ("[" + ".".join(["T"] * 100_000) + "]", 1, "more parts than 32"),
    ("[T]\n" + ".".join(["a"] * 100_000) + ' = "int[0,1]"', 2, "more parts than 32"),
    ('[T]\na = "int[0,' + "9" * 5000 + ']"', 2, "longer than 40 characters"),
    ("[T]\na = " + "9" * 5000, 2, "more than 4300 digits"),
    ('[T]\na = "enum[' + ",".join(["A"] * 100_000) + ']"', 2, "enum labels repeat: A"),
    ("[" + "-" * 1_000_000 + ']\na = "int[0,1]"', 1, "is not a plain identifier"),
    ("[T]\nb = \"int[0,1]\"\na = { x = 1 }", 3, "type must be a string"),
])
def test_hostile_schemas_give_one_short_located_error(text: str, line: int,
                                                      fragment: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema(text, source="s.toml")
    assert (info.value.source, info.value.line) == ("s.toml", line), str(info.value)
    assert fragment in str(info.value) and len(str(info.value)) < 500


def test_schema_files_read_by_the_one_rule(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_bytes(b'\xef\xbb\xbf[T]\ra = "int[0,1]"\r\nb = "string"\n')
    assert load_schema(p)["T"].names == ("a", "b")
    p.write_bytes(b'[T]\na = "int[0,1]"\nb = "\xff"\n')
    with pytest.raises(SchemaError) as info:
        load_schema(p)
    assert (info.value.line, info.value.column) == (3, 6) and "not UTF-8" in str(info.value)


@pytest.mark.parametrize(("line", "column", "fragment"), [
    ('{"type": "Lamp", "state": ' + "[" * 100_000, 90, "nested deeper than 64"),
    ('{"type": "Temperature", "sensor": ' + "9" * 5000 + ', "value": 1}', 35,
     "more than 1000 digits"),
    ('{"type": "Temperature", "sensor": 1e999999999, "value": 1}', 25, "outside the domain"),
    ('{"type": "Temperature", "sensor": 1, "value": NaN}', 47, "NaN is not a JSON value"),
    ('{"type": "Lamp", "state": "OK", "name": "\\ud800"}', 42, "lone UTF-16 surrogate"),
    ('{"type": "Lamp", "state": "' + "X" * 10_000_000 + '", "name": ""}', 18,
     "is not one of enum[OK,DEGRADED,FAILED]"),
    ('{"type": "' + "T" * 1_000_000 + '"}', 2, "unknown event type"),
    ('{"type": "Lamp", ' + ", ".join(f'"k{i}": 1' for i in range(100_000)) + "}", 18,
     "lacks attribute(s) state, name and has unknown attribute(s) k0, k1"),
])
def test_hostile_events_give_one_short_located_error(schema, line: str, column: int,  # type: ignore[no-untyped-def]
                                                     fragment: str) -> None:
    with pytest.raises(SiftbusError) as info:  # EventError or DomainError
        parse_event(line, schema, source="e.jsonl", lineno=2)
    err = info.value
    assert (err.source, err.line, err.column) == ("e.jsonl", 2, column), str(err)[:300]
    assert fragment in str(err) and len(str(err)) < 500, str(err)[:600]


def test_event_files_read_by_the_one_rule(schema, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "e.jsonl"
    good = b'{"type": "Temperature", "sensor": 1, "value": 2.5}'
    p.write_bytes(b"\xef\xbb\xbf" + good + b"\r" + good + b"\r\n\r\n" + good)
    assert len(list(read_events(p, schema))) == 3
    p.write_bytes(good + b"\r" + good.replace(b"2.5", b"\xff"))
    with pytest.raises(EventError) as info:
        list(read_events(p, schema))
    assert (info.value.line, info.value.column) == (2, 47)
    errors: list[Exception] = []
    assert len(list(read_events(p, schema, on_error=errors.append))) == 1 and len(errors) == 1


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_events_give_an_event_or_a_siftbus_error(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=4))
    schema = Schema((etype,))
    text = data.draw(events(etype)).to_json()
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 3))
        piece = data.draw(st.sampled_from(['"', "\\", "[", "{", "}", ",", ":", "1e999999",
                                           "NaN", "-", "9" * 30, "\ud800", "\\ud800", "\x00",
                                           "null", "true", '"type"', " "]))
        text = text[:at] + piece + text[at + cut:]
    try:
        parse_event(text, schema, source="e", lineno=1)
    except SiftbusError as exc:
        assert exc.line == 1 and exc.column is not None and 1 <= exc.column <= len(text) + 1
        assert len(str(exc)) < 500


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_schemas_give_a_schema_or_a_siftbus_error(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=4))
    text = Schema((etype,)).to_toml()
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 3))
        piece = data.draw(st.sampled_from(['"', "[", "]", "{", "}", ",", "=", ".", "\n",
                                           "MIN", "MAX", "9" * 50, "\ud800", "'", "#", " ",
                                           "enum[", "int[", "decimal[", "string"]))
        text = text[:at] + piece + text[at + cut:]
    try:
        parse_schema(text, source="s")
    except SiftbusError as exc:
        assert exc.source == "s" and len(str(exc)) < 500
