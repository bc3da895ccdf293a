"""The error tree's text: one readable line whatever the input held."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import (
    MAX_MESSAGE,
    MAX_SOURCE,
    EventError,
    RemoteError,
    SiftbusError,
    excerpt,
)


def test_a_huge_message_is_cut_once_to_its_start_and_end() -> None:
    value = "x" * 100_000_000  # the 100 MB bad value of the acceptance test
    err = EventError(f"T.a: {value!r} is not one of enum[A,B]", source="e.jsonl", line=3,
                     column=7)
    text = str(err)
    assert len(err.message) <= MAX_MESSAGE and len(text) < 600
    assert text.startswith("e.jsonl, line 3, column 7: T.a: 'xxx")
    assert text.endswith("' is not one of enum[A,B]")
    assert "(100000031 characters)" in text


def test_control_characters_are_escaped_so_an_error_is_one_line() -> None:
    err = EventError("bad \n value \r\x1b[2J\u2028\x85 end", source="a\nb.txt", line=1)
    assert str(err) == "a\\x0ab.txt, line 1: bad \\x0a value \\x0d\\x1b[2J\\u2028\\x85 end"
    assert len(str(err).splitlines()) == 1


def test_a_long_source_keeps_its_end() -> None:
    err = EventError("m", source="/very" * 1000 + "/events.jsonl")
    assert err.source is not None and len(err.source) == MAX_SOURCE
    assert err.source.startswith("…") and err.source.endswith("/events.jsonl")
    located = EventError("m").located(source="d/" * 1000 + "f")
    assert located.source is not None and len(located.source) == MAX_SOURCE


def test_excerpt_of_a_value() -> None:
    assert excerpt("short") == "short"
    cut = excerpt("a" * 1000 + "b" * 1000, 60)
    assert len(cut) <= 60 and cut.startswith("aaa") and cut.endswith("bbb")
    assert "(2000 characters)" in cut


def test_remote_errors_are_cut_too() -> None:
    assert len(str(RemoteError("y" * 10_000, kind="EventError"))) <= MAX_MESSAGE


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000), st.integers(30, 500))
def test_excerpt_is_always_one_short_line(text: str, width: int) -> None:
    out = excerpt(text, width)
    assert len(out) <= width and len(out.splitlines()) <= 1
    if len(text) <= width and text.isprintable():
        assert out == text


@pytest.mark.parametrize("cls", [SiftbusError, EventError])
def test_every_error_class_cuts(cls: type[SiftbusError]) -> None:
    assert len(str(cls("z" * 1_000_000))) == MAX_MESSAGE
