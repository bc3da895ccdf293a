"""Composite profiles on Spark, over event time: batch and Structured Streaming.

The same automata as the broker (``siftbus.match.composite``), partitioned the way the
automaton partitions its runs: by the composite profile (equal rules of several
subscribers share one, as in the engine) and the values of its ``same`` attributes.

1. **components** (``mapInPandas``): each event line is parsed, stamped with its event
   time (the type's ``"@time"``, else the ``time`` column in seconds) and matched against
   every component profile at once (the interval index, built once per executor
   process); one row per (event, automaton) it reaches, with the mask of components it
   matched and the correlation key.
2. **automata**: batch: ``groupBy(automaton, key).applyInPandas`` sorts each group by
   position ``(time, source, line)`` and runs the automaton over it, closing every window
   at the end; streaming: ``applyInPandasWithState`` keyed the same way, state = the
   automaton and the rows the watermark has not passed yet, the watermark
   (``withWatermark(lateness)``) as the lateness bound, event-time timeouts to close
   windows of keys that get no more rows.

Output, one row per match and subscriber: ``profile, subscriber, completed`` (seconds),
and per component event (arrays, in position order) ``labels, times, sources, lines,
texts``. For the same stream and no late rows this is exactly what the broker's engine
and the reference evaluator emit (tested). The state limit applies per key here (the
broker counts it per profile).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from siftbus.errors import SiftbusError
from siftbus.lang.composite import CompositeProfile, format_composite, parse_composite
from siftbus.match.composite import (
    CompositeAutomaton,
    CompositeMatch,
    EngineLimits,
    Plan,
    StampedEvent,
    compile_plan,
    event_time,
)
from siftbus.model import Schema, parse_event, parse_schema

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

_US = 1_000_000
_END = 2**62

COMPONENT_DDL = ("automaton int, key string, time_us long, event_time timestamp, "
                 "source string, line long, text string, mask long")
OUTPUT_DDL = ("profile string, subscriber string, completed double, labels array<string>, "
              "times array<double>, sources array<string>, lines array<long>, "
              "texts array<string>")


@dataclass(frozen=True, slots=True)
class CompositeJob:
    """What the executors need (small and picklable): the schema and the profile lines."""

    schema_toml: str
    lines: tuple[str, ...]
    state_limit: int = EngineLimits().state_limit

    @classmethod
    def of(cls, schema: Schema, profiles: Sequence[CompositeProfile],
           limits: EngineLimits | None = None) -> CompositeJob:
        return cls(schema.to_toml(), tuple(format_composite(p) for p in profiles),
                   (limits or EngineLimits()).state_limit)


@dataclass(frozen=True, slots=True)
class _Group:
    """One automaton's profiles (equal rules of several subscribers) and its plan."""

    plan: Plan
    members: tuple[CompositeProfile, ...]


class _Compiled:
    """A job compiled in an executor process: groups, component matcher, positions."""

    def __init__(self, job: CompositeJob) -> None:
        from siftbus.match.index import IndexMatcher

        self.schema = parse_schema(job.schema_toml)
        profiles = [parse_composite(line, self.schema) for line in job.lines]
        by_sig: dict[str, list[CompositeProfile]] = {}
        for p in profiles:
            by_sig.setdefault(format_composite(p, with_id=False), []).append(p)
        self.groups = [_Group(compile_plan(ms[0]), tuple(ms)) for ms in by_sig.values()]
        self.matcher = IndexMatcher()
        self.components: dict[str, tuple[int, int]] = {}
        for g, group in enumerate(self.groups):
            for i, c in enumerate(group.plan.components):
                self.matcher.add(c.profile)
                self.components[c.profile.id] = (g, 1 << i)
        self.state_limit = job.state_limit


@lru_cache(maxsize=4)
def _compiled(job: CompositeJob) -> _Compiled:
    return _Compiled(job)


