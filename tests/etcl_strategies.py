"""Hypothesis strategies for ETCL: random constraints over every operator, and events
they can be evaluated on (shared by the explain, printer and fuzz tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from siftbus.channel.event import StructuredEvent
from siftbus.lang.etcl import Struct, Union

REFS = ["$n", "$s", "$b", "$codes", "$tags", "$missing", "n", "s", "b",
        "$.filterable_data(n)", "$.header.variable_header(p)", "$domain_name",
        "$event_name", "$u._d", "$u.(1)", "$u.first", "$codes._length", "$pt.x",
        "$.remainder_of_body.k[1]", "$curtime.time", "$", "$.0.0.1"]
LITERALS = ["0", "1", "-2", "2.5", "1e3", ".5", "'a'", "''", "'it\\'s'", "TRUE", "FALSE",
            "9007199254740993"]
SEQUENCES = ["$codes", "$tags", "codes", "$s", "$missing"]
BINARY = ["==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "~", "and", "or"]
CHAINS = [" and ", " or ", " + ", " - ", " * ", " / "]


def _wrap(text: str) -> str:
    """Parenthesize a composite operand (so that every generated text parses)."""
    return text if text.replace("$", "").replace(".", "").replace("_", "").isalnum() \
        else f"({text})"


def constraints(max_leaves: int = 12) -> st.SearchStrategy[str]:
    """ETCL texts that parse (well typed or not: evaluation errors are welcome)."""
    leaves = st.sampled_from(REFS + LITERALS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINARY), inner).map(
                lambda t: f"{_wrap(t[0])} {t[1]} {_wrap(t[2])}"),
            st.tuples(st.lists(inner, min_size=2, max_size=5), st.sampled_from(CHAINS)).map(
                lambda t: t[1].join(_wrap(x) for x in t[0])),
            inner.map(lambda x: f"not {_wrap(x)}"),
            inner.map(lambda x: f"({x})"),
            st.sampled_from(REFS).map(lambda r: f"exist {r}"),
            st.sampled_from(["$u", "$d", "$n"]).map(lambda r: f"default {r}"),
            st.tuples(inner, st.sampled_from(SEQUENCES)).map(lambda t: f"{_wrap(t[0])} in {t[1]}"),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([2.5, 0.0, -0.0, float("nan"), 1e300,
                                                         2**60, "a", "", "it's", True, False,
                                                         None, [1, 2], ["a"], {"x": 1}]))


@st.composite
def events(draw: st.DrawFn) -> Any:
    """A structured event (most of the time) or an any event."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.one_of(VALUES, st.just({"a": 1, "k": [0, 2]})))
    fd: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(["n", "s", "b", "codes", "tags"]), unique=True)):
        fd[name] = draw(VALUES)
    fd["u"] = Union(1, "one", member="first", type_id="U")
    fd["d"] = Union(9, 2, member="other", is_default=True)
    fd["pt"] = Struct("Point", "IDL:Point:1.0", ("x", "y"), (draw(VALUES), 2))
    return StructuredEvent.of(draw(st.sampled_from(["d1", "Telecom", ""])), "t",
                              draw(st.sampled_from(["e", "a"])),
                              variable_header={"p": draw(VALUES)}, filterable_data=fd,
                              remainder_of_body={"k": [0, draw(VALUES)]})
