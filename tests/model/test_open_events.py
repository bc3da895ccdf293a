"""Issue 31, items 1-4: open kinds, optional/nested/array attributes, the new operators and
``or`` -- what a user writes, what matches, and what is refused (with where)."""

from __future__ import annotations

import pytest

from siftbus.errors import DomainError, EventError, InputError, SchemaError
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.model import parse_event, parse_schema
from siftbus.model.kinds import float_key, key_float

SCHEMA = parse_schema("""
[Order]
id = "int"
price = "float"
paid = "bool"
at = "timestamp"
src = "optional ip"
tags = "array<string>"
note = "optional string"
name = "string"
[Order.customer]
tier = "enum[BRONZE,SILVER,GOLD]"
""")

EVENT = ('{"type": "Order", "id": 9007199254740993, "price": 19.99, "paid": true, '
         '"at": "2024-05-01T14:00:00+02:00", "src": "10.1.2.3", "tags": ["red", "Blue"], '
         '"name": "Alice Smith", "customer": {"tier": "GOLD"}, "extra": {"ignored": 1}}')

# (conditions, matches EVENT)
CASES = [
    ("id = 9007199254740993", True),  # int64 beyond a double's exact integers
    ("id = 9007199254740992", False),
    ("price < 20", True),
    ("price > 19.99", False),
    ("price >= 19.99", True),
    ("price in [19.98, 19.995]", True),
    ("paid = true", True),
    ("paid = false", False),
    ('at = "2024-05-01T12:00:00Z"', True),  # the same instant in another offset
    ('at < "2024-05-01T12:00:00.000000001Z"', True),
    ('at > "2024-05-01T12:00:00Z"', False),
    ('src cidr "10.0.0.0/8"', True),
    ('src cidr "10.2.0.0/16"', False),
    ('src not cidr "192.168.0.0/16"', True),
    ('src = "::ffff:10.1.2.3"', True),  # IPv4 inside IPv6
    ("note exists", False),  # absent: no condition holds ...
    ('note != "x"', False),
    ('note not in {"x"}', False),
    ("note not exists", True),  # ... except "not exists"
    ("src exists", True),
    ('tags = "red"', True),  # any element
    ('tags = "red", tags = "Blue"', True),  # each condition on its own element
    ('tags = "green"', False),
    ('tags not in {"red"}', True),  # some element is not "red"
    ('tags not in {"red", "Blue"}', False),
    ('tags = "blue" ignorecase', True),
    ('tags prefix "BL" ignorecase', True),
    ('tags suffix "ue"', True),
    ("customer.tier >= SILVER", True),
    ("customer.tier = BRONZE", False),
    ('name suffix "Smith"', True),
    ('name suffix "smith"', False),
    ('name suffix "SMITH" ignorecase', True),
    ('name contains "ce S"', True),
    ('name like "A*S*h"', True),
    ('name like "A*x*"', False),
    ('name like "Alice Smith"', True),
    ('name matches "[A-Z][a-z]+ [A-Z][a-z]+"', True),
    ('name matches "Alice"', False),  # whole value, as I-Regexp
    ('name not prefix "Bob"', True),
    ('name not suffix "Smith"', False),
    ('name not like "*Smith"', False),
    ('name not contains "zz"', True),
    ('name = "alice smith" ignorecase', True),
    ('name not in {"Bob", "Carol"}', True),
    ('id = 1 or name prefix "Al"', True),
    ('id = 1 or name prefix "Bo"', False),
    ('paid = false or (price < 20, tags = "red")', True),
    ('paid = true, (id = 1 or note not exists)', True),
    ('(id = 1 or id = 2), paid = true', False),
    ('price > 1, price < 100, price != 50', True),  # several conditions on one attribute
]


@pytest.mark.parametrize(("conds", "expected"), CASES)
def test_semantics_table(conds: str, expected: bool) -> None:
    event = parse_event(EVENT, SCHEMA)
    p = parse_profile(f"p: Order({conds})", SCHEMA)
    assert p.matches(event) is expected
    back = parse_profile(format_profile(p), SCHEMA)
    assert back == p and back.matches(event) is expected  # printed, read back, same


