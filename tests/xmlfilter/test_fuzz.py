"""Hypothesis fuzzing of every XML decoder: the only outcomes are a value or a SiftbusError.

Inputs are random bytes and byte-level mutations (insert, delete, replace, cut) of valid
documents, which reach far deeper into the readers than random text does.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.xmlfilter import XmlEventFilter, parse_subscriptions
from siftbus.xmlfilter.operators import EpcPattern, Glob, glob_regex, lookup, normalise_values

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
SUBS = (DATA / "appendix6_subscriptions.xml").read_bytes()
MSG = (DATA / "appendix7_message.xml").read_bytes()
SMART = (DATA / "listing5_smartmeter.xml").read_bytes()

SPECIAL = [b"<", b">", b"&", b";", b"/", b'"', b"'", b"=", b"]]>", b"<!--", b"<?", b"\xff",
           b"\x00", b"&amp;", b"&#0;", b"&#x110000;", b"<!DOCTYPE r [<!ENTITY e 'x'>]>",
           b"xmlns:p='urn:p'", b"p:", b"*", b"//", b"[", b"]", b"@", b"#content"]


@st.composite
def mutated(draw: Any, base: bytes) -> bytes:
    """``base`` with a few random edits."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["insert", "delete", "replace", "cut"]))
        if op == "cut":
            del data[i:]
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 16))]
        else:
            piece = draw(st.one_of(st.sampled_from(SPECIAL), st.binary(min_size=1, max_size=8)))
            data[i : i + (len(piece) if op == "replace" else 0)] = piece
    return bytes(data)


def _filter() -> XmlEventFilter:
    f = XmlEventFilter()
    f.subscribe_xml(SUBS, default_method="cli", sender="x")
    return f


FILTER = _filter()


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), mutated(MSG), mutated(SMART)))
def test_event_messages_give_notifications_or_one_error(data: bytes) -> None:
    with contextlib.suppress(SiftbusError):
        for note in FILTER.publish(data):
            assert note.xml.startswith(b"<")


@settings(max_examples=300, deadline=None)
@given(mutated(SUBS))
def test_subscription_documents_give_subscriptions_or_one_error(data: bytes) -> None:
    f = XmlEventFilter()
    try:
        ids = f.subscribe_xml(data, default_method="cli", sender="x")
    except SiftbusError:
        assert len(f) == 0  # a document is registered all or none
        return
    assert len(f) == len(ids)
    parse_subscriptions(data, default_method="cli", sender="x")  # and reads the same again


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from(["string-match", "match-epc", "numeric-gt", "string-in-set"]),
       values=st.lists(st.text(alphabet="urn:epc:idpatgs.0123456789[]-*?eE+ ", max_size=40),
                       max_size=3))
def test_operands_give_a_condition_or_one_error(op: str, values: list[str]) -> None:
    with contextlib.suppress(SiftbusError):
        normalise_values(lookup(op), values)
    for v in values:
        with contextlib.suppress(SiftbusError):
            EpcPattern.parse(v)


@settings(max_examples=500, deadline=None)
@given(pattern=st.text(alphabet="ab*?.\\[", max_size=10), value=st.text(alphabet="ab.\\[",
                                                                         max_size=12))
def test_glob_agrees_with_its_regex_reading(pattern: str, value: str) -> None:
    assert Glob(pattern).match(value) == (glob_regex(pattern).match(value) is not None)


def test_glob_of_many_stars_is_not_exponential() -> None:
    """``************b`` against 40 characters backtracked for hours in a regex. The glob
    looks for each piece once: counted here by the calls to ``str.find``."""
    g = Glob("*" * 12 + "b")
    assert not g.match("a" * 40)
    assert g.match("a" * 39 + "b")
    assert not Glob("*a*a*a*a*a*a*a*a*a*a*b").match("a" * 10_000)
    # pieces are found left to right, once each: no piece is searched for twice
    calls: list[tuple[int, int]] = []

    class Probe(str):
        def find(self, sub: str, *args: Any) -> int:  # type: ignore[override]
            calls.append(args)
            return str.find(self, sub, *args)

        def startswith(self, *args: Any) -> bool:  # type: ignore[override]
            return str.startswith(self, *args)

        def endswith(self, *args: Any) -> bool:  # type: ignore[override]
            return str.endswith(self, *args)

    assert not Glob("*a*a*a*a*a*a*a*a*a*a*b").match(Probe("a" * 100))
    assert len(calls) <= 10
