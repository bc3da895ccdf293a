"""Domains: keys, boundaries, decimal rounding, enum order, type specs."""

from decimal import Decimal

import pytest

from siftbus.errors import DomainError, SchemaError
from siftbus.model import DecimalDomain, EnumDomain, IntDomain, StringDomain, parse_domain


def test_int_domain_bounds_are_inclusive() -> None:
    d = IntDomain(-40, 60)
    assert d.key(-40) == -40 and d.key(60) == 60
    for bad in (-41, 61):
        with pytest.raises(DomainError, match="outside the domain int"):
            d.key(bad)


def test_int_domain_rejects_non_integers() -> None:
    d = IntDomain(0, 9)
    assert d.key(Decimal("3.0")) == 3
    for bad in (True, "3", 3.5, None):
        with pytest.raises(DomainError):
            d.key(bad)


def test_decimal_rounds_half_up_to_its_places() -> None:
    d = DecimalDomain(Decimal(-40), Decimal(60), 1)
    assert d.key(Decimal("21.55")) == 216
    assert d.key(Decimal("21.54")) == 215
    assert d.key(Decimal("-21.55")) == -216  # half away from zero
    assert d.key(1.95) == 20  # a float goes through its shortest repr, not binary noise
    assert d.key(60) == 600 and d.key(-40) == -400
    assert d.value(216) == Decimal("21.6")
    assert d.literal(200) == "20.0"


def test_decimal_rounding_can_bring_a_value_into_or_out_of_the_domain() -> None:
    d = DecimalDomain(Decimal(-40), Decimal(60), 1)
    assert d.key(Decimal("60.04")) == 600
    with pytest.raises(DomainError):
        d.key(Decimal("60.05"))
    with pytest.raises(DomainError):
        d.key(float("nan"))


def test_decimal_with_zero_places_prints_a_point() -> None:
    d = DecimalDomain(Decimal(0), Decimal(10), 0)
    assert d.literal(3) == "3.0"
    assert d.key(Decimal("2.5")) == 3


def test_enum_keys_follow_declared_order() -> None:
    d = EnumDomain(("OK", "DEGRADED", "FAILED"))
    assert [d.key(x) for x in ("OK", "DEGRADED", "FAILED")] == [0, 1, 2]
    assert d.value(2) == "FAILED"
    with pytest.raises(DomainError, match="not one of"):
        d.key("BROKEN")


def test_string_domain_is_unordered() -> None:
    d = StringDomain()
    assert not d.ordered and d.key("x") == "x"
    with pytest.raises(DomainError):
        d.key(3)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("int[1,400]", IntDomain(1, 400)),
        (" int[ -5 , 5 ] ", IntDomain(-5, 5)),
        ("decimal[-40,60,1]", DecimalDomain(Decimal(-40), Decimal(60), 1)),
        ("decimal[-0.5,0.5,2]", DecimalDomain(Decimal("-0.5"), Decimal("0.5"), 2)),
        ("enum[OK,DEGRADED,FAILED]", EnumDomain(("OK", "DEGRADED", "FAILED"))),
        ("string", StringDomain()),
    ],
)
def test_parse_domain(spec: str, expected: object) -> None:
    assert parse_domain(spec) == expected
    assert parse_domain(expected.spec) == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "spec",
    ["int[5,1]", "int[1]", "floats", "array<float", "decimal[0,1]", "decimal[0,1,20]",
     "decimal[0.05,1,1]", "enum[]", "enum[A,A]", "enum[A,1B]", "enum[in,B]", "str", ""],
)
def test_bad_domain_specs_are_schema_errors(spec: str) -> None:
    with pytest.raises(SchemaError):
        parse_domain(spec)


def test_min_and_max_are_enum_labels_like_any_other() -> None:
    d = parse_domain("enum[LOW,MID,HIGH,MAX]")
    assert isinstance(d, EnumDomain) and d.key("MAX") == 3 and d.value(0) == "LOW"
    assert parse_domain("enum[MIN,MAX]").spec == "enum[MIN,MAX]"
    for reserved in ("in", "prefix", "exists", "TYPE", "type"):  # still not labels
        with pytest.raises(SchemaError):
            parse_domain(f"enum[A,{reserved}]")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("NaN"), Decimal("sNaN"),
                                   Decimal("-Infinity"), Decimal("1e999999999"),
                                   Decimal("-1e999999999")])
def test_non_finite_and_huge_values_are_domain_errors_at_once(value: object) -> None:
    # int(Decimal("1e999999999")) would build a billion-digit number (minutes, GBs)
    for domain in (IntDomain(0, 9), DecimalDomain(Decimal(0), Decimal(9), 1)):
        with pytest.raises(DomainError) as info:
            domain.key(value)
        assert len(str(info.value)) < 100


@pytest.mark.parametrize("spec", ["int[0," + "9" * 5000 + "]", "int[-" + "9" * 41 + ",0]",
                                  "decimal[0," + "1" * 30 + ",1]"])
def test_numbers_in_a_spec_are_bounded(spec: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_domain(spec)
    assert len(str(info.value)) < 200


def test_messages_quote_a_short_excerpt_of_huge_values() -> None:
    d = parse_domain("enum[A,B]")
    with pytest.raises(DomainError) as info:
        d.key("x" * 10_000_000)
    assert len(str(info.value)) < 150 and "10000002 characters" in str(info.value)
