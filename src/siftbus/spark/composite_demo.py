"""The demo's composite step: the building's composite profiles over the day, on Spark.

``examples/building/composites.txt`` holds the security alarm (a glass breakage, then
motion in the same room within a minute) and the heating fault (a heater switched on and
the room not warmer within ten minutes). The day's events, with their event times (the
generator's ``t``), go through :func:`siftbus.spark.composite.composite_matches`; the same
stream in position order goes through the broker's :class:`CompositeEngine`, and the demo
says whether both found the same matches. Kept apart from ``demo.py`` (one call there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftbus.lang.composite import CompositeProfile, load_composites
from siftbus.match.composite import CompositeEngine, StampedEvent, seconds
from siftbus.model import Schema, parse_event

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

COMPOSITES_FILE = "composites.txt"


@dataclass(frozen=True, slots=True)
class DemoMatch:
    """One composite match as the demo shows it."""

    profile: str
    subscriber: str
    completed: float
    """Seconds since midnight."""
    events: tuple[tuple[str, float, str], ...]
    """(label, time, JSON text) of each component event."""


@dataclass(frozen=True, slots=True)
class CompositeDemo:
    """What the composite step found."""

    rules: tuple[CompositeProfile, ...]
    matches: tuple[DemoMatch, ...]
    engine_matches: int
    """Matches of the broker's engine on the same stream (the same ones, when agreed)."""
    agreed: bool


def _key(profile: str, completed: float, events: Any) -> tuple[Any, ...]:
    return (profile, round(completed, 6), tuple((lab, round(t, 6)) for lab, t, *_ in events))


def run_composites(day: DataFrame, schema: Schema, examples: Path,
                   source: str = "building-day.jsonl") -> CompositeDemo | None:
    """The composite profiles of ``examples`` over ``day`` (columns ``t`` in seconds and
    ``text``, the events file's lines in order ``t, text``); ``None`` without the file."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    path = examples / COMPOSITES_FILE
    if not path.is_file():
        return None
    rules = load_composites(path, schema)
    # the line of each event in the written file is its tie-breaker (position)
    # cached: numbered once for Spark's evaluation and the engine's
    lines = day.select(F.lit(source).alias("source"),
                       (F.row_number().over(Window.orderBy("t", "text")) - 1)
                       .cast("long").alias("line"), "text", "t").cache()
    try:
        return _evaluate(lines, schema, rules, source)
    finally:
        lines.unpersist()


def _evaluate(lines: DataFrame, schema: Schema, rules: list[CompositeProfile], source: str
              ) -> CompositeDemo:
    from pyspark.sql import functions as F

    from siftbus.spark.composite import composite_matches

    rows = composite_matches(lines, schema, rules, time_col="t").collect()
    found = sorted((DemoMatch(r["profile"], r["subscriber"], float(r["completed"]),
                              tuple(zip(r["labels"], r["times"], r["texts"], strict=True)))
                    for r in rows), key=lambda m: (m.completed, m.profile))
    # The broker's engine on the same stream, in position order. Only events of the
    # components' types can match a component, so only those are handed over.
    types = sorted({c.profile.etype.name for p in rules for c in p.components()})
    engine = CompositeEngine()
    for p in rules:
        engine.add(p)
    mine = (lines.where(F.get_json_object("text", "$.type").isin(types))
            .orderBy("t", "line").toLocalIterator())
    out = []
    for r in mine:
        ev = parse_event(r["text"], schema)
        out.extend(engine.offer(StampedEvent(ev, seconds(float(r["t"])), (source, r["line"]))))
    out.extend(engine.flush())
    theirs = sorted(_key(m.profile, m.completed / 1e6,
                         [(lab, e.time / 1e6) for lab, e in m.bindings]) for m in out)
    ours = sorted(_key(m.profile, m.completed, m.events) for m in found)
    return CompositeDemo(tuple(rules), tuple(found), len(out), theirs == ours)


def _clock(t: float) -> str:
    s = int(t)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def print_composites(result: CompositeDemo | None, limit: int = 8) -> None:
    """The composite step's table: every rule, its matches, the first few in full."""
    import json

    from rich.console import Console
    from rich.table import Table

    if result is None:
        return
    console = Console()
    t = Table(title="composite profiles over the day (event time, Spark batch)")
    t.add_column("rule")
    t.add_column("subscriber")
    t.add_column("matches", justify="right")
    for p in result.rules:
        n = sum(1 for m in result.matches if m.profile == p.id)
        t.add_row(p.id, p.owner, str(n))
    console.print(t)
    m = Table(title="composite matches (first ones)")
    m.add_column("completed")
    m.add_column("rule")
    m.add_column("component events")
    for x in result.matches[:limit]:
        m.add_row(_clock(x.completed), x.profile, "; ".join(
            f"{lab}@{_clock(at)} {_short(json.loads(text))}" for lab, at, text in x.events))
    console.print(m)
    verdict = "the same as Spark's" if result.agreed else "MISMATCH with Spark's"
    console.print(f"the broker's composite engine on the same stream: {result.engine_matches} "
                  f"matches, {verdict}", soft_wrap=True)


def _short(values: dict[str, Any]) -> str:
    kind = values.pop("type", "")
    return kind + "(" + ", ".join(f"{k}={v}" for k, v in values.items()) + ")"


__all__ = ["COMPOSITES_FILE", "CompositeDemo", "DemoMatch", "print_composites",
           "run_composites"]