def test_event_round_trip_and_nesting() -> None:
    e = parse_event(EVENT, SCHEMA)
    assert e.to_json_dict()["customer"] == {"tier": "GOLD"}
    assert e.to_json_dict()["at"] == "2024-05-01T12:00:00Z"
    assert parse_event(e.to_json(), SCHEMA) == e


def test_arrays_of_objects_and_single_values() -> None:
    s = parse_schema('[Cart]\n"items.sku" = "array<string>"\n')
    e = parse_event('{"type": "Cart", "items": [{"sku": "a"}, {"sku": "b"}, {"n": 1}]}', s)
    assert e.keys == (("a", "b"),)
    assert parse_profile('p: Cart(items.sku = "b")', s).matches(e)
    one = parse_event('{"type": "Cart", "items": {"sku": "z"}}', s)
    assert one.keys == (("z",),)


def test_schema_spelling_round_trips() -> None:
    again = parse_schema(SCHEMA.to_toml())
    assert again == SCHEMA
    assert again["Order"].attribute("customer.tier").spec == "enum[BRONZE,SILVER,GOLD]"
    assert again["Order"].attribute("note").spec == "optional string"
    assert again["Order"].attribute("tags").spec == "array<string>"


def test_floats_order_as_doubles() -> None:
    xs = [-1e308, -2.5, -1e-300, 0.0, 5e-324, 1.0, 1.5, 1e308]
    keys = [float_key(x) for x in xs]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [key_float(k) for k in keys] == xs
    assert float_key(-0.0) == float_key(0.0)