def component_rows(job: CompositeJob, batches: Iterable[pd.DataFrame], time_col: str | None
                   ) -> Iterator[pd.DataFrame]:
    """The ``mapInPandas`` body of stage 1 (rows that do not parse, or have no time, are
    the pipeline's dead letters and are left out here). Events that reach no automaton
    still count for the watermark: each batch gives one row ``automaton = -1`` with the
    newest time among them (not filtered out before the watermark: Spark would push
    such a filter below it)."""
    import pandas as pd

    comp = _compiled(job)
    cols = ["automaton", "key", "time_us", "event_time", "source", "line", "text", "mask"]
    for pdf in batches:
        events = []
        meta = []
        times = pdf[time_col].tolist() if time_col else [None] * len(pdf)
        for src, line, text, t in zip(pdf["source"].tolist(), pdf["line"].tolist(),
                                      pdf["text"].tolist(), times, strict=True):
            try:
                ev = parse_event(text, comp.schema)
            except SiftbusError:
                continue
            us = event_time(ev)
            if us is None:
                if t is None or t != t:  # missing, or NaN
                    continue
                us = round(float(t) * _US)
            events.append(ev)
            meta.append((us, src, int(line), text))
        out: list[tuple[Any, ...]] = []
        idle: int | None = None
        if events:
            for ev, (us, src, line, text), ids in zip(events, meta,
                                                      comp.matcher.match_batch(events),
                                                      strict=True):
                masks: dict[int, int] = {}
                for cid in ids:
                    g, bit = comp.components[cid]
                    masks[g] = masks.get(g, 0) | bit
                if not masks:
                    idle = us if idle is None else max(idle, us)
                    continue
                stamp = pd.Timestamp(us, unit="us")
                for g, mask in masks.items():
                    pos = comp.groups[g].plan.same[ev.etype.name]
                    key = json.dumps([ev.keys[i] for i in pos])
                    out.append((g, key, us, stamp, src, line, text, mask))
        if idle is not None:
            out.append((-1, "", idle, pd.Timestamp(idle, unit="us"), "", 0, "", 0))
        yield pd.DataFrame(out, columns=cols).astype({"automaton": "int32", "mask": "int64",
                                                      "time_us": "int64", "line": "int64"})


def _stamped(comp: _Compiled, row: Any) -> StampedEvent:
    return StampedEvent(parse_event(row.text, comp.schema), int(row.time_us),
                        (str(row.source), int(row.line)))


def _rows_of(comp: _Compiled, group: int, found: list[CompositeMatch]
             ) -> list[tuple[Any, ...]]:
    out = []
    for m in found:
        labels = [lab for lab, _ in m.bindings]
        times = [e.time / _US for _, e in m.bindings]
        sources = [str(e.order[0]) for _, e in m.bindings]
        lines = [int(e.order[1]) for _, e in m.bindings]
        texts = [e.event.to_json() for _, e in m.bindings]
        for p in comp.groups[group].members:
            out.append((p.id, p.owner, m.completed / _US, labels, times, sources, lines,
                        texts))
    return out


_OUT_COLS = ["profile", "subscriber", "completed", "labels", "times", "sources", "lines",
             "texts"]


def run_group(job: CompositeJob, pdf: pd.DataFrame) -> pd.DataFrame:
    """The batch ``applyInPandas`` body: one automaton and key, the whole stream."""
    import pandas as pd

    comp = _compiled(job)
    g = int(pdf["automaton"].iloc[0])
    automaton = CompositeAutomaton(comp.groups[g].plan, state_limit=comp.state_limit)
    found: list[CompositeMatch] = []
    for row in pdf.sort_values(["time_us", "source", "line"]).itertuples(index=False):
        found.extend(automaton.on_event(_stamped(comp, row), int(row.mask)))
    found.extend(automaton.on_time(_END))
    return pd.DataFrame(_rows_of(comp, g, found), columns=_OUT_COLS)


