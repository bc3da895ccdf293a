"""Hypothesis strategies for the Spark tests: profiles and events over SCHEMA_TOML."""

from __future__ import annotations

import json
from decimal import Decimal

from hypothesis import strategies as st

from siftbus.errors import ProfileError
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, Profile, Schema, event_from_dict

NAMES = ["", "a", "ab", "abc", "b", "ba", "xbc"]
LEVELS = ["LOW", "MID", "HIGH"]


def _room_cond(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "range", "set"]))
    a = draw(st.integers(1, 20))
    if op == "range":
        b = draw(st.integers(a, 20))
        return f"room in [{a}, {b}]"
    if op == "set":
        vals = draw(st.lists(st.integers(1, 20), min_size=1, max_size=4, unique=True))
        return "room in {" + ", ".join(map(str, vals)) + "}"
    return f"room {op} {a}"


def _value_cond(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "range"]))
    a = Decimal(draw(st.integers(-400, 600))) / 10
    if op == "range":
        b = Decimal(draw(st.integers(int(a * 10), 600))) / 10
        return f"value in [{a:.1f}, {b:.1f}]"
    return f"value {op} {a:.1f}"


def _level_cond(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["=", "!=", "<", ">=", "set"]))
    if op == "set":
        vals = draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=2, unique=True))
        return "level in {" + ", ".join(vals) + "}"
    return f"level {op} {draw(st.sampled_from(LEVELS))}"


def _name_cond(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["=", "!=", "prefix", "set"]))
    if op == "set":
        vals = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
        return "name in {" + ", ".join(json.dumps(v) for v in vals) + "}"
    return f"name {op} {json.dumps(draw(st.sampled_from(NAMES)))}"


@st.composite
def profile_lines(draw: st.DrawFn, pid: str) -> str:
    """One profile line with a random subset of conditions on Temp or Door."""
    sub = draw(st.sampled_from(["", "@alice", "@bob", "@carol"]))
    if draw(st.integers(0, 4)) == 0:
        conds = []
        if draw(st.booleans()):
            conds.append(f"open = {draw(st.integers(0, 1))}")
        if draw(st.booleans()):
            conds.append(f"floor >= {draw(st.integers(-1, 8))}")
        return f"{pid}{sub}: Door({', '.join(conds)})"
    makers = [_room_cond, _value_cond, _level_cond, _name_cond]
    chosen = draw(st.lists(st.sampled_from(range(4)), max_size=4, unique=True))
    conds = [makers[i](draw) for i in sorted(chosen)]
    return f"{pid}{sub}: Temp({', '.join(conds)})"


@st.composite
def profile_sets(draw: st.DrawFn, schema: Schema, max_size: int = 25) -> list[Profile]:
    """Satisfiable profiles with unique ids (ids chosen so code-point order matters)."""
    n = draw(st.integers(0, max_size))
    out: list[Profile] = []
    for i in range(n):
        pid = draw(st.sampled_from(["p", "P", "q", "p-", "z"])) + str(i)
        try:
            out.append(parse_profile(draw(profile_lines(pid)), schema))
        except ProfileError:
            continue  # e.g. an empty intersection: not a profile anyone can register
    return out


@st.composite
def event_dicts(draw: st.DrawFn) -> dict[str, object]:
    if draw(st.integers(0, 3)) == 0:
        return {"type": "Door", "open": draw(st.integers(0, 1)),
                "floor": draw(st.integers(-1, 8))}
    return {"type": "Temp", "room": draw(st.integers(1, 20)),
            "value": float(Decimal(draw(st.integers(-400, 600))) / 10),
            "level": draw(st.sampled_from(LEVELS)), "name": draw(st.sampled_from(NAMES))}


def events_of(dicts: list[dict[str, object]], schema: Schema) -> list[Event]:
    return [event_from_dict({k: (Decimal(repr(v)) if isinstance(v, float) else v)
                             for k, v in d.items()}, schema) for d in dicts]