@pytest.mark.parametrize(("line", "error", "text"), [
    ('{"type": "Order"}', EventError, "lacks attribute id"),
    (EVENT.replace('"paid": true', '"paid": 1'), DomainError, "not a boolean"),
    (EVENT.replace("2024-05-01T14", "2024-13-01T14"), DomainError, "not a valid timestamp"),
    (EVENT.replace("10.1.2.3", "10.1.2"), DomainError, "not an IP address"),
    (EVENT.replace("19.99", '"19.99"'), DomainError, "not a number"),
    (EVENT.replace('"Alice Smith"', '["Alice"]'), DomainError, "not an array"),
])
def test_bad_events_are_refused(line: str, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        parse_event(line, SCHEMA)


@pytest.mark.parametrize(("conds", "text", "column"), [
    ('name matches "(a)\\\\1"', "outside the RE2 dialect", 10),
    ('name like "a**b"', "consecutive", 10),
    ('name like "' + "*a" * 17 + '"', "at most 16", 10),
    ('price suffix "x"', "only to string attributes", 10),
    ('name cidr "10.0.0.0/8"', "cidr applies only to ip", 10),
    ('src cidr "10.0.0.0/33"', "not a CIDR block", 10),
    ("paid = 1", "not a boolean", 10),
    ('name not = "x"', "unexpected '='; expected 'exists', 'in', 'prefix', 'suffix'", 19),
    ('price < 1 ignorecase', "ignorecase", 10),
    ("nope = 1", "has no attribute", 10),
    ("(" * 18 + "id = 1" + ")" * 18, "nested deeper", None),
    (", ".join(f"(id = {i} or id = {i + 1})" for i in range(11)), "more than 1024", None),
])
def test_refused_at_subscription_with_position(conds: str, text: str,
                                               column: int | None) -> None:
    with pytest.raises(InputError, match=text) as info:
        parse_profile(f"p: Order({conds})", SCHEMA, source="p.txt")
    assert info.value.line == 1
    if column is not None:
        assert info.value.column == column


def test_check_cost_bound() -> None:
    big = ", ".join(f'(tags = "a{i}" or tags = "b{i}")' for i in range(10))
    many = ", ".join(f'name not contains "n{j}"' for j in range(8))
    with pytest.raises(InputError, match="at most 16384"):
        parse_profile(f"p: Order({big}, {many})", SCHEMA)


def test_dnf_cap_is_exactly_1024() -> None:
    ok = ", ".join(f'(tags = "a{i}" or tags = "b{i}")' for i in range(10))
    assert len(parse_profile(f"p: Order({ok})", SCHEMA).extra or ()) == 1024


@pytest.mark.parametrize(("toml", "text"), [
    ('[T]\na = "array<float"\n', "unknown type"),
    ("[T]\n" + "[T." + ".".join("abcdefgh") + "]\nx = \"int\"\n", "nested deeper"),
    ('[T]\n"a..b" = "int"\n', "not a plain identifier"),
])
def test_bad_schemas(toml: str, text: str) -> None:
    with pytest.raises(SchemaError, match=text):
        parse_schema(toml)


def test_explain_names_conditions_alternatives_and_array_values() -> None:
    from siftbus.match.explain import explain

    e = parse_event(EVENT, SCHEMA)
    x = explain(SCHEMA, 'p: Order(tags = "Blue", note not exists, name suffix "x")', e)
    assert [(r.condition, r.event_value, r.holds, r.elements) for r in x.rows] == [
        ('tags = "Blue"', '["red", "Blue"]', True, (1,)),
        ("note not exists", "(absent)", True, None),
        ('name suffix "x"', '"Alice Smith"', False, None)]
    assert not x.matches
    y = explain(SCHEMA, 'p: Order(id = 1 or name like "A*")', e)
    assert y.matches and y.summary == 'MATCH: alternative 2 of 2 holds: name like "A*"'
    z = explain(SCHEMA, 'p: Order(tags not in {"red"}, tags prefix "r" ignorecase, '
                        'customer.tier = GOLD)', e)
    assert z.summary == ('MATCH: the event meets all 3 condition(s): tags not in {"red"} (by '
                         'tags[1]); tags prefix "r" ignorecase (by tags[0]); '
                         "customer.tier = GOLD")
    w = explain(SCHEMA, 'p: Order(price > 100 or (tags like "*e*", paid = true))', e)
    assert w.summary == ('MATCH: alternative 2 of 2 holds: tags like "*e*" (by tags[0], '
                         "tags[1]); paid = true")
    assert w.to_dict()["conditions"][1] == {"condition": 'tags like "*e*"', "event_value":
                                            '["red", "Blue"]', "holds": True,
                                            "elements": [0, 1]}
    assert "elements" not in w.to_dict()["conditions"][0]
    v = explain(SCHEMA, 'p: Order(tags = "green")', e)
    assert v.rows[0].elements == () and v.summary.startswith("NO MATCH: 1 of 1")


def test_schema_infer_proposes_kinds_shapes_and_refuses_mixed_kinds() -> None:
    from siftbus.errors import EventError as Refused
    from siftbus.model.infer import infer_schema

    got = infer_schema([
        {"type": "T", "n": 3, "x": 1.5, "ok": True, "t": "2024-01-01T00:00:00Z",
         "a": {"b": "LOW"}, "tags": ["p", "q"], "ip": "::1"},
        {"type": "T", "n": 9, "x": 2, "ok": False, "t": "2024-01-02T00:00:00+01:00",
         "a": {"b": "HIGH"}, "tags": [], "note": None},
    ])
    assert got == {"T": {"n": "int[3,9]", "x": "float", "ok": "bool", "t": "timestamp",
                         "a.b": "enum[HIGH,LOW]", "tags": "optional array<enum[p,q]>",
                         "ip": "optional ip"}}
    with pytest.raises(Refused, match=r"T\.v: mixed value kinds"):
        infer_schema([{"type": "T", "v": 1}, {"type": "T", "v": "one"}])


@pytest.mark.parametrize(("text", "instant"), [
    ("1970-01-01T00:00:00Z", 0),
    ("1970-01-01T01:00:00+01:00", 0),
    ("1969-12-31T23:59:59.5Z", -500_000_000),
    ("2024-02-29T12:00:00.123456789z", 1709208000123456789),
])
def test_timestamps_are_instants(text: str, instant: int) -> None:
    from siftbus.model.kinds import TimestampDomain

    d = TimestampDomain()
    assert d.key(text) == instant
    assert d.key(d.value(instant)) == instant