def composite_matches(df: DataFrame, schema: Schema, profiles: Sequence[CompositeProfile], *,
                      time_col: str | None = None, limits: EngineLimits | None = None
                      ) -> DataFrame:
    """Batch: the matches of ``profiles`` over the events of ``df`` (columns ``source``,
    ``line``, ``text`` and, for types without ``"@time"``, ``time_col`` in seconds)."""
    from pyspark.sql import functions as F

    job = CompositeJob.of(schema, profiles, limits)
    cols = ["source", "line", "text"] + ([time_col] if time_col else [])
    # Only events of the components' types can reach an automaton, and a batch has no
    # watermark to move: the others need not be parsed in Python at all.
    types = sorted({c.profile.type_name for p in profiles for c in p.components()})
    rows = (df.select(*cols).where(F.get_json_object("text", "$.type").isin(types))
            .mapInPandas(lambda it: component_rows(job, it, time_col), COMPONENT_DDL))
    return (rows.where("automaton >= 0").groupBy("automaton", "key")
            .applyInPandas(lambda pdf: run_group(job, pdf), OUTPUT_DDL))


# ---- Structured Streaming ---------------------------------------------------------------

STATE_DDL = "blob binary"


def run_group_streaming(job: CompositeJob, key: tuple[Any, ...],
                        pdfs: Iterable[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """The ``applyInPandasWithState`` body: the automaton and the rows waiting for the
    watermark are the group's state; rows before the watermark are evaluated in position
    order, windows that closed before it are closed, and the timeout is set to the next
    time the watermark must pass for more to happen."""
    import pandas as pd

    comp = _compiled(job)
    g = int(key[0])
    if g < 0:  # the watermark's rows of events that reach no automaton
        return
    if state.exists:
        automaton, waiting = pickle.loads(state.get[0])
    else:
        automaton, waiting = CompositeAutomaton(comp.groups[g].plan,
                                                state_limit=comp.state_limit), []
    if not state.hasTimedOut:
        for pdf in pdfs:
            waiting.extend((int(r.time_us), str(r.source), int(r.line), str(r.text),
                            int(r.mask)) for r in pdf.itertuples(index=False))
    wm = state.getCurrentWatermarkMs() * 1000
    waiting.sort()
    found: list[CompositeMatch] = []
    n = 0
    for t, src, line, text, mask in waiting:
        if t >= wm:
            break
        n += 1
        ev = StampedEvent(parse_event(text, comp.schema), t, (src, line))
        found.extend(automaton.on_event(ev, mask))
    waiting = waiting[n:]
    found.extend(automaton.on_time(wm))
    nexts = [d for d in (automaton.next_deadline(), waiting[0][0] if waiting else None)
             if d is not None]
    if not nexts and automaton.n_runs == 0:
        state.remove()
    else:
        state.update((pickle.dumps((automaton, waiting)),))
        if nexts:
            ms = -(-min(nexts) // 1000)  # fires once the watermark has passed it
            state.setTimeoutTimestamp(max(ms, state.getCurrentWatermarkMs() + 1))
    yield pd.DataFrame(_rows_of(comp, g, found), columns=_OUT_COLS)


def composite_stream(df: DataFrame, schema: Schema, profiles: Sequence[CompositeProfile], *,
                     lateness: float, time_col: str | None = None,
                     limits: EngineLimits | None = None) -> DataFrame:
    """Streaming: the matches of ``profiles`` over a streaming ``df`` (as for
    :func:`composite_matches`), evaluated as the watermark (``lateness`` seconds behind
    the newest event time) passes the events; rows later than that are dropped by
    Spark's watermark (its progress reports count them)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    job = CompositeJob.of(schema, profiles, limits)
    cols = ["source", "line", "text"] + ([time_col] if time_col else [])
    rows = (df.select(*cols)
            .mapInPandas(lambda it: component_rows(job, it, time_col), COMPONENT_DDL)
            .withWatermark("event_time", f"{int(lateness * 1000)} milliseconds"))
    return (rows.groupBy("automaton", "key")
            .applyInPandasWithState(
                lambda k, it, st: run_group_streaming(job, k, it, st), OUTPUT_DDL,
                STATE_DDL, "append", GroupStateTimeout.EventTimeTimeout))


__all__ = ["COMPONENT_DDL", "OUTPUT_DDL", "CompositeJob", "component_rows",
           "composite_matches", "composite_stream", "run_group", "run_group_streaming"]
